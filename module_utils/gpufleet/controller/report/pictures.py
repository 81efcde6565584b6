"""The numbers behind the page's pictures: inline SVG drawn by templates/_pictures.html.j2 (Jinja2 macros).

Python computes what to draw (counts, fractions, coordinates, labels as plain text); the macros write the
SVG elements and Jinja2 escapes every label. Four pictures, each an ``<svg role="img">`` with a ``<title>``,
an ``aria-label`` and a ``data-picture`` name a test can find:

- ``status``: the fleet by status, one bar segment per status present, with its count;
- ``gate``: the benchmark gate's measured figure as a fraction of the expected one, one lane per GPU model
  and test, one mark per host (its weakest GPU of that model), the expected figure (1.0) as a line;
- ``price``: $ per measured TFLOP-hour per host, where a price and a measured TFLOPS figure exist, cheapest
  first, with the fleet's figure as a line;
- ``checklist``: the renter's checklist as a host-by-item grid, one cell per host and item coloured by
  ok / warn / fail / unknown, hosts worst first.
Each picture lists at most a fixed number of rows or marks (below) and says how many it shows.
"""

from ._common import _EMPTY, STATUSES, _text, check_items
from .cells import _checklist_hosts

# Caps: the page stays readable and small at 10,000 hosts (fleet.json / fleet.csv have everything).
GATE_MARKS = 400  # marks per lane (model and test), lowest fractions first
PRICE_BARS = 30  # hosts in the price picture, cheapest first
GRID_ROWS = 200  # hosts in the checklist grid, those with a failed or warned item first
LABEL_CHARS = 28  # host and model names longer than this are cut in the picture (the <title> has all)

WIDTH = 760
_LEFT = 230  # label column of the lane and bar pictures
_RIGHT = 70


def _cut(text, n=LABEL_CHARS):
    text = _text(text)
    return text if len(text) <= n else text[:n - 1] + "\u2026"


def _r(x):
    return round(x, 1)


def status_picture(s):
    """The fleet by status: a stacked bar, one segment per status present."""
    counts = s["totals"]["hosts_by_status"]
    present = [(k, counts.get(k, 0)) for k in STATUSES if counts.get(k, 0)]
    total = sum(n for _unused, n in present)
    length = WIDTH - 20
    segments = []
    x = 10.0
    for i, (status, n) in enumerate(present):
        w = length * n / total
        segments.append({"status": status, "count": n, "x": _r(x), "w": _r(w), "label": "%s %d" % (status, n),
                         "legend_x": 10 + i * 120})
        x += w
    return {"name": "status", "width": WIDTH, "height": 62, "total": total, "segments": segments,
            "label": "Hosts by status: %s" % (", ".join("%s %d" % (k, n) for k, n in present) or "no hosts")}


def _gate_points(s):
    """{(model, test): {host: (lowest fraction, passed)}} over every GPU's gate results (the GPU rows' gate
    entries are already normalized by model.py: numbers or None, test as text, passed True/False/None)."""
    lanes = {}
    for h in s["hosts"]:
        host = h["host"]
        for g in h["gpus"]:
            if not g["gate"]:
                continue
            model = g["name"]
            model = model if isinstance(model, str) and model else (_text(model) or "unknown GPU")
            for e in g["gate"]:
                frac = e["fraction_of_peak"]
                if frac is None:
                    measured, expected = e["measured"], e["expected"]
                    if measured is None or not expected:
                        continue
                    frac = measured / expected
                per_host = lanes.get((model, e["test"]))
                if per_host is None:
                    per_host = lanes[(model, e["test"])] = {}
                passed = e["passed"]
                seen = per_host.get(host)
                if seen is not None:
                    low, was = seen
                    frac = low if low < frac else frac
                    passed = was if passed is None else (passed if was is None else was and passed)
                per_host[host] = (frac, passed)
    return lanes


