#!/usr/bin/env python3
"""Suspend, restore and fork through HTTP, side by side with the cold create they replace.

Starts `airlockd serve` on a fresh data directory and, in one run, through the HTTP API (each
figure is the POST plus the operation's wait until it ended):
  cold create   POST /v1/sandboxes {"template": "minimal"} until the sandbox runs
  suspend       POST /v1/sandboxes/{id}/suspend of a running sandbox (freeze, snapshot, release)
  restore       POST /v1/sandboxes/{id}/restore of that suspended sandbox until it runs again
  fork x10      POST /v1/sandboxes/{id}/fork {"count": 10}: one checkpoint, then ten sandboxes
  10 creates    ten cold creates sent at once, until all ten run
p50 and p90 over --rounds rounds (suspend and restore alternate on the same sandboxes; each
fork round forks a fresh sandbox and deletes its forks afterwards).

With --runtime microvm the sandboxes are microVMs (1 vCPU, 256 MiB; `serve --microvm on
--microvm-accel tcg`): a create is then a clone of the base machine the first VM left, and
suspend, restore and fork keep memory. One more figure sets that against what it replaces:
  boot create   a VM of a shape no base exists for (its memory differs), which boots its kernel

  sudo bench/snapshot_bench.py --airlockd build/airlockd/airlockd [--rounds 20] \
      [--runtime microvm --microvm-cache DIR --microvm-share-memory true|false]

Needs root. Everything it creates is removed at the end, and the data directory too.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

import benchlib

INSTANCE = "snapbench"


def p(samples, q):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def timed_operation(url, key, method, path, payload=None):
    """Seconds from the POST until its operation ended; the operation."""
    started = time.monotonic()
    status, body = benchlib.call_json(url + path, method, key, payload)
    if status != 202:
        raise RuntimeError("%s %s answered %d %s" % (method, path, status, body))
    op = benchlib.wait_operation(url, key, body["operation_id"])
    if op.get("state") != "succeeded":
        raise RuntimeError("%s %s failed: %s" % (method, path, op.get("error")))
    return time.monotonic() - started, op, body


SPEC = {"template": "minimal"}


def create(url, key, extra=None):
    took, _, body = timed_operation(url, key, "POST", "/v1/sandboxes", dict(SPEC, **(extra or {})))
    return took, body["sandbox_id"]


def delete(url, key, sandbox_id):
    timed_operation(url, key, "DELETE", "/v1/sandboxes/" + sandbox_id)


def creates_at_once(url, key, count):
    """Wall time of `count` creates sent together; their ids."""
    ids, errors = [], []

    def one():
        try:
            ids.append(create(url, key)[1])
        except RuntimeError as error:
            errors.append(error)
    threads = [threading.Thread(target=one) for _ in range(count)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - started
    if errors:
        raise errors[0]
    return took, ids


def vm_memory_kib(sandbox_ids):
    """(PSS, RSS) in KiB of each sandbox's QEMU (smaps_rollup): PSS splits a page that several
    VMs map (the base's RAM file) among them, so shared pages count once in a sum of PSS."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            if "qemu-system" not in cmdline or not any(i in cmdline for i in sandbox_ids):
                continue
            rollup = {}
            with open("/proc/%s/smaps_rollup" % pid) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 2 and parts[1].isdigit():
                        rollup[parts[0].rstrip(":")] = int(parts[1])
            found.append((rollup.get("Pss", 0), rollup.get("Rss", 0)))
        except OSError:
            continue
    return found


def run(airlockd, data_dir, rounds, serve_args):
    serve, key, url = benchlib.start_serve(
        airlockd, data_dir, INSTANCE, "sb", "10.209.0.0/16", 850000000, 8192, serve_args)
    names = ["cold create", "suspend", "restore", "fork x10", "10 creates"]
    if serve_args:
        names.append("boot create")
    figures = {name: [] for name in names}
    memory = []
    try:
        # Builds the template (and for VMs leaves the base): not measured.
        delete(url, key, create(url, key)[1])
        if serve_args:
            for shape in range(max(1, rounds // 4)):
                took, sandbox_id = create(url, key, {"memory_mb": 300 + shape})
                figures["boot create"].append(took)
                delete(url, key, sandbox_id)
        sandboxes = []
        for _ in range(rounds):
            took, sandbox_id = create(url, key)
            figures["cold create"].append(took)
            sandboxes.append(sandbox_id)
        for sandbox_id in sandboxes:
            figures["suspend"].append(
                timed_operation(url, key, "POST", "/v1/sandboxes/%s/suspend" % sandbox_id)[0])
            figures["restore"].append(
                timed_operation(url, key, "POST", "/v1/sandboxes/%s/restore" % sandbox_id)[0])
        for sandbox_id in sandboxes:
            delete(url, key, sandbox_id)
        for _ in range(max(1, rounds // 4)):
            _, source = create(url, key)
            took, op, _ = timed_operation(url, key, "POST", "/v1/sandboxes/%s/fork" % source,
                                          {"count": 10})
            figures["fork x10"].append(took)
            forks = op["result"]["sandbox_ids"]
            if len(forks) != 10:
                raise RuntimeError("a fork made %d sandboxes: %s" % (len(forks), op["result"]))
            for sandbox_id in forks + [source]:
                delete(url, key, sandbox_id)
            took, created = creates_at_once(url, key, 10)
            figures["10 creates"].append(took)
            if serve_args:
                # Ten clones of one base, idle once their create answered.
                memory.extend(vm_memory_kib(created))
            for sandbox_id in created:
                delete(url, key, sandbox_id)
    finally:
        benchlib.stop_serve(serve, data_dir + "/serve", INSTANCE)
    return figures, memory


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--airlockd", default="build/airlockd/airlockd")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per figure (4..500)")
    parser.add_argument("--runtime", choices=("namespace", "microvm"), default="namespace")
    parser.add_argument("--microvm-cache", default="/var/tmp/airlock-test-cache/microvm",
                        help="where the guest kernel and initramfs are built and kept")
    parser.add_argument("--microvm-share-memory", choices=("true", "false"), default="true",
                        help="serve's --microvm-share-memory: VMs of one base share its pages")
    args = parser.parse_args()
    if not 4 <= args.rounds <= 500:
        sys.exit("--rounds must be 4..500")
    airlockd = benchlib.airlockd_for("snapshot_bench", args.airlockd)
    serve_args = []
    if args.runtime == "microvm":
        SPEC.update({"runtime": "microvm", "cpu_millis": 1000, "memory_mb": 256})
        source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        serve_args = ["--microvm", "on", "--microvm-accel", "tcg",
                      "--microvm-cache", args.microvm_cache,
                      "--microvm-guest-script", source + "/scripts/microvm-guest",
                      "--microvm-share-memory", args.microvm_share_memory]
    data_dir = tempfile.mkdtemp(prefix="airlock-snapshot-bench-")
    try:
        figures, memory = run(airlockd, data_dir, args.rounds, serve_args)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    print("%-12s %8s %10s %10s" % ("through HTTP", "samples", "p50 ms", "p90 ms"))
    for name, samples in figures.items():
        print("%-12s %8d %10.1f %10.1f" % (name, len(samples), p(samples, 0.5), p(samples, 0.9)))
    if memory:
        pss = statistics.median(m[0] for m in memory) / 1024.0
        rss = statistics.median(m[1] for m in memory) / 1024.0
        available = 0
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) / 1024.0
        print("memory per idle VM (10 clones of one base, %d samples): PSS p50 %.1f MiB, "
              "RSS p50 %.1f MiB (RSS counts the shared base pages in every VM); "
              "MemAvailable %.0f MiB / PSS = %d VMs"
              % (len(memory), pss, rss, available, int(available / pss) if pss else 0))
    cold = statistics.median(figures["cold create"])
    if figures.get("boot create"):
        print("create (a clone of the base) p50 / boot create p50: %.2f"
              % (cold / statistics.median(figures["boot create"])))
    print("restore p50 / cold create p50: %.2f (target <= 1.2)"
          % (statistics.median(figures["restore"]) / cold))
    print("fork x10 p50 / 10 creates at once p50: %.2f; / 10 cold creates one after another "
          "(10 x cold p50): %.2f (target <= 1)"
          % (statistics.median(figures["fork x10"]) / statistics.median(figures["10 creates"]),
             statistics.median(figures["fork x10"]) / (10 * cold)))


if __name__ == "__main__":
    main()
