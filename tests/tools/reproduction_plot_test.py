#!/usr/bin/env python3
"""tools/report/reproduction.py's row plot and summary: metrics are grouped
into one panel per stem (a quantity, one unit), stems with a published figure
first, bars in their labels' numeric order; the figures `== <number>` checks
compare with are marked; a row with no numeric measurement draws nothing; the
summary table names the metrics a row is judged by (published or named by a
check, on either side), in the results' order; --rows keeps the other rows'
summary lines and details sections.

The paper-like figures of docs/reproduction-rows.yaml `figures:`: x in
numeric order from labels or values, a lines figure with whiskers and the
published overlay, a timeseries from a run directory with the scenario's
event markers, a missing metric drawn around and named, never a crash, the
same PNG twice, unknown spec keys refused with the key and the row, the
committed rows file valid and its templates the scenarios' own, and the
report placing the figure first and the metric bars as the appendix."""
import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import yaml  # noqa: E402

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def metric(value, seeds=(1, 2)):
    vals = [value] * len(seeds)
    return {"measured": True, "value": value, "min": value, "max": value, "values": vals}


def spread_metric(values):
    """A reduced metric over seeds: the mean, min, max and every value."""
    mean = sum(values) / len(values)
    return {"measured": True, "value": mean, "mean": mean, "min": min(values),
            "max": max(values), "stddev": 0.0, "values": list(values), "stat": "mean"}


def sweep_results(params, metrics, seeds=(1, 2)):
    """A reproduce results.json as the schema has it: params [(name, labels,
    values)], points the product of their labels in sweep order, metrics in
    sorted order (as the writer sorts keys)."""
    points = [{"id": "base", "labels": {}}]
    for name, labels, _values in params:
        points = [{"id": "_".join(x for x in (p["id"] if p["labels"] else "", f"{name}-{lab}")
                                  if x),
                   "labels": dict(p["labels"], **{name: lab})}
                  for p in points for lab in labels]
    for p in points:
        p["runs"] = [{"seed": s, "dir": f"runs/{p['id']}/{s}", "status": "ok"} for s in seeds]
    return {"schema": "mprdma-vp-reproduce-1", "row": "X1", "name": "synthetic",
            "seeds": list(seeds),
            "parameters": [{"name": n, "key": "k", "labels": list(ls), "values": list(vs)}
                           for n, ls, vs in params],
            "points": points, "metrics": dict(sorted(metrics.items())), "published": {},
            "checks": [], "verdict": "not-run", "failed_runs": []}


def new_axes():
    fig, ax = plt.subplots()
    return fig, ax


def star_points(ax):
    """(x, y) of every star (the published overlay) drawn on the axes."""
    out = []
    for line in ax.lines:
        if line.get_marker() == "*" and len(line.get_xdata()):
            out += list(zip(map(float, line.get_xdata()), map(float, line.get_ydata())))
    return out


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
    # results.json sorts its keys as text; the bars go in numeric order.
    text_order = [(f"goodput_gbps.conns_{n}", metric(1.0)) for n in ("1024", "128", "16", "256")]
    text_order += [(f"loss.t.loss_{x}", metric(1.0)) for x in ("0.5", "10", "2")]
    bars = {stem: [label for label, _, _ in g] for stem, g in rep.metric_groups(text_order, {})}
    check(bars.get("goodput_gbps") == ["conns_16", "conns_128", "conns_256", "conns_1024"],
          f"bars in numeric order: {bars.get('goodput_gbps')}")
    check(bars.get("loss") == ["t.loss_0.5", "t.loss_2", "t.loss_10"],
          f"decimal labels in numeric order: {bars.get('loss')}")
    check(sorted(["b_2", "a_10", "a_9", "a"], key=rep.natural_key) == ["a", "a_9", "a_10", "b_2"],
          "text compares as text, numbers as numbers")
    check([rep.label_number(x) for x in ("loss_0.5", "conns_16", "512KB", "mmio")]
          == [0.5, 16.0, 512.0, None], "a label's last number")
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

    verdict_tests(rep)
    x_axis_tests(rep)
    lines_figure_tests(rep, a.work)
    bars_figure_tests(rep)
    timeseries_tests(rep, a.work)
    missing_tests(rep, a.work)
    spec_validation_tests(rep, a.script)
    report_tests(a.script, a.work)

    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("ok")


