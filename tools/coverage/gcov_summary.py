#!/usr/bin/env python3
"""Line coverage of the project's sources from a gcov-instrumented build.

Reads every .gcda file under BUILD_DIR (written by the tests of a build made
with MPRDMA_COVERAGE, README "Coverage") through gcov's JSON output and prints,
per source file under the chosen folders, the lines that ran out of the lines
that hold code, then the total. A line counts as run when any object file that
compiled it ran it (headers are compiled into many). Uses only gcov (GCC 9 or
later) and the standard library.

  tools/coverage/gcov_summary.py build-cov                 # vp/, least covered first
  tools/coverage/gcov_summary.py build-cov --under vp/nic --under sw_stack
  tools/coverage/gcov_summary.py build-cov --missed vp/nic/requester.cc
"""

import argparse
import json
import os
import signal
import subprocess
import sys
from collections import defaultdict


def gcov_json(gcda, build_dir):
    """gcov's JSON records of one object file (a list), or None when gcov refuses it."""
    run = subprocess.run(
        ["gcov", "--json-format", "--stdout", gcda],
        cwd=build_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0 or not run.stdout.strip():
        print(f"warning: gcov could not read {gcda}: {run.stderr.strip()}", file=sys.stderr)
        return None
    # One JSON document per line (one per .gcda given).
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def collect(build_dir, source_dir, prefixes):
    """{relative source path: {line number: times run (max over objects)}}."""
    lines = defaultdict(dict)
    for root, _, files in os.walk(build_dir):
        for name in files:
            if not name.endswith(".gcda"):
                continue
            for doc in gcov_json(os.path.join(root, name), build_dir) or []:
                for f in doc.get("files", []):
                    path = os.path.normpath(os.path.join(build_dir, f["file"]))
                    rel = os.path.relpath(path, source_dir)
                    if rel.startswith("..") or not any(
                        rel == p or rel.startswith(p.rstrip("/") + "/") for p in prefixes
                    ):
                        continue
                    seen = lines[rel]
                    for ln in f.get("lines", []):
                        n = ln["line_number"]
                        seen[n] = max(seen.get(n, 0), ln["count"])
    return lines


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet end under `| head`
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir", help="build directory of a MPRDMA_COVERAGE build, tests run")
    ap.add_argument(
        "--source",
        default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        help="source tree (default: this checkout)",
    )
    ap.add_argument(
        "--under",
        action="append",
        help="report files under this folder of the source tree (repeatable; default vp)",
    )
    ap.add_argument("--missed", metavar="FILE", help="list the lines of FILE that never ran")
    args = ap.parse_args()
    build_dir = os.path.abspath(args.build_dir)
    source_dir = os.path.abspath(args.source)
    if not os.path.isdir(build_dir):
        sys.exit(f"error: {args.build_dir}: no such build directory")
    prefixes = [os.path.normpath(p) for p in (args.under or ["vp"])]
    if args.missed:
        prefixes = [os.path.normpath(args.missed)]

    lines = collect(build_dir, source_dir, prefixes)
    if not lines:
        sys.exit(
            f"error: no coverage data for {', '.join(prefixes)} under {args.build_dir}: "
            "build with MPRDMA_COVERAGE=1 and run the tests first (README Coverage)"
        )
    if args.missed:
        missed = sorted(n for n, c in lines[prefixes[0]].items() if c == 0)
        with open(os.path.join(source_dir, prefixes[0]), encoding="utf-8") as src:
            text = src.read().splitlines()
        for n in missed:
            print(f"{prefixes[0]}:{n}: {text[n - 1].strip() if n <= len(text) else ''}")
        print(f"{len(missed)} of {len(lines[prefixes[0]])} lines never ran")
        return

    rows = []
    for rel, seen in lines.items():
        run = sum(1 for c in seen.values() if c > 0)
        rows.append((100.0 * run / len(seen) if seen else 100.0, run, len(seen), rel))
    rows.sort()
    total_run = sum(r[1] for r in rows)
    total = sum(r[2] for r in rows)
    width = max(len(r[3]) for r in rows)
    for pct, run, n, rel in rows:
        print(f"{rel:<{width}}  {pct:6.1f} %  {run:6d} of {n:6d} lines")
    print(f"{'total':<{width}}  {100.0 * total_run / total:6.1f} %  {total_run:6d} of {total:6d} lines"
          f" ({len(rows)} files)")


if __name__ == "__main__":
    main()
