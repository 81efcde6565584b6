"""fleet.csv: one row per GPU plus one per host without GPUs; its columns are columns.csv_columns() (the host and
GPU parts from the column tables, columns.HOST_COLUMNS and columns.GPU_COLUMNS, read at render time)."""

import csv
import io

from . import columns as _columns
from ._common import _EMPTY, CHECK_ITEMS, check_items
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


def _check_statuses(h, shown=CHECK_ITEMS):
    checks = h.get("checklist") or _EMPTY
    return [(checks.get(key) or _EMPTY).get("status") or "unknown" for key, _unused in shown]


def _extra(hosts):
    """(the checklist items shown, the optional items' and the storage and network group's column names, values(h)
    -> the storage and network group's raw values or None): what fleet.csv adds after its usual columns only where
    some host has that evidence (columns.box_shown; none: the file as before)."""
    shown = check_items(hosts)
    names = tuple("check_" + key for key, _unused in shown[len(CHECK_ITEMS):])
    if not _columns.box_shown(hosts):
        return shown, names, None
    box_names, box_values = _columns.csv_box_values()
    return shown, names + box_names, box_values


def csv_rows(data):
    """Rows (dicts keyed by ``csv_columns()``): one per GPU, one per host without GPU details."""
    s = _as_summary(data)
    shown, extra, box_values = _extra(s["hosts"])
    columns, gpu_values = _columns.csv_columns() + extra, _columns.csv_values()[1]
    no_gpu = _columns.csv_host() + _columns.CSV_TAIL + _columns.CSV_CHECK + extra
    host_values = _columns.csv_host_values()
    rows = []
    for h in s["hosts"]:
        base = host_values(h)
        tail = ["; ".join(h["reasons"]), h.get("verdict")] + _check_statuses(h, shown)
        tail += box_values(h) if box_values else []
        if not h["gpus"]:
            rows.append(dict(zip(no_gpu, base + tail)))
            continue
        for g in h["gpus"]:
            rows.append(dict(zip(columns, base + gpu_values(g) + tail)))
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
    gpu_columns, gpu_values = _columns.csv_values()
    host_values = _columns.csv_host_values()
    shown, extra, box_values = _extra(s["hosts"])
    writer.writerow(_columns.csv_columns() + extra)
    empty = [""] * len(gpu_columns)
    cell = _csv_cell
    cache = {}
    for n, h in enumerate(s["hosts"], 1):
        base = [cell(v) for v in host_values(h)]
        reasons = [cell("; ".join(h["reasons"])), cell(h.get("verdict"))] + _check_statuses(h, shown)
        if box_values:
            reasons += [cell(v) for v in box_values(h)]
        if not h["gpus"]:
            writer.writerow(base + empty + reasons)
        else:
            # Numbers go out as they are, None as "", text through a cache of _csv_cell (model names,
            # modes, gate texts repeat), the rest through _csv_cell.
            writer.writerows([base + [v if (t := type(v)) is int or t is float else "" if v is None else
                                      (cache[v] if (t is str or t is bool) and v in cache else _csv_cache(cache, v))
                                      for v in gpu_values(g)] + reasons for g in h["gpus"]])
        if n % _CSV_HOSTS_PER_CHUNK == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def to_csv(data):
    """CSV text with a header row (``csv_columns()``): one row per GPU plus one per host without GPUs."""
    return "".join(iter_csv(data))
