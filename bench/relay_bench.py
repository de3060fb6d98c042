#!/usr/bin/env python3
"""What the control plane's relay of a data-plane download or upload costs, side by side.

Starts `airlockd control` and one `airlockd worker` (split mode, on loopback), creates a
sandbox, has it write a file of --mb MiB of random bytes (and its sha256), then downloads it
  relayed  through the control plane's listener with the API key (the control plane reads it
           from the worker chunk by chunk and streams it on), and
  direct   from the worker's data_url with a sandbox token (the raw path underneath),
and prints, for each, the time, the throughput and the peak RSS increase of the control plane
and of the worker while the download ran (VmHWM after resetting it with clear_refs).
With --upload it PUTs --mb MiB of pseudo-random bytes (made as they are sent, never held
whole) the same two ways instead, and checks each file's sha256 inside the sandbox.

  sudo bench/relay_bench.py --airlockd build/airlockd/airlockd [--mb 256] [--upload]
                            [--data-dir DIR]

Needs root (the worker makes namespaces, a btrfs image and nftables rules). Everything it
creates (processes, the instance's cgroups and nftables table, the loop mount) is removed at
the end, and the data directory too unless --keep.
"""

import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib
from benchlib import (OPERATION_S, STARTUP_S, call_json, daemon, request, reset_peak, rss_kib,
                      wait_until)

INSTANCE = "relaybench"


def download(url, key, pids):
    for pid in pids:
        reset_peak(pid)
    before = {pid: rss_kib(pid, "VmRSS") for pid in pids}
    digest = hashlib.sha256()
    received = [0]

    def sink(piece):
        digest.update(piece)
        received[0] += len(piece)

    started = time.monotonic()
    status, _ = request(url, key=key, sink=sink)
    elapsed = time.monotonic() - started
    if status != 200:
        raise RuntimeError("download answered %d" % status)
    peaks = {pid: rss_kib(pid, "VmHWM") - before[pid] for pid in pids}
    return received[0], elapsed, digest.hexdigest(), peaks


def upload(url, key, size, pids, seed):
    """PUTs `size` pseudo-random bytes made while they are sent; returns the time, their
    sha256 and the peak RSS increases."""
    for pid in pids:
        reset_peak(pid)
    before = {pid: rss_kib(pid, "VmRSS") for pid in pids}
    digest = hashlib.sha256()

    def pieces():
        rng = random.Random(seed)
        left = size
        while left > 0:
            piece = rng.randbytes(min(1 << 20, left))
            digest.update(piece)
            left -= len(piece)
            yield piece

    started = time.monotonic()
    status, answer = request(url, "PUT", key, pieces(),
                             {"Content-Length": str(size),
                              "Content-Type": "application/octet-stream"})
    elapsed = time.monotonic() - started
    if status != 201:
        raise RuntimeError("upload answered %d: %s" % (status, answer[:300]))
    peaks = {pid: rss_kib(pid, "VmHWM") - before[pid] for pid in pids}
    return elapsed, digest.hexdigest(), peaks


def run_in_sandbox(control_url, key, token, sandbox, cmd):
    """Runs `cmd` in the sandbox (busybox sh) and waits for it to exit."""
    status, started = call_json(control_url + "/v1/sandboxes/%s/processes" % sandbox, "POST",
                                key, {"cmd": cmd})
    if status not in (200, 201, 202):
        raise RuntimeError("exec answered %d: %s" % (status, started))
    wait_url = control_url + started["attach_url"][len(token["data_url"]):] + "?wait=60"
    wait_until("`%s` to finish" % cmd,
               lambda: call_json(wait_url, key=key)[1].get("state") == "exited", OPERATION_S)


def sandbox_sha256(control_url, key, token, sandbox, path):
    run_in_sandbox(control_url, key, token, sandbox, "sha256sum %s > %s.sha" % (path, path))
    status, line = request(control_url + "/v1/sandboxes/%s/files?path=%s.sha" % (sandbox, path),
                           key=key)
    if status != 200:
        raise RuntimeError("no sha256 of %s: %d %s" % (path, status, line[:300]))
    return line.split()[0].decode()


