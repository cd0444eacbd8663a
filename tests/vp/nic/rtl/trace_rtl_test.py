#!/usr/bin/env python3
"""--trace-rtl HOST@FROM-TO: the simulator writes the RTL engine of HOST's
NIC into OUT/rtl-HOST.fst, covering the window and no more (the FST
header's start and end times, in ps), and refuses a host whose NIC runs the
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


def main():
    sim, scenario = sys.argv[1], sys.argv[2]
    failures = []
    out = tempfile.mkdtemp(prefix="trace-rtl-")
    r = run(sim, scenario, "--set", "nic.transport_impl=rtl", "--out", out,
            "--trace-rtl", "t1h0@1ms-1.02ms")
    path = os.path.join(out, "rtl-t1h0.fst")
    if r.returncode != 0:
        failures.append(f"the traced run failed ({r.returncode}): {r.stderr}")
    elif not os.path.exists(path):
        failures.append(f"no waveform at {path}")
    else:
        data = open(path, "rb").read()
        # FST header block: type 0, its length, then start and end time.
        if len(data) < 25 or data[0] != 0:
            failures.append("the file does not start with an FST header block")
        else:
            start, end = struct.unpack(">QQ", data[9:25])
            print(f"{path}: {len(data)} bytes, {start} ps to {end} ps")
            if not FROM_PS <= start < end <= TO_PS + 4000:
                failures.append(f"the waveform spans {start}-{end} ps, not inside "
                                f"{FROM_PS}-{TO_PS} ps")
        if os.path.exists(os.path.join(out, "rtl-t0h0.fst")):
            failures.append("a waveform of a NIC that was not asked for")

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
