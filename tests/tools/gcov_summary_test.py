#!/usr/bin/env python3
"""tools/coverage/gcov_summary.py on a program small enough to know its answer:
a C file whose one branch never runs, built with --coverage and run once. The
summary must count exactly the lines that ran, --missed must name the one that
did not, and a build directory without coverage data must get a clear error."""
import argparse
import os
import shutil
import subprocess
import sys

DEMO = """int twice(int x) {
  return 2 * x;
}

int main(int argc, char **argv) {
  (void)argv;
  if (argc > 5)
    return twice(argc);
  return 0;
}
"""

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--cc", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    src, build = os.path.join(a.work, "src"), os.path.join(a.work, "build")
    os.makedirs(src)
    os.makedirs(build)
    with open(os.path.join(src, "demo.c"), "w", encoding="utf-8") as f:
        f.write(DEMO)

    empty = run([sys.executable, a.tool, build, "--source", a.work, "--under", "src"])
    check(empty.returncode != 0 and "no coverage data" in empty.stderr,
          f"no data: expected a clear error, got {empty.returncode}: {empty.stderr!r}")

    cc = run([a.cc, "--coverage", "-O0", "-o", "demo", os.path.join(src, "demo.c")], cwd=build)
    if cc.returncode != 0:
        print(cc.stderr)
        sys.exit("cannot compile the demo program")
    run([os.path.join(build, "demo")], cwd=build)

    out = run([sys.executable, a.tool, build, "--source", a.work, "--under", "src"])
    print(out.stdout, out.stderr)
    check(out.returncode == 0, f"summary failed: {out.stderr}")
    # Lines with code: 1-2 (twice), 5, 7, 8, 9 (main); twice() and its call never ran.
    row = [line for line in out.stdout.splitlines() if line.startswith("src/demo.c")]
    check(len(row) == 1, f"one row for src/demo.c: {out.stdout!r}")
    if row:
        fields = row[0].split()
        ran, of = int(fields[3]), int(fields[5])
        check(of - ran == 3, f"three lines never ran (twice's two, its call): {row[0]}")
        check(ran >= 3, f"main's lines ran: {row[0]}")

    missed = run([sys.executable, a.tool, build, "--source", a.work,
                  "--missed", "src/demo.c"])
    print(missed.stdout)
    check("src/demo.c:8: return twice(argc);" in missed.stdout,
          f"--missed names the branch that never ran: {missed.stdout!r}")
    check("src/demo.c:2: return 2 * x;" in missed.stdout,
          f"--missed names twice's body: {missed.stdout!r}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("ok")


if __name__ == "__main__":
    main()
