"""A stand-in for ``torch`` on a CUDA machine, and for the NVML that watches it.

It is a double for the *hardware*, like ``fake_pynvml``: ``gate_bench`` gets ``machine.torch``
(and ``machine.nvml``) injected and runs its ``device == "cuda"`` code on it. Tensors are shape and
dtype only. Each kernel or copy is queued on a device's stream and takes a scripted time, derived
from its work and a synthetic rate: a GEMM ``2 n^3 / (TFLOPS x 1e12)`` seconds, a memory kernel or
copy ``bytes / (GB/s x 1e9)``, an all-reduce the ring's ``2 (n-1)`` steps of ``bytes / n`` over
each link. CUDA semantics the gate relies on are kept:

* kernels run asynchronously on the stream of the device their tensors live on; ``Event.record``
  marks the stream of the *current* device (``set_device`` / ``torch.cuda.device``);
  ``elapsed_time`` is in milliseconds, only between two completed timing events of one device;
* ``synchronize`` (device or event) makes the host wait for the stream;
* a pinned host buffer with ``non_blocking`` copies asynchronously at the pinned rate; a pageable
  one (or a blocking copy) at the pageable rate, and the host waits for it;
* a memory kernel (or a copy inside one GPU) whose working set, the bytes it touches, fits in the GPU's L2 is
  served from the L2 at L2_SPEEDUP x the HBM rate, as on a real card (an RTX 4090 read "3.87 TB/s" of its
  1.008 TB/s with 16 MB buffers); past the L2 a streaming kernel evicts each line before it is read again and
  runs at the HBM rate. Copies to the host or a peer run at their link's rate, whatever their size. Every
  memory kernel and copy is logged in ``machine.memory_ops`` (op, GPUs, bytes, working set, from the L2 or not);
* FP32 matmul runs at the TF32 rate only while ``torch.backends.cuda.matmul.allow_tf32`` is set;
* zero or uninitialised GEMM inputs run faster than random ones (A100 8192^3: 295 vs 257 TFLOPS,
  docs/gate.md "Zero-filled inputs"), so a gate that lost its ``randn`` would show it;
* allocations count against the device's memory (``mem_get_info``), an allocation past it raises
  torch's "CUDA out of memory";
* a GPU's SM clock, power, temperature and clocks-event reasons are a scripted function of time;
  a GEMM's rate follows the SM clock (rate x sm_mhz / sm_max_mhz).

Time: the machine keeps its own clock, ``machine.now``, which moves only when the host waits for a device, so
a test injects it as the gate's clock (and, where gate_bench reads the wall clock, as its ``time``:
test_gate_bench_cuda's ``virtual_time``) and every time is exact, however busy the machine running the test.
"""

import collections
import types

from tests.unit.doubles.fake_pynvml import _THROTTLE_BITS, NVMLError, NVMLError_NotSupported

GIB = 2 ** 30
ZERO_INPUT_SPEEDUP = 295.0 / 257.0  # A100 8192^3 BF16: zeros vs randn (docs/gate.md, ref 2.1 "Data matters")

# The L2's rate over the HBM's: an RTX 4090 (1.008 TB/s GDDR6X, 72 MB L2) read "3.87 TB/s" with buffers of 16 MB
# (shared/reference/gpu-performance.md section 2.2, the "Pitfall" row, mli issue #4).
L2_SPEEDUP = 3870.0 / 1008.0
MAX_QUEUED = 1024  # launches a CUDA stream queues before the host blocks
DEFAULT_TELEMETRY = {"sm_mhz": 1980, "sm_max_mhz": 1980, "mem_mhz": 2619, "power_limit_w": 700.0,
                     "power_draw_w": 690.0, "temperature_c": 65, "throttle_reasons": ["sw_power_cap"],
                     "slowdown_c": 87, "shutdown_c": 92}


class FakeDtype:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return "torch." + self.name


bfloat16, float16, float32, uint8 = (FakeDtype("bfloat16", 2), FakeDtype("float16", 2), FakeDtype("float32", 4),
                                     FakeDtype("uint8", 1))


