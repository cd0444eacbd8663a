#!/usr/bin/env python3
"""Generates docs/reproduction.md and the plots of every row from reproduce results.

Every row of docs/reproduction-rows.yaml is listed. A row whose scenario
exists (a scenarios/**.yaml with `row: <id>`) is reported from
<results>/<id>/results.json, written by `mprdma-vp-sim reproduce` (schema:
docs/results-schema.md); a row without a scenario is listed as "not yet"
with the issue that brings it. Runs no simulation.

    .venv/bin/python tools/report/reproduction.py [--root DIR] [--results DIR]
        [--rows ID,ID...]

With --rows, only the named rows are regenerated (their summary line, their
details section and their plots); every other row keeps the text it has in the
existing document, so one row can be re-run and reported without results for
all of them.

Plots of a row, in docs/reproduction/: <id>.png draws the row's `figures:`
(the paper's axes, one panel per figure) and comes first in its details;
<id>-metrics.png, the appendix, has one bar per sweep metric, one panel per
metric stem, bars in the label's numeric order (conns_16 before conns_128).

A figure (a `figures:` entry of a row in docs/reproduction-rows.yaml; any
other key is an error that names it and the row):

    kind        lines, bars or timeseries (required)
    title       the panel's title
    x_label, y_label   axis labels, with units
    log_y       log scale on y (lines, bars, timeseries); log_x (lines)
    where       {parameter: label or [labels]}: only the sweep points with
                those labels (a timeseries draws the first such point)
    legend      {line key: name shown}
    published   the paper's figures: [{x, y, series, label}]; y is required,
                without x a horizontal line; series picks the line's colour
    markers     vertical lines: [{at, label}] (lines: an x value;
                timeseries: a time such as 60ms), or for a timeseries
                fabric_events (fabric.events) or jobs (+<job> where a job
                with after_previous: false starts, the later of start and
                run_at; -<job> at start + duration), from the run's
                effective configuration (results.json config), else from the
                scenario file
  lines and bars:
    x           the sweep parameter on the x axis (bars: the groups; optional
                for bars). Numeric when every label has a number (the last
                one: loss_0.5 -> 0.5, conns_16 -> 16), else from the
                parameter's values; otherwise categories in sweep order
    x_from      label (default) or value: where an x number is read first
    y           a sweep metric template ("goodput_gbps.{t}.loss_{pct}": each
                {parameter} is the point's label) or a list of
                {metric: template, label: text}, one line (bar) per entry
    series      a sweep parameter: one line (bar) per label; the x parameter
                itself: per label with its number taken out (R1's
                qp_per_conn.conns_100 -> qp_per_conn.conns)
  timeseries (one run: the first point that `where` leaves, its first seed):
    patterns    globs over the run's series names (required), e.g.
                link.t0-s*.a2b.gbps
    seed        the run's seed instead of the first
    from, to    the time window (e.g. 10ms); bin: mean over bins this wide
    y_scale     a factor on every value (e.g. bytes to packets)

Lines have whiskers min..max over the seeds; what a figure names and the
results do not have is drawn as far as it exists and listed in the panel.
"""

import argparse
import fnmatch
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import yaml  # noqa: E402

# A run's series are read as tools/report/plot_run.py reads them, beside this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_run import InputError, parse_time, read_series  # noqa: E402


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


NUMBER = re.compile(r"\d+(?:\.\d+)?")


def natural_key(label):
    """Sort key of a label whose numbers compare as numbers: loss_0.5 <
    loss_2 < loss_10, conns_16 < conns_128; text compares as text."""
    key, pos = [], 0
    for m in NUMBER.finditer(label):
        if m.start() > pos:
            key.append((1, 0.0, label[pos:m.start()]))
        key.append((0, float(m.group()), ""))
        pos = m.end()
    if pos < len(label):
        key.append((1, 0.0, label[pos:]))
    return key


def label_number(label):
    """The last number in a sweep label (loss_0.5 -> 0.5, conns_16 -> 16,
    512KB -> 512), None when it has none."""
    found = NUMBER.findall(str(label))
    return float(found[-1]) if found else None


def metric_groups(metrics, published):
    """Metrics grouped by stem (the name up to its first dot: one quantity, one
    unit), stems with a published figure first, then in the results' order."""
    groups = {}
    for name, m in metrics:
        stem, _, rest = name.partition(".")
        groups.setdefault(stem, []).append((rest or stem, name, m))
    # results.json has its keys sorted as text (conns_1024 before conns_16):
    # a panel's bars go in the labels' numeric order.
    for group in groups.values():
        group.sort(key=lambda item: natural_key(item[0]))
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


# Figures like the papers' (docs/reproduction-rows.yaml `figures:`; keys in
# the module docstring).

