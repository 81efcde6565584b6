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

from ..gpu import specs

REFERENCE = "shared/reference/gpu-performance.md"

GEMM_TESTS = ("bf16_gemm", "fp16_gemm", "tf32_gemm")
# Tests a user can ask for. sustained_gemm (full tier) yields the entries sustained_gemm and clock_drop;
# burn_in (burn-in tier) yields the BURN_IN_ENTRIES.
TESTS = GEMM_TESTS + ("memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth", "p2p_bandwidth", "nccl_allreduce",
                      "sustained_gemm", "burn_in")
# nccl_allreduce is opt-in in the quick tier: it needs every GPU of the host at once.
DEFAULT_TESTS = ("bf16_gemm", "tf32_gemm", "memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth", "p2p_bandwidth")
# Tests that need two or more GPUs; on a one-GPU host they are skipped. In cpu mode nccl_allreduce
# runs as a gloo all-reduce between two processes instead (mechanics only).
MULTI_GPU_TESTS = ("p2p_bandwidth", "nccl_allreduce")
# Tests that run on all GPUs of the host at once, after the per-GPU tests.
HOST_TESTS = ("nccl_allreduce", "sustained_gemm", "burn_in")
BURN_IN_ENTRIES = ("burn_in_gemm", "burn_in_clock_drop", "burn_in_throttle", "burn_in_temperature", "burn_in_xid")
# Entry names (what the report shows) -> unit. The "at most" entries pass when measured <= expected.
UNITS = {t: ("TFLOPS" if t in GEMM_TESTS else "GB/s") for t in TESTS if t != "burn_in"}
UNITS.update(sustained_gemm="TFLOPS", clock_drop="%", burn_in_gemm="TFLOPS", burn_in_clock_drop="%",
             burn_in_throttle="onsets/min", burn_in_temperature="C", burn_in_xid="Xid events")
AT_MOST = ("clock_drop", "burn_in_clock_drop", "burn_in_throttle", "burn_in_temperature", "burn_in_xid")
DEVICES = ("cuda", "cpu")

# Tiers: the tests each runs by default and its time budget (default, and the range a user may set on a
# GPU; cpu mode runs the mechanics with any budget up to the tier's maximum). The quick tier is about a
# minute per host; full adds the all-reduce and a sustained GEMM (5 min, the order of DCGM's level 2 and
# Azure's NHC suite, ref section 4); burn-in adds a long load for thermal, power and Xid (DCGM level 3
# is about 15 min; typical gpu-burn burn-ins run up to 1 h, ref section 4).
TIERS = {
    "quick": {"tests": DEFAULT_TESTS, "budget_s": 60.0, "min_s": 0.0, "max_s": 60.0},
    "full": {"tests": DEFAULT_TESTS + ("nccl_allreduce", "sustained_gemm"), "budget_s": 300.0, "min_s": 0.0,
             "max_s": 300.0},
    "burn-in": {"tests": DEFAULT_TESTS + ("nccl_allreduce", "sustained_gemm", "burn_in"), "budget_s": 900.0,
                "min_s": 900.0, "max_s": 3600.0},
}
# Seconds of sustained GEMM in the full tier (30-60 s asked for; DCGM's targeted_stress runs 30 s, ref 3.2).
SUSTAINED_S = {"cuda": 45.0, "cpu": 2.0}
# The burn-in gets at least this much, and on a GPU everything the budget leaves after the full tier's 300 s.
BURN_IN_MIN_S = {"cuda": 600.0, "cpu": 2.0}

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
# The sustained and burn-in GEMMs are the bf16 (fp16) GEMM held for 45 s and more, past the first second in which a
# GPU runs at boost clocks before its power limit holds it: their floor is the bf16 floor times SUSTAINED_SHARE.
# Measured on a healthy H200 SXM at its 700 W limit (docs/gpu-validation.md): burst bf16 GEMM 751-776 TFLOPS,
# sustained 655-661 (0.85-0.88 of the burst; SM clock 1275-1485 of 1980 MHz, sw_power_cap); with the bf16 floor
# itself the sustained test failed that GPU.
SUSTAINED_SHARE = 0.85
for _table in list(FLOORS.values()) + list(MODEL_FLOORS.values()):
    _sustained = round(_table["bf16_gemm"] * SUSTAINED_SHARE, 3)
    _table.update(sustained_gemm=_sustained, burn_in_gemm=_sustained)

