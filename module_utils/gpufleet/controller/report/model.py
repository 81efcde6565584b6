"""The data model: one host row and its GPU rows from one result file, the host's action and verdict.

``host_summary(result)`` is the host row of fleet.json (docs/schema/fleet.schema.json, ``$defs/host``), with
one row per GPU (``$defs/gpu``). A row holds text and numbers only, never the raw result, so the renderers
read nothing else. What the evidence means (the findings, ``judgement``, and the host's status, action, verdict
and reasons) comes from the judgement's one door, judgement/door.py ``judge_host``; nothing here decides.
"""

from .. import providers as _providers
from ..checklist import features as _features
from ..checklist.build import checklist as _build_checklist
from ..judgement import door as _door
from ._common import (
    _EMPTY,
    ACTION_RETURN,
    CHECK_ITEMS,
    CHECK_STEPS,
    _d,
    _flag,
    _l,
    _num,
    _price,
    _round,
    _text,
)


def _spec(gpu):
    spec = gpu.get("spec")
    if isinstance(spec, dict):
        return spec
    if not gpu.get("name"):
        return {}
    try:  # the spec table is optional here: a report must render without it
        from ...host.gpu.specs import lookup

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


def _gpu_row(gpu, gate_entries):
    sub = [gpu.get(k) for k in ("pcie", "ecc", "remapped_rows", "retired_pages", "nvlink", "clocks")]
    pcie, ecc, rows, pages, nvlink, clocks = [v if isinstance(v, dict) else _EMPTY for v in sub]
    spec = _spec(gpu)
    throttle = [_text(t) for t in _l(gpu.get("throttle_reasons"))]
    lost = gpu.get("lost") is True
    peak = None if lost else _num(spec.get("bf16_tflops"))
    index = gpu.get("index")
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
        "findings": [], "gate": gate, "gate_passed": (all(passed) if passed else None),
    }


def _features_text(cc):
    """Feature matrix cell for a compute capability (features.cell, cached there)."""
    try:
        return _features.cell(cc)
    except Exception as exc:  # defensive
        return "unknown: %r" % exc


def _checklist(result):
    """The checklist items for a result (checklist.checklist); unknown items if that fails."""
    try:
        return _build_checklist(result)
    except Exception as exc:  # defensive: one odd result must not sink the fleet report
        reason = "checklist failed: %r" % exc
    return {key: {"status": "unknown", "summary": reason, "reason": reason} for key, _unused in CHECK_ITEMS}


def _host_summary(result):
    entry = _host_entry(result)
    entry["checklist"] = _checklist(result)
    return entry


def apply_decision(entry, decision):
    """The host row's status, action, verdict and reasons as the judgement decided them (judgement/door.py), and
    the provider's return action for a box to return."""
    entry["status"], entry["action"] = decision["status"], decision["action"]
    entry["verdict"], entry["reasons"] = decision["verdict"], decision["reasons"]
    if entry["action"] == ACTION_RETURN and entry.get("provider_id") is not None and not entry.get("return_action"):
        entry["return_action"] = _providers.return_action(entry["provider"], entry["provider_id"],
                                                          entry["provider_machine_id"])
    return entry


def _bool_field(result, key):
    value = result.get(key)
    if value is None or isinstance(value, bool):
        return value
    return _flag(value)


