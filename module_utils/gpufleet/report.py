"""The fleet-wide report: per-host result files in, one summary and five renderings out.

Input is a folder of JSON files, one per inventory host (``<inventory_hostname>.json``), written
by ``playbooks/report.yml``::

    {"host", "reachable", "failed", "reason", "provider", "price_per_hour",
     "gpu": <gpu facts> | null, "gate": [..] | null, "doctor": {..} | null, "collected_at"}

Each host also gets the renter's checklist (``audit.checklist``: ten items computed from the
facts' readiness probes and the doctor's evidence, docs/checklist.md) and each GPU its feature
matrix (``features``); the checklist is a separate section and does not change a host's status.

A host with ``expected_gpu_count`` 0 (inventory ``gpufleet_expected_gpu_count: 0``) is a CPU host
by intent: no GPU is missing there, and the facts' "no GPU stack" findings are kept as info.

``load_results`` reads them (and lists inventory hosts that left no file as unreachable),
``summarize`` turns them into a status per host, fleet totals, the list of hosts to return
or fix and the hosts whose driver / CUDA version drifts from the fleet's usual one (the version
held by more than half of the hosts with GPUs; without one, a fleet-level line), and
``to_json`` / ``to_csv`` / ``to_markdown`` / ``to_html`` / ``to_prometheus`` render that
(``iter_*`` give the same text in chunks). ``write_all`` writes all five files atomically,
in two forked worker processes for a large fleet. ``summarize_folder`` reads, summarizes and
drops one result file at a time, so a large fleet's raw results are never all in memory.

Every value in the input may be missing or null; nothing here raises on partial data. All
host-provided text is escaped for the format it lands in (HTML, Markdown, CSV formulas,
Prometheus label values). Plain Python >= 3.8, stdlib only.
"""

import base64
import contextlib
import csv
import datetime
import gc
import hashlib
import html
import io
import json
import math
import multiprocessing
import operator
import os
import pickle
import re
import tempfile

from . import audit as _audit
from . import capacity as _capacity
from . import features as _features
from . import history as _history
from . import providers as _providers

SCHEMA = 1

STATUSES = ("ok", "degraded", "failed", "unreachable", "no-gpu", "unknown")
# Order of the "hosts to return / fix" list: worst first.
_BAD_ORDER = {"failed": 0, "no-gpu": 1, "unreachable": 2, "unknown": 3, "degraded": 4}
_RANK = {"ok": 0, "degraded": 1, "failed": 2}

NOT_REACHED = "no result (host not reached)"

# Health finding codes that point at the rented hardware: the provider has to act.
PROVIDER_CODES = frozenset([
    "gpu_lost", "gpu_reset_required", "ecc_uncorrectable_volatile", "ecc_uncorrectable_aggregate",
    "row_remap_failure", "gpu_count_low", "no_gpus", "gpu_stack_broken", "pcie_width_below_max",
    "nvlink_links_down", "clocks_throttled_hw",
])
_REASON_SEVERITIES = ("critical", "error", "warning", "unknown")
# Health finding codes that only say "no GPU here": what a CPU host by intent is (kept there as info).
NO_GPU_CODES = frozenset(["gpu_stack_broken", "no_gpus", "gpu_facts_unavailable"])
# Where a host's facts_read_at comes from: the GPU facts' own time, else the time the report play
# wrote the host's record (the facts may be older: a fact cache), else none.
FACTS_TIME_SOURCES = ("gpu_facts", "record", None)

ACTION_RETURN = "return to provider"
ACTION_FIX = "fix here"
ACTION_CHECK = "check access / rerun"
ACTION_RESTART = "restart the container"
ACTION_REBOOT = "reboot"

# Said in every rendering of a report written by an ``ansible-playbook --check`` run.
CHECK_MODE_BANNER = ("This report was written by a --check run: it shows what the run would do, "
                     "the hosts were not changed.")
CHECK_MODE_NOTE = "--check run: a plan, the hosts were not changed"

OUTPUT_FILES = {
    "html": "fleet.html",
    "json": "fleet.json",
    "csv": "fleet.csv",
    "markdown": "fleet.md",
    "prometheus": "gpufleet.prom",
}

CSV_COLUMNS = (
    "host", "host_status", "simulated", "provider", "price_per_hour", "source", "driver_version",
    "cuda_driver_version", "facts_read_at", "facts_read_at_source", "gpu_index", "name", "uuid", "serial",
    "pci_bus_id", "memory_total_mib", "memory_used_mib", "compute_capability", "pcie_gen_current", "pcie_gen_max",
    "pcie_width_current", "pcie_width_max", "temperature_c", "power_draw_w", "power_limit_w", "throttle_reasons",
    "persistence_mode", "mig_mode", "ecc_mode", "ecc_volatile_corrected", "ecc_volatile_uncorrected",
    "ecc_aggregate_corrected", "ecc_aggregate_uncorrected", "retired_pages_pending", "remapped_rows_uncorrectable",
    "remapped_rows_pending", "remapped_rows_failure", "nvlink_active", "nvlink_total", "lost", "spec_key",
    "peak_bf16_tflops", "features", "findings", "gate", "gate_passed", "host_reasons",
)
# The renter's checklist (module_utils/gpufleet/audit.py, docs/checklist.md): item keys and labels; the last item
# is the GPU history's (module_utils/gpufleet/history.py, docs/history.md).
CHECK_ITEMS = _audit.ITEMS + (_history.CHECK_ITEM,)
CHECK_STATUSES = _audit.STATUSES
# One status column per checklist item, after host_reasons (the texts are in fleet.json, .md, .html).
CSV_COLUMNS += tuple("check_" + key for key, _unused in CHECK_ITEMS)


class ReportInputError(Exception):
    """The results folder cannot be used (missing, not a folder, unreadable)."""


# --------------------------------------------------------------------------- small helpers
def _d(value):
    """``value`` if it is a dict, else an empty dict (null / wrong type tolerated)."""
    return value if isinstance(value, dict) else {}


def _l(value):
    """``value`` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


_INF = float("inf")


def _num(value):
    """A finite int/float, or None (bools, strings, NaN and null are not numbers here)."""
    t = type(value)
    if t is int:
        return value
    if t is float:
        return value if -_INF < value < _INF else None  # NaN compares false
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _flag(value):
    """True/False from a bool or a bool-like text ("true", "False", "yes", "0"); None otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "yes", "1"):
            return True
        if low in ("false", "no", "0"):
            return False
    return None


def _price(value):
    """A number from a number or numeric text (inventory vars are often strings); None otherwise."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    return _num(value)


def _text(value):
    """Host-provided value as text ("" for None)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return ("%.2f" % value).rstrip("0").rstrip(".")
    return str(value)


def _round(value, digits=2):
    return None if value is None else round(value, digits)


def _now_iso(now=None):
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if isinstance(now, datetime.datetime):
        return now.replace(microsecond=0).isoformat()
    return str(now)


