"""The fleet-wide report: per-host result files in, one summary and five renderings out.

Input is a folder of JSON files, one per inventory host (``<inventory_hostname>.json``), written
by ``playbooks/report.yml``::

    {"host", "reachable", "failed", "reason", "provider", "price_per_hour",
     "gpu": <gpu facts> | null, "gate": [..] | null, "doctor": {..} | null, "collected_at"}

``load_results`` reads them (and lists inventory hosts that left no file as unreachable),
``summarize`` turns them into a status per host, fleet totals and the list of hosts to return
or fix, and ``to_json`` / ``to_csv`` / ``to_markdown`` / ``to_html`` / ``to_prometheus`` render
that. ``write_all`` writes all five files atomically.

Every value in the input may be missing or null; nothing here raises on partial data. All
host-provided text is escaped for the format it lands in (HTML, Markdown, CSV formulas,
Prometheus label values). Plain Python >= 3.8, stdlib only.
"""

import csv
import datetime
import html
import io
import json
import math
import os
import tempfile

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

ACTION_RETURN = "return to provider"
ACTION_FIX = "fix here"
ACTION_CHECK = "check access / rerun"

OUTPUT_FILES = {
    "html": "fleet.html",
    "json": "fleet.json",
    "csv": "fleet.csv",
    "markdown": "fleet.md",
    "prometheus": "gpufleet.prom",
}

CSV_COLUMNS = (
    "host", "host_status", "simulated", "provider", "price_per_hour", "source", "driver_version",
    "cuda_driver_version", "gpu_index", "name", "uuid", "serial", "pci_bus_id", "memory_total_mib",
    "memory_used_mib", "compute_capability", "pcie_gen_current", "pcie_gen_max", "pcie_width_current",
    "pcie_width_max", "temperature_c", "power_draw_w", "power_limit_w", "throttle_reasons", "persistence_mode",
    "mig_mode", "ecc_mode", "ecc_volatile_corrected", "ecc_volatile_uncorrected", "ecc_aggregate_corrected",
    "ecc_aggregate_uncorrected", "retired_pages_pending", "remapped_rows_uncorrectable", "remapped_rows_pending",
    "remapped_rows_failure", "nvlink_active", "nvlink_total", "lost", "spec_key", "peak_bf16_tflops",
    "findings", "gate", "gate_passed", "host_reasons",
)


class ReportInputError(Exception):
    """The results folder cannot be used (missing, not a folder, unreadable)."""


# --------------------------------------------------------------------------- small helpers
def _d(value):
    """``value`` if it is a dict, else an empty dict (null / wrong type tolerated)."""
    return value if isinstance(value, dict) else {}


def _l(value):
    """``value`` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


def _num(value):
    """A finite int/float, or None (bools, strings, NaN and null are not numbers here)."""
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
def _placeholder(host, reason, **extra):
    result = {
        "host": host, "reachable": False, "failed": False, "reason": reason, "provider": None,
        "price_per_hour": None, "gpu": None, "gate": None, "doctor": None, "collected_at": None,
    }
    result.update(extra)
    return result


def load_results(folder, inventory_hosts=None):
    """Read every ``*.json`` result file in ``folder``; add a placeholder for each inventory host without one.

    ``inventory_hosts``: None, a list of host names, or a comma-separated string. Returns a list of
    result dicts sorted by host name. A file that is not valid JSON (or not an object) becomes a
    result with ``load_error`` set, never an exception. Raises ``ReportInputError`` when ``folder``
    is missing or not a readable folder.
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ReportInputError("results folder %r does not exist or is not a folder" % folder)
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise ReportInputError("cannot list results folder %r: %s" % (folder, exc)) from exc

    results = {}
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        stem = name[:-len(".json")]
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                data = json.load(fh)
        except (OSError, ValueError) as exc:
            results[stem] = _placeholder(stem, None, reachable=None, load_error="%s: %s" % (name, exc))
            continue
        if not isinstance(data, dict):
            results[stem] = _placeholder(stem, None, reachable=None,
                                         load_error="%s: expected a JSON object, got %s" % (name, type(data).__name__))
            continue
        data = dict(data)
        if not isinstance(data.get("host"), str) or not data["host"]:
            data["host"] = stem
        data["_file"] = name
        results[stem] = data

    if inventory_hosts is not None:
        if isinstance(inventory_hosts, str):
            inventory_hosts = inventory_hosts.split(",")
        known = set(results) | {r.get("host") for r in results.values()}
        for host in inventory_hosts:
            host = str(host).strip()
            if host and host not in known:
                results[host] = _placeholder(host, NOT_REACHED, missing=True)
                known.add(host)
        inventory = {str(h).strip() for h in inventory_hosts}
        for stem, result in results.items():
            if stem not in inventory and result.get("host") not in inventory:
                result["not_in_inventory"] = True
    return sorted(results.values(), key=lambda r: str(r.get("host")))


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
    if result.get("simulated") is True or facts.get("simulated") is True:
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
    tflops = [e for e in entries if _is_tflops(e) and _num(e.get("measured")) is not None]
    bf16 = [e for e in tflops if "bf16" in _text(e.get("test")).lower()]
    pick = bf16 or tflops
    return max(e["measured"] for e in pick) if pick else None


