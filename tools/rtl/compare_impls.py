#!/usr/bin/env python3
"""Runs one scenario under several transport implementations
(nic.transport_impl: model, rtl, lockstep) and compares their results.json
with the first one's, value by value.

What only an RTL run has is left out of the comparison: the echo of
nic.transport_impl in the configuration and the engine's own counters
(nic.<host>.transport.rtl.*). Everything else, every metric, counter, series
and histogram, must be equal: the RTL decides as the golden model does and
the NIC charges the same cycles around it.

  compare_impls.py --sim build/vp/sim/mprdma-vp-sim \\
      scenarios/fabric/testbed-permutation.yaml --set nic.transport=mprdma

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
    args = ap.parse_args()

    impls = [i for i in args.impls.split(",") if i]
    if len(impls) < 2:
        ap.error("--impls needs at least two implementations")
    out = args.out or tempfile.mkdtemp(prefix="mprdma-impls-")
    flat = {}
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
            flat[impl] = {k: v for k, v in flatten(json.load(f)).items() if not rtl_only(k)}
        print(f"{impl}: {len(flat[impl])} values, {wall:.2f} s")

    ref = impls[0]
    bad = 0
    for impl in impls[1:]:
        keys = sorted(set(flat[ref]) | set(flat[impl]))
        diff = [k for k in keys if flat[ref].get(k) != flat[impl].get(k)]
        if not diff:
            print(f"{impl}: equal to {ref}")
            continue
        bad += 1
        print(f"{impl}: {len(diff)} values differ from {ref}:")
        for k in diff[:40]:
            print(f"  {k}: {flat[ref].get(k)!r} vs {flat[impl].get(k)!r}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
