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

from . import cells as _cells
from ._common import CHECK_ITEMS, _text
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
