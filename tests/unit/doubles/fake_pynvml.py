"""A stand-in for the ``pynvml`` module (nvidia-ml-py) that serves one recorded machine.

It is a double for the *hardware*: the values come from a recorded nvidia-smi output (parsed
into per-GPU dicts), and each function returns what the real binding returns (bytes/str, ctypes-
like objects with .total/.used/.busId, milliwatts, bitmasks, tuples) or raises an NVMLError
subclass carrying the NVML return code in ``.value`` like the real one does.
"""

import types

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18

_NAMES = {3: "Not Supported", 9: "Driver Not Loaded", 12: "NVML Shared Library Not Found",
          15: "GPU is lost", 18: "RM has detected an NVML/RM version mismatch."}


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return _NAMES.get(self.value, "NVML Error with code %d" % self.value)


def _subclass(name, value):
    return type(name, (NVMLError,), {"__init__": lambda self, *a: NVMLError.__init__(self, value)})


NVMLError_NotSupported = _subclass("NVMLError_NotSupported", 3)
NVMLError_DriverNotLoaded = _subclass("NVMLError_DriverNotLoaded", 9)
NVMLError_LibraryNotFound = _subclass("NVMLError_LibraryNotFound", 12)
NVMLError_GpuIsLost = _subclass("NVMLError_GpuIsLost", 15)
NVMLError_LibRmVersionMismatch = _subclass("NVMLError_LibRmVersionMismatch", 18)

_THROTTLE_BITS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
                  "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
                  "hw_power_brake_slowdown": 0x80, "display_clocks_setting": 0x100}


def _ns(value):
    if value is None:
        raise NVMLError_NotSupported()
    return value


class FakeNvml(types.SimpleNamespace):
    """Build with ``FakeNvml.from_facts(parsed_facts)``; tweak ``gpus``/``init_error`` per scenario."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_AGGREGATE_ECC = 1
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, driver, cuda, gpus, init_error=None, nvlinks=None, lost=()):
        super().__init__()
        self.driver = driver
        self.cuda = cuda
        self.gpus = gpus
        self.init_error = init_error
        self.nvlinks = nvlinks or {}
        self.lost = set(lost)
        self.calls = []
        self.shutdown_called = False

    @classmethod
    def from_facts(cls, facts, **kw):
        major, minor = (facts["cuda_driver_version"] or "0.0").split(".")
        return cls(facts["driver_version"], int(major) * 1000 + int(minor) * 10, facts["gpus"], **kw)

    # -- library ------------------------------------------------------------------------
    def nvmlInit(self):
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self):
        self.shutdown_called = True

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.cuda

    def nvmlSystemGetNVMLVersion(self):
        return "12." + self.driver

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        if index >= len(self.gpus):
            raise NVMLError(2)
        return index

    def _g(self, handle):
        if handle in self.lost:
            raise NVMLError_GpuIsLost()
        return self.gpus[handle]

    # -- identity ----------------------------------------------------------------------
    def nvmlDeviceGetName(self, h):
        return _ns(self._g(h)["name"])

    def nvmlDeviceGetUUID(self, h):
        return _ns(self._g(h)["uuid"])

    def nvmlDeviceGetSerial(self, h):
        return _ns(self._g(h)["serial"]).encode()  # older bindings return bytes

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=_ns(self._g(h)["pci_bus_id"]).encode())

    def nvmlDeviceGetMemoryInfo(self, h):
        g = self._g(h)
        return types.SimpleNamespace(total=_ns(g["memory_total_mib"]) * 1024 * 1024,
                                     used=_ns(g["memory_used_mib"]) * 1024 * 1024)

    def nvmlDeviceGetCudaComputeCapability(self, h):
        cc = _ns(self._g(h)["compute_capability"])
        major, minor = cc.split(".")
        return (int(major), int(minor))

    # -- link / clocks / power ---------------------------------------------------------------
    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return _ns(self._g(h)["pcie"]["gen_current"])

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return _ns(self._g(h)["pcie"]["gen_max"])

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return _ns(self._g(h)["pcie"]["width_current"])

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return _ns(self._g(h)["pcie"]["width_max"])

    def nvmlDeviceGetPcieReplayCounter(self, h):
        return _ns(self._g(h)["pcie"]["replays"])

    def nvmlDeviceGetClockInfo(self, h, kind):
        c = self._g(h)["clocks"]
        return _ns(c["sm_mhz"] if kind == self.NVML_CLOCK_SM else c["mem_mhz"])

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        c = self._g(h)["clocks"]
        return _ns(c["sm_max_mhz"] if kind == self.NVML_CLOCK_SM else c["mem_max_mhz"])

    def nvmlDeviceGetTemperature(self, h, sensor):
        return _ns(self._g(h)["temperature_c"])

    def nvmlDeviceGetPowerUsage(self, h):
        return int(round(_ns(self._g(h)["power_draw_w"]) * 1000))

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return int(round(_ns(self._g(h)["power_limit_w"]) * 1000))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        mask = 0
        for name in self._g(h)["throttle_reasons"]:
            mask |= _THROTTLE_BITS[name]
        return mask

    # -- modes and error counters ------------------------------------------------------------
    def nvmlDeviceGetPersistenceMode(self, h):
        p = _ns(self._g(h)["persistence_mode"])
        return 1 if p else 0

    def nvmlDeviceGetMigMode(self, h):
        m = _ns(self._g(h)["mig_mode"])
        v = 1 if m == "enabled" else 0
        return [v, v]

    def nvmlDeviceGetEccMode(self, h):
        m = _ns(self._g(h)["ecc"]["mode"])
        v = 1 if m == "enabled" else 0
        return [v, v]

    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter_type):
        ecc = self._g(h)["ecc"]
        key = ("volatile_" if counter_type == self.NVML_VOLATILE_ECC else "aggregate_") + (
            "corrected" if error_type == self.NVML_MEMORY_ERROR_TYPE_CORRECTED else "uncorrected")
        return _ns(ecc[key])

    def nvmlDeviceGetRetiredPages(self, h, cause):
        rp = self._g(h)["retired_pages"]
        n = _ns(rp["single_bit"] if cause == 0 else rp["double_bit"])
        return [0x1000 * (i + 1) for i in range(n)]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return 1 if _ns(self._g(h)["retired_pages"]["pending"]) else 0

    def nvmlDeviceGetRemappedRows(self, h):
        r = self._g(h)["remapped_rows"]
        if r["correctable"] is None:
            raise NVMLError_NotSupported()
        return (r["correctable"], r["uncorrectable"], 1 if r["pending"] else 0, 1 if r["failure"] else 0)

    def nvmlDeviceGetNvLinkState(self, h, link):
        self._g(h)
        states = self.nvlinks.get(h)
        if states is None or link >= len(states):
            raise NVMLError_NotSupported()
        return states[link]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [types.SimpleNamespace(pid=p["pid"], usedGpuMemory=p["used_memory_mib"] * 1024 * 1024,
                                      gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
                for p in self._g(h).get("processes", [])]

    def nvmlSystemGetProcessName(self, pid):
        for g in self.gpus:
            for p in g.get("processes", []):
                if p["pid"] == pid:
                    return p["name"]
        raise NVMLError(6)