def measure_uploads(args, control_url, key, token, sandbox, pids):
    size = args.mb << 20
    print("upload of %d MiB, peak RSS increase while it ran (VmHWM - VmRSS before)" % args.mb)
    print("%-8s %10s %10s %16s %16s %s" % ("path", "seconds", "MiB/s", "control +MiB",
                                          "worker +MiB", "sha256 ok"))
    for seed, (name, base, credential) in enumerate((("relayed", control_url, key),
                                                     ("direct", token["data_url"],
                                                      token["token"]))):
        path = "/tmp/upload-%s.bin" % name
        url = base + "/v1/sandboxes/%s/files?path=%s" % (sandbox, path)
        elapsed, digest, peaks = upload(url, credential, size, pids, seed)
        stored = sandbox_sha256(control_url, key, token, sandbox, path)
        run_in_sandbox(control_url, key, token, sandbox, "rm -f %s" % path)
        print("%-8s %10.2f %10.1f %16.1f %16.1f %s" % (
            name, elapsed, args.mb / elapsed, peaks[pids[0]] / 1024.0,
            peaks[pids[1]] / 1024.0, "yes" if digest == stored else "NO"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--airlockd", default="build/airlockd/airlockd")
    parser.add_argument("--mb", type=int, default=256, help="file size in MiB (at most 256)")
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument("--upload", action="store_true",
                        help="measure uploads (PUT) instead of downloads")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("relay_bench needs root: the worker makes namespaces, btrfs and nftables rules")
    if not 1 <= args.mb <= 256:
        sys.exit("--mb must be 1..256 (the data plane's file_bytes_max is 256 MiB)")
    airlockd = os.path.abspath(args.airlockd)
    if not os.access(airlockd, os.X_OK):
        sys.exit("no airlockd at %s: build it first (cmake --build build)" % airlockd)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="airlock-relay-bench-")
    control = worker = None
    try:
        control = daemon([airlockd, "control", "--data-dir", data_dir + "/control",
                          "--listen", "127.0.0.1:0", "--cluster-listen", "127.0.0.1:0"],
                         data_dir + "/control.log")
        found = control.wait_for({"key": r"admin key: (\S+)",
                                  "port": r"listening on 127\.0\.0\.1:(\d+)",
                                  "cluster": r"cluster listening on 127\.0\.0\.1:(\d+)"})
        key, control_url = found["key"], "http://127.0.0.1:" + found["port"]
        status, token = call_json(control_url + "/v1/cluster/tokens", "POST", key, {})
        if status != 201:
            raise RuntimeError("token create answered %d: %s" % (status, token))
        join_started = time.monotonic()
        worker = daemon([airlockd, "worker", "--join", "127.0.0.1:" + found["cluster"],
                         "--token", token["token"], "--control-url", control_url,
                         "--data-dir", data_dir + "/worker", "--data-listen", "127.0.0.1:0",
                         "--name", INSTANCE, "--instance", INSTANCE, "--veth-prefix", "rb",
                         "--address-pool", "10.207.0.0/16", "--uid-base", "820000000",
                         "--image-size-mb", "4096"], data_dir + "/worker.log")
        worker.wait_for({"port": r"listening on 127\.0\.0\.1:(\d+)"})
        wait_until("the worker to join", lambda: any(
            w.get("state") == "ready"
            for w in (call_json(control_url + "/v1/workers", key=key)[1] or {}).get("items", [])),
                   STARTUP_S)
        print("worker joined (token, CSR, certificate, mutual TLS, registration) in %.0f ms "
              "from its start" % ((time.monotonic() - join_started) * 1000))
        # The direct path is the worker's TLS data listener: trust the cluster's worker CA.
        status, ca_pem = request(control_url + "/v1/cluster/ca", key=key)
        if status != 200:
            sys.exit("GET /v1/cluster/ca answered %d" % status)
        benchlib.trust(ca_pem.decode())

        status, created = call_json(control_url + "/v1/sandboxes", "POST", key,
                                    {"template": "minimal", "cpu_millis": 100, "memory_mb": 256,
                                     "disk_mb": args.mb + 256})
        if status != 202:
            raise RuntimeError("create answered %d: %s" % (status, created))
        sandbox = created["sandbox_id"]
        op_url = control_url + "/v1/operations/" + created["operation_id"] + "?wait=60"
        wait_until("the sandbox to run",
                   lambda: call_json(op_url, key=key)[1].get("state") in
                   ("succeeded", "failed", "cancelled"), OPERATION_S)
        status, token = call_json(control_url + "/v1/sandboxes/%s/token" % sandbox, "POST", key,
                                  {"scope": "files", "ttl_s": 3600})
        if status != 201:
            raise RuntimeError("token answered %d: %s" % (status, token))

        pids = [control.process.pid, worker.process.pid]
        if args.upload:
            measure_uploads(args, control_url, key, token, sandbox, pids)
            call_json(control_url + "/v1/sandboxes/" + sandbox, "DELETE", key)
            return

        # The file is made inside the sandbox (busybox), so the bench never holds it.
        size = args.mb << 20
        status, started = call_json(
            control_url + "/v1/sandboxes/%s/processes" % sandbox, "POST", key,
            {"cmd": "head -c %d /dev/urandom > /tmp/relay.bin && "
                    "sha256sum /tmp/relay.bin > /tmp/relay.sha" % size})
        if status not in (200, 201, 202):
            raise RuntimeError("exec answered %d: %s" % (status, started))
        wait_url = control_url + started["attach_url"][len(token["data_url"]):] + "?wait=60"
        wait_until("the file to be written",
                   lambda: call_json(wait_url, key=key)[1].get("state") == "exited", OPERATION_S)
        files = "/v1/sandboxes/%s/files?path=/tmp/relay.bin" % sandbox
        status, digest_line = request(control_url + files.replace("relay.bin", "relay.sha"),
                                      key=key)
        if status != 200:
            raise RuntimeError("the file was not written: %d %s" % (status, digest_line[:300]))
        expected = digest_line.split()[0].decode()

        print("download of %d MiB, peak RSS increase while it ran (VmHWM - VmRSS before)" %
              args.mb)
        print("%-8s %10s %10s %16s %16s %s" % ("path", "seconds", "MiB/s", "control +MiB",
                                              "worker +MiB", "sha256 ok"))
        for name, url, credential in (("relayed", control_url + files, key),
                                      ("direct", token["data_url"] + files, token["token"])):
            got, elapsed, digest, peaks = download(url, credential, pids)
            print("%-8s %10.2f %10.1f %16.1f %16.1f %s" % (
                name, elapsed, got / (1 << 20) / elapsed, peaks[pids[0]] / 1024.0,
                peaks[pids[1]] / 1024.0, "yes" if digest == expected and got == size else "NO"))
        call_json(control_url + "/v1/sandboxes/" + sandbox, "DELETE", key)
    finally:
        for child in (worker, control):
            if child:
                child.stop()
        mount_point = data_dir + "/worker/rootfs"
        if os.path.ismount(mount_point):
            subprocess.run(["umount", mount_point], stderr=subprocess.DEVNULL)
        benchlib.remove_instance_leftovers(INSTANCE)
        if not args.keep and not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
