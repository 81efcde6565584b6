"""fleet.html: one self-contained page from templates/report.html.j2 (Jinja2, autoescape on).

Python gives the template plain text cells and the pictures' numbers (pictures.py); the template
writes every tag, and Jinja2 escapes every value it prints, so no host-provided text reaches the page
unescaped. The page's only script is ``SORT_SCRIPT``, allowed by its hash in the Content-Security-Policy.
"""

import base64
import hashlib

from ..parallel import chunked
from . import cells as _cells
from . import columns as _columns
from . import pictures as _pictures
from ._common import _EMPTY, CHECK_ITEMS, STATUSES, _d, _l, _text, check_items
from .cells import produced_by_text
from .jinja_env import get_template, trusted
from .summary import _as_summary, one_line

# The page's only script: click (or Enter on) a column header of a table.sortable to sort its
# rows by that column, numbers as numbers, again to reverse. The Content-Security-Policy allows
# exactly this text by its SHA-256 hash; nothing else may run and nothing loads.
SORT_SCRIPT = """(function () {
  "use strict";
  var collator = new Intl.Collator(undefined, {numeric: true, sensitivity: "base"});
  function key(cell) {
    var text = cell ? cell.textContent.trim() : "";
    var n = /^[-$]?[0-9]/.test(text) ? parseFloat(text.replace(/^\\$/, "")) : NaN;
    return {text: text, num: isNaN(n) ? null : n};
  }
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
    var asc = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(th.parentNode.cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var rows = Array.prototype.map.call(body.rows, function (row) {
      var k = key(row.cells[col]);
      k.row = row;
      return k;
    });
    rows.sort(function (a, b) {
      var d = (a.num !== null && b.num !== null) ? a.num - b.num : collator.compare(a.text, b.text);
      return asc ? d : -d;
    });
    var frag = document.createDocumentFragment();
    rows.forEach(function (k) { frag.appendChild(k.row); });
    body.appendChild(frag);
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.tabIndex = 0;
      th.title = "sort by this column";
      th.addEventListener("click", function () { sortBy(th); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(th); }
      });
    });
    table.setAttribute("data-sortable", "ready");
  });
}());"""

# The GPU table in the page stops at this many rows (GPUs of hosts that are not ok first);
# fleet.csv always has every GPU.
HTML_GPU_ROWS = 2000

# Columns of the doctor table (the host and GPU tables' columns are in columns.py).
DOCTOR_HEADERS = ["host", "code", "severity", "remedy class", "meaning", "remedy"]
# Checklist cell status -> CSS class of the cell.
_CHECK_CLS = {"fail": "fail", "ok": "pass", "unknown": "muted"}


def script_hash(script=SORT_SCRIPT):
    """The CSP source that allows exactly ``script`` inline: 'sha256-<base64 of its SHA-256>'."""
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def _csp():
    return "default-src 'none'; style-src 'unsafe-inline'; script-src %s" % script_hash()


def _host_rows(hosts):
    """Per host: (host, simulated, status, [(css class or None, text)] of the cells between status and reasons
    (columns.HOST_COLUMNS), reasons, verdict)."""
    cells = _columns.host_cells(_columns.HTML)
    for h in hosts:
        yield h["host"], h["simulated"], h["status"], cells(h), h["reasons"], h.get("verdict") or ""


def _gpu_pick(s):
    """(GPU rows to list, total GPUs): every GPU up to HTML_GPU_ROWS, GPUs of hosts that are not ok first."""
    total = sum(len(h["gpus"]) for h in s["hosts"])
    if total <= HTML_GPU_ROWS:
        return [(h, g) for h in s["hosts"] for g in h["gpus"]], total
    pick = [(h, g) for h in s["hosts"] if h["status"] != "ok" for g in h["gpus"]][:HTML_GPU_ROWS]
    if len(pick) < HTML_GPU_ROWS:
        pick += [(h, g) for h in s["hosts"] if h["status"] == "ok" for g in h["gpus"]][:HTML_GPU_ROWS - len(pick)]
    return pick, total


