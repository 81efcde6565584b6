"""The data model: one host row and its GPU rows from one result file, the host's action and verdict.

``host_summary(result)`` is the host row of fleet.json (docs/schema/fleet.schema.json, ``$defs/host``), with
one row per GPU (``$defs/gpu``). A row holds text and numbers only, never the raw result, so the renderers
read nothing else. The evidence becomes findings (``judgement``, module_utils/gpufleet/judgement.py), and
``decide`` turns them into the host's status, action, verdict and reasons: nothing here sets those.
"""

from .. import audit as _audit
from .. import features as _features
from .. import judgement as _judgement
from .. import providers as _providers
from ._common import (
    _EMPTY,
    _REASON_SEVERITIES,
    ACTION_CHECK,
    ACTION_FIX,
    ACTION_REBOOT,
    ACTION_RESTART,
    ACTION_RETURN,
    CHECK_ITEMS,
    NO_GPU_CODES,
    PROVIDER_CODES,
    _d,
    _flag,
    _l,
    _num,
    _price,
    _round,
    _text,
)

_finding = _judgement.finding


def _spec(gpu):
    spec = gpu.get("spec")
    if isinstance(spec, dict):
        return spec
    if not gpu.get("name"):
        return {}
    try:  # the spec table is optional here: a report must render without it
        from ..specs import lookup

        return lookup(gpu.get("name"), gpu.get("memory_total_mib")) or {}
    except Exception:
        return {}


def _is_simulated(result):
    facts = _d(result.get("gpu"))
    if _bool_field(result, "simulated") is True or facts.get("simulated") is True:
        return True
    return any(_d(g).get("simulated") is True for g in _l(facts.get("gpus")))


def _gpu_label(index):
    return "GPU %s" % index if index is not None else "host"


def _finding_text(finding):
    finding = _d(finding)
    msg = _text(finding.get("message") or finding.get("code") or "finding")
    if finding.get("gpu_index") is not None and not msg.startswith("GPU %s " % finding["gpu_index"]):
        return "GPU %s: %s" % (finding["gpu_index"], msg)
    return msg


def _health(facts):
    """(status, findings) from the facts; computed with facts.health when the facts carry none."""
    health = facts.get("health")
    if not isinstance(health, dict):
        try:
            from ..facts import health as compute

            health = compute(facts)
        except Exception:
            health = {"status": "unknown" if facts.get("error") else "ok", "findings": []}
    status = health.get("status")
    if status not in ("ok", "degraded", "failed", "unknown"):
        status = "unknown"
    return status, [f for f in _l(health.get("findings")) if isinstance(f, dict)]


def _gate_by_index(gate):
    out = {}
    for entry in _l(gate):
        if isinstance(entry, dict):
            out.setdefault(entry.get("index"), []).append(entry)
    return out


def _is_tflops(entry):
    unit = _text(entry.get("unit")).lower()
    return "tflop" in unit


def _measured_tflops(entries):
    """Best measured TFLOPS of one GPU: the BF16 tests if there are any, else any TFLOPS test."""
    best = best_bf16 = None
    for e in entries:
        measured = _num(e.get("measured"))
        if measured is None or not _is_tflops(e):
            continue
        if best is None or measured > best:
            best = measured
        if "bf16" in _text(e.get("test")).lower() and (best_bf16 is None or measured > best_bf16):
            best_bf16 = measured
    return best if best_bf16 is None else best_bf16


def _gate_entry(e):
    ok = e.get("passed")
    return {
        "test": _text(e.get("test")), "measured": _num(e.get("measured")), "expected": _num(e.get("expected")),
        "unit": _text(e.get("unit")), "fraction_of_peak": _num(e.get("fraction_of_peak")),
        "passed": ok if ok is True or ok is False else None, "why": e.get("why"),
    }


def _gate_other(gate_by_index, gpus):
    """Gate results that belong to no GPU row: the cpu mode, or an index the facts do not list."""
    attached = {g.get("index") for g in gpus}
    return [dict(_gate_entry(e), index=index, device=_text(e.get("device")) or None)
            for index, entries in gate_by_index.items() if index not in attached for e in entries]


