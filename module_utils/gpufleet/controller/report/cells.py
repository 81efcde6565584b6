"""Table cells shared by the Markdown and HTML reports: plain text from the host and GPU rows.

A GPU column is one row of columns.GPU_COLUMNS (its cell made from the helpers here). To add a column to another
table: add its header to the header list here (or in the renderer's ``*_HEADERS``) and its text to the row function
next to it; both templates (templates/report.html.j2, templates/report.md.j2) loop over those lists.
Cells are plain text: each template escapes them for its format.
"""

from ..checklist import capacity as _capacity
from ._common import (
    _EMPTY,
    CHECK_ITEMS,
    CHECK_MODE_BANNER,
    CHECK_STATUSES,
    STATUSES,
    _d,
    _l,
    _round,
    _text,
    check_items,
)


def _fmt_mem(mib):
    return "" if mib is None else "%.0f GiB" % (mib / 1024.0)


def _pair(cur, top, prefix=""):
    if cur is None and top is None:
        return ""
    return "%s%s/%s" % (prefix, _text(cur) or "?", _text(top) or "?")


def _power(g):
    if g["power_draw_w"] is None and g["power_limit_w"] is None:
        return ""
    return "%s/%s W" % (_text(_round(g["power_draw_w"], 0)) or "?", _text(_round(g["power_limit_w"], 0)) or "?")


def _ecc(g):
    if g["ecc_mode"] is None and g["ecc_volatile_uncorrected"] is None and g["ecc_aggregate_uncorrected"] is None:
        return ""
    text = _text(g["ecc_mode"]) or "?"
    counts = (g["ecc_volatile_uncorrected"], g["ecc_aggregate_uncorrected"], g["ecc_volatile_corrected"],
              g["ecc_aggregate_corrected"])
    if any(c is not None for c in counts):
        text += " unc %s/%s corr %s/%s" % tuple(_text(c) or "-" for c in counts)
    return text


def _gate_tests(s):
    return sorted({g["test"] for h in s["hosts"] for row in h["gpus"] for g in row["gate"]})


_PASSED_TEXT = {True: "pass", False: "FAIL", None: ""}


def _gate_cell(row, test):
    for g in row["gate"]:
        if g["test"] == test:
            return _gate_entry_text(g)
    return ""


def _gate_entry_text(g):
    frac = "" if g["fraction_of_peak"] is None else "%.0f%%" % (100 * g["fraction_of_peak"])
    measured = "" if g["measured"] is None else "%s %s" % (_text(g["measured"]), g["unit"])
    return " ".join([p for p in (measured, frac, _PASSED_TEXT[g["passed"]]) if p])


def _gate_cells(row, tests):
    """The row's gate cell per test in ``tests`` ("" where the GPU has no result for it)."""
    gate = row["gate"]
    if not gate:
        return [""] * len(tests)
    first = {}
    for g in gate:
        first.setdefault(g["test"], g)
    return [_gate_entry_text(first[t]) if t in first else "" for t in tests]


def _driver_text(h):
    return "%s / %s" % (_text(h["driver_version"]) or "?", _text(h["cuda_driver_version"]) or "?")


# --------------------------------------------------------------------------- checklist (shared)
# The checklist tables list this many hosts (those with a failed or warned item first); fleet.json
# and fleet.csv always have every host.
CHECKLIST_ROWS = 2000
_CHECK_ORDER = {"fail": 0, "warn": 1, "unknown": 2, "ok": 3}


def _check_rank(h):
    items = h.get("checklist") or _EMPTY
    return min([_CHECK_ORDER.get((items.get(k) or _EMPTY).get("status"), 2) for k, _unused in CHECK_ITEMS])


