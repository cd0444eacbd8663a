#!/usr/bin/env python3
"""Generates docs/reproduction.md and one plot per row from reproduce results.

Every row of docs/reproduction-rows.yaml is listed. A row whose scenario
exists (a scenarios/**.yaml with `row: <id>`) is reported from
<results>/<id>/results.json, written by `mprdma-vp-sim reproduce` (schema:
docs/results-schema.md); a row without a scenario is listed as "not yet"
with the issue that brings it. Runs no simulation.

    .venv/bin/python tools/report/reproduction.py [--root DIR] [--results DIR]
        [--rows ID,ID...]

With --rows, only the named rows are regenerated (their summary line, their
details section and their plot); every other row keeps the text it has in the
existing document, so one row can be re-run and reported without results for
all of them.
"""

import argparse
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import yaml  # noqa: E402


def md(text):
    """Text for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def fmt(v):
    return f"{v:.4g}"


def scenario_rows(scenarios_dir, root):
    """Row id -> scenario path (relative to root) for every scenario with `row:`."""
    out = {}
    for base, _dirs, files in os.walk(scenarios_dir):
        for f in sorted(files):
            if not f.endswith(".yaml"):
                continue
            path = os.path.join(base, f)
            with open(path, encoding="utf-8") as fh:
                try:
                    doc = yaml.safe_load(fh)
                except yaml.YAMLError:
                    continue
            if isinstance(doc, dict) and doc.get("row"):
                out[str(doc["row"])] = os.path.relpath(path, root)
    return out


def measured_value(m, seeds=False):
    """A reduced metric's value: mean ± stddev, a named bottleneck with how
    many seeds agree, or min/max with the mean; seeds: say over how many."""
    if not m.get("measured"):
        return "no measurement"
    n = len(m["values"])
    over = f"{n} seed" + ("" if n == 1 else "s")
    if isinstance(m["value"], str):  # a name (a bottleneck), not a number
        same = sum(1 for v in m["values"] if v == m["value"])
        text = f"{m['value']} ({same} of {over if seeds else n})"
    elif m["stat"] == "mean":
        text = f"{fmt(m['value'])} ± {fmt(m['stddev'])}" + (f" ({over})" if seeds else "")
    else:
        text = (f"{fmt(m['value'])} ({m['stat']}" + (f" over {over}" if seeds else "")
                + f", mean {fmt(m['mean'])})")
    if m.get("missing_seeds"):
        text += f", {len(m['missing_seeds'])} " + ("missing" if seeds else "seed(s) missing")
    return text


def measured_text(name, m):
    """One metric for the summary table: its name, value and seeds."""
    if not m.get("measured"):
        return f"{name}: no measurement"
    return f"{name} = {measured_value(m, seeds=True)}"


def headline_metrics(res):
    """The metrics a row is judged by, in the results' order: those with a
    published figure and those a check names (on either side)."""
    names = set(res.get("published") or {})
    word = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
    for c in res.get("checks") or []:
        names.add(c.get("metric"))
        names.update(w for w in word.findall(str(c.get("check", ""))) if w in res["metrics"])
    return [k for k in res["metrics"] if k in names]


def metric_groups(metrics, published):
    """Metrics grouped by stem (the name up to its first dot: one quantity, one
    unit), stems with a published figure first, then in the results' order."""
    groups = {}
    for name, m in metrics:
        stem, _, rest = name.partition(".")
        groups.setdefault(stem, []).append((rest or stem, name, m))
    first_seen = list(groups)
    order = sorted(first_seen, key=lambda s: (not any(n in published for _, n, _ in groups[s]),
                                              first_seen.index(s)))
    return [(stem, groups[stem]) for stem in order]


def published_targets(res):
    """metric -> (value, tolerance) for every check `== <number>`: the
    published figure a row compares with (checks against other metrics or
    with bounds are left out)."""
    number = re.compile(r"==\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)")
    targets = {}
    for c in res.get("checks") or []:
        m = number.fullmatch(str(c.get("check", "")).strip())
        if m and c.get("metric"):
            targets[c["metric"]] = (float(m.group(1)), float(c.get("tolerance") or 0.0))
    return targets


def wants_log_scale(values):
    """Bars two orders of magnitude apart (a collapse beside the figures
    compared, e.g. RoCE without PFC in I1) would flatten the others: such a
    panel is drawn on a log scale, when every bar is positive."""
    return all(v > 0 for v in values) and max(values) > 100 * min(values)


