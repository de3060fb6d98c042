# The red team's tool, run as root inside a sandbox by egress_e2e_test.
# Each subcommand prints one line the test asserts on; it never raises.
import socket, ssl, struct, sys, os, base64

def out(text):
    print(text, flush=True)

def first_line(data):
    return data.split(b"\r\n", 1)[0].decode(errors="replace") if data else "closed"

def recv_all(sock, limit=65536):
    data = b""
    try:
        while len(data) < limit:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                head, _, rest = data.partition(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        if len(rest) >= int(line.split(b":")[1]):
                            return data
    except Exception:
        pass
    return data

def tls_request(sni, host, path, ip="198.51.100.10", port=443):
    ctx = ssl.create_default_context()
    if sni is None:
        ctx.check_hostname = False
    try:
        raw = socket.create_connection((ip, port), timeout=10)
        tls = ctx.wrap_socket(raw, server_hostname=sni)
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = recv_all(tls)
        out(first_line(data) + " | " + data.split(b"\r\n\r\n", 1)[-1][:400].decode(errors="replace"))
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def client_hello(name):
    # A TLS 1.2 ClientHello carrying `name` as its SNI, whatever it is.
    sni = name.encode()
    server_name = struct.pack("!BH", 0, len(sni)) + sni
    ext = struct.pack("!HH", 0, len(server_name) + 2) + struct.pack("!H", len(server_name)) + server_name
    body = b"\x03\x03" + os.urandom(32) + b"\x00" + struct.pack("!H", 2) + b"\xc0\x2f" + b"\x01\x00"
    body += struct.pack("!H", len(ext)) + ext
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs

def raw(ip, port, data):
    try:
        s = socket.create_connection((ip, int(port)), timeout=10)
        s.sendall(data)
        out(first_line(recv_all(s)))
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def websocket(host):
    try:
        ctx = ssl.create_default_context()
        raw_sock = socket.create_connection((host, 443), timeout=10)
        tls = ctx.wrap_socket(raw_sock, server_hostname=host)
        key = base64.b64encode(os.urandom(16)).decode()
        tls.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = tls.recv(1)
            if not chunk:
                break
            head += chunk
        payload = b"ping-through-the-gateway"
        frame = b"\x81" + bytes([0x80 | len(payload)]) + b"\0\0\0\0" + payload  # masked with a zero key
        tls.sendall(frame)
        echoed = b""
        while len(echoed) < len(frame):
            chunk = tls.recv(4096)
            if not chunk:
                break
            echoed += chunk
        out(first_line(head) + " | echo=" + str(echoed == frame))
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def read_head_and_rest(sock):
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except Exception:
        pass
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest

def read_until_quiet(sock, seconds=3):
    data = b""
    sock.settimeout(seconds)
    try:
        while len(data) < 1 << 20:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except Exception:
        pass
    return data

def h2_frame(kind, flags, stream, payload):
    return struct.pack("!I", len(payload))[1:] + bytes([kind, flags]) + struct.pack("!I", stream) + payload

def hpack_literal(name, value):
    # Literal header field without indexing, new name, no Huffman coding.
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v

def h2_data(data):
    # The DATA payloads of a run of HTTP/2 frames, in order.
    bodies, at = b"", 0
    while at + 9 <= len(data):
        length = int.from_bytes(data[at:at + 3], "big")
        if data[at + 3] == 0:
            bodies += data[at + 9:at + 9 + length]
        at += 9 + length
    return bodies.decode(errors="replace").replace("\n", " ")

def h2c(ip, allowed, forbidden):
    # The bypass: an h2c upgrade judged as one request for `allowed`, then
    # HTTP/2 on the same connection asking for `forbidden`.
    try:
        s = socket.create_connection((ip, 80), timeout=10)
        s.sendall((f"GET / HTTP/1.1\r\nHost: {allowed}\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                   "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n").encode())
        head, rest = read_head_and_rest(s)
        status = first_line(head)
        if status.startswith("HTTP/1.1 101"):
            first = h2_data(rest + read_until_quiet(s, 1))
        else:
            first = rest.decode(errors="replace").replace("\n", " ")
        request = (hpack_literal(":method", "GET") + hpack_literal(":scheme", "http")
                   + hpack_literal(":path", "/") + hpack_literal(":authority", forbidden))
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"")
                  + h2_frame(1, 0x5, 3, request))
        after = read_until_quiet(s)
        if status.startswith("HTTP/1.1 101"):
            second = h2_data(after)
        else:
            second = first_line(after)
        out(f"{status} | first={first} | second={second}")
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def switch(ip, host, websocket):
    # Asks for /switch, where the upstream answers 101 for h2c whatever was
    # asked, then checks whether bytes still flow both ways.
    try:
        s = socket.create_connection((ip, 80), timeout=10)
        ask = f"GET /switch HTTP/1.1\r\nHost: {host}\r\n"
        if websocket:
            key = base64.b64encode(os.urandom(16)).decode()
            ask += (f"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: {key}\r\n"
                    "Sec-WebSocket-Version: 13\r\n")
        s.sendall((ask + "\r\n").encode())
        head, rest = read_head_and_rest(s)
        try:
            s.sendall(b"bytes-after-the-switch")
        except Exception:
            pass
        echoed = b"bytes-after-the-switch" in rest + read_until_quiet(s)
        out(first_line(head) + " | echoed=" + str(echoed))
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def udp(ip, port):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(3):
            s.sendto(b"\x00quic-or-udp-probe", (ip, int(port)))
        out("sent")
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF

def dns_query(name, qtype=1):
    q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack("!HH", qtype, 1)

def spoof(src, dst, name):
    # A DNS query in a raw IPv4 packet with a forged source address.
    try:
        payload = dns_query(name)
        udp_header = struct.pack("!HHHH", 40000, 53, 8 + len(payload), 0)
        total = 20 + len(udp_header) + len(payload)
        ip_header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 1, 0, 64, 17, 0,
                                socket.inet_aton(src), socket.inet_aton(dst))
        ip_header = ip_header[:10] + struct.pack("!H", checksum(ip_header)) + ip_header[12:]
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
        for _ in range(3):
            s.sendto(ip_header + udp_header + payload, (dst, 0))
        out("sent")
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def ipv6_frame():
    # An IPv6 packet written straight onto eth0 (no IPv6 stack needed).
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind(("eth0", 0))
        dst_mac = b"\xff" * 6
        src_mac = open("/sys/class/net/eth0/address").read().strip()
        src_mac = bytes(int(x, 16) for x in src_mac.split(":"))
        payload = b"ipv6-probe"
        udp_header = struct.pack("!HHHH", 40000, 443, 8 + len(payload), 0)
        ip6 = struct.pack("!IHBB", 0x60000000, len(udp_header) + len(payload), 17, 64)
        ip6 += socket.inet_pton(socket.AF_INET6, "2001:db8::2") + socket.inet_pton(socket.AF_INET6, "2001:db8::10")
        for _ in range(3):
            s.send(dst_mac + src_mac + b"\x86\xdd" + ip6 + udp_header + payload)
        out("sent")
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def lookup(name, server="", qtype=1):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.sendto(dns_query(name, qtype), (server or "8.8.8.8", 53))
        data = s.recv(4096)
        rcode = data[3] & 0x0F
        answers = struct.unpack("!H", data[6:8])[0]
        addrs = []
        if rcode == 0 and answers:
            # Walk past the question to read A records.
            at = 12
            while data[at] != 0:
                at += data[at] + 1
            at += 5
            for _ in range(answers):
                at += 2 if data[at] & 0xC0 == 0xC0 else 0
                rtype, _, _, size = struct.unpack("!HHIH", data[at:at + 10])
                at += 10
                if rtype == 1 and size == 4:
                    addrs.append(socket.inet_ntoa(data[at:at + 4]))
                at += size
        out(f"rcode={rcode} answers={','.join(addrs)}")
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def icmp_echo(ip):
    # An ICMP echo request from a raw socket (the base template has no ping).
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        s.settimeout(2)
        body = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1) + b"airlock-probe"
        body = body[:2] + struct.pack("!H", checksum(body)) + body[4:]
        s.sendto(body, (ip, 0))
        try:
            s.recv(1024)
            out("reply")
        except socket.timeout:
            out("no reply")
    except Exception as e:
        out("ERROR " + type(e).__name__ + ": " + str(e)[:200])