ROW_KEYS = {"id", "source", "experiment", "published", "pending", "note", "figures"}
FIGURE_KEYS = {
    "lines": {"kind", "title", "x", "x_from", "y", "series", "where", "legend", "x_label",
              "y_label", "log_x", "log_y", "published", "markers"},
    "bars": {"kind", "title", "x", "y", "series", "where", "legend", "x_label", "y_label",
             "log_y", "published"},
    "timeseries": {"kind", "title", "patterns", "where", "seed", "from", "to", "bin", "y_scale",
                   "legend", "y_label", "log_y", "published", "markers"},
}
REQUIRED_KEYS = {"lines": ("x", "y"), "bars": ("y",), "timeseries": ("patterns",)}
PUBLISHED_KEYS = {"lines": {"x", "y", "series", "label"}, "bars": {"x", "y", "series", "label"},
                  "timeseries": {"y", "label"}}
MARKER_SOURCES = ("fabric_events", "jobs")
PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd"]
PUBLISHED_COLOUR = "#c44e52"
# Statistic groups of a run's results.json and the prefix of their full path.
SERIES_GROUPS = {"flows": "flow", "nics": "nic", "links": "link", "pcie": "pcie",
                 "switches": "switch"}


class SpecError(Exception):
    """A figure spec the report cannot draw as written."""


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_label(v):
    """A sweep label as YAML may give it: text, or a number written bare."""
    return isinstance(v, str) or is_number(v)


def check_keys(where, mapping, known):
    unknown = sorted(str(k) for k in mapping if k not in known)
    if unknown:
        raise SpecError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} "
                        + ", ".join(f"'{k}'" for k in unknown)
                        + f" (known: {', '.join(sorted(known))})")


def check_time(where, key, value):
    try:
        return parse_time(str(value))
    except InputError as e:
        raise SpecError(f"{where}: '{key}': {e}") from None


def check_y(where, y):
    if isinstance(y, str):
        return
    if not isinstance(y, list) or not y:
        raise SpecError(f"{where}: 'y' is a metric template or a list of {{metric, label}}")
    for i, v in enumerate(y):
        at = f"{where}, y[{i}]"
        if not isinstance(v, dict) or not isinstance(v.get("metric"), str):
            raise SpecError(f"{at}: want {{metric: <template>, label: <text>}}")
        check_keys(at, v, {"metric", "label"})
        if "label" in v and not isinstance(v["label"], str):
            raise SpecError(f"{at}: 'label' is text")


def check_where(where, spec):
    w = spec["where"]
    if not isinstance(w, dict) or not w:
        raise SpecError(f"{where}: 'where' maps a sweep parameter to a label or a list of labels")
    for param, labels in w.items():
        labels = labels if isinstance(labels, list) else [labels]
        if not labels or not all(is_label(v) for v in labels):
            raise SpecError(f"{where}: 'where' {param}: a label or a list of labels")


def check_published(where, spec):
    kind = spec["kind"]
    if not isinstance(spec["published"], list):
        raise SpecError(f"{where}: 'published' is a list of {{x, y, series, label}}")
    for i, p in enumerate(spec["published"]):
        at = f"{where}, published[{i}]"
        if not isinstance(p, dict):
            raise SpecError(f"{at}: want a mapping with y")
        check_keys(at, p, PUBLISHED_KEYS[kind])
        if not is_number(p.get("y")):
            raise SpecError(f"{at}: 'y' is the published number (required)")
        if "x" in p and not (is_number(p["x"]) if kind == "lines" else is_label(p["x"])):
            raise SpecError(f"{at}: 'x' is " + ("a number" if kind == "lines" else "a label of x"))
        for key in ("series", "label"):
            if key in p and not is_label(p[key]):
                raise SpecError(f"{at}: '{key}' is text")


def check_markers(where, spec):
    m = spec["markers"]
    if spec["kind"] == "timeseries" and isinstance(m, str):
        if m not in MARKER_SOURCES:
            raise SpecError(f"{where}: 'markers' {m}: want one of {', '.join(MARKER_SOURCES)} "
                            "or a list of {at, label}")
        return
    if not isinstance(m, list):
        raise SpecError(f"{where}: 'markers' is a list of {{at, label}}")
    for i, item in enumerate(m):
        at = f"{where}, markers[{i}]"
        if not isinstance(item, dict) or "at" not in item:
            raise SpecError(f"{at}: want {{at, label}}")
        check_keys(at, item, {"at", "label"})
        if spec["kind"] == "timeseries":
            check_time(at, "at", item["at"])
        elif not is_number(item["at"]):
            raise SpecError(f"{at}: 'at' is an x value (a number)")
        if "label" in item and not isinstance(item["label"], str):
            raise SpecError(f"{at}: 'label' is text")


