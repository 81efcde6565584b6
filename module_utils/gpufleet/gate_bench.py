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

import json
import os
import platform
import socket
import subprocess
import sys
import time
import warnings

from . import gate, hostctx, kmsg
from .nvml import decode_throttle

# Full size on a GPU, small size in cpu mode (same code path, mechanics only). allreduce_mib: the gloo
# stand-in's buffer per process in cpu mode (the GPU all-reduce uses buffer_mib).
SIZES = {
    "cuda": {"gemm": 8192, "buffer_mib": 1024, "host_mib": 256, "allreduce_mib": 1024},
    "cpu": {"gemm": 512, "buffer_mib": 64, "host_mib": 64, "allreduce_mib": 16},
}
MIN_REPETITIONS = 3
PROBE_RUNS = 5  # runs queued while telemetry is read
# Idle seconds before the TF32 GEMM on a GPU (it follows that GPU's bf16 GEMM). Without them, on a lent H200 at its
# 700 W limit, two runs of the gate gave TF32 medians 5.4-7.5 % apart with 5-13 % spread inside a run, the
# power limit still settling from the bf16 GEMM (docs/gpu-validation.md); every other test was within 2.6 %.
TF32_REST_S = 1.0
# Samples over a sustained GEMM or a burn-in: about this many, at most one per MAX_INTERVAL_S.
SAMPLES, MIN_INTERVAL_S, MAX_INTERVAL_S = 60, 0.1, 2.0
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


def _p2p(torch, src_i, dst_i, size, params, share_s, probe=None, budget=None):
    nbytes = size["buffer_mib"] * 2 ** 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", src_i)).fill_(1)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", dst_i))
    details = {"size": "%d MiB" % size["buffer_mib"], "peer": dst_i,
               "peer_access": bool(torch.cuda.can_device_access_peer(src_i, dst_i))}
    wall = _Timer(torch, "cuda", events=False)
    figures = _repeat(wall, lambda: dst.copy_(src), (src_i, dst_i), float(nbytes), 1e9, params, share_s, probe, budget)
    return figures, details


def _allreduce(torch, count, size, params, share_s, budget=None):
    from torch.cuda import nccl  # single process, one tensor per GPU

    n = size["buffer_mib"] * 2 ** 20 // 4
    tensors = [torch.ones(n, device=torch.device("cuda", i)) for i in range(count)]
    work = gate.allreduce_bus_bytes(n * 4, count)
    wall = _Timer(torch, "cuda", events=False)
    figures = _repeat(wall, lambda: nccl.all_reduce(tensors), tuple(range(count)), work, 1e9, params, share_s,
                      budget=budget)
    return figures, {"size": "%d MiB float32 per GPU" % size["buffer_mib"], "gpus": count, "scope": "host",
                     "backend": "nccl", "bus_bytes": work}


# The cpu mode's stand-in for NCCL: one of two processes in a gloo all-reduce over 127.0.0.1. Rank 0
# decides when to stop (repetitions or share spent) and tells rank 1, so both leave the loop together.
# Wall time: an all-reduce is mostly waiting for the other rank, which thread CPU time would not count.
_GLOO_CHILD = r"""
import json, sys, time
import torch
import torch.distributed as dist
rank, port, n, warmup, reps, share = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                      int(sys.argv[5]), float(sys.argv[6]))
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
t = torch.ones(n)
dist.all_reduce(t)
if float(t[0]) != 2.0 or float(t[-1]) != 2.0:
    raise SystemExit("all-reduce returned %r, expected 2.0" % float(t[0]))
for _ in range(warmup):
    dist.all_reduce(t)
seconds, started = [], time.monotonic()
while True:
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(t)
    seconds.append(time.perf_counter() - t0)
    stop = torch.tensor([int(len(seconds) >= reps or (len(seconds) >= 3 and time.monotonic() - started > share))])
    dist.broadcast(stop, 0)
    if int(stop[0]):
        break
dist.destroy_process_group()
print(json.dumps({"rank": rank, "seconds": seconds}))
"""


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _allreduce_gloo(size, params, share_s, timeout_s, python=None):
    """(figures, details): the gloo all-reduce between two processes; busbw through allreduce_bus_bytes."""
    n = size["allreduce_mib"] * 2 ** 20 // 4
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    argv = [python or sys.executable, "-c", _GLOO_CHILD]
    args = [str(port), str(n), str(params["warmup"]), str(params["repetitions"]), "%.3f" % share_s]
    procs = [subprocess.Popen(argv + [str(rank)] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, text=True) for rank in (0, 1)]
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=max(1.0, timeout_s)))
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
            proc.wait()
        raise RuntimeError("the gloo all-reduce did not finish within the %.1f s the budget left" % timeout_s) from None
    for proc, (_unused, err) in zip(procs, outs):
        if proc.returncode != 0:
            raise RuntimeError("gloo rank exited %s: %s" % (proc.returncode, (err.strip().splitlines() or [""])[-1]))
    seconds = json.loads(outs[0][0].strip().splitlines()[-1])["seconds"]
    work = gate.allreduce_bus_bytes(n * 4, 2)
    figures = [work / sec / 1e9 for sec in seconds if sec > 0]
    return figures, {"size": "%d MiB float32 per process" % size["allreduce_mib"], "gpus": 2, "scope": "host",
                     "backend": "gloo (2 processes on 127.0.0.1, stands in for NCCL)", "bus_bytes": work,
                     "seconds": [round(sec, 6) for sec in seconds]}


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


def read_xids(run=None):
    """Parsed kernel log (kmsg) or {"reason"}: read before and after the burn-in's load."""
    try:
        got = kmsg.read_kernel_log(run or hostctx.popen_runner())
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

            try:
                if test == "p2p_bandwidth":
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


def _load_sizes(torch, device, gpus, sizes, params):
    return {i: sizes.get(i) or _sizes(torch, device, i, params) for i in gpus}


def _allreduce_entries(torch, device, gpus, count, params, share, budget, reserved, pynvml, handles):
    t0 = time.monotonic()
    try:
        if device == "cpu":
            size = _sizes(torch, device, 0, params)
            figures, details = _allreduce_gloo(size, params, share, budget.left() - reserved)
        else:
            size = min((_sizes(torch, device, i, params) for i in gpus), key=lambda s: s["buffer_mib"])
            figures, details = _allreduce(torch, count, size, params, share * count, budget)
        error = None
    except Exception as exc:
        figures, details, error = [], {}, "nccl_allreduce failed: %s: %s" % (type(exc).__name__, str(exc)[:300])
    out = []
    for i in sorted(gpus):
        entry = {"index": i, "test": "nccl_allreduce", "device": gpus[i]["name"], "mode": device,
                 "figures": list(figures), "duration_s": round(time.monotonic() - t0, 3)}
        entry.update(details)
        if error:
            entry["error"] = error
        entry.update(telemetry(pynvml, handles.get(i)))
        out.append(entry)
    return out
