"""The benchmark gate, measuring part: timed torch benchmarks per GPU (or on the CPU).

``torch`` (and optionally ``pynvml``) are passed in by the caller, so this file imports
neither; ``gate.evaluate`` turns what ``run`` returns into verdicts.

Traps avoided (shared/reference/gpu-performance.md): GEMM inputs are random normal, never
zeros (section 2.1, A100 257 vs 295 TFLOPS); GEMMs are 8192^3 and memory buffers 1 GiB, far
past any L2 (section 2.2, the RTX 4090 "384 %" pitfall), and a memory test whose buffers free memory
shrank under 8 x its GPU's L2 is failed, not timed (``gate_measure.below_l2``); device bandwidth is an SM kernel
(triad-like add), not a copy-engine memcpy (section 2.2, nvbandwidth #48); host buffers are
pinned and both directions are timed (section 2.3); clocks, power limit and throttle reasons
are read right after each test (section 2.1, power caps).

The measuring primitives are in ``gate_measure``, the multi-GPU tests in ``gate_multi``, the sustained load and
burn-in in ``gate_load``; this file holds the budget and ``run``, which orchestrates them.
"""

import platform
import time
import warnings

from ..system import hostctx, kmsg
from . import rules as gate
from .load import _load_sizes, _slowdown_temperature, sustained_entries, sustained_load
from .measure import _one, _sizes, _telemetry_probe, _Timer, below_l2, telemetry
from .multi import _allreduce_entries, _p2p

# Idle seconds before the TF32 GEMM on a GPU (it follows that GPU's bf16 GEMM). Without them, on a lent H200 at its
# 700 W limit, two runs of the gate gave TF32 medians 5.4-7.5 % apart with 5-13 % spread inside a run, the
# power limit still settling from the bf16 GEMM (docs/gpu-validation.md); every other test was within 2.6 %.
TF32_REST_S = 1.0
# The gloo stand-in starts two Pythons that import torch: seconds that takes before anything is timed.
GLOO_START_S = 4.0
# Seconds the burn-in leaves at the end of the budget for reading the kernel log and returning.
BURN_IN_MARGIN_S = {"cuda": 10.0, "cpu": 0.5}


class Budget:
    """The tier's hard time budget: what is left, and the tests refused once it is spent.

    ``clock`` is injectable so the rule is tested without waiting."""

    def __init__(self, seconds, clock=time.monotonic):
        self.seconds, self.clock = float(seconds), clock
        self.started = clock()
        self.deadline = self.started + self.seconds
        self.stopped = None  # the first refusal's reason

    def used(self):
        return self.clock() - self.started

    def left(self):
        return self.deadline - self.clock()

    def over(self):
        return self.clock() >= self.deadline

    def refuse(self, test, need_s, index=None):
        """A skipped entry for a test that cannot fit in what is left (and the budget marked as spent)."""
        why = "time budget: %.1f s of %.0f s used, %.1f s left, %s needs at least %.1f s" % (
            self.used(), self.seconds, max(0.0, self.left()), test, need_s)
        self.stopped = self.stopped or why
        out = {"test": test, "why": why, "budget": True}
        if index is not None:
            out["index"] = index
        return out


class CudaUnavailable(RuntimeError):
    """torch cannot use CUDA on this host; ``text`` carries torch's own warning or error."""

    def __init__(self, message, text):
        RuntimeError.__init__(self, message)
        self.text = text


def probe_cuda(torch):
    """(device_count, text): text is every warning / error torch gave while looking for CUDA."""
    texts = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            available = bool(torch.cuda.is_available())
            count = int(torch.cuda.device_count()) if available else 0
        except Exception as exc:  # a broken driver can raise here
            available, count = False, 0
            texts.append("%s: %s" % (type(exc).__name__, exc))
        if not available:
            try:
                torch.cuda.init()
            except Exception as exc:
                texts.append("%s: %s" % (type(exc).__name__, exc))
    texts = [str(w.message) for w in caught] + texts
    return count, "\n".join(t for t in texts if t)


def _nvml_handles(pynvml, torch, count):
    handles = {}
    if pynvml is None:
        return handles
    try:
        pynvml.nvmlInit()
    except Exception:
        return handles
    for i in range(count):
        try:
            uuid = str(torch.cuda.get_device_properties(i).uuid)
            handles[i] = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else "GPU-" + uuid)
        except Exception:
            handles[i] = None
    return handles