def _gpu_row(host, gpu, gate_entries):
    pcie, ecc = _d(gpu.get("pcie")), _d(gpu.get("ecc"))
    rows, pages, nvlink = _d(gpu.get("remapped_rows")), _d(gpu.get("retired_pages")), _d(gpu.get("nvlink"))
    clocks = _d(gpu.get("clocks"))
    spec = _spec(gpu)
    throttle = [_text(t) for t in _l(gpu.get("throttle_reasons"))]
    lost = gpu.get("lost") is True
    peak = None if lost else _num(spec.get("bf16_tflops"))
    findings = [_finding_text(f) for f in host["findings"] if f.get("gpu_index") == gpu.get("index")
                and f.get("gpu_index") is not None]
    gate = []
    for e in gate_entries:
        gate.append({
            "test": _text(e.get("test")), "measured": _num(e.get("measured")), "expected": _num(e.get("expected")),
            "unit": _text(e.get("unit")), "fraction_of_peak": _num(e.get("fraction_of_peak")),
            "passed": e.get("passed") if isinstance(e.get("passed"), bool) else None, "why": e.get("why"),
        })
    passed = [g["passed"] for g in gate if g["passed"] is not None]
    return {
        "index": gpu.get("index"), "name": gpu.get("name"), "uuid": gpu.get("uuid"), "serial": gpu.get("serial"),
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
        "peak_bf16_tflops": peak, "measured_tflops": _measured_tflops(gate_entries),
        "findings": findings, "gate": gate, "gate_passed": (all(passed) if passed else None),
    }


def _escalate(status, to):
    if status in _RANK and _RANK[to] > _RANK[status]:
        return to
    return status


def _host_summary(result):
    entry = _host_entry(result)
    entry["action"] = _action(entry)
    return entry


