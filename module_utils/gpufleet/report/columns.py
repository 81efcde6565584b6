# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU columns of the report as data: ``GPU_COLUMNS``, one row per column, from which fleet.csv's GPU part and
the GPU tables of fleet.html and fleet.md take their headers and cells (read at render time, in table order). A new
GPU column is one row here (plus its key in the GPU row, model.py, and docs/schema/fleet.schema.json ``$defs/gpu``
when it shows a new value); the host part of fleet.csv and the gate columns (one per test) are not in the table.
"""

import collections
import operator

from . import cells as _cells
from ._common import CHECK_ITEMS, _text

CSV, HTML, MD = "csv", "html", "md"
ALL = (CSV, HTML, MD)
PAGE = (HTML, MD)

# key: the column's name in fleet.csv (the GPU row's key); label: its header in fleet.html and fleet.md (None: CSV
# only); formats: the files that show it; cell(host, gpu, driver text) -> the page's text; field: the GPU row's key
# fleet.csv reads (None: the whole row); csv(value) -> fleet.csv's value (None: the value as it is); css(gpu) -> the
# page cell's class or None.
Column = collections.namedtuple("Column", "key label formats cell field csv css")


def column(key, label=None, formats=None, cell=None, field=None, csv=None, css=None):
    """One row of ``GPU_COLUMNS``: formats default to every file with a label, fleet.csv only without one; field to
    ``key``; cell to the GPU row's ``key`` as text."""
    if formats is None:
        formats = ALL if label is not None else (CSV,)
    if cell is None:
        def cell(h, g, driver, k=key):
            return _text(g[k])
    return Column(key, label, tuple(formats), cell, key if field is None and csv is None else field, csv, css)


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

# fleet.csv's columns before and after the GPU part (a host without GPUs has its GPU part empty).
CSV_HOST = ("host", "host_status", "simulated", "provider", "price_per_hour", "source", "driver_version",
            "cuda_driver_version", "facts_read_at", "facts_read_at_source")
CSV_TAIL = ("host_reasons", "verdict")
# One status column per checklist item, after the verdict (the texts are in fleet.json, .md, .html).
CSV_CHECK = tuple("check_" + key for key, _unused in CHECK_ITEMS)


def of(fmt):
    """The columns ``fmt`` (CSV, HTML or MD) shows, in table order."""
    return [c for c in GPU_COLUMNS if fmt in c.formats]


def csv_columns():
    """fleet.csv's header: the host's columns, the GPU columns, the host's reasons and verdict, the checklist."""
    return CSV_HOST + tuple(c.key for c in of(CSV)) + CSV_TAIL + CSV_CHECK


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