def describe_gpus(torch, device, count, specs_lookup):
    """{index: {name, spec, compute_capability, memory_total_mib}} of the devices the gate runs on."""
    if device == "cpu":
        return {0: {"name": "cpu (%s)" % (platform.processor() or platform.machine()), "spec": None, "uuid": None,
                    "compute_capability": None, "memory_total_mib": None}}
    out = {}
    for i in range(count):
        props = torch.cuda.get_device_properties(i)
        mib = int(props.total_memory) // (1024 * 1024)
        uuid = str(getattr(props, "uuid", "") or "") or None
        bus = getattr(props, "pci_bus_id", None)  # for joining Xid lines (domain:bus:device) to this GPU
        pci = kmsg.normalize_pci("%x:%x:%x" % (getattr(props, "pci_domain_id", 0), bus,
                                               getattr(props, "pci_device_id", 0))) if bus is not None else None
        out[i] = {"name": props.name, "spec": specs_lookup(props.name, mib), "uuid": uuid, "pci": pci,
                  "compute_capability": (props.major, props.minor), "memory_total_mib": mib}
    return out


def read_xids(run=None):
    """Parsed kernel log (kmsg) or {"reason"}: read before and after the burn-in's load."""
    try:
        got = kmsg.read_kernel_log(run or hostctx.command_runner())
    except Exception as exc:
        return {"reason": "%s: %s" % (type(exc).__name__, exc)}
    if got.get("text") is None:
        return {"reason": got.get("reason") or "no kernel log"}
    return kmsg.parse_kernel_log(got["text"], got.get("source"))