# --------------------------------------------------------------------------- loading
@contextlib.contextmanager
def _gc_paused():
    """The cyclic GC off for the block (restored after): loading and summarizing a large fleet
    allocates millions of objects that all live on, and each GC pass would rescan them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            # What survived the block moves to the oldest generation in one step (freeze, then
            # unfreeze); otherwise the first young-generation pass after gc.enable() would walk
            # every object allocated in the block. Skipped when the caller froze objects itself
            # (unfreeze would thaw those too).
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _placeholder(host, reason, **extra):
    result = {
        "host": host, "reachable": False, "failed": False, "reason": reason, "provider": None,
        "price_per_hour": None, "gpu": None, "gate": None, "doctor": None, "collected_at": None,
    }
    result.update(extra)
    return result


def _list_folder(folder):
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ReportInputError("results folder %r does not exist or is not a folder" % folder)
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise ReportInputError("cannot list results folder %r: %s" % (folder, exc)) from exc
    return folder, [n for n in names if n.endswith(".json") and not n.startswith(".")]


def _load_file(folder, name):
    """One result file as a dict (``host`` defaulted to the file's stem, ``_file`` added), a
    placeholder with ``load_error`` when it cannot be read, or None when it is not a plain file."""
    stem = name[:-len(".json")]
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        try:
            data = json.loads(raw)
        except UnicodeDecodeError:  # not UTF-8: read it with replacement characters, as before
            data = json.loads(raw.decode("utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        return _placeholder(stem, None, reachable=None, load_error="%s: %s" % (name, exc))
    if not isinstance(data, dict):
        return _placeholder(stem, None, reachable=None,
                            load_error="%s: expected a JSON object, got %s" % (name, type(data).__name__))
    if not isinstance(data.get("host"), str) or not data["host"]:
        data["host"] = stem
    data["_file"] = name
    return data


def _inventory_list(inventory_hosts):
    if inventory_hosts is None:
        return None
    if isinstance(inventory_hosts, str):
        inventory_hosts = inventory_hosts.split(",")
    return [str(h).strip() for h in inventory_hosts]


def _iter_files(folder, names, wanted, known):
    """Results of the files ``names``; their stems and host names are added to ``known``."""
    for name in names:
        result = _load_file(folder, name)
        if result is None:
            continue
        stem = name[:-len(".json")]
        known.add(stem)
        known.add(result.get("host"))
        if wanted is not None and stem not in wanted and result.get("host") not in wanted:
            result["not_in_inventory"] = True
        yield result


def _iter_missing(inventory, known):
    """Placeholders for the inventory hosts that left no result file."""
    for host in inventory or ():
        if host and host not in known:
            known.add(host)
            yield _placeholder(host, NOT_REACHED, missing=True)


def iter_results(folder, inventory_hosts=None):
    """Yield the results of ``load_results`` one at a time, in file-name order, then the
    placeholders for inventory hosts without a file; the caller may drop each after use."""
    folder, names = _list_folder(folder)
    inventory = _inventory_list(inventory_hosts)
    wanted = None if inventory is None else set(inventory)
    known = set()
    yield from _iter_files(folder, names, wanted, known)
    yield from _iter_missing(inventory, known)


def load_results(folder, inventory_hosts=None):
    """Read every ``*.json`` result file in ``folder``; add a placeholder for each inventory host without one.

    ``inventory_hosts``: None, a list of host names, or a comma-separated string. Returns a list of
    result dicts sorted by host name. A file that is not valid JSON (or not an object) becomes a
    result with ``load_error`` set, never an exception. Raises ``ReportInputError`` when ``folder``
    is missing or not a readable folder.
    """
    with _gc_paused():
        results = list(iter_results(folder, inventory_hosts))
    results.sort(key=lambda r: str(r.get("host")))
    return results


def split_bundle(path, folder):
    """Write each line of ``path`` (one JSON result object with its ``host``) to ``folder/<host>.json``.

    Returns the host names written. Raises ``ReportInputError`` on a line that is not a JSON object
    with a plain host name (no path separator), before any file is written.
    """
    entries = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                result = json.loads(line)
            except ValueError as exc:
                raise ReportInputError("%s line %d is not JSON: %s" % (path, number, exc)) from None
            host = result.get("host") if isinstance(result, dict) else None
            if not isinstance(host, str) or not host or "/" in host or host in (".", ".."):
                raise ReportInputError("%s line %d has no usable 'host' (a plain inventory name)" % (path, number))
            entries.append((host, line.strip()))
    os.makedirs(folder, exist_ok=True)
    for host, text in entries:
        with open(os.path.join(folder, host + ".json"), "w", encoding="utf-8") as out:
            out.write(text + "\n")
    return [host for host, _unused in entries]


def read_hosts_file(path):
    """Inventory host names from a text file: one per line; blank lines and ``#`` comments skipped."""
    with open(path, encoding="utf-8") as fh:
        return [line.strip() for line in fh if line.strip() and not line.lstrip().startswith("#")]


# --------------------------------------------------------------------------- summarizing
def _spec(gpu):
    spec = gpu.get("spec")
    if isinstance(spec, dict):
        return spec
    if not gpu.get("name"):
        return {}
    try:  # the spec table is optional here: a report must render without it
        from .specs import lookup

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
    if finding.get("gpu_index") is not None:
        return "GPU %s: %s" % (finding["gpu_index"], msg)
    return msg


def _health(facts):
    """(status, findings) from the facts; computed with facts.health when the facts carry none."""
    health = facts.get("health")
    if not isinstance(health, dict):
        try:
            from .facts import health as compute

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


_EMPTY = {}  # read only


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


def _escalate(status, to):
    if status in _RANK and _RANK[to] > _RANK[status]:
        return to
    return status


def _host_summary(result):
    entry = _host_entry(result)
    entry["action"] = _action(entry)
    if entry["action"] == ACTION_RETURN and entry["provider_id"] is not None:
        entry["return_action"] = _providers.return_action(entry["provider"], entry["provider_id"],
                                                          entry["provider_machine_id"])
    entry["checklist"] = _checklist(result)
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
        "gate_other": [], "doctor": None, "action": None, "warnings": [],
    }
    entry["facts_read_at"], entry["facts_read_at_source"] = _facts_time(result, facts)
    if result.get("not_in_inventory"):
        entry["warnings"].append("result file for a host that is not in the given inventory")
    if result.get("load_error"):
        entry["reasons"].append("result file unreadable: %s" % result["load_error"])
        return entry
    if reachable is False:
        entry["status"] = "unreachable"
        entry["reasons"].append(_text(result.get("reason")) or "unreachable (no reason given)")
        return entry
    if failed is True:
        entry["status"] = "failed"
        entry["reasons"].append("playbook failed: %s" % (_text(result.get("reason")) or "no reason given"))
    elif reachable is not True and not facts:
        entry["reasons"].append(_text(result.get("reason")) or "no reachability and no GPU facts in the result")
        return entry

    gpus = [g for g in _l(facts.get("gpus")) if isinstance(g, dict)]
    if facts:
        health_status, findings = _health(facts)
        entry["findings"] = findings
    else:
        health_status, findings = "unknown", []
        if entry["status"] != "failed":
            entry["reasons"].append("no GPU facts in the result")
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

    if entry["status"] == "failed":
        pass
    elif cpu_host:
        entry["status"] = "ok"  # a CPU host by intent (gpufleet_expected_gpu_count: 0): no GPU is missing
    elif facts and not gpus and entry["gpu_count"] == 0 and health_status != "unknown":
        entry["status"] = "no-gpu"
        what = facts.get("error") or "no GPU visible to %s" % (facts.get("source") or "the facts module")
        code = facts.get("error_code")
        entry["reasons"].append("no GPU: %s%s" % ("%s: " % code if code else "", what))
    elif facts:
        entry["status"] = health_status
        if health_status == "unknown" and facts.get("error") and not any(
                f.get("severity") in _REASON_SEVERITIES for f in findings):
            entry["reasons"].append("GPU facts unavailable: %s" % facts["error"])
    for f in findings:
        if f.get("severity") in _REASON_SEVERITIES and entry["status"] != "no-gpu":
            entry["reasons"].append(_finding_text(f))

    # Gate: a GPU below its threshold flags the host.
    for row in rows:
        for g in row["gate"]:
            if g["passed"] is False:
                entry["status"] = _escalate(entry["status"], "degraded")
                frac = "" if g["fraction_of_peak"] is None else " (%.0f%% of peak)" % (100 * g["fraction_of_peak"])
                entry["reasons"].append("GPU %s: gate %s failed%s%s" % (
                    row["index"], g["test"], frac, ": %s" % _text(g["why"]) if g["why"] else ""))

    doctor = result.get("doctor")
    if isinstance(doctor, dict):
        dfind = [{k: f.get(k) for k in _DOCTOR_FINDING_KEYS if k in f}
                 for f in _l(doctor.get("findings")) if isinstance(f, dict)]
        remediation = doctor.get("remediation")
        entry["doctor"] = {"status": doctor.get("status"), "cuda_usable": doctor.get("cuda_usable"),
                           "findings": dfind, "remediation": remediation if isinstance(remediation, dict) else None}
        if doctor.get("status") not in ("ok", "fixed", "healthy"):
            for f in dfind:
                sev = f.get("severity")
                if sev in ("critical", "error"):
                    entry["status"] = _escalate(entry["status"], "failed")
                elif sev == "warning":
                    entry["status"] = _escalate(entry["status"], "degraded")
                else:
                    continue
                entry["reasons"].append("doctor: %s%s" % (
                    _text(f.get("meaning") or f.get("message") or f.get("code")),
                    " (remedy: %s)" % _text(f.get("remedy")) if f.get("remedy") else ""))
    return entry


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
_DOCTOR_FINDING_KEYS = ("code", "severity", "remedy_class", "meaning", "remedy", "message", "fixable")


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


def _action(entry):
    status = entry["status"]
    if status == "ok":
        return None
    if status in ("unreachable", "unknown"):
        # The provider itself lists the box as failed (an inventory plugin's gpufleet_readiness): give it back.
        return ACTION_RETURN if entry.get("provider_readiness") == "failed" else ACTION_CHECK
    if status == "no-gpu":
        return ACTION_RETURN
    codes = {f.get("code") for f in entry["findings"] if f.get("severity") in _REASON_SEVERITIES}
    if codes & PROVIDER_CODES or any(str(c).startswith("xid_") for c in codes):
        return ACTION_RETURN
    if any(g["passed"] is False for row in entry["gpus"] for g in row["gate"]):
        return ACTION_RETURN
    doctor = [f for f in _l(_d(entry.get("doctor")).get("findings")) if isinstance(f, dict)]
    if any(f.get("remedy_class") == "provider" for f in doctor):
        return ACTION_RETURN
    # What the renter does, not gpufleet: restart the container (provider's console or API), or reboot a VM.
    for remedy, action in (("restart_container", ACTION_RESTART), ("reboot", ACTION_REBOOT)):
        if any(f.get("remedy_class") == remedy and f.get("severity") in _REASON_SEVERITIES for f in doctor):
            return action
    if any(f.get("fixable") is False for f in doctor):
        return ACTION_RETURN
    return ACTION_FIX