def _gpu_row(gpu, gate_entries, gpu_findings):
    sub = [gpu.get(k) for k in ("pcie", "ecc", "remapped_rows", "retired_pages", "nvlink", "clocks")]
    pcie, ecc, rows, pages, nvlink, clocks = [v if isinstance(v, dict) else _EMPTY for v in sub]
    spec = _spec(gpu)
    throttle = [_text(t) for t in _l(gpu.get("throttle_reasons"))]
    lost = gpu.get("lost") is True
    peak = None if lost else _num(spec.get("bf16_tflops"))
    index = gpu.get("index")
    findings = [text for i, text in gpu_findings if i == index] if gpu_findings else []
    gate = []
    passed = []
    for e in gate_entries:
        cell = _gate_entry(e)
        gate.append(cell)
        if cell["passed"] is not None:
            passed.append(cell["passed"])
    return {
        "index": index, "name": gpu.get("name"), "uuid": gpu.get("uuid"), "serial": gpu.get("serial"),
        "pci_bus_id": gpu.get("pci_bus_id"), "memory_total_mib": _num(gpu.get("memory_total_mib")),
        "memory_used_mib": _num(gpu.get("memory_used_mib")), "compute_capability": gpu.get("compute_capability"),
        "pcie_gen_current": _num(pcie.get("gen_current")), "pcie_gen_max": _num(pcie.get("gen_max")),
        "pcie_width_current": _num(pcie.get("width_current")), "pcie_width_max": _num(pcie.get("width_max")),
        "sm_mhz": _num(clocks.get("sm_mhz")), "sm_max_mhz": _num(clocks.get("sm_max_mhz")),
        "temperature_c": _num(gpu.get("temperature_c")), "power_draw_w": _num(gpu.get("power_draw_w")),
        "power_limit_w": _num(gpu.get("power_limit_w")), "throttle_reasons": throttle,
        "persistence_mode": gpu.get("persistence_mode"), "mig_mode": gpu.get("mig_mode"),
        "ecc_mode": ecc.get("mode"), "ecc_volatile_corrected": _num(ecc.get("volatile_corrected")),
        "ecc_volatile_uncorrected": _num(ecc.get("volatile_uncorrected")),
        "ecc_aggregate_corrected": _num(ecc.get("aggregate_corrected")),
        "ecc_aggregate_uncorrected": _num(ecc.get("aggregate_uncorrected")),
        "retired_pages_pending": pages.get("pending"),
        "remapped_rows_uncorrectable": _num(rows.get("uncorrectable")), "remapped_rows_pending": rows.get("pending"),
        "remapped_rows_failure": rows.get("failure"), "nvlink_active": _num(nvlink.get("links_active")),
        "nvlink_total": _num(nvlink.get("links_total")), "lost": lost, "spec_key": spec.get("key"),
        "peak_bf16_tflops": peak, "measured_tflops": _measured_tflops(gate_entries) if gate_entries else None,
        "features": _features_text(gpu.get("compute_capability")),
        "findings": findings, "gate": gate, "gate_passed": (all(passed) if passed else None),
    }


def _features_text(cc):
    """Feature matrix cell for a compute capability (features.cell, cached there)."""
    try:
        return _features.cell(cc)
    except Exception as exc:  # defensive
        return "unknown: %r" % exc


def _checklist(result):
    """The ten checklist items for a result (audit.checklist); unknown items if that fails."""
    try:
        return _audit.checklist(result)
    except Exception as exc:  # defensive: one odd result must not sink the fleet report
        reason = "checklist failed: %r" % exc
    return {key: {"status": "unknown", "summary": reason, "reason": reason} for key, _unused in CHECK_ITEMS}


def _host_summary(result):
    entry = _host_entry(result)
    decide(entry)
    entry["checklist"] = _checklist(result)
    return entry


def decide(entry):
    """The host's status, action, verdict and reasons from its findings (``entry["judgement"]``), decided by
    judgement.decide; the provider's return action for a box to return. Called once the host's own evidence is
    in (here) and again by the summary when the fleet-level evidence (history, drift) adds findings."""
    got = _judgement.decide(entry["judgement"], listing_failed=entry.get("provider_readiness") == "failed")
    entry["status"], entry["action"], entry["verdict"] = got["status"], got["action"], got["verdict"]
    entry["_decided"] = len(entry["judgement"])
    entry["reasons"] = [f["reason"] for f in got["findings"] if f["outranked_by"] is None]
    if entry["action"] == ACTION_RETURN and entry.get("provider_id") is not None and not entry.get("return_action"):
        entry["return_action"] = _providers.return_action(entry["provider"], entry["provider_id"],
                                                          entry["provider_machine_id"])
    return entry


def _bool_field(result, key):
    value = result.get(key)
    if value is None or isinstance(value, bool):
        return value
    return _flag(value)


