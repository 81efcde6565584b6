"""``summarize``: host rows (model.py) in, the fleet summary out: totals, bad hosts, drift, history, verdicts."""

from ..judgement import door as _door
from ..parallel import gc_paused as _gc_paused
from ..parallel import in_two as _in_two
from ..parallel import split as _split
from ..parallel import use_two as _use_two
from ._common import (
    _BAD_ORDER,
    _EMPTY,
    CHECK_MODE_NOTE,
    CHECK_STATUSES,
    SCHEMA,
    STATUSES,
    _l,
    _now_iso,
    check_items,
)
from .load import _inventory_list, _iter_files, _iter_missing, _list_folder
from .model import _safe_host_summary, apply_decision

# A fleet-level "versions differ" line names this many hosts per version (the judgement's number).
SPLIT_NAMES = _door.SPLIT_NAMES
# The fields compared across the fleet: (row key, word, totals key); gpufleet.prom's drift gauge reads them.
_DRIFT_FIELDS = _door.DRIFT_FIELDS


def _finish(hosts, now, results=None, check_mode=False, history=None):
    """The summary of the host rows: the fleet-level evidence (history, drift) judged (judgement/door.py
    ``judge_fleet``) and its decisions applied, the totals, the bad hosts, what to do, the warnings; ``results`` (the
    raw results, kept on request) sorted in."""
    hosts.sort(key=lambda h: h["host"])
    fleet = _door.judge_fleet(hosts, history)
    for h, decision in fleet["decisions"]:
        apply_decision(h, decision)
    usual, drift, split = fleet["usual"], fleet["drift"], fleet["split"]
    totals = _totals(hosts)
    totals.update({"usual_driver_version": usual["usual_driver_version"],
                   "usual_cuda_driver_version": usual["usual_cuda_driver_version"],
                   "drift": drift, "version_split": split, "checklist": _checklist_counts(hosts)})
    warnings = ["%s: %s" % (h["host"], w) for h in hosts for w in h["warnings"]]
    summary = {
        "schema": SCHEMA, "generated_at": _now_iso(now), "check_mode": bool(check_mode), "totals": totals,
        "bad_hosts": _bad_hosts(hosts), "what_to_do": _door.what_to_do(hosts), "hosts": hosts,
        "warnings": warnings, "history": _door.history_overview(history),
    }
    if results is not None:
        results.sort(key=lambda r: str(r.get("host")))
        summary["results"] = results
    return summary


def _sums(hosts):
    """The fleet's sums over its host rows: hosts by status, GPUs (usable, by model), memory, peak, prices."""
    t = {"by_status": dict.fromkeys(STATUSES, 0), "by_model": {}, "gpus": 0, "usable": 0, "mem_mib": 0,
         "peak": 0.0, "price_total": 0.0, "priced_hosts": 0, "peak_price": 0.0, "peak_tflops": 0.0,
         "meas_price": 0.0, "meas_tflops": 0.0}
    by_status, by_model = t["by_status"], t["by_model"]
    for h in hosts:
        by_status[h["status"]] = by_status.get(h["status"], 0) + 1
        t["gpus"] += h["gpu_count"]
        if h["status"] in ("ok", "degraded"):
            t["usable"] += sum(1 for g in h["gpus"] if not g["lost"])
        for name, n in h["gpu_models"].items():
            by_model[name] = by_model.get(name, 0) + n
        missing = h["gpu_count"] - len(h["gpus"])
        if missing > 0:
            by_model["unknown GPU"] = by_model.get("unknown GPU", 0) + missing
        t["mem_mib"] += h["memory_total_mib"]
        t["peak"] += h["peak_bf16_tflops"] or 0
        price = h["price_per_hour"]
        if price is not None:
            t["price_total"] += price
            t["priced_hosts"] += 1
            if h["peak_bf16_tflops"]:
                t["peak_price"] += price
                t["peak_tflops"] += h["peak_bf16_tflops"]
            if h["measured_tflops"]:
                t["meas_price"] += price
                t["meas_tflops"] += h["measured_tflops"]
    return t


def _totals(hosts):
    """fleet.json's totals from the host rows (the drift, version split and checklist counts come after)."""
    t = _sums(hosts)
    peak_tflops, meas_tflops = t["peak_tflops"], t["meas_tflops"]
    return {
        "hosts": len(hosts),
        "hosts_by_status": t["by_status"],
        "simulated_hosts": sum(1 for h in hosts if h["simulated"]),
        "gpus": t["gpus"],
        "gpus_usable": t["usable"],
        "gpus_by_model": dict(sorted(t["by_model"].items(), key=lambda kv: str(kv[0]))),
        "gpu_memory_total_gib": round(t["mem_mib"] / 1024.0, 1),
        "peak_bf16_tflops": round(t["peak"], 1),
        "price_per_hour": round(t["price_total"], 4),
        "priced_hosts": t["priced_hosts"],
        # $ per TFLOP-hour over the hosts where both the price and the figure are known.
        "usd_per_peak_tflop_hour": round(t["peak_price"] / peak_tflops, 6) if peak_tflops else None,
        "measured_tflops": round(meas_tflops, 1) if meas_tflops else None,
        "usd_per_measured_tflop_hour": round(t["meas_price"] / meas_tflops, 6) if meas_tflops else None,
    }


def _checklist_counts(hosts):
    """Per checklist item, the hosts by its status."""
    shown = check_items(hosts)
    checks = {key: dict.fromkeys(CHECK_STATUSES, 0) for key, _unused in shown}
    for h in hosts:
        items = h.get("checklist") or _EMPTY
        for key, _unused in shown:
            st = (items.get(key) or _EMPTY).get("status")
            counts = checks[key]
            counts[st if st in counts else "unknown"] += 1
    return checks


def _bad_hosts(hosts):
    """The hosts whose status is not ok, worst status first."""
    bad = [{"host": h["host"], "status": h["status"], "provider": h["provider"], "action": h["action"],
            "reasons": list(h["reasons"]), "simulated": h["simulated"], "provider_id": h.get("provider_id"),
            "return_action": h.get("return_action"), "verdict": h["verdict"]}
           for h in hosts if h["status"] != "ok"]
    bad.sort(key=lambda b: (_BAD_ORDER.get(b["status"], 9), b["host"]))
    return bad


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
