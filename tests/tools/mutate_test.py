#!/usr/bin/env python3
"""tools/mutation/mutate.py on a tree whose answers are known: a source file
and a "test" that passes only while the file says GOOD. A mutation that
removes GOOD is killed, one that changes something else survives, one whose
build fails is reported as such; the file is restored after each; a tree
that fails its tests unmutated stops the run before any mutation; --check
refuses entries whose text no longer occurs exactly once, unknown keys and
repeated ids, naming the entry."""
import argparse
import json
import os
import shutil
import subprocess
import sys

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def write(path, text):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def mutate(script, root, listing, *extra):
    cmd = [sys.executable, script, "--root", root, "--list", listing,
           "--work", os.path.join(root, "logs"), *extra]
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    root = os.path.abspath(a.work)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "src"))
    source = "state = GOOD\nlimit = 2\n"
    write(os.path.join(root, "src", "block.txt"), source)
    listing = os.path.join(root, "mutations.yaml")
    write(listing, """mutations:
- {id: breaks_state, file: src/block.txt, breaks: the state, find: "= GOOD", replace: "= BAD"}
- {id: harmless, file: src/block.txt, breaks: the limit, find: "limit = 2", replace: "limit = 3"}
- {id: no_build, file: src/block.txt, breaks: syntax, find: "state", replace: "BUILD_ERROR"}
""")
    build = "! grep -q BUILD_ERROR src/block.txt"
    test = "grep -q GOOD src/block.txt"
    report = os.path.join(root, "report.json")
    r = mutate(a.script, root, listing, "--build", build, "--test", test, "--report", report)
    print(r.stdout, r.stderr)
    check(r.returncode == 1, f"a survivor makes the run fail: exit {r.returncode}")
    with open(report, encoding="utf-8") as fh:
        verdicts = {k: v["verdict"] for k, v in json.load(fh).items()}
    check(verdicts == {"breaks_state": "killed", "harmless": "survived",
                       "no_build": "does-not-build"}, f"verdicts: {verdicts}")
    check("survived: harmless (src/block.txt): the limit" in r.stdout, "the survivor is named")
    with open(os.path.join(root, "src", "block.txt"), encoding="utf-8") as fh:
        check(fh.read() == source, "the source is restored")

    r = mutate(a.script, root, listing, "--build", build, "--test", test, "--only", "breaks_state")
    check(r.returncode == 0 and "1 killed, 0 survived" in r.stdout,
          f"--only runs one, all killed: exit {r.returncode}: {r.stdout}")
    r = mutate(a.script, root, listing, "--only", "nonexistent")
    check(r.returncode != 0 and "nonexistent" in r.stderr, f"--only names an unknown id: {r.stderr}")

    r = mutate(a.script, root, listing, "--build", build, "--test", "grep -q NEVER src/block.txt")
    check(r.returncode != 0 and "the unmutated tree fails its test command" in r.stderr,
          f"a failing baseline stops the run: exit {r.returncode}: {r.stderr}")
    with open(os.path.join(root, "src", "block.txt"), encoding="utf-8") as fh:
        check(fh.read() == source, "a stopped run leaves the source as it was")

    r = mutate(a.script, root, listing, "--check")
    check(r.returncode == 0 and "3 mutation(s) apply, 0 do not" in r.stdout, f"check: {r.stdout}")
    write(listing, """mutations:
- {id: stale, file: src/block.txt, breaks: x, find: "state = OLD", replace: "y"}
- {id: twice, file: src/block.txt, breaks: x, find: "t", replace: "y"}
- {id: typo, file: src/block.txt, breaks: x, find: "limit", replace: "y", extra: 1}
- {id: ok, file: src/block.txt, breaks: x, find: "limit", replace: "y"}
- {id: ok, file: src/block.txt, breaks: x, find: "GOOD", replace: "y"}
- {id: nofile, file: src/none.txt, breaks: x, find: "a", replace: "b"}
""")
    r = mutate(a.script, root, listing, "--check")
    print(r.stdout, r.stderr)
    check(r.returncode == 1, f"stale entries fail the check: exit {r.returncode}")
    for needle in ["(stale): its text occurs 0 times", "(twice): its text occurs",
                   "mutations[2]: unknown key(s) extra", "id 'ok' used twice",
                   "(nofile): no file src/none.txt", "1 mutation(s) apply, 5 do not"]:
        check(needle in r.stdout + r.stderr, f"the check says {needle!r}")

    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("ok")


if __name__ == "__main__":
    main()