def _safe_host_summary(r):
    try:
        return _host_summary(r)
    except Exception as exc:  # defensive: one odd result must not sink the fleet report
        return {
            "host": str(r.get("host")), "status": "unknown", "simulated": False,
            "reasons": ["report could not read this result: %r" % exc], "provider": r.get("provider"),
            "price_per_hour": _num(r.get("price_per_hour")), "reachable": r.get("reachable"),
            "collected_at": r.get("collected_at"), "facts_read_at": None, "facts_read_at_source": None,
            "source": None, "driver_version": None,
            "cuda_driver_version": None, "error_code": None, "gpu_count": 0, "gpu_models": {},
            "memory_total_mib": 0, "peak_bf16_tflops": None, "measured_tflops": None, "findings": [],
            "gpus": [], "gate": False, "gate_other": [], "doctor": None, "action": ACTION_CHECK, "warnings": [],
            "checklist": _checklist({}),
        }


# (key in the host entry, word in the reason, totals key of the fleet's usual value)
_DRIFT_FIELDS = (
    ("driver_version", "driver", "usual_driver_version"),
    ("cuda_driver_version", "CUDA", "usual_cuda_driver_version"),
)


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


# A fleet-level "versions differ" line names this many hosts per version, then counts the rest.
SPLIT_NAMES = 3


def _split_line(word, ranked, names):
    parts = []
    for v, n in ranked:
        shown = names[v][:SPLIT_NAMES]
        more = " and %d more" % (n - len(shown)) if n > len(shown) else ""
        parts.append("%s on %s%s" % (_text(v), ", ".join(shown), more))
    return "%s versions differ across the fleet: %s (no majority)" % (word, "; ".join(parts))


def _drift(hosts):
    """Version drift across the fleet among hosts with GPUs, per field: with a majority version (more
    than half of the hosts that report the field), one entry per host that differs (severity info: added
    to the host's reasons, its status unchanged); without one, one fleet-level split entry and no
    per-host reason. Returns (usual values, drift entries, split entries)."""
    with_gpus = [h for h in hosts if h["gpus"]]
    usual = {}
    drift = []
    split = []
    for key, word, total_key in _DRIFT_FIELDS:
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
            reason = "%s %s differs from the fleet's usual %s" % (word, _text(v), _text(common))
            h["reasons"].append(reason)
            drift.append({"host": h["host"], "field": key, "version": v, "usual": common, "severity": "info",
                          "reason": reason})
    drift.sort(key=lambda d: (d["host"], d["field"]))
    return usual, drift, split


def _apply_history(hosts, history):
    """The GPU history's findings (history.assess) on each host: its ``history`` list, the checklist's history
    item, one reason each, and for a box known bad from an earlier run or the user's list the verdict
    "return to provider" (status at least degraded). ``history`` None: no history kept, the item says so."""
    for h, seen in _history.assess(history, hosts):
        h["history"] = seen["findings"]
        if isinstance(h.get("checklist"), dict):
            h["checklist"][_history.CHECK_KEY] = seen["check"]
        for f in seen["findings"]:
            h["reasons"].append("history: %s" % f["message"])
            if f["action"] == ACTION_RETURN:
                h["status"] = _escalate(h["status"], "degraded")
                h["action"] = ACTION_RETURN
        if h["action"] == ACTION_RETURN and h.get("provider_id") is not None and not h.get("return_action"):
            h["return_action"] = _providers.return_action(h["provider"], h["provider_id"], h.get("provider_machine_id"))


def _finish(hosts, now, results=None, check_mode=False, history=None):
    hosts.sort(key=lambda h: h["host"])
    _apply_history(hosts, history)
    usual, drift, split = _drift(hosts)

    by_status = dict.fromkeys(STATUSES, 0)
    by_model = {}
    gpus = usable = 0
    mem_mib = 0
    peak = 0.0
    price_total = 0.0
    priced_hosts = 0
    peak_price = peak_tflops = meas_price = meas_tflops = 0.0
    for h in hosts:
        by_status[h["status"]] = by_status.get(h["status"], 0) + 1
        gpus += h["gpu_count"]
        if h["status"] in ("ok", "degraded"):
            usable += sum(1 for g in h["gpus"] if not g["lost"])
        for name, n in h["gpu_models"].items():
            by_model[name] = by_model.get(name, 0) + n
        missing = h["gpu_count"] - len(h["gpus"])
        if missing > 0:
            by_model["unknown GPU"] = by_model.get("unknown GPU", 0) + missing
        mem_mib += h["memory_total_mib"]
        peak += h["peak_bf16_tflops"] or 0
        if h["price_per_hour"] is not None:
            price_total += h["price_per_hour"]
            priced_hosts += 1
            if h["peak_bf16_tflops"]:
                peak_price += h["price_per_hour"]
                peak_tflops += h["peak_bf16_tflops"]
            if h["measured_tflops"]:
                meas_price += h["price_per_hour"]
                meas_tflops += h["measured_tflops"]

    totals = {
        "hosts": len(hosts),
        "hosts_by_status": by_status,
        "simulated_hosts": sum(1 for h in hosts if h["simulated"]),
        "gpus": gpus,
        "gpus_usable": usable,
        "gpus_by_model": dict(sorted(by_model.items(), key=lambda kv: str(kv[0]))),
        "gpu_memory_total_gib": round(mem_mib / 1024.0, 1),
        "peak_bf16_tflops": round(peak, 1),
        "price_per_hour": round(price_total, 4),
        "priced_hosts": priced_hosts,
        # $ per TFLOP-hour over the hosts where both the price and the figure are known.
        "usd_per_peak_tflop_hour": round(peak_price / peak_tflops, 6) if peak_tflops else None,
        "measured_tflops": round(meas_tflops, 1) if meas_tflops else None,
        "usd_per_measured_tflop_hour": round(meas_price / meas_tflops, 6) if meas_tflops else None,
        "usual_driver_version": usual["usual_driver_version"],
        "usual_cuda_driver_version": usual["usual_cuda_driver_version"],
        "drift": drift,
        "version_split": split,
    }
    checks = {key: dict.fromkeys(CHECK_STATUSES, 0) for key, _unused in CHECK_ITEMS}
    for h in hosts:
        items = h.get("checklist") or _EMPTY
        for key, _unused in CHECK_ITEMS:
            st = (items.get(key) or _EMPTY).get("status")
            counts = checks[key]
            counts[st if st in counts else "unknown"] += 1
    totals["checklist"] = checks
    bad = [{"host": h["host"], "status": h["status"], "provider": h["provider"], "action": h["action"],
            "reasons": list(h["reasons"]), "simulated": h["simulated"], "provider_id": h.get("provider_id"),
            "return_action": h.get("return_action")}
           for h in hosts if h["status"] != "ok"]
    bad.sort(key=lambda b: (_BAD_ORDER.get(b["status"], 9), b["host"]))
    warnings = ["%s: %s" % (h["host"], w) for h in hosts for w in h["warnings"]]
    summary = {
        "schema": SCHEMA, "generated_at": _now_iso(now), "check_mode": bool(check_mode), "totals": totals,
        "bad_hosts": bad, "hosts": hosts, "warnings": warnings, "history": _history.overview(history),
    }
    if results is not None:
        results.sort(key=lambda r: str(r.get("host")))
        summary["results"] = results
    return summary


def summarize(results, now=None, include_results=False, workers=None, check_mode=False, history=None):
    """Fleet summary from ``load_results`` output: per-host status and reasons, totals, bad hosts.

    ``now``: a datetime (or text) for ``generated_at``; default: the current UTC time.
    ``check_mode``: the results come from an ``ansible-playbook --check`` run (a plan, the hosts were
    not changed); the summary's ``check_mode`` says so and every rendering shows it.
    ``workers``: None summarizes a large list (``PARALLEL_MIN_FILES`` or more) in two processes
    on a machine with two or more CPUs (a forked child does the second part and sends its host
    rows back pickled), one otherwise; 1 forces one, 2 forces two. The summary is the same.
    The summary holds its own compact per-host and per-GPU rows, not the raw results, so the caller
    may drop those before rendering. ``include_results=True`` keeps them under ``results`` (then
    ``fleet.json`` embeds them again, as it did up to now).
    ``history``: the GPU history of earlier runs (``history.load``, with ``history.with_known_bad``): GPU swaps
    and known-bad boxes become host findings (``_apply_history``); ``history.update`` records this summary.
    """
    results = [r for r in _l(results) if isinstance(r, dict)]
    with _gc_paused():
        if _use_two(len(results), workers):
            half = _split(len(results))
            first, second = _in_two(lambda part: [_safe_host_summary(r) for r in part], results[:half],
                                    results[half:])
            hosts = first + second
        else:
            hosts = [_safe_host_summary(r) for r in results]
        return _finish(hosts, now, list(results) if include_results else None, check_mode, history)


def _summarize_files(folder, names, wanted, known, kept=None):
    hosts = []
    for result in _iter_files(folder, names, wanted, known):
        hosts.append(_safe_host_summary(result))
        if kept is not None:
            kept.append(result)
    return hosts