def my_address():
    # The source address the kernel picks (no packet is sent by connect()).
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(("198.51.100.10", 9))
    out(s.getsockname()[0])

def default_gateway():
    for line in open("/proc/net/route").read().splitlines()[1:]:
        fields = line.split()
        if fields[1] == "00000000":
            out(socket.inet_ntoa(struct.pack("<I", int(fields[2], 16))))
            return
    out("none")

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "tls":
    tls_request(args[0] if args[0] != "-" else None, args[1], args[2], *(args[3:4]))
elif cmd == "ipsni":
    raw("198.51.100.10", 443, client_hello(args[0]))
elif cmd == "raw":
    raw(args[0], args[1], args[2].encode().decode("unicode_escape").encode("latin-1"))
elif cmd == "ws":
    websocket(args[0])
elif cmd == "h2c":
    h2c(args[0], args[1], args[2])
elif cmd == "switch":
    switch(args[0], args[1], args[2] == "ws")
elif cmd == "udp":
    udp(args[0], args[1])
elif cmd == "spoof":
    spoof(args[0], args[1], args[2])
elif cmd == "ipv6":
    ipv6_frame()
elif cmd == "dns":
    lookup(args[0], args[1] if len(args) > 1 else "", int(args[2]) if len(args) > 2 else 1)
elif cmd == "ping":
    icmp_echo(args[0])
elif cmd == "myaddr":
    my_address()
elif cmd == "gateway":
    default_gateway()
else:
    out("unknown command")