def _gpu_rows(pick, tests):
    """Per GPU: (host, simulated, status, [(css class or None, text)])."""
    css = _columns.page_css(_columns.HTML)
    n_fixed = len(css)
    gpu_cells = _columns.page_cells(_columns.HTML)
    driver_of = {}
    for h, g in pick:
        key = id(h)
        if key not in driver_of:
            driver_of = {key: _cells._driver_text(h)}
        cells = []
        for i, c in enumerate(gpu_cells(h, g, tests, driver_of[key])):
            if i >= n_fixed:
                cls = "fail" if c.endswith("FAIL") else ("pass" if c.endswith("pass") else None)
            else:
                cls = css[i](g) if css[i] else None
            cells.append((cls, c))
        yield h["host"], h["simulated"], h["status"], cells


def _checklist_rows(listed, shown=CHECK_ITEMS):
    """Per listed host: (host, simulated, status, [(css class or None, text)]) over the items ``shown``
    (check_items: CHECK_ITEMS and the optional ones the fleet has)."""
    for h in listed:
        items = h.get("checklist") or _EMPTY
        cells = []
        for key, _unused in shown:
            st = (items.get(key) or _EMPTY).get("status") or "unknown"
            cells.append((_CHECK_CLS.get(st), _cells._check_cell(h, key)))
        yield h["host"], h["simulated"], h["status"], cells


def context(data):
    """The template's values for the summary ``data`` (text and numbers; the template escapes them)."""
    s = _as_summary(data)
    t = s["totals"]
    tests = _cells._gate_tests(s)
    pick, gpu_total = _gpu_pick(s)
    listed, check_total = _cells._checklist_hosts(s)
    doctors = [(h, f) for h in s["hosts"] for f in _l(_d(h["doctor"]).get("findings")) if isinstance(f, dict)]
    return dict(_cells.shared_context(s, listed, check_total), **{
        "csp": trusted(_csp()), "sort_script": trusted(SORT_SCRIPT),
        "generated_at": _text(s["generated_at"]), "produced_by": produced_by_text(s), "one_line": one_line(s),
        "status_counts": [(k, t["hosts_by_status"].get(k, 0)) for k in STATUSES],
        "pictures": _pictures.pictures(s, listed, check_total),
        "bad_hosts": [(b["host"], b["simulated"], b["status"], _cells._provider_cell(b), b["action"],
                       b.get("return_action"), b["reasons"]) for b in s["bad_hosts"]],
        "usual": (_text(t.get("usual_driver_version")), _text(t.get("usual_cuda_driver_version"))),
        "host_count": len(s["hosts"]), "host_headers": _columns.host_headers(_columns.HTML),
        "host_rows": _host_rows(s["hosts"]),
        "check_rows": _checklist_rows(listed, check_items(s["hosts"])),
        "box_headers": _columns.box_headers(_columns.HTML),
        "box_rows": list(_columns.box_rows(_columns.HTML, s["hosts"])) if _columns.box_shown(s["hosts"]) else [],
        "gpu_total": gpu_total, "gpu_listed": len(pick),
        "gpu_headers": ["host", "status"] + _columns.page_headers(_columns.HTML) + ["gate: %s" % x for x in tests],
        "gpu_rows": _gpu_rows(pick, tests),
        "doctor_headers": DOCTOR_HEADERS,
        "doctors": [(h["host"], f.get("code"), f.get("severity"),
                     f.get("remedy_class") or ("fixable" if f.get("fixable") else None),
                     f.get("meaning") or f.get("message"), f.get("remedy")) for h, f in doctors],
    })


def iter_html(data):
    """``to_html`` in chunks."""
    return chunked(get_template("report.html.j2").generate(**context(data)))


def to_html(data):
    """One self-contained HTML page: inline CSS, inline SVG pictures and one inline sort script allowed by its
    hash in the page's Content-Security-Policy; no external resources."""
    return "".join(iter_html(data))
