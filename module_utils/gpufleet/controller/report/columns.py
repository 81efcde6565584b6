# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report's columns as data, one row per column, read at render time in table order: ``GPU_COLUMNS``, from
which fleet.csv's GPU part and the GPU tables of fleet.html and fleet.md take their headers and cells, and
``HOST_COLUMNS``, from which fleet.csv's host part and the host tables of fleet.html and fleet.md take theirs. A new
column is one row here (plus its key in the GPU or host row, model.py, and docs/schema/fleet.schema.json when it
shows a new value). Not in the tables: the gate columns (one per test), fleet.csv's tail (reasons, verdict,
checklist) and the host tables' frame (host and status first, reasons and verdict last), which the templates mark up.
"""

import collections
import operator

from ..judgement import door as _door
from . import cells as _cells
from ._common import _EMPTY, CHECK_ITEMS, OPTIONAL_CHECK_ITEMS, _text
from .model import facts_time_text

CSV, HTML, MD = "csv", "html", "md"
ALL = (CSV, HTML, MD)
PAGE = (HTML, MD)

# key: the column's name in fleet.csv (the GPU row's key); label: its header in fleet.html and fleet.md (None: CSV
# only); formats: the files that show it; cell(host, gpu, driver text) -> the page's text; field: the GPU row's key
# fleet.csv reads (None: the whole row); csv(value) -> fleet.csv's value (None: the value as it is); css(gpu) -> the
# page cell's class or None.
Column = collections.namedtuple("Column", "key label formats cell field csv css")


def _formats(label, formats):
    """A row's files: as given, else every file for a column with a label, fleet.csv only for one without."""
    if formats is None:
        return ALL if label is not None else (CSV,)
    return tuple(formats)


def column(key, label=None, formats=None, cell=None, field=None, csv=None, css=None):
    """One row of ``GPU_COLUMNS``: formats default to every file with a label, fleet.csv only without one; field to
    ``key``; cell to the GPU row's ``key`` as text."""
    if cell is None:
        def cell(h, g, driver, k=key):
            return _text(g[k])
    return Column(key, label, _formats(label, formats), cell, key if field is None and csv is None else field, csv, css)


def _name(h, g, driver):
    name = _text(g["name"]) or "unknown GPU"
    return name + " (LOST)" if g["lost"] else name


def _gate_text(gate):
    """A GPU's gate results as one fleet.csv cell: "test fraction pass|FAIL; ..."."""
    parts = []
    for g in gate:
        frac = "" if g["fraction_of_peak"] is None else " %.2f" % g["fraction_of_peak"]
        verdict = {True: " pass", False: " FAIL", None: ""}[g["passed"]]
        parts.append("%s%s%s" % (g["test"], frac, verdict))
    return "; ".join(parts)


GPU_COLUMNS = [
    column("gpu_index", "GPU", field="index", cell=lambda h, g, d: _text(g["index"])),
    column("name", "model", cell=_name, css=lambda g: "fail" if g["lost"] else None),
    column("uuid"), column("serial"), column("pci_bus_id"),
    column("memory_total_mib", "memory", cell=lambda h, g, d: _cells._fmt_mem(g["memory_total_mib"])),
    column("memory_used_mib"),
    column("compute_capability", "CC"),
    column(None, "driver / CUDA", PAGE, cell=lambda h, g, driver: driver),
    column("pcie_gen_current", "PCIe gen cur/max",
           cell=lambda h, g, d: _cells._pair(g["pcie_gen_current"], g["pcie_gen_max"], "gen ")),
    column("pcie_gen_max"),
    column("pcie_width_current", "PCIe width cur/max",
           cell=lambda h, g, d: _cells._pair(g["pcie_width_current"], g["pcie_width_max"], "x")),
    column("pcie_width_max"),
    column("temperature_c", "temp",
           cell=lambda h, g, d: "" if g["temperature_c"] is None else "%s C" % _text(g["temperature_c"])),
    column("power_draw_w", "power/limit", cell=lambda h, g, d: _cells._power(g)),
    column("power_limit_w"),
    column("throttle_reasons", "throttle", field="throttle_reasons", csv=";".join,
           cell=lambda h, g, d: ", ".join(g["throttle_reasons"])),
    column("persistence_mode"), column("mig_mode"),
    column("ecc_mode", "ECC", cell=lambda h, g, d: _cells._ecc(g)),
    column("ecc_volatile_corrected"), column("ecc_volatile_uncorrected"), column("ecc_aggregate_corrected"),
    column("ecc_aggregate_uncorrected"), column("retired_pages_pending"), column("remapped_rows_uncorrectable"),
    column("remapped_rows_pending"), column("remapped_rows_failure"), column("nvlink_active"),
    column("nvlink_total"), column("lost"), column("spec_key"), column("peak_bf16_tflops"),
    column("features", "features (pinned torch wheel)", cell=lambda h, g, d: _text(g.get("features"))),
    column("findings", "health findings", field="findings", csv="; ".join,
           cell=lambda h, g, d: "; ".join(g["findings"])),
    column("gate", field="gate", csv=lambda gate: _gate_text(gate) if gate else ""),
    column("gate_passed"),
]