def _checklist_hosts(s):
    """(hosts to list, total): hosts with a failed item first, then warned, unknown, ok; at most CHECKLIST_ROWS."""
    hosts = s["hosts"]
    if len(hosts) <= CHECKLIST_ROWS:
        return [h for h in hosts if h.get("checklist")], len(hosts)
    ranked = sorted(((_check_rank(h), i) for i, h in enumerate(hosts) if h.get("checklist")))
    return [hosts[i] for _unused, i in ranked[:CHECKLIST_ROWS]], len(hosts)


def _check_cell(h, key):
    item = (h.get("checklist") or _EMPTY).get(key) or _EMPTY
    return "%s: %s" % (item.get("status") or "unknown", _text(item.get("summary")) or "")


def _check_count_rows(s):
    counts = s["totals"].get("checklist") or {}
    return [[label] + [str((counts.get(key) or {}).get(st, 0)) for st in CHECK_STATUSES]
            for key, label in check_items(s["hosts"])]


def _security_rows(hosts):
    rows = []
    for h in hosts:
        sec = (h.get("checklist") or _EMPTY).get("security") or _EMPTY
        for f in sec.get("findings") or ():
            rows.append([h["host"], f.get("severity"), f.get("status"), f.get("message"), f.get("fix"),
                         f.get("source")])
            if len(rows) >= CHECKLIST_ROWS:
                return rows
    return rows


def _capacity_rules():
    return ["%s: %s (%s GB per billion parameters)" % (w["label"], w["rule"], _capacity.number_text(
        w["bytes_per_param"] * w["overhead"])) for w in _capacity.WORKLOADS] + [
        "usable memory: %d %% of each GPU; a model that only fits across the host's GPUs needs sharding "
        "(tensor/pipeline parallel for inference, ZeRO-3 / FSDP for training); docs/capacity.md has worked examples"
        % round(_capacity.USABLE_FRACTION * 100)]


def produced_by_text(s):
    """", by ansible-core 2.19.14 (Python 3.11.7)" for the report's first line when the summary records what made it
    (scripts/fleet-report --ansible-core, passed by report.yml); "" otherwise."""
    made = _d(s.get("produced_by"))
    if not made.get("ansible_core"):
        return ""
    return ", by ansible-core %s%s" % (_text(made["ansible_core"]),
                                       " (Python %s)" % _text(made["python"]) if made.get("python") else "")


_CHECK_NOTE = ("What a renter checks before paying (the twelve items of docs/checklist.md) and the box's GPU history, "
               "computed from the facts, the doctor's evidence and earlier runs; 'unknown' says which fact the host "
               "did not report.")


def _money(value, digits=2):
    return "" if value is None else "$%.*f" % (digits, value)


def _fleet_lines(s):
    t = s["totals"]
    models = ", ".join("%d x %s" % (n, name) for name, n in t["gpus_by_model"].items()) or "none"
    return [
        ("hosts", "%d (%s)" % (t["hosts"], ", ".join("%s %d" % (k, t["hosts_by_status"].get(k, 0)) for k in STATUSES))),
        ("simulated hosts", str(t["simulated_hosts"])),
        ("GPUs", "%d (%d usable on ok/degraded hosts)" % (t["gpus"], t["gpus_usable"])),
        ("GPUs by model", models),
        ("GPU memory", "%.1f GiB" % t["gpu_memory_total_gib"]),
        ("peak BF16 (dense)", "%.1f TFLOPS" % t["peak_bf16_tflops"]),
        ("price", "%s/hour over %d priced host(s)" % (_money(t["price_per_hour"]), t["priced_hosts"])),
        ("$ per peak TFLOP-hour", _money(t["usd_per_peak_tflop_hour"], 4) or "n/a"),
        ("measured TFLOPS (gate)", "" if t["measured_tflops"] is None else "%.1f" % t["measured_tflops"]),
        ("$ per measured TFLOP-hour", _money(t["usd_per_measured_tflop_hour"], 4) or "n/a"),
        ("usual driver / CUDA", "%s / %s" % (
            _usual_text(t, "usual_driver_version", "driver_version"),
            _usual_text(t, "usual_cuda_driver_version", "cuda_driver_version"))),
        ("version drift", "%d host(s) differ from the usual driver or CUDA version" % len(
            {d["host"] for d in t.get("drift") or ()})),
    ] + [("versions differ", x["reason"]) for x in t.get("version_split") or ()]


