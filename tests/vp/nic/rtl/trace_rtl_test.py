#!/usr/bin/env python3
"""--trace-rtl HOST@FROM-TO: the simulator writes the RTL engines of HOST's
NIC into OUT/rtl-HOST.fst (receiver) and OUT/rtl-tx-HOST.fst (sender),
covering the window and no more (the FST header's start and end times, in
ps), and refuses a host whose NIC runs the
C++ model, an unknown host and a run without --out, each with a message
naming the problem.

  trace_rtl_test.py SIM SCENARIO"""

import os
import struct
import subprocess
import sys
import tempfile

FROM_PS, TO_PS = 1_000_000_000, 1_020_000_000  # 1 ms to 1.02 ms


def run(sim, scenario, *args):
    cmd = [sim, "run", scenario, "--quiet", "--set", "nic.transport=mprdma", *args]
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def check_fst(path, failures):
    """The FST at `path` exists and spans a time inside the window."""
    if not os.path.exists(path):
        failures.append(f"no waveform at {path}")
        return
    data = open(path, "rb").read()
    # FST header block: type 0, its length, then start and end time.
    if len(data) < 25 or data[0] != 0:
        failures.append(f"{path} does not start with an FST header block")
        return
    start, end = struct.unpack(">QQ", data[9:25])
    print(f"{path}: {len(data)} bytes, {start} ps to {end} ps")
    if not FROM_PS <= start < end <= TO_PS + 4000:
        failures.append(f"{path} spans {start}-{end} ps, not inside {FROM_PS}-{TO_PS} ps")


def main():
    sim, scenario = sys.argv[1], sys.argv[2]
    failures = []
    out = tempfile.mkdtemp(prefix="trace-rtl-")
    # t1h0 receives (its receiver engine works), t0h0 sends (its sender's).
    for host, engine in (("t1h0", "rtl"), ("t0h0", "rtl-tx")):
        r = run(sim, scenario, "--set", "nic.transport_impl=rtl", "--out", out,
                "--trace-rtl", f"{host}@1ms-1.02ms")
        if r.returncode != 0:
            failures.append(f"the traced run of {host} failed ({r.returncode}): {r.stderr}")
            continue
        check_fst(os.path.join(out, f"{engine}-{host}.fst"), failures)
    for other in ("rtl-t2h0.fst", "rtl-tx-t2h0.fst"):
        if os.path.exists(os.path.join(out, other)):
            failures.append(f"{other}: a waveform of a NIC that was not asked for")

    for args, want in [
        (["--out", out, "--trace-rtl", "t1h0"], "as the C++ model (nic.transport_impl model)"),
        (["--set", "nic.transport_impl=rtl", "--out", out, "--trace-rtl", "t7h7"],
         "--trace-rtl t7h7: the scenario has no such host"),
        (["--set", "nic.transport_impl=rtl", "--trace-rtl", "t1h0"], "--trace-rtl needs --out"),
        (["--set", "nic.transport_impl=rtl", "--out", out, "--trace-rtl", "t1h0@2ms-1ms"],
         "the window ends before it starts"),
    ]:
        r = run(sim, scenario, *args)
        if r.returncode == 0 or want not in r.stderr:
            failures.append(f"{' '.join(args)}: exit {r.returncode}, wanted an error with "
                            f"'{want}', got: {r.stderr.strip()}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
