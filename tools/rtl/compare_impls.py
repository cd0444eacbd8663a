#!/usr/bin/env python3
"""Runs one scenario under several transport implementations
(nic.transport_impl: model, rtl, lockstep) and compares their results.json
with the first one's, value by value.

What only an RTL run has is left out of the comparison: the echo of
nic.transport_impl in the configuration and the engine's own counters
(nic.<host>.transport.rtl.*). Everything else, every metric, counter, series
and histogram, must be equal when the RTL decides as the golden model does
and the NIC charges the same cycles around it (nic.rtl_timing model):

  compare_impls.py --sim build/vp/sim/mprdma-vp-sim \\
      scenarios/fabric/testbed-permutation.yaml --set nic.transport=mprdma \\
      --set nic.rtl_timing=model

With the RTL's cycles charged (nic.rtl_timing charged, the default) model
and rtl differ in timing; --report lists the scenario's metrics side by side
with their relative change and counts the other differences, without
failing; --expect-held fails unless every run other than model held some
packets in the engine (nic.<host>.transport.rtl.tx_held_cycles).

Exit status 0 when all agree, 1 when some value differs (each is listed),
2 when a run fails (a lockstep divergence stops its run with the report).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def flatten(node, prefix="", out=None):
    out = {} if out is None else out
    if isinstance(node, dict):
        for k, v in node.items():
            flatten(v, f"{prefix}.{k}" if prefix else k, out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = node
    return out


def rtl_only(key):
    return key.endswith("transport_impl") or ".transport.rtl." in key


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--sim", required=True, help="the simulator executable")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a scenario override for every run (repeatable)")
    ap.add_argument("--impls", default="model,rtl,lockstep",
                    help="comma-separated; the first is the reference (default %(default)s)")
    ap.add_argument("--out", help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--report", action="store_true",
                    help="differences are expected: summarise them, exit 0")
    ap.add_argument("--expect-held", action="store_true",
                    help="every RTL run must have held packets (charged timing)")
    args = ap.parse_args()

    impls = [i for i in args.impls.split(",") if i]
    if len(impls) < 2:
        ap.error("--impls needs at least two implementations")
    out = args.out or tempfile.mkdtemp(prefix="mprdma-impls-")
    flat = {}
    held_missing = False
    for impl in impls:
        d = os.path.join(out, impl)
        cmd = [args.sim, "run", args.scenario, "--quiet", "--out", d]
        for s in args.set + [f"nic.transport_impl={impl}"]:
            cmd += ["--set", s]
        t0 = time.monotonic()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            sys.stderr.write(f"{impl}: the run failed (exit {r.returncode}):\n{r.stderr}")
            return 2
        with open(os.path.join(d, "results.json")) as f:
            every = flatten(json.load(f))
        flat[impl] = {k: v for k, v in every.items() if not rtl_only(k)}
        held = sum(v for k, v in every.items() if k.endswith(".transport.rtl.tx_held_cycles"))
        print(f"{impl}: {len(flat[impl])} values, {wall:.2f} s"
              + (f", {held} packet-cycles held in the RTL sender" if impl != "model" else ""))
        if args.expect_held and impl != "model" and held == 0:
            sys.stderr.write(f"{impl}: no packet was held in the RTL sender: its cycles were "
                             "not charged (nic.rtl_timing charged expected)\n")
            held_missing = True

    ref = impls[0]
    bad = 0
    for impl in impls[1:]:
        keys = sorted(set(flat[ref]) | set(flat[impl]))
        diff = [k for k in keys if flat[ref].get(k) != flat[impl].get(k)]
        if not diff:
            print(f"{impl}: equal to {ref}")
            continue
        bad += 1
        print(f"{impl}: {len(diff)} of {len(keys)} values differ from {ref}")
        metrics = [k for k in keys if k.startswith("metrics.")]
        if metrics:
            print(f"  the scenario's metrics ({ref} vs {impl}):")
            for k in metrics:
                print(f"    {k[len('metrics.'):]}: {show(flat[ref].get(k))} vs "
                      f"{show(flat[impl].get(k))}{change(flat[ref].get(k), flat[impl].get(k))}")
        others = [k for k in diff if not k.startswith("metrics.")]
        if args.report:
            worst = sorted(others, key=lambda k: -abs(rel(flat[ref].get(k), flat[impl].get(k))))
            print(f"  {len(others)} other values differ; the largest relative changes:")
            others = worst
        for k in others[:40]:
            print(f"  {k}: {flat[ref].get(k)!r} vs {flat[impl].get(k)!r}")
    if held_missing:
        return 1
    return 0 if args.report or not bad else 1


def rel(a, b):
    """Relative change from a to b (0 for non-numbers and equal values)."""
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a == b:
        return 0.0
    if isinstance(a, bool) or isinstance(b, bool):
        return 1.0
    return (b - a) / abs(a) if a else float("inf")


def show(v):
    return f"{v:.6g}" if isinstance(v, float) else repr(v)


def change(a, b):
    if a == b:
        return " (equal)"
    r = rel(a, b)
    return f" ({r:+.2%})" if r not in (0.0, float("inf")) else ""


if __name__ == "__main__":
    sys.exit(main())