def _host_entry(result):
    # Read only: the result is not copied (it may be large), flags given as text are read with _flag.
    reachable, failed = _bool_field(result, "reachable"), _bool_field(result, "failed")
    host = str(result.get("host"))
    facts = _d(result.get("gpu"))
    entry = {
        "host": host, "status": "unknown", "simulated": _is_simulated(result), "reasons": [],
        "provider": result.get("provider"), "price_per_hour": _price(result.get("price_per_hour")),
        "provider_id": result.get("provider_id"), "provider_machine_id": result.get("provider_machine_id"),
        "provider_readiness": result.get("provider_readiness"), "return_action": None,
        "reachable": reachable, "collected_at": result.get("collected_at"),
        "facts_read_at": None, "facts_read_at_source": None,
        "source": facts.get("source"), "driver_version": facts.get("driver_version"),
        "cuda_driver_version": facts.get("cuda_driver_version"), "error_code": facts.get("error_code"),
        "gpu_count": 0, "gpu_models": {}, "memory_total_mib": 0, "peak_bf16_tflops": None,
        "measured_tflops": None, "findings": [], "gpus": [], "gate": isinstance(result.get("gate"), list),
        "gate_other": [], "doctor": None, "action": None, "warnings": [], "verdict": None, "judgement": [],
        "check": None,
    }
    found = entry["judgement"].append
    entry["facts_read_at"], entry["facts_read_at_source"] = _facts_time(result, facts)
    if result.get("not_in_inventory"):
        entry["warnings"].append("result file for a host that is not in the given inventory")
    if result.get("load_error"):
        found(_finding("run", "result_unreadable", "error", "result file unreadable: %s" % result["load_error"],
                       status="unknown"))
        return entry
    if reachable is False:
        # The cause first (SSH's reason): the play and task it happened in are evidence, not the verdict's words.
        found(_finding("run", "unreachable", "critical", _text(result.get("reason")) or "unreachable (no reason given)",
                       status="unreachable", evidence={"failed_in": result.get("failed_in")}))
        return entry
    if failed is True:
        found(_finding("run", "playbook_failed", "critical",
                       "playbook failed: %s" % (_text(result.get("reason")) or "no reason given"),
                       evidence={"failed_in": result.get("failed_in")}))
    elif reachable is not True and not facts:
        found(_finding("run", "no_result", "unknown",
                       _text(result.get("reason")) or "no reachability and no GPU facts in the result"))
        return entry

    gpus = [g for g in _l(facts.get("gpus")) if isinstance(g, dict)]
    if facts:
        health_status, findings = _health(facts)
        entry["findings"] = findings
    else:
        health_status, findings = "unknown", []
        if failed is not True:
            found(_finding("run", "no_gpu_facts", "unknown", "no GPU facts in the result"))
    gate_by_index = _gate_by_index(result.get("gate"))
    gpu_findings = [(f.get("gpu_index"), _finding_text(f)) for f in findings if f.get("gpu_index") is not None]
    rows = entry["gpus"]
    models = entry["gpu_models"]
    mem = 0
    peaks = []
    measured = []
    entry["gate_other"] = _gate_other(gate_by_index, gpus) if gate_by_index else []
    for g in gpus:
        row = _gpu_row(g, gate_by_index.get(g.get("index"), ()) if gate_by_index else (), gpu_findings)
        rows.append(row)
        name = row["name"] or "unknown GPU"
        try:
            models[name] = models.get(name, 0) + 1
        except TypeError:  # an unhashable model name from odd input
            name = _text(name)
            models[name] = models.get(name, 0) + 1
        mem += row["memory_total_mib"] or 0
        if row["peak_bf16_tflops"] is not None:
            peaks.append(row["peak_bf16_tflops"])
        if row["measured_tflops"] is not None:
            measured.append(row["measured_tflops"])
    count = _num(facts.get("gpu_count"))
    entry["gpu_count"] = len(gpus) if count is None else max(int(count), len(gpus))
    entry["memory_total_mib"] = mem
    entry["peak_bf16_tflops"] = _round(sum(peaks), 1) if peaks else None
    entry["measured_tflops"] = _round(sum(measured), 1) if measured else None

    expected = _audit.expected_gpu_count(result)
    cpu_host = bool(facts) and not gpus and entry["gpu_count"] == 0 and expected == 0
    if cpu_host:  # a CPU host by intent: "no GPU here" is what was asked for, info and no reason
        findings = [_as_intended(f) if f.get("code") in NO_GPU_CODES else f for f in findings]
        entry["findings"] = findings
    if (expected is not None and facts and not facts.get("error") and entry["gpu_count"] < expected
            and not any(f.get("code") == "gpu_count_low" for f in findings)):
        findings = findings + [{"code": "gpu_count_low", "severity": "critical", "gpu_index": None,
                                "message": "%d GPU(s) visible, %d expected" % (entry["gpu_count"], expected)}]
        entry["findings"] = findings
        if health_status in ("ok", "degraded"):
            health_status = "failed"

    if failed is not True and not cpu_host and facts and not gpus and entry["gpu_count"] == 0 \
            and health_status != "unknown":
        what = facts.get("error") or "no GPU visible to %s" % (facts.get("source") or "the facts module")
        code = facts.get("error_code")
        found(_finding("facts", "no_gpu", "critical", "no GPU: %s%s" % ("%s: " % code if code else "", what),
                       status="no-gpu", action=ACTION_RETURN, evidence={"error_code": code, "error": facts.get("error"),
                                                                        "source": facts.get("source")}))
    elif facts and not cpu_host and health_status == "unknown" and facts.get("error") and not any(
            f.get("severity") in _REASON_SEVERITIES for f in findings):
        found(_finding("facts", "gpu_facts_unavailable", "unknown", "GPU facts unavailable: %s" % facts["error"],
                       evidence={"error_code": facts.get("error_code")}))
    in_container = _in_container(result, facts)
    for f in findings:
        if f.get("severity") in _REASON_SEVERITIES:
            found(_finding("health", f.get("code"), f.get("severity"), _finding_text(f),
                           action=_finding_leads_to(f, in_container),
                           gpu_index=f.get("gpu_index"),
                           evidence={k: v for k, v in f.items() if k not in ("code", "severity", "message")}))

    # Gate: a GPU below its threshold flags the host.
    for row in rows:
        for g in row["gate"]:
            if g["passed"] is False:
                frac = "" if g["fraction_of_peak"] is None else " (%.0f%% of peak)" % (100 * g["fraction_of_peak"])
                found(_finding("gate", "gate_failed", "error", "GPU %s: gate %s failed%s%s" % (
                    row["index"], g["test"], frac, ": %s" % _text(g["why"]) if g["why"] else ""),
                    status="degraded", action=ACTION_RETURN, gpu_index=row["index"],
                    evidence={k: g[k] for k in ("test", "measured", "expected", "unit", "fraction_of_peak")}))

    _check_findings(entry, result.get("check"), found)

    doctor = result.get("doctor")
    if isinstance(doctor, dict):
        dfind = [{k: f.get(k) for k in _DOCTOR_FINDING_KEYS if k in f}
                 for f in _l(doctor.get("findings")) if isinstance(f, dict)]
        remediation = doctor.get("remediation")
        entry["doctor"] = {"status": doctor.get("status"), "cuda_usable": doctor.get("cuda_usable"),
                           "findings": dfind, "remediation": remediation if isinstance(remediation, dict) else None}
        judged = _d(_d(entry["check"]).get("judged"))
        where = judged.get("where") if judged.get("named") else None
        if doctor.get("status") not in ("ok", "fixed", "healthy"):
            # The doctor ran on the host: its findings are evidence even where no GPU facts were read.
            for f in dfind:
                sev = f.get("severity")
                if sev not in ("critical", "error", "warning"):
                    continue
                meaning = _text(f.get("meaning") or f.get("message") or f.get("code"))
                action = _doctor_leads_to(f)
                if action == ACTION_FIX and f.get("code") not in _judgement.FIX_HERE_CODES:
                    # The renter's own setting (thread pools, a VM's /dev/shm): remediate.yml has no fix for it, so
                    # it is a note with its remedy, not "fix here".
                    sev, action = "info", None
                found(_finding("doctor", f.get("code"), sev,
                               _judgement.brief(f.get("code"), f.get("evidence"), meaning, where=where),
                               reason="doctor: %s" % meaning, action=action,
                               evidence=f.get("evidence") if isinstance(f.get("evidence"), dict) else None,
                               meaning=meaning, remedy=_text(f.get("remedy")) or None))
    _torch_environment_note(entry, found)
    return entry