def _host_entry(result):
    result = dict(result)
    for key in ("reachable", "failed", "simulated"):
        if key in result and not isinstance(result[key], bool) and result[key] is not None:
            result[key] = _flag(result[key])
    host = str(result.get("host"))
    facts = _d(result.get("gpu"))
    entry = {
        "host": host, "status": "unknown", "simulated": _is_simulated(result), "reasons": [],
        "provider": result.get("provider"), "price_per_hour": _price(result.get("price_per_hour")),
        "reachable": result.get("reachable"), "collected_at": result.get("collected_at"),
        "source": facts.get("source"), "driver_version": facts.get("driver_version"),
        "cuda_driver_version": facts.get("cuda_driver_version"), "error_code": facts.get("error_code"),
        "gpu_count": 0, "gpu_models": {}, "memory_total_mib": 0, "peak_bf16_tflops": None,
        "measured_tflops": None, "findings": [], "gpus": [], "gate": isinstance(result.get("gate"), list),
        "doctor": None, "action": None, "warnings": [],
    }
    if result.get("not_in_inventory"):
        entry["warnings"].append("result file for a host that is not in the given inventory")
    if result.get("load_error"):
        entry["reasons"].append("result file unreadable: %s" % result["load_error"])
        return entry
    if result.get("reachable") is False:
        entry["status"] = "unreachable"
        entry["reasons"].append(_text(result.get("reason")) or "unreachable (no reason given)")
        return entry
    if result.get("failed") is True:
        entry["status"] = "failed"
        entry["reasons"].append("playbook failed: %s" % (_text(result.get("reason")) or "no reason given"))
    elif result.get("reachable") is not True and not facts:
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
    for g in gpus:
        entry["gpus"].append(_gpu_row(entry, g, gate_by_index.get(g.get("index"), [])))
    count = _num(facts.get("gpu_count"))
    entry["gpu_count"] = len(gpus) if count is None else max(int(count), len(gpus))
    for row in entry["gpus"]:
        name = row["name"] or "unknown GPU"
        entry["gpu_models"][name] = entry["gpu_models"].get(name, 0) + 1
        entry["memory_total_mib"] += row["memory_total_mib"] or 0
    peaks = [r["peak_bf16_tflops"] for r in entry["gpus"] if r["peak_bf16_tflops"] is not None]
    entry["peak_bf16_tflops"] = _round(sum(peaks), 1) if peaks else None
    measured = [r["measured_tflops"] for r in entry["gpus"] if r["measured_tflops"] is not None]
    entry["measured_tflops"] = _round(sum(measured), 1) if measured else None

    expected = _price(result.get("expected_gpu_count"))
    if (expected is not None and facts and not facts.get("error") and entry["gpu_count"] < expected
            and not any(f.get("code") == "gpu_count_low" for f in findings)):
        findings = findings + [{"code": "gpu_count_low", "severity": "critical", "gpu_index": None,
                                "message": "%d GPU(s) visible, %d expected" % (entry["gpu_count"], expected)}]
        entry["findings"] = findings
        if health_status in ("ok", "degraded"):
            health_status = "failed"

    if entry["status"] == "failed":
        pass
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
    for row in entry["gpus"]:
        for g in row["gate"]:
            if g["passed"] is False:
                entry["status"] = _escalate(entry["status"], "degraded")
                frac = "" if g["fraction_of_peak"] is None else " (%.0f%% of peak)" % (100 * g["fraction_of_peak"])
                entry["reasons"].append("GPU %s: gate %s failed%s%s" % (
                    row["index"], g["test"], frac, ": %s" % _text(g["why"]) if g["why"] else ""))

    doctor = result.get("doctor")
    if isinstance(doctor, dict):
        dfind = [f for f in _l(doctor.get("findings")) if isinstance(f, dict)]
        entry["doctor"] = {"status": doctor.get("status"), "findings": dfind}
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
                    _text(f.get("message") or f.get("code")),
                    " (remedy: %s)" % _text(f.get("remedy")) if f.get("remedy") else ""))
    return entry


def _action(entry):
    status = entry["status"]
    if status == "ok":
        return None
    if status in ("unreachable", "unknown"):
        return ACTION_CHECK
    if status == "no-gpu":
        return ACTION_RETURN
    codes = {f.get("code") for f in entry["findings"] if f.get("severity") in _REASON_SEVERITIES}
    if codes & PROVIDER_CODES or any(str(c).startswith("xid_") for c in codes):
        return ACTION_RETURN
    if any(g["passed"] is False for row in entry["gpus"] for g in row["gate"]):
        return ACTION_RETURN
    doctor = _d(entry.get("doctor"))
    if any(f.get("fixable") is False for f in _l(doctor.get("findings"))):
        return ACTION_RETURN
    return ACTION_FIX


