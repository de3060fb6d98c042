"""What the Python benchmarks share: HTTP calls to airlockd, an airlockd child process, bounded
waits, the process figures read from /proc, and removing what an instance left behind."""

import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.parse

STARTUP_S = 120
OPERATION_S = 300

# What https URLs (a worker's data listener) must chain to: set by trust().
_tls_context = None


def trust(ca_pem):
    """Trusts `ca_pem` (the cluster's worker CA, from GET /v1/cluster/ca) for https URLs."""
    global _tls_context
    _tls_context = ssl.create_default_context(cadata=ca_pem)


def request(url, method="GET", key="", body=None, headers=None, sink=None):
    """One HTTP request; returns (status, body bytes). With `sink`, the body is fed to it in
    pieces instead of being kept."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=OPERATION_S,
                                           context=_tls_context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=OPERATION_S)
    all_headers = dict(headers or {})
    if key:
        all_headers["Authorization"] = "Bearer " + key
    target = parts.path + ("?" + parts.query if parts.query else "")
    conn.request(method, target, body=body, headers=all_headers)
    response = conn.getresponse()
    if sink is None:
        data = response.read()
    else:
        data = b""
        while True:
            piece = response.read(1 << 20)
            if not piece:
                break
            sink(piece)
    conn.close()
    return response.status, data


def call_json(url, method="GET", key="", payload=None):
    body = None if payload is None else json.dumps(payload)
    status, data = request(url, method, key, body, {"Content-Type": "application/json"})
    return status, (json.loads(data) if data else None)


def wait_operation(url, key, operation_id):
    """The operation once it ended (GET ?wait= until it does, bounded)."""
    deadline = time.monotonic() + OPERATION_S
    while time.monotonic() < deadline:
        _, op = call_json("%s/v1/operations/%s?wait=60" % (url, operation_id), key=key)
        if op and op.get("state") in ("succeeded", "failed", "cancelled"):
            return op
    raise RuntimeError("operation %s did not end within %d s" % (operation_id, OPERATION_S))


class daemon:
    """An airlockd child whose stdout lines are read until what we need appears."""

    def __init__(self, argv, log_path):
        self.log = open(log_path, "wb")
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log)

    def wait_for(self, pattern):
        deadline = time.monotonic() + STARTUP_S
        found = {}
        while time.monotonic() < deadline:
            line = self.process.stdout.readline().decode(errors="replace").strip()
            if not line and self.process.poll() is not None:
                break
            for name, regex in pattern.items():
                match = re.match(regex, line)
                if match:
                    found[name] = match.group(1)
            if len(found) == len(pattern):
                return found
        raise RuntimeError("airlockd did not report %s; see %s" % (list(pattern), self.log.name))

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=600)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_serve(airlockd, data_dir, instance, veth_prefix, address_pool, uid_base,
                image_size_mb, extra=()):
    """`airlockd serve` on DATA_DIR/serve, an instance of its own on 127.0.0.1; once it
    reports its admin key and port: (the daemon, the key, its base URL)."""
    serve = daemon([airlockd, "serve", "--data-dir", data_dir + "/serve",
                    "--listen", "127.0.0.1:0", "--cli-config", data_dir + "/cli.json",
                    "--instance", instance, "--veth-prefix", veth_prefix,
                    "--address-pool", address_pool, "--uid-base", str(uid_base),
                    "--image-size-mb", str(image_size_mb), "--log-level", "warn"] + list(extra),
                   data_dir + "/serve.log")
    try:
        found = serve.wait_for({"key": r"admin key: (\S+)",
                                "port": r"listening on 127\.0\.0\.1:(\d+)"})
    except Exception:
        serve.stop()
        raise
    return serve, found["key"], "http://127.0.0.1:" + found["port"]


def airlockd_for(name, path):
    """Exits with a reason unless this runs as root and `path` is an airlockd binary; its
    absolute path."""
    if os.geteuid() != 0:
        sys.exit("%s needs root: sandboxes are namespaces, cgroups and veths" % name)
    airlockd = os.path.abspath(path)
    if not os.access(airlockd, os.X_OK):
        sys.exit("no airlockd at %s: build it first (cmake --build build)" % airlockd)
    return airlockd


def stop_serve(serve, serve_dir, instance):
    """Stops an `airlockd serve`, unmounts its btrfs image and removes what its instance left."""
    serve.stop()
    mount_point = serve_dir + "/rootfs"
    if os.path.ismount(mount_point):
        subprocess.run(["umount", mount_point], stderr=subprocess.DEVNULL)
    remove_instance_leftovers(instance)


def rss_kib(pid, field):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak(pid):
    # Writing 5 resets VmHWM to the current RSS (proc(5), clear_refs).
    with open("/proc/%d/clear_refs" % pid, "w") as refs:
        refs.write("5")


def wait_until(what, condition, bound_s):
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise RuntimeError("timed out waiting for " + what)


def remove_instance_leftovers(instance):
    """The instance's cgroups (every hierarchy) and nftables table."""
    for root in ["/sys/fs/cgroup"] + [os.path.join("/sys/fs/cgroup", d)
                                      for d in os.listdir("/sys/fs/cgroup")]:
        parent = os.path.join(root, instance)
        if not os.path.isdir(parent):
            continue
        dirs = [os.path.join(d, "") for d, _, _ in os.walk(parent)]
        for path in sorted(dirs, key=len, reverse=True):
            try:
                os.rmdir(path)
            except OSError:
                pass
    subprocess.run(["nft", "delete", "table", "inet", instance], stderr=subprocess.DEVNULL)