# The pre-check's steps (playbooks/check.yml), by number.
CHECK_STEPS = {1: "connect", 2: "environment", 3: "probe"}


def _check_findings(entry, check, found):
    """The pre-check's own evidence (playbooks/check.yml, ``gpu_check`` facts): its step times on the host row, a
    step past the deadline (a hung GPU is a finding), a step that failed, and an image without torch."""
    if not isinstance(check, dict):
        return
    steps = {k: _price(v) for k, v in _d(check.get("steps")).items() if k in CHECK_STEPS.values()}
    environments, judged = _environments(check)
    entry["check"] = {"steps": steps, "total_s": _price(check.get("total_s")),
                      "deadline_s": _price(check.get("deadline_s")),
                      "torch_python": _text(check.get("torch_python")) or None,
                      "probe_run": _flag(check.get("probe_run")) is True,
                      "environments": environments, "judged": judged}
    step = _price(check.get("failed_step"))
    if step is not None:
        name = CHECK_STEPS.get(int(step), "?")
        if _flag(check.get("timed_out")):
            hung = _text(check.get("hung"))
            text = "check timed out in step %d (%s)%s" % (step, name, ": %s" % hung if hung else " after %s s" % (
                _text(check.get("deadline_s"))))
            evidence = {"step": step, "deadline_s": check.get("deadline_s"), "error": check.get("error"),
                        "hung": hung or None, "probes": _d(check.get("probes")) or None}
            found(_finding("check", "check_timed_out", "critical", text, status="failed", action=ACTION_RETURN,
                           evidence=evidence,
                           meaning="a step of the pre-check ran past the host's deadline: a hung GPU, driver or login",
                           remedy="give the box back, or rerun with a longer check_deadline_s if its login is only "
                                  "slow"))
        else:
            found(_finding("check", "check_step_failed", "unknown", "check failed in step %d (%s): %s" % (
                step, name, _text(check.get("error"))), evidence={"step": step, "error": check.get("error")}))
    elif (steps.get("environment") is not None and not entry["check"]["torch_python"]
          and not any(e["torch"] for e in environments)):
        found(_finding("check", "no_torch_on_image", "info", "no torch on this image: judged with NVML alone",
                       evidence={"pythons_tried": _l(check.get("pythons_tried"))}))