def validate_figure(where, spec):
    """Raises SpecError naming the key (and, through `where`, the row) of the
    first thing a figure spec gets wrong."""
    if not isinstance(spec, dict):
        raise SpecError(f"{where}: a figure is a mapping with a kind")
    kind = spec.get("kind")
    if kind not in FIGURE_KEYS:
        raise SpecError(f"{where}: 'kind' {kind!r}: want one of {', '.join(sorted(FIGURE_KEYS))}")
    check_keys(where, spec, FIGURE_KEYS[kind])
    for key in REQUIRED_KEYS[kind]:
        if key not in spec:
            raise SpecError(f"{where}: a {kind} figure needs '{key}'")
    for key in ("title", "x", "series", "x_label", "y_label"):
        if key in spec and not isinstance(spec[key], str):
            raise SpecError(f"{where}: '{key}' is text")
    for key in ("log_x", "log_y"):
        if key in spec and not isinstance(spec[key], bool):
            raise SpecError(f"{where}: '{key}' is true or false")
    if "x_from" in spec and spec["x_from"] not in ("label", "value"):
        raise SpecError(f"{where}: 'x_from' is label or value")
    if "y" in spec:
        check_y(where, spec["y"])
    if "patterns" in spec and (not isinstance(spec["patterns"], list) or not spec["patterns"]
                               or not all(isinstance(p, str) for p in spec["patterns"])):
        raise SpecError(f"{where}: 'patterns' is a list of series name globs")
    if "where" in spec:
        check_where(where, spec)
    if "legend" in spec and (not isinstance(spec["legend"], dict)
                             or not all(is_label(v) for v in spec["legend"].values())):
        raise SpecError(f"{where}: 'legend' maps a line's key to the name shown")
    if "published" in spec:
        check_published(where, spec)
    if "markers" in spec:
        check_markers(where, spec)
    if "seed" in spec and not (isinstance(spec["seed"], int) and is_number(spec["seed"])):
        raise SpecError(f"{where}: 'seed' is an integer")
    for key in ("from", "to", "bin"):
        if key in spec:
            check_time(where, key, spec[key])
    if "bin" in spec and parse_time(str(spec["bin"])) <= 0:
        raise SpecError(f"{where}: 'bin' is longer than 0")
    if "y_scale" in spec and not is_number(spec["y_scale"]):
        raise SpecError(f"{where}: 'y_scale' is a number")


def validate_rows(rows_doc, source="docs/reproduction-rows.yaml"):
    """Every row's keys and figure specs; raises SpecError naming the row and
    the key (a misspelt key would otherwise be left out without a word)."""
    for group in rows_doc.get("groups") or []:
        for row in group.get("rows") or []:
            rid = row.get("id", "?")
            check_keys(f"{source}: row {rid}", row, ROW_KEYS)
            figures = row.get("figures")
            if figures is None:
                continue
            if not isinstance(figures, list):
                raise SpecError(f"{source}: row {rid}: 'figures' is a list of figures")
            for i, spec in enumerate(figures):
                kind = spec.get("kind", "?") if isinstance(spec, dict) else "?"
                validate_figure(f"{source}: row {rid}, figures[{i}] ({kind})", spec)


def expand(template, labels):
    """The sweep metric a template names at a point's labels, None when the
    template names a parameter the point does not have."""
    try:
        return re.sub(r"\{([A-Za-z0-9_]+)\}", lambda m: labels[m.group(1)], template)
    except KeyError:
        return None


def as_labels(value):
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def selected_points(res, where):
    """The points, in sweep order, whose labels `where` allows."""
    want = {k: as_labels(v) for k, v in (where or {}).items()}
    return [p for p in res.get("points") or []
            if all(str((p.get("labels") or {}).get(k)) in v for k, v in want.items())]


def without_number(label):
    """A label less its last number (qp_per_conn.conns_100 -> qp_per_conn.conns)."""
    found = list(NUMBER.finditer(label))
    if not found:
        return label
    m = found[-1]
    return (label[:m.start()] + label[m.end():]).strip("._-") or label


def y_variants(spec):
    """(label, template) per entry of a figure's y; label None for a bare template."""
    y = spec["y"]
    if isinstance(y, str):
        return [(None, y)]
    return [(v.get("label", v["metric"]), v["metric"]) for v in y]


def series_key(spec, variant, labels):
    """The line (or bar) a point's metric belongs to: the y entry's label,
    the series parameter's label, both, or the template when neither."""
    parts = [variant] if variant is not None else []
    param = spec.get("series")
    if param:
        label = labels.get(param, "?")
        # One parameter for both the line and x (R1: qp_per_conn.conns_100).
        parts.append(without_number(label) if param == spec.get("x") else label)
    return " ".join(parts) if parts else spec["y"]


def sweep_parameter_notes(spec, res):
    """What a figure names as a sweep parameter that the results do not have."""
    names = {p.get("name") for p in res.get("parameters") or []}
    used = [spec.get("x"), spec.get("series")] + list(spec.get("where") or {})
    return [f"sweep parameter '{p}' (the sweep has: {', '.join(sorted(names)) or 'none'})"
            for p in dict.fromkeys(used) if p and p not in names]


def gather(spec, res):
    """A lines or bars figure's data: [(line key, [(x label, metric)])] in
    sweep order, and what the figure names that the results do not give."""
    metrics = res.get("metrics") or {}
    missing = sweep_parameter_notes(spec, res)
    if missing:  # without its x or lines the figure would merge what it means to keep apart
        return [], missing
    points = selected_points(res, spec.get("where"))
    if not points:
        missing.append("no sweep point has the labels of 'where'")
    lines, seen = {}, set()
    for p in points:
        labels = {k: str(v) for k, v in (p.get("labels") or {}).items()}
        for variant, template in y_variants(spec):
            name = expand(template, labels)
            if name is None:
                note = f"{template} (names a parameter point {p.get('id')} has not)"
                missing += [] if note in missing else [note]
                continue
            if name in seen:  # a parameter the template does not name: one metric, several points
                continue
            seen.add(name)
            m = metrics.get(name)
            if m is None:
                missing.append(name)
            elif not m.get("measured"):
                missing.append(f"{name} (not measured)")
            elif not is_number(m.get("value")):
                missing.append(f"{name} (not a number)")
            else:
                x = labels.get(spec["x"], "") if spec.get("x") else ""
                lines.setdefault(series_key(spec, variant, labels), []).append((x, m))
    return list(lines.items()), missing