def summarize(results, now=None):
    """Fleet summary from ``load_results`` output: per-host status and reasons, totals, bad hosts.

    ``now``: a datetime (or text) for ``generated_at``; default: the current UTC time.
    """
    results = [r for r in _l(results) if isinstance(r, dict)]
    hosts = []
    for r in results:
        try:
            hosts.append(_host_summary(r))
        except Exception as exc:  # defensive: one odd result must not sink the fleet report
            hosts.append({
                "host": str(r.get("host")), "status": "unknown", "simulated": False,
                "reasons": ["report could not read this result: %r" % exc], "provider": r.get("provider"),
                "price_per_hour": _num(r.get("price_per_hour")), "reachable": r.get("reachable"),
                "collected_at": r.get("collected_at"), "source": None, "driver_version": None,
                "cuda_driver_version": None, "error_code": None, "gpu_count": 0, "gpu_models": {},
                "memory_total_mib": 0, "peak_bf16_tflops": None, "measured_tflops": None, "findings": [],
                "gpus": [], "gate": False, "doctor": None, "action": ACTION_CHECK, "warnings": [],
            })
    hosts.sort(key=lambda h: h["host"])

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
        "gpus_by_model": dict(sorted(by_model.items())),
        "gpu_memory_total_gib": round(mem_mib / 1024.0, 1),
        "peak_bf16_tflops": round(peak, 1),
        "price_per_hour": round(price_total, 4),
        "priced_hosts": priced_hosts,
        # $ per TFLOP-hour over the hosts where both the price and the figure are known.
        "usd_per_peak_tflop_hour": round(peak_price / peak_tflops, 6) if peak_tflops else None,
        "measured_tflops": round(meas_tflops, 1) if meas_tflops else None,
        "usd_per_measured_tflop_hour": round(meas_price / meas_tflops, 6) if meas_tflops else None,
    }
    bad = [{"host": h["host"], "status": h["status"], "provider": h["provider"], "action": h["action"],
            "reasons": list(h["reasons"]), "simulated": h["simulated"]}
           for h in hosts if h["status"] != "ok"]
    bad.sort(key=lambda b: (_BAD_ORDER.get(b["status"], 9), b["host"]))
    warnings = ["%s: %s" % (h["host"], w) for h in hosts for w in h["warnings"]]
    return {
        "schema": SCHEMA, "generated_at": _now_iso(now), "totals": totals, "bad_hosts": bad,
        "hosts": hosts, "warnings": warnings, "results": results,
    }


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


def _json_text(summary):
    # json's C encoder only runs without ``indent``: indenting the whole report through the pure
    # Python encoder took ~70% of write_all on a large fleet. So the top level is laid out by hand,
    # with one compact line per element of each list (one host, one result, ...).
    encode = json.JSONEncoder(sort_keys=True, default=str, allow_nan=False).encode
    parts = []
    for key in sorted(summary, key=str):
        value = summary[key]
        if isinstance(value, (list, tuple)) and value:
            text = "[\n" + ",\n".join("    " + encode(v) for v in value) + "\n  ]"
        else:
            text = json.dumps(value, indent=2, sort_keys=True, default=str, allow_nan=False).replace("\n", "\n  ")
        parts.append("  %s: %s" % (encode(str(key)), text))
    return "{\n" + ",\n".join(parts) + "\n}\n"


def to_json(data):
    """The summary (plus the raw results under ``results``) as JSON text: one line per host / result."""
    summary = _as_summary(data)
    try:
        return _json_text(summary)
    except (TypeError, ValueError):  # NaN/Infinity or mixed non-text keys in host-provided values
        return _json_text(_json_safe(summary))


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


def csv_rows(data):
    """Rows (dicts keyed by ``CSV_COLUMNS``): one per GPU, one per host without GPU details."""
    s = _as_summary(data)
    rows = []
    for h in s["hosts"]:
        base = {
            "host": h["host"], "host_status": h["status"], "simulated": h["simulated"], "provider": h["provider"],
            "price_per_hour": h["price_per_hour"], "source": h["source"], "driver_version": h["driver_version"],
            "cuda_driver_version": h["cuda_driver_version"], "host_reasons": "; ".join(h["reasons"]),
        }
        if not h["gpus"]:
            rows.append(dict(base))
            continue
        for g in h["gpus"]:
            row = dict(base)
            for col in CSV_COLUMNS:
                if col in row:
                    continue
                if col == "gpu_index":
                    row[col] = g["index"]
                elif col == "throttle_reasons":
                    row[col] = ";".join(g["throttle_reasons"])
                elif col == "findings":
                    row[col] = "; ".join(g["findings"])
                elif col == "gate":
                    row[col] = _gate_text(g["gate"])
                else:
                    row[col] = g.get(col)
            rows.append(row)
    return rows