def verdict_tests(rep):
    """The summary's verdict cell: the row's verdict, then the checks that
    did not match by name, as results.json lists them."""
    text = rep.verdict_text({"verdict": "mismatch", "failing_checks": [
        "m.a == 10 (mismatch) [headline]", "m.b <= 1 (partial)"]})
    check(text.startswith("**mismatch**"), f"the verdict first: {text}")
    check("m.a == 10 (mismatch) [headline]" in text and "m.b <= 1 (partial)" in text
          and text.index("m.a") < text.index("m.b"),
          f"every failing check by name, in order: {text}")
    lines = rep.sensitivity_lines({"key": "nic.mprdma.rto", "why": "no RTO in the paper",
                                   "values": ["160us", "640us"],
                                   "metrics": {"g.mprdma": {"half": 30.5, "as_run": 31.25,
                                                            "double": None}}})
    table = "\n".join(lines)
    check("`nic.mprdma.rto`" in table and "no RTO in the paper" in table
          and "| 160us (half) | as run | 640us (double) |" in table
          and "| g.mprdma | 30.5 | 31.25 | - |" in table,
          f"the sensitivity table: the key, why, and half / as run / double: {table}")
    check(rep.sensitivity_lines(None) == [], "no sensitivity, no table")
    text = rep.verdict_text({"verdict": "match (calibrated)", "failing_checks": []})
    check(text == "**match (calibrated)**", f"nothing listed when all match: {text}")


def x_axis_tests(rep):
    res = sweep_results([("n", ["16", "1024", "128"], ["4", "256", "32"])], {})
    pos, numeric = rep.x_positions({"x": "n"}, res, ["16", "1024", "128"])
    check(numeric and pos == {"16": 16.0, "1024": 1024.0, "128": 128.0},
          f"x from the labels' numbers: {pos}")
    pos, numeric = rep.x_positions({"x": "n", "x_from": "value"}, res, ["16", "1024", "128"])
    check(numeric and pos == {"16": 4.0, "1024": 256.0, "128": 32.0},
          f"x_from value reads the parameter's values: {pos}")
    res = sweep_results([("mode", ["mmio", "doorbell"], ["1", "10"])], {})
    pos, numeric = rep.x_positions({"x": "mode"}, res, ["mmio", "doorbell"])
    check(numeric and pos == {"mmio": 1.0, "doorbell": 10.0},
          f"labels without numbers fall back to the values: {pos}")
    res = sweep_results([("case", ["normal", "misconfig", "degradation"],
                          ["40Gbps", "40Gbps", "1Gbps"])], {})
    pos, numeric = rep.x_positions({"x": "case"}, res, ["normal", "misconfig", "degradation"])
    check(not numeric and pos == {"normal": 0, "misconfig": 1, "degradation": 2},
          f"labels sharing a number are categories in sweep order: {pos}")
    check(rep.without_number("qp_per_conn.conns_100") == "qp_per_conn.conns",
          "a line per label less its number")


def m2_like():
    """M2's shape: transports t over loss rates pct (labels "0.5", "1", "10")."""
    metrics = {}
    for t, base in (("dcqcn", 15.0), ("mprdma", 35.0)):
        for pct, drop in (("0.5", 0.0), ("1", 2.0), ("10", 6.0)):
            metrics[f"goodput_gbps.{t}.loss_{pct}"] = spread_metric([base - drop - 1,
                                                                    base - drop + 1])
    return sweep_results([("t", ["dcqcn", "mprdma"], ["dcqcn", "none"]),
                          ("pct", ["0.5", "1", "10"], ["0.005", "0.01", "0.1"])], metrics)


