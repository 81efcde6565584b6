# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Evidence in, findings out: one small function per source of evidence about a host (the run's record, the GPU
facts, their health findings, the gate, the pre-check, the doctor, the history, version drift), each returning a
list of findings made by the one constructor, ``judge.finding``. door.judge_host and door.judge_fleet call these in a
fixed order (the verdict keeps that order among equals); ``judge.decide`` turns the findings into a decision.
"""

from ..values import (
    as_dict as _d,
)
from ..values import (
    as_list as _l,
)
from ..values import (
    flag as _flag,
)
from ..values import (
    number_text as _price,
)
from ..values import (
    text as _text,
)
from . import briefs as _briefs
from . import evidence as _evidence
from . import history as _history
from . import judge as _judgement
from .judge import (
    ACTION_CHECK,
    ACTION_FIX,
    ACTION_REBOOT,
    ACTION_RESTART,
    ACTION_RETURN,
    FAULT_SEVERITIES,
    NO_GPU_CODES,
    PROVIDER_CODES,
)

_REASON_SEVERITIES = FAULT_SEVERITIES

finding = _judgement.finding

# Run findings after which nothing else about the host is read: the record says nothing more.
RUN_FINAL = frozenset(["result_unreadable", "unreachable", "no_result"])

# The pre-check's steps (playbooks/check.yml), by number.
CHECK_STEPS = dict(enumerate(_judgement.CHECK_STEPS, 1))  # step number (check.yml's failed_step) -> name

# A doctor finding's remedy class -> the host action it calls for.
_REMEDY_ACTION = {"provider": ACTION_RETURN, "restart_container": ACTION_RESTART, "reboot": ACTION_REBOOT,
                  "fixable": ACTION_FIX}


def finding_text(f):
    """A facts health finding as a line: its message, prefixed "GPU N: " when it names a GPU and does not say so."""
    f = _d(f)
    msg = _text(f.get("message") or f.get("code") or "finding")
    if f.get("gpu_index") is not None and not msg.startswith("GPU %s " % f["gpu_index"]):
        return "GPU %s: %s" % (f["gpu_index"], msg)
    return msg


def run(result, reachable, failed, facts):
    """The run's record: an unreadable file, an unreachable host, a failed playbook, no result, no GPU facts. A
    finding in ``RUN_FINAL`` ends what is read of the host."""
    if result.get("load_error"):
        return [finding("run", "result_unreadable", "error", "result file unreadable: %s" % result["load_error"],
                        status="unknown")]
    reason = _text(result.get("reason"))
    if reachable is False:
        # The cause first (SSH's reason): the play and task it happened in are evidence, not the verdict's words.
        return [finding("run", "unreachable", "critical", reason or "unreachable (no reason given)",
                        status="unreachable", evidence={"failed_in": result.get("failed_in")})]
    if failed is True:
        return [finding("run", "playbook_failed", "critical", "playbook failed: %s" % (reason or "no reason given"),
                        evidence={"failed_in": result.get("failed_in")})]
    if reachable is not True and not facts:
        return [finding("run", "no_result", "unknown", reason or "no reachability and no GPU facts in the result")]
    if not facts:
        return [finding("run", "no_gpu_facts", "unknown", "no GPU facts in the result")]
    return []


def health_of(facts):
    """(status, health findings) of the facts; computed with facts.health from the facts' readable values
    (evidence.clean_gpu_facts) when the facts carry none. Facts that cannot be judged are never "ok": a health
    computation that fails gives ``unknown`` with what failed (the shape problems themselves are ``unreadable``'s)."""
    health = facts.get("health")
    if not isinstance(health, dict):
        try:
            from ...host.gpu.facts import health as compute

            health = compute(_evidence.clean_gpu_facts(facts))
        except Exception as exc:
            return "unknown", [{"code": "health_unreadable", "severity": "unknown", "gpu_index": None,
                                "message": "GPU health could not be judged from the facts: %s" % (
                                    _text(exc) or type(exc).__name__)}]
    status = health.get("status")
    if status not in ("ok", "degraded", "failed", "unknown"):
        status = "unknown"
    return status, [f for f in _l(health.get("findings")) if isinstance(f, dict)]


# How each part of a result is named when it cannot be read (evidence.PART_KEYS).
_PART_WORDS = {"run": "the run's record", "facts": "GPU facts", "gate": "gate results", "check": "pre-check record",
               "doctor": "doctor's record"}


def unreadable(result):
    """One finding per part of the result holding values of the wrong shape (evidence.problems): ``unknown``, whose
    action is "check access / rerun", naming what could not be read. Such evidence is never read as "nothing
    wrong"."""
    out = []
    for part, texts in _evidence.problems(result).items():
        out.append(finding(part, "evidence_unreadable", "unknown", "%s unreadable: %s" % (
            _PART_WORDS[part], _evidence.summary(texts)), action=ACTION_CHECK, evidence={"problems": texts},
            meaning="a value in the host's evidence is not of the shape gpufleet writes: the judgement cannot read it",
            remedy="rerun the play on the host (facts.yml, check.yml) and look at the result file if it recurs"))
    return out


def as_intended(f):
    """A copy of a "no GPU here" finding as info: on a CPU host by intent it is no fault."""
    return dict(f, severity="info", message="as intended on a CPU host (expected_gpu_count 0): %s" % (
        _text(f.get("message") or f.get("code"))))


def expected_count(status, found, facts, gpu_count, expected, cpu_host):
    """(status, health findings) with the expected GPU count read in: "no GPU" is info on a CPU host by intent;
    fewer GPUs than expected adds gpu_count_low and fails an ok or degraded host."""
    if cpu_host:
        found = [as_intended(f) if f.get("code") in NO_GPU_CODES else f for f in found]
    if (expected is not None and facts and not facts.get("error") and gpu_count < expected
            and not any(f.get("code") == "gpu_count_low" for f in found)):
        low = {"code": "gpu_count_low", "severity": "critical", "gpu_index": None,
               "message": "%d GPU(s) visible, %d expected" % (gpu_count, expected)}
        found = found + [low]
        if status in ("ok", "degraded"):
            status = "failed"
    return status, found


def gpu_facts(facts, status, found, gpu_count, failed, cpu_host):
    """The GPU facts themselves (``status``, ``found``: their health): no GPU at all where some were meant, or facts
    that could not be read and no health finding that says why."""
    if not facts or cpu_host:
        return []
    if failed is not True and gpu_count == 0 and status != "unknown":
        what = facts.get("error") or "no GPU visible to %s" % (facts.get("source") or "the facts module")
        code = facts.get("error_code")
        return [finding("facts", "no_gpu", "critical", "no GPU: %s%s" % ("%s: " % code if code else "", what),
                        status="no-gpu", action=ACTION_RETURN,
                        evidence={"error_code": code, "error": facts.get("error"), "source": facts.get("source")})]
    if status == "unknown" and facts.get("error") and not any(
            f.get("severity") in _REASON_SEVERITIES for f in found):
        return [finding("facts", "gpu_facts_unavailable", "unknown", "GPU facts unavailable: %s" % facts["error"],
                        evidence={"error_code": facts.get("error_code")})]
    return []


def leads_to(f, in_container=None):
    """The action a health finding calls for: the provider's for hardware and what was rented, a reboot (or the
    provider, in a container) for a pending GPU reset; the rest none by itself (a note or the status's default)."""
    code = str(f.get("code"))
    if code in _judgement.MACHINE_RESTART_CODES:
        return _judgement.machine_restart_action(in_container is True)
    return ACTION_RETURN if code in PROVIDER_CODES or code.startswith("xid_") else None


def health(found, in_container):
    """The facts' health findings that are faults (info ones stay in the host's findings only)."""
    return [finding("health", f.get("code"), f.get("severity"), finding_text(f), action=leads_to(f, in_container),
                    gpu_index=f.get("gpu_index"),
                    evidence={k: v for k, v in f.items() if k not in ("code", "severity", "message")})
            for f in found if f.get("severity") in _REASON_SEVERITIES]


def gate(rows, other=()):
    """The benchmark gate: a GPU below its threshold flags the host (``rows``: the host's GPU rows; ``other``: its
    gate results that belong to no GPU row, model._gate_other). A failed result for a GPU the facts do not list
    counts like any other; a CPU-mode run's (device "cpu ...", no GPU on the host) does not."""
    out = []
    tried = [(row["index"], g) for row in rows for g in row["gate"]]
    tried += [(g["index"], g) for g in other if not _text(g.get("device")).startswith("cpu")]
    for index, g in tried:
        if g["passed"] is False:
            frac = "" if g["fraction_of_peak"] is None else " (%.0f%% of peak)" % (100 * g["fraction_of_peak"])
            out.append(finding("gate", "gate_failed", "error", "GPU %s: gate %s failed%s%s" % (
                index, g["test"], frac, ": %s" % _text(g["why"]) if g["why"] else ""),
                status="degraded", action=ACTION_RETURN, gpu_index=index,
                evidence={k: g[k] for k in ("test", "measured", "expected", "unit", "fraction_of_peak")}))
    return out


def check(raw, record):
    """The pre-check's own evidence (``raw``: its ``gpu_check`` facts; ``record``: the host row's ``check``): a
    step past the deadline (a hung GPU), a step that failed, an image without torch."""
    step = _price(raw.get("failed_step"))
    if step is not None:
        name = CHECK_STEPS.get(int(step), "?")
        if not _flag(raw.get("timed_out")):
            return [finding("check", "check_step_failed", "unknown", "check failed in step %d (%s): %s" % (
                step, name, _text(raw.get("error"))), evidence={"step": step, "error": raw.get("error")})]
        hung = _text(raw.get("hung"))
        text = "check timed out in step %d (%s)%s" % (step, name, ": %s" % hung if hung else " after %s s" % (
            _text(raw.get("deadline_s"))))
        evidence = {"step": step, "deadline_s": raw.get("deadline_s"), "error": raw.get("error"),
                    "hung": hung or None, "probes": _d(raw.get("probes")) or None}
        return [finding("check", "check_timed_out", "critical", text, status="failed", action=ACTION_RETURN,
                        evidence=evidence,
                        meaning="a step of the pre-check ran past the host's deadline: a hung GPU, driver or login",
                        remedy="give the box back, or rerun with a longer check_deadline_s if its login is only slow")]
    if (record["steps"].get("environment") is not None and not record["torch_python"]
            and not any(e["torch"] for e in record["environments"])):
        return [finding("check", "no_torch_on_image", "info", "no torch on this image: judged with NVML alone",
                        evidence={"pythons_tried": _l(raw.get("pythons_tried"))})]
    return []


def doctor_leads_to(f):
    """The action a doctor finding calls for, from its remedy class (else whether it is fixable)."""
    remedy = f.get("remedy_class")
    if remedy in _REMEDY_ACTION:
        return _REMEDY_ACTION[remedy]
    if f.get("fixable") is False:
        return ACTION_RETURN
    return ACTION_FIX if f.get("fixable") is True else None


def doctor(record, where):
    """The doctor's findings (``record``: the host row's ``doctor``), evidence even where no GPU facts were read;
    none when it found the host healthy. ``where``: the judged torch's environment when the line names it."""
    if record["status"] in ("ok", "fixed", "healthy"):
        return []
    if not record["findings"]:
        return [finding("doctor", "doctor_unexplained", "unknown", "doctor: status %s with no finding that says why" % (
            _text(record["status"]) or "missing"), evidence={"status": record["status"]})]
    out = []
    for f in record["findings"]:
        sev = f.get("severity")
        if sev not in ("critical", "error", "warning"):
            continue
        meaning = _text(f.get("meaning") or f.get("message") or f.get("code"))
        action = doctor_leads_to(f)
        if action == ACTION_FIX and f.get("code") not in _judgement.FIX_HERE_CODES:
            # The renter's own setting (thread pools, a VM's /dev/shm): remediate.yml has no fix for it, so it is a
            # note with its remedy, not "fix here".
            sev, action = "info", None
        out.append(finding("doctor", f.get("code"), sev,
                           _briefs.brief(f.get("code"), f.get("evidence"), meaning, where=where),
                           reason="doctor: %s" % meaning, action=action,
                           evidence=f.get("evidence") if isinstance(f.get("evidence"), dict) else None,
                           meaning=meaning, remedy=_text(f.get("remedy")) or None))
    return out


def torch_environment(judged, found):
    """An info note naming the environment whose torch was judged (``judged``: the check record's) when it is not
    the login shell's python and no torch finding among ``found`` names it already (briefs.TORCH_CODES)."""
    if not judged.get("named") or not judged.get("torch"):
        return []
    if any(f["code"] in _briefs.TORCH_CODES for f in found):
        return []
    return [finding("check", "torch_environment", "info", "torch %s in %s%s" % (
        judged["torch"], judged["where"], "; %s" % judged["reason"] if judged.get("reason") else ""),
        evidence={"python": judged["python"], "kind": judged["kind"], "why": judged.get("why")})]


def history(seen):
    """The GPU history's findings on one host (history.assess): a box known bad from an earlier run or the user's
    list calls for "return to provider"; the same rental's earlier flag is evidence with its date."""
    out = []
    for f in seen:
        returned = f["action"] == ACTION_RETURN
        code = f.get("code") or "history"
        if code == _history.CODE_KNOWN_BAD and f.get("same_rental"):
            code = _history.CODE_FLAGGED_BEFORE  # evidence with its date: a present diagnosis outranks it
        out.append(finding("history", code, f.get("severity"), "history: %s" % f["message"],
                           action=f["action"], status="degraded" if returned else "ok", echo=True,
                           evidence={k: v for k, v in f.items() if k not in ("message", "severity", "action")}))
    return out


def drift(field, word, version, usual):
    """A host whose driver or CUDA version differs from the fleet's usual one: a note."""
    reason = "%s %s differs from the fleet's usual %s" % (word, _text(version), _text(usual))
    return [finding("drift", field + "_drift", "info", reason, evidence={"version": version, "usual": usual})]