def to_csv(data):
    """CSV text with a header row (``CSV_COLUMNS``): one row per GPU plus one per host without GPUs."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in csv_rows(data):
        writer.writerow({k: _csv_cell(row.get(k)) for k in CSV_COLUMNS})
    return buf.getvalue()


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


def _gpu_cells(h, g, tests):
    name = _text(g["name"]) or "unknown GPU"
    if g["lost"]:
        name += " (LOST)"
    return [
        _text(g["index"]), name, _fmt_mem(g["memory_total_mib"]), _text(g["compute_capability"]),
        "%s / %s" % (_text(h["driver_version"]) or "?", _text(h["cuda_driver_version"]) or "?"),
        _pair(g["pcie_gen_current"], g["pcie_gen_max"], "gen "),
        _pair(g["pcie_width_current"], g["pcie_width_max"], "x"),
        "" if g["temperature_c"] is None else "%s C" % _text(g["temperature_c"]), _power(g),
        ", ".join(g["throttle_reasons"]), _ecc(g), "; ".join(g["findings"]),
    ] + [_gate_cell(g, t) for t in tests]


_GPU_HEADERS = ["GPU", "model", "memory", "CC", "driver / CUDA", "PCIe gen cur/max", "PCIe width cur/max",
                "temp", "power/limit", "throttle", "ECC", "health findings"]


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
    ]


# --------------------------------------------------------------------------- Markdown
def _md(value):
    text = html.escape(_text(value), quote=False)
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    return " ".join(text.split())


def _md_table(headers, rows):
    out = ["| " + " | ".join(_md(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        out.append("| " + " | ".join(_md(c) for c in row) + " |")
    return out


def to_markdown(data):
    """The report as Markdown: fleet summary, hosts to return / fix, hosts, GPUs."""
    s = _as_summary(data)
    out = ["# gpufleet report", "", "Generated %s." % _md(s["generated_at"]), "", "## Fleet", ""]
    out += _md_table(["", ""], _fleet_lines(s))
    out += ["", "## Hosts to return / fix", ""]
    if s["bad_hosts"]:
        out += _md_table(["host", "status", "provider", "action", "reasons"], [
            [b["host"] + (" (simulated)" if b["simulated"] else ""), b["status"], b["provider"], b["action"],
             "; ".join(b["reasons"])] for b in s["bad_hosts"]])
    else:
        out.append("None: every host is ok.")
    out += ["", "## Hosts", ""]
    out += _md_table(["host", "status", "provider", "$/h", "GPUs", "driver / CUDA", "collected", "reasons"], [
        [h["host"] + (" (simulated)" if h["simulated"] else ""), h["status"], h["provider"],
         _money(h["price_per_hour"]), _models(h), "%s / %s" % (_text(h["driver_version"]) or "?",
                                                                 _text(h["cuda_driver_version"]) or "?"),
         h["collected_at"], "; ".join(h["reasons"])] for h in s["hosts"]])
    tests = _gate_tests(s)
    rows = [[h["host"]] + _gpu_cells(h, g, tests) for h in s["hosts"] for g in h["gpus"]]
    if rows:
        out += ["", "## GPUs", ""]
        out += _md_table(["host"] + _GPU_HEADERS + ["gate %s" % t for t in tests], rows)
    if s["warnings"]:
        out += ["", "## Warnings", ""] + ["- %s" % _md(w) for w in s["warnings"]]
    return "\n".join(out) + "\n"


def _models(h):
    if not h["gpu_models"]:
        return "%d" % h["gpu_count"] if h["gpu_count"] else "none"
    return ", ".join("%d x %s" % (n, name) for name, n in sorted(h["gpu_models"].items()))


# --------------------------------------------------------------------------- HTML
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#1d1d1f;background:#fff}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.6em 0 .5em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin-bottom:1em}
th,td{border:1px solid #d0d0d0;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;white-space:nowrap}
.st{font-weight:600;padding:.1em .45em;border-radius:.3em;white-space:nowrap}
.st-ok{background:#d7f5dd;color:#14532d}.st-degraded{background:#fff1c2;color:#713f12}
.st-failed{background:#ffd6d6;color:#7f1d1d}.st-unreachable{background:#e7d6d6;color:#4a1d1d}
.st-no-gpu{background:#ead9ff;color:#3b1a6b}.st-unknown{background:#e5e5e5;color:#333}
.sim{background:#dbeafe;color:#1e3a8a;font-size:.8em;padding:.05em .4em;border-radius:.3em;margin-left:.4em}
.fail{color:#b91c1c;font-weight:600}.pass{color:#15803d}.muted{color:#777}
ul.r{margin:0;padding-left:1.1em}.summary th{width:14em}
"""


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


