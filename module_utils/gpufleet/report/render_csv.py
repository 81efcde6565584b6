"""fleet.csv: one row per GPU plus one per host without GPUs, columns ``CSV_COLUMNS``."""

import csv
import io
import operator

from ._common import _EMPTY, CHECK_ITEMS, CSV_COLUMNS
from .summary import _as_summary


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value
    text = str(value).replace("\r", " ").replace("\n", " ")
    # A cell a spreadsheet would run as a formula is kept as text.
    if text[:1] in ("=", "+", "-", "@", "\t"):
        text = "'" + text
    return text


def _gate_text(gate):
    parts = []
    for g in gate:
        frac = "" if g["fraction_of_peak"] is None else " %.2f" % g["fraction_of_peak"]
        verdict = {True: " pass", False: " FAIL", None: ""}[g["passed"]]
        parts.append("%s%s%s" % (g["test"], frac, verdict))
    return "; ".join(parts)


_CSV_HOST = ("host", "host_status", "simulated", "provider", "price_per_hour", "source", "driver_version",
             "cuda_driver_version", "facts_read_at", "facts_read_at_source")
_CSV_GPU = CSV_COLUMNS[len(_CSV_HOST):CSV_COLUMNS.index("host_reasons")]
_CSV_TAIL = ("host_reasons", "verdict")
_CSV_CHECK = CSV_COLUMNS[CSV_COLUMNS.index("verdict") + 1:]
_CSV_GPU_KEYS = tuple(k for k in _CSV_GPU if k not in ("gpu_index", "throttle_reasons", "findings", "gate"))


_CSV_GPU_GET = operator.itemgetter(*["index" if c == "gpu_index" else c for c in _CSV_GPU])
_CSV_AT = {c: _CSV_GPU.index(c) for c in ("throttle_reasons", "findings", "gate")}


def _csv_gpu_values(g):
    """The GPU's values in ``_CSV_GPU`` order (raw, not yet CSV cells)."""
    out = list(_CSV_GPU_GET(g))
    out[_CSV_AT["throttle_reasons"]] = ";".join(out[_CSV_AT["throttle_reasons"]])
    out[_CSV_AT["findings"]] = "; ".join(out[_CSV_AT["findings"]])
    out[_CSV_AT["gate"]] = _gate_text(out[_CSV_AT["gate"]]) if out[_CSV_AT["gate"]] else ""
    return out


def _csv_host_values(h):
    return [h["host"], h["status"], h["simulated"], h["provider"], h["price_per_hour"], h["source"],
            h["driver_version"], h["cuda_driver_version"], h["facts_read_at"], h["facts_read_at_source"]]


def _check_statuses(h):
    checks = h.get("checklist") or _EMPTY
    return [(checks.get(key) or _EMPTY).get("status") or "unknown" for key, _unused in CHECK_ITEMS]


def csv_rows(data):
    """Rows (dicts keyed by ``CSV_COLUMNS``): one per GPU, one per host without GPU details."""
    s = _as_summary(data)
    rows = []
    for h in s["hosts"]:
        base = _csv_host_values(h)
        tail = ["; ".join(h["reasons"]), h.get("verdict")] + _check_statuses(h)
        if not h["gpus"]:
            rows.append(dict(zip(_CSV_HOST + _CSV_TAIL + _CSV_CHECK, base + tail)))
            continue
        for g in h["gpus"]:
            rows.append(dict(zip(CSV_COLUMNS, base + _csv_gpu_values(g) + tail)))
    return rows


_CSV_HOSTS_PER_CHUNK = 200


def _csv_cache(cache, value):
    text = _csv_cell(value)
    if isinstance(value, (str, bool)) and len(cache) < 100000:
        cache[value] = text
    return text


def iter_csv(data):
    """``to_csv`` in chunks."""
    s = _as_summary(data)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    empty = [""] * len(_CSV_GPU)
    cell = _csv_cell
    cache = {}
    for n, h in enumerate(s["hosts"], 1):
        base = [cell(v) for v in _csv_host_values(h)]
        reasons = [cell("; ".join(h["reasons"])), cell(h.get("verdict"))] + _check_statuses(h)
        if not h["gpus"]:
            writer.writerow(base + empty + reasons)
        else:
            # Numbers go out as they are, None as "", text through a cache of _csv_cell (model names,
            # modes, gate texts repeat), the rest through _csv_cell.
            writer.writerows([base + [v if (t := type(v)) is int or t is float else "" if v is None else
                                      (cache[v] if (t is str or t is bool) and v in cache else _csv_cache(cache, v))
                                      for v in _csv_gpu_values(g)] + reasons for g in h["gpus"]])
        if n % _CSV_HOSTS_PER_CHUNK == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def to_csv(data):
    """CSV text with a header row (``CSV_COLUMNS``): one row per GPU plus one per host without GPUs."""
    return "".join(iter_csv(data))
