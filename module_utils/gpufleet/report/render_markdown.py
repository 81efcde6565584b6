"""fleet.md: the report as Markdown from templates/report.md.j2 (Jinja2; every host value through the ``md``
filter, jinja_env.py). Python gives the template rows of plain values; the template escapes and lays them out."""

from . import cells as _cells
from ._common import CHECK_ITEMS, CHECK_MODE_BANNER, CHECK_STATUSES, _d
from .jinja_env import get_template
from .model import facts_time_text
from .parallel import chunked
from .summary import _as_summary

BAD_HEADERS = ["host", "status", "provider", "action", "reasons"]
HOST_HEADERS = ["host", "status", "provider", "$/h", "GPUs", "driver / CUDA", "facts read at", "reasons", "verdict"]
SECURITY_HEADERS = ["host", "severity", "status", "finding", "fix gpufleet applies", "source"]


def _host_name(h):
    return h["host"] + (" (simulated)" if h["simulated"] else "")


def _host_rows(hosts):
    money, models, driver, facts_time = _cells._money, _cells._models, _cells._driver_text, facts_time_text
    for h in hosts:
        yield (_host_name(h), h["status"], _cells._provider_cell(h), money(h["price_per_hour"]), models(h), driver(h),
               facts_time(h), "; ".join(h["reasons"]), h.get("verdict"))


def _gpu_rows(hosts, tests):
    for h in hosts:
        if h["gpus"]:
            driver = _cells._driver_text(h)
            for g in h["gpus"]:
                yield [h["host"]] + _cells._gpu_cells(h, g, tests, driver)


def _checklist_rows(listed):
    for h in listed:
        yield [h["host"], h["status"]] + [_cells._check_cell(h, key) for key, _unused in CHECK_ITEMS]


def context(data):
    """The template's values for the summary ``data`` (plain values; the template escapes them)."""
    s = _as_summary(data)
    tests = _cells._gate_tests(s)
    listed, check_total = _cells._checklist_hosts(s)
    has_gpus = any(h["gpus"] for h in s["hosts"])
    remediations = [(h, _d(h["doctor"]).get("remediation")) for h in s["hosts"]]
    return {
        "check_mode_banner": CHECK_MODE_BANNER if s.get("check_mode") else None,
        "generated_at": s["generated_at"], "fleet_lines": _cells._fleet_lines(s),
        "bad_headers": BAD_HEADERS,
        "bad_rows": [[_host_name(b), b["status"], _cells._provider_cell(b),
                      b["action"] + (": " + b["return_action"] if b.get("return_action") else ""),
                      "; ".join(b["reasons"])] for b in s["bad_hosts"]],
        "drift": _cells._drift_rows(s),
        "host_headers": HOST_HEADERS, "host_rows": _host_rows(s["hosts"]),
        "checklist": bool(listed), "check_note": _cells._CHECK_NOTE,
        "check_count_headers": ["item"] + list(CHECK_STATUSES), "check_counts": _cells._check_count_rows(s),
        "check_listed": len(listed), "check_total": check_total,
        "check_headers": ["host", "status"] + [label for _unused, label in CHECK_ITEMS],
        "check_rows": _checklist_rows(listed), "capacity_rules": _cells._capacity_rules(),
        "security_headers": SECURITY_HEADERS, "security": _cells._security_rows(listed),
        "gpu_headers": (["host"] + _cells._GPU_HEADERS + ["gate %s" % t for t in tests]) if has_gpus else None,
        "gpu_rows": _gpu_rows(s["hosts"], tests),
        "gate_other_headers": _cells._GATE_OTHER_HEADERS, "gate_other": _cells._gate_other_rows(s),
        "remediation_headers": _cells._REMEDIATION_HEADERS,
        "remediation": [[h["host"]] + _cells._remediation_cells(r) for h, r in remediations if isinstance(r, dict)],
        "warnings": s["warnings"],
    }


def iter_markdown(data):
    """``to_markdown`` in chunks."""
    return chunked(get_template("report.md.j2").generate(**context(data)))


def to_markdown(data):
    """The report as Markdown: fleet summary, hosts to return / fix, version drift, hosts, checklist, GPUs."""
    return "".join(iter_markdown(data))