def _usual_text(t, key, field):
    value = _text(t.get(key))
    if value:
        return value
    return "no majority" if any(x["field"] == field for x in t.get("version_split") or ()) else "?"


def _drift_rows(s):
    return [[d["host"], "driver" if d["field"] == "driver_version" else "CUDA", d["version"], d["usual"]]
            for d in s["totals"].get("drift") or ()]


# --------------------------------------------------------------------------- Markdown
# Text that needs no Markdown/HTML escaping and no whitespace folding: words of safe characters
def _remediation_cells(rem):
    still = "; ".join("%s (%s)" % (_text(x.get("code")), _text(x.get("why"))) for x in _l(rem.get("still_broken"))
                      if isinstance(x, dict))
    provider = ", ".join(_text(x.get("code")) for x in _l(rem.get("needs_provider")) if isinstance(x, dict))
    reboot = ", ".join(_text(x.get("code")) for x in _l(rem.get("needs_reboot")) if isinstance(x, dict))
    planned = ", ".join(_text(x.get("code")) + (" (would %s)" % _text(x["would"]) if x.get("would") else "")
                        for x in _l(rem.get("planned")) if isinstance(x, dict))
    return [rem.get("state"), ", ".join(_text(c) for c in _l(rem.get("fixed"))), still, provider, reboot, planned]


_GATE_OTHER_HEADERS = ["host", "device", "test", "measured", "expected", "unit", "passed", "why"]


def _gate_other_rows(s):
    return [[h["host"], g.get("device") or g.get("index"), g["test"], g["measured"], g["expected"], g["unit"],
             g["passed"], g["why"]] for h in s["hosts"] for g in _l(h.get("gate_other"))]


_REMEDIATION_HEADERS = ["host", "outcome", "fixed", "still broken (why)", "needs the provider", "needs a reboot",
                        "planned (--check)"]


def _provider_cell(bad):
    """Provider and its id of the box (what the provider's console and API call it)."""
    if bad.get("provider_id") is None:
        return bad["provider"]
    return "%s %s" % (bad["provider"], bad["provider_id"])


def _models(h):
    if not h["gpu_models"]:
        return "%d" % h["gpu_count"] if h["gpu_count"] else "none"
    return ", ".join("%d x %s" % (n, name) for name, n in sorted(h["gpu_models"].items(), key=lambda kv: str(kv[0])))


# --------------------------------------------------------------------------- the renter's torch (shared)
ENVIRONMENT_HEADERS = ["host", "environment", "kind", "torch", "judged"]
# The environments table lists this many rows (fleet.json has every one: the host rows' check.environments).
ENVIRONMENT_ROWS = CHECKLIST_ROWS
# find-python's kinds of environment (scripts/find-python, the check record's ``kind``) as the table says them.
_ENV_KINDS = {"login_shell": "login shell's python", "conda": "conda", "venv": "venv", "gpufleet": "gpufleet's venv",
              "system": "system Python"}


def _environment_rows(hosts):
    """(rows, total): per host with a pre-check record, each environment with torch, the judged one first.
    A row: cells (host, where, kind, torch build, "judged: <reason>" or ""), judged (bool) and why (find-python's
    own words for the judged one, else None)."""
    rows, total = [], 0
    for h in hosts:
        check = _d(h.get("check"))
        envs = [e for e in _l(check.get("environments")) if isinstance(e, dict) and e.get("torch")]
        if not envs:
            continue
        judged = _d(check.get("judged"))
        first = next((e for e in envs if judged.get("python") and e.get("python") == judged["python"]), None)
        for e in ([first] if first else []) + [e for e in envs if e is not first]:
            total += 1
            if len(rows) >= ENVIRONMENT_ROWS:
                continue
            is_judged = e is first
            said = (_text(judged.get("reason") or judged.get("why")) or None) if is_judged else None
            rows.append({"cells": [h["host"], _text(e.get("where") or e.get("python")),
                                   _ENV_KINDS.get(e.get("kind"), _text(e.get("kind"))), _text(e.get("torch")),
                                   ("judged: %s" % said if said else "judged") if is_judged else ""],
                         "judged": is_judged, "why": (_text(judged.get("why")) or None) if is_judged else None})
    return rows, total