class FakeDevice:
    def __init__(self, kind, index=None):
        if kind not in ("cuda", "cpu"):
            raise RuntimeError("Expected one of cpu, cuda device type at start of device string: %s" % kind)
        self.type, self.index = kind, (index if kind == "cuda" else None)

    def __eq__(self, other):
        return isinstance(other, FakeDevice) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return "device(type=%r%s)" % (self.type, "" if self.index is None else ", index=%d" % self.index)


class FakeGpu:
    """One GPU: identity, memory and the synthetic rates its kernels and copies run at.

    ``tflops``: {"bfloat16", "float16", "tf32", "float32"} -> dense TFLOPS at the max SM clock (None: the
    GPU cannot run that dtype, torch raises). ``telemetry``: a dict, or a function of the seconds since the
    machine started returning a dict, overriding DEFAULT_TELEMETRY (NVML's view and the GEMM clock). ``l2_mb``:
    the L2 in MiB, as NVIDIA's "50 MB" for an H100 is (CUDA's l2CacheSize there: 52428800 bytes).
    """

    def __init__(self, name="NVIDIA H100 80GB HBM3", total_mib=81559, used_mib=500, cc=(9, 0),
                 tflops=None, hbm_gbs=2900.0, h2d_gbs=55.0, d2h_gbs=53.0, pageable_gbs=12.0, uuid=None,
                 pci_bus_id=0x18, telemetry=None, l2_mb=50.0):
        self.name, self.total = name, total_mib * 2 ** 20
        self.used_elsewhere = used_mib * 2 ** 20  # the driver's and other processes' share
        self.cc = cc
        self.tflops = dict({"bfloat16": 750.0, "float16": 750.0, "tf32": 380.0, "float32": 51.0}, **(tflops or {}))
        self.hbm_gbs, self.h2d_gbs, self.d2h_gbs, self.pageable_gbs = hbm_gbs, h2d_gbs, d2h_gbs, pageable_gbs
        self.l2_bytes = l2_mb * 2 ** 20
        self.uuid, self.pci_bus_id = uuid, pci_bus_id
        self.telemetry = telemetry
        # set by the machine
        self.index = None
        self.t = 0.0  # when this device's stream has done everything queued on it
        self.allocated = self.peak_allocated = 0
        self.pending = collections.deque()  # end times of the launches still queued


class _Props:
    def __init__(self, gpu):
        self.name, self.total_memory = gpu.name, gpu.total
        self.major, self.minor = gpu.cc
        self.uuid = gpu.uuid  # torch prints it without NVML's "GPU-" prefix
        self.pci_domain_id, self.pci_bus_id, self.pci_device_id = 0, gpu.pci_bus_id, 0
        self.multi_processor_count = 132


class FakeTensor:
    """Shape, dtype, device and what it was filled with; no data."""

    def __init__(self, machine, shape, dtype, device, content, pinned=False):
        self.machine, self.shape, self.dtype, self.device = machine, tuple(shape), dtype, device
        self.content, self.pinned, self._held = content, pinned, 0
        numel = 1
        for n in self.shape:
            numel *= int(n)
        self.numel_, self.nbytes = numel, numel * dtype.itemsize
        if device.type == "cuda":
            machine._allocate(device.index, self.nbytes)
            self._held = self.nbytes

    def numel(self):
        return self.numel_

    def __del__(self):
        if self._held:
            self.machine._release(self.device.index, self._held)

    def fill_(self, value):
        if self.device.type == "cuda":
            index = self.device.index
            self.machine._kernel(index, self.machine._memory_seconds(index, "fill", self.nbytes, (self,)))
        self.content = "zeros" if value == 0 else "filled"
        return self

    def copy_(self, src, non_blocking=False):
        self.machine._copy(self, src, non_blocking)
        return self


class _Generator:
    def __init__(self, device=None):
        self.device = device if isinstance(device, FakeDevice) else FakeDevice(device or "cpu")

    def manual_seed(self, seed):
        self.seed = seed
        return self


