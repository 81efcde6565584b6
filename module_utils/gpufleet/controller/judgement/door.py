# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one door to the judgement. The report builds rows (report/model.py: what the evidence says, in text and
numbers) and comes here for what they mean:

- ``judge_host(result, row)``: one host's own evidence (its run record, GPU facts and their health, the gate, the
  pre-check, the doctor) -> its findings, the health lines its row shows, and the decision on that evidence.
- ``judge_fleet(rows, history)``: the evidence only the fleet gives (the GPU history of earlier runs, version
  drift) added to each row's findings, and the decision of every host whose findings grew; the fleet's usual
  versions, drift and version split.

Nothing else decides a host: the report applies the decisions it is given (report/model.py ``apply_decision``) and
reads rows and decisions only. The findings themselves are made in findings.py, one function per source of
evidence; ``judge.decide`` turns a host's findings into its status, action and verdict.
"""

from ..checklist import item as _checkitem
from ..values import (
    as_dict as _d,
)
from ..values import (
    flag as _flag,
)
from ..values import (
    text as _text,
)
from . import box as _box
from . import findings as _findings
from . import history as _history
from . import judge as _judge

# The report's "what to do" section and the history's overview: the report reads them from here too.
what_to_do = _judge.what_to_do
history_overview = _history.overview
# The host row's storage and network evidence (the pre-check's gpu_check.box and the listing; None without it).
read_box = _box.read
# How the judgement's storage and network lines say their figures, for the report's cells to say them the same way.
box_text = _box


def _decision(findings, result):
    got = _judge.decide(findings, listing_failed=result.get("provider_readiness") == "failed")
    return {"status": got["status"], "action": got["action"], "verdict": got["verdict"],
            "reasons": [f["reason"] for f in got["findings"] if f["outranked_by"] is None]}


def judge_host(result, row, error=None):
    """One host judged on its own evidence. ``result``: the host's result record (report.yml's file, read as is);
    ``row``: the evidence part of its report row (``gpus`` with each GPU's ``gate`` cells, ``gate_other``,
    ``gpu_count``, ``check`` and ``doctor`` records, ``box`` where the pre-check measured storage and network:
    report/model.py); ``error``: the report could not build the row
    (then that is the one finding). Returns ``{"findings", "decision", "final", "health", "gpu_lines"}``: the
    findings in the verdict's order among equals; the decision (status, action, verdict, reasons); ``final``: the
    run's record ends what is read of the host (unreadable, unreachable, no result: the row shows no GPU evidence);
    ``health``: the facts' health findings the row lists, the expected GPU count read in; ``gpu_lines``: (GPU index,
    line) for each health finding that names a GPU."""
    if error is not None:
        found = [_judge.finding("run", "result_unreadable", "error", "report could not read this result: %r" % error,
                                status="unknown")]
        return {"findings": found, "decision": _decision(found, result), "final": True, "health": [],
                "gpu_lines": []}
    reachable, failed = _flag(result.get("reachable")), _flag(result.get("failed"))
    facts = _d(result.get("gpu"))
    found = _findings.run(result, reachable, failed, facts) + _findings.unreadable(result)
    out = {"findings": found, "final": False, "health": [], "gpu_lines": []}
    if any(f["code"] in _findings.RUN_FINAL for f in found):
        out["final"] = True
        out["decision"] = _decision(found, result)
        return out
    health_status, health = _findings.health_of(facts) if facts else ("unknown", [])
    out["gpu_lines"] = [(f.get("gpu_index"), _findings.finding_text(f)) for f in health
                        if f.get("gpu_index") is not None]
    expected = _checkitem.expected_gpu_count(result)
    cpu_host = bool(facts) and not row["gpus"] and row["gpu_count"] == 0 and expected == 0
    health_status, out["health"] = _findings.expected_count(health_status, health, facts, row["gpu_count"],
                                                            expected, cpu_host)
    found += _findings.gpu_facts(facts, health_status, out["health"], row["gpu_count"], failed, cpu_host)
    found += _findings.health(out["health"], _checkitem.in_container(result))
    found += _findings.gate(row["gpus"], row["gate_other"])
    check = result.get("check")
    if isinstance(check, dict):
        found += _findings.check(check, row["check"])
    found += _box.findings(row.get("box"))
    judged = _d(_d(row["check"]).get("judged"))
    if isinstance(result.get("doctor"), dict):
        found += _findings.doctor(row["doctor"], judged.get("where") if judged.get("named") else None)
    found += _findings.torch_environment(judged, found)
    out["decision"] = _decision(found, result)
    return out


# ----------------------------------------------------------------------------- the fleet's evidence
DRIFT_FIELDS = (
    ("driver_version", "driver", "usual_driver_version"),
    ("cuda_driver_version", "CUDA", "usual_cuda_driver_version"),
)
# A fleet-level "versions differ" line names this many hosts per version, then counts the rest.
SPLIT_NAMES = 3


def _usual(values):
    """The majority value (held by more than half of ``values``) and the values with their counts, most
    common first. Without a majority there is no usual value (None): naming the largest minority
    would flag most of the fleet for nothing."""
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], _text(kv[0])))
    if ranked and ranked[0][1] * 2 > len(values):
        return ranked[0][0], ranked
    return None, ranked


def _split_line(word, ranked, names):
    parts = []
    for v, n in ranked:
        shown = names[v][:SPLIT_NAMES]
        more = " and %d more" % (n - len(shown)) if n > len(shown) else ""
        parts.append("%s on %s%s" % (_text(v), ", ".join(shown), more))
    return "%s versions differ across the fleet: %s (no majority)" % (word, "; ".join(parts))


def _drift(rows):
    """Version drift across the fleet among hosts with GPUs, per field: with a majority version (more
    than half of the hosts that report the field), one entry per host that differs (severity info: added
    to the host's findings, its status unchanged); without one, one fleet-level split entry and no
    per-host finding. Returns (usual values, drift entries, split entries)."""
    with_gpus = [h for h in rows if h["gpus"]]
    usual = {}
    drift = []
    split = []
    for key, word, total_key in DRIFT_FIELDS:
        values = []
        names = {}
        for h in with_gpus:
            v = h[key]
            if v is not None and not isinstance(v, (dict, list)):
                values.append(v)
                names.setdefault(v, []).append(h["host"])
        common, ranked = _usual(values)
        usual[total_key] = common
        if len(ranked) < 2:
            continue
        if common is None:
            split.append({"field": key, "severity": "info", "reason": _split_line(word, ranked, names),
                          "versions": [{"version": v, "hosts": n} for v, n in ranked]})
            continue
        for h in with_gpus:
            v = h[key]
            if v is None or isinstance(v, (dict, list)) or v == common:
                continue
            found = _findings.drift(key, word, v, common)
            h["judgement"].extend(found)
            drift.append({"host": h["host"], "field": key, "version": v, "usual": common, "severity": "info",
                          "reason": found[0]["reason"]})
    drift.sort(key=lambda d: (d["host"], d["field"]))
    return usual, drift, split


def judge_fleet(rows, history):
    """The fleet-level evidence on the host rows, and the decisions it changes. ``rows``: the report's host rows,
    each decided on its own evidence (``judgement``: its findings; ``action``: that decision's, which the history's
    checklist item reads); ``history``: the GPU history of earlier runs (history.load), None when none is kept.

    Each row gets the history's findings (its ``history`` list and the checklist's history item) and the drift
    note when its versions differ from the fleet's usual ones. Returns ``{"decisions": [(row, decision)] for each
    row whose findings grew (the others keep their own), "usual": {usual_driver_version, usual_cuda_driver_version},
    "drift": [...], "split": [...]}``; the decisions are made once, here, with every finding in."""
    before = [len(h["judgement"]) for h in rows]
    for h, seen in _history.assess(history, rows):
        h["history"] = seen["findings"]
        if isinstance(h.get("checklist"), dict):
            h["checklist"][_history.CHECK_KEY] = seen["check"]
        h["judgement"].extend(_findings.history(seen["findings"]))
    usual, drift, split = _drift(rows)
    decisions = [(h, _decision(h["judgement"], h)) for h, n in zip(rows, before) if len(h["judgement"]) != n]
    return {"decisions": decisions, "usual": usual, "drift": drift, "split": split}