def _blank_entry(result, facts, reachable):
    """The host row before any evidence is judged: the record's own fields, everything else empty."""
    entry = {
        "host": str(result.get("host")), "status": "unknown", "simulated": _is_simulated(result), "reasons": [],
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
    entry["facts_read_at"], entry["facts_read_at_source"] = _facts_time(result, facts)
    if result.get("not_in_inventory"):
        entry["warnings"].append("result file for a host that is not in the given inventory")
    return entry


def _host_entry(result):
    """The host row from one result: its GPU rows and totals, its check and doctor records, then what they mean
    (judgement/door.py ``judge_host``: the findings, the health lines, the decision on the host's own evidence). A
    record that ends what is read of the host (unreadable, unreachable, no result) shows no GPU evidence. Read only:
    the result is not copied (it may be large), flags given as text are read with _flag."""
    reachable = _bool_field(result, "reachable")
    facts = _d(result.get("gpu"))
    entry = _blank_entry(result, facts, reachable)
    shown = _evidence_rows(result, facts)
    judged = _door.judge_host(result, shown)
    entry["judgement"] = judged["findings"]
    if not judged["final"]:
        lines = judged["gpu_lines"]
        if lines:
            for row in shown["gpus"]:
                row["findings"] = [text for i, text in lines if i == row["index"]]
        shown["findings"] = judged["health"]
        entry.update(shown)
    return apply_decision(entry, judged["decision"])


def _evidence_rows(result, facts):
    """The row's evidence part (its keys are the blank row's, so the row keeps its key order): the GPU rows with
    their gate results and what they add up to, the gate results of no GPU row, the check and doctor records; and
    ``box`` (the pre-check's storage and network against the listing, judgement/box.py) only where the pre-check
    measured them."""
    shown = {"gpus": [], "gpu_models": {}, "gpu_count": 0, "memory_total_mib": 0, "peak_bf16_tflops": None,
             "measured_tflops": None, "gate_other": [], "check": None, "doctor": None}
    gpus = [g for g in _l(facts.get("gpus")) if isinstance(g, dict)]
    _add_gpu_rows(shown, facts, gpus, result.get("gate"))
    check = result.get("check")
    if isinstance(check, dict):
        shown["check"] = _check_record(check)
    doctor = result.get("doctor")
    if isinstance(doctor, dict):
        shown["doctor"] = _doctor_record(doctor)
    box = _door.read_box(result)
    if box is not None:  # only where the pre-check measured storage and network: other rows stay as they were
        shown["box"] = box
    return shown


def _add_gpu_rows(entry, facts, gpus, gate):
    """The host's GPU rows (with their gate results) and what they add up to."""
    gate_by_index = _gate_by_index(gate)
    rows, models = entry["gpus"], entry["gpu_models"]
    mem = 0
    peaks = []
    measured = []
    entry["gate_other"] = _gate_other(gate_by_index, gpus) if gate_by_index else []
    for g in gpus:
        row = _gpu_row(g, gate_by_index.get(g.get("index"), ()) if gate_by_index else ())
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


def _doctor_record(doctor):
    """The host row's ``doctor``: its status, whether CUDA is usable, its findings (``_DOCTOR_FINDING_KEYS``) and
    remediation."""
    dfind = [{k: f.get(k) for k in _DOCTOR_FINDING_KEYS if k in f}
             for f in _l(doctor.get("findings")) if isinstance(f, dict)]
    remediation = doctor.get("remediation")
    return {"status": doctor.get("status"), "cuda_usable": doctor.get("cuda_usable"),
            "findings": dfind, "remediation": remediation if isinstance(remediation, dict) else None}


def _check_record(check):
    """The host row's ``check`` from the pre-check's record (playbooks/check.yml, ``gpu_check`` facts): its step
    times, total and deadline, the judged torch's python, the environments with torch and the judged one."""
    steps = {k: _price(v) for k, v in _d(check.get("steps")).items() if k in CHECK_STEPS}
    environments, judged = _environments(check)
    return {"steps": steps, "total_s": _price(check.get("total_s")), "deadline_s": _price(check.get("deadline_s")),
            "torch_python": _text(check.get("torch_python")) or None,
            "probe_run": _flag(check.get("probe_run")) is True, "environments": environments, "judged": judged}


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
            "gpus": [], "gate": False, "gate_other": [], "doctor": None, "action": None, "warnings": [],
            "checklist": _checklist({}), "verdict": None, "check": None, "judgement": [],
        }
        judged = _door.judge_host(r, None, error=exc)
        entry["judgement"] = judged["findings"]
        return apply_decision(entry, judged["decision"])
