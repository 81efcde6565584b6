"""Collect the gpufleet facts schema through NVML (the ``pynvml`` module of nvidia-ml-py).

The ``pynvml`` module object is injected, so tests pass a double and the Ansible module passes
the real import. Every per-field call is wrapped: "Not Supported" and the like give ``None``
for that field, never an exception. A failing ``nvmlInit`` gives facts with ``error`` and
``error_code`` and no GPUs.
"""

from .nvsmi import attach_spec, classify_error, empty_facts, empty_gpu

# NVML return codes (nvml.h, mirrored as NVML_ERROR_* in pynvml) -> gpufleet error codes.
NVML_ERROR_CODES = {
    1: "nvml_uninitialized",
    3: "not_supported",
    4: "insufficient_permissions",
    9: "driver_not_loaded",
    10: "timeout",
    12: "nvml_library_not_found",
    13: "nvml_function_not_found",
    14: "corrupted_inforom",
    15: "gpu_lost",
    16: "gpu_reset_required",
    17: "operating_system_blocked",
    18: "driver_library_mismatch",
    999: "nvml_unknown_error",
}
# Errors that only mean "this device has no such field".
_ABSENT = {2, 3, 6, 13, 21, 26}  # invalid argument, not supported, not found, function not found, no data, deprecated

# Clocks event (formerly "throttle") reason bits: nvml.h nvmlClocksEventReason* / pynvml constants.
THROTTLE_BITS = (
    (0x0000000000000001, "gpu_idle"),
    (0x0000000000000002, "applications_clocks_setting"),
    (0x0000000000000004, "sw_power_cap"),
    (0x0000000000000008, "hw_slowdown"),
    (0x0000000000000010, "sync_boost"),
    (0x0000000000000020, "sw_thermal_slowdown"),
    (0x0000000000000040, "hw_thermal_slowdown"),
    (0x0000000000000080, "hw_power_brake_slowdown"),
    (0x0000000000000100, "display_clocks_setting"),
)

_MIB = 1024 * 1024


def decode_throttle(mask):
    """Bitmask -> list of reason names (unknown bits as ``bit_0x...``)."""
    if mask is None:
        return []
    try:
        mask = int(mask)
    except (TypeError, ValueError):
        return []
    names = [name for bit, name in THROTTLE_BITS if mask & bit]
    known = 0
    for bit, _unused in THROTTLE_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append("bit_%#x" % bit)
            rest &= ~bit
        bit <<= 1
    return names


def _text(value):
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    value = str(value).strip()
    return value or None


def cuda_version_string(value):
    """12040 -> "12.4" (NVML's CUDA driver version integer)."""
    try:
        value = int(value)
    except (TypeError, ValueError):
        return None
    if value <= 0:
        return None
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


def error_code_for(exc):
    """gpufleet error code for an exception raised by pynvml."""
    value = getattr(exc, "value", None)
    if value in NVML_ERROR_CODES:
        return NVML_ERROR_CODES[value]
    name = type(exc).__name__
    by_name = {
        "NVMLError_DriverNotLoaded": "driver_not_loaded",
        "NVMLError_LibraryNotFound": "nvml_library_not_found",
        "NVMLError_LibRmVersionMismatch": "driver_library_mismatch",
        "NVMLError_NoPermission": "insufficient_permissions",
        "NVMLError_GpuIsLost": "gpu_lost",
    }
    if name in by_name:
        return by_name[name]
    return classify_error(str(exc)) or "nvml_error"


class _Caller:
    """Calls pynvml functions; absent features give None, other errors are recorded."""

    def __init__(self, pynvml):
        self.nv = pynvml
        self.errors = {}

    def __call__(self, field, fn_names, *args):
        if isinstance(fn_names, str):
            fn_names = (fn_names,)
        for fn_name in fn_names:
            fn = getattr(self.nv, fn_name, None)
            if fn is None:
                continue
            try:
                return fn(*args)
            except Exception as exc:  # pynvml raises NVMLError subclasses; a double may raise others
                value = getattr(exc, "value", None)
                if value in _ABSENT:
                    if value == 13:  # function missing in this driver: try the older name
                        continue
                    return None
                self.errors[field] = "%s: %s" % (error_code_for(exc), _safe_str(exc))
                return None
        return None


def _safe_str(exc):
    try:
        return str(exc)
    except Exception:
        return type(exc).__name__