M2_SPEC = {"kind": "lines", "title": "Fig 11a", "x": "pct", "x_label": "loss (%)", "log_x": True,
           "y": "goodput_gbps.{t}.loss_{pct}", "y_label": "goodput (Gbps)", "series": "t",
           "legend": {"mprdma": "MP-RDMA"},
           "published": [{"x": 0.5, "y": 17.5, "series": "dcqcn", "label": "~17.5"},
                         {"y": 38, "series": "mprdma", "label": "~38 at every loss rate"}],
           "markers": [{"at": 2, "label": "a marker"}]}


def lines_figure_tests(rep, work):
    res = m2_like()
    rep.validate_figure("test", M2_SPEC)
    fig, ax = new_axes()
    missing = rep.draw_lines(ax, M2_SPEC, res)
    check(missing == [], f"every metric of the spec is there: {missing}")
    drawn = [c for c in ax.containers if hasattr(c, "has_yerr")]
    check(len(drawn) == 2 and all(c.has_yerr for c in drawn),
          f"one line per transport, with whiskers: {len(drawn)}")
    by_label = {c.get_label(): c for c in drawn}
    check(set(by_label) == {"dcqcn", "MP-RDMA"}, f"legend names: {sorted(by_label)}")
    line = by_label.get("dcqcn")
    xs = list(map(float, line.lines[0].get_xdata())) if line else []
    ys = list(map(float, line.lines[0].get_ydata())) if line else []
    check(xs == [0.5, 1.0, 10.0] and ys == [15.0, 13.0, 9.0],
          f"x in numeric order (results have loss_10 before loss_2 as text): {xs} {ys}")
    # Whiskers min..max over seeds: each point's bar spans value - 1 .. value + 1.
    segs = line.lines[2][0].get_segments() if line else []
    spans = sorted((float(sg[0][1]), float(sg[1][1])) for sg in segs)
    check(spans == [(8.0, 10.0), (12.0, 14.0), (14.0, 16.0)], f"whiskers min..max: {spans}")
    check(ax.get_xscale() == "log", "log_x gives a log x axis")
    check(star_points(ax) == [(0.5, 17.5)], f"the published point as a star: {star_points(ax)}")
    levels = [float(ln.get_ydata()[0]) for ln in ax.lines
              if ln.get_linestyle() == "--" and len(ln.get_ydata())]
    check(38.0 in levels, f"a published figure without x is a dashed line: {levels}")
    verticals = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
    check(len(verticals) == 1 and float(verticals[0].get_xdata()[0]) == 2.0,
          "a marker is a vertical line at its x")
    star = [ln for ln in ax.lines if ln.get_marker() == "*" and len(ln.get_xdata())]
    check(star and star[0].get_color() == line.lines[0].get_color(),
          "a published point takes its series' colour")
    plt.close(fig)

    # One parameter for both line and x (R1): a line per label less its number.
    labels = [f"{q}.conns_{n}" for q in ("qp_per_conn", "shared_qp") for n in (200, 100)]
    r1 = sweep_results([("p", labels, ["1"] * 4)],
                       {f"gbps.{lab}": metric(float(i)) for i, lab in enumerate(labels)})
    fig, ax = new_axes()
    missing = rep.draw_lines(ax, {"kind": "lines", "x": "p", "series": "p", "y": "gbps.{p}"}, r1)
    got = {c.get_label(): (list(map(float, c.lines[0].get_xdata())),
                           list(map(float, c.lines[0].get_ydata())))
           for c in ax.containers if hasattr(c, "has_yerr")}
    check(missing == [] and got == {"qp_per_conn.conns": ([100.0, 200.0], [1.0, 0.0]),
                                    "shared_qp.conns": ([100.0, 200.0], [3.0, 2.0])},
          f"x and series from one parameter's labels: {got} {missing}")
    plt.close(fig)

    # The whole row: one PNG, byte for byte the same from the same results.
    png = os.path.join(work, "lines.png")
    notes = rep.plot_figures("X1", res, [M2_SPEC, dict(M2_SPEC, log_x=False)], png)
    check(notes == [] and os.path.getsize(png) > 0, f"a row's figures drawn: {notes}")
    with open(png, "rb") as fh:
        first = fh.read()
    rep.plot_figures("X1", res, [M2_SPEC, dict(M2_SPEC, log_x=False)], png)
    with open(png, "rb") as fh:
        check(fh.read() == first, "the same results give the same PNG")
    check(b"Software" not in first and b"Creation" not in first, "no version or date in the PNG")