def _child_run(work, arg, conn):
    """Worker: send ``work(arg)`` back pickled; b"" on any failure (the parent then does it)."""
    try:
        payload = pickle.dumps(work(arg), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        payload = b""
    conn.send_bytes(payload)
    conn.close()


def _in_two(work, first, second):
    """``(work(first), work(second))``: the second in a forked child whose result comes back
    pickled, the first here at the same time. If the child fails, the second is done here too."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_run, args=(work, second, send), daemon=True)
    child.start()
    send.close()
    try:
        a = work(first)
        try:
            payload = recv.recv_bytes()
        except EOFError:
            payload = b""
    finally:
        recv.close()
        child.join()
    b = pickle.loads(payload) if payload else work(second)  # noqa: S301 - from our own forked child
    return a, b


def _split(n):
    return n * 11 // 20  # the child also pickles its rows: it gets a little less than half


def _use_two(count, workers):
    if workers is None:
        return count >= PARALLEL_MIN_FILES and _cpus() >= 2 and _can_fork()
    return workers >= 2 and count >= 2 and _can_fork()


# Fewer results (files) than this are summarized in the calling process.
PARALLEL_MIN_FILES = 500


def summarize_folder(folder, inventory_hosts=None, now=None, include_results=False, workers=None,
                     check_mode=False, history=None):
    """``summarize(load_results(folder, inventory_hosts))`` without holding every raw result at
    once: each file is read, summarized and dropped before the next (unless ``include_results``).

    ``workers``: None reads a large folder in two processes on a machine with two or more CPUs
    (a forked child summarizes the second half of the files and sends its host rows back), one
    process otherwise; 1 forces one, 2 forces two. The summary is the same either way.
    ``check_mode``, ``history``: as for ``summarize``.
    """
    folder, names = _list_folder(folder)
    inventory = _inventory_list(inventory_hosts)
    wanted = None if inventory is None else set(inventory)
    known = set()
    kept = [] if include_results else None
    with _gc_paused():
        if kept is None and _use_two(len(names), workers):
            def work(part):
                part_known = set()
                return _summarize_files(folder, part, wanted, part_known), part_known

            half = _split(len(names))
            (hosts, known), (more, more_known) = _in_two(work, names[:half], names[half:])
            hosts += more
            known |= more_known
        else:
            hosts = _summarize_files(folder, names, wanted, known, kept)
        for result in _iter_missing(inventory, known):
            hosts.append(_safe_host_summary(result))
            if kept is not None:
                kept.append(result)
        return _finish(hosts, now, kept, check_mode, history)


def _as_summary(data):
    if isinstance(data, dict) and "hosts" in data and "totals" in data:
        return data
    return summarize(data)


def one_line(data):
    """One line for a terminal: hosts by status, GPUs, price, hosts to return / fix."""
    s = _as_summary(data)
    t = s["totals"]
    states = ", ".join("%d %s" % (t["hosts_by_status"].get(k, 0), k) for k in STATUSES
                       if t["hosts_by_status"].get(k))
    line = "%d host(s): %s; %d GPU(s), %.1f GiB, %.0f peak BF16 TFLOPS; $%.2f/h; %d host(s) to return / fix" % (
        t["hosts"], states or "none", t["gpus"], t["gpu_memory_total_gib"], t["peak_bf16_tflops"],
        t["price_per_hour"], len(s["bad_hosts"]))
    if t["simulated_hosts"]:
        line += "; %d simulated" % t["simulated_hosts"]
    if t.get("drift"):
        line += "; %d version drift(s)" % len(t["drift"])
    if t.get("version_split"):
        line += "; %s versions differ (no majority)" % " and ".join(
            "driver" if x["field"] == "driver_version" else "CUDA" for x in t["version_split"])
    if s.get("check_mode"):
        line += "; " + CHECK_MODE_NOTE
    return line


# --------------------------------------------------------------------------- JSON
def _json_safe(value):
    """A copy with NaN/Infinity as null and non-text keys as text (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


_JSON_CHUNK = 256  # list elements per chunk written


def _json_encoder():
    # check_circular off: a cycle cannot come from JSON files, and it fails either way (RecursionError).
    encode = json.JSONEncoder(sort_keys=True, default=str, allow_nan=False, check_circular=False).encode

    def enc(value):
        try:
            return encode(value)
        except (TypeError, ValueError):  # NaN/Infinity or mixed non-text keys in host-provided values
            return json.dumps(_json_safe(value), sort_keys=True, default=str, allow_nan=False)
    return enc


def _json_block(value, enc, pad):
    """``value`` laid out like ``json.dumps(indent=2)`` at indent ``pad``, except that each element of
    a non-empty list is one compact line (the C encoder); yields chunks."""
    inner = pad + "  "
    if isinstance(value, dict) and value:
        try:
            keys = sorted(value)
        except TypeError:
            yield enc(value)
            return
        yield "{\n"
        for n, key in enumerate(keys):
            yield "%s%s: " % (inner, enc(str(key) if not isinstance(key, str) else key))
            yield from _json_block(value[key], enc, inner)
            yield ",\n" if n < len(keys) - 1 else "\n"
        yield pad + "}"
    elif isinstance(value, (list, tuple)) and value:
        yield "[\n"
        last = len(value)
        for start in range(0, last, _JSON_CHUNK):
            chunk = value[start:start + _JSON_CHUNK]
            end = "\n" if start + _JSON_CHUNK >= last else ",\n"
            yield ",\n".join(inner + enc(v) for v in chunk) + end
        yield pad + "]"
    else:
        yield enc(value)


def iter_json(data):
    """``to_json`` in chunks."""
    # json's C encoder only runs without ``indent``: indenting the whole report through the pure
    # Python encoder took ~70% of write_all on a large fleet. So the nesting is laid out by hand,
    # with one compact line per element of each list (one host, one bad host, one drift entry ...).
    summary = _as_summary(data)
    yield from _json_block(summary, _json_encoder(), "")
    yield "\n"


def to_json(data):
    """The summary as JSON text: one line per host. ``results`` (the raw result files) are in it
    only when the summary was made with ``include_results=True``."""
    return "".join(iter_json(data))


# --------------------------------------------------------------------------- CSV
def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value
    text = str(value).replace("\r", " ").replace("\n", " ")
    # A cell a spreadsheet would run as a formula is kept as text.
    if text[:1] in ("=", "+", "-", "@", "\t"):
        text = "'" + text
    return text


def _gate_text(gate):
    parts = []
    for g in gate:
        frac = "" if g["fraction_of_peak"] is None else " %.2f" % g["fraction_of_peak"]
        verdict = {True: " pass", False: " FAIL", None: ""}[g["passed"]]
        parts.append("%s%s%s" % (g["test"], frac, verdict))
    return "; ".join(parts)


_CSV_HOST = ("host", "host_status", "simulated", "provider", "price_per_hour", "source", "driver_version",
             "cuda_driver_version", "facts_read_at", "facts_read_at_source")
_CSV_GPU = CSV_COLUMNS[len(_CSV_HOST):CSV_COLUMNS.index("host_reasons")]
_CSV_CHECK = CSV_COLUMNS[CSV_COLUMNS.index("host_reasons") + 1:]
_CSV_GPU_KEYS = tuple(k for k in _CSV_GPU if k not in ("gpu_index", "throttle_reasons", "findings", "gate"))


_CSV_GPU_GET = operator.itemgetter(*["index" if c == "gpu_index" else c for c in _CSV_GPU])
_CSV_AT = {c: _CSV_GPU.index(c) for c in ("throttle_reasons", "findings", "gate")}


def _csv_gpu_values(g):
    """The GPU's values in ``_CSV_GPU`` order (raw, not yet CSV cells)."""
    out = list(_CSV_GPU_GET(g))
    out[_CSV_AT["throttle_reasons"]] = ";".join(out[_CSV_AT["throttle_reasons"]])
    out[_CSV_AT["findings"]] = "; ".join(out[_CSV_AT["findings"]])
    out[_CSV_AT["gate"]] = _gate_text(out[_CSV_AT["gate"]]) if out[_CSV_AT["gate"]] else ""
    return out


def _csv_host_values(h):
    return [h["host"], h["status"], h["simulated"], h["provider"], h["price_per_hour"], h["source"],
            h["driver_version"], h["cuda_driver_version"], h["facts_read_at"], h["facts_read_at_source"]]


def _check_statuses(h):
    checks = h.get("checklist") or _EMPTY
    return [(checks.get(key) or _EMPTY).get("status") or "unknown" for key, _unused in CHECK_ITEMS]


def csv_rows(data):
    """Rows (dicts keyed by ``CSV_COLUMNS``): one per GPU, one per host without GPU details."""
    s = _as_summary(data)
    rows = []
    for h in s["hosts"]:
        base = _csv_host_values(h)
        tail = ["; ".join(h["reasons"])] + _check_statuses(h)
        if not h["gpus"]:
            rows.append(dict(zip(_CSV_HOST + ("host_reasons",) + _CSV_CHECK, base + tail)))
            continue
        for g in h["gpus"]:
            rows.append(dict(zip(CSV_COLUMNS, base + _csv_gpu_values(g) + tail)))
    return rows


_CSV_HOSTS_PER_CHUNK = 200


def _csv_cache(cache, value):
    text = _csv_cell(value)
    if isinstance(value, (str, bool)) and len(cache) < 100000:
        cache[value] = text
    return text


def iter_csv(data):
    """``to_csv`` in chunks."""
    s = _as_summary(data)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    empty = [""] * len(_CSV_GPU)
    cell = _csv_cell
    cache = {}
    for n, h in enumerate(s["hosts"], 1):
        base = [cell(v) for v in _csv_host_values(h)]
        reasons = [cell("; ".join(h["reasons"]))] + _check_statuses(h)
        if not h["gpus"]:
            writer.writerow(base + empty + reasons)
        else:
            # Numbers go out as they are, None as "", text through a cache of _csv_cell (model names,
            # modes, gate texts repeat), the rest through _csv_cell.
            writer.writerows([base + [v if (t := type(v)) is int or t is float else "" if v is None else
                                      (cache[v] if (t is str or t is bool) and v in cache else _csv_cache(cache, v))
                                      for v in _csv_gpu_values(g)] + reasons for g in h["gpus"]])
        if n % _CSV_HOSTS_PER_CHUNK == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def to_csv(data):
    """CSV text with a header row (``CSV_COLUMNS``): one row per GPU plus one per host without GPUs."""
    return "".join(iter_csv(data))


# --------------------------------------------------------------------------- shared cell text
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


def _gate_cell(row, test):
    for g in row["gate"]:
        if g["test"] == test:
            frac = "" if g["fraction_of_peak"] is None else "%.0f%%" % (100 * g["fraction_of_peak"])
            measured = "" if g["measured"] is None else "%s %s" % (_text(g["measured"]), g["unit"])
            verdict = {True: "pass", False: "FAIL", None: ""}[g["passed"]]
            return " ".join(p for p in (measured, frac, verdict) if p)
    return ""


def _driver_text(h):
    return "%s / %s" % (_text(h["driver_version"]) or "?", _text(h["cuda_driver_version"]) or "?")


def _gpu_cells(h, g, tests, driver=None):
    name = _text(g["name"]) or "unknown GPU"
    if g["lost"]:
        name += " (LOST)"
    return [
        _text(g["index"]), name, _fmt_mem(g["memory_total_mib"]), _text(g["compute_capability"]),
        _driver_text(h) if driver is None else driver,
        _pair(g["pcie_gen_current"], g["pcie_gen_max"], "gen "),
        _pair(g["pcie_width_current"], g["pcie_width_max"], "x"),
        "" if g["temperature_c"] is None else "%s C" % _text(g["temperature_c"]), _power(g),
        ", ".join(g["throttle_reasons"]), _ecc(g), _text(g.get("features")), "; ".join(g["findings"]),
    ] + [_gate_cell(g, t) for t in tests]


_GPU_HEADERS = ["GPU", "model", "memory", "CC", "driver / CUDA", "PCIe gen cur/max", "PCIe width cur/max",
                "temp", "power/limit", "throttle", "ECC", "features (pinned torch wheel)", "health findings"]


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
    return [[label] + [str((counts.get(key) or {}).get(st, 0)) for st in CHECK_STATUSES] for key, label in CHECK_ITEMS]


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


_CHECK_NOTE = ("Ten things a renter checks before paying, computed from the facts and the doctor's evidence "
               "(docs/checklist.md); 'unknown' says which fact the host did not report.")


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
# separated by single spaces (most cells: numbers, model names, "gen 5/5").
_MD_PLAIN = re.compile(r"[^&<>\\|`\s]+(?: [^&<>\\|`\s]+)*")


def _md(value):
    text = _text(value)
    if _MD_PLAIN.fullmatch(text):
        return text
    text = html.escape(text, quote=False)
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    return " ".join(text.split())


def _md_cache(cache, text):
    md = _md(text)
    if len(cache) < 100000:
        cache[text] = md
    return md


def _md_row(cells):
    return "| " + " | ".join(cells) + " |"


def _md_table(headers, rows):
    out = [_md_row([_md(h) for h in headers]), "|" + "---|" * len(headers)]
    for row in rows:
        out.append(_md_row([_md(c) for c in row]))
    return out


_MD_HOSTS_PER_CHUNK = 200


def iter_markdown(data):
    """``to_markdown`` in chunks."""
    s = _as_summary(data)
    out = ["# gpufleet report", ""]
    if s.get("check_mode"):
        out += ["> **%s**" % _md(CHECK_MODE_BANNER), ""]
    out += ["Generated %s." % _md(s["generated_at"]), "", "## Fleet", ""]
    out += _md_table(["", ""], _fleet_lines(s))
    out += ["", "## Hosts to return / fix", ""]
    if s["bad_hosts"]:
        out += _md_table(["host", "status", "provider", "action", "reasons"], [
            [b["host"] + (" (simulated)" if b["simulated"] else ""), b["status"], _provider_cell(b),
             b["action"] + (": " + b["return_action"] if b.get("return_action") else ""),
             "; ".join(b["reasons"])] for b in s["bad_hosts"]])
    else:
        out.append("None: every host is ok.")
    drift = _drift_rows(s)
    if drift:
        out += ["", "## Version drift", "",
                "Hosts whose driver or CUDA version differs from the fleet's usual one (info, not a fault):", ""]
        out += _md_table(["host", "what", "version", "usual"], drift)
    out += ["", "## Hosts", ""]
    yield "\n".join(out) + "\n"
    out = _md_table(["host", "status", "provider", "$/h", "GPUs", "driver / CUDA", "facts read at", "reasons"], [])
    for n, h in enumerate(s["hosts"], 1):
        out.append(_md_row([_md(c) for c in (
            h["host"] + (" (simulated)" if h["simulated"] else ""), h["status"], _provider_cell(h),
            _money(h["price_per_hour"]), _models(h), _driver_text(h), facts_time_text(h),
            "; ".join(h["reasons"]))]))
        if n % _MD_HOSTS_PER_CHUNK == 0:
            yield "\n".join(out) + "\n"
            out = []
    if out:
        yield "\n".join(out) + "\n"
    yield from _md_checklist(s)
    tests = _gate_tests(s)
    out = []
    started = False
    cache = {}  # cell text -> Markdown: most GPU cells repeat (model, memory, "gen 5/5", ...)
    for h in s["hosts"]:
        if not h["gpus"]:
            continue
        if not started:
            started = True
            out += ["", "## GPUs", ""]
            out += _md_table(["host"] + _GPU_HEADERS + ["gate %s" % t for t in tests], [])
        host = "| %s | " % _md(h["host"])
        driver = _driver_text(h)
        for g in h["gpus"]:
            out.append(host + " | ".join([cache[c] if c in cache else _md_cache(cache, c)
                                          for c in _gpu_cells(h, g, tests, driver)]) + " |")
        if len(out) >= 2000:
            yield "\n".join(out) + "\n"
            out = []
    if out:
        yield "\n".join(out) + "\n"
    others = _gate_other_rows(s)
    if others:
        yield "\n".join(["", "## Benchmark gate results not tied to a GPU (cpu mode)", ""]
                        + _md_table(_GATE_OTHER_HEADERS, others)) + "\n"
    remediations = [(h, _d(h["doctor"]).get("remediation")) for h in s["hosts"]]
    remediations = [(h, r) for h, r in remediations if isinstance(r, dict)]
    if remediations:
        yield "\n".join(["", "## Remediation", ""] + _md_table(_REMEDIATION_HEADERS, [
            [h["host"]] + _remediation_cells(r) for h, r in remediations])) + "\n"
    if s["warnings"]:
        yield "\n".join(["", "## Warnings", ""] + ["- %s" % _md(w) for w in s["warnings"]]) + "\n"


def _md_checklist(s):
    listed, total = _checklist_hosts(s)
    if not listed:
        return
    out = ["", "## Renter's checklist", "", _md(_CHECK_NOTE), ""]
    out += _md_table(["item"] + list(CHECK_STATUSES), _check_count_rows(s))
    out += [""]
    if len(listed) < total:
        out += ["%d of %d hosts, those with a failed or warned item first; fleet.json has every host." % (
            len(listed), total), ""]
    out += _md_table(["host", "status"] + [label for _unused, label in CHECK_ITEMS], [])
    yield "\n".join(out) + "\n"
    out = []
    cache = {}  # cell text -> Markdown: most cells repeat across hosts
    for n, h in enumerate(listed, 1):
        cells = [_check_cell(h, key) for key, _unused in CHECK_ITEMS]
        out.append(_md_row([_md(h["host"]), h["status"]]
                           + [cache[c] if c in cache else _md_cache(cache, c) for c in cells]))
        if n % _MD_HOSTS_PER_CHUNK == 0:
            yield "\n".join(out) + "\n"
            out = []
    rules = _capacity_rules()
    if rules:
        out += ["", "Capacity rules of thumb:", ""] + ["- %s" % _md(r) for r in rules]
    sec = _security_rows(listed)
    if sec:
        out += ["", "### Security findings", ""]
        out += _md_table(["host", "severity", "status", "finding", "fix gpufleet applies", "source"], sec)
    yield "\n".join(out) + "\n"


def to_markdown(data):
    """The report as Markdown: fleet summary, hosts to return / fix, version drift, hosts, GPUs."""
    return "".join(iter_markdown(data))


def _models(h):
    if not h["gpu_models"]:
        return "%d" % h["gpu_count"] if h["gpu_count"] else "none"
    return ", ".join("%d x %s" % (n, name) for name, n in sorted(h["gpu_models"].items(), key=lambda kv: str(kv[0])))


# --------------------------------------------------------------------------- HTML
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#1d1d1f;background:#fff}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.6em 0 .5em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin-bottom:1em}
th,td{border:1px solid #d0d0d0;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;white-space:nowrap}
table.sortable th{cursor:pointer}th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}
.st{font-weight:600;padding:.1em .45em;border-radius:.3em;white-space:nowrap}
.st-ok{background:#d7f5dd;color:#14532d}.st-degraded{background:#fff1c2;color:#713f12}
.st-failed{background:#ffd6d6;color:#7f1d1d}.st-unreachable{background:#e7d6d6;color:#4a1d1d}
.st-no-gpu{background:#ead9ff;color:#3b1a6b}.st-unknown{background:#e5e5e5;color:#333}
.sim{background:#dbeafe;color:#1e3a8a;font-size:.8em;padding:.05em .4em;border-radius:.3em;margin-left:.4em}
.fail{color:#b91c1c;font-weight:600}.pass{color:#15803d}.muted{color:#777}
ul.r{margin:0;padding-left:1.1em}.summary th{width:14em}
.banner{background:#fff1c2;color:#713f12;border:2px solid #d97706;padding:.6em .9em;font-weight:600}
"""

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


def script_hash(script=SORT_SCRIPT):
    """The CSP source that allows exactly ``script`` inline: 'sha256-<base64 of its SHA-256>'."""
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def _csp():
    return "default-src 'none'; style-src 'unsafe-inline'; script-src %s" % script_hash()


def _h(value):
    return html.escape(_text(value), quote=True)


def _status(status):
    return '<span class="st st-%s">%s</span>' % (_h(status), _h(status))


def _sim(flag):
    return '<span class="sim">simulated</span>' if flag else ""


def _reasons_html(reasons):
    if not reasons:
        return ""
    return '<ul class="r">' + "".join("<li>%s</li>" % _h(r) for r in reasons) + "</ul>"


def _html_head(headers, sortable=True):
    return '<table%s><thead><tr>%s</tr></thead><tbody>' % (
        ' class="sortable"' if sortable else "", "".join("<th>%s</th>" % _h(x) for x in headers))


def _html_table(headers, rows, sortable=True):
    out = [_html_head(headers, sortable)]
    for row in rows:
        out.append("<tr>" + "".join(row) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _td(value, raw=False, cls=None):
    body = value if raw else _h(value)
    return '<td%s>%s</td>' % (' class="%s"' % cls if cls else "", body)


_HTML_HOSTS_PER_CHUNK = 200


def _html_host_row(h):
    return "<tr>" + "".join([
        _td(_h(h["host"]) + _sim(h["simulated"]), raw=True), _td(_status(h["status"]), raw=True),
        _td(_provider_cell(h)), _td(_money(h["price_per_hour"]), cls="num"), _td(_models(h)),
        _td(_fmt_mem(h["memory_total_mib"] or None), cls="num"), _td(h["peak_bf16_tflops"], cls="num"),
        _td(_driver_text(h)), _td(h["source"]), _td(facts_time_text(h)), _td(_reasons_html(h["reasons"]), raw=True),
    ]) + "</tr>"


def _html_gpu_row(h, g, tests, driver):
    cells = _gpu_cells(h, g, tests, driver)
    row = [_td(_h(h["host"]) + _sim(h["simulated"]), raw=True), _td(_status(h["status"]), raw=True)]
    for i, c in enumerate(cells):
        if i >= len(_GPU_HEADERS):
            cls = "fail" if c.endswith("FAIL") else ("pass" if c.endswith("pass") else None)
            row.append(_td(c, cls=cls))
        elif i == 1 and g["lost"]:
            row.append(_td(c, cls="fail"))
        else:
            row.append(_td(c))
    return "<tr>" + "".join(row) + "</tr>"


def iter_html(data):
    """``to_html`` in chunks."""
    s = _as_summary(data)
    t = s["totals"]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        # Nothing may load, and only the sort script (allowed by its hash) may run: host-provided
        # text is escaped, and an injected script would not match the hash.
        '<meta http-equiv="Content-Security-Policy" content="%s">' % _csp(),
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>gpufleet report</title>", "<style>%s</style></head><body>" % _CSS,
        "<h1>gpufleet fleet report</h1>",
    ]
    if s.get("check_mode"):
        parts.append('<p class="banner" role="alert">%s</p>' % _h(CHECK_MODE_BANNER))
    parts += [
        '<p class="muted">Generated %s. %s</p>' % (_h(s["generated_at"]), _h(one_line(s))),
        "<h2>Fleet summary</h2>", '<table class="summary">',
    ]
    for label, value in _fleet_lines(s):
        parts.append("<tr><th>%s</th><td>%s</td></tr>" % (_h(label), _h(value)))
    parts.append("</table>")
    parts.append("<p>%s</p>" % " ".join(
        "%s&nbsp;%d" % (_status(k), t["hosts_by_status"].get(k, 0)) for k in STATUSES))

    parts.append("<h2>Hosts to return / fix (%d)</h2>" % len(s["bad_hosts"]))
    if s["bad_hosts"]:
        parts.append(_html_table(["host", "status", "provider", "action", "reasons"], [
            [_td(_h(b["host"]) + _sim(b["simulated"]), raw=True), _td(_status(b["status"]), raw=True),
             _td(_provider_cell(b)),
             _td(_h(b["action"]) + ('<br><span class="muted">%s</span>' % _h(b["return_action"])
                                    if b.get("return_action") else ""), raw=True),
             _td(_reasons_html(b["reasons"]), raw=True)]
            for b in s["bad_hosts"]]))
    else:
        parts.append("<p>None: every host is ok.</p>")

    drift = _drift_rows(s)
    if drift:
        parts.append("<h2>Version drift (%d)</h2>" % len(drift))
        parts.append('<p class="muted">Hosts whose driver or CUDA version differs from the fleet\'s usual one'
                     " (%s / %s); info, not a fault by itself.</p>" % (
                         _h(t.get("usual_driver_version")), _h(t.get("usual_cuda_driver_version"))))
        parts.append(_html_table(["host", "what", "version", "usual"], [[_td(c) for c in row] for row in drift]))

    parts.append("<h2>Hosts (%d)</h2>" % len(s["hosts"]))
    parts.append(_html_head(["host", "status", "provider", "$/h", "GPUs", "memory", "peak BF16 TFLOPS",
                             "driver / CUDA", "source", "facts read at", "reasons"]))
    yield "\n".join(parts) + "\n"
    parts = []
    for n, h in enumerate(s["hosts"], 1):
        parts.append(_html_host_row(h))
        if n % _HTML_HOSTS_PER_CHUNK == 0:
            yield "\n".join(parts) + "\n"
            parts = []
    parts.append("</tbody></table>")
    yield "\n".join(parts) + "\n"
    parts = []
    yield from _html_checklist(s)

    tests = _gate_tests(s)
    total = sum(len(h["gpus"]) for h in s["hosts"])
    if total:
        if total <= HTML_GPU_ROWS:
            pick = [(h, g) for h in s["hosts"] for g in h["gpus"]]
        else:  # GPUs of hosts that need attention first, then the rest, up to the cap
            pick = [(h, g) for h in s["hosts"] if h["status"] != "ok" for g in h["gpus"]][:HTML_GPU_ROWS]
            if len(pick) < HTML_GPU_ROWS:
                pick += [(h, g) for h in s["hosts"] if h["status"] == "ok"
                         for g in h["gpus"]][:HTML_GPU_ROWS - len(pick)]
        if len(pick) < total:
            parts.append("<h2>GPUs (%d of %d)</h2>" % (len(pick), total))
            parts.append('<p class="muted">This page lists %d of the %d GPUs, those of hosts that are not ok'
                         " first; fleet.csv, next to this page, has every GPU.</p>" % (len(pick), total))
        else:
            parts.append("<h2>GPUs (%d)</h2>" % total)
        parts.append(_html_head(["host", "status"] + _GPU_HEADERS + ["gate: %s" % x for x in tests]))
        drivers = {}
        for n, (h, g) in enumerate(pick, 1):
            key = id(h)
            if key not in drivers:
                drivers = {key: _driver_text(h)}
            parts.append(_html_gpu_row(h, g, tests, drivers[key]))
            if n % 1000 == 0:
                yield "\n".join(parts) + "\n"
                parts = []
        parts.append("</tbody></table>")

    doctors = [(h, f) for h in s["hosts"] for f in _l(_d(h["doctor"]).get("findings"))]
    if doctors:
        parts.append("<h2>Doctor findings</h2>")
        parts.append(_html_table(["host", "code", "severity", "remedy class", "meaning", "remedy"], [
            [_td(h["host"]), _td(f.get("code")), _td(f.get("severity")),
             _td(f.get("remedy_class") or ("fixable" if f.get("fixable") else None)),
             _td(f.get("meaning") or f.get("message")), _td(f.get("remedy"))] for h, f in doctors]))
    others = _gate_other_rows(s)
    if others:
        parts.append("<h2>Benchmark gate results not tied to a GPU (cpu mode)</h2>")
        parts.append(_html_table(_GATE_OTHER_HEADERS, [[_td(c) for c in row] for row in others]))
    remediations = [(h, _d(h["doctor"]).get("remediation")) for h in s["hosts"]]
    remediations = [(h, r) for h, r in remediations if isinstance(r, dict)]
    if remediations:
        parts.append("<h2>Remediation</h2>")
        parts.append(_html_table(_REMEDIATION_HEADERS, [
            [_td(h["host"])] + [_td(c) for c in _remediation_cells(r)] for h, r in remediations]))
    if s["warnings"]:
        parts.append("<h2>Warnings</h2>" + _reasons_html(s["warnings"]))
    parts.append("<script>%s</script>" % SORT_SCRIPT)
    parts.append("</body></html>")
    yield "\n".join(parts) + "\n"


_CHECK_CLS = {"fail": "fail", "ok": "pass", "unknown": "muted"}


def _html_checklist(s):
    listed, total = _checklist_hosts(s)
    if not listed:
        return
    parts = ["<h2>Renter's checklist</h2>", '<p class="muted">%s</p>' % _h(_CHECK_NOTE),
             _html_table(["item"] + list(CHECK_STATUSES), [[_td(c, cls=None if i == 0 else "num") for i, c in
                                                            enumerate(row)] for row in _check_count_rows(s)],
                         sortable=False)]
    if len(listed) < total:
        parts.append('<p class="muted">%d of %d hosts, those with a failed or warned item first; fleet.json has '
                     "every host.</p>" % (len(listed), total))
    parts.append(_html_head(["host", "status"] + [label for _unused, label in CHECK_ITEMS]))
    cache = {}  # (status, cell text) -> <td>: most cells repeat across hosts
    for n, h in enumerate(listed, 1):
        items = h.get("checklist") or _EMPTY
        cells = [_td(_h(h["host"]) + _sim(h["simulated"]), raw=True), _td(_status(h["status"]), raw=True)]
        for key, _unused in CHECK_ITEMS:
            st = (items.get(key) or _EMPTY).get("status") or "unknown"
            ck = (st, _check_cell(h, key))
            td = cache.get(ck)
            if td is None:
                td = _td(ck[1], cls=_CHECK_CLS.get(st))
                if len(cache) < 100000:
                    cache[ck] = td
            cells.append(td)
        parts.append("<tr>" + "".join(cells) + "</tr>")
        if n % _HTML_HOSTS_PER_CHUNK == 0:
            yield "\n".join(parts) + "\n"
            parts = []
    parts.append("</tbody></table>")
    rules = _capacity_rules()
    if rules:
        parts.append("<p>Capacity rules of thumb:</p>" + _reasons_html(rules))
    sec = _security_rows(listed)
    if sec:
        parts.append("<h2>Security findings (%d)</h2>" % len(sec))
        parts.append(_html_table(["host", "severity", "status", "finding", "fix gpufleet applies", "source"],
                                 [[_td(c) for c in row] for row in sec]))
    yield "\n".join(parts) + "\n"


def to_html(data):
    """One self-contained HTML page: inline CSS and one inline sort script allowed by its hash in the
    page's Content-Security-Policy; no external resources."""
    return "".join(iter_html(data))


# --------------------------------------------------------------------------- Prometheus
# One metric schema (docs/metrics.md): per-GPU series (labels gpu, uuid, name) belong to each host's
# exporter (gpufleet_gpu_*, roles/gpu_monitoring); this file holds fleet- and host-level series only,
# under names the exporter never writes (gpufleet_host_*, gpufleet_fleet_*, gpufleet_report_*), so one
# Prometheus holds one label set per name. Host-level series keep the file small: about 0.9 KiB per
# host, under 10 MiB at 10,000 hosts (scripts/bench-report prints it).
# (name, type, labels, help); labels are the whole label set of every sample of that name.
_METRICS = (
    ("gpufleet_host_up", "gauge", ("host",), "1 if the host was reached by the report playbook."),
    ("gpufleet_host_status", "gauge", ("host", "status"), "The host's current status as a label; always 1."),
    ("gpufleet_host_simulated", "gauge", ("host",), "1 if the host's GPU facts come from a simulation (test double)."),
    ("gpufleet_host_gpus", "gauge", ("host",), "GPUs reported by the host."),
    ("gpufleet_host_gpus_lost", "gauge", ("host",), "GPUs of the host that are lost (fallen off the bus)."),
    ("gpufleet_host_gpus_by_model", "gauge", ("host", "name"), "GPUs of the host by model name."),
    ("gpufleet_host_price_per_hour_dollars", "gauge", ("host",), "Rental price of the host per hour."),
    ("gpufleet_host_peak_bf16_tflops", "gauge", ("host",),
     "Vendor peak dense BF16 TFLOPS of the host's GPUs together."),
    ("gpufleet_host_health_findings", "gauge", ("host", "severity"),
     "Health findings of the host and its GPUs by severity (critical and warning always, info and unknown when > 0)."),
    ("gpufleet_host_version_drift", "gauge", ("host", "field"),
     "1 if the host's driver (field=driver_version) or CUDA driver version (field=cuda_driver_version)"
     " differs from the fleet's most common one."),
    ("gpufleet_host_gate_fraction_of_expected", "gauge", ("host", "test"),
     "Gate benchmark result of the host's weakest GPU as a fraction of the expected figure."),
    ("gpufleet_host_gate_passed", "gauge", ("host", "test"),
     "1 if every GPU of the host passed the gate test, 0 if one failed."),
    ("gpufleet_fleet_hosts", "gauge", ("status",), "Hosts in the fleet report by status."),
    ("gpufleet_fleet_gpus", "gauge", ("name",), "GPUs in the fleet by model name."),
    ("gpufleet_fleet_gpus_usable", "gauge", (), "GPUs that answer, on hosts whose status is ok or degraded."),
    ("gpufleet_fleet_price_per_hour_dollars", "gauge", (), "Rental price of the hosts with a known price, per hour."),
    ("gpufleet_fleet_dollars_per_peak_tflop_hour", "gauge", (),
     "Dollars per vendor-peak BF16 TFLOP-hour, over hosts with a price and a peak figure."),
    ("gpufleet_fleet_dollars_per_measured_tflop_hour", "gauge", (),
     "Dollars per measured (gate) BF16 TFLOP-hour, over hosts with a price and a measurement."),
    ("gpufleet_report_timestamp_seconds", "gauge", (), "When the fleet report was generated (Unix time)."),
)
PROMETHEUS_METRICS = {name: (kind, labels, text) for name, kind, labels, text in _METRICS}
_SEVERITIES = ("critical", "warning", "info", "unknown")


def prom_escape(value):
    """A label value escaped per the Prometheus text exposition format."""
    text = value if isinstance(value, str) else _text(value)
    if "\\" in text or '"' in text or "\n" in text:
        return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return text


def _prom_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _pv(value):
    """The sample text of ``value``, or None for no sample (null, NaN, infinite, text)."""
    if value is None:
        return None
    t = type(value)
    if t is int:
        return str(value)
    if t is float:
        return repr(value) if -_INF < value < _INF else None
    if t is bool:
        return "1" if value else "0"
    value = _num(value)
    return None if value is None else _prom_value(value)


def _timestamp(iso):
    try:
        return datetime.datetime.fromisoformat(str(iso)).timestamp()
    except (TypeError, ValueError):
        return None


def _drifting(s):
    return {(d["host"], d["field"]) for d in s["totals"].get("drift") or ()}


def _host_gate(h):
    """[(test, lowest fraction_of_peak or None, passed: True/False/None)] over the host's GPUs, by test."""
    tests = {}
    for g in h["gpus"]:
        for e in g["gate"]:
            low, passed = tests.get(e["test"], (None, None))
            frac = _num(e["fraction_of_peak"])
            if frac is not None and -_INF < frac < _INF and (low is None or frac < low):
                low = frac
            if e["passed"] is not None:
                passed = bool(e["passed"]) if passed is None else passed and bool(e["passed"])
            tests[e["test"]] = (low, passed)
    return [(test, low, passed) for test, (low, passed) in tests.items()]


def _prom_samples(s):
    """Every sample as (metric, [line]), in _METRICS order. A host name seen before (two result
    files for one host) is written once, the first one wins, so no series repeats. Each label value
    is escaped once per host, not once per sample."""
    out = {name: [] for name, _unused, _unused, _unused in _METRICS}
    t = s["totals"]
    drifting = _drifting(s)
    drift_fields = [field for field, _unused, usual in _DRIFT_FIELDS if t.get(usual) is not None]
    statuses = [(st, ',status="%s"' % st) for st in STATUSES]
    hosts_seen = set()
    up, status, simulated = out["gpufleet_host_up"], out["gpufleet_host_status"], out["gpufleet_host_simulated"]
    for h in s["hosts"]:
        hl = 'host="%s"' % prom_escape(h["host"])
        if hl in hosts_seen:
            continue
        hosts_seen.add(hl)
        up.append("gpufleet_host_up{%s} %d" % (hl, 1 if h["status"] != "unreachable" and h["reachable"] is not False
                                               else 0))
        # The current status only: one line per host, not one per status (the file's size at
        # 10,000 hosts); count by (status) or {status="failed"} read it.
        for st, sl in statuses:
            if h["status"] == st:
                status.append("gpufleet_host_status{%s%s} 1" % (hl, sl))
        simulated.append("gpufleet_host_simulated{%s} %d" % (hl, 1 if h["simulated"] else 0))

        def put(name, value, extra="", hl=hl):
            v = _pv(value)
            if v is not None:
                out[name].append("%s{%s%s} %s" % (name, hl, extra, v))

        put("gpufleet_host_gpus", h["gpu_count"])
        if h["gpus"]:
            put("gpufleet_host_gpus_lost", sum(1 for g in h["gpus"] if g["lost"]))
        models = {}
        for model, n in h["gpu_models"].items():
            models.setdefault(prom_escape(model), n)
        for model in sorted(models):
            put("gpufleet_host_gpus_by_model", models[model], ',name="%s"' % model)
        put("gpufleet_host_price_per_hour_dollars", h["price_per_hour"])
        put("gpufleet_host_peak_bf16_tflops", h["peak_bf16_tflops"])
        if h["gpus"] or h["findings"]:
            # critical and warning always (0 included); info and unknown only when there are some.
            found = [f.get("severity") for f in h["findings"]]
            for sev in _SEVERITIES:
                n = found.count(sev)
                if n or sev in ("critical", "warning"):
                    put("gpufleet_host_health_findings", n, ',severity="%s"' % sev)
        if h["gpus"]:
            for field in drift_fields:
                put("gpufleet_host_version_drift", 1 if (h["host"], field) in drifting else 0, ',field="%s"' % field)
        for test, low, passed in _host_gate(h):
            tl = ',test="%s"' % prom_escape(test)
            put("gpufleet_host_gate_fraction_of_expected", low, tl)
            put("gpufleet_host_gate_passed", passed, tl)

    def fleet(name, value, labels=""):
        v = _pv(value)
        if v is not None:
            out[name].append("%s{%s} %s" % (name, labels, v))

    for st in STATUSES:
        fleet("gpufleet_fleet_hosts", t["hosts_by_status"].get(st, 0), 'status="%s"' % st)
    models = {}
    for model, n in (t.get("gpus_by_model") or {}).items():
        models.setdefault(prom_escape(model), n)
    for model in sorted(models):
        fleet("gpufleet_fleet_gpus", models[model], 'name="%s"' % model)
    fleet("gpufleet_fleet_gpus_usable", t.get("gpus_usable"))
    if t.get("priced_hosts"):
        fleet("gpufleet_fleet_price_per_hour_dollars", t.get("price_per_hour"))
    fleet("gpufleet_fleet_dollars_per_peak_tflop_hour", t.get("usd_per_peak_tflop_hour"))
    fleet("gpufleet_fleet_dollars_per_measured_tflop_hour", t.get("usd_per_measured_tflop_hour"))
    fleet("gpufleet_report_timestamp_seconds", _timestamp(s["generated_at"]))
    for name, _unused, _unused, _unused in _METRICS:
        yield name, out[name]


_PROM_LINES_PER_CHUNK = 8192


def iter_prometheus(data):
    """``to_prometheus`` in chunks."""
    s = _as_summary(data)
    for name, lines in _prom_samples(s):
        if not lines:
            continue
        kind, _unused, help_text = PROMETHEUS_METRICS[name]
        yield "# HELP %s %s\n# TYPE %s %s\n" % (name, help_text, name, kind)
        for start in range(0, len(lines), _PROM_LINES_PER_CHUNK):
            yield "\n".join(lines[start:start + _PROM_LINES_PER_CHUNK]) + "\n"


def to_prometheus(data):
    """node_exporter textfile-collector text: HELP/TYPE per metric, then its samples; no duplicates."""
    return "".join(iter_prometheus(data))


# --------------------------------------------------------------------------- writing
def _write_atomic(path, chunks):
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="", buffering=1 << 20) as fh:
            if isinstance(chunks, str):
                chunks = (chunks,)
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # noqa: S103 - a report for people and node_exporter; holds no secrets
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_RENDERERS = {"html": to_html, "json": to_json, "csv": to_csv, "markdown": to_markdown, "prometheus": to_prometheus}
_CHUNKED = {"html": iter_html, "json": iter_json, "csv": iter_csv, "markdown": iter_markdown,
            "prometheus": iter_prometheus}
# The two workers' shares, about even in time on a large fleet (see docs/benchmarks.md).
_GROUPS = (("prometheus", "csv"), ("json", "markdown", "html"))
# Fleets with fewer GPU rows than this render in the calling process: a fork costs more than it saves.
PARALLEL_MIN_ROWS = 5000


class ReportWriteError(RuntimeError):
    """A rendering worker process failed (its error text is the message)."""


def _write_group(summary, outdir, kinds):
    for kind in kinds:
        _write_atomic(os.path.join(outdir, OUTPUT_FILES[kind]), _CHUNKED[kind](summary))


def _worker(summary, outdir, kinds, conn):
    try:
        _write_group(summary, outdir, kinds)
    except BaseException as exc:  # report it to the parent, whatever it is
        try:
            conn.send((type(exc).__name__, getattr(exc, "errno", None), getattr(exc, "strerror", None) or str(exc),
                       getattr(exc, "filename", None)))
        finally:
            conn.close()
        os._exit(1)
    conn.send(None)
    conn.close()


def _write_parallel(summary, outdir):
    ctx = multiprocessing.get_context("fork")
    procs = []  # the GC is off here (write_all): the children inherit that and never walk the summary
    try:
        for kinds in _GROUPS:
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(summary, outdir, kinds, send), daemon=True)
            proc.start()
            send.close()
            procs.append((kinds, proc, recv))
        errors = []
        for kinds, proc, recv in procs:
            try:
                message = recv.recv()
            except EOFError:
                message = ("died", None, "no answer", None)
            proc.join()
            recv.close()
            if message is not None or proc.exitcode != 0:
                errors.append((kinds, message or ("exit", None, "exit code %s" % proc.exitcode, None)))
    finally:
        for _unused, proc, _unused in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
    if errors:
        kinds, (name, errno, text, filename) = errors[0]
        if errno is not None:
            raise OSError(errno, text, filename) if filename else OSError(errno, text)
        raise ReportWriteError("rendering %s failed: %s: %s" % (", ".join(OUTPUT_FILES[k] for k in kinds), name, text))


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _can_fork():
    # A daemonic process (a multiprocessing.Pool worker, say) may not start children.
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def _parallel_ok(summary, workers):
    if workers is not None:
        return workers >= 2 and _can_fork()
    rows = len(summary["hosts"]) + sum(len(h["gpus"]) for h in summary["hosts"])
    return rows >= PARALLEL_MIN_ROWS and _cpus() >= 2 and _can_fork()


def write_all(results, outdir, now=None, include_results=False, workers=None, check_mode=False):
    """Write fleet.html, fleet.json, fleet.csv, fleet.md and gpufleet.prom into ``outdir`` (created if needed).

    ``results``: a summary (from ``summarize``) or raw results (summarized here; ``include_results``
    then keeps them in fleet.json). Each file is written in chunks to a temporary file in ``outdir``
    and moved into place with ``os.replace``, so a reader (a browser, node_exporter) never sees a
    half-written file. ``workers``: None picks two forked worker processes for a large fleet on a
    machine with two or more CPUs, one process otherwise; 1 forces one, 2 forces two. A worker's
    failure is raised here (``OSError`` for an I/O error, else ``ReportWriteError``). Returns
    ``{"html": path, "json": path, "csv": path, "markdown": path, "prometheus": path}``.
    ``check_mode`` is used when ``results`` are raw results (see ``summarize``).
    """
    outdir = os.fspath(outdir)
    os.makedirs(outdir, exist_ok=True)
    if isinstance(results, dict) and "hosts" in results:
        summary = results
    else:
        summary = summarize(results, now=now, include_results=include_results, check_mode=check_mode)
    with _gc_paused():
        if _parallel_ok(summary, workers):
            _write_parallel(summary, outdir)
        else:
            _write_group(summary, outdir, OUTPUT_FILES)
    return {kind: os.path.join(outdir, filename) for kind, filename in OUTPUT_FILES.items()}
