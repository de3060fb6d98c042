#!/usr/bin/env python3
"""Create latency with a warm pool, side by side with a cold create and the HTTP floor.

Starts `airlockd serve` on a fresh data directory and, in one run, for 1 and 16 concurrent
clients (each client on its own keep-alive connection):
  GET /healthz      the HTTP round trip alone (the floor any create pays)
  bwrap             `bwrap --unshare-all --ro-bind / / true`: the bare namespace floor
  pool: 202         POST /v1/sandboxes answered, when a warm member of `minimal` fits
  pool: running     the same create until its operation succeeded (the claim recorded, the
                    worker told: env, egress, limits), read with GET /v1/operations/{id}?wait=
  cold: 202 / cold: running   the same two with no pool: a sandbox started from scratch
p50 and p90 in milliseconds over --creates creates per client count, and the pool's refill
time (a member's create to its being ready) from /metrics. Before each pooled batch
the pool is filled to at least the batch's size and waited for; sandboxes are deleted between
batches (not timed).

  sudo bench/pool_bench.py --airlockd build/airlockd/airlockd [--creates 64]

Needs root. Everything it creates is removed at the end, and the data directory too.
"""

import argparse
import http.client
import re
import subprocess
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time

import benchlib

INSTANCE = "poolbench"
SPEC = {"template": "minimal", "cpu_millis": 100, "memory_mb": 128}


class client:
    """One keep-alive connection with the admin key."""

    def __init__(self, port, key):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=benchlib.OPERATION_S)
        self.headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def call(self, method, path, payload=None):
        body = None if payload is None else json.dumps(payload)
        self.conn.request(method, path, body=body, headers=self.headers)
        response = self.conn.getresponse()
        data = response.read()
        return response.status, (json.loads(data) if data else None)


def percentile(samples, fraction):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def batch(port, key, clients, creates, what):
    """`creates` calls of `what` spread over `clients` threads; per call (ms to answer, ms to
    done, sandbox id or None)."""
    results = []
    lock = threading.Lock()
    per_client = [creates // clients + (1 if i < creates % clients else 0) for i in range(clients)]

    def run(count):
        c = client(port, key)
        for _ in range(count):
            started = time.monotonic()
            if what == "bwrap":
                subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"],
                               check=True)
                status, answered = 200, time.monotonic()
                done, sandbox = answered, None
            elif what == "healthz":
                status, _ = c.call("GET", "/healthz")
                answered = time.monotonic()
                done, sandbox = answered, None
            else:
                status, body = c.call("POST", "/v1/sandboxes", SPEC)
                answered = time.monotonic()
                if status != 202:
                    raise RuntimeError("create answered %d %s" % (status, body))
                sandbox = body["sandbox_id"]
                while True:
                    _, op = c.call("GET", "/v1/operations/%s?wait=60" % body["operation_id"])
                    if op["state"] in ("succeeded", "failed", "cancelled"):
                        break
                if op["state"] != "succeeded":
                    raise RuntimeError("create failed: %s" % op.get("error"))
                done = time.monotonic()
            with lock:
                results.append(((answered - started) * 1000, (done - started) * 1000, sandbox))

    threads = [threading.Thread(target=run, args=(n,)) for n in per_client if n > 0]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(results) != creates:
        raise RuntimeError("%d of %d calls finished" % (len(results), creates))
    return results


def delete_all(url, key, ids):
    ops = []
    for sandbox in ids:
        status, body = benchlib.call_json(url + "/v1/sandboxes/" + sandbox, "DELETE", key)
        if status == 202:
            ops.append(body["operation_id"])
    for op in ops:
        benchlib.wait_operation(url, key, op)


def fill_pool(url, key, size):
    status, body = benchlib.call_json(url + "/v1/templates/minimal/pool", "PUT", key,
                                      {"size": size, "cpu_millis": SPEC["cpu_millis"],
                                       "memory_mb": SPEC["memory_mb"]})
    if status != 200:
        raise RuntimeError("pool answered %d %s" % (status, body))

    def full():
        _, pool = benchlib.call_json(url + "/v1/templates/minimal/pool", key=key)
        return pool["ready"] >= size

    benchlib.wait_until("the pool to fill", full, benchlib.OPERATION_S)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--airlockd", default="build/airlockd/airlockd")
    parser.add_argument("--creates", type=int, default=64, help="creates per figure (16..256)")
    args = parser.parse_args()
    if not 16 <= args.creates <= 256:
        sys.exit("--creates must be 16..256")
    airlockd = benchlib.airlockd_for("pool_bench", args.airlockd)
    data_dir = tempfile.mkdtemp(prefix="airlock-pool-bench-")
    rows = []
    refills = []
    try:
        serve, key, url = benchlib.start_serve(
            airlockd, data_dir, INSTANCE, "pb", "10.212.0.0/16", 870000000, 16384)
        try:
            port = int(url.rsplit(":", 1)[1])
            # The template is built on first use: not part of any figure.
            warm = batch(port, key, 1, 1, "create")
            delete_all(url, key, [r[2] for r in warm])
            for clients in (1, 16):
                creates = args.creates if clients > 1 else max(16, args.creates // 2)
                floor = batch(port, key, clients, creates, "healthz")
                rows.append(("GET /healthz", clients, [r[0] for r in floor], None))
                bare = batch(port, key, clients, creates, "bwrap")
                rows.append(("bwrap", clients, [r[0] for r in bare], None))
                # Pooled: in rounds no bigger than the pool, refilled between rounds.
                pool_size = min(creates, 32)
                pooled = []
                while len(pooled) < creates:
                    fill_pool(url, key, pool_size)
                    round_ = batch(port, key, clients, min(pool_size, creates - len(pooled)),
                                   "create")
                    pooled += round_
                    delete_all(url, key, [r[2] for r in round_])
                fill_pool(url, key, 0)
                _, pool = benchlib.call_json(url + "/v1/templates/minimal/pool", key=key)
                rows.append(("pool", clients, [r[0] for r in pooled], [r[1] for r in pooled]))
                rows[-1] += (pool["hits_total"], pool["misses_total"])
                _, figures = benchlib.request(url + "/metrics", key=key)
                cold = batch(port, key, clients, creates, "create")
                delete_all(url, key, [r[2] for r in cold])
                rows.append(("cold", clients, [r[0] for r in cold], [r[1] for r in cold]))
                refill = {m.group(1): float(m.group(2)) for m in re.finditer(
                    r'airlock_pool_refill_seconds_(sum|count)\{template="minimal"\} (\S+)',
                    figures.decode())}
                refills.append((clients, refill.get("count", 0), refill.get("sum", 0)))
        finally:
            benchlib.stop_serve(serve, data_dir + "/serve", INSTANCE)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    print("%-14s %7s %7s %9s %9s %11s %11s" % ("", "clients", "calls", "202 p50", "202 p90",
                                              "running p50", "running p90"))
    for row in rows:
        name, clients, answered, done = row[:4]
        line = "%-14s %7d %7d %9.1f %9.1f" % (name, clients, len(answered),
                                              statistics.median(answered),
                                              percentile(answered, 0.9))
        if done is not None:
            line += " %11.1f %11.1f" % (statistics.median(done), percentile(done, 0.9))
        if len(row) > 4:
            line += "   (pool hits %d, misses %d so far)" % (row[4], row[5])
        print(line)
    for clients, count, total in refills:
        if count:
            print("refills so far (after the %d-client rounds): %d, mean %.0f ms each"
                  % (clients, count, total / count * 1000))


if __name__ == "__main__":
    main()
