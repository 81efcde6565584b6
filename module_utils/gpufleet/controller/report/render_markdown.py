"""fleet.md: the report as Markdown from templates/report.md.j2 (Jinja2; every host value through the ``md``
filter, jinja_env.py). Python gives the template rows of plain values; the template escapes and lays them out."""

from ..parallel import chunked
from . import cells as _cells
from . import columns as _columns
from ._common import CHECK_ITEMS, check_items
from .cells import produced_by_text
from .jinja_env import get_template
from .summary import _as_summary


def _host_name(h):
    return h["host"] + (" (simulated)" if h["simulated"] else "")


def _host_rows(hosts):
    """Per host: its name, status, the cells of columns.HOST_COLUMNS, reasons and verdict."""
    cells = _columns.host_cells(_columns.MD)
    for h in hosts:
        yield [_host_name(h), h["status"]] + cells(h) + ["; ".join(h["reasons"]), h.get("verdict")]


def _gpu_rows(hosts, tests):
    cells = _columns.page_cells(_columns.MD)
    for h in hosts:
        if h["gpus"]:
            driver = _cells._driver_text(h)
            for g in h["gpus"]:
                yield [h["host"]] + cells(h, g, tests, driver)


def _checklist_rows(listed, shown=CHECK_ITEMS):
    for h in listed:
        yield [h["host"], h["status"]] + [_cells._check_cell(h, key) for key, _unused in shown]


def context(data):
    """The template's values for the summary ``data`` (plain values; the template escapes them)."""
    s = _as_summary(data)
    tests = _cells._gate_tests(s)
    listed, check_total = _cells._checklist_hosts(s)
    has_gpus = any(h["gpus"] for h in s["hosts"])
    return dict(_cells.shared_context(s, listed, check_total), **{
        "generated_at": s["generated_at"], "produced_by": produced_by_text(s),
        "bad_rows": [[_host_name(b), b["status"], _cells._provider_cell(b),
                      b["action"] + (": " + b["return_action"] if b.get("return_action") else ""),
                      "; ".join(b["reasons"])] for b in s["bad_hosts"]],
        "host_headers": _columns.host_headers(_columns.MD), "host_rows": _host_rows(s["hosts"]),
        "check_rows": _checklist_rows(listed, check_items(s["hosts"])),
        "box_headers": _columns.box_headers(_columns.MD),
        "box_rows": list(_columns.box_rows(_columns.MD, s["hosts"])) if _columns.box_shown(s["hosts"]) else [],
        "gpu_headers": (["host"] + _columns.page_headers(_columns.MD) + ["gate %s" % t for t in tests]
                        if has_gpus else None),
        "gpu_rows": _gpu_rows(s["hosts"], tests),
    })


def iter_markdown(data):
    """``to_markdown`` in chunks."""
    return chunked(get_template("report.md.j2").generate(**context(data)))


def to_markdown(data):
    """The report as Markdown: fleet summary, hosts to return / fix, version drift, hosts, checklist, GPUs."""
    return "".join(iter_markdown(data))