def x_positions(spec, res, x_labels):
    """x label -> position, and whether the axis is numeric: every label's
    number, else every label's parameter value's number (x_from: value tries
    the values first), else the label's place in sweep order."""
    values = {}
    for par in res.get("parameters") or []:
        if par.get("name") == spec.get("x"):
            values = dict(zip((str(v) for v in par.get("labels") or []),
                              (str(v) for v in par.get("values") or [])))
    sources = ("label", "value") if spec.get("x_from", "label") == "label" else ("value", "label")
    for source in sources:
        numbers = {label: label_number(label if source == "label" else values.get(label, ""))
                   for label in x_labels}
        if not x_labels or None in numbers.values():
            continue
        # Labels whose values share a number are names, not values (M8's
        # normal and misconfig both run at 40Gbps): they keep the sweep's
        # order. Labels may share theirs (R1: qp_per_conn.conns_100 and
        # shared_qp.conns_100 are two lines at x = 100).
        if source == "value" and len(set(numbers.values())) < len(numbers):
            continue
        return numbers, True
    return {label: i for i, label in enumerate(x_labels)}, False


def spread(m):
    """Whisker lengths below and above a reduced metric's value: min..max over
    the seeds (clamped: a mean of equal values may differ from them in the last bit)."""
    v = m["value"]
    return max(0.0, v - m.get("min", v)), max(0.0, m.get("max", v) - v)


def shown(spec, key):
    return str((spec.get("legend") or {}).get(key, key))


def legend_label(spec, key):
    """A line's legend entry; none for the one line of a bare y template
    (the axis label says what it is)."""
    return None if key == spec["y"] else shown(spec, key)


def draw_published(ax, spec, colours, position):
    """The paper's figures: a star at (x, y), or a dashed line at y when the
    text gives no x (a figure 'at every loss rate'); in the line's colour
    when it names one. position(item) is the star's x, None if not on the axes."""
    notes, stars, levels = [], False, False
    for item in spec.get("published") or []:
        colour = colours.get(str(item.get("series")), PUBLISHED_COLOUR)
        text = str(item.get("label", ""))
        if "x" not in item:
            ax.axhline(item["y"], color=colour, linestyle="--", linewidth=1, alpha=0.8)
            ax.annotate(text, xy=(1, item["y"]), xycoords=("axes fraction", "data"),
                        xytext=(-3, 2), textcoords="offset points", ha="right", fontsize=6,
                        color=colour)
            levels = True
            continue
        x = position(item)
        if x is None:
            notes.append(f"published x {item['x']} (not on the axis)")
            continue
        ax.plot([x], [item["y"]], marker="*", markersize=12, color=colour,
                markeredgecolor="black", markeredgewidth=0.6, linestyle="none", zorder=5)
        if text:
            ax.annotate(text, xy=(x, item["y"]), xytext=(5, 4), textcoords="offset points",
                        fontsize=6)
        stars = True
    if stars:
        ax.plot([], [], marker="*", markersize=9, color="white", markeredgecolor="black",
                linestyle="none", label="published (paper)")
    elif levels:
        ax.plot([], [], color="black", linestyle="--", linewidth=1, label="published (paper)")
    return notes


def draw_vertical_markers(ax, markers):
    """Dotted vertical lines at (x, label), the label along the line's top."""
    for x, label in markers:
        ax.axvline(x, color="#555555", linestyle=":", linewidth=1)
        if label:
            ax.text(x, 0.98, label, transform=ax.get_xaxis_transform(), rotation=90,
                    ha="right", va="top", fontsize=6, color="#555555")


def set_log(ax, axis, values, notes):
    """A log axis when the spec asks and every value is positive (a log axis
    would drop the others without a word)."""
    if all(v > 0 for v in values):
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        return True
    notes.append(f"log {axis} left out: a value is not positive")
    return False


def finish_panel(ax, spec, missing, drew, legend=True):
    """Title, labels, legend, and what is missing written into the panel."""
    ax.set_title(spec.get("title", ""), fontsize=8, loc="left")
    if spec.get("x_label"):
        ax.set_xlabel(spec["x_label"], fontsize=7)
    if spec.get("y_label"):
        ax.set_ylabel(spec["y_label"], fontsize=7)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, loc="best")
    if not drew:
        ax.text(0.5, 0.5, "nothing to draw", transform=ax.transAxes, ha="center", va="center",
                fontsize=9, color=PUBLISHED_COLOUR)
    if missing:
        more = f"; +{len(missing) - 4} more" if len(missing) > 4 else ""
        listed = "; ".join(missing[:4]) + more
        ax.text(0.01, 0.01, "missing: " + listed, transform=ax.transAxes, fontsize=6,
                color=PUBLISHED_COLOUR, va="bottom", wrap=True)