# key: the column's name in fleet.csv (None: the pages only); label: its header in the host tables of fleet.html and
# fleet.md (None: fleet.csv only); formats: the files that show it; cell(host) -> the page's text (HTML and Markdown
# alike; the Markdown template escapes it); csv(host) -> fleet.csv's raw value (None: the host row's ``key``); css:
# the HTML cell's class or None.
HostColumn = collections.namedtuple("HostColumn", "key label formats cell csv css")


def host_column(key, label=None, formats=None, cell=None, csv=None, css=None):
    """One row of ``HOST_COLUMNS``: formats default to every file with a label, fleet.csv only without one; cell to
    the host row's ``key`` as text."""
    if cell is None:
        def cell(h, k=key):
            return _text(h[k])
    return HostColumn(key, label, _formats(label, formats), cell, csv, css)


# fleet.csv has "source" before the driver, the HTML host table after it: one row for each.
HOST_COLUMNS = [
    host_column("host"),
    host_column("host_status", csv=operator.itemgetter("status")),
    host_column("simulated"),
    host_column("provider", "provider", cell=lambda h: _text(_cells._provider_cell(h))),
    host_column("price_per_hour", "$/h", cell=lambda h: _cells._money(h["price_per_hour"]), css="num"),
    host_column("source"),
    host_column(None, "GPUs", PAGE, cell=_cells._models),
    host_column(None, "memory", (HTML,), cell=lambda h: _cells._fmt_mem(h["memory_total_mib"] or None), css="num"),
    host_column(None, "peak BF16 TFLOPS", (HTML,), cell=lambda h: _text(h["peak_bf16_tflops"]), css="num"),
    host_column("driver_version", "driver / CUDA", cell=_cells._driver_text),
    host_column("cuda_driver_version"),
    host_column(None, "source", (HTML,), cell=lambda h: _text(h["source"])),
    host_column("facts_read_at", "facts read at", cell=facts_time_text),
    host_column("facts_read_at_source"),
]


# The storage and network group (issue 51: the pre-check's ``gpu_check.box`` against the listing, the host row's
# ``box``, judgement/box.py): shown only where some host of the fleet has that evidence (``box_shown``), so a fleet
# without it is reported as before. fleet.csv adds these columns after the checklist's; fleet.html and fleet.md show
# them in a "Storage and network" table, one row per host with the evidence. Same row shape as HOST_COLUMNS; cell(h)
# and csv(h) read ``h["box"]``.
def _box_part(h, name):
    return (h.get("box") or _EMPTY).get(name) or _EMPTY


def _rate_cell(value, listing=None, unit="MB/s"):
    if value is None:
        return "not measured"
    said = "%s %s" % (_door.box_text.mb_s(value), unit)
    return said + (" (listing %s)" % listing if listing else "")


def _disk_read_cell(h):
    disk = _box_part(h, "disk")
    read, how = _door.box_text.disk_read_used(disk)
    if read is None:
        return disk.get("error") or "not measured"
    claim = _box_part(h, "listing").get("disk_read_mb_s")
    threads = disk.get("rand_threads")
    how = how + (" x%s" % _text(threads) if threads and disk.get("rand_read_mb_s") is not None else "")
    return "%s %s%s" % (_rate_cell(read), how, " (listing %s MB/s)" % _door.box_text.mb_s(claim) if claim else "")


def _disk_write_cell(h):
    disk = _box_part(h, "disk")
    if disk.get("write_mb_s") is None:
        return disk.get("error") or "not measured"
    return _rate_cell(disk["write_mb_s"]) + (" (%s)" % disk["method"] if disk.get("method") else "")


def _transfer_cell(h, name, key):
    t = _box_part(h, name)
    if not t:
        return "not measured"
    if t.get("mb_s") is None:
        return t.get("error") or "not measured"
    claim = _box_part(h, "listing").get(key)
    return "%s (%s Mbit/s)%s%s" % (_rate_cell(t["mb_s"]), _door.box_text.mbit(t["mb_s"] * 8),
                                   " from %s" % t["host"] if t.get("host") and name == "download" else "",
                                   "; listing %s Mbit/s" % _door.box_text.mbit(claim) if claim else "")


