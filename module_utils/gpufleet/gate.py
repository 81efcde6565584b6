"""The benchmark gate, pure part: inputs, expectations, statistics, verdicts.

Measuring is ``gate_bench`` (torch, injected); this module only turns numbers into verdicts,
so every rule here is tested on recorded figures without a GPU.

Expectations: the vendor's dense peak (``specs``) times a floor, the fraction of that peak a
healthy GPU of its class reaches, from ``shared/reference/gpu-performance.md``:

* section 2 gives what real tools reach (large BF16 GEMM: 80 % on H100/H200 SXM, 75-87 % on
  A100 and B200, 66 % on the power-capped H100 PCIe, 96-108 % on GeForce boards; device copy
  79-89 % of the HBM figure; pinned H2D/D2H 77-88 % of the PCIe per-direction rate; NVLink P2P
  83-88 %; ring all-reduce bus bandwidth 76-78 % of per-direction NVLink);
* section 3.1: Azure's health checks put their thresholds at 87-92 % of those typical figures.

So each floor below is about 0.9 x the achievable fraction. A GPU passes a test when its
median figure reaches ``expected = peak x floor``; it also fails when it is more than
``outlier_margin`` below the median of the other GPUs in the same host (same-node spread of
healthy GPUs is 5 %+, section 2.1 "Other anchors").
"""

import math

REFERENCE = "shared/reference/gpu-performance.md"

GEMM_TESTS = ("bf16_gemm", "fp16_gemm", "tf32_gemm")
TESTS = GEMM_TESTS + ("memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth", "p2p_bandwidth", "nccl_allreduce")
# nccl_allreduce is opt-in: it needs every GPU of the host at once.
DEFAULT_TESTS = ("bf16_gemm", "tf32_gemm", "memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth", "p2p_bandwidth")
# Tests that need two or more GPUs; on a one-GPU host (and in cpu mode) they are skipped.
MULTI_GPU_TESTS = ("p2p_bandwidth", "nccl_allreduce")
UNITS = {t: ("TFLOPS" if t in GEMM_TESTS else "GB/s") for t in TESTS}
DEVICES = ("cuda", "cpu")

# PCIe x16 per-direction rate by generation, GB/s (section 1.2, "Interconnect conversions").
PCIE_X16_GBS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}

# Floors as fractions of the dense peak, per gate class (see the module docstring for the why).
# "U" in the comment: the reference has no measured fraction for it; measure and override.
FLOORS = {
    # H100/H200 SXM 80 %, A100 SXM 81-87 %, B200 75-77 % (2.1) -> 0.70; device copy 79-87 % (2.2) -> 0.72;
    # Gen5/Gen4 H2D 81-88 % (2.3) -> 0.72; NVLink P2P 83-88 % (2.4) -> 0.75; ring busbw 76-78 % (2.5) -> 0.68.
    "datacenter-hbm": {"bf16_gemm": 0.70, "fp16_gemm": 0.70, "tf32_gemm": 0.55, "memory_bandwidth": 0.72,
                       "h2d_bandwidth": 0.72, "d2h_bandwidth": 0.72, "p2p_bandwidth": 0.75, "nccl_allreduce": 0.68},
    # H100 PCIe 66-67 %, A100 PCIe 75-81 %, L40S 74 %, T4 64-66 % (2.1) -> 0.58; A800 PCIe copy 89 % (2.2).
    "pcie-capped": {"bf16_gemm": 0.58, "fp16_gemm": 0.58, "tf32_gemm": 0.45, "memory_bandwidth": 0.72,
                    "h2d_bandwidth": 0.72, "d2h_bandwidth": 0.72, "p2p_bandwidth": 0.75, "nccl_allreduce": 0.68},
    # RTX 4090 96-105 %, RTX 3090 106-108 % of the FP32-accumulate rate (2.1) -> 0.85. Memory: U.
    "geforce": {"bf16_gemm": 0.85, "fp16_gemm": 0.85, "tf32_gemm": 0.70, "memory_bandwidth": 0.72,
                "h2d_bandwidth": 0.72, "d2h_bandwidth": 0.72, "p2p_bandwidth": 0.75, "nccl_allreduce": 0.68},
    # RTX A6000 80 % (2.1) -> 0.72.
    "workstation": {"bf16_gemm": 0.72, "fp16_gemm": 0.72, "tf32_gemm": 0.55, "memory_bandwidth": 0.72,
                    "h2d_bandwidth": 0.72, "d2h_bandwidth": 0.72, "p2p_bandwidth": 0.75, "nccl_allreduce": 0.68},
}
# Per-model floors where the reference shows a model below its class.
MODEL_FLOORS = {
    # L4 (72 W cap): 59 % best shape, 49 % at 8192 (2.1) -> 0.44 at the gate's 8192 size.
    "l4": {"bf16_gemm": 0.44, "fp16_gemm": 0.44},
}
# cpu mode: absolute floors, only there to exercise the verdict path on CI machines (not a spec).
CPU_EXPECTED = {"bf16_gemm": 0.0005, "fp16_gemm": 0.0005, "tf32_gemm": 0.002, "memory_bandwidth": 0.5,
                "h2d_bandwidth": 0.5, "d2h_bandwidth": 0.5}

