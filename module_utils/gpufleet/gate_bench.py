"""The benchmark gate, measuring part: timed torch benchmarks per GPU (or on the CPU).

``torch`` (and optionally ``pynvml``) are passed in by the caller, so this file imports
neither; ``gate.evaluate`` turns what ``run`` returns into verdicts.

Traps avoided (shared/reference/gpu-performance.md): GEMM inputs are random normal, never
zeros (section 2.1, A100 257 vs 295 TFLOPS); GEMMs are 8192^3 and memory buffers 1 GiB, far
past any L2 (section 2.2, the RTX 4090 "384 %" pitfall); device bandwidth is an SM kernel
(triad-like add), not a copy-engine memcpy (section 2.2, nvbandwidth #48); host buffers are
pinned and both directions are timed (section 2.3); clocks, power limit and throttle reasons
are read right after each test (section 2.1, power caps).
"""

import platform
import time
import warnings

from . import gate
from .nvml import decode_throttle

# Full size on a GPU, small size in cpu mode (same code path, mechanics only).
SIZES = {
    "cuda": {"gemm": 8192, "buffer_mib": 1024, "host_mib": 256},
    "cpu": {"gemm": 512, "buffer_mib": 64, "host_mib": 64},
}
MIN_REPETITIONS = 3
PROBE_RUNS = 5  # runs queued while telemetry is read


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


class _Timer:
    """Seconds of one call of ``op``.

    On a GPU: CUDA events (GPU time), or wall time around synchronised calls for copies that span
    several GPUs. On the CPU: the calling thread's CPU time (torch runs one thread there), so time
    the scheduler gives to other jobs on a shared machine does not count, as a GPU's event timing
    does not count the host's.
    """

    def __init__(self, torch, device, events=True):
        self.torch, self.device, self.events = torch, device, events
        self.clock = time.perf_counter if device == "cuda" else time.thread_time

    def sync(self, *indices):
        if self.device == "cuda":
            for i in indices:
                self.torch.cuda.synchronize(i)

    def __call__(self, op, indices):
        if self.device == "cuda" and self.events:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            start.record()
            op()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
        self.sync(*indices)
        t0 = self.clock()
        op()
        self.sync(*indices)
        return self.clock() - t0


def _repeat(timer, op, indices, work, scale, params, share_s, probe=None):
    """Warm-up, then timed repetitions until ``repetitions`` or the share of the budget is spent.

    ``probe`` (telemetry) is called while a few more runs are queued, so clocks and throttle
    reasons are those of a loaded GPU, not of one that just went idle.
    """
    started = time.monotonic()
    for _unused in range(params["warmup"]):
        op()
    timer.sync(*indices)
    figures = []
    while len(figures) < params["repetitions"]:
        seconds = timer(op, indices)
        if seconds > 0:
            figures.append(work / seconds / scale)
        if len(figures) >= MIN_REPETITIONS and time.monotonic() - started > share_s:
            break
    if probe is not None:
        for _unused in range(PROBE_RUNS):
            op()
        probe()
        timer.sync(*indices)
    return figures


def telemetry(pynvml, handle):
    """Clocks, power and throttle reasons of one GPU right now (NVML), None-filled where unreadable."""
    out = {"sm_mhz": None, "sm_max_mhz": None, "power_limit_w": None, "power_draw_w": None,
           "temperature_c": None, "throttle_reasons": None}
    if pynvml is None or handle is None:
        return out

    def read(fn, *args):
        try:
            return getattr(pynvml, fn)(handle, *args)
        except Exception:
            return None

    sm = getattr(pynvml, "NVML_CLOCK_SM", 1)
    out["sm_mhz"] = read("nvmlDeviceGetClockInfo", sm)
    out["sm_max_mhz"] = read("nvmlDeviceGetMaxClockInfo", sm)
    limit = read("nvmlDeviceGetEnforcedPowerLimit")
    out["power_limit_w"] = round(limit / 1000.0, 1) if limit is not None else None
    draw = read("nvmlDeviceGetPowerUsage")
    out["power_draw_w"] = round(draw / 1000.0, 1) if draw is not None else None
    out["temperature_c"] = read("nvmlDeviceGetTemperature", getattr(pynvml, "NVML_TEMPERATURE_GPU", 0))
    mask = read("nvmlDeviceGetCurrentClocksEventReasons")
    if mask is None:
        mask = read("nvmlDeviceGetCurrentClocksThrottleReasons")
    out["throttle_reasons"] = decode_throttle(mask) if mask is not None else None
    return out


