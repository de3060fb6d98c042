#!/usr/bin/env python3
"""An OCI image import through HTTP, side by side with `tar -x` of the same layers.

Writes an OCI image layout of about --mb MiB (two gzip layers of files of random bytes, so
the compression does not shrink them to nothing), starts `airlockd serve` on a fresh data
directory and, in one run:
  upload + build   PUT /v1/templates/{name}/archive?format=oci until the template.build
                   operation succeeded (the body streamed to the worker's spool, the layers
                   unpacked with their digests checked, the guest agent copied in, sealed)
  tar -x           `tar -xzf` of the same two layers, one after the other, into a directory
                   on the same btrfs file system (the raw primitive the import does the work
                   of, without digests, whiteouts or path checks)
p50 over --rounds rounds each, and MB/s of uncompressed image.

  sudo bench/template_bench.py --airlockd build/airlockd/airlockd [--mb 100] [--rounds 3]

Needs root. Everything it creates is removed at the end, and the data directory too.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

import benchlib

INSTANCE = "tplbench"


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer(files, size, seed):
    """A tar of `files` files of `size` random bytes each (deterministic per seed)."""
    buffer = io.BytesIO()
    block = hashlib.sha256(seed.encode()).digest()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(files):
            data = os.urandom(size)
            info = tarfile.TarInfo("data/%s/%05d.bin" % (seed, i))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("etc/" + seed)
        info.size = len(block)
        tar.addfile(info, io.BytesIO(block))
    return buffer.getvalue()


def write_image(directory, mb):
    """The OCI layout tar and the gzip layers, as files; the uncompressed bytes."""
    files_per_layer = max(1, mb * 2)  # 256 KiB files: 4 per MiB, split over two layers
    plain = [layer(files_per_layer, 256 << 10, name) for name in ("one", "two")]
    layers = [gzip.compress(p, compresslevel=1, mtime=0) for p in plain]
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                         "rootfs": {"type": "layers",
                                    "diff_ids": [digest(p) for p in plain]}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest(l), "size": len(l)} for l in layers]}).encode()
    index = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": digest(manifest), "size": len(manifest)}]}).encode()
    image = os.path.join(directory, "image.tar")
    with tarfile.open(image, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
                           ("index.json", index)] + [
                ("blobs/sha256/" + digest(b)[7:], b) for b in [config, manifest] + layers]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    layer_files = []
    for i, data in enumerate(layers):
        path = os.path.join(directory, "layer%d.tar.gz" % i)
        with open(path, "wb") as f:
            f.write(data)
        layer_files.append(path)
    return image, layer_files, sum(len(p) for p in plain)


def upload(url, key, name, image):
    started = time.monotonic()
    with open(image, "rb") as f:
        status, body = benchlib.request(url + "/v1/templates/%s/archive?format=oci" % name, "PUT",
                                        key, f, {"Content-Type": "application/octet-stream",
                                                 "Content-Length": str(os.path.getsize(image))})
    if status != 202:
        raise RuntimeError("PUT answered %d %s" % (status, body))
    op = benchlib.wait_operation(url, key, json.loads(body)["operation_id"])
    if op.get("state") != "succeeded":
        raise RuntimeError("the build failed: %s" % op.get("error"))
    return time.monotonic() - started


def tar_extract(layer_files, target):
    started = time.monotonic()
    os.makedirs(target)
    for path in layer_files:
        subprocess.run(["tar", "-xzf", path, "-C", target], check=True)
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--airlockd", default="build/airlockd/airlockd")
    parser.add_argument("--mb", type=int, default=100, help="image size in MiB (1..2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (1..20)")
    args = parser.parse_args()
    if not 1 <= args.mb <= 2000 or not 1 <= args.rounds <= 20:
        sys.exit("--mb must be 1..2000 and --rounds 1..20")
    airlockd = benchlib.airlockd_for("template_bench", args.airlockd)
    data_dir = tempfile.mkdtemp(prefix="airlock-template-bench-")
    figures = {"upload + build": [], "tar -x": []}
    try:
        image, layer_files, unpacked = write_image(data_dir, args.mb)
        serve, key, url = benchlib.start_serve(
            airlockd, data_dir, INSTANCE, "tb", "10.211.0.0/16", 860000000, 16384)
        try:
            # tar -x lands on the same btrfs file system as the import.
            scratch = os.path.join(data_dir, "serve", "rootfs", "bench-tar")
            for round_ in range(args.rounds):
                figures["upload + build"].append(upload(url, key, "bench-%d" % round_, image))
                target = "%s-%d" % (scratch, round_)
                figures["tar -x"].append(tar_extract(layer_files, target))
                shutil.rmtree(target, ignore_errors=True)
        finally:
            benchlib.stop_serve(serve, data_dir + "/serve", INSTANCE)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    mb = unpacked / float(1 << 20)
    print("image: %.0f MiB unpacked, %d rounds" % (mb, args.rounds))
    print("%-16s %10s %10s" % ("", "p50 s", "MiB/s"))
    for name, samples in figures.items():
        median = statistics.median(samples)
        print("%-16s %10.2f %10.1f" % (name, median, mb / median))
    print("upload + build p50 / tar -x p50: %.2f" % (statistics.median(figures["upload + build"])
                                                     / statistics.median(figures["tar -x"])))


if __name__ == "__main__":
    main()
