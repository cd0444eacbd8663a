#!/usr/bin/env python3
"""Mutation checks: does the test suite notice when a mechanism breaks?

Each entry of the mutation list (tools/mutation/mutations.yaml) names one
source file, a piece of its text that must occur there exactly once, the
text to put in its place (a plausible bug: an off-by-one, a missing
reaction, a wrong constant) and the mechanism it breaks. For each entry the
tool puts the mutation in, builds, runs the tests and puts the original
text back (also when interrupted). A mutation the tests catch (build
succeeds, tests fail) is "killed"; one they do not catch "survived": the
mechanism it breaks is not pinned by any test. A mutation that does not
build says nothing and is reported as such.

    .venv/bin/python tools/mutation/mutate.py [--only ID ...] [--report FILE]
    .venv/bin/python tools/mutation/mutate.py --check   # every entry still applies

--check builds and runs nothing: it verifies that every entry's text occurs
exactly once in its file, so that the list follows the code (ctest runs it,
tools.mutations_apply). The build and test commands default to the
project's (ninja in build/, ctest without the guest label) and can be
replaced, e.g. to run only the tests of one block. Exits 1 when a mutation
survived or an entry no longer applies.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

import yaml

KEYS = {"id", "file", "find", "replace", "breaks"}
FAILED_TEST = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) .*\*\*\*(Failed|Timeout|Exception)")


def load(path, root):
    """The mutation list, checked: every entry has exactly the known keys and a
    unique id, and its text occurs exactly once in its file. Returns (entries,
    problems)."""
    with open(path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    if not isinstance(doc, dict) or not isinstance(doc.get("mutations"), list):
        raise SystemExit(f"error: {path}: expected a mapping with a list 'mutations'")
    entries, problems, seen = [], [], set()
    for i, m in enumerate(doc["mutations"]):
        where = f"{path}: mutations[{i}]"
        if not isinstance(m, dict):
            problems.append(f"{where}: not a mapping")
            continue
        unknown, missing = sorted(set(m) - KEYS), sorted(KEYS - set(m))
        if unknown or missing:
            problems.append(f"{where}: " + (f"unknown key(s) {', '.join(unknown)}" if unknown
                                            else f"missing key(s) {', '.join(missing)}"))
            continue
        if m["id"] in seen:
            problems.append(f"{where}: id '{m['id']}' used twice")
            continue
        seen.add(m["id"])
        if m["find"] == m["replace"]:
            problems.append(f"{where} ({m['id']}): replace equals find")
            continue
        src = os.path.join(root, m["file"])
        if not os.path.isfile(src):
            problems.append(f"{where} ({m['id']}): no file {m['file']}")
            continue
        with open(src, encoding="utf-8") as fh:
            n = fh.read().count(m["find"])
        if n != 1:
            problems.append(f"{where} ({m['id']}): its text occurs {n} times in {m['file']}, "
                            "not once (the code changed: update the entry)")
            continue
        entries.append(m)
    return entries, problems


def run(cmd, cwd, log):
    with open(log, "w", encoding="utf-8") as fh:
        return subprocess.run(cmd, shell=True, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT).returncode


def failed_tests(log):
    with open(log, encoding="utf-8", errors="replace") as fh:
        return [m.group(1) for line in fh if (m := FAILED_TEST.match(line))]


def mutate_one(m, root, build_cmd, test_cmd, work):
    src = os.path.join(root, m["file"])
    with open(src, encoding="utf-8") as fh:
        original = fh.read()
    # Put the original back however this ends (an exception, Ctrl-C, SIGTERM).
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(original.replace(m["find"], m["replace"], 1))
        start = time.monotonic()
        build_log = os.path.join(work, f"{m['id']}.build.log")
        if run(build_cmd, root, build_log) != 0:
            return {"verdict": "does-not-build", "log": build_log}
        test_log = os.path.join(work, f"{m['id']}.test.log")
        rc = run(test_cmd, root, test_log)
        seconds = round(time.monotonic() - start, 1)
        if rc == 0:
            return {"verdict": "survived", "seconds": seconds, "log": test_log}
        return {"verdict": "killed", "seconds": seconds, "by": failed_tests(test_log),
                "log": test_log}
    finally:
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(original)
        signal.signal(signal.SIGTERM, previous)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--list", help="mutation list (default tools/mutation/mutations.yaml)")
    ap.add_argument("--check", action="store_true", help="only check that every entry applies")
    ap.add_argument("--only", nargs="+", metavar="ID", help="run these entries only")
    ap.add_argument("--build", default="ninja -C build -j2", help="build command (run in ROOT)")
    # tools.mutations_apply is left out: a mutated file fails it by design.
    ap.add_argument("--test", default="MPRDMA_SOURCE_DIR=$PWD ctest --test-dir build -j2 "
                    "-L 'unit|integration|scenario|rtl' -E '^tools[.]mutations_apply$' --timeout 600",
                    help="test command (run in ROOT); non-zero exit = the mutation was caught")
    ap.add_argument("--work", default="/tmp/mprdma-mutation", help="directory for the logs")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip building and testing the unmutated tree first")
    ap.add_argument("--report", help="write the verdicts as JSON here")
    args = ap.parse_args()
    path = args.list or os.path.join(here, "mutations.yaml")
    entries, problems = load(path, args.root)
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if args.only:
        unknown = set(args.only) - {m["id"] for m in entries}
        if unknown:
            sys.exit(f"error: no applicable mutation with id {', '.join(sorted(unknown))}")
        entries = [m for m in entries if m["id"] in args.only]
    if args.check:
        print(f"{len(entries)} mutation(s) apply, {len(problems)} do not")
        sys.exit(1 if problems else 0)

    os.makedirs(args.work, exist_ok=True)
    if not args.no_baseline:
        # Without a clean baseline every mutation would look caught.
        for what, cmd in (("build", args.build), ("test", args.test)):
            log = os.path.join(args.work, f"baseline.{what}.log")
            if run(cmd, args.root, log) != 0:
                sys.exit(f"error: the unmutated tree fails its {what} command (see {log}); "
                         "fix that first, or every mutation would count as caught")
    results = {}
    for i, m in enumerate(entries, 1):
        r = mutate_one(m, args.root, args.build, args.test, args.work)
        results[m["id"]] = dict(r, file=m["file"], breaks=m["breaks"])
        caught = f" by {', '.join(r['by'][:3])}" + (" ..." if len(r.get("by", [])) > 3 else "") \
            if r.get("by") else ""
        print(f"[{i}/{len(entries)}] {m['id']}: {r['verdict']}{caught}", flush=True)
    # Put the build back in step with the restored sources.
    run(args.build, args.root, os.path.join(args.work, "restore.build.log"))
    survived = sorted(k for k, r in results.items() if r["verdict"] == "survived")
    killed = sum(r["verdict"] == "killed" for r in results.values())
    print(f"{killed} killed, {len(survived)} survived, "
          f"{len(results) - killed - len(survived)} did not build")
    for k in survived:
        print(f"  survived: {k} ({results[k]['file']}): {results[k]['breaks']}")
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1, sort_keys=True)
    sys.exit(1 if survived or problems else 0)


if __name__ == "__main__":
    main()
