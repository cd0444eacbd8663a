#!/usr/bin/env python3
"""Plots the sampled time series of one run (RUN_DIR/series/*.csv).

    plot_run.py RUN_DIR PATTERN [PATTERN...] [--from T] [--to T] [--out FILE]

A pattern is a shell-style glob over series names, e.g. 'link.t0-s*.a2b.gbps'
or nic.t0h0.transport.cwnd. Series of one unit share a panel; panels share the
time axis (ms). The run must have sampled them (sample_interval, 10us by default).
Times are like 2ms, 150us, 0.01s. Writes RUN_DIR/plot.png unless --out says
otherwise and prints what it drew. Exit 2 with a message on bad input.
"""
import argparse
import csv
import fnmatch
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


class InputError(Exception):
    pass


def parse_time(text):
    """Seconds from '2ms', '150us', '0.01s' (a unit is required)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|ns)\s*", text)
    if not m:
        raise InputError(f"time '{text}': want a number and a unit (s, ms, us, ns), e.g. 2ms")
    return float(m.group(1)) * _UNITS[m.group(2)]


def read_series(path):
    """(unit, [(time_s, value)]) of one series CSV ('time_s,<unit>' header)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or len(rows[0]) != 2 or rows[0][0] != "time_s":
        raise InputError(f"{path}: not a series file (header 'time_s,<unit>')")
    return rows[0][1], [(float(t), float(v)) for t, v in rows[1:]]


def select(series_dir, patterns):
    """Matching series names, sorted, every pattern matching at least one."""
    names = sorted(n[:-4] for n in os.listdir(series_dir) if n.endswith(".csv"))
    chosen = []
    for p in patterns:
        hits = [n for n in names if fnmatch.fnmatchcase(n, p)]
        if not hits:
            near = [n for n in names if n.split(".")[0] == p.split(".")[0]][:8] or names[:8]
            raise InputError(f"pattern '{p}' matches no series; some there are: " +
                             ", ".join(near))
        chosen += [h for h in hits if h not in chosen]
    return chosen


def plot(run_dir, patterns, t_from=None, t_to=None, out=None):
    series_dir = os.path.join(run_dir, "series")
    if not os.path.isdir(series_dir):
        raise InputError(f"{run_dir}: no series/ directory (a run's --out directory, with "
                         "sample_interval not 0)")
    names = select(series_dir, patterns)
    by_unit = {}
    for n in names:
        unit, points = read_series(os.path.join(series_dir, n + ".csv"))
        points = [(t, v) for t, v in points
                  if (t_from is None or t >= t_from) and (t_to is None or t <= t_to)]
        by_unit.setdefault(unit, []).append((n, points))
    fig, axes = plt.subplots(len(by_unit), 1, sharex=True, squeeze=False,
                             figsize=(9, 2.6 * len(by_unit) + 0.6))
    for ax, (unit, lines) in zip(axes[:, 0], by_unit.items()):
        for n, points in lines:
            ax.step([t * 1e3 for t, _ in points], [v for _, v in points], where="pre",
                    label=n, linewidth=1)
        ax.set_ylabel(unit)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    axes[-1, 0].set_xlabel("simulated time (ms)")
    fig.suptitle(os.path.basename(os.path.normpath(run_dir)))
    fig.tight_layout()
    out = out or os.path.join(run_dir, "plot.png")
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out, names


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("patterns", nargs="+")
    ap.add_argument("--from", dest="t_from")
    ap.add_argument("--to", dest="t_to")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    try:
        t_from = parse_time(a.t_from) if a.t_from else None
        t_to = parse_time(a.t_to) if a.t_to else None
        if t_from is not None and t_to is not None and t_to <= t_from:
            raise InputError(f"--to {a.t_to} is not after --from {a.t_from}")
        out, names = plot(a.run_dir, a.patterns, t_from, t_to, a.out)
    except (InputError, OSError) as e:
        print(f"plot: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {len(names)} series: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