DEFAULTS = {
    "device": "cuda", "tests": list(DEFAULT_TESTS), "time_budget_s": 60.0, "warmup": 3, "repetitions": 20,
    "outlier_margin": 0.10, "expected": {}, "floors": {}, "gemm_size": None, "buffer_mib": None,
}
# Below this many seconds per test and GPU nothing meaningful can be timed (warm-up + 3 repetitions
# of an 8192^3 GEMM on a slow GPU take about that).
MIN_SECONDS_PER_TEST = 1.0
MAX_BUDGET_S = 3600.0


class GateInputError(ValueError):
    """Bad gate input; the message lists every problem."""


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(problems, name, v, integer=False, upper=None):
    if not _is_number(v) or (integer and int(v) != v):
        problems.append("%s must be a %s, got %r" % (name, "whole number" if integer else "finite number", v))
        return None
    if v <= 0:
        problems.append("%s must be greater than 0, got %r" % (name, v))
        return None
    if upper is not None and v > upper:
        problems.append("%s must be at most %s, got %r" % (name, upper, v))
        return None
    return int(v) if integer else float(v)


def _figures(problems, name, table, upper=None):
    """{model or class: {test: positive number}} checked; returns a clean copy."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        problems.append("%s must be a mapping of model (or class) to {test: number}, got %r" % (name, table))
        return {}
    out = {}
    for key, per_test in table.items():
        if not isinstance(per_test, dict):
            problems.append("%s[%r] must be a mapping of test name to number, got %r" % (name, key, per_test))
            continue
        out[str(key).lower()] = {}
        for test, value in per_test.items():
            if test not in TESTS:
                problems.append("%s[%r]: unknown test %r (known: %s)" % (name, key, test, ", ".join(TESTS)))
                continue
            v = _positive(problems, "%s[%r][%r]" % (name, key, test), value, upper=upper)
            if v is not None:
                out[str(key).lower()][test] = v
    return out


def validate(params):
    """Checked, normalised gate parameters (defaults filled in), or GateInputError naming every problem."""
    p = dict(DEFAULTS)
    p.update({k: v for k, v in (params or {}).items() if v is not None})
    problems = []
    unknown = sorted(set(params or {}) - set(DEFAULTS))
    if unknown:
        problems.append("unknown parameters: %s" % ", ".join(unknown))
    if p["device"] not in DEVICES:
        problems.append("device must be one of %s, got %r" % (", ".join(DEVICES), p["device"]))
    tests = p["tests"]
    if isinstance(tests, str) or not isinstance(tests, (list, tuple)) or not tests:
        problems.append("tests must be a non-empty list of test names, got %r" % (tests,))
        tests = []
    bad = [t for t in tests if t not in TESTS]
    if bad:
        problems.append("unknown test name(s) %s (known: %s)" % (", ".join(repr(t) for t in bad), ", ".join(TESTS)))
    p["tests"] = [t for i, t in enumerate(tests) if t in TESTS and t not in tests[:i]]
    w = p["warmup"]
    if not _is_number(w) or int(w) != w or not 0 <= w <= 1000:
        problems.append("warmup must be a whole number from 0 to 1000, got %r" % (w,))
    else:
        p["warmup"] = int(w)
    p["repetitions"] = _positive(problems, "repetitions", p["repetitions"], integer=True, upper=1000)
    if p["repetitions"] is not None and p["repetitions"] < 3:
        problems.append("repetitions must be at least 3 (a median and a spread need them), got %r" % p["repetitions"])
    margin = p["outlier_margin"]
    if not _is_number(margin) or not 0 < margin < 1:
        problems.append("outlier_margin must be a number between 0 and 1 (0.10 = 10 %% below the others), got %r"
                        % (margin,))
    budget = _positive(problems, "time_budget_s", p["time_budget_s"], upper=MAX_BUDGET_S)
    p["time_budget_s"] = budget
    if budget is not None and p["tests"]:
        need = MIN_SECONDS_PER_TEST * len(p["tests"])
        if budget < need:
            problems.append("time_budget_s %.3g s is too small to run anything: %d test(s) need at least %.3g s "
                            "(%.3g s each, per GPU)" % (budget, len(p["tests"]), need, MIN_SECONDS_PER_TEST))
    p["expected"] = _figures(problems, "expected", p["expected"])
    p["floors"] = _figures(problems, "floors", p["floors"], upper=2.0)
    for name in ("gemm_size", "buffer_mib"):
        if p[name] is not None:
            p[name] = _positive(problems, name, p[name], integer=True, upper=65536)
    if problems:
        raise GateInputError("; ".join(problems))
    return p


def check_budget(budget_s, tests, gpu_count):
    """Seconds each test may take on each GPU; GateInputError when that is below MIN_SECONDS_PER_TEST."""
    slots = len(tests) * max(1, int(gpu_count))
    share = float(budget_s) / slots if slots else 0.0
    if share < MIN_SECONDS_PER_TEST:
        raise GateInputError("time_budget_s %.3g s is too small to run anything: %d test(s) x %d GPU(s) leave "
                             "%.2f s each, at least %.3g s is needed" % (budget_s, len(tests), gpu_count, share,
                                                                         MIN_SECONDS_PER_TEST))
    return share


def _round(v, digits=4):
    return None if v is None else round(v, digits)


def median(values):
    vals = sorted(values)
    n = len(vals)
    if not n:
        return None
    mid = n // 2
    return vals[mid] if n % 2 else (vals[mid - 1] + vals[mid]) / 2.0


def summarize(figures):
    """Median, min, max, spread ((max - min) / median) and IQR of per-repetition figures."""
    vals = sorted(float(v) for v in figures if _is_number(v))
    if not vals:
        return {"median": None, "min": None, "max": None, "spread": None, "iqr": None, "n": 0}
    med = median(vals)
    n = len(vals)
    lower, upper = vals[: n // 2], vals[(n + 1) // 2:]
    iqr = (median(upper) - median(lower)) if lower and upper else 0.0
    return {"median": med, "min": vals[0], "max": vals[-1], "n": n,
            "spread": (vals[-1] - vals[0]) / med if med else None, "iqr": iqr}


def gate_class(spec):
    """datacenter-hbm (SXM/HBM), pcie-capped (data-center PCIe/NVL cards), geforce or workstation."""
    if not spec:
        return None
    cls = spec.get("gpu_class")
    if cls == "datacenter-hbm" and spec.get("form_factor") == "SXM":
        return "datacenter-hbm"
    if cls in ("datacenter-hbm", "datacenter-pcie"):
        return "pcie-capped"
    return cls if cls in FLOORS else None


def peak(test, spec):
    """The spec figure a test is measured against (dense TFLOPS or GB/s per direction), or None."""
    if not spec:
        return None
    if test == "bf16_gemm":
        return spec.get("bf16_tflops")
    if test == "fp16_gemm":
        return spec.get("fp16_tflops")
    if test == "tf32_gemm":
        return spec.get("tf32_tflops")
    if test == "memory_bandwidth":
        return spec.get("memory_bandwidth_gbs")
    if test in ("h2d_bandwidth", "d2h_bandwidth"):
        gen, width = spec.get("pcie_gen"), spec.get("pcie_width") or 16
        return PCIE_X16_GBS[gen] * width / 16.0 if gen in PCIE_X16_GBS else None
    if test in ("p2p_bandwidth", "nccl_allreduce"):
        nvlink = spec.get("nvlink_gbs")
        # NVLink figures are bidirectional; per direction is half. Bridges (PCIe cards) are not assumed.
        return nvlink / 2.0 if nvlink and spec.get("form_factor") == "SXM" else None
    return None


def gemm_test_for(spec, compute_capability=None):
    """bf16_gemm, or fp16_gemm where the GPU has no BF16 (spec says so, or compute capability < 8.0)."""
    if spec and spec.get("bf16_tflops") is None and spec.get("fp16_tflops") is not None:
        return "fp16_gemm"
    if compute_capability is not None and tuple(compute_capability) < (8, 0):
        return "fp16_gemm"
    return "bf16_gemm"


def expectation(test, spec, device="cuda", expected=None, floors=None, model_name=None):
    """{expected, peak, floor, source} for one test on one GPU; expected None = nothing to compare with."""
    expected = expected or {}
    floors = floors or {}
    keys = [k for k in ((spec or {}).get("key"), (model_name or "").lower() or None) if k]
    if device == "cpu":
        for k in ["cpu"] + keys:
            if test in expected.get(k, {}):
                return {"expected": expected[k][test], "peak": None, "floor": None, "source": "expected[%s]" % k}
        return {"expected": CPU_EXPECTED.get(test), "peak": None, "floor": None,
                "source": "cpu mode floor (mechanics only, not a spec)" if test in CPU_EXPECTED else None}
    pk = peak(test, spec)
    for k in keys:
        if test in expected.get(k, {}):
            return {"expected": expected[k][test], "peak": pk, "floor": (expected[k][test] / pk) if pk else None,
                    "source": "expected[%s]" % k}
    cls = gate_class(spec)
    floor, source = None, None
    for k, table in [(k, floors) for k in keys] + [(cls, floors)] + [(k, MODEL_FLOORS) for k in keys] + \
            [(cls, FLOORS)]:
        if k and test in table.get(k, {}):
            floor = table[k][test]
            source = "%s[%s]" % ("floors" if table is floors else
                                 ("MODEL_FLOORS" if table is MODEL_FLOORS else "FLOORS"), k)
            break
    if pk is None or floor is None:
        why = "no spec row for this GPU" if not spec else ("the spec table has no %s figure for %s" % (
            "peak" if pk is None else "class floor", spec.get("key")))
        return {"expected": None, "peak": pk, "floor": floor, "source": why}
    return {"expected": round(pk * floor, 3), "peak": pk, "floor": floor,
            "source": "%s x %s (%s)" % (pk, floor, source)}


def verdict(entry):
    """Fill passed/why of one entry from measured and expected."""
    measured, expected = entry.get("measured"), entry.get("expected")
    unit = entry.get("unit") or ""
    if measured is None:
        entry["passed"] = False
        entry["why"] = entry.get("why") or "not measured"
    elif expected is None:
        entry["passed"] = None
        entry["why"] = "no expectation: %s; measured %.4g %s (set gate_expected to gate it)" % (
            entry.get("expectation_source") or "unknown GPU", measured, unit)
    elif measured >= expected:
        entry["passed"] = True
        entry["why"] = "%.4g %s >= expected %.4g %s" % (measured, unit, expected, unit)
    else:
        entry["passed"] = False
        entry["why"] = "%.4g %s < expected %.4g %s (%.0f %% of expected)" % (
            measured, unit, expected, unit, 100.0 * measured / expected)
    return entry


def apply_outliers(entries, margin):
    """Fail a GPU whose figure is more than ``margin`` below the median of the other GPUs (same test, same host)."""
    by_test = {}
    for e in entries:
        if e.get("measured") is not None:
            by_test.setdefault(e["test"], []).append(e)
    for test_entries in by_test.values():
        if len(test_entries) < 2:
            continue
        for e in test_entries:
            others = [o["measured"] for o in test_entries if o is not e]
            ref = median(others)
            e["peer_median"] = ref
            if ref and e["measured"] < (1.0 - margin) * ref:
                e["passed"] = False
                e["outlier"] = True
                note = "%.0f %% below the median %.4g %s of the other %d GPU(s) (margin %.0f %%)" % (
                    100.0 * (1 - e["measured"] / ref), ref, e.get("unit") or "", len(others), 100.0 * margin)
                e["why"] = note if not e.get("why") else "%s; %s" % (e["why"], note)
            else:
                e["outlier"] = False
    return entries


def evaluate(raw_results, gpus, params):
    """Entries in the shape the fleet report reads (ansible_facts.gpu_gate) from raw benchmark results.

    ``raw_results``: [{index, test, figures: [per-repetition figure], error?, ...extra}];
    ``gpus``: {index: {"spec": row|None, "name": str}}; ``params``: validate()'s output.
    """
    entries = []
    for raw in raw_results:
        gpu = gpus.get(raw["index"], {})
        stats = summarize(raw.get("figures") or ())
        exp = expectation(raw["test"], gpu.get("spec"), params["device"], params["expected"], params["floors"],
                          gpu.get("name"))
        entry = {k: v for k, v in raw.items() if k != "figures"}
        measured = None if stats["median"] is None else round(stats["median"], 4)
        entry.update({
            "index": raw["index"], "test": raw["test"], "measured": measured, "expected": exp["expected"],
            "unit": UNITS[raw["test"]],
            "fraction_of_peak": round(measured / exp["peak"], 4) if measured is not None and exp["peak"] else None,
            "peak": exp["peak"], "floor": exp["floor"], "expectation_source": exp["source"],
            "median": measured, "min": _round(stats["min"]), "max": _round(stats["max"]), "iqr": _round(stats["iqr"]),
            "spread": None if stats["spread"] is None else round(stats["spread"], 4), "repetitions": stats["n"],
            "passed": None, "why": raw.get("error"),
        })
        entries.append(verdict(entry))
    return apply_outliers(entries, params["outlier_margin"])