def bars_figure_tests(rep):
    metrics = {f"tput.{v}.{c}": metric(x) for v, c, x in (
        ("ooo", "normal", 1.0), ("ooo", "misconfig", 0.98), ("ooo", "degradation", 0.9),
        ("none", "misconfig", 0.5), ("none", "degradation", 0.3))}
    res = sweep_results([("v", ["ooo", "none"], ["true", "false"]),
                         ("case", ["normal", "misconfig", "degradation"],
                          ["40Gbps", "40Gbps", "1Gbps"])], metrics)
    # combine: zip; (none, normal) is not a point.
    res["points"] = [p for p in res["points"] if p["id"] != "v-none_case-normal"]
    spec = {"kind": "bars", "x": "case", "series": "v", "y": "tput.{v}.{case}",
            "published": [{"x": "degradation", "series": "none", "y": 0.325}]}
    rep.validate_figure("test", spec)
    fig, ax = new_axes()
    missing = rep.draw_bars(ax, spec, res)
    check(missing == [], f"points that are not in the sweep are not missing: {missing}")
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    check(ticks == ["normal", "misconfig", "degradation"], f"groups in sweep order: {ticks}")
    heights = sorted(round(p.get_height(), 3) for p in ax.patches)
    check(heights == [0.3, 0.5, 0.9, 0.98, 1.0], f"a bar per point: {heights}")
    bar = [p for p in ax.patches if round(p.get_height(), 3) == 0.3]
    stars = star_points(ax)
    check(bar and stars and abs(stars[0][0] - (bar[0].get_x() + bar[0].get_width() / 2)) < 1e-9
          and stars[0][1] == 0.325, f"the published figure on its bar: {stars}")
    plt.close(fig)


def write_run(run_dir, series, with_results=True, config=None):
    """A run directory: series/<name>.csv per series and (with_results) a
    results.json that lists them as the schema does, with config (the
    effective configuration)."""
    os.makedirs(os.path.join(run_dir, "series"), exist_ok=True)
    doc = {"schema": "mprdma-vp/results/1", "links": {}, "nics": {}, "config": config or {}}
    for name, (unit, samples) in series.items():
        csv = f"series/{name}.csv"
        with open(os.path.join(run_dir, csv), "w", encoding="utf-8") as fh:
            fh.write(f"time_s,{unit}\n" + "".join(f"{t},{v}\n" for t, v in samples))
        prefix, owner, rest = name.split(".", 2)
        group = {"link": "links", "nic": "nics"}[prefix]
        doc[group].setdefault(owner, {})[rest] = {"csv": csv, "unit": unit, "points": len(samples)}
    if with_results:
        with open(os.path.join(run_dir, "results.json"), "w", encoding="utf-8") as fh:
            json.dump(doc, fh)