def _path_cell(h):
    box = h.get("box") or _EMPTY
    path = box.get("data_path") or "?"
    return "%s (%s)" % (path, box.get("fstype") or "?")


def _gb(n):
    """Bytes as GB: whole above 10 GB, one decimal below (a small volume does not read "0 GB")."""
    return "{:,.0f}".format(n / 1e9) if n >= 1e10 else "%.1f" % (n / 1e9)


def _space_cell(h):
    box = h.get("box") or _EMPTY
    free, total, claim = box.get("free_bytes"), box.get("total_bytes"), _box_part(h, "listing").get("disk_gb")
    if free is None:
        return "not measured"
    said = "%s GB free" % _gb(free)
    if total:
        said += " of %s GB" % _gb(total)
    return said + ("; listing %s GB" % "{:,.0f}".format(claim) if claim else "")


def _files_cell(h):
    tf = _box_part(h, "torch_files")
    if tf.get("total_s") is None:
        return tf.get("error") or "not measured"
    return "%s files in %s s (p90 %s ms)" % (
        _door.box_text.count(tf.get("files")), _text(round(tf["total_s"], 2)), _text(tf.get("p90_ms")) or "?")


def _dns_cell(h):
    said = []
    for e in (h.get("box") or _EMPTY).get("dns") or ():
        if e.get("ok") is False:
            said.append("%s failed" % e["name"])
        else:
            said.append("%s %s ms" % (e["name"], _text(round(e["ms"])) if e.get("ms") is not None else "?"))
    return "; ".join(said) or "not measured"


_OPTIONAL_BOX = OPTIONAL_CHECK_ITEMS[0][0]


def _box_item_cell(h):
    item = (h.get("checklist") or _EMPTY).get(_OPTIONAL_BOX) or _EMPTY
    return "%s: %s" % (item.get("status") or "unknown", _text(item.get("summary")))


def _box_csv(name, key):
    return lambda h: _box_part(h, name).get(key)


BOX_COLUMNS = [
    host_column("box_data_path", "data path", cell=_path_cell, csv=lambda h: (h.get("box") or _EMPTY).get("data_path")),
    host_column("box_fstype", csv=lambda h: (h.get("box") or _EMPTY).get("fstype")),
    host_column("box_free_bytes", "free space", cell=_space_cell,
                csv=lambda h: (h.get("box") or _EMPTY).get("free_bytes"), css="num"),
    host_column("box_disk_read_mb_s", "disk read", cell=_disk_read_cell,
                csv=lambda h: _door.box_text.disk_read_used(_box_part(h, "disk"))[0], css="num"),
    host_column("box_disk_read_kind", csv=lambda h: "random_%skib" % _text(_box_part(h, "disk").get("rand_block_kib"))
                if _box_part(h, "disk").get("rand_read_mb_s") is not None else
                "sequential" if _box_part(h, "disk").get("read_mb_s") is not None else None),
    host_column("box_disk_seq_read_mb_s", csv=_box_csv("disk", "read_mb_s")),
    host_column("box_disk_write_mb_s", "disk write", cell=_disk_write_cell, csv=_box_csv("disk", "write_mb_s"),
                css="num"),
    host_column("box_listing_disk_read_mb_s", csv=_box_csv("listing", "disk_read_mb_s")),
    host_column("box_torch_files_s", "small files (import torch)", cell=_files_cell,
                csv=_box_csv("torch_files", "total_s")),
    host_column("box_dns", "DNS", cell=_dns_cell, csv=lambda h: _dns_cell(h) if h.get("box") else None),
    host_column("box_download_mb_s", "download", cell=lambda h: _transfer_cell(h, "download", "net_down_mbit"),
                csv=_box_csv("download", "mb_s"), css="num"),
    host_column("box_upload_mb_s", "upload", cell=lambda h: _transfer_cell(h, "upload", "net_up_mbit"),
                csv=_box_csv("upload", "mb_s"), css="num"),
    host_column("box_listing_net_down_mbit", csv=_box_csv("listing", "net_down_mbit")),
    host_column("box_listing_net_up_mbit", csv=_box_csv("listing", "net_up_mbit")),
    host_column("box_listing_source", "listing", (HTML, MD, CSV), cell=lambda h: _text(
        _box_part(h, "listing").get("source")) or "none", csv=_box_csv("listing", "source")),
    host_column(None, "storage and network", PAGE, cell=_box_item_cell),
]