def _env_where(python, kind):
    """An environment as a line names it: a venv's or conda's prefix (/venv/main, /opt/conda), else the Python."""
    python = _text(python)
    head, tail = python.rsplit("/", 1) if "/" in python else ("", python)
    if kind in ("venv", "conda", "gpufleet", "login_shell") and head.endswith("/bin") and tail.startswith("python") \
            and head[:-len("/bin")] not in ("", "/usr", "/usr/local"):
        return head[:-len("/bin")]
    return python


# Kinds of judged environment a host's line does not name: the login shell's python (what the renter runs), gpufleet's
# own venv (site.yml's, where provisioned hosts keep torch), and a record without kinds.
_NOT_NAMED = (None, "login_shell", "gpufleet")


def _environments(check):
    """(the environments with torch, the judged one) from the pre-check's record (scripts/find-python's envs and
    judged). Each: python, kind, torch (its build), where (as a line names it). The judged one adds why (the
    script's words), reason (a few words for the line) and named: whether the host's line names it (``_NOT_NAMED``:
    not the login shell's python nor gpufleet's own venv)."""
    envs = [e for e in _l(check.get("environments")) if isinstance(e, dict) and e.get("python")]
    with_torch = [{"python": _text(e["python"]), "kind": _text(e.get("kind")) or None, "torch": _text(e["torch"]),
                   "where": _env_where(e["python"], e.get("kind"))} for e in envs if e.get("torch")]
    said = _d(check.get("judged"))
    python = _text(said.get("python")) or _text(check.get("torch_python"))
    if not python:
        return with_torch, None
    env = next((e for e in with_torch if e["python"] == python), None) or {
        "python": python, "kind": None, "torch": None, "where": python}
    login = next((e for e in envs if e.get("kind") == "login_shell"), None)
    if env["kind"] is None:
        reason = None  # a record without kinds (find-python before the search list): nothing to say why
    elif env["kind"] == "login_shell":
        reason = "the login shell's python"
    elif login is not None:
        reason = "the login shell's %s has no torch" % _env_where(login["python"], "system")
    elif envs:
        reason = "the login shell gave no python"
    else:
        reason = None
    return with_torch, dict(env, why=_text(said.get("why")) or None, reason=reason,
                            named=env["kind"] not in _NOT_NAMED)