def timeseries_tests(rep, work):
    row_dir = os.path.join(work, "ts_row")
    shutil.rmtree(row_dir, ignore_errors=True)
    res = sweep_results([("rr", ["blackhole", "reroute"], ["false", "true"])], {}, seeds=(3, 4))
    # 0.1 ms samples over 4 ms: path 0 carries 10, path 1 drops to 0 from 2 ms.
    steps = [i * 1e-4 for i in range(1, 41)]
    series = {"link.t0-s0.a2b.gbps": ("Gbps", [(t, 10.0) for t in steps]),
              "link.t0-s1.a2b.gbps": ("Gbps", [(t, 10.0 if t <= 2e-3 + 1e-12 else 0.0)
                                               for t in steps]),
              "nic.h0.mac.tx_gbps": ("Gbps", [(t, 1.0) for t in steps])}
    write_run(os.path.join(row_dir, "runs", "rr-blackhole", "3"), series)
    # The other point's run has only the series/ files: read from there.
    write_run(os.path.join(row_dir, "runs", "rr-reroute", "3"),
              {"link.t0-s0.a2b.gbps": ("Gbps", [(t, 5.0) for t in steps])}, with_results=False)
    scenario = {"fabric": {"events": [{"at": "2ms", "link": "t0-s1", "action": "down"},
                                      {"at": "3ms", "link": "t0-s1", "action": "up"}]},
                "jobs": [{"name": "a", "duration": "1ms"},
                         {"name": "f1", "start": "1ms", "run_at": "1500us", "duration": "2ms",
                          "after_previous": False},
                         {"name": "f2", "after_previous": False}]}
    spec = {"kind": "timeseries", "patterns": ["link.t0-s?.a2b.gbps"], "where": {"rr": "blackhole"},
            "bin": "1ms", "markers": "fabric_events", "legend": {"t0-s1": "P1"},
            "published": [{"y": 10, "label": "a healthy path ~10"}]}
    rep.validate_figure("test", spec)
    fig, ax = new_axes()
    missing = rep.draw_timeseries(ax, spec, res, row_dir, scenario)
    check(missing == [], f"the run's series are there: {missing}")
    drawn = {ln.get_label(): ln for ln in ax.lines if not ln.get_label().startswith("_")
             and ln.get_linestyle() == "-"}
    check(set(drawn) == {"t0-s0", "P1"}, f"a line per matching series, short names: {set(drawn)}")
    p1 = drawn.get("P1")
    pts = list(zip(map(float, p1.get_xdata()), map(float, p1.get_ydata()))) if p1 else []
    check([(round(x, 6), round(y, 6)) for x, y in pts] == [(0.5, 10.0), (1.5, 10.0), (2.5, 0.0),
                                                           (3.5, 0.0)],
          f"1 ms bins at their middle, in ms: {pts}")
    verticals = sorted(float(ln.get_xdata()[0]) for ln in ax.lines if ln.get_linestyle() == ":")
    check(verticals == [2.0, 3.0], f"markers at the scenario's fabric events (ms): {verticals}")
    texts = [t.get_text() for t in ax.texts]
    check("t0-s1 down" in texts and "t0-s1 up" in texts, f"markers named: {texts}")
    check("rr-blackhole, seed 3" in ax.get_title(loc="left"),
          f"the title says which run: {ax.get_title(loc='left')}")
    check(ax.get_xlabel() == "simulated time (ms)", "time in ms on x")
    plt.close(fig)

    marks, notes = rep.scenario_markers({"markers": "jobs"}, scenario)
    check(marks == [(1.5e-3, "+f1"), (3.5e-3, "-f1"), (0.0, "+f2")] and notes == [],
          f"jobs: where those that do not wait start (the later of start and run_at) and "
          f"end: {marks} {notes}")

    # The run's effective configuration (includes, the point's overrides)
    # comes before the scenario file.
    moved = {"fabric": {"events": [{"at": "2500us", "link": "t0-s1", "action": "down"}]}}
    write_run(os.path.join(row_dir, "runs", "rr-blackhole", "4"), series, config=moved)
    fig, ax = new_axes()
    rep.draw_timeseries(ax, dict(spec, seed=4), res, row_dir, scenario)
    verticals = sorted(float(ln.get_xdata()[0]) for ln in ax.lines if ln.get_linestyle() == ":")
    check(verticals == [2.5], f"markers from the run's config first: {verticals}")
    plt.close(fig)

    fig, ax = new_axes()
    other = dict(spec, where={"rr": "reroute"}, legend={}, markers=[{"at": "1ms", "label": "m"}])
    other.pop("bin")
    missing = rep.draw_timeseries(ax, other, res, row_dir, scenario)
    steps_drawn = [ln for ln in ax.lines if ln.get_label() == "link.t0-s0.a2b.gbps"]
    check(missing == [] and len(steps_drawn) == 1,
          f"a run without results.json: its series/ files ({missing})")
    plt.close(fig)

    fig, ax = new_axes()
    missing = rep.draw_timeseries(ax, dict(spec, seed=4, where={"rr": "reroute"}), res, row_dir,
                                  scenario)
    check(any("link.t0-s?.a2b.gbps (not in run runs/rr-reroute/4)" in m for m in missing),
          f"a run without the series is named: {missing}")
    plt.close(fig)


