#!/usr/bin/env python3
"""tools/report/reproduction.py's row plot and summary: metrics are grouped
into one panel per stem (a quantity, one unit), stems with a published figure
first; the figures `== <number>` checks compare with are marked; a row with no
numeric measurement draws nothing; the summary table names the metrics a row
is judged by (published or named by a check, on either side), in the results'
order; --rows keeps the other rows' summary lines and details sections."""
import argparse
import importlib.util
import os
import sys

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def metric(value, seeds=(1, 2)):
    vals = [value] * len(seeds)
    return {"measured": True, "value": value, "min": value, "max": value, "values": vals}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("reproduction", a.script)
    rep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rep)

    metrics = [("retransmits_per_ms.a", metric(900.0)),
               ("throughput.a.x", metric(0.9)),
               ("retransmits_per_ms.b", metric(3.0)),
               ("throughput.b.x", metric(0.5)),
               ("jain_min", metric(0.99))]
    groups = rep.metric_groups(metrics, {"throughput.b.x": "0.325"})
    stems = [stem for stem, _ in groups]
    check(stems == ["throughput", "retransmits_per_ms", "jain_min"],
          f"stems with a published figure first, then in order: {stems}")
    labels = {stem: [label for label, _, _ in g] for stem, g in groups}
    check(labels.get("throughput") == ["a.x", "b.x"], f"labels drop the stem: {labels}")
    check(labels.get("jain_min") == ["jain_min"], f"a bare stem is its own label: {labels}")

    targets = rep.published_targets({"checks": [
        {"metric": "throughput.b.x", "check": "== 0.325", "tolerance": 0.1},
        {"metric": "throughput.a.x", "check": ">= 0.95", "tolerance": 0.02},
        {"metric": "mops.b", "check": "== 1.54 * mops.a", "tolerance": 0.1},
        {"metric": "rate", "check": "== 2.5e-3"}]})
    check(targets == {"throughput.b.x": (0.325, 0.1), "rate": (2.5e-3, 0.0)},
          f"only `== <number>` checks are targets: {targets}")

    judged = rep.headline_metrics({
        "published": {"throughput.b.x": "0.325"},
        "checks": [{"metric": "jain_min", "check": ">= 1.4 * retransmits_per_ms.b"},
                   {"metric": "throughput.b.x", "check": "== 0.325"},
                   {"metric": "jain_min", "check": "<= nonexistent.metric"}],
        "metrics": dict(metrics)})
    check(judged == ["retransmits_per_ms.b", "throughput.b.x", "jain_min"],
          f"judged metrics in the results' order, unknown names ignored: {judged}")
    check(rep.headline_metrics({"metrics": dict(metrics)}) == [],
          "a row without published figures or checks has no headline")

    mean = dict(metric(2.0), stat="mean", stddev=0.5)
    check(rep.measured_value(mean) == "2 ± 0.5", f"mean ± stddev: {rep.measured_value(mean)}")
    low = dict(metric(1.0, seeds=(1, 2, 3)), stat="min", mean=1.25)
    check(rep.measured_value(low) == "1 (min, mean 1.25)", f"min: {rep.measured_value(low)}")
    named = {"measured": True, "value": "pcie", "values": ["pcie", "pu", "pcie"]}
    check(rep.measured_value(named) == "pcie (2 of 3)", f"a name: {rep.measured_value(named)}")
    gone = dict(mean, missing_seeds=[3])
    check(rep.measured_value(gone) == "2 ± 0.5, 1 seed(s) missing",
          f"missing seeds are named: {rep.measured_value(gone)}")
    check(rep.measured_value({"measured": False}) == "no measurement", "unmeasured")

    check(rep.wants_log_scale([2.0, 2.3, 250.0, 1.9]) and not rep.wants_log_scale([1.0, 99.0]),
          "a panel whose bars span more than 100x is drawn on a log scale")
    check(not rep.wants_log_scale([0.0, 5.0, 1000.0]) and not rep.wants_log_scale([-1.0, 500.0]),
          "not when a bar is zero or negative")

    os.makedirs(a.work, exist_ok=True)
    png = os.path.join(a.work, "row.png")
    if os.path.exists(png):
        os.remove(png)
    res = {"name": "t", "verdict": "partial", "published": {"throughput.b.x": "0.325"},
           "metrics": dict(metrics)}
    check(rep.plot_row("X1", res, png) and os.path.getsize(png) > 0, "a row with metrics is drawn")
    empty = os.path.join(a.work, "empty.png")
    res_text = {"metrics": {"bottleneck.a": {"measured": True, "value": "pcie"}}}
    check(not rep.plot_row("X2", res_text, empty) and not os.path.exists(empty),
          "a row with only text metrics draws nothing")

    # --rows keeps every other row as the existing document has it.
    doc = os.path.join(a.work, "existing.md")
    with open(doc, "w", encoding="utf-8") as fh:
        fh.write("\n".join([
            "# Reproduction", "", "## Group", "", "| id | experiment | published | measured "
            "| verdict |", "|---|---|---|---|---|", "| [A1](#a1) | e | p | m = 1 | match |",
            "| B2 | e | p | - | not yet: issue 9 |", "", "## Details", "", "### A1", "",
            "| metric | measured |", "|---|---|", "| m | 1 |", "", ""]))
    kept = rep.existing_rows(doc)
    check(sorted(kept) == ["A1", "B2", "id"], f"summary lines by id: {sorted(kept)}")
    check(kept["A1"][0].endswith("| match |") and kept["A1"][1][0] == "### A1"
          and kept["A1"][1][-2:] == ["| m | 1 |", ""],
          f"a row's details section, one blank line after: {kept['A1'][1]}")
    check(kept["B2"][1] == [], "a row without details keeps none")

    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("ok")


if __name__ == "__main__":
    main()