def collect(pynvml, include_processes=False):
    """Facts from NVML. ``pynvml`` is the nvidia-ml-py module (or a double). Never raises."""
    facts = empty_facts(source="nvml")
    if pynvml is None:
        facts.update(source="none", error="pynvml is not available", error_code="pynvml_missing")
        return facts
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        facts["error"] = "nvmlInit failed: %s" % _safe_str(exc)
        facts["error_code"] = error_code_for(exc)
        return facts
    try:
        _collect(pynvml, facts, include_processes)
    except Exception as exc:  # defensive: a surprise in the binding must not break fact gathering
        facts["error"] = "NVML query failed: %s" % _safe_str(exc)
        facts["error_code"] = error_code_for(exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: S110 - shutting down is best effort
            pass
    return facts


def _collect(nv, facts, include_processes):
    call = _Caller(nv)
    facts["driver_version"] = _text(call("driver_version", "nvmlSystemGetDriverVersion"))
    facts["cuda_driver_version"] = cuda_version_string(
        call("cuda_driver_version", ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")))
    facts["nvml_version"] = _text(call("nvml_version", "nvmlSystemGetNVMLVersion"))
    count = call("gpu_count", "nvmlDeviceGetCount")
    if call.errors.get("gpu_count"):
        facts["error"] = "nvmlDeviceGetCount failed: %s" % call.errors["gpu_count"]
        facts["error_code"] = call.errors["gpu_count"].split(":", 1)[0]
    count = int(count or 0)
    if call.errors:
        facts["warnings"].extend("%s: %s" % kv for kv in sorted(call.errors.items()))
    gpus = []
    for index in range(count):
        gpus.append(_gpu(nv, index, include_processes))
    facts["gpus"] = gpus
    facts["gpu_count"] = len(gpus)


def _gpu(nv, index, include_processes):
    call = _Caller(nv)
    gpu = empty_gpu(index)
    handle = call("handle", "nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        gpu["nvml_errors"] = call.errors or {"handle": "no handle"}
        # A GPU that fell off the bus still counts: health names it instead of skipping it.
        if any(str(v).startswith("gpu_lost") for v in call.errors.values()):
            gpu["lost"] = True
        return gpu
    gpu["name"] = _text(call("name", "nvmlDeviceGetName", handle))
    gpu["uuid"] = _text(call("uuid", "nvmlDeviceGetUUID", handle))
    gpu["serial"] = _text(call("serial", "nvmlDeviceGetSerial", handle))
    gpu["vbios_version"] = _text(call("vbios_version", "nvmlDeviceGetVbiosVersion", handle))
    pci = call("pci", "nvmlDeviceGetPciInfo", handle)
    if pci is not None:
        gpu["pci_bus_id"] = _text(getattr(pci, "busId", None))
    mem = call("memory", "nvmlDeviceGetMemoryInfo", handle)
    if mem is not None:
        total, used = getattr(mem, "total", None), getattr(mem, "used", None)
        gpu["memory_total_mib"] = int(total) // _MIB if total is not None else None
        gpu["memory_used_mib"] = int(used) // _MIB if used is not None else None
    cc = call("compute_capability", "nvmlDeviceGetCudaComputeCapability", handle)
    if cc:
        gpu["compute_capability"] = "%d.%d" % (int(cc[0]), int(cc[1]))
        gpu["compute_capability_source"] = "nvml"
    gpu["pcie"].update({
        "gen_current": call("pcie", "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        "gen_max": call("pcie", "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        "gen_device_max": call("pcie", "nvmlDeviceGetGpuMaxPcieLinkGeneration", handle),
        "width_current": call("pcie", "nvmlDeviceGetCurrPcieLinkWidth", handle),
        "width_max": call("pcie", "nvmlDeviceGetMaxPcieLinkWidth", handle),
        "replays": call("pcie", "nvmlDeviceGetPcieReplayCounter", handle),
    })
    sm, mem_clk = getattr(nv, "NVML_CLOCK_SM", 1), getattr(nv, "NVML_CLOCK_MEM", 2)
    gpu["clocks"] = {
        "sm_mhz": call("clocks", "nvmlDeviceGetClockInfo", handle, sm),
        "sm_max_mhz": call("clocks", "nvmlDeviceGetMaxClockInfo", handle, sm),
        "mem_mhz": call("clocks", "nvmlDeviceGetClockInfo", handle, mem_clk),
        "mem_max_mhz": call("clocks", "nvmlDeviceGetMaxClockInfo", handle, mem_clk),
    }
    # Applications clocks (set with nvidia-smi -ac): what the SM runs at under load, and the board's
    # default. Drivers from R590 on answer "deprecated" (nvidia-smi -q prints "Requested functionality
    # has been deprecated"): None then, and health reads the clocks event reasons instead.
    gpu["applications_clocks"] = {
        "sm_mhz": call("clocks", "nvmlDeviceGetApplicationsClock", handle, sm),
        "sm_default_mhz": call("clocks", "nvmlDeviceGetDefaultApplicationsClock", handle, sm),
    }
    gpu["temperature_c"] = call("temperature", "nvmlDeviceGetTemperature", handle,
                                getattr(nv, "NVML_TEMPERATURE_GPU", 0))
    power = call("power", "nvmlDeviceGetPowerUsage", handle)
    gpu["power_draw_w"] = round(power / 1000.0, 2) if power is not None else None
    limit = call("power", "nvmlDeviceGetEnforcedPowerLimit", handle)
    gpu["power_limit_w"] = round(limit / 1000.0, 2) if limit is not None else None
    # The limit the board ships with; a host can lower the enforced one (nvidia-smi -pl) below it.
    default_limit = call("power", "nvmlDeviceGetPowerManagementDefaultLimit", handle)
    gpu["power_default_limit_w"] = round(default_limit / 1000.0, 2) if default_limit is not None else None
    mask = call("throttle_reasons", ("nvmlDeviceGetCurrentClocksEventReasons",
                                     "nvmlDeviceGetCurrentClocksThrottleReasons"), handle)
    gpu["throttle_reasons"] = decode_throttle(mask)
    persistence = call("persistence_mode", "nvmlDeviceGetPersistenceMode", handle)
    gpu["persistence_mode"] = None if persistence is None else bool(persistence)
    mig = call("mig_mode", "nvmlDeviceGetMigMode", handle)
    if mig:
        gpu["mig_mode"] = "enabled" if int(mig[0]) else "disabled"
        if int(mig[0]):
            gpu["mig_devices"] = _mig_count(nv, call, handle)
    ecc_mode = call("ecc", "nvmlDeviceGetEccMode", handle)
    corrected = getattr(nv, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    uncorrected = getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    volatile = getattr(nv, "NVML_VOLATILE_ECC", 0)
    aggregate = getattr(nv, "NVML_AGGREGATE_ECC", 1)
    gpu["ecc"] = {"mode": ("enabled" if int(ecc_mode[0]) else "disabled") if ecc_mode else None,
                  "volatile_corrected": None, "volatile_uncorrected": None,
                  "aggregate_corrected": None, "aggregate_uncorrected": None}
    if gpu["ecc"]["mode"] == "enabled":
        gpu["ecc"].update({
            "volatile_corrected": call("ecc", "nvmlDeviceGetTotalEccErrors", handle, corrected, volatile),
            "volatile_uncorrected": call("ecc", "nvmlDeviceGetTotalEccErrors", handle, uncorrected, volatile),
            "aggregate_corrected": call("ecc", "nvmlDeviceGetTotalEccErrors", handle, corrected, aggregate),
            "aggregate_uncorrected": call("ecc", "nvmlDeviceGetTotalEccErrors", handle, uncorrected, aggregate),
        })
    single = call("retired_pages", "nvmlDeviceGetRetiredPages", handle,
                  getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0))
    double = call("retired_pages", "nvmlDeviceGetRetiredPages", handle,
                  getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1))
    pending = call("retired_pages", "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    gpu["retired_pages"] = {"single_bit": None if single is None else len(single),
                            "double_bit": None if double is None else len(double),
                            "pending": None if pending is None else bool(pending)}
    rows = call("remapped_rows", "nvmlDeviceGetRemappedRows", handle)
    if rows:
        gpu["remapped_rows"] = {"correctable": int(rows[0]), "uncorrectable": int(rows[1]),
                                "pending": bool(rows[2]), "failure": bool(rows[3])}
    gpu["nvlink"] = _nvlink(nv, call, handle)
    if include_processes:
        gpu["processes"] = _processes(nv, call, handle)
    attach_spec(gpu)
    if call.errors:
        gpu["nvml_errors"] = dict(call.errors)
        if any(v.startswith("gpu_lost") for v in call.errors.values()):
            gpu["lost"] = True
    return gpu


def _nvlink(nv, call, handle):
    total = active = 0
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        state = call("nvlink", "nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            continue
        total += 1
        active += 1 if int(state) else 0
    if total == 0:
        return {"links_active": None, "links_total": None}
    return {"links_active": active, "links_total": total}


def _mig_count(nv, call, handle):
    maximum = call("mig_devices", "nvmlDeviceGetMaxMigDeviceCount", handle)
    if maximum is None:
        return None
    found = 0
    for i in range(int(maximum)):
        if call("mig_devices", "nvmlDeviceGetMigDeviceHandleByIndex", handle, i) is not None:
            found += 1
    return found


def _processes(nv, call, handle):
    out = []
    for p in call("processes", "nvmlDeviceGetComputeRunningProcesses", handle) or []:
        pid = getattr(p, "pid", None)
        used = getattr(p, "usedGpuMemory", None)
        name = _text(call("processes", "nvmlSystemGetProcessName", pid)) if pid is not None else None
        gi = getattr(p, "gpuInstanceId", None)
        ci = getattr(p, "computeInstanceId", None)
        out.append({
            "pid": pid, "type": "C", "name": name,
            "used_memory_mib": int(used) // _MIB if isinstance(used, int) else None,
            # NVML reports 0xFFFFFFFF when the process is not in a MIG instance.
            "gpu_instance_id": gi if isinstance(gi, int) and gi != 0xFFFFFFFF else None,
            "compute_instance_id": ci if isinstance(ci, int) and ci != 0xFFFFFFFF else None,
        })
    return out