def _html_table(headers, rows, classes=None):
    out = ["<table>", "<tr>" + "".join("<th>%s</th>" % _h(x) for x in headers) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _td(value, raw=False, cls=None):
    body = value if raw else _h(value)
    return '<td%s>%s</td>' % (' class="%s"' % cls if cls else "", body)


def to_html(data):
    """One self-contained HTML page (inline CSS, no scripts, no external resources)."""
    s = _as_summary(data)
    t = s["totals"]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        # Nothing may load or run: host-provided text is escaped, and the page forbids scripts anyway.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>gpufleet report</title>", "<style>%s</style></head><body>" % _CSS,
        "<h1>gpufleet fleet report</h1>",
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
             _td(b["provider"]), _td(b["action"]), _td(_reasons_html(b["reasons"]), raw=True)]
            for b in s["bad_hosts"]]))
    else:
        parts.append("<p>None: every host is ok.</p>")

    parts.append("<h2>Hosts (%d)</h2>" % len(s["hosts"]))
    parts.append(_html_table(
        ["host", "status", "provider", "$/h", "GPUs", "memory", "peak BF16 TFLOPS", "driver / CUDA", "source",
         "collected", "reasons"],
        [[_td(_h(h["host"]) + _sim(h["simulated"]), raw=True), _td(_status(h["status"]), raw=True),
          _td(h["provider"]), _td(_money(h["price_per_hour"]), cls="num"), _td(_models(h)),
          _td(_fmt_mem(h["memory_total_mib"] or None), cls="num"), _td(h["peak_bf16_tflops"], cls="num"),
          _td("%s / %s" % (_text(h["driver_version"]) or "?", _text(h["cuda_driver_version"]) or "?")),
          _td(h["source"]), _td(h["collected_at"]), _td(_reasons_html(h["reasons"]), raw=True)]
         for h in s["hosts"]]))

    tests = _gate_tests(s)
    gpu_rows = []
    for h in s["hosts"]:
        for g in h["gpus"]:
            cells = _gpu_cells(h, g, tests)
            row = [_td(_h(h["host"]) + _sim(h["simulated"]), raw=True), _td(_status(h["status"]), raw=True)]
            for i, c in enumerate(cells):
                if i >= len(_GPU_HEADERS):
                    cls = "fail" if c.endswith("FAIL") else ("pass" if c.endswith("pass") else None)
                    row.append(_td(c, cls=cls))
                elif i == 1 and g["lost"]:
                    row.append(_td(c, cls="fail"))
                else:
                    row.append(_td(c))
            gpu_rows.append(row)
    if gpu_rows:
        parts.append("<h2>GPUs (%d)</h2>" % len(gpu_rows))
        parts.append(_html_table(["host", "status"] + _GPU_HEADERS + ["gate: %s" % x for x in tests], gpu_rows))

    doctors = [(h, f) for h in s["hosts"] for f in _l(_d(h["doctor"]).get("findings"))]
    if doctors:
        parts.append("<h2>Doctor findings</h2>")
        parts.append(_html_table(["host", "code", "severity", "fixable", "message", "remedy"], [
            [_td(h["host"]), _td(f.get("code")), _td(f.get("severity")), _td(f.get("fixable")),
             _td(f.get("message")), _td(f.get("remedy"))] for h, f in doctors]))
    if s["warnings"]:
        parts.append("<h2>Warnings</h2>" + _reasons_html(s["warnings"]))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------- Prometheus