def missing_tests(rep, work):
    res = m2_like()
    del res["metrics"]["goodput_gbps.mprdma.loss_1"]
    res["metrics"]["goodput_gbps.dcqcn.loss_10"] = {"measured": False, "values": [],
                                                    "missing_seeds": [1, 2]}
    fig, ax = new_axes()
    missing = rep.draw_lines(ax, M2_SPEC, res)
    check("goodput_gbps.mprdma.loss_1" in missing
          and "goodput_gbps.dcqcn.loss_10 (not measured)" in missing,
          f"a missing and an unmeasured metric are named: {missing}")
    drawn = [c for c in ax.containers if hasattr(c, "has_yerr")]
    check(len(drawn) == 2 and sorted(len(c.lines[0].get_xdata()) for c in drawn) == [2, 2],
          "what exists is drawn")
    check(any(t.get_text().startswith("missing: ") and "mprdma.loss_1" in t.get_text()
              for t in ax.texts), "the panel says what is missing")
    plt.close(fig)

    png = os.path.join(work, "missing.png")
    specs = [dict(M2_SPEC, y="nonexistent.{t}.{pct}"), dict(M2_SPEC, series="tt"),
             {"kind": "timeseries", "patterns": ["link.*"]}]
    notes = rep.plot_figures("X1", res, specs, png, row_dir=None, scenario=None)
    check(os.path.getsize(png) > 0, "a row whose figures name nothing there still draws")
    check(any(n.startswith("figure 1: nonexistent.dcqcn.0.5") for n in notes)
          and any("figure 2: sweep parameter 'tt'" in n for n in notes)
          and any(n.startswith("figure 3: no run") for n in notes),
          f"every figure's gaps are reported: {notes}")
    fig, ax = new_axes()
    missing = rep.draw_lines(ax, dict(M2_SPEC, series="tt"), res)
    check(missing and "'tt'" in missing[0] and not ax.containers,
          f"lines by a parameter the sweep has not: nothing merged, the name said: {missing}")
    plt.close(fig)
    # Whatever goes wrong inside one figure, the report goes on.
    saved = rep.DRAW["lines"]
    rep.DRAW["lines"] = lambda *args: 1 / 0
    try:
        notes = rep.plot_figures("X1", res, [M2_SPEC], png)
    finally:
        rep.DRAW["lines"] = saved
    check(notes == ["figure 1: could not draw: ZeroDivisionError: division by zero"],
          f"a figure that fails is named, not fatal: {notes}")