def _telemetry_probe(seen, pynvml, handle):
    """The probe a timed test calls while the GPU is loaded: what telemetry() reads then goes into ``seen``.
    A closure over this call's arguments (not default arguments in a loop), so each test gets its own GPU's."""

    def probe():
        seen.update(telemetry(pynvml, handle))

    return probe


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
        out[i] = {"name": props.name, "spec": specs_lookup(props.name, mib), "uuid": uuid,
                  "compute_capability": (props.major, props.minor), "memory_total_mib": mib}
    return out


def _sizes(torch, device, index, params):
    base = dict(SIZES[device])
    if params.get("gemm_size"):
        base["gemm"] = params["gemm_size"]
    if params.get("buffer_mib"):
        base["buffer_mib"] = base["host_mib"] = params["buffer_mib"]
    if device == "cuda":
        free = torch.cuda.mem_get_info(index)[0]
        # three float32 GEMM operands and three bandwidth buffers must fit in half the free memory
        while base["gemm"] > 1024 and 3 * 4 * base["gemm"] ** 2 > free / 2:
            base["gemm"] //= 2
        while base["buffer_mib"] > 64 and 3 * base["buffer_mib"] * 2 ** 20 > free / 2:
            base["buffer_mib"] //= 2
        base["host_mib"] = min(base["host_mib"], base["buffer_mib"])
    return base


def _gemm(torch, dev, n, dtype):
    gen = torch.Generator(device=dev).manual_seed(1234)
    a = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    c = torch.empty(n, n, device=dev, dtype=dtype)
    return (lambda: torch.matmul(a, b, out=c)), 2.0 * n ** 3, 1e12


def _one(torch, device, index, test, size, params, share_s, timer, probe=None):
    """(figures, details) of one single-GPU test."""
    dev = torch.device("cuda", index) if device == "cuda" else torch.device("cpu")
    details = {}
    if test in ("bf16_gemm", "fp16_gemm", "tf32_gemm"):
        n = size["gemm"]
        dtype = {"bf16_gemm": torch.bfloat16, "fp16_gemm": torch.float16, "tf32_gemm": torch.float32}[test]
        details.update(size="%dx%dx%d" % (n, n, n), dtype=str(dtype).replace("torch.", ""))
        op, work, scale = _gemm(torch, dev, n, dtype)
        if test == "tf32_gemm" and device == "cuda":
            saved = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = True
            details["dtype"] = "tf32"
            try:
                return _repeat(timer, op, (index,), work, scale, params, share_s, probe), details
            finally:
                torch.backends.cuda.matmul.allow_tf32 = saved
        return _repeat(timer, op, (index,), work, scale, params, share_s, probe), details
    if test == "memory_bandwidth":
        n = size["buffer_mib"] * 2 ** 20 // 4
        a = torch.rand(n, device=dev)
        b = torch.rand(n, device=dev)
        c = torch.empty(n, device=dev)
        details.update(size="3 x %d MiB float32" % size["buffer_mib"],
                       kernel="c = a + 2*b (triad-like%s)" % (", SM kernel" if device == "cuda" else ""))
        return _repeat(timer, lambda: torch.add(a, b, alpha=2.0, out=c), (index,), 3.0 * n * 4, 1e9,
                       params, share_s, probe), details
    if test in ("h2d_bandwidth", "d2h_bandwidth"):
        nbytes = size["host_mib"] * 2 ** 20
        pinned = device == "cuda"
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned).fill_(1)
        gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        src, dst = (host, gpu) if test == "h2d_bandwidth" else (gpu, host)
        details.update(size="%d MiB" % size["host_mib"], pinned=pinned)
        return _repeat(timer, lambda: dst.copy_(src, non_blocking=pinned), (index,), float(nbytes), 1e9,
                       params, share_s, probe), details
    raise ValueError("not a single-GPU test: %s" % test)


