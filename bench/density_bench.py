#!/usr/bin/env python3
"""How many idle sandboxes one host runs, and what each costs, beside the bare namespaces.

Starts `airlockd serve` on a fresh data directory and creates sandboxes with default
parameters (only the template is named) through HTTP, one after another, until --count run
or the platform refuses. Then, in the same run, it makes the same number of bare namespaces
(`unshare` of user-less net, pid, mount, uts and ipc namespaces running `sleep`, each with a
veth pair): the floor that airlock's sandboxes are built on. For each it prints, at 10, 100,
500 and 1,000 running:
  create p50   of the 10 creates that brought the count there (HTTP create + operation wait
               for airlock; unshare + veth for the floor), in ms
  MiB each     host memory in use (as `free` counts it, once settled, caches dropped) over
               the count, per sandbox
  airlockd     the daemon's RSS (MiB) and open descriptors

  sudo bench/density_bench.py --airlockd build/airlockd/airlockd [--count 1000]

Needs root. Everything it creates (processes, cgroups, nftables table, veths, the loop mount)
is removed at the end, and the data directory too unless --keep.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib

INSTANCE = "densbench"
CHECKPOINTS = (10, 100, 500, 1000)


def checkpoints(count):
    """The counts a row is printed for: the fixed ones up to `count`, and `count` itself."""
    return sorted({n for n in CHECKPOINTS if n <= count} | {count})


def mem_used_mib():
    """Host memory in use once it has settled, as `free` counts it (not page cache).

    Drops clean caches first, then waits (bounded) until two readings a second apart agree
    within 2 MiB: namespaces and veths from an earlier phase are freed by the kernel some time
    after their processes are gone, and would otherwise be counted against this one."""
    def used():
        fields = {}
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                name, value = line.split(":", 1)
                fields[name] = int(value.split()[0])
        return (fields["MemTotal"] - fields["MemFree"] - fields["Buffers"] - fields["Cached"]
                - fields["SReclaimable"]) / 1024.0
    with open("/proc/sys/vm/drop_caches", "w") as drop:
        drop.write("3\n")
    last = used()
    for _ in range(30):
        time.sleep(1.0)
        now = used()
        if abs(now - last) < 2.0:
            return now
        last = now
    return last


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def p50_ms(samples):
    return statistics.median(samples) * 1000.0 if samples else float("nan")


def airlock_run(airlockd, data_dir, count):
    """Creates sandboxes until `count` run or one is refused; returns the checkpoint rows and
    why it stopped."""
    serve, key, url = benchlib.start_serve(
        airlockd, data_dir, INSTANCE, "db", "10.208.0.0/16", 840000000, 32768,
        ["--sandboxes-max", str(count)])
    rows = {}
    stopped = "reached %d" % count
    try:
        pid = serve.process.pid
        before = mem_used_mib()
        latencies = []
        rows_at = checkpoints(count)
        for n in range(1, count + 1):
            started = time.monotonic()
            status, created = benchlib.call_json(url + "/v1/sandboxes", "POST", key,
                                                 {"template": "minimal"})
            if status != 202:
                stopped = "refused at %d: %d %s" % (n, status, created)
                break
            op = benchlib.wait_operation(url, key, created["operation_id"])
            if op.get("state") != "succeeded":
                stopped = "failed at %d: %s" % (n, op.get("error"))
                break
            latencies.append(time.monotonic() - started)
            if n in rows_at:
                rows[n] = (p50_ms(latencies[-10:]), (mem_used_mib() - before) / n,
                           benchlib.rss_kib(pid, "VmRSS") / 1024.0, fd_count(pid))
                print("  airlock: %d running, create p50 %.1f ms" % (n, rows[n][0]), flush=True)
    finally:
        benchlib.stop_serve(serve, data_dir + "/serve", INSTANCE)
    return rows, stopped


def floor_run(count):
    """The same count of bare namespaces with a veth pair each."""
    rows = {}
    children = []
    before = mem_used_mib()
    latencies = []
    try:
        for n in range(1, count + 1):
            started = time.monotonic()
            # --kill-child: killing unshare must end the namespaces' sleep too, or they (and
            # their veths) outlive the run.
            child = subprocess.Popen(["unshare", "--net", "--pid", "--mount", "--uts", "--ipc",
                                      "--fork", "--kill-child", "sleep", "1000000"])
            children.append(child)
            # The namespaces exist once unshare's child runs sleep.
            netns = "/proc/%d/ns/net" % child.pid
            benchlib.wait_until("unshare to make its namespaces",
                                lambda: os.path.exists(netns) and
                                os.readlink(netns) != os.readlink("/proc/self/ns/net"), 30)
            host_end = "fl%x%05d" % (os.getpid() & 0xfff, n)  # unique to this run
            subprocess.run(["ip", "link", "add", host_end, "type", "veth", "peer", "name",
                            "eth0", "netns", str(child.pid)], check=True)
            latencies.append(time.monotonic() - started)
            if n in checkpoints(count):
                rows[n] = (p50_ms(latencies[-10:]), (mem_used_mib() - before) / n)
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.wait()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--airlockd", default="build/airlockd/airlockd")
    parser.add_argument("--count", type=int, default=1000, help="sandboxes to aim for (1..5000)")
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    if not 1 <= args.count <= 5000:
        sys.exit("--count must be 1..5000")
    airlockd = benchlib.airlockd_for("density_bench", args.airlockd)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="airlock-density-bench-")
    try:
        airlock_rows, stopped = airlock_run(airlockd, data_dir, args.count)
        floor_rows = floor_run(args.count)
    finally:
        if not args.keep and not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    print("airlock: %s" % stopped)
    print("%8s %16s %16s %14s %14s %14s %13s" % (
        "running", "create p50 ms", "floor p50 ms", "MiB each", "floor MiB each",
        "airlockd MiB", "airlockd fds"))
    for n in checkpoints(args.count):
        ours = airlock_rows.get(n)
        floor = floor_rows.get(n)
        print("%8d %16s %16s %14s %14s %14s %13s" % (
            n,
            "%.1f" % ours[0] if ours else "-", "%.1f" % floor[0] if floor else "-",
            "%.2f" % ours[1] if ours else "-", "%.2f" % floor[1] if floor else "-",
            "%.1f" % ours[2] if ours else "-", "%d" % ours[3] if ours else "-"))


if __name__ == "__main__":
    main()