def _torch_environment_note(entry, found):
    """An info note naming the environment whose torch was judged when it is not the login shell's python and no
    torch finding names it already (a torch finding's line does: judgement.TORCH_CODES)."""
    judged = _d(_d(entry.get("check")).get("judged"))
    if not judged.get("named") or not judged.get("torch"):
        return
    if any(f["code"] in _judgement.TORCH_CODES for f in entry["judgement"]):
        return
    found(_finding("check", "torch_environment", "info", "torch %s in %s%s" % (
        judged["torch"], judged["where"], "; %s" % judged["reason"] if judged.get("reason") else ""),
        evidence={"python": judged["python"], "kind": judged["kind"], "why": judged.get("why")}))


def _as_intended(finding):
    """A copy of a "no GPU here" finding as info: on a CPU host by intent it is no fault."""
    return dict(finding, severity="info", message="as intended on a CPU host (expected_gpu_count 0): %s" % (
        _text(finding.get("message") or finding.get("code"))))


def _facts_time(result, facts):
    """(time, source) of when the host's facts were read: the GPU facts' collected_at, else the record's."""
    at = facts.get("collected_at")
    if isinstance(at, str) and at.strip():
        return at, "gpu_facts"
    at = result.get("collected_at")
    if isinstance(at, str) and at.strip():
        return at, "record"
    return None, None


def facts_time_text(h):
    """The host's facts_read_at as a table cell: the time, the record's time labelled as such, or unknown."""
    at, source = h.get("facts_read_at"), h.get("facts_read_at_source")
    if source == "gpu_facts":
        return _text(at)
    if source == "record":
        return "not reported; record written at %s" % _text(at)
    return "unknown"


# What the report keeps of a doctor finding (its evidence stays in the fact cache).
_DOCTOR_FINDING_KEYS = ("code", "severity", "remedy_class", "meaning", "remedy", "message", "fixable", "evidence")


def _in_container(result, facts):
    """True/False when the GPU facts' host context (else the doctor's evidence) says whether this is a container."""
    ctx = _d(facts.get("host"))
    if isinstance(ctx.get("container"), bool):
        return ctx["container"]
    doctor = _d(result.get("doctor"))
    found = _d(doctor.get("evidence")).get("in_container")
    return found if isinstance(found, bool) else None


def _finding_leads_to(finding, in_container=None):
    """The action a health finding calls for: the provider's for hardware and what was rented, a reboot (or the
    provider, in a container) for a pending GPU reset; the rest none by itself (a note or the status's default)."""
    code = str(finding.get("code"))
    if code in _judgement.MACHINE_RESTART_CODES:
        return _judgement.machine_restart_action(in_container is True)
    return ACTION_RETURN if code in PROVIDER_CODES or code.startswith("xid_") else None


# A doctor finding's remedy class -> the host action it calls for.
_REMEDY_ACTION = {"provider": ACTION_RETURN, "restart_container": ACTION_RESTART, "reboot": ACTION_REBOOT,
                  "fixable": ACTION_FIX}


def _doctor_leads_to(finding):
    remedy = finding.get("remedy_class")
    if remedy in _REMEDY_ACTION:
        return _REMEDY_ACTION[remedy]
    if finding.get("fixable") is False:
        return ACTION_RETURN
    return ACTION_FIX if finding.get("fixable") is True else None


def _safe_host_summary(r):
    try:
        return _host_summary(r)
    except Exception as exc:  # defensive: one odd result must not sink the fleet report
        entry = {
            "host": str(r.get("host")), "status": "unknown", "simulated": False, "reasons": [],
            "provider": r.get("provider"),
            "price_per_hour": _num(r.get("price_per_hour")), "reachable": r.get("reachable"),
            "collected_at": r.get("collected_at"), "facts_read_at": None, "facts_read_at_source": None,
            "source": None, "driver_version": None, "provider_id": None, "provider_machine_id": None,
            "provider_readiness": None, "return_action": None,
            "cuda_driver_version": None, "error_code": None, "gpu_count": 0, "gpu_models": {},
            "memory_total_mib": 0, "peak_bf16_tflops": None, "measured_tflops": None, "findings": [],
            "gpus": [], "gate": False, "gate_other": [], "doctor": None, "action": ACTION_CHECK, "warnings": [],
            "checklist": _checklist({}), "verdict": None, "check": None,
            "judgement": [_finding("run", "result_unreadable", "error", "report could not read this result: %r" % exc,
                                   status="unknown")],
        }
        return decide(entry)