BAD_HEADERS = ["host", "status", "provider", "action", "reasons"]
# Above the storage and network table (columns.BOX_COLUMNS), where some host has that evidence.
BOX_NOTE = ("What the renter pays for beside the GPU, as the pre-check (playbooks/check.yml) measured it on the "
            "data path, against the provider's listing (self-reported by the host): disk read at random 32 KiB "
            "against the listing's disk figure (sequential only where no random figure was made), one download "
            "stream against the listing's Mbit/s. Far below the listing the box is to be returned; slow without a "
            "listing is a note.")
SECURITY_HEADERS = ["host", "severity", "status", "finding", "fix gpufleet applies", "source"]


def shared_context(s, listed, check_total):
    """The template values the HTML page and the Markdown report share (the summary ``s``, its checklist hosts
    ``listed`` of ``check_total``); each renderer adds its own host, GPU and checklist rows."""
    remediations = [(h, _d(h["doctor"]).get("remediation")) for h in s["hosts"]]
    environments, environment_total = _environment_rows(s["hosts"])
    return {
        "check_mode_banner": CHECK_MODE_BANNER if s.get("check_mode") else None,
        "fleet_lines": _fleet_lines(s), "bad_headers": BAD_HEADERS, "drift": _drift_rows(s),
        "checklist": bool(listed), "check_note": _CHECK_NOTE,
        "check_count_headers": ["item"] + list(CHECK_STATUSES), "check_counts": _check_count_rows(s),
        "check_listed": len(listed), "check_total": check_total,
        "check_headers": ["host", "status"] + [label for _unused, label in check_items(s["hosts"])],
        "capacity_rules": _capacity_rules(),
        "security_headers": SECURITY_HEADERS, "security": _security_rows(listed),
        "gate_other_headers": _GATE_OTHER_HEADERS, "gate_other": _gate_other_rows(s),
        "remediation_headers": _REMEDIATION_HEADERS,
        "remediation": [[h["host"]] + _remediation_cells(r) for h, r in remediations if isinstance(r, dict)],
        "environment_headers": ENVIRONMENT_HEADERS, "environments": environments,
        "environment_total": environment_total, "box_note": BOX_NOTE,
        "warnings": s["warnings"], "what_to_do": _what_to_do(s),
    }


def _what_to_do(s):
    """The "what to do" groups (judgement.what_to_do) as text: action, command, hosts, the provider's return
    actions, and per finding its code, meaning, remedy and hosts."""
    return [{"action": g["action"], "command": _text(g["command"]), "hosts": _names(g["hosts"]),
             "return_actions": [_text(r) for r in (g.get("return_actions") or ())[:_TODO_NAMES]],
             "items": [[_text(i["code"]), _text(i["meaning"]), _text(i["remedy"]) or "-", _names(i["hosts"])]
                       for i in g["items"][:_TODO_ITEMS]]}
            for g in _l(s.get("what_to_do")) if isinstance(g, dict)]


# The page names this many hosts per group or finding, and this many findings per group; fleet.json has all.
_TODO_NAMES = 20
_TODO_ITEMS = 30


def _names(names):
    shown = ", ".join(_text(n) for n in names[:_TODO_NAMES])
    return shown + (" and %d more" % (len(names) - _TODO_NAMES) if len(names) > _TODO_NAMES else "")