def plot_row(row_id, res, path):
    """One panel per metric stem (so a panel shares a unit): bars of each
    sweep metric's reduced value, whiskers min..max, dots per seed; bars of
    metrics with a published figure in orange, the figure an `== <number>`
    check compares with in red."""
    metrics = [(k, v) for k, v in res["metrics"].items()
               if v.get("measured") and not isinstance(v.get("value"), str)]
    if not metrics:
        return False
    published = res.get("published") or {}
    groups = metric_groups(metrics, published)
    targets = published_targets(res)
    widest = max(len(g) for _, g in groups)
    # Narrow panels go two abreast.
    cols = 2 if widest <= 8 and len(groups) > 2 else 1
    rows = (len(groups) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, squeeze=False,
                             figsize=(cols * max(4.5, 0.5 * widest + 2.0), 1.0 + 2.6 * rows))
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    for ax, (stem, group) in zip(axes.flat, groups):
        xs = list(range(len(group)))
        values = [m["value"] for _, _, m in group]
        # Clamped: a mean of identical values may differ from them in the last bit.
        lo = [max(0.0, m["value"] - m["min"]) for _, _, m in group]
        hi = [max(0.0, m["max"] - m["value"]) for _, _, m in group]
        colours = ["#dd8452" if name in published else "#4c72b0" for _, name, _ in group]
        ax.bar(xs, values, color=colours, alpha=0.85, yerr=[lo, hi], capsize=3)
        for x, (_, _, m) in zip(xs, group):
            ax.plot([x] * len(m["values"]), m["values"], "o", color="black", markersize=2.5)
        for x, (_, name, _) in zip(xs, group):
            if name in targets:
                value, tol = targets[name]
                ax.errorbar([x], [value], yerr=[[abs(value) * tol], [abs(value) * tol]],
                            fmt="_", color="#c44e52", markersize=22, capsize=6, elinewidth=1)
        ax.set_xticks(xs)
        ax.set_xticklabels([label for label, _, _ in group], rotation=30, ha="right", fontsize=7)
        log = wants_log_scale(values)
        if log:
            ax.set_yscale("log")
        ax.set_title(stem + (" (log scale)" if log else ""), fontsize=8, loc="left")
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(f"{row_id}: {res.get('name', '')} (verdict: {res.get('verdict', '?')})\n"
                 "orange: has a published figure; red: the figure a check compares with, and "
                 "its tolerance; whiskers: min..max over seeds; dots: seeds",
                 fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # No creation date or version in the file: the same results give the same PNG.
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return True


def existing_rows(path):
    """Row id -> (summary line, details section lines) of a generated document."""
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    summary, details = {}, {}
    row_line = re.compile(r"^\| (?:\[([A-Za-z0-9_.-]+)\]\(#[^)]*\)|([A-Za-z0-9_.-]+)) \|")
    current = None
    for line in lines:
        m = row_line.match(line)
        if m and current is None:
            summary[m.group(1) or m.group(2)] = line
        if line.startswith("### "):
            current = line[4:].strip()
            details[current] = []
        elif line.startswith("## "):
            current = None
        if current is not None:
            details[current].append(line)
    out = {}
    for rid, line in summary.items():
        section = details.get(rid, [])
        while section and section[-1] == "":
            section.pop()
        out[rid] = (line, section + [""] if section else [])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--results", help="directory of <row>/results.json (default ROOT/out/reproduce)")
    ap.add_argument("--out", help="Markdown to write (default ROOT/docs/reproduction.md)")
    ap.add_argument("--rows", help="comma-separated row ids: regenerate only these rows and "
                    "keep every other row as the existing document has it")
    args = ap.parse_args()
    root = args.root
    results_dir = args.results or os.path.join(root, "out", "reproduce")
    out_md = args.out or os.path.join(root, "docs", "reproduction.md")
    plots_dir = os.path.join(os.path.dirname(out_md), "reproduction")

    with open(os.path.join(root, "docs", "reproduction-rows.yaml"), encoding="utf-8") as fh:
        rows_doc = yaml.safe_load(fh)
    have = scenario_rows(os.path.join(root, "scenarios"), root)
    only = None
    if args.rows:
        only = {r.strip() for r in args.rows.split(",") if r.strip()}
        known = {row["id"] for group in rows_doc["groups"] for row in group["rows"]}
        unknown = sorted(only - known)
        if unknown:
            sys.exit(f"reproduction.py: --rows names unknown row(s): {', '.join(unknown)} "
                     "(rows are listed in docs/reproduction-rows.yaml)")
        kept = existing_rows(out_md)

    lines = [
        "<!-- Generated by `./mprdma-vp reproduce --all` (tools/report/reproduction.py); "
        "do not edit. -->",
        "",
        "# Reproduction of published results",
        "",
        "Every row of the reproduction table, with the figures this platform measured. A row",
        "with a scenario (`row:` in `scenarios/`) is run by `./mprdma-vp reproduce <id>`: every",
        "sweep point and seed in its own process, metrics reduced over the seeds (mean ± sample",
        "standard deviation unless the metric says min or max), and the scenario's checks give",
        "the verdict: match, partial (holds only within the check's tolerance), mismatch, or",
        "not-run (no measurement, or no check: figures reported beside another system's). Row "
        "sources and published figures: "
        "[reproduction-rows.yaml](reproduction-rows.yaml); results schema: "
        "[results-schema.md](results-schema.md).",
        "",
    ]
    details = []
    for group in rows_doc["groups"]:
        lines += [f"## {group['title']}", ""]
        if group.get("setup"):
            lines += [md(group["setup"]), ""]
        lines += ["| id | experiment | published | measured | verdict |", "|---|---|---|---|---|"]
        for row in group["rows"]:
            rid = row["id"]
            if only is not None and rid not in only and rid in kept:
                lines.append(kept[rid][0])
                details += kept[rid][1]
                continue
            exp = (row.get("source", "") + ": " if row.get("source") else "") + row["experiment"]
            scenario = have.get(rid)
            res_path = os.path.join(results_dir, rid, "results.json")
            if not scenario:
                pending = row.get("pending") or "no issue yet"
                lines.append(f"| {rid} | {md(exp)} | {md(row['published'])} | - | "
                             f"not yet: {md(pending)} |")
                continue
            if not os.path.exists(res_path):
                lines.append(f"| {rid} | {md(exp)} | {md(row['published'])} | "
                             f"`{scenario}` not run | not-run |")
                continue
            with open(res_path, encoding="utf-8") as fh:
                res = json.load(fh)
            # The summary names only what the row is judged by; every metric
            # is in the row's details (a sweep can export a hundred).
            head = headline_metrics(res) or list(res["metrics"])
            measured = "<br>".join(md(measured_text(k, res["metrics"][k])) for k in head)
            others = len(res["metrics"]) - len(head)
            if others:
                measured += f"<br>{others} more in [{rid}](#{rid.lower()})"
            if row.get("note"):
                measured = f"*{md(row['note'])}*<br>" + measured
            plot = os.path.join(plots_dir, f"{rid}.png")
            has_plot = plot_row(rid, res, plot)
            link = f"[{rid}](#{rid.lower()})"
            lines.append(f"| {link} | {md(exp)} | {md(row['published'])} | {measured or '-'} | "
                         f"{res['verdict']} |")
            d = [f"### {rid}", "", f"Scenario `{scenario}`, seeds {res['seeds']}, "
                 f"{len(res['points'])} point(s): "
                 + ", ".join(f"`{p['id']}`" for p in res["points"]) + ".", ""]
            if has_plot:
                d += [f"![{rid}](reproduction/{rid}.png)", ""]
            if res.get("checks"):
                d += ["| metric | check | verdict | reason |", "|---|---|---|---|"]
                for c in res["checks"]:
                    d.append(f"| {md(c['metric'])} | `{md(c['check'])}` "
                             f"(tolerance {fmt(c['tolerance'] * 100)} %) | {c['verdict']} | "
                             f"{md(c['reason'])} |")
                d.append("")
            if res.get("published"):
                d += ["Published, per metric: " + "; ".join(
                    f"{md(k)}: {md(v)}" for k, v in res["published"].items()), ""]
            seeds = len(res["seeds"])
            d += [f"All metrics (over {seeds} seed{'' if seeds == 1 else 's'}; mean ± sample "
                  "standard deviation unless named):", "",
                  "| metric | measured |", "|---|---|"]
            d += [f"| {md(k)} | {md(measured_value(v))} |" for k, v in res["metrics"].items()]
            d.append("")
            if res.get("failed_runs"):
                d += ["Failed runs: " + "; ".join(md(f) for f in res["failed_runs"]), ""]
            details += d
        lines.append("")
    if details:
        lines += ["## Details", ""] + details
    os.makedirs(os.path.dirname(out_md), exist_ok=True)
    with open(out_md, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines).rstrip("\n") + "\n")
    print(f"wrote {os.path.relpath(out_md, root)}", file=sys.stderr)


if __name__ == "__main__":
    main()
