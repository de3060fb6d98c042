#!/usr/bin/env python3
"""Cold boot of a microVM: bare QEMU boot to the init against boot to agent-ready.

Both runs use the guest that scripts/microvm-guest builds and the same QEMU
device line as worker/microvm (virtio-serial channel, virtio-blk root disk):

  bare   spawn -> the first line the init writes on the serial console, with
         the initramfs's busybox echo as the init (rdinit=/bin/echo): the
         kernel's boot with nothing of airlock's;
  agent  spawn -> the agent's hello on the channel: /init loads the modules,
         mounts the ext4 root, switch_roots and starts airlock-guest.

Runs alternate, so that load from elsewhere falls on both. Usage:

  bench/microvm_boot_bench.py --agent build/guest/airlock-guest \
      [--cache /var/tmp/airlock-test-cache/microvm] [--runs 7] [--accel tcg]
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def host_tsc_khz():
    """The host's clock rate from /proc/cpuinfo: under TCG the guest's TSC runs at it."""
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("cpu MHz"):
                return int(float(line.split(":")[1]) * 1000)
    return 0


def build_guest(agent, cache):
    out = subprocess.run(
        [os.path.join(REPO, "scripts", "microvm-guest"), "--agent", agent, "--cache", cache],
        check=True, stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


def make_disk(work):
    tree = os.path.join(work, "tree")
    os.makedirs(os.path.join(tree, "bin"))
    for sub in ("etc", "proc", "sys", "dev", "run", "tmp"):
        os.makedirs(os.path.join(tree, sub))
    shutil.copy(shutil.which("busybox"), os.path.join(tree, "bin", "busybox"))
    os.symlink("busybox", os.path.join(tree, "bin", "sh"))
    disk = os.path.join(work, "root.ext4")
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0", "-d", tree, disk, "64M"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return disk


def qemu_line(guest, disk, channel_fd, accel, append):
    cpu = "max" if accel == "tcg" else "host,-arch-capabilities"
    return ["qemu-system-x86_64", "-M", "microvm,x-option-roms=off", "-accel", accel,
            "-cpu", cpu, "-m", "256", "-smp", "1", "-nodefaults", "-no-user-config",
            "-display", "none", "-no-reboot", "-bios", "/usr/share/qemu/qboot.rom",
            "-kernel", os.path.join(guest, "vmlinux"),
            "-initrd", os.path.join(guest, "initramfs.cpio"), "-append", append,
            "-device", "virtio-serial-device",
            "-chardev", "socket,id=channel,fd=%d" % channel_fd,
            "-device", "virtserialport,chardev=channel,name=airlock.channel",
            "-drive", "id=root,format=raw,if=none,file=" + disk,
            "-device", "virtio-blk-device,drive=root"]


def timed_boot(guest, disk, accel, append, bare, timeout_s=120):
    ours, theirs = socket.socketpair()
    os.set_inheritable(theirs.fileno(), True)
    line = qemu_line(guest, disk, theirs.fileno(), accel, append)
    start = time.monotonic()
    if bare:
        line += ["-serial", "stdio"]
        proc = subprocess.Popen(line, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                pass_fds=[theirs.fileno()])
        seen = b""
        while b"BARE_INIT_RAN" not in seen:
            chunk = proc.stdout.read1(4096)
            if not chunk:
                raise RuntimeError("QEMU ended before the init wrote its line")
            seen += chunk
    else:
        line += ["-serial", "null"]
        proc = subprocess.Popen(line, stdin=subprocess.DEVNULL, pass_fds=[theirs.fileno()])
        ours.settimeout(timeout_s)
        if not ours.recv(4096):
            raise RuntimeError("the channel closed before the agent's hello")
    elapsed = time.monotonic() - start
    proc.kill()
    proc.wait()
    ours.close()
    theirs.close()
    return elapsed * 1000


def summary(name, values):
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
    return "%-22s median %6.0f ms  min %6.0f  p90 %6.0f  (n=%d)" % (
        name, statistics.median(values), values[0], p90, len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True)
    parser.add_argument("--cache", default="/var/tmp/airlock-test-cache/microvm")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--accel", choices=("tcg", "kvm"), default="tcg")
    args = parser.parse_args()
    guest = build_guest(args.agent, args.cache)
    append = "console=ttyS0 quiet reboot=t panic=-1 no_timer_check"
    if args.accel == "tcg":
        append += " tsc_early_khz=%d" % host_tsc_khz()
    with tempfile.TemporaryDirectory(prefix="airlock-microvm-bench") as work:
        disk = make_disk(work)
        bare, agent = [], []
        for _ in range(args.runs):
            bare.append(timed_boot(guest, disk, args.accel,
                                   append + " rdinit=/bin/echo -- BARE_INIT_RAN", True))
            agent.append(timed_boot(guest, disk, args.accel, append, False))
    print("guest %s, accel %s, load average %s" % (
        guest, args.accel, " ".join(open("/proc/loadavg").read().split()[:3])))
    print(summary("bare boot to init", bare))
    print(summary("boot to agent-ready", agent))
    print("agent-ready / bare (medians): %.2f" % (statistics.median(agent) / statistics.median(bare)))


if __name__ == "__main__":
    sys.exit(main())