def gate_picture(s):
    """Measured gate figures against expected, per GPU model and test: one mark per host."""
    lanes = _gate_points(s)
    if not lanes:
        return None
    top = max(1.2, max(f for per in lanes.values() for f, _unused in per.values()))
    top = min(top, 3.0)  # a wild figure is drawn at the edge, its <title> has the number
    plot = WIDTH - _LEFT - _RIGHT
    lane_h = 34

    def xof(frac):
        return _r(_LEFT + plot * max(0.0, min(frac, top)) / top)

    out = []
    for i, ((model, test), per_host) in enumerate(sorted(lanes.items())):
        marks = sorted(per_host.items(), key=lambda kv: (kv[1][0], kv[0]))
        shown = marks[:GATE_MARKS]
        y = 30 + i * lane_h
        points = []
        for j, (host, (frac, passed)) in enumerate(shown):
            cls = "m-fail" if passed is False else ("m-pass" if passed else "m-unknown")
            points.append({"host": host, "x": xof(frac), "y": _r(y + 6 + (j % 5) * 4), "cls": cls,
                           "title": "%s: %s %s %.0f%% of expected%s" % (
                               host, model, test, 100 * frac, {True: ", pass", False: ", FAIL"}.get(passed, ""))})
        out.append({"model": model, "test": test, "y": y, "label": "%s \u00b7 %s" % (_cut(model, 22), _cut(test, 16)),
                    "hosts": len(marks), "shown": len(shown), "points": points})
    height = 30 + len(out) * lane_h + 30
    ticks = [{"x": xof(v / 4.0), "label": "%d%%" % (25 * v)} for v in range(0, int(top * 4) + 1)]
    return {"name": "gate", "width": WIDTH, "height": height, "lanes": out, "ticks": ticks, "expected_x": xof(1.0),
            "left": _LEFT, "right": WIDTH - _RIGHT, "axis_y": height - 22,
            "capped": any(lane["shown"] < lane["hosts"] for lane in out),
            "label": "Benchmark gate: measured figure as a fraction of the expected one, per GPU model and test; "
                     "%d lane(s), %d mark(s)" % (len(out), sum(lane["shown"] for lane in out))}


def price_picture(s):
    """$ per measured TFLOP-hour per host (a price and a measured gate TFLOPS figure), cheapest first."""
    rows = []
    for h in s["hosts"]:
        price, tflops = h["price_per_hour"], h["measured_tflops"]
        if price is not None and tflops:
            rows.append((price / tflops, h["host"], price, tflops))
    if not rows:
        return None
    rows.sort()
    shown = rows[:PRICE_BARS]
    top = max(v for v, _u, _p, _t in shown) or 1.0
    fleet = s["totals"].get("usd_per_measured_tflop_hour")
    plot = WIDTH - _LEFT - _RIGHT
    bar_h = 18
    bars = []
    for i, (v, host, price, tflops) in enumerate(shown):
        w = plot * v / top
        bars.append({"host": host, "label": _cut(host), "y": 24 + i * bar_h, "w": _r(max(w, 1.0)),
                     "value": "$%.4f" % v, "value_x": _r(_LEFT + max(w, 1.0) + 4),
                     "title": "%s: $%.2f/h for %.1f measured TFLOPS = $%.4f per TFLOP-hour" % (host, price, tflops, v)})
    fleet_x = _r(_LEFT + plot * fleet / top) if fleet and fleet <= top else None
    return {"name": "price", "width": WIDTH, "height": 24 + len(bars) * bar_h + 16, "bars": bars, "left": _LEFT,
            "hosts": len(rows), "shown": len(bars), "fleet": fleet, "fleet_x": fleet_x,
            "label": "Dollars per measured TFLOP-hour per host, cheapest first; %d of %d host(s) with a price and "
                     "a measured figure" % (len(bars), len(rows))}


def checklist_picture(s, listed=None, total=None):
    """The renter's checklist as a host-by-item grid (hosts worst first, at most GRID_ROWS); ``listed, total``:
    ``cells._checklist_hosts(s)`` when the caller has it already."""
    if listed is None:
        listed, total = _checklist_hosts(s)
    if not listed:
        return None
    listed = listed[:GRID_ROWS]
    shown = check_items(s["hosts"])
    cell, left, head = 16, 200, 160
    columns = [{"key": key, "label": label, "x": left + i * cell + cell // 2} for i, (key, label) in
               enumerate(shown)]
    rows = []
    for r, h in enumerate(listed):
        items = h.get("checklist") or _EMPTY
        y = head + r * cell
        cells = []
        for i, (key, label) in enumerate(shown):
            st = (items.get(key) or _EMPTY).get("status")
            st = st if st in ("ok", "warn", "fail") else "unknown"
            cells.append({"x": left + i * cell, "status": st, "key": key,
                          "title": "%s \u2014 %s: %s" % (h["host"], label, st)})
        rows.append({"host": h["host"], "label": _cut(h["host"], 26), "y": y, "cells": cells})
    return {"name": "checklist", "width": left + len(shown) * cell + 120, "height": head + len(rows) * cell + 8,
            "cell": cell, "left": left, "head": head, "columns": columns, "rows": rows, "hosts": total,
            "shown": len(rows),
            "label": "Renter's checklist: %d host(s) by %d item(s), ok / warn / fail / unknown; %d of %d host(s) shown"
                     % (len(rows), len(shown), len(rows), total)}


def pictures(s, listed=None, total=None):
    """Every picture's numbers for the page (a picture without data is None)."""
    return {"status": status_picture(s), "gate": gate_picture(s), "price": price_picture(s),
            "checklist": checklist_picture(s, listed, total)}