# Per-model all-reduce bus bandwidth floors (GB/s, absolute), valid for the host size they were measured on.
# 0.9 x the ring (NVLS off) figure of a healthy node, the calibration of the class floors above; NVLS
# (SHARP in the NVSwitch) lifts busbw past the wire speed when NCCL picks it, so a ring floor holds either way.
NCCL_BUSBW_FLOORS = {
    "a100-sxm4-80gb": {"gpus": 8, "busbw": 228.0, "source": "ref 3.1: Azure NHC nd96amsr_a100_v4 "
                       "check_nccl_allreduce 228.0 GB/s (16G); ref 2.5: 8xA100 SXM 228-235 GB/s"},
    "a100-sxm4-40gb": {"gpus": 8, "busbw": 228.0, "source": "ref 3.1: Azure NHC nd96asr_v4 "
                       "check_nccl_allreduce 228.0 GB/s (8G)"},
    "h100-sxm": {"gpus": 8, "busbw": 329.0, "source": "0.9 x 365.6 GB/s, ref 2.5: 8xH200 NVLS off (stas00, same "
                 "NVLink4/NVSwitch); Azure's 460 (ref 3.1) assumes NVLS"},
    "h200-sxm": {"gpus": 8, "busbw": 329.0, "source": "0.9 x 365.6 GB/s, ref 2.5: 8xH200 NVLS off (stas00); "
                 "Azure's 431 (ref 3.1) assumes NVLS"},
    "b200": {"gpus": 8, "busbw": 614.0, "source": "0.9 x 682 GB/s, ref 2.5: 8xB200 NVLS off (stas00, p6-b200)"},
    "v100-sxm2-32gb": {"gpus": 8, "busbw": 110.0, "source": "ref 3.1: Azure NHC nd40rs_v2 "
                       "check_nccl_allreduce 110.0 GB/s (8G)"},
    "v100-sxm2-16gb": {"gpus": 8, "busbw": 110.0, "source": "ref 3.1: Azure NHC nd40rs_v2 "
                       "check_nccl_allreduce 110.0 GB/s (8G)"},
}

# "At most" limits of the stability findings on a GPU.
LIMITS = {
    # The reference gives no clock-drop figure (DCGM targeted_power "fails on clock drop", ref 3.2, without
    # one). 10 %: twice the 5 % spread of healthy GPUs of one node (ref 2.1), the same 0.9 calibration as the
    # floors. (U): check it on a device run.
    "clock_drop": 10.0, "burn_in_clock_drop": 10.0,
    # gpud: HW slowdown is "degraded if > 0.6 events/min over a 10-min window" (ref 3.2).
    "burn_in_throttle": 0.6,
    # Any Xid during load (Azure NHC and gpud treat Xid as an event check, ref 3.1/3.2).
    "burn_in_xid": 0,
}
# Throttle reasons that count as thermal or power instability (the software power cap is a GPU at its
# limit, which a full GEMM is meant to reach; idle/app-clock/sync-boost are not slowdowns).
BAD_THROTTLE = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")

# cpu mode: absolute floors, only there to exercise the verdict path on CI machines (not a spec).
CPU_EXPECTED = {"bf16_gemm": 0.0005, "fp16_gemm": 0.0005, "tf32_gemm": 0.002, "memory_bandwidth": 0.5,
                "h2d_bandwidth": 0.5, "d2h_bandwidth": 0.5, "nccl_allreduce": 0.05, "sustained_gemm": 0.0005,
                "burn_in_gemm": 0.0005,
                # there is no SM clock: the drop is the GEMM throughput's, on a shared machine, so lax
                "clock_drop": 60.0, "burn_in_clock_drop": 60.0, "burn_in_throttle": 0.6, "burn_in_xid": 0}