class _Event:
    def __init__(self, machine, enable_timing=False):
        self.machine, self.enable_timing = machine, enable_timing
        self.device = self.time = None

    def record(self, stream=None):
        gpu = self.machine.gpus[self.machine.current]
        gpu.t = self.time = max(gpu.t, self.machine.mark)
        self.device = gpu.index

    def synchronize(self):
        if self.time is not None:
            self.machine._wait_until(self.time)

    def query(self):
        return self.time is None or self.machine.now() >= self.time

    def elapsed_time(self, end):
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.time is None or end.time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        if self.device != end.device:
            raise RuntimeError("CUDA error: invalid resource handle (events recorded on devices %s and %s)"
                               % (self.device, end.device))
        if not (self.query() and end.query()):
            raise RuntimeError("CUDA error: device not ready")
        return (end.time - self.time) * 1000.0  # milliseconds, as CUDA gives it


class _DeviceContext:
    def __init__(self, machine, index):
        self.machine, self.index = machine, index

    def __enter__(self):
        self.saved = self.machine.current
        self.machine.current = self.machine._index(self.index)

    def __exit__(self, *exc):
        self.machine.current = self.saved


class _Nccl:
    """torch.cuda.nccl: ``all_reduce`` of one tensor per GPU, in one process."""

    def __init__(self, machine):
        self.machine = machine

    def all_reduce(self, inputs, outputs=None, op=0, streams=None, comms=None):
        self.machine._all_reduce(list(inputs))


class _Cuda:
    """torch.cuda, bound to one machine."""

    def __init__(self, machine):
        self.machine = machine
        self.nccl = _Nccl(machine)

    def is_available(self):
        return bool(self.machine.gpus)

    def device_count(self):
        return len(self.machine.gpus)

    def init(self):
        if not self.machine.gpus:
            raise RuntimeError("No CUDA GPUs are available")

    def get_device_properties(self, index):
        return _Props(self.machine.gpus[self.machine._index(index)])

    def mem_get_info(self, index=None):
        gpu = self.machine.gpus[self.machine._index(index)]
        return gpu.total - gpu.used_elsewhere - gpu.allocated, gpu.total

    def set_device(self, index):
        self.machine.current = self.machine._index(index)

    def current_device(self):
        return self.machine.current

    def device(self, index):
        return _DeviceContext(self.machine, index)

    def synchronize(self, index=None):
        self.machine._wait_until(self.machine.gpus[self.machine._index(index)].t)

    def Event(self, enable_timing=False, blocking=False, interprocess=False):  # noqa: N802 (torch's name)
        return _Event(self.machine, enable_timing)

    def can_device_access_peer(self, index, peer):
        return self.machine._peer(index, peer)


class FakeTorch:
    """The ``torch`` module as gate_bench uses it (everything else is absent on purpose)."""

    __version__ = "2.13.0+cu128"
    bfloat16, float16, float32, uint8 = bfloat16, float16, float32, uint8

    def __init__(self, machine):
        self.machine = machine
        self.cuda = _Cuda(machine)
        self.backends = types.SimpleNamespace(
            cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)))

    def device(self, kind, index=None):
        return FakeDevice(kind, index)

    def Generator(self, device=None):  # noqa: N802 (torch's name)
        return _Generator(device)

    def _new(self, shape, device, dtype, content, generator=None, pin_memory=False):
        device = device if isinstance(device, FakeDevice) else FakeDevice(device or "cpu")
        if device.type == "cuda" and pin_memory:
            raise RuntimeError("Only dense CPU tensors can be pinned")
        if generator is not None and generator.device.type != device.type:
            raise RuntimeError("Expected a '%s' device type for generator but found '%s'"
                               % (device.type, generator.device.type))
        return FakeTensor(self.machine, shape, dtype or float32, device, content, pinned=pin_memory)

    def randn(self, *shape, device=None, dtype=None, generator=None):
        return self._new(shape, device, dtype, "randn", generator)

    def rand(self, *shape, device=None, dtype=None, generator=None):
        return self._new(shape, device, dtype, "rand", generator)

    def empty(self, *shape, device=None, dtype=None, pin_memory=False):
        return self._new(shape, device, dtype, "uninitialised", pin_memory=pin_memory)

    def ones(self, *shape, device=None, dtype=None):
        return self._new(shape, device, dtype, "ones")

    def zeros(self, *shape, device=None, dtype=None):
        return self._new(shape, device, dtype, "zeros")

    def matmul(self, a, b, out=None):
        self.machine._matmul(a, b, out)
        return out

    def add(self, a, b, alpha=1, out=None):
        self.machine._add(a, b, out)
        return out

    def set_num_threads(self, n):
        raise AssertionError("the CUDA path must not set CPU threads")


