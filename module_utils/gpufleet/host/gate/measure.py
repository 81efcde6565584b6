# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark gate's measuring primitives on one GPU (or the CPU): the timer (CUDA events, wall or thread
CPU time), the repetition loop, NVML telemetry read under load, sizes fitted to free memory, the GEMM and the
single-GPU tests (GEMMs, device bandwidth, host copies). ``gate_bench.run`` drives them; torch is passed in.
"""

import time

from ..gpu.nvml import decode_throttle
from . import rules as gate

# Full size on a GPU, small size in cpu mode (same code path, mechanics only). allreduce_mib: the gloo
# stand-in's buffer per process in cpu mode (the GPU all-reduce uses buffer_mib).
SIZES = {
    "cuda": {"gemm": 8192, "buffer_mib": 1024, "host_mib": 256, "allreduce_mib": 1024},
    "cpu": {"gemm": 512, "buffer_mib": 64, "host_mib": 64, "allreduce_mib": 16},
}
MIN_REPETITIONS = 3
PROBE_RUNS = 5  # runs queued while telemetry is read


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


def _repeat(timer, op, indices, work, scale, params, share_s, probe=None, budget=None):
    """Warm-up, then timed repetitions until ``repetitions`` or the share of the budget is spent.

    ``probe`` (telemetry) is called while a few more runs are queued, so clocks and throttle
    reasons are those of a loaded GPU, not of one that just went idle. ``budget``: the tier's hard
    budget; past its end no repetition starts, even below MIN_REPETITIONS.
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
        if budget is not None and budget.over():
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


def _sizes(torch, device, index, params):
    base = dict(SIZES[device])
    if params.get("gemm_size"):
        base["gemm"] = params["gemm_size"]
    if params.get("buffer_mib"):
        base["buffer_mib"] = base["host_mib"] = params["buffer_mib"]
    if device == "cuda":
        free = torch.cuda.mem_get_info(index)[0]
        base["free_mib"] = int(free // 2 ** 20)
        # three float32 GEMM operands and three bandwidth buffers must fit in half the free memory
        while base["gemm"] > 1024 and 3 * 4 * base["gemm"] ** 2 > free / 2:
            base["gemm"] //= 2
        while base["buffer_mib"] > 64 and 3 * base["buffer_mib"] * 2 ** 20 > free / 2:
            base["buffer_mib"] //= 2
        base["host_mib"] = min(base["host_mib"], base["buffer_mib"])
    return base


def below_l2(size, spec, params):
    """Why the memory test on a GPU cannot run with ``size`` (what _sizes gave for ``params``), or None: its buffers
    are not at least gate.L2_MULTIPLE x the GPU's L2 (``spec``'s ``l2_mb``; the largest in the table where it has
    none), so it would time the cache, not the memory."""
    l2 = gate.l2_mb(spec)
    need = gate.min_buffer_mib(l2)
    got = size["buffer_mib"]
    if got >= need:
        return None
    l2_text = ("the GPU's %s MiB L2" % l2 if (spec or {}).get("l2_mb") else
               "%s MiB, the largest L2 in the spec table (none known for this GPU)" % l2)
    asked = params.get("buffer_mib") or SIZES["cuda"]["buffer_mib"]
    if got < asked and size.get("free_mib") is not None:  # _sizes shrank them to fit the free memory
        cause = "free memory too small to measure past the L2 (%d MiB free)" % size["free_mib"]
    else:
        cause = "buffer_mib too small to measure past the L2"
    return "%s: buffers of %d x %d MiB are under %d x %s (%d x %d MiB needed); not measured" % (
        cause, gate.TRIAD_BUFFERS, got, gate.L2_MULTIPLE, l2_text, gate.TRIAD_BUFFERS, need)


def _gemm(torch, dev, n, dtype):
    gen = torch.Generator(device=dev).manual_seed(1234)
    a = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    c = torch.empty(n, n, device=dev, dtype=dtype)
    return (lambda: torch.matmul(a, b, out=c)), 2.0 * n ** 3, 1e12


def _one(torch, device, index, test, size, params, share_s, timer, probe=None, budget=None):
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
                return _repeat(timer, op, (index,), work, scale, params, share_s, probe, budget), details
            finally:
                torch.backends.cuda.matmul.allow_tf32 = saved
        return _repeat(timer, op, (index,), work, scale, params, share_s, probe, budget), details
    if test == "memory_bandwidth":
        n = size["buffer_mib"] * 2 ** 20 // 4
        a = torch.rand(n, device=dev)
        b = torch.rand(n, device=dev)
        c = torch.empty(n, device=dev)
        details.update(size="3 x %d MiB float32" % size["buffer_mib"],
                       kernel="c = a + 2*b (triad-like%s)" % (", SM kernel" if device == "cuda" else ""))
        return _repeat(timer, lambda: torch.add(a, b, alpha=2.0, out=c), (index,), 3.0 * n * 4, 1e9,
                       params, share_s, probe, budget), details
    if test in ("h2d_bandwidth", "d2h_bandwidth"):
        nbytes = size["host_mib"] * 2 ** 20
        pinned = device == "cuda"
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned).fill_(1)
        gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        src, dst = (host, gpu) if test == "h2d_bandwidth" else (gpu, host)
        details.update(size="%d MiB" % size["host_mib"], pinned=pinned)
        return _repeat(timer, lambda: dst.copy_(src, non_blocking=pinned), (index,), float(nbytes), 1e9,
                       params, share_s, probe, budget), details
    raise ValueError("not a single-GPU test: %s" % test)
