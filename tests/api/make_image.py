#!/usr/bin/env python3
"""Writes the image archives the template API tests upload.

  make_image.py oci OUT       an OCI image layout (two layers: the second one
                              deletes a file with a whiteout and empties a
                              directory with an opaque whiteout), as a tar
  make_image.py docker OUT    the same image as `docker save` writes it
  make_image.py escape OUT    a root filesystem tar with a "../" entry
  make_image.py device OUT    a root filesystem tar with a character device

The first layer holds a static busybox (the host's /bin/busybox), a symlink,
a hard link and a setuid file; the config sets Env, WorkingDir, Entrypoint
and Cmd.
"""
import gzip
import hashlib
import io
import json
import sys
import tarfile


def add_file(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar, name, mode=0o755):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    tar.addfile(info)


def add_link(tar, name, target, hard=False):
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    tar.addfile(info)


def tar_bytes(fill, compress=False):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        fill(tar)
    data = buffer.getvalue()
    return gzip.compress(data, mtime=0) if compress else data


def layer_one(tar):
    with open("/bin/busybox", "rb") as f:
        busybox = f.read()
    for d in ("bin", "etc", "opt", "opt/cache", "usr", "usr/bin", "data", "tmp"):
        add_dir(tar, d)
    add_file(tar, "bin/busybox", busybox, 0o755)
    for applet in ("sh", "cat", "echo", "ls", "sleep", "stat", "test", "wc", "env"):
        add_link(tar, "bin/" + applet, "busybox")
    add_file(tar, "etc/hello", b"layer one\n")
    add_file(tar, "etc/doomed", b"deleted by the second layer\n")
    add_file(tar, "opt/cache/old", b"emptied by the second layer\n")
    add_file(tar, "usr/bin/tool", b"#!/bin/sh\necho tool\n", 0o4755)
    add_file(tar, "data/original", b"linked\n")
    add_link(tar, "data/hard", "data/original", hard=True)


def layer_two(tar):
    add_file(tar, "etc/.wh.doomed", b"")
    add_dir(tar, "opt/cache")
    add_file(tar, "opt/cache/.wh..wh..opq", b"")
    add_file(tar, "opt/cache/new", b"from layer two\n")


CONFIG = {
    "architecture": "amd64",
    "os": "linux",
    "config": {
        "Env": ["GREETING=hello from the image", "PATH=/bin:/usr/bin"],
        "WorkingDir": "/opt",
        "Entrypoint": ["/bin/sh", "-c"],
        "Cmd": ["echo started >> /tmp/start-log; exec sleep 600"],
    },
    "rootfs": {"type": "layers", "diff_ids": []},
}


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def config_for(uncompressed_layers):
    config = dict(CONFIG)
    config["rootfs"] = {"type": "layers",
                        "diff_ids": [digest(layer) for layer in uncompressed_layers]}
    return json.dumps(config).encode()


def oci(out):
    plain = [tar_bytes(layer_one), tar_bytes(layer_two)]
    layers = [gzip.compress(plain[0], mtime=0), plain[1]]
    config = config_for(plain)
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": digest(config), "size": len(config)},
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
             "digest": digest(layers[0]), "size": len(layers[0])},
            {"mediaType": "application/vnd.oci.image.layer.v1.tar",
             "digest": digest(layers[1]), "size": len(layers[1])},
        ],
    }).encode()
    index = json.dumps({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": digest(manifest), "size": len(manifest)}],
    }).encode()

    def fill(tar):
        add_file(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add_file(tar, "index.json", index)
        add_dir(tar, "blobs")
        add_dir(tar, "blobs/sha256")
        for blob in [config, manifest] + layers:
            add_file(tar, "blobs/sha256/" + digest(blob)[7:], blob)
    with open(out, "wb") as f:
        f.write(tar_bytes(fill))


def docker(out):
    layers = [tar_bytes(layer_one), tar_bytes(layer_two)]
    config = config_for(layers)
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_names = ["%d/layer.tar" % i for i in range(len(layers))]
    manifest = json.dumps([{"Config": config_name, "RepoTags": ["test:latest"],
                            "Layers": layer_names}]).encode()

    def fill(tar):
        add_file(tar, "manifest.json", manifest)
        add_file(tar, config_name, config)
        for name, blob in zip(layer_names, layers):
            add_dir(tar, name.split("/")[0])
            add_file(tar, name, blob)
    with open(out, "wb") as f:
        f.write(tar_bytes(fill))


def escape(out):
    def fill(tar):
        add_dir(tar, "etc")
        add_file(tar, "../escaped-from-the-root", b"must never be written\n")
    with open(out, "wb") as f:
        f.write(tar_bytes(fill))


def device(out):
    def fill(tar):
        add_dir(tar, "dev")
        info = tarfile.TarInfo("dev/sda")
        info.type = tarfile.BLKTYPE
        info.devmajor, info.devminor = 8, 0
        tar.addfile(info)
    with open(out, "wb") as f:
        f.write(tar_bytes(fill))


if __name__ == "__main__":
    {"oci": oci, "docker": docker, "escape": escape, "device": device}[sys.argv[1]](sys.argv[2])
