#!/usr/bin/env python3
"""Seeded fuzzing of scenario files against the simulator.

Each round takes one scenario of the tree, changes it and runs it for a
few milliseconds of simulated time. The changes: one to three values of the
right kind scaled far up or down (0, 1e-9 .. 1e9 times, integer extremes),
which the simulator must either refuse with a clear error or run; values of
the wrong kind (a duration where a size belongs, negative, NaN-like,
empty), which it must refuse; or, one round in five, the structure: a key
the simulator does not know (which it must refuse by name), a key deleted
(a default or a refusal) or a list item doubled (duplicate names, links,
jobs).

What every round must show ("bad input gets a clear error and loses
nothing"):
  * the simulator exits with 0 (ran), 1 (ran, a job unfinished or an error
    logged) or 2 (refused the configuration): never a signal;
  * a refusal says "error: <the scenario file>..." on its last line;
  * a run that finished wrote a results.json that parses;
  * no run takes more than --max-rss-mib of memory or --timeout seconds;
  * every --repeat-every'th run that finished is run again and must give the
    same metrics, bit for bit (determinism).

Usage:
  scenario_fuzz.py --sim build/vp/sim/mprdma-vp-sim --scenarios scenarios \\
      --seed 1 --runs 60 --work /tmp/fuzz [--jobs 2]
Prints one line per round and a summary; exits 1 if any round failed. A
failed round's scenario is kept as <work>/failed-<round>.yaml, to run by
hand with `mprdma-vp-sim run`.
"""

import argparse
import concurrent.futures
import glob
import json
import os
import random
import re
import subprocess
import sys
import threading

import yaml

# Keys that are text or describe the run rather than configure it.
SKIP_TOP = {"name", "description", "end_time", "metrics", "sweep", "checks", "published", "row",
            "differs", "include", "sensitivity"}

SCALES = [0, 1e-9, 1e-6, 1e-3, 0.01, 0.3, 0.5, 0.9, 1.1, 2, 3, 10, 1000, 1e6, 1e9]
INT_EXTREMES = [0, 1, 2**31, 2**32 - 1, 2**63 - 1]
WRONG_KIND = ["-1", "1e400", "nan", "''", "[]", "{}", "null", "true", "1ns", "1B", "1Gbps",
              "1MHz", "-0.5", "99999999999999999999", "abc"]


def leaves(node, path):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, path + [k])
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, path + [i])
    else:
        yield path, node


def scaled(rng, v):
    """The same kind of value, far from where it was."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return int(v * rng.choice(SCALES)) if rng.random() < 0.8 else rng.choice(INT_EXTREMES)
    if isinstance(v, float):
        return v * rng.choice(SCALES)
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(v))
    if not m:
        return v
    x = float(m.group(1)) * rng.choice(SCALES)
    text = ("%d" % x) if x == int(x) and x < 1e18 else ("%.6g" % x)
    return text + m.group(2)


def containers(node, path):
    """Every mapping and list under node, with its path."""
    if isinstance(node, (dict, list)):
        yield path, node
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            yield from containers(v, path + [k])


def restructure(rng, doc, kind):
    """A key added (unknown to the simulator), deleted, or a list item
    doubled; returns the change as text and, for an unknown key, its name."""
    spots = [(p, n) for p, n in containers(doc, []) if p and p[0] not in SKIP_TOP]
    maps = [(p, n) for p, n in spots if isinstance(n, dict) and n]
    lists = [(p, n) for p, n in spots if isinstance(n, list) and n]
    if kind == "unknown" and maps:
        path, node = rng.choice(maps)
        key = "fuzz_unknown_%d" % rng.randrange(1000)
        node[key] = 1
        return "+" + ".".join(map(str, path + [key])), key
    if kind == "delete" and maps:
        path, node = rng.choice(maps)
        key = rng.choice(list(node))
        del node[key]
        return "-" + ".".join(map(str, path + [key])), None
    if lists:
        path, node = rng.choice(lists)
        i = rng.randrange(len(node))
        node.insert(i, yaml.safe_load(yaml.safe_dump(node[i])))
        return "2x" + ".".join(map(str, path + [i])), None
    return "(nothing)", None


def mutate(rng, doc):
    """Changes doc in place: 1-3 values, or its structure once. Returns the
    changes as text and the name of an added unknown key (or None)."""
    r = rng.random()
    if r < 0.2:
        change, unknown = restructure(rng, doc, "unknown" if r < 0.08 else
                                      "delete" if r < 0.15 else "duplicate")
        return [change], unknown
    candidates = [(p, v) for p, v in leaves(doc, []) if p[0] not in SKIP_TOP]
    # Values with a magnitude (numbers, quantities such as 40Gbps, flags).
    quantities = [(p, v) for p, v in candidates
                  if isinstance(v, (bool, int, float)) or re.match(r"[0-9.]", str(v))]
    changes = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        if quantities and rng.random() < 0.75:
            path, old = rng.choice(quantities)
            new = scaled(rng, old)
        else:
            path, old = rng.choice(candidates)
            new = yaml.safe_load(rng.choice(WRONG_KIND))
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = new
        changes.append(".".join(map(str, path)) + "=" + json.dumps(new))
    return changes, None


def run_sim(sim, scenario, out, timeout):
    """Runs one scenario; returns (exit status or 'timeout', stdout, stderr,
    the child's peak resident memory in MiB)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "stdout"), "w+") as so, open(os.path.join(out, "stderr"), "w+") as se:
        proc = subprocess.Popen([sim, "run", scenario, "--quiet", "--out", out], stdout=so, stderr=se)
        fired = []
        timer = threading.Timer(timeout, lambda: (fired.append(True), proc.kill()))
        timer.start()
        # wait4 reaps this child and gives its own resource usage.
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        so.seek(0)
        se.seek(0)
        stdout, stderr = so.read(), se.read()
    rc = "timeout" if fired else proc.returncode
    return rc, stdout, stderr, usage.ru_maxrss / 1024


def metrics_of(out):
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f).get("metrics")