class FakeNvml:
    """The pynvml calls the gate makes, reading each GPU's scripted state at the host's current time.

    ``reads`` logs every telemetry read as (handle, seconds since start, whether the GPU had work queued)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 0, 1

    def __init__(self, machine):
        self.machine = machine
        self.reads, self.initialised = [], False

    def nvmlInit(self):  # noqa: N802 (pynvml's names)
        self.initialised = True

    def nvmlShutdown(self):  # noqa: N802
        self.initialised = False

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        for gpu in self.machine.gpus:
            if "GPU-%s" % gpu.uuid == uuid:
                return gpu.index
        raise NVMLError(6)  # NVML_ERROR_NOT_FOUND

    def _state(self, handle, log=True):
        if not self.initialised:
            raise NVMLError(1)  # NVML_ERROR_UNINITIALIZED
        gpu = self.machine.gpus[handle]
        t = self.machine.now() - self.machine.t0
        if log:
            self.reads.append((handle, round(t, 6), gpu.t > self.machine.now()))
        return self.machine.state(handle, t)

    def nvmlDeviceGetClockInfo(self, handle, kind):  # noqa: N802
        s = self._state(handle)
        return s["sm_mhz"] if kind == self.NVML_CLOCK_SM else s["mem_mhz"]

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):  # noqa: N802
        s = self._state(handle, log=False)
        return s["sm_max_mhz"] if kind == self.NVML_CLOCK_SM else s["mem_mhz"]

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):  # noqa: N802
        return int(round(self._state(handle, log=False)["power_limit_w"] * 1000))

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        return int(round(self._state(handle, log=False)["power_draw_w"] * 1000))

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        if sensor != self.NVML_TEMPERATURE_GPU:  # the GPU die is the only sensor NVML reads on these boards
            raise NVMLError(2)  # NVML_ERROR_INVALID_ARGUMENT
        return self._state(handle, log=False)["temperature_c"]

    def nvmlDeviceGetTemperatureThreshold(self, handle, kind):  # noqa: N802
        s = self._state(handle, log=False)
        if kind == self.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            return s["slowdown_c"]
        if kind == self.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
            return s["shutdown_c"]
        raise NVMLError_NotSupported()

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):  # noqa: N802
        mask = 0
        for name in self._state(handle, log=False)["throttle_reasons"]:
            mask |= _THROTTLE_BITS[name]
        return mask


class FakeCudaMachine:
    """GPUs, the links between them, a clock; ``.torch`` and ``.nvml`` are what the gate gets injected.

    ``p2p_gbs``: GB/s per direction of a peer copy; ``peer_access``: False, or a set of (src, dst) pairs
    without it (their copies are staged through host memory at the pageable rate); ``link_gbs``: GB/s of each
    ring link in an all-reduce (so the bus bandwidth nccl-tests would report)."""

    def __init__(self, gpus, p2p_gbs=380.0, link_gbs=360.0, no_peer_access=()):
        self.gpus = list(gpus)
        for i, gpu in enumerate(self.gpus):
            gpu.index = i
            gpu.uuid = gpu.uuid or "6e2b8f1c-0000-4000-8000-%012x" % (i + 1)
        self.p2p_gbs, self.link_gbs, self.no_peer_access = p2p_gbs, link_gbs, set(no_peer_access)
        self._virtual = 0.0
        self.t0 = self.mark = self.now()  # mark: the host's time as of its last wait on a device
        for gpu in self.gpus:
            gpu.t = self.t0
        self.current = 0
        self.allreduces, self.matmuls, self.memory_ops = [], [], []
        self.torch = FakeTorch(self)
        self.nvml = FakeNvml(self)

    # -- time --------------------------------------------------------------------------------
    def now(self):
        return self._virtual

    def _wait_until(self, t):
        self._virtual = max(self._virtual, t)
        self.mark = max(self.mark, self.now())

    def state(self, index, t):
        """The GPU's telemetry ``t`` seconds after the machine started."""
        script = self.gpus[index].telemetry
        over = script(t) if callable(script) else (script or {})
        return dict(DEFAULT_TELEMETRY, **over)

    # -- streams -----------------------------------------------------------------------------
    def _index(self, index):
        if isinstance(index, FakeDevice):
            index = index.index
        index = self.current if index is None else index
        if not 0 <= index < len(self.gpus):
            raise RuntimeError("CUDA error: invalid device ordinal")
        return index

    def _kernel(self, indices, seconds):
        """Queue ``seconds`` of work on the streams of ``indices`` (one int or several, run together).

        A stream holds at most MAX_QUEUED launches; past that the host blocks until the oldest is done, as
        CUDA's launch queue does (a host loop that never synchronises cannot queue hours of GPU work)."""
        indices = [indices] if isinstance(indices, int) else list(indices)
        for i in indices:
            pending = self.gpus[i].pending
            while pending and pending[0] <= self.now():
                pending.popleft()
            if len(pending) >= MAX_QUEUED:
                self._wait_until(pending.popleft())
        start = max([self.mark] + [self.gpus[i].t for i in indices])
        for i in indices:
            self.gpus[i].t = start + seconds
            self.gpus[i].pending.append(start + seconds)
        return start

    def _allocate(self, index, nbytes):
        gpu = self.gpus[index]
        free = gpu.total - gpu.used_elsewhere - gpu.allocated
        if nbytes > free:
            raise RuntimeError("CUDA out of memory. Tried to allocate %.2f GiB. GPU %d has a total capacity of "
                               "%.2f GiB of which %.2f GiB is free." % (nbytes / GIB, index, gpu.total / GIB,
                                                                        free / GIB))
        gpu.allocated += nbytes
        gpu.peak_allocated = max(gpu.peak_allocated, gpu.allocated)

    def _release(self, index, nbytes):
        self.gpus[index].allocated -= nbytes

    def _peer(self, src, dst):
        return src != dst and (src, dst) not in self.no_peer_access

    # -- kernels and copies ------------------------------------------------------------------
    def _memory_seconds(self, index, op, moved, tensors):
        """Seconds of a memory kernel on GPU ``index`` moving ``moved`` bytes over ``tensors``: from the L2 when
        they all fit in it (the kernel's working set; the gate warms up first, so they are resident), else HBM."""
        gpu = self.gpus[index]
        working_set = sum({id(t): t.nbytes for t in tensors}.values())
        cached = working_set <= gpu.l2_bytes
        self.memory_ops.append({"op": op, "gpus": (index,), "bytes": moved, "working_set": working_set,
                                "l2": cached})
        return moved / (gpu.hbm_gbs * (L2_SPEEDUP if cached else 1.0) * 1e9)

    def _link(self, op, indices, nbytes):
        """Log a copy to the host or a peer: it runs at its link's rate, whether or not its buffer fits in the L2."""
        self.memory_ops.append({"op": op, "gpus": tuple(indices), "bytes": nbytes, "working_set": nbytes, "l2": False})

    def _matmul(self, a, b, out):
        if not (a.device == b.device == out.device) or a.device.type != "cuda":
            raise RuntimeError("Expected all tensors to be on the same CUDA device")
        if not (a.dtype is b.dtype is out.dtype):
            raise RuntimeError("expected mat1 and mat2 to have the same dtype")
        (n, k), (k2, m) = a.shape, b.shape
        if k != k2 or out.shape != (n, m):
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (%dx%d and %dx%d)" % (n, k, k2, m))
        gpu = self.gpus[a.device.index]
        kind = a.dtype.name
        if kind == "float32" and self.torch.backends.cuda.matmul.allow_tf32:
            kind = "tf32"
        tflops = gpu.tflops.get(kind)
        if tflops is None:
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED when calling cublasGemmEx for %s on %s (sm_%d%d)"
                               % (kind, gpu.name, gpu.cc[0], gpu.cc[1]))
        if "randn" not in (a.content, b.content) and "rand" not in (a.content, b.content):
            tflops *= ZERO_INPUT_SPEEDUP
        start = max(self.mark, gpu.t)
        s = self.state(gpu.index, start - self.t0)
        seconds = 2.0 * n * k * m / (tflops * 1e12 * s["sm_mhz"] / s["sm_max_mhz"])
        self._kernel(gpu.index, seconds)
        self.matmuls.append((gpu.index, kind, n, seconds))

    def _add(self, a, b, out):
        if not (a.device == b.device == out.device) or a.device.type != "cuda":
            raise RuntimeError("Expected all tensors to be on the same CUDA device")
        index = a.device.index
        self._kernel(index, self._memory_seconds(index, "add", a.nbytes + b.nbytes + out.nbytes, (a, b, out)))

    def _copy(self, dst, src, non_blocking):
        if dst.nbytes != src.nbytes:
            raise RuntimeError("copy_ between %d and %d bytes" % (src.nbytes, dst.nbytes))
        nbytes = float(src.nbytes)
        if src.device.type == "cpu" and dst.device.type == "cpu":
            return
        if src.device.type == "cpu" or dst.device.type == "cpu":
            host, gpu = (src, self.gpus[dst.device.index]) if src.device.type == "cpu" else \
                (dst, self.gpus[src.device.index])
            asynchronous = host.pinned and non_blocking
            rate = (gpu.h2d_gbs if host is src else gpu.d2h_gbs) if host.pinned else gpu.pageable_gbs
            self._link("h2d" if host is src else "d2h", (gpu.index,), nbytes)
            start = self._kernel(gpu.index, nbytes / (rate * 1e9))
            if not asynchronous:  # pageable or blocking: the host waits for the copy
                self._wait_until(start + nbytes / (rate * 1e9))
            return
        i, j = src.device.index, dst.device.index
        if i == j:
            self._kernel(i, self._memory_seconds(i, "d2d", 2 * nbytes, (src, dst)))
            return
        rate = self.p2p_gbs if self._peer(i, j) else min(self.gpus[i].pageable_gbs, self.gpus[j].pageable_gbs)
        self._link("p2p" if self._peer(i, j) else "p2p via host", (i, j), nbytes)
        self._kernel((i, j), nbytes / (rate * 1e9))

    def _all_reduce(self, tensors):
        devices = [t.device.index for t in tensors]
        if any(t.device.type != "cuda" for t in tensors) or len(set(devices)) != len(devices):
            raise RuntimeError("NCCL all_reduce needs one CUDA tensor per device, got devices %s" % devices)
        if len({(t.numel(), t.dtype.name) for t in tensors}) != 1:
            raise RuntimeError("NCCL all_reduce: tensors differ in size or dtype")
        n, nbytes = len(tensors), float(tensors[0].nbytes)
        # ring: a reduce-scatter and an all-gather, 2(n-1) steps each moving bytes/n over every link at once
        seconds = 2 * (n - 1) * (nbytes / n) / (self.link_gbs * 1e9) if n > 1 else 0.0
        self._kernel(devices, seconds)
        self.allreduces.append({"gpus": n, "bytes": nbytes, "seconds": seconds})
        for t in tensors:
            t.content = "reduced"


def h100_sxm(count, **kw):
    """``count`` healthy-looking H100 SXM GPUs (pass ``FakeGpu`` keywords to change them all)."""
    return [FakeGpu(pci_bus_id=0x18 + 0x20 * i, **kw) for i in range(count)]
