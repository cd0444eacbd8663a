#!/usr/bin/env python3
"""tools/report/plot_run.py on a real run: draws the series its globs match
(one panel per unit), honours a time window, and refuses bad input with a
message and exit status 2 (no match, a time without unit, a window that
ends before it starts, a run that sampled nothing)."""
import argparse
import os
import subprocess
import sys

SCENARIO = """name: plot-run
end_time: 2ms
{sampling}
nic: {{mtu: 1024}}
hosts: [{{name: a}}, {{name: b}}]
links: [{{name: w, a: a, b: b, rate: 40Gbps, delay: 200ns}}]
jobs:
  - {{name: j, app: write_bw, client: a, server: b, sizes: [64KiB], iterations: 20}}
"""

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def sim_run(sim, work, name, sampling):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write(SCENARIO.format(sampling=sampling))
    out = os.path.join(work, name)
    r = subprocess.run([sim, "run", path, "--out", out, "--quiet"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"the simulator failed on {path}:\n{r.stdout}\n{r.stderr}")
    return out


def plot(script, *args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--script", required=True)
    a = ap.parse_args()
    run = sim_run(a.sim, a.work, "sampled", "sample_interval: 20us")
    bare = sim_run(a.sim, a.work, "bare", "sample_interval: 0s")

    png = os.path.join(a.work, "p.png")
    if os.path.exists(png):
        os.remove(png)
    r = plot(a.script, run, "nic.*.mac.tx_gbps", "link.w.*.gbps", "--out", png)
    check(r.returncode == 0, f"plot failed: {r.stderr}")
    want = ["nic.a.mac.tx_gbps", "nic.b.mac.tx_gbps", "link.w.a2b.gbps", "link.w.b2a.gbps"]
    check(f"4 series: {', '.join(want)}" in r.stdout, f"series drawn: {r.stdout!r}")
    with open(png, "rb") as f:
        head = f.read(8)
    check(head == b"\x89PNG\r\n\x1a\n", "not a PNG")
    check(os.path.getsize(png) > 10000, f"a PNG of {os.path.getsize(png)} bytes")

    r = plot(a.script, run, "link.w.a2b.gbps", "--from", "0.5ms", "--to", "1ms")
    check(r.returncode == 0 and os.path.exists(os.path.join(run, "plot.png")),
          f"window / default output: {r.returncode} {r.stderr}")

    for args, want_msg in [
        ([run, "nope.*"], "matches no series"),
        ([run, "link.*", "--from", "2"], "want a number and a unit"),
        ([run, "link.*", "--from", "1ms", "--to", "500us"], "is not after"),
        ([bare, "link.*"], "sample_interval"),
        ([os.path.join(a.work, "missing"), "link.*"], "sample_interval"),
    ]:
        r = plot(a.script, *args)
        check(r.returncode == 2, f"{args}: exit {r.returncode}, want 2")
        check(want_msg in r.stderr, f"{args}: message {r.stderr!r}, want '{want_msg}'")
    if failures:
        sys.exit(f"{len(failures)} failure(s)")
    print("ok")


if __name__ == "__main__":
    main()