def spec_validation_tests(rep, script):
    def error(figures, row_extra=None):
        row = dict({"id": "X9", "experiment": "e", "published": "p", "figures": figures},
                   **(row_extra or {}))
        try:
            rep.validate_rows({"groups": [{"title": "g", "rows": [row]}]})
        except rep.SpecError as e:
            return str(e)
        return None
    good = {"kind": "lines", "x": "n", "y": "m.{n}"}
    check(error([good]) is None, f"a good spec passes: {error([good])}")
    for bad, key in ((dict(good, xlabel="n"), "'xlabel'"),
                     (dict(good, published=[{"y": 1, "colour": "red"}]), "'colour'"),
                     (dict(good, y=[{"metric": "m.{n}", "name": "a"}]), "'name'"),
                     (dict(good, markers=[{"at": 1, "text": "t"}]), "'text'"),
                     ({"kind": "timeseries", "patterns": ["a"], "log_x": True}, "'log_x'"),
                     ({"kind": "bars", "y": "m", "markers": []}, "'markers'")):
        msg = error([bad]) or ""
        check(key in msg and "row X9" in msg and "unknown key" in msg,
              f"unknown key {key} refused with its name and the row: {msg!r}")
    msg = error([good], {"figure": []}) or ""
    check("'figure'" in msg and "row X9" in msg, f"an unknown row key: {msg!r}")
    for bad, word in (({"kind": "line", "x": "n", "y": "m"}, "'kind'"),
                      ({"kind": "lines", "y": "m"}, "'x'"),
                      (dict(good, log_x="yes"), "'log_x'"),
                      (dict(good, published=[{"x": 1}]), "'y'"),
                      (dict(good, markers=[{"at": "2ms"}]), "'at'"),
                      ({"kind": "timeseries", "patterns": ["a"], "bin": "5"}, "'bin'"),
                      ({"kind": "timeseries", "patterns": ["a"], "markers": "events"},
                       "'markers'")):
        msg = error([bad]) or ""
        check(word in msg and "row X9" in msg, f"{bad} refused naming {word}: {msg!r}")

    # The committed rows file is valid, and its figures use the scenarios'
    # own sweep parameters, labels and metric templates.
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(script)), "..", ".."))
    with open(os.path.join(root, "docs", "reproduction-rows.yaml"), encoding="utf-8") as fh:
        rows = yaml.safe_load(fh)
    try:
        rep.validate_rows(rows)
    except rep.SpecError as e:
        check(False, f"docs/reproduction-rows.yaml: {e}")
    scenarios = {rid: yaml.safe_load(open(os.path.join(root, path), encoding="utf-8"))
                 for rid, path in rep.scenario_rows(os.path.join(root, "scenarios"), root).items()}
    drawn = 0
    for group in rows["groups"]:
        for row in group["rows"]:
            for i, spec in enumerate(row.get("figures") or []):
                drawn += 1
                at = f"{row['id']} figures[{i}]"
                sweep = (scenarios.get(row["id"]) or {}).get("sweep")
                check(sweep is not None, f"{at}: the row has a scenario with a sweep")
                if sweep is None:
                    continue
                labels = {p["name"]: [str(x) for x in (p.get("labels") or p["values"])]
                          for p in sweep.get("parameters") or []}
                for key in ("x", "series"):
                    check(key not in spec or spec[key] in labels,
                          f"{at}: {key} {spec.get(key)} is a sweep parameter of {sorted(labels)}")
                for param, want in (spec.get("where") or {}).items():
                    want = [str(w) for w in (want if isinstance(want, list) else [want])]
                    check(param in labels and set(want) <= set(labels[param]),
                          f"{at}: where {param}: {want} are labels of the sweep")
                if "y" in spec:
                    for _, template in rep.y_variants(spec):
                        check(template in (sweep.get("metrics") or {}),
                              f"{at}: y {template} is a sweep metric template of the scenario")
    check(drawn >= 20, f"the rows file has figures for the rows: {drawn}")


