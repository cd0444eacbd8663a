#!/usr/bin/env python3
"""Print the `jobs:` entries of an all-to-all write_flows workload.

One write_flows job per ordered pair of hosts, each a Poisson process of
load x link rate x payload share / (hosts - 1): together, per host, one
Poisson process with uniformly chosen destinations (rows I1 and M6). Each
pair's ideal_base (slowdown's fixed part) is chosen by how far apart the two
hosts are: same edge/leaf switch, same pod, or further.

  tools/scenarios/flow_pairs.py leaf_spine --leaves 4 --hosts-per-leaf 10 \\
      --rate 0.46475Gbps --base 9.2us,9.2us,16.5us --qps 2
"""
import argparse


def hosts_of(args):
    if args.topology == "fat_tree":
        half = args.k // 2
        return [f"p{p}e{e}h{h}" for p in range(args.k) for e in range(half) for h in range(half)]
    return [f"l{l}h{h}" for l in range(args.leaves) for h in range(args.hosts_per_leaf)]


def distance(args, a, b):
    """0: same edge/leaf switch, 1: same pod (fat-tree), 2: further."""
    if args.topology == "fat_tree":
        if a[: a.index("h")] == b[: b.index("h")]:
            return 0
        return 1 if a[: a.index("e")] == b[: b.index("e")] else 2
    return 0 if a[: a.index("h")] == b[: b.index("h")] else 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("topology", choices=["fat_tree", "leaf_spine"])
    ap.add_argument("--k", type=int, default=4, help="fat-tree parameter")
    ap.add_argument("--leaves", type=int, default=4)
    ap.add_argument("--hosts-per-leaf", type=int, default=4)
    ap.add_argument("--rate", required=True, help="each pair's offered payload rate")
    ap.add_argument("--base", required=True,
                    help="ideal_base for same switch, same pod, further (comma-separated)")
    ap.add_argument("--duration", default="20ms")
    ap.add_argument("--qps", type=int, default=1)
    ap.add_argument("--ideal-rate", default="36.25Gbps")
    ap.add_argument("--tx-depth", type=int, default=16)
    ap.add_argument("--run-at", default="1ms")
    args = ap.parse_args()
    bases = args.base.split(",")
    if len(bases) != 3:
        ap.error("--base takes three durations")
    hosts = hosts_of(args)
    for a in hosts:
        for b in hosts:
            if a == b:
                continue
            print(f"  - {{name: {a}_{b}, app: write_flows, client: {a}, server: {b}, "
                  f"rate: {args.rate}, duration: {args.duration}, "
                  f"ideal_base: {bases[distance(args, a, b)]}, ideal_rate: {args.ideal_rate}, "
                  f"tx_depth: {args.tx_depth}, qps: {args.qps}, run_at: {args.run_at}, "
                  f"after_previous: false}}")


if __name__ == "__main__":
    main()
