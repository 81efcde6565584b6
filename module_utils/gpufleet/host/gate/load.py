# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark gate's sustained load: a GEMM (and, for the burn-in, a triad memory load) held on every GPU at
once and sampled about SAMPLES times, and the raw entries made from it (GEMM figure, clock drop, throttle
onsets, peak temperature, new Xid events). ``gate_bench.run`` runs the sustained GEMM and the burn-in with it.
"""

import time

from . import rules as gate
from .measure import _gemm, _sizes, _Timer, telemetry

# Samples over a sustained GEMM or a burn-in: about this many, at most one per MAX_INTERVAL_S.
SAMPLES, MIN_INTERVAL_S, MAX_INTERVAL_S = 60, 0.1, 2.0


def _load_ops(torch, device, index, size, spec, compute_capability, memory):
    """(gemm op, flops per op, triad op or None, dtype name) for the sustained load on one GPU."""
    dev = torch.device("cuda", index) if device == "cuda" else torch.device("cpu")
    name = gate.gemm_test_for(spec, compute_capability) if device == "cuda" else "bf16_gemm"
    dtype = torch.bfloat16 if name == "bf16_gemm" else torch.float16
    op, work, _unused = _gemm(torch, dev, size["gemm"], dtype)
    triad = None
    if memory:
        n = size["buffer_mib"] * 2 ** 20 // 4
        a, b, c = torch.rand(n, device=dev), torch.rand(n, device=dev), torch.empty(n, device=dev)

        def triad():
            torch.add(a, b, alpha=2.0, out=c)
    return op, work, triad, str(dtype).replace("torch.", "")


def _slowdown_temperature(pynvml, handle):
    try:
        kind = getattr(pynvml, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)
        return pynvml.nvmlDeviceGetTemperatureThreshold(handle, kind)
    except Exception:
        return None


def sustained_load(torch, device, gpus, sizes, seconds, pynvml=None, handles=None, memory=False, budget=None,
                   clock=time.monotonic):
    """Hold a GEMM (and, for the burn-in, a triad memory load) on every GPU at once for ``seconds``, sampling
    each GPU's throughput and telemetry about SAMPLES times: {index: {"samples": [...], "dtype"}}.

    Each round queues ``k`` GEMMs per GPU between two CUDA events (thread CPU time in cpu mode), reads NVML
    while they run, then waits for them; ``k`` is tuned so a round lasts about the sampling interval.
    """
    handles = handles or {}
    interval = min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, seconds / SAMPLES))
    ops = {i: _load_ops(torch, device, i, sizes[i], gpus[i].get("spec"), gpus[i].get("compute_capability"), memory)
           for i in sorted(gpus)}
    timer = _Timer(torch, device)
    out = {i: {"samples": [], "dtype": ops[i][3]} for i in ops}
    k = {i: 1 for i in ops}

    def cpu_round():
        for _unused in range(k[0]):
            ops[0][0]()

    # A load with fewer samples than a clock-drop figure needs at its end goes on for them while the budget
    # lasts (a starved CPU in cpu mode gets a few rounds in its seconds; a GPU gets about SAMPLES).
    started = clock()
    end = started + seconds
    hard_end = budget.deadline if budget is not None else started + 3 * seconds
    while True:
        now = clock()
        if now >= hard_end or now >= end and min(len(o["samples"]) for o in out.values()) >= gate.DROP_MIN_SAMPLES:
            break
        t = round(now - started, 3)
        if device == "cuda":
            marks = {}
            for i, (op, _work, triad, _unused) in ops.items():
                with torch.cuda.device(i):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    for _unused in range(k[i]):
                        op()
                    e1.record()
                    if triad is not None:
                        triad()
                marks[i] = (e0, e1)
            seen = {i: telemetry(pynvml, handles.get(i)) for i in ops}  # read while the rounds run
            for i, (e0, e1) in marks.items():
                e1.synchronize()
                took = e0.elapsed_time(e1) / 1000.0
                torch.cuda.synchronize(i)
                out[i]["samples"].append(dict(seen[i], t=t, tflops=round(k[i] * ops[i][1] / took / 1e12, 4)))
                k[i] = max(1, min(10000, int(k[i] * interval / max(took, 1e-6))))
        else:
            work, triad = ops[0][1], ops[0][2]
            took = timer(cpu_round, ())
            if triad is not None:
                triad()
            if took > 0:
                out[0]["samples"].append(dict(telemetry(None, None), t=t, tflops=round(k[0] * work / took / 1e12, 6)))
                k[0] = max(1, min(10000, int(k[0] * interval / took)))
    for i in out:
        out[i]["seconds"] = round(clock() - started, 3)
    return out


# Samples kept in a GEMM entry (the facts go to the fact cache and the report): every n-th past this many.
# The findings are computed on all of them.
KEEP_SAMPLES = 120


def _thin(samples, keep=KEEP_SAMPLES):
    step = -(-len(samples) // keep) if samples else 1
    return samples[::step]


def _series(samples, key):
    return [s.get(key) for s in samples]


def sustained_entries(load, gpus, device, prefix, xid=None, slowdown=None):
    """Raw entries (gate.evaluate's input) from a sustained load: the GEMM figure, the clock drop and, for the
    burn-in (prefix "burn_in_"), throttle onsets, peak temperature and new Xid events."""
    raw = []
    for i, got in sorted(load.items()):
        samples, secs = got["samples"], got["seconds"]
        base = {"index": i, "device": gpus[i]["name"], "uuid": gpus[i].get("uuid"), "mode": device,
                "duration_s": secs}
        gemm = dict(base, test=prefix + "gemm" if prefix else "sustained_gemm", dtype=got["dtype"],
                    figures=_series(samples, "tflops"), samples=_thin(samples), samples_n=len(samples))
        raw.append(gemm)
        clocks = [v for v in _series(samples, "sm_mhz") if v is not None]
        basis = "SM clock (NVML)" if clocks else "GEMM throughput (no SM clock reading)"
        drop = gate.drop_pct(clocks if clocks else _series(samples, "tflops"))
        entry = dict(base, test=prefix + "clock_drop" if prefix else "clock_drop", value=drop,
                     samples_n=len(samples), basis=basis,
                     note="%s, settled (last third) against the first samples, %d samples" % (basis, len(samples)))
        if drop is None:
            entry["no_reading"] = "fewer than 6 samples of %s" % basis
        raw.append(entry)
        if prefix != "burn_in_":
            continue
        rate, share = gate.throttle_onsets_per_min(samples, secs)
        entry = dict(base, test="burn_in_throttle", value=rate, samples_n=len(samples),
                     note="thermal/power slowdown reasons %s in %s of the samples" % (
                         "/".join(gate.BAD_THROTTLE), "n/a" if share is None else "%.0f %%" % (100 * share)))
        if rate is None:
            entry["no_reading"] = "no throttle reasons read (NVML)" if device == "cuda" else "cpu mode: no NVML"
        raw.append(entry)
        temps = [v for v in _series(samples, "temperature_c") if v is not None]
        entry = dict(base, test="burn_in_temperature", value=max(temps) if temps else None, samples_n=len(temps),
                     limit=(slowdown or {}).get(i),
                     power_draw_w_max=max([v for v in _series(samples, "power_draw_w") if v is not None] or [None],
                                          key=lambda v: -1 if v is None else v))
        if not temps:
            entry["no_reading"] = "no temperature read (NVML)" if device == "cuda" else "cpu mode: no NVML"
        raw.append(entry)
        entry = dict(base, test="burn_in_xid", value=None, samples_n=None)
        if xid is None or xid.get("reason"):
            entry["no_reading"] = "kernel log not readable: %s" % ((xid or {}).get("reason") or "not read")
        else:
            pci = gpus[i].get("pci")
            mine = [ev for ev in xid["events"] if pci is None or ev.get("pci") in (None, pci)]
            keys = ("xid", "pci", "name", "severity", "line")
            entry.update(value=len(mine), xid_events=[{k: ev.get(k) for k in keys} for ev in mine[:20]],
                         kernel_log_source=xid.get("source"))
        raw.append(entry)
    return raw


def _load_sizes(torch, device, gpus, sizes, params):
    return {i: sizes.get(i) or _sizes(torch, device, i, params) for i in gpus}