DEFAULTS = {
    "device": "cuda", "tier": "quick", "tests": None, "time_budget_s": None, "warmup": 3, "repetitions": 20,
    "outlier_margin": 0.10, "expected": {}, "floors": {}, "gemm_size": None, "buffer_mib": None,
    "sustained_s": None,
}
# The memory test's working set, its three triad buffers (a, b and c of c = a + 2b), must be at least L2_MULTIPLE x the
# GPU's L2, or the kernel times the cache, not the memory: an RTX 4090 (1.008 TB/s, 72 MB L2) read "3.87 TB/s" with
# 16 MB buffers (ref 2.2, "Pitfall"), and a gate timing that would pass a card with bad memory. The L2 sizes are the
# spec table's ``l2_mb``; a GPU without one (no row, or a row without the figure) is held to the largest.
L2_MULTIPLE = 8
TRIAD_BUFFERS = 3
_LARGEST_L2 = max((r for r in specs.SPECS if r["l2_mb"] is not None), key=lambda r: r["l2_mb"])
LARGEST_L2_MB = _LARGEST_L2["l2_mb"]


def l2_mb(spec):
    """The L2 (MiB, spec ``l2_mb``) a GPU's buffers are held to: its own, or the table's largest where it has none."""
    return (spec or {}).get("l2_mb") or LARGEST_L2_MB


