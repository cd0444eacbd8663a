#!/usr/bin/env python3
"""tools/scenarios/flow_pairs.py writes the pair jobs of rows I1 and M6: run
with the arguments each scenario's header names, it must reproduce that
scenario's job list exactly (so the header's recipe and the file agree), and
it must cover every ordered pair once with the right distance class."""
import argparse
import subprocess
import sys

CASES = [
    ("scenarios/mp-rdma/i1-irn-vs-roce.yaml",
     ["fat_tree", "--rate", "1.691Gbps", "--base", "11.2us,20.5us,29.8us", "--qps", "8"], 16),
    ("scenarios/mp-rdma/m6-fct.yaml",
     ["leaf_spine", "--leaves", "4", "--hosts-per-leaf", "10", "--rate", "0.46475Gbps",
      "--base", "9.2us,9.2us,16.5us", "--qps", "2"], 40),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    failures = 0
    for scenario, args, hosts in CASES:
        out = subprocess.run([sys.executable, a.tool] + args, check=True, capture_output=True,
                             text=True).stdout.splitlines()
        with open(f"{a.root}/{scenario}", encoding="utf-8") as fh:
            jobs = [l for l in fh.read().splitlines() if l.startswith("  - {name: ")]
        if out != jobs:
            failures += 1
            print(f"FAIL: {scenario}: the tool's {len(out)} jobs differ from the file's {len(jobs)}")
        names = [l.split("name: ")[1].split(",")[0] for l in out]
        if len(names) != hosts * (hosts - 1) or len(set(names)) != len(names):
            failures += 1
            print(f"FAIL: {scenario}: {len(names)} jobs, wanted one per ordered pair")
    # Distance classes on the fat-tree: same edge, same pod, other pod.
    ft = subprocess.run([sys.executable, a.tool, "fat_tree", "--rate", "1Gbps", "--base",
                         "1us,2us,3us"], check=True, capture_output=True, text=True).stdout
    for pair, base in (("p0e0h0_p0e0h1", "1us"), ("p0e0h0_p0e1h0", "2us"),
                       ("p0e0h0_p3e1h1", "3us")):
        line = next(l for l in ft.splitlines() if f"name: {pair}," in l)
        if f"ideal_base: {base}," not in line:
            failures += 1
            print(f"FAIL: {pair} should have ideal_base {base}: {line}")
    if failures:
        sys.exit(f"{failures} check(s) failed")
    print("ok")


if __name__ == "__main__":
    main()