def one_round(args, index, scenario, changes, unknown, doc_text, repeat):
    work = os.path.join(args.work, "round-%d" % index)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "scenario.yaml")
    with open(path, "w") as f:
        f.write(doc_text)
    out = os.path.join(work, "out")
    rc, stdout, stderr, rss = run_sim(args.sim, path, out, args.timeout)
    problems = []
    last_err = (stderr.strip().splitlines() or [""])[-1]
    if rc == "timeout":
        problems.append("did not finish within %d s" % args.timeout)
    elif rc not in (0, 1, 2):
        problems.append("exit status %d (signal %d)" % (rc, -rc) if rc < 0 else "exit status %d" % rc)
    elif rc == 2 and not last_err.startswith("error: " + path):
        problems.append("refused without naming the file: %r" % last_err)
    elif unknown and (rc != 2 or unknown not in stderr):
        problems.append("the unknown key %s was not refused by name" % unknown)
    elif rc == 1 and "error" not in (stdout + stderr).lower():
        problems.append("exit status 1 without an error message")
    elif rc == 0:
        try:
            first = metrics_of(out)
        except (OSError, ValueError) as e:
            problems.append("results.json unreadable: %s" % e)
            first = None
        if first is not None and repeat:
            out2 = os.path.join(work, "out-again")
            rc2, _, _, _ = run_sim(args.sim, path, out2, args.timeout)
            if rc2 != 0 or metrics_of(out2) != first:
                problems.append("a second run gave other metrics (exit %s)" % rc2)
    if rss > args.max_rss_mib:
        problems.append("took %.0f MiB of memory (limit %d)" % (rss, args.max_rss_mib))
    if problems:
        with open(os.path.join(args.work, "failed-%d.yaml" % index), "w") as f:
            f.write(doc_text)
    return {"round": index, "scenario": os.path.relpath(scenario, args.scenarios),
            "changes": changes, "exit": rc, "rss_mib": round(rss), "problems": problems,
            "message": last_err[-160:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim", required=True)
    ap.add_argument("--scenarios", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--end-time", default="2ms", help="simulated time per run")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    ap.add_argument("--max-rss-mib", type=int, default=4096)
    ap.add_argument("--repeat-every", type=int, default=5,
                    help="run every n-th finished run twice (0: never)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    # Guest scenarios need QEMU and an image: not here.
    files = sorted(f for f in glob.glob(os.path.join(args.scenarios, "**", "*.yaml"), recursive=True)
                   if os.sep + "qemu" + os.sep not in f)
    if not files:
        sys.exit("error: no scenarios under " + args.scenarios)
    rng = random.Random(args.seed)
    rounds = []
    for i in range(args.runs):
        scenario = rng.choice(files)
        with open(scenario) as f:
            doc = yaml.safe_load(f)
        # The mutated copy runs from the work directory: its includes
        # (a shared testbed) must still name the files beside the original.
        if "include" in doc:
            inc = doc["include"] if isinstance(doc["include"], list) else [doc["include"]]
            doc["include"] = [os.path.join(os.path.dirname(os.path.abspath(scenario)), f)
                              for f in inc]
        changes, unknown = mutate(rng, doc)
        for k in ("metrics", "sweep", "checks", "published", "row", "sensitivity", "differs"):
            doc.pop(k, None)
        doc["end_time"] = args.end_time
        repeat = args.repeat_every > 0 and i % args.repeat_every == 0
        rounds.append((i, scenario, changes, unknown, yaml.safe_dump(doc, sort_keys=False), repeat))
    failed = 0
    exits = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for r in pool.map(lambda a: one_round(args, *a), rounds):
            exits[str(r["exit"])] = exits.get(str(r["exit"]), 0) + 1
            status = "FAIL " + "; ".join(r["problems"]) if r["problems"] else "ok"
            print("round %3d %-32s exit %-7s %5d MiB %s  %s" %
                  (r["round"], r["scenario"], r["exit"], r["rss_mib"], status,
                   " ".join(r["changes"])), flush=True)
            failed += bool(r["problems"])
    print("seed %d: %d rounds, exits %s, %d failed" % (args.seed, args.runs,
          json.dumps(exits, sort_keys=True), failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