_METRICS = (
    ("gpufleet_host_up", "gauge", "1 if the host was reached by the report playbook."),
    ("gpufleet_host_status", "gauge", "1 for the host's current status, 0 for the others."),
    ("gpufleet_host_simulated", "gauge", "1 if the host's GPU facts come from a simulation (test double)."),
    ("gpufleet_host_gpus", "gauge", "GPUs reported by the host."),
    ("gpufleet_host_price_per_hour_dollars", "gauge", "Rental price of the host per hour."),
    ("gpufleet_host_health_findings", "gauge", "Host-level health findings (not tied to one GPU) by severity."),
    ("gpufleet_gpu_info", "gauge", "GPU identity; always 1."),
    ("gpufleet_gpu_memory_total_bytes", "gauge", "Total GPU memory in bytes."),
    ("gpufleet_gpu_temperature_celsius", "gauge", "GPU temperature."),
    ("gpufleet_gpu_power_watts", "gauge", "GPU power draw."),
    ("gpufleet_gpu_power_limit_watts", "gauge", "GPU enforced power limit."),
    ("gpufleet_gpu_pcie_link_width", "gauge", "PCIe link width (lanes), current and max."),
    ("gpufleet_gpu_pcie_link_generation", "gauge", "PCIe link generation, current and max."),
    ("gpufleet_gpu_ecc_errors_total", "counter", "ECC errors by kind (corrected/uncorrected) and scope."),
    ("gpufleet_gpu_lost", "gauge", "1 if the GPU is lost (fallen off the bus)."),
    ("gpufleet_gpu_health_findings", "gauge", "Health findings for the GPU by severity."),
    ("gpufleet_gpu_peak_bf16_tflops", "gauge", "Vendor peak dense BF16 TFLOPS of the GPU model."),
    ("gpufleet_gate_fraction_of_peak", "gauge", "Gate benchmark result as a fraction of the expected figure."),
    ("gpufleet_gate_passed", "gauge", "1 if the gate test passed, 0 if it failed."),
    ("gpufleet_fleet_hosts", "gauge", "Hosts in the fleet report by status."),
    ("gpufleet_report_timestamp_seconds", "gauge", "When the fleet report was generated (Unix time)."),
)
_SEVERITIES = ("critical", "warning", "info", "unknown")


