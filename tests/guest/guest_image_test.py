#!/usr/bin/env python3
"""Tests of the QEMU guest image (guest/build-image), registered by
tests/guest/CMakeLists.txt with the ctest label "guest".

    guest_image_test.py boot [--qemu PATH] [--timeout S]
        Boots the image under TCG with a run script on a 9p share and checks
        the init contract (MPRDMA-READY, MPRDMA-RUN-EXIT 0) and that Debian's
        ibverbs-utils and perftest run against the image's rdma-core v55.
    guest_image_test.py reproducible
        Rebuilds every stage (not the downloads) into a scratch cache and
        requires byte-identical vmlinux and initramfs.cpio.
"""

import argparse
import hashlib
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.environ.get("MPRDMA_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
BUILD_IMAGE = os.path.join(ROOT, "guest", "build-image")

# Runs inside the guest from the 9p share; its exit status is the number of
# failed checks (reported by init as MPRDMA-RUN-EXIT <n>).
RUN_SCRIPT = r"""#!/bin/sh
failed=0
check() {
	if [ "$2" = ok ]; then echo "CHECK ok   $1"; else echo "CHECK FAIL $1: $2"; failed=$((failed + 1)); fi
}
out=$(ibv_devices 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] && check ibv_devices ok || check ibv_devices "exit status $rc"

# perftest against the image's libibverbs: a missing library or symbol
# version would stop the loader before the usage text.
line=$(ib_write_bw --help 2>&1 | head -1)
echo "ib_write_bw --help: $line"
case "$line" in Usage:*) check ib_write_bw_help ok ;; *) check ib_write_bw_help "first line '$line'" ;; esac

lib=$(readlink /usr/lib/x86_64-linux-gnu/libibverbs.so.1)
[ "$lib" = libibverbs.so.1.14.55.0 ] && check libibverbs_v55 ok || check libibverbs_v55 "libibverbs.so.1 -> $lib"

[ "$(hostname)" = "$EXPECT_HOSTNAME" ] && check hostname ok || check hostname "$(hostname)"
ip -4 addr show dev eth0 | grep -q "inet $EXPECT_IP/" && check eth0_address ok || check eth0_address "$(ip -4 addr show dev eth0)"
for m in ib_core ib_uverbs; do
	grep -q "^$m " /proc/modules && check "module_$m" ok || check "module_$m" "not loaded"
done
[ -c /dev/infiniband/uverbs0 ] || [ -d /sys/class/infiniband_verbs ] && check uverbs_class ok || check uverbs_class "no /sys/class/infiniband_verbs"

# Soft-RoCE through the image's module closure and rdma-core v55's rxe
# provider: a real device that libibverbs opens.
if modprobe crc32_generic && modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0; then
	ibv_devinfo -d rxe0 | grep -q "hca_id:	rxe0" && check rxe_devinfo ok || check rxe_devinfo "ibv_devinfo -d rxe0 failed"
else
	check rxe_devinfo "cannot create rxe0"
fi
echo "guest uptime at the end: $(cut -d' ' -f1 /proc/uptime) s"
exit $failed
"""


def image_dir():
    p = subprocess.run([BUILD_IMAGE], stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: guest/build-image failed (status {p.returncode})")
    return p.stdout.strip()


def boot(args):
    img = image_dir()
    qemu = args.qemu or shutil.which("qemu-system-x86_64")
    if not qemu:
        sys.exit("FAIL: qemu-system-x86_64 not found (Debian package qemu-system-x86)")
    share = tempfile.mkdtemp(prefix="mprdma-guest-test-")
    hostname, ip = "t0", "10.0.0.1"
    try:
        with open(os.path.join(share, "run.sh"), "w") as f:
            f.write(RUN_SCRIPT.replace("$EXPECT_HOSTNAME", hostname).replace("$EXPECT_IP", ip))
        os.chmod(os.path.join(share, "run.sh"), 0o755)
        cmdline = open(os.path.join(img, "cmdline")).read().strip()
        cmd = [qemu, "-machine", "q35,accel=tcg", "-m", "512M", "-smp", "1", "-nographic", "-no-reboot",
               "-kernel", os.path.join(img, "vmlinux"), "-initrd", os.path.join(img, "initramfs.cpio"),
               "-append", f"{cmdline} mprdma.run=/host/run.sh mprdma.share=host "
                          f"mprdma.hostname={hostname} mprdma.ip={ip}/24",
               "-virtfs", f"local,path={share},mount_tag=host,security_model=none",
               # user-mode networking only gives the guest an eth0; romfile=
               # skips the option ROM.
               "-netdev", "user,id=n0,restrict=on", "-device", "virtio-net-pci,netdev=n0,romfile="]
        print("$ " + " ".join(cmd), flush=True)
        ok = run_qemu(cmd, args.timeout)
    finally:
        shutil.rmtree(share, ignore_errors=True)
    sys.exit(0 if ok else 1)


def run_qemu(cmd, timeout):
    """Reads the console until QEMU exits or the timeout; checks the markers."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf, console, ready_at, exit_line = b"", [], None, None
    deadline = t0 + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                print(f"FAIL: timeout: no guest power-off within {timeout} s "
                      f"({'after' if ready_at else 'and no'} MPRDMA-READY)")
                return report(console, False)
            if not sel.select(left):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").rstrip("\r")
                console.append(line)
                if line.startswith("MPRDMA-READY") and ready_at is None:
                    ready_at = time.monotonic() - t0
                if line.startswith("MPRDMA-RUN-EXIT"):
                    exit_line = line
        if buf:
            console.append(buf.decode(errors="replace"))
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    total = time.monotonic() - t0
    ok = True
    if ready_at is None:
        print("FAIL: the guest never printed MPRDMA-READY")
        ok = False
    if exit_line != "MPRDMA-RUN-EXIT 0":
        print(f"FAIL: expected 'MPRDMA-RUN-EXIT 0', got {exit_line!r} (the run script's failed checks are below)")
        ok = False
    if rc != 0:
        print(f"FAIL: QEMU exited with status {rc}")
        ok = False
    if ok:
        print(f"boot to MPRDMA-READY: {ready_at:.2f} s wall; QEMU start to exit: {total:.2f} s")
    return report(console, ok)


def report(console, ok):
    print("---- guest console ----")
    print("\n".join(console))
    return ok


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def reproducible(args):
    scratch = tempfile.mkdtemp(prefix="mprdma-guest-rebuild-")
    try:
        for attempt in range(3):
            first = image_dir()
            t = time.monotonic()
            p = subprocess.run([BUILD_IMAGE, "--cache-dir", scratch], stdout=subprocess.PIPE, text=True)
            if p.returncode != 0:
                sys.exit("FAIL: the rebuild into a scratch cache failed")
            second = p.stdout.strip()
            print(f"rebuilt every stage in {time.monotonic() - t:.1f} s: {second}")
            # The directory names carry the input key: different names mean
            # someone edited an input (driver, provider) meanwhile.
            if os.path.basename(first) == os.path.basename(second):
                break
            print("the inputs changed during the rebuild; again")
        else:
            sys.exit("FAIL: the inputs kept changing during the rebuild")
        ok = True
        for name in ("initramfs.cpio", "vmlinux", "manifest.txt"):
            a, b = digest(os.path.join(first, name)), digest(os.path.join(second, name))
            print(f"{name}: {a} {'==' if a == b else '!='} {b}")
            ok &= a == b
        if not ok:
            old = open(os.path.join(first, "manifest.txt")).read().splitlines()
            new = open(os.path.join(second, "manifest.txt")).read().splitlines()
            print("FAIL: the image is not reproducible; differing entries (first build, second build):")
            for line in sorted(set(old) ^ set(new)):
                print(("- " if line in old else "+ ") + line)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0 if ok else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    b = sub.add_parser("boot")
    b.add_argument("--qemu")
    b.add_argument("--timeout", type=float, default=120.0)
    sub.add_parser("reproducible")
    args = ap.parse_args()
    boot(args) if args.what == "boot" else reproducible(args)


if __name__ == "__main__":
    main()
