#!/usr/bin/env python3
"""`mprdma-vp-sim boot --shell`: keystrokes reach the guest's shell and its
output comes back, then the session ends cleanly when the guest powers off.

usage: boot_shell_test.py SIM   (MPRDMA_SOURCE_DIR set by ctest)
"""
import os
import select
import subprocess
import sys
import tempfile
import time

SCENARIO = """name: shell
end_time: 300s
sample_interval: 0s
qemu: {memory: 512MiB}
hosts:
  - {name: g0, kind: qemu}
  - {name: m1}
links:
  - {name: wire, a: g0, b: m1}
"""


def read_until(proc, needle, deadline, seen):
    """Reads the simulator's stdout until `needle` appears (or the deadline)."""
    fd = proc.stdout.fileno()
    while needle not in seen[0]:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            return False
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                return False
            seen[0] += chunk.decode(errors="replace")
    return True


def main():
    sim = sys.argv[1]
    src = os.environ["MPRDMA_SOURCE_DIR"]
    image = subprocess.run([os.path.join(src, "guest", "build-image")], check=True,
                           capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with tempfile.TemporaryDirectory() as tmp:
        scenario = os.path.join(tmp, "shell.yaml")
        with open(scenario, "w") as f:
            f.write(SCENARIO)
        env = dict(os.environ, MPRDMA_GUEST_IMAGE=image)
        proc = subprocess.Popen([sim, "boot", scenario, "--shell", "g0", "--out",
                                 os.path.join(tmp, "out")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env)
        seen = [""]
        deadline = time.monotonic() + 120
        try:
            if not read_until(proc, "MPRDMA-READY", deadline, seen):
                print("FAIL: the guest never became ready\n" + seen[0][-3000:])
                return 1
            # The arithmetic makes the shell's answer differ from the echo
            # of what we typed.
            proc.stdin.write(b"ibv_devices; echo TYPED-$((6*7))\n")
            proc.stdin.flush()
            if not read_until(proc, "TYPED-42", deadline, seen):
                print("FAIL: no answer to typed input\n" + seen[0][-3000:])
                return 1
            if "mprdma_0" not in seen[0]:
                print("FAIL: ibv_devices did not list mprdma_0\n" + seen[0][-3000:])
                return 1
            proc.stdin.write(b"poweroff -f\n")
            proc.stdin.flush()
            rc = proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            print("FAIL: the session did not end after poweroff")
            return 1
        finally:
            if proc.poll() is None:
                proc.kill()
        if rc != 0:
            print(f"FAIL: boot exited with {rc}\n" + seen[0][-3000:])
            return 1
    print("ok: typed into g0's shell and got its answer; session ended with the guest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