def _p2p(torch, src_i, dst_i, size, params, share_s, probe=None):
    nbytes = size["buffer_mib"] * 2 ** 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", src_i)).fill_(1)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", dst_i))
    details = {"size": "%d MiB" % size["buffer_mib"], "peer": dst_i,
               "peer_access": bool(torch.cuda.can_device_access_peer(src_i, dst_i))}
    wall = _Timer(torch, "cuda", events=False)
    return _repeat(wall, lambda: dst.copy_(src), (src_i, dst_i), float(nbytes), 1e9, params, share_s, probe), details


def _allreduce(torch, count, size, params, share_s):
    from torch.cuda import nccl  # single process, one tensor per GPU

    n = size["buffer_mib"] * 2 ** 20 // 4
    tensors = [torch.ones(n, device=torch.device("cuda", i)) for i in range(count)]
    # nccl-tests' bus bandwidth: bytes x 2(n-1)/n per second (section 2.5: ring algorithm)
    work = n * 4.0 * 2.0 * (count - 1) / count
    wall = _Timer(torch, "cuda", events=False)
    figures = _repeat(wall, lambda: nccl.all_reduce(tensors), tuple(range(count)), work, 1e9, params, share_s)
    return figures, {"size": "%d MiB float32 per GPU" % size["buffer_mib"], "gpus": count, "scope": "host"}


def run(torch, params, specs_lookup, pynvml=None):
    """Run the gate's tests; returns {gpus, raw, skipped, device_count, torch_version, duration_s}.

    Raises CudaUnavailable (device cuda without a usable GPU) and gate.GateInputError (budget too
    small for this host's GPU count).
    """
    started = time.monotonic()
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
        if t in gate.MULTI_GPU_TESTS and count < 2:
            skipped.append({"test": t, "why": "needs two or more GPUs (%s has %d)" % (device, count)})
        else:
            tests.append(t)
    share = gate.check_budget(params["time_budget_s"], tests, count) if tests else 0.0
    handles = _nvml_handles(pynvml, torch, count) if device == "cuda" else {}
    timer = _Timer(torch, device)
    raw = []
    for i in sorted(gpus):
        if device == "cuda":
            # CUDA events record on the current device's stream: make it the GPU under test
            torch.cuda.set_device(i)
        size = _sizes(torch, device, i, params)
        for test in tests:
            if test == "nccl_allreduce":
                continue
            name = test
            if test in ("bf16_gemm", "fp16_gemm") and device == "cuda":
                name = gate.gemm_test_for(gpus[i]["spec"], gpus[i]["compute_capability"])
            entry = {"index": i, "test": name, "device": gpus[i]["name"], "uuid": gpus[i].get("uuid"),
                     "mode": device, "figures": []}
            if name != test:
                entry["substituted_for"] = test
            t0 = time.monotonic()
            seen = telemetry(None, None)
            probe = _telemetry_probe(seen, pynvml, handles.get(i)) if device == "cuda" else None

            try:
                if test == "p2p_bandwidth":
                    figures, details = _p2p(torch, i, (i + 1) % count, size, params, share, probe)
                else:
                    figures, details = _one(torch, device, i, name, size, params, share, timer, probe)
                entry["figures"] = figures
                entry.update(details)
            except Exception as exc:  # one broken test must not hide the others
                entry["error"] = "%s failed: %s: %s" % (name, type(exc).__name__, str(exc)[:300])
            entry["duration_s"] = round(time.monotonic() - t0, 3)
            entry.update(seen)
            raw.append(entry)
    if "nccl_allreduce" in tests:
        t0 = time.monotonic()
        size = min((_sizes(torch, device, i, params) for i in gpus), key=lambda s: s["buffer_mib"])
        try:
            figures, details = _allreduce(torch, count, size, params, share * count)
            error = None
        except Exception as exc:
            figures, details, error = [], {}, "nccl_allreduce failed: %s: %s" % (type(exc).__name__, str(exc)[:300])
        for i in sorted(gpus):
            entry = {"index": i, "test": "nccl_allreduce", "device": gpus[i]["name"], "mode": device,
                     "figures": list(figures), "duration_s": round(time.monotonic() - t0, 3)}
            entry.update(details)
            if error:
                entry["error"] = error
            entry.update(telemetry(pynvml, handles.get(i)))
            raw.append(entry)
    return {"gpus": gpus, "raw": raw, "skipped": skipped, "device_count": count,
            "torch_version": str(torch.__version__), "duration_s": round(time.monotonic() - started, 3)}