def unique(items):
    return list(dict.fromkeys(items))


def draw_lines(ax, spec, res, _row_dir=None, _scenario=None):
    """One line per key (the series parameter's label and/or the y entry),
    y over the x parameter in numeric order, whiskers min..max over seeds."""
    lines, missing = gather(spec, res)
    x_labels = unique(x for _, pts in lines for x, _ in pts)
    pos, numeric = x_positions(spec, res, x_labels)
    colours, ys = {}, []
    for i, (key, pts) in enumerate(lines):
        colour = colours[key] = PALETTE[i % len(PALETTE)]
        pts = sorted(pts, key=lambda p: pos[p[0]])
        lo, hi = zip(*(spread(m) for _, m in pts))
        values = [m["value"] for _, m in pts]
        ys += values
        ax.errorbar([pos[x] for x, _ in pts], values, yerr=[lo, hi], marker="o", markersize=3.5,
                    capsize=3, linewidth=1.2, color=colour, label=legend_label(spec, key))
    if numeric:
        log_x = spec.get("log_x") and set_log(ax, "x", list(pos.values()), missing)
        if len(pos) <= 12:  # ticks at the swept values, not the axis' round numbers
            ticks = sorted(set(pos.values()))
            ax.set_xticks(ticks)
            ax.set_xticklabels([fmt(t) for t in ticks])
            if log_x:
                ax.minorticks_off()
    elif x_labels:
        ax.set_xticks(range(len(x_labels)))
        ax.set_xticklabels(x_labels, rotation=30, ha="right")
    if spec.get("log_y"):
        set_log(ax, "y", ys + [p["y"] for p in spec.get("published") or []], missing)

    def position(item):
        return item["x"] if numeric else pos.get(str(item["x"]))
    missing += draw_published(ax, spec, colours, position)
    draw_vertical_markers(ax, [(m["at"], m.get("label", "")) for m in spec.get("markers") or []])
    finish_panel(ax, spec, missing, bool(lines))
    return missing


def draw_bars(ax, spec, res, _row_dir=None, _scenario=None):
    """Grouped bars: a group per x label (numeric order when numeric), a bar
    per key within it; whiskers min..max, dots per seed. Without x one group,
    each bar named on the axis."""
    lines, missing = gather(spec, res)
    x_labels = unique(x for _, pts in lines for x, _ in pts)
    pos, _numeric = x_positions(spec, res, x_labels)
    groups = sorted(x_labels, key=lambda x: pos[x])
    n = max(len(lines), 1)
    width = 0.8 / n
    colours, at, ys = {}, {}, []
    for i, (key, pts) in enumerate(lines):
        colour = colours[key] = PALETTE[i % len(PALETTE)]
        for j, (x, m) in enumerate(pts):
            bx = groups.index(x) + (i - (n - 1) / 2) * width
            at[(x, key)] = bx
            lo, hi = spread(m)
            ax.bar([bx], [m["value"]], width * 0.9, color=colour, alpha=0.85,
                   yerr=[[lo], [hi]], capsize=3, label=legend_label(spec, key) if j == 0 else None)
            seeds = [v for v in m.get("values") or [] if is_number(v)]
            ax.plot([bx] * len(seeds), seeds, "o", color="black", markersize=2.5)
            ys.append(m["value"])
    single = not spec.get("x")
    if single:
        ax.set_xticks([at[("", key)] for key, _ in lines])
        ax.set_xticklabels([shown(spec, key) for key, _ in lines], rotation=30, ha="right")
    else:
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([shown(spec, g) for g in groups], rotation=30 if len(groups) > 4 else 0,
                           ha="right" if len(groups) > 4 else "center")
    if spec.get("log_y"):
        set_log(ax, "y", ys + [p["y"] for p in spec.get("published") or []], missing)

    def position(item):
        x = "" if single else str(item["x"])
        if "series" in item:
            return at.get((x, str(item["series"])))
        return groups.index(x) if x in groups else None
    missing += draw_published(ax, spec, colours, position)
    finish_panel(ax, spec, missing, bool(lines), legend=not single)
    return missing


def run_document(run_dir):
    """A run's results.json, {} when it has none (a run that failed)."""
    try:
        with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def run_series(run_dir, doc):
    """Series name -> CSV path of one run: every statistic of its
    results.json (doc) that has a `csv` (named by its full path:
    links["t0-s1"]["a2b.gbps"] is link.t0-s1.a2b.gbps), else the files in
    its series/."""
    found = {}
    for group, prefix in SERIES_GROUPS.items():
        for owner, stats in (doc.get(group) or {}).items():
            for rest, v in (stats.items() if isinstance(stats, dict) else []):
                if isinstance(v, dict) and "csv" in v:
                    found[f"{prefix}.{owner}.{rest}"] = os.path.join(run_dir, v["csv"])
    for path, v in (doc.get("other") or {}).items():
        if isinstance(v, dict) and "csv" in v:
            found[path] = os.path.join(run_dir, v["csv"])
    series_dir = os.path.join(run_dir, "series")
    if not found and os.path.isdir(series_dir):
        found = {f[:-4]: os.path.join(series_dir, f) for f in sorted(os.listdir(series_dir))
                 if f.endswith(".csv")}
    return found