def min_buffer_mib(l2):
    """The smallest buffer (MiB) whose TRIAD_BUFFERS together are at least L2_MULTIPLE x an L2 of ``l2`` MiB."""
    return int(-(-L2_MULTIPLE * l2 // TRIAD_BUFFERS))


# The floor of a user-set buffer_mib on a GPU: past L2_MULTIPLE x the largest L2 in the spec table, on any GPU.
BUFFER_FLOOR_MIB = min_buffer_mib(LARGEST_L2_MB)

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
            if test not in UNITS:
                problems.append("%s[%r]: unknown test %r (known: %s)" % (name, key, test, ", ".join(UNITS)))
                continue
            v = _positive(problems, "%s[%r][%r]" % (name, key, test), value, upper=upper)
            if v is not None:
                out[str(key).lower()][test] = v
    return out


def per_gpu_tests(tests):
    """The tests that run once per GPU, each with an equal share of the budget."""
    return [t for t in tests if t not in HOST_TESTS]


def reserved_s(p):
    """Seconds of the budget set aside for the sustained GEMM and the burn-in (both run on all GPUs at once)."""
    device, out = p["device"], 0.0
    if "sustained_gemm" in p["tests"]:
        out += p["sustained_s"]
    if "burn_in" in p["tests"]:
        out += max(BURN_IN_MIN_S[device], p["time_budget_s"] - TIERS["full"]["budget_s"])
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
    if p["tier"] not in TIERS:
        problems.append("tier must be one of %s, got %r" % (", ".join(TIERS), p["tier"]))
        p["tier"] = "quick"
    tier = TIERS[p["tier"]]
    tests = list(tier["tests"]) if p["tests"] is None else p["tests"]
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
    if p["time_budget_s"] is None:
        p["time_budget_s"] = tier["budget_s"]
    budget = _positive(problems, "time_budget_s", p["time_budget_s"], upper=MAX_BUDGET_S)
    if budget is not None:
        # the tier's range holds on a GPU; cpu mode runs the mechanics with any budget up to the maximum
        low = tier["min_s"] if p["device"] == "cuda" else 0.0
        if not low <= budget <= tier["max_s"]:
            problems.append("time_budget_s %.4g s is outside the %s tier's range (%s%.0f s%s)" % (
                budget, p["tier"], ("%.0f to " % low) if low else "at most ", tier["max_s"],
                "" if p["device"] == "cuda" else ", cpu mode"))
            budget = None
    p["time_budget_s"] = budget
    device = p["device"] if p["device"] in DEVICES else "cuda"
    if p["sustained_s"] is None:
        p["sustained_s"] = SUSTAINED_S[device]
    p["sustained_s"] = _positive(problems, "sustained_s", p["sustained_s"], upper=600)
    if budget is not None and p["sustained_s"] is not None and "sustained_gemm" in p["tests"] \
            and p["sustained_s"] > budget / 2.0:
        problems.append("sustained_s {0:.4g} s is more than half of time_budget_s {1:.4g} s".format(
            p["sustained_s"], budget))
        budget = None
    if budget is not None and p["tests"] and p["device"] in DEVICES:
        slots = per_gpu_tests(p["tests"]) + [t for t in p["tests"] if t == "nccl_allreduce"]
        left = budget - reserved_s(p)
        need = MIN_SECONDS_PER_TEST * len(slots)
        if left < need or left <= 0:
            problems.append("time_budget_s %.3g s is too small to run anything: %d test(s) need at least %.3g s "
                            "(%.3g s each, per GPU)%s" % (budget, len(slots), need + reserved_s(p),
                                                          MIN_SECONDS_PER_TEST,
                                                          (" plus %.3g s for the sustained GEMM / burn-in"
                                                           % reserved_s(p)) if reserved_s(p) else ""))
    p["expected"] = _figures(problems, "expected", p["expected"])
    p["floors"] = _figures(problems, "floors", p["floors"], upper=2.0)
    for name in ("gemm_size", "buffer_mib"):
        if p[name] is not None:
            p[name] = _positive(problems, name, p[name], integer=True, upper=65536)
    if p["buffer_mib"] is not None and p["device"] == "cuda" and p["buffer_mib"] < BUFFER_FLOOR_MIB:
        # cpu mode (mechanics only, its own floors, not a spec) takes any size
        problems.append("buffer_mib %s MiB is below its floor of %s MiB on a GPU: the memory test's working set "
                        "(%s x %s = %s MiB) must be at least %d x the largest L2 in the spec table (%s: %s MiB, so "
                        "%s MiB), or it times the L2 cache, not the memory" % (
                            p["buffer_mib"], BUFFER_FLOOR_MIB, TRIAD_BUFFERS, p["buffer_mib"],
                            TRIAD_BUFFERS * p["buffer_mib"], L2_MULTIPLE, _LARGEST_L2["key"], LARGEST_L2_MB,
                            L2_MULTIPLE * LARGEST_L2_MB))
    if problems:
        raise GateInputError("; ".join(problems))
    return p


def check_budget(budget_s, tests, gpu_count, reserved=0.0):
    """Seconds each per-GPU test (and the all-reduce, per GPU) may take; GateInputError below MIN_SECONDS_PER_TEST.
    ``reserved``: seconds set aside for the sustained GEMM and the burn-in."""
    slots = len(tests) * max(1, int(gpu_count))
    share = (float(budget_s) - reserved) / slots if slots else 0.0
    if slots and share < MIN_SECONDS_PER_TEST:
        raise GateInputError("time_budget_s %.3g s is too small to run anything: %d test(s) x %d GPU(s) leave "
                             "%.2f s each, at least %.3g s is needed" % (budget_s, len(tests), gpu_count, share,
                                                                         MIN_SECONDS_PER_TEST))
    return share


def allreduce_bus_bytes(nbytes, ranks):
    """nccl-tests' bus bandwidth numerator: bytes x 2(n-1)/n (ring all-reduce, ref 2.5); / seconds = busbw."""
    return float(nbytes) * 2.0 * (ranks - 1) / ranks


DROP_MIN_SAMPLES = 6


def drop_pct(series):
    """How far the settled value (median of the last third) is below the first samples (median of the first
    fifth, at least 3), in % of the first; negative when it rose. None with fewer than DROP_MIN_SAMPLES."""
    vals = [float(v) for v in series if _is_number(v)]
    if len(vals) < DROP_MIN_SAMPLES:
        return None
    head = median(vals[:max(3, len(vals) // 5)])
    tail = median(vals[-max(2, len(vals) // 3):])
    return None if not head else 100.0 * (head - tail) / head


def throttle_onsets_per_min(samples, duration_s):
    """(onsets per minute, share of samples) of the BAD_THROTTLE reasons: an onset is a sample that has a
    bad reason the previous sample did not (gpud counts events the same way, ref 3.2)."""
    onsets, with_bad, prev = 0, 0, set()
    readable = [s for s in samples if isinstance(s.get("throttle_reasons"), list)]
    for s in readable:
        bad = set(s["throttle_reasons"]) & set(BAD_THROTTLE)
        onsets += len(bad - prev)
        with_bad += bool(bad)
        prev = bad
    if not readable or not duration_s:
        return None, None
    return onsets * 60.0 / duration_s, with_bad / float(len(readable))


def new_xid_events(before, after):
    """Xid events in ``after`` (kmsg.parse_kernel_log) that ``before`` did not hold: a multiset difference
    on the logged lines, so a line logged again during the load counts."""
    seen = {}
    for ev in (before or {}).get("events") or ():
        seen[ev.get("line")] = seen.get(ev.get("line"), 0) + 1
    out = []
    for ev in (after or {}).get("events") or ():
        if seen.get(ev.get("line")):
            seen[ev.get("line")] -= 1
        else:
            out.append(ev)
    return out


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
    if test in ("sustained_gemm", "burn_in_gemm"):
        # the bf16 GEMM held longer; fp16 where the GPU has no BF16 (as bf16_gemm becomes fp16_gemm)
        return spec.get("bf16_tflops") if gemm_test_for(spec) == "bf16_gemm" else spec.get("fp16_tflops")
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


def expectation(test, spec, device="cuda", expected=None, floors=None, model_name=None, gpu_count=None, limit=None):
    """{expected, peak, floor, source} for one test on one GPU; expected None = nothing to compare with.

    For the "at most" entries (AT_MOST) ``expected`` is the limit; ``limit`` is one the GPU itself gave
    (its slowdown temperature). ``gpu_count``: GPUs in the all-reduce (the per-model busbw floors hold for
    the host size they were measured on)."""
    expected = expected or {}
    floors = floors or {}
    keys = [k for k in ((spec or {}).get("key"), (model_name or "").lower() or None) if k]
    if device == "cpu":
        for k in ["cpu"] + keys:
            if test in expected.get(k, {}):
                return {"expected": expected[k][test], "peak": None, "floor": None, "source": "expected[%s]" % k}
        return {"expected": CPU_EXPECTED.get(test), "peak": None, "floor": None,
                "source": "cpu mode floor (mechanics only, not a spec)" if test in CPU_EXPECTED else None}
    for k in keys:
        if test in AT_MOST and test in expected.get(k, {}):
            return {"expected": expected[k][test], "peak": None, "floor": None, "source": "expected[%s]" % k}
    if test in AT_MOST:
        if test == "burn_in_temperature":
            return {"expected": limit, "peak": None, "floor": None,
                    "source": "the GPU's slowdown temperature (NVML)" if limit is not None else
                    "NVML gave no slowdown temperature"}
        return {"expected": LIMITS.get(test), "peak": None, "floor": None,
                "source": "LIMITS[%s] (docs/gate.md, Tiers)" % test}
    pk = peak(test, spec)
    for k in keys:
        if test in expected.get(k, {}):
            return {"expected": expected[k][test], "peak": pk, "floor": (expected[k][test] / pk) if pk else None,
                    "source": "expected[%s]" % k}
    cls = gate_class(spec)
    if test == "nccl_allreduce" and not any(test in floors.get(k, {}) for k in keys + [cls]):
        row = NCCL_BUSBW_FLOORS.get((spec or {}).get("key"))
        if row and gpu_count == row["gpus"]:
            return {"expected": row["busbw"], "peak": pk, "floor": (row["busbw"] / pk) if pk else None,
                    "source": "NCCL_BUSBW_FLOORS[%s], %d GPUs: %s" % (spec["key"], row["gpus"], row["source"])}
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
    if measured is None and entry.get("no_reading"):
        entry["passed"] = None  # nothing to judge with (no NVML, kernel log not readable): said, not failed
        entry["why"] = "not judged: %s" % entry["no_reading"]
    elif measured is None:
        entry["passed"] = False
        entry["why"] = entry.get("why") or "not measured"
    elif expected is None:
        entry["passed"] = None
        entry["why"] = "no expectation: %s; measured %.4g %s (set gate_expected to gate it)" % (
            entry.get("expectation_source") or "unknown GPU", measured, unit)
    elif entry.get("test") in AT_MOST:
        entry["passed"] = measured <= expected
        note = "; %s" % entry["note"] if entry.get("note") else ""
        entry["why"] = "%.4g %s %s limit %.4g %s%s" % (
            measured, unit, "<=" if entry["passed"] else ">", expected, unit, note)
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
        if e.get("measured") is not None and e["test"] not in AT_MOST:
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
                          gpu.get("name"), raw.get("gpus"), raw.get("limit"))
        entry = {k: v for k, v in raw.items() if k not in ("figures", "value")}
        measured = None if stats["median"] is None else round(stats["median"], 4)
        if "value" in raw:  # a finding computed from samples (clock drop, throttle onsets, Xid), not repetitions
            measured = None if raw["value"] is None else round(raw["value"], 4)
            stats["n"] = raw.get("samples_n", stats["n"])
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