def run(torch, params, specs_lookup, pynvml=None, kernel_log=read_xids, clock=time.monotonic):
    """Run the gate's tests; returns {gpus, raw, skipped, device_count, torch_version, duration_s, budget}.

    Per-GPU tests first (each an equal share of what the sustained GEMM and burn-in leave), then the
    all-reduce, the sustained GEMM and the burn-in on all GPUs at once. Once the tier's budget cannot
    hold a test, that test is listed in ``skipped`` with the reason and nothing more starts.
    Raises CudaUnavailable (device cuda without a usable GPU) and gate.GateInputError (budget too
    small for this host's GPU count).
    """
    budget = Budget(params["time_budget_s"], clock)
    device = params["device"]
    if device == "cuda":
        count, text = probe_cuda(torch)
        if count < 1:
            raise CudaUnavailable("torch %s cannot use CUDA on this host" % torch.__version__, text)
    else:
        count = 1
        # one thread: on a shared CI machine fewer threads means fewer figures bent by other jobs
        torch.set_num_threads(1)
    gpus = describe_gpus(torch, device, count, specs_lookup)
    skipped = []
    tests = []
    for t in params["tests"]:
        if t in gate.MULTI_GPU_TESTS and count < 2 and not (t == "nccl_allreduce" and device == "cpu"):
            skipped.append({"test": t, "why": "needs two or more GPUs (%s has %d)" % (device, count)})
        else:
            tests.append(t)
    reserved = gate.reserved_s(dict(params, tests=tests))
    slot_tests = gate.per_gpu_tests(tests) + [t for t in tests if t == "nccl_allreduce"]
    share = gate.check_budget(params["time_budget_s"], slot_tests, count, reserved) if slot_tests else 0.0
    handles = _nvml_handles(pynvml, torch, count) if device == "cuda" else {}
    timer = _Timer(torch, device)
    raw = []
    sizes = {}
    for i in sorted(gpus):
        if device == "cuda":
            # CUDA events record on the current device's stream: make it the GPU under test
            torch.cuda.set_device(i)
        size = sizes[i] = _sizes(torch, device, i, params)
        for test in gate.per_gpu_tests(tests):
            name = test
            if test in ("bf16_gemm", "fp16_gemm") and device == "cuda":
                name = gate.gemm_test_for(gpus[i]["spec"], gpus[i]["compute_capability"])
            # the budget's end is hard: a test that cannot run its minimum in what is left does not start
            if budget.left() < gate.MIN_SECONDS_PER_TEST:
                skipped.append(budget.refuse(name, gate.MIN_SECONDS_PER_TEST, i))
                continue
            entry = {"index": i, "test": name, "device": gpus[i]["name"], "uuid": gpus[i].get("uuid"),
                     "mode": device, "figures": []}
            if name != test:
                entry["substituted_for"] = test
            if name == "tf32_gemm" and device == "cuda" and budget.left() > TF32_REST_S + gate.MIN_SECONDS_PER_TEST:
                # the bf16 GEMM just before it left the GPU at its power limit: let the clocks come back
                time.sleep(TF32_REST_S)
                entry["rested_s"] = TF32_REST_S
            t0 = time.monotonic()
            seen = telemetry(None, None)
            probe = _telemetry_probe(seen, pynvml, handles.get(i)) if device == "cuda" else None

            short = below_l2(size, gpus[i]["spec"], params) if name == "memory_bandwidth" and device == "cuda" \
                else None
            try:
                if short:
                    # buffers inside (or near) the L2 would time the cache: no figure, an error entry that
                    # gate.evaluate fails (passed False), never one that could pass a GPU with bad memory
                    figures, details = [], {"size": "%d x %d MiB float32" % (gate.TRIAD_BUFFERS, size["buffer_mib"])}
                    entry["error"] = short
                elif test == "p2p_bandwidth":
                    figures, details = _p2p(torch, i, (i + 1) % count, size, params, share, probe, budget)
                else:
                    figures, details = _one(torch, device, i, name, size, params, share, timer, probe, budget)
                entry["figures"] = figures
                entry.update(details)
            except Exception as exc:  # one broken test must not hide the others
                entry["error"] = "%s failed: %s: %s" % (name, type(exc).__name__, str(exc)[:300])
            entry["duration_s"] = round(time.monotonic() - t0, 3)
            entry.update(seen)
            raw.append(entry)
    if "nccl_allreduce" in tests:
        need = gate.MIN_SECONDS_PER_TEST + (GLOO_START_S if device == "cpu" else 0.0)
        if budget.left() - reserved < need:
            skipped.append(budget.refuse("nccl_allreduce", need + reserved))
        else:
            raw.extend(_allreduce_entries(torch, device, gpus, count, params, share, budget, reserved, pynvml,
                                          handles))
    if "sustained_gemm" in tests:
        if budget.left() < params["sustained_s"]:
            skipped.append(budget.refuse("sustained_gemm", params["sustained_s"]))
        else:
            load = sustained_load(torch, device, gpus, _load_sizes(torch, device, gpus, sizes, params),
                                  params["sustained_s"], pynvml, handles, budget=budget, clock=budget.clock)
            raw.extend(sustained_entries(load, gpus, device, ""))
    if "burn_in" in tests:
        seconds = budget.left() - BURN_IN_MARGIN_S[device]
        if seconds < gate.BURN_IN_MIN_S[device]:
            skipped.append(budget.refuse("burn_in", gate.BURN_IN_MIN_S[device] + BURN_IN_MARGIN_S[device]))
        else:
            before = kernel_log()
            slowdown = {i: _slowdown_temperature(pynvml, handles.get(i)) for i in gpus} if handles else {}
            load = sustained_load(torch, device, gpus, _load_sizes(torch, device, gpus, sizes, params), seconds,
                                  pynvml, handles, memory=True, budget=budget, clock=budget.clock)
            after = kernel_log()
            xid = before if before.get("reason") else (after if after.get("reason") else {
                "events": gate.new_xid_events(before, after), "source": after.get("source")})
            raw.extend(sustained_entries(load, gpus, device, "burn_in_", xid, slowdown))
    wall = round(budget.used(), 3)
    within = wall <= params["time_budget_s"]
    if not within:
        # The budget is hard: a gate that ended past it says so (the module's budget_spent and budget_note),
        # never "finished within the budget"; after a refusal, the note names both.
        overrun = "time budget overrun: %.1f s of %.0f s used, %.1f s past its end" % (
            wall, params["time_budget_s"], wall - params["time_budget_s"])
        budget.stopped = overrun if budget.stopped is None else "%s; then %s" % (budget.stopped, overrun)
    return {"gpus": gpus, "raw": raw, "skipped": skipped, "device_count": count,
            "torch_version": str(torch.__version__), "duration_s": wall,
            "budget": {"tier": params["tier"], "time_budget_s": params["time_budget_s"], "wall_s": wall,
                       "within": within, "stopped": budget.stopped}}