def short_names(names):
    """Series names less the dotted parts all of them share
    (link.t0-s1.a2b.gbps beside link.t0-s2.a2b.gbps -> t0-s1)."""
    if len(names) < 2:
        return list(names)
    parts = [n.split(".") for n in names]
    head = tail = 0
    while all(len(p) > head + 1 for p in parts) and len({p[head] for p in parts}) == 1:
        head += 1
    while (all(len(p) > head + tail + 1 for p in parts)
           and len({p[-1 - tail] for p in parts}) == 1):
        tail += 1
    return [".".join(p[head:len(p) - tail]) for p in parts]


def binned(samples, width):
    """Means over bins of `width` seconds, at each bin's middle. A sample
    stands for the interval that ends at its time, so one at a bin's end
    counts in that bin; times are whole picoseconds (as the CSV writes them),
    compared as integers so that 2 ms is not taken for 1.999... ms."""
    sums = {}
    w = round(width * 1e12)
    for t, v in samples:
        k = max(0, (round(t * 1e12) - 1) // w)
        s = sums.setdefault(k, [0.0, 0])
        s[0] += v
        s[1] += 1
    return [((k + 0.5) * width, s / n) for k, (s, n) in sorted(sums.items())]


def scenario_markers(spec, scenario):
    """(seconds, label) of a timeseries' markers, and notes on those that
    could not be placed: the spec's list, or from `scenario` (the run's
    effective configuration or the scenario file) its fabric events or its
    jobs' starts and ends."""
    m = spec.get("markers")
    if isinstance(m, list):
        return [(parse_time(str(i["at"])), i.get("label", "")) for i in m], []
    if not m:
        return [], []
    if not isinstance(scenario, dict):
        return [], [f"markers {m} (no scenario)"]
    out, notes = [], []
    if m == "fabric_events":
        for ev in (scenario.get("fabric") or {}).get("events") or []:
            try:
                out.append((parse_time(str(ev.get("at", "0s"))),
                            f"{ev.get('link', '')} {ev.get('action', '')}".strip()))
            except InputError as e:
                notes.append(f"fabric event: {e}")
    else:
        for job in scenario.get("jobs") or []:
            # A job that waits for the one before starts when that ends: no
            # time to mark. Else it posts from the later of start and run_at.
            if job.get("after_previous", True) is not False:
                continue
            name = job.get("name", "")
            try:
                t0 = max(parse_time(str(job.get(k) or "0s")) for k in ("start", "run_at"))
                out.append((t0, f"+{name}"))
                length = parse_time(str(job.get("duration") or "0s"))
                if length > 0:
                    out.append((t0 + length, f"-{name}"))
            except InputError as e:
                notes.append(f"job {name}: {e}")
    return out, notes


def marker_source(spec, doc, scenario):
    """Where a timeseries' fabric_events or jobs markers come from: the run's
    effective configuration (includes and the point's overrides applied)
    when its results.json has that section, else the scenario file."""
    markers = spec.get("markers")
    sections = {"fabric_events": "fabric", "jobs": "jobs"}
    section = sections.get(markers) if isinstance(markers, str) else None
    config = doc.get("config")
    if section and isinstance(config, dict) and config.get(section):
        return config
    return scenario


def draw_timeseries(ax, spec, res, row_dir=None, scenario=None):
    """One run's series over simulated time (ms): the first point `where`
    leaves, the spec's seed or the first; dotted lines at the markers."""
    missing = sweep_parameter_notes(spec, res)
    points = selected_points(res, spec.get("where"))
    seeds = res.get("seeds") or []
    seed = spec.get("seed", seeds[0] if seeds else None)
    point = points[0] if points else None
    run = next((r for r in (point or {}).get("runs") or [] if r.get("seed") == seed), None)
    if point is None:
        missing.append("no sweep point has the labels of 'where'")
    elif run is None or row_dir is None:
        missing.append(f"no run of point {point.get('id')} with seed {seed}")
    run_dir = os.path.join(row_dir, run.get("dir", "")) if run and row_dir else None
    doc = run_document(run_dir) if run_dir else {}
    available = run_series(run_dir, doc) if run_dir else {}
    names = []
    for pattern in spec["patterns"] if run_dir else []:
        hits = sorted(n for n in available if fnmatch.fnmatchcase(n, pattern))
        if not hits:
            missing.append(f"series {pattern} (not in run {run.get('dir', '')})")
        names += [h for h in hits if h not in names]
    t_from = parse_time(str(spec["from"])) if "from" in spec else None
    t_to = parse_time(str(spec["to"])) if "to" in spec else None
    scale = spec.get("y_scale", 1.0)
    colours, units, ys = {}, [], []
    for i, (name, short) in enumerate(zip(names, short_names(names))):
        try:
            unit, samples = read_series(available[name])
        except (InputError, OSError, ValueError) as e:
            missing.append(f"{name} ({e})")
            continue
        samples = [(t, v * scale) for t, v in samples
                   if (t_from is None or t >= t_from) and (t_to is None or t <= t_to)]
        colour = colours[short] = PALETTE[i % len(PALETTE)]
        units.append(unit)
        ys += [v for _, v in samples]
        if "bin" in spec:
            samples = binned(samples, parse_time(str(spec["bin"])))
            ax.plot([t * 1e3 for t, _ in samples], [v for _, v in samples], color=colour,
                    linewidth=1.1, label=shown(spec, short))
        else:  # a sample is the value over the interval that ends at its time
            ax.step([t * 1e3 for t, _ in samples], [v for _, v in samples], where="pre",
                    color=colour, linewidth=1, label=shown(spec, short))
    markers, notes = scenario_markers(spec, marker_source(spec, doc, scenario))
    missing += notes
    draw_vertical_markers(ax, [(t * 1e3, label) for t, label in markers
                               if (t_from is None or t >= t_from) and (t_to is None or t <= t_to)])
    if spec.get("log_y"):
        set_log(ax, "y", ys, missing)
    missing += draw_published(ax, spec, colours, lambda item: None)
    ax.set_xlabel("simulated time (ms)", fontsize=7)
    if not spec.get("y_label") and len(set(units)) == 1 and scale == 1.0:
        ax.set_ylabel(units[0], fontsize=7)
    which = f"{point.get('id')}, seed {seed}" if point else ""
    title = spec.get("title", "") + (f" (run: {which})" if which else "")
    finish_panel(ax, dict(spec, title=title.strip()), missing, bool(ys))
    return missing


DRAW = {"lines": draw_lines, "bars": draw_bars, "timeseries": draw_timeseries}


def plot_figures(row_id, res, specs, path, row_dir=None, scenario=None):
    """The row's figures, one panel each (timeseries full width, others two
    abreast), in one PNG; returns the notes on what they name and the
    results do not give (also written in the panels)."""
    wide = len(specs) == 1 or any(s["kind"] == "timeseries" for s in specs)
    cols = 1 if wide else 2
    rows = (len(specs) + cols - 1) // cols
    width = 9.5 if any(s["kind"] == "timeseries" for s in specs) else max(7.0, 5.6 * cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False, figsize=(width, 0.7 + 3.4 * rows))
    for ax in axes.flat[len(specs):]:
        ax.set_visible(False)
    notes = []
    for i, (ax, spec) in enumerate(zip(axes.flat, specs)):
        try:
            missing = DRAW[spec["kind"]](ax, spec, res, row_dir, scenario)
        except Exception as e:  # noqa: BLE001  one figure must not stop the whole report
            ax.clear()
            missing = [f"could not draw: {type(e).__name__}: {e}"]
            finish_panel(ax, spec, missing, False)
        notes += [f"figure {i + 1}: {m}" for m in missing]
    fig.suptitle(f"{row_id}: {res.get('name', '')} (verdict: {res.get('verdict', '?')})\n"
                 "whiskers: min..max over seeds; stars and dashed lines: the paper's figures",
                 fontsize=8)
    fig.tight_layout()  # leaves the suptitle its room
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # No creation date or version in the file: the same results give the same PNG.
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return notes


def load_scenario(path):
    """A scenario file's document (for its events and jobs), None if unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError):
        return None
    return doc if isinstance(doc, dict) else None


def draw_row_figures(rid, row, res, path, row_dir, scenario_path):
    """The row's `figures:` into path, what they miss said on stderr; a row
    without figures gets none, and an earlier report's plot at that path
    (which nothing refers to any more) is removed."""
    specs = row.get("figures") or []
    if not specs:
        if os.path.exists(path):
            os.remove(path)
        return False
    for note in plot_figures(rid, res, specs, path, row_dir, load_scenario(scenario_path)):
        print(f"reproduction.py: {rid} {note}", file=sys.stderr)
    return True


def sensitivity_lines(sens):
    """The row's sensitivity: its headline figures with one parameter the
    paper does not state halved and doubled (results' `sensitivity`)."""
    if not sens or not sens.get("metrics"):
        return []
    half, double = sens["values"]

    def cell(v):
        return "-" if v is None else md(v) if isinstance(v, str) else fmt(v)
    seeds = sens.get("seeds") or []
    over = (f", over seed{'s' if len(seeds) > 1 else ''} "
            + ", ".join(str(s) for s in seeds)) if seeds else ""
    lines = [f"Sensitivity to `{md(sens['key'])}` (not stated by the paper"
             + (f": {md(sens['why'])}" if sens.get("why") else "") + f"{over}):", "",
             f"| headline metric | {md(half)} (half) | as run | {md(double)} (double) |",
             "|---|---|---|---|"]
    for name, m in sens["metrics"].items():
        lines.append(f"| {md(name)} | {cell(m.get('half'))} | {cell(m.get('as_run'))} | "
                     f"{cell(m.get('double'))} |")
    return lines + [""]


def scenario_differs(path):
    """The scenario's declared differences from the paper (`differs:`),
    read from the file so that a declaration added after the run shows."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError):
        return []
    return [str(x) for x in (doc or {}).get("differs") or []]


def scenario_declared(path):
    """The paragraph of the scenario's header that names the values chosen
    because of a row's outcome which the row rests on ("# Declared choices
    ...", up to the next blank comment line or the end of the header)."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ""
    out, inside = [], False
    for line in lines:
        if not line.strip():
            continue  # a blank line inside the header
        if not line.startswith("#"):
            break
        text = line[1:].strip()
        if text.startswith("Declared choices"):
            inside = True
        elif inside and not text:
            break
        if inside:
            out.append(text)
    return " ".join(out)


def verdict_text(res):
    """The row's verdict, then every check that did not match, by name
    (results' failing_checks: headline ones first, marked)."""
    text = f"**{res['verdict']}**"
    failing = res.get("failing_checks") or []
    if failing:
        text += "<br>not matched: " + "; ".join(md(f) for f in failing)
    return text


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
    ap.add_argument("--results",
                    help="directory of <row>/results.json (default ROOT/out/reproduce)")
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
    try:
        validate_rows(rows_doc)
    except SpecError as e:
        sys.exit(f"reproduction.py: {e}")
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
        "the verdict. Each check is the row's headline claim (the figure or shape the paper",
        "leads with) or a supporting detail, and is judged match, partial (holds only within",
        "its tolerance), mismatch or not-run (no measurement). The row's verdict follows its",
        "headline checks only: match when every one matches (**match (calibrated)** when one",
        "rests on a value chosen because of that same figure, declared in",
        "[calibration.md](calibration.md)), mismatch when any mismatches, partial otherwise;",
        "reported for a row without checks (figures beside another system's, nothing claimed);",
        "not-run when no headline check could be judged. Every check that",
        "did not match is listed under the verdict by name, supporting ones included. Row "
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
            has_plot = plot_row(rid, res, os.path.join(plots_dir, f"{rid}-metrics.png"))
            has_figures = draw_row_figures(rid, row, res, os.path.join(plots_dir, f"{rid}.png"),
                                           os.path.dirname(res_path),
                                           os.path.join(root, scenario))
            link = f"[{rid}](#{rid.lower()})"
            lines.append(f"| {link} | {md(exp)} | {md(row['published'])} | {measured or '-'} | "
                         f"{verdict_text(res)} |")
            extra = sorted({r["seed"] for p in res["points"] for r in p.get("runs") or []}
                           - set(res["seeds"]))
            d = [f"### {rid}", "", f"Scenario `{scenario}`, seeds {res['seeds']}"
                 + (f" (more for some points: {extra})" if extra else "") + ", "
                 f"{len(res['points'])} point(s): "
                 + ", ".join(f"`{p['id']}`" for p in res["points"]) + ".", ""]
            # The paper's axes first; the plot of every metric is the
            # appendix, or the only plot of a row without figures.
            if has_figures:
                d += [f"![{rid}](reproduction/{rid}.png)", ""]
            elif has_plot:
                d += [f"![{rid} metrics](reproduction/{rid}-metrics.png)", ""]
            if res.get("checks"):
                d += ["| metric | check | role | verdict | reason |", "|---|---|---|---|---|"]
                for c in res["checks"]:
                    role = c.get("role", "headline")
                    if c.get("calibrated"):
                        role += f" (calibrated: {md(c['calibrated'])})"
                    d.append(f"| {md(c['metric'])} | `{md(c['check'])}` "
                             f"(tolerance {fmt(c['tolerance'] * 100)} %) | {role} | "
                             f"{c['verdict']} | {md(c['reason'])} |")
                d.append("")
            differs = scenario_differs(os.path.join(root, scenario)) or res.get("differs") or []
            if differs:
                d += ["Differs from the paper (declared in the scenario's `differs:`):", ""]
                d += [f"- {md(x)}" for x in differs]
                d.append("")
            declared = scenario_declared(os.path.join(root, scenario))
            if declared:
                d += [md(declared) + " (from the scenario's header)", ""]
            d += sensitivity_lines(res.get("sensitivity"))
            if res.get("published"):
                d += ["Published, per metric: " + "; ".join(
                    f"{md(k)}: {md(v)}" for k, v in res["published"].items()), ""]
            seeds = len(res["seeds"])
            # Points with extra seeds (sweep.extra_seeds) reduce over more:
            # then every value says over how many.
            mixed = any(len(v.get("values") or []) not in (0, seeds)
                        for v in res["metrics"].values())
            over = ("each point's seeds, given per metric" if mixed else
                    f"{seeds} seed{'' if seeds == 1 else 's'}")
            d += [f"All metrics (over {over}; mean ± sample "
                  "standard deviation unless named):", "",
                  "| metric | measured |", "|---|---|"]
            d += [f"| {md(k)} | {md(measured_value(v, seeds=mixed))} |"
                  for k, v in res["metrics"].items()]
            d.append("")
            if res.get("failed_runs"):
                d += ["Failed runs: " + "; ".join(md(f) for f in res["failed_runs"]), ""]
            if has_figures and has_plot:
                d += ["Appendix: every numeric metric, one bar each (orange: has a published "
                      "figure; red: the figure a check compares with, and its tolerance).", "",
                      f"![{rid} metrics](reproduction/{rid}-metrics.png)", ""]
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