def box_shown(hosts):
    """True when some host of ``hosts`` has storage and network evidence (the group's columns are shown)."""
    return any(h.get("box") for h in hosts)


def box_headers(fmt):
    """The "Storage and network" table's headers in ``fmt`` (HTML or MD): host, then the group's columns."""
    return ["host"] + [c.label for c in of(fmt, BOX_COLUMNS)]


def box_rows(fmt, hosts):
    """Per host with storage and network evidence: [host, the group's cells] in ``fmt``; in HTML each cell is
    (css class or None, text)."""
    cols = of(fmt, BOX_COLUMNS)
    for h in hosts:
        if not h.get("box"):
            continue
        cells = [(c.css, c.cell(h)) if fmt == HTML else c.cell(h) for c in cols]
        yield [h["host"]] + cells


def csv_box_values():
    """(fleet.csv's storage and network column names, values(host row) -> their raw values)."""
    cols = of(CSV, BOX_COLUMNS)
    getters = [c.csv for c in cols]
    return tuple(c.key for c in cols), lambda h: [get(h) for get in getters]


# fleet.csv's columns after the GPU part (a host without GPUs has its GPU part empty).
CSV_TAIL = ("host_reasons", "verdict")
# One status column per checklist item, after the verdict (the texts are in fleet.json, .md, .html).
CSV_CHECK = tuple("check_" + key for key, _unused in CHECK_ITEMS)


def of(fmt, table=None):
    """The columns of ``table`` (GPU_COLUMNS unless told HOST_COLUMNS) that ``fmt`` (CSV, HTML or MD) shows, in table
    order; the table is read at the call, so a row added to it shows."""
    return [c for c in (GPU_COLUMNS if table is None else table) if fmt in c.formats]


def csv_host():
    """fleet.csv's host part: the names of the host columns it shows."""
    return tuple(c.key for c in of(CSV, HOST_COLUMNS))


def csv_columns():
    """fleet.csv's header: the host's columns, the GPU columns, the host's reasons and verdict, the checklist."""
    return csv_host() + tuple(c.key for c in of(CSV)) + CSV_TAIL + CSV_CHECK


CSV_COLUMNS = csv_columns()


def csv_values():
    """(GPU column names, values(gpu row) -> their raw fleet.csv values in that order) for the table as it is now."""
    cols = of(CSV)
    get = operator.itemgetter(*[c.field or "index" for c in cols])
    fixes = [(i, c.csv, c.field is None) for i, c in enumerate(cols) if c.csv is not None]

    def values(g):
        out = list(get(g))
        for i, fix, whole in fixes:
            out[i] = fix(g if whole else out[i])
        return out

    return tuple(c.key for c in cols), values


def page_headers(fmt):
    """The GPU table's fixed headers in ``fmt`` (HTML or MD); the gate columns follow them."""
    return [c.label for c in of(fmt)]


def page_cells(fmt):
    """cells(host, gpu, gate tests, driver text) -> the GPU's cells in ``fmt``: the fixed columns, then one gate
    cell per test."""
    makers = [c.cell for c in of(fmt)]

    def cells(h, g, tests, driver):
        return [make(h, g, driver) for make in makers] + _cells._gate_cells(g, tests)

    return cells


def page_css(fmt):
    """The fixed columns' css(gpu) functions in ``fmt`` (None where a column has no class)."""
    return [c.css for c in of(fmt)]


def csv_host_values():
    """values(host row) -> its raw fleet.csv values of the host part, in ``csv_host()`` order."""
    getters = [c.csv or operator.itemgetter(c.key) for c in of(CSV, HOST_COLUMNS)]

    def values(h):
        return [get(h) for get in getters]

    return values


def host_headers(fmt):
    """The host table's headers in ``fmt`` (HTML or MD): host and status, the table's columns, reasons, verdict."""
    return ["host", "status"] + [c.label for c in of(fmt, HOST_COLUMNS)] + ["reasons", "verdict"]


def host_cells(fmt):
    """cells(host row) -> the host table's cells in ``fmt`` between status and reasons: (css class or None, text)
    in HTML, text in MD."""
    cols = of(fmt, HOST_COLUMNS)
    if fmt == HTML:
        pairs = [(c.css, c.cell) for c in cols]
        return lambda h: [(css, make(h)) for css, make in pairs]
    makers = [c.cell for c in cols]
    return lambda h: [make(h) for make in makers]