def prom_escape(value):
    """A label value escaped per the Prometheus text exposition format."""
    return _text(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _prom_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _timestamp(iso):
    try:
        return datetime.datetime.fromisoformat(str(iso)).timestamp()
    except (TypeError, ValueError):
        return None


def to_prometheus(data):
    """node_exporter textfile-collector text: HELP/TYPE per metric, then its samples; no duplicates."""
    s = _as_summary(data)
    samples = {name: [] for name, _, _ in _METRICS}
    seen = set()

    def add(name, labels, value):
        value = _num(value) if not isinstance(value, bool) else value
        if value is None:
            return
        label_text = ",".join('%s="%s"' % (k, prom_escape(v)) for k, v in labels)
        key = (name, label_text)
        if key in seen:
            return
        seen.add(key)
        samples[name].append("%s{%s} %s" % (name, label_text, _prom_value(value)))

    for h in s["hosts"]:
        host = (("host", h["host"]),)
        add("gpufleet_host_up", host, 1 if h["status"] != "unreachable" and h["reachable"] is not False else 0)
        for st in STATUSES:
            add("gpufleet_host_status", host + (("status", st),), 1 if h["status"] == st else 0)
        add("gpufleet_host_simulated", host, 1 if h["simulated"] else 0)
        add("gpufleet_host_gpus", host, h["gpu_count"])
        add("gpufleet_host_price_per_hour_dollars", host, h["price_per_hour"])
        host_findings = [f for f in h["findings"] if f.get("gpu_index") is None]
        if h["gpus"] or host_findings:
            for sev in _SEVERITIES:
                add("gpufleet_host_health_findings", host + (("severity", sev),),
                    sum(1 for f in host_findings if f.get("severity") == sev))
        for g in h["gpus"]:
            gl = host + (("index", g["index"]),)
            add("gpufleet_gpu_info", gl + (("uuid", g["uuid"]), ("name", g["name"]), ("driver", h["driver_version"])),
                1)
            if g["memory_total_mib"] is not None:
                add("gpufleet_gpu_memory_total_bytes", gl, int(g["memory_total_mib"] * 1024 * 1024))
            add("gpufleet_gpu_temperature_celsius", gl, g["temperature_c"])
            add("gpufleet_gpu_power_watts", gl, g["power_draw_w"])
            add("gpufleet_gpu_power_limit_watts", gl, g["power_limit_w"])
            add("gpufleet_gpu_pcie_link_width", gl + (("kind", "current"),), g["pcie_width_current"])
            add("gpufleet_gpu_pcie_link_width", gl + (("kind", "max"),), g["pcie_width_max"])
            add("gpufleet_gpu_pcie_link_generation", gl + (("kind", "current"),), g["pcie_gen_current"])
            add("gpufleet_gpu_pcie_link_generation", gl + (("kind", "max"),), g["pcie_gen_max"])
            for kind in ("corrected", "uncorrected"):
                for scope in ("volatile", "aggregate"):
                    add("gpufleet_gpu_ecc_errors_total", gl + (("kind", kind), ("scope", scope)),
                        g["ecc_%s_%s" % (scope, kind)])
            add("gpufleet_gpu_lost", gl, 1 if g["lost"] else 0)
            mine = [f for f in h["findings"] if f.get("gpu_index") == g["index"] and g["index"] is not None]
            for sev in _SEVERITIES:
                add("gpufleet_gpu_health_findings", gl + (("severity", sev),),
                    sum(1 for f in mine if f.get("severity") == sev))
            add("gpufleet_gpu_peak_bf16_tflops", gl, g["peak_bf16_tflops"])
            for gate in g["gate"]:
                tl = gl + (("test", gate["test"]),)
                add("gpufleet_gate_fraction_of_peak", tl, gate["fraction_of_peak"])
                if gate["passed"] is not None:
                    add("gpufleet_gate_passed", tl, 1 if gate["passed"] else 0)
    for st in STATUSES:
        add("gpufleet_fleet_hosts", (("status", st),), s["totals"]["hosts_by_status"].get(st, 0))
    ts = _timestamp(s["generated_at"])
    if ts is not None:
        add("gpufleet_report_timestamp_seconds", (), ts)

    out = []
    for name, kind, help_text in _METRICS:
        if not samples[name]:
            continue
        out.append("# HELP %s %s" % (name, help_text))
        out.append("# TYPE %s %s" % (name, kind))
        out.extend(samples[name])
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- writing
def _write_atomic(path, text):
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
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


def write_all(results, outdir, now=None):
    """Write fleet.html, fleet.json, fleet.csv, fleet.md and gpufleet.prom into ``outdir`` (created if needed).

    Each file is written to a temporary file in ``outdir`` and moved into place with ``os.replace``,
    so a reader (a browser, node_exporter) never sees a half-written file. Returns
    ``{"html": path, "json": path, "csv": path, "markdown": path, "prometheus": path}``.
    """
    outdir = os.fspath(outdir)
    os.makedirs(outdir, exist_ok=True)
    summary = results if isinstance(results, dict) and "hosts" in results else summarize(results, now=now)
    paths = {}
    for kind, filename in OUTPUT_FILES.items():
        path = os.path.join(outdir, filename)
        _write_atomic(path, _RENDERERS[kind](summary))
        paths[kind] = path
    return paths