def report_tests(script, work):
    """The report end to end on a root of its own: the row with figures has
    them first and its metric bars as the appendix; the row without has only
    the bars, and an earlier report's figure of it is removed; a bad spec
    stops the report with the key and the row."""
    root = os.path.join(work, "root")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "docs", "reproduction"))
    os.makedirs(os.path.join(root, "scenarios"))
    rows = {"groups": [{"title": "G", "rows": [
        {"id": "X1", "experiment": "e", "published": "p", "figures": [M2_SPEC]},
        {"id": "X2", "experiment": "e", "published": "p"}]}]}
    for rid in ("X1", "X2"):
        with open(os.path.join(root, "scenarios", f"{rid}.yaml"), "w", encoding="utf-8") as fh:
            if rid == "X1":
                fh.write("# Row X1.\n#\n# Declared choices (docs/calibration.md): the RTO of\n"
                         "# 320 us.\n#\n# Not part of it.\n")
            fh.write(f"name: {rid.lower()}\nrow: {rid}\n")
            if rid == "X1":
                fh.write("differs:\n  - \"MTU 1024, not the paper's ~1.4 KB: RoCE on 1500 B\"\n")
    results = os.path.join(work, "results")
    for rid in ("X1", "X2"):
        os.makedirs(os.path.join(results, rid), exist_ok=True)
        with open(os.path.join(results, rid, "results.json"), "w", encoding="utf-8") as fh:
            json.dump(dict(m2_like(), row=rid), fh)
    stale = os.path.join(root, "docs", "reproduction", "X2.png")
    with open(stale, "wb") as fh:
        fh.write(b"an earlier report's plot")

    def run(doc):
        rows_path = os.path.join(root, "docs", "reproduction-rows.yaml")
        with open(rows_path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(doc, fh)
        return subprocess.run([sys.executable, script, "--root", root, "--results", results],
                              capture_output=True, text=True, timeout=100)
    done = run(rows)
    check(done.returncode == 0, f"the report runs: {done.stderr}")
    with open(os.path.join(root, "docs", "reproduction.md"), encoding="utf-8") as fh:
        text = fh.read()
    x1 = text[text.index("### X1"):text.index("### X2")] if "### X2" in text else ""
    x2 = text[text.index("### X2"):] if "### X2" in text else ""
    images = re.findall(r"!\[[^]]*\]\((reproduction/[^)]+)\)", x1)
    check(images == ["reproduction/X1.png", "reproduction/X1-metrics.png"]
          and "Appendix" in x1[x1.index("X1.png"):] if images else False,
          f"X1: the figure first, the metric bars as the appendix: {images}")
    check(x1.index("X1.png") < x1.index("| metric | check") if "| metric | check" in x1
          else x1.index("X1.png") < x1.index("All metrics"), "the figure comes before the tables")
    check("Differs from the paper" in x1 and "- MTU 1024, not the paper's ~1.4 KB" in x1,
          "X1 lists its scenario's declared differences")
    check("Differs from the paper" not in x2, "X2 declares none and lists none")
    check("Declared choices (docs/calibration.md): the RTO of 320 us. (from the scenario's header)"
          in x1 and "Not part of it" not in x1,
          "X1 names the declared choices of its header's paragraph, and only that paragraph")
    check("Declared choices" not in x2, "X2's header names none")
    images = re.findall(r"!\[[^]]*\]\((reproduction/[^)]+)\)", x2)
    check(images == ["reproduction/X2-metrics.png"], f"X2: only the metric bars: {images}")
    for name in ("X1.png", "X1-metrics.png", "X2-metrics.png"):
        check(os.path.exists(os.path.join(root, "docs", "reproduction", name)), f"{name} written")
    check(not os.path.exists(stale), "a row without figures loses an earlier report's figure")

    bad = {"groups": [{"title": "G", "rows": [
        {"id": "X1", "experiment": "e", "published": "p",
         "figures": [dict(M2_SPEC, ylabel="goodput")]}]}]}
    done = run(bad)
    check(done.returncode != 0 and "'ylabel'" in done.stderr and "row X1" in done.stderr,
          f"an unknown key stops the report, naming it and the row: {done.stderr!r}")


if __name__ == "__main__":
    main()
