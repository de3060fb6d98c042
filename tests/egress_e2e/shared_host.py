# A shared host for the egress end-to-end tests: one address serving several
# names (a CDN edge, shared hosting), with HTTP/1.1 and cleartext HTTP/2 by
# upgrade (h2c, RFC 7540 section 3.2) through Debian's python3-h2. Runs in
# the test world's network namespace: shared_host.py ADDRESS PORT.
#
#   any path, HTTP/1.1      200 "content of HOST" + the request's header names
#   Upgrade: h2c            101, then HTTP/2: every stream answered by its
#                           :authority ("content of evil.test" for evil.test)
#   /switch                 101 "Upgrade: h2c" whatever was asked (a rogue
#                           switch), then echoes raw bytes back
import socket
import socketserver
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def read_head(sock, buffer):
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(4096)
        if not chunk:
            return None, buffer
        buffer += chunk
        if len(buffer) > 65536:
            return None, buffer
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = (lines[0].split(" ") + ["", "", ""])[:3]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or "0")
    while len(rest) < length:
        chunk = sock.recv(4096)
        if not chunk:
            return None, rest
        rest += chunk
    return (method, path, headers), rest[length:]


def content(host, names):
    return f"content of {host}; headers={','.join(sorted(names))}\n".encode()


def answer_http2(conn, stream_id, host):
    body = content(host, [])
    conn.send_headers(stream_id, [(":status", "200"), ("content-length", str(len(body)))])
    conn.send_data(stream_id, body, end_stream=True)


def serve_h2c(sock, request, rest):
    _, _, headers = request
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    conn.initiate_upgrade_connection(headers.get("http2-settings", ""))
    sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
    answer_http2(conn, 1, headers.get("host", "?"))  # the upgraded request is stream 1
    sock.sendall(conn.data_to_send())
    data = rest
    while True:
        if data:
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    fields = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                              for k, v in event.headers}
                    answer_http2(conn, event.stream_id, fields.get(":authority", "?"))
            sock.sendall(conn.data_to_send())
        data = sock.recv(65536)
        if not data:
            return


class handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        sock.settimeout(30)
        buffer = b""
        try:
            while True:
                request, buffer = read_head(sock, buffer)
                if request is None:
                    return
                method, path, headers = request
                if path == "/switch":
                    sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
                    if buffer:
                        sock.sendall(buffer)
                    while True:
                        data = sock.recv(65536)
                        if not data:
                            return
                        sock.sendall(data)
                if headers.get("upgrade", "").lower() == "h2c":
                    serve_h2c(sock, request, buffer)
                    return
                body = content(headers.get("host", "?"), headers.keys())
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
        except (OSError, h2.exceptions.ProtocolError):
            return


class server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    with server((sys.argv[1], int(sys.argv[2])), handler) as s:
        print("ready", flush=True)
        s.serve_forever()
