#!/usr/bin/env python3
"""The official e2b SDK against airlock's own API, side by side: create + run + kill.

Starts `airlockd serve` on a fresh data directory, builds the `base` template (not measured),
installs the pinned npm `e2b` (tests/e2b_sdk/package.json and its lock) in a temporary
directory, and runs bench/e2b_sdk/sdk_bench.mjs, which times, interleaved, --rounds rounds of:
  e2b SDK      Sandbox.create('base'), commands.run('true'), kill(), with E2B_API_URL and
               E2B_SANDBOX_URL pointing at the daemon's /e2b and /e2b/envd
  airlock /v1  POST /v1/sandboxes + the operation's wait, POST .../processes with the same
               `/bin/bash -l -c true` the SDK sends + GET ?wait= until it exits, DELETE + wait
and prints p50, p90 and min of each and the SDK's extra at p50 (both clients are node's fetch
stack, so the difference is the E2B front's and the SDK's own cost).

  sudo bench/e2b_sdk_bench.py --airlockd build/airlockd/airlockd [--rounds 20]

Needs root, node >= 20.18.1 and npm with registry access. Everything it creates is removed.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import benchlib

INSTANCE = "sdkbench"
HERE = os.path.dirname(os.path.abspath(__file__))
SDK_PACKAGE = os.path.join(HERE, "..", "tests", "e2b_sdk")


def node_is_new_enough():
    try:
        version = subprocess.run(["node", "--version"], capture_output=True, text=True,
                                 check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return False, "no node"
    parts = [int(x) for x in re.findall(r"\d+", version)[:3]]
    return parts >= [20, 18, 1], version


def install_sdk(where):
    for name in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(SDK_PACKAGE, name), where)
    shutil.copy(os.path.join(HERE, "e2b_sdk", "sdk_bench.mjs"), where)
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=where,
                   check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--airlockd", default="build/airlockd/airlockd")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per path (4..500)")
    args = parser.parse_args()
    if not 4 <= args.rounds <= 500:
        sys.exit("--rounds must be 4..500")
    fit, version = node_is_new_enough()
    if not fit:
        sys.exit("the e2b SDK needs node >= 20.18.1 (found: %s)" % version)
    airlockd = benchlib.airlockd_for("e2b_sdk_bench", args.airlockd)
    data_dir = tempfile.mkdtemp(prefix="airlock-sdk-bench-")
    serve = None
    try:
        install_sdk(data_dir)
        serve, key, url = benchlib.start_serve(
            airlockd, data_dir, INSTANCE, "sk", "10.213.0.0/16", 880000000, 8192)
        # Builds base (the SDK runs commands with bash, which minimal lacks): not measured.
        status, body = benchlib.call_json(url + "/v1/sandboxes", "POST", key, {"template": "base"})
        if status != 202:
            raise RuntimeError("create base: %d %s" % (status, body))
        op = benchlib.wait_operation(url, key, body["operation_id"])
        if op.get("state") != "succeeded":
            raise RuntimeError("base did not build: %s" % op.get("error"))
        status, body = benchlib.call_json(url + "/v1/sandboxes/" + body["sandbox_id"], "DELETE",
                                          key)
        benchlib.wait_operation(url, key, body["operation_id"])
        env = dict(os.environ, E2B_API_URL=url + "/e2b", E2B_SANDBOX_URL=url + "/e2b/envd",
                   E2B_API_KEY=key, AIRLOCK_URL=url, ROUNDS=str(args.rounds), TEMPLATE="base")
        subprocess.run(["node", "sdk_bench.mjs"], cwd=data_dir, env=env, check=True)
    finally:
        if serve is not None:
            benchlib.stop_serve(serve, data_dir + "/serve", INSTANCE)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
