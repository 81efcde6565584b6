# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's NVML evidence: the GPU facts as the rules read them (``nvml_evidence``), and for the renter's
checks each GPU's state (MIG, memory, recovery action) and two looks at its processes and memory, told apart
from this host's own CUDA processes (``nvml_renter_evidence``, ``cuda_processes``). Never raises.
"""

import re
import time

from ..gpu import nvml
from .match_renter import HELD_MEMORY_MIB

UVM_NODE = "/dev/nvidia-uvm"
# Seconds between the two looks at each GPU's processes and memory: a job of the renter's that was starting at
# the first look holds the GPU (and shows as ours) at the second, so it is not taken for another tenant.
SAMPLE_INTERVAL_S = 3


def cuda_processes(holders):
    """The processes of ``gpu_holders`` that are CUDA programs (they hold /dev/nvidia-uvm, which NVML clients such
    as nvidia-smi or an exporter never open), each with the minor numbers of the /dev/nvidiaN they hold."""
    if holders is None:
        return None
    out = []
    for pid, h in sorted(holders.items()):
        nodes = h.get("nodes") or ()
        if UVM_NODE not in nodes:
            continue
        minors = sorted(int(n[len("/dev/nvidia"):]) for n in nodes if re.match(r"^/dev/nvidia\d+$", n))
        out.append({"pid": pid, "comm": h.get("comm"), "minors": minors})
    return out


_MIB = 1024 * 1024


class _Nvml:
    """pynvml calls that never raise: an absent function or field is None, other errors are kept by name."""

    def __init__(self, nv):
        self.nv = nv
        self.errors = {}

    def __call__(self, what, fn_name, *args, **kwargs):
        fn = getattr(self.nv, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # pynvml raises NVMLError subclasses
            code = nvml_error_code(exc)
            if code not in ("not_supported", "nvml_function_not_found", "not_found", "invalid_argument"):
                self.errors[what] = code
            return None


def nvml_error_code(exc):
    value = getattr(exc, "value", None)
    return {2: "invalid_argument", 3: "not_supported", 6: "not_found", 13: "nvml_function_not_found"}.get(
        value) or nvml.error_code_for(exc)


def _mib(value):
    return int(value) // _MIB if isinstance(value, int) else None


def _gpu_state(call, nv, index, handle):
    name = call("name", "nvmlDeviceGetName", handle)
    state = {"index": index, "name": name.decode() if isinstance(name, bytes) else name,
             "minor_number": call("minor_number", "nvmlDeviceGetMinorNumber", handle),
             "memory_total_mib": None, "mig_mode": None, "mig_devices": None, "recovery_action": None}
    mem = call("memory", "nvmlDeviceGetMemoryInfo", handle)
    if mem is not None:
        state["memory_total_mib"] = _mib(getattr(mem, "total", None))
    mig = call("mig_mode", "nvmlDeviceGetMigMode", handle)
    if mig:
        state["mig_mode"] = "enabled" if int(mig[0]) else "disabled"
        if int(mig[0]):
            devices = []
            for i in range(int(call("mig_devices", "nvmlDeviceGetMaxMigDeviceCount", handle) or 0)):
                mh = call("mig_devices", "nvmlDeviceGetMigDeviceHandleByIndex", handle, i)
                if mh is None:
                    continue
                mname = call("mig_devices", "nvmlDeviceGetName", mh)
                mmem = call("mig_devices", "nvmlDeviceGetMemoryInfo", mh)
                devices.append({"name": mname.decode() if isinstance(mname, bytes) else mname,
                                "memory_total_mib": _mib(getattr(mmem, "total", None)) if mmem is not None else None})
            state["mig_devices"] = devices
    field = getattr(nv, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", 230)
    values = call("recovery_action", "nvmlDeviceGetFieldValues", handle, [field])
    if values:
        v = values[0]
        if getattr(v, "nvmlReturn", None) == 0:
            state["recovery_action"] = int(v.value.uiVal)
    return state


def _usage(call, nv, index, handle):
    used = reserved = None
    v2 = getattr(nv, "nvmlMemory_v2", None)
    mem = call("memory_v2", "nvmlDeviceGetMemoryInfo", handle, version=v2) if v2 else None
    if mem is not None:
        used, reserved = _mib(getattr(mem, "used", None)), _mib(getattr(mem, "reserved", None))
    v1_used = None
    if mem is None:
        mem1 = call("memory", "nvmlDeviceGetMemoryInfo", handle)
        v1_used = _mib(getattr(mem1, "used", None)) if mem1 is not None else None
    procs = call("processes", "nvmlDeviceGetComputeRunningProcesses", handle)
    return {"index": index, "memory_used_mib": used, "memory_reserved_mib": reserved,
            "memory_used_v1_mib": v1_used,
            "processes": None if procs is None else [
                {"pid": getattr(p, "pid", None), "used_memory_mib": _mib(getattr(p, "usedGpuMemory", None))}
                for p in procs]}


def _worth_a_second_look(sample):
    """Whether the first look shows a process or memory in use on some GPU: only then can the second look find
    another tenant, so an idle host does not wait ``interval`` seconds for nothing."""
    for g in sample.get("gpus") or ():
        used = g.get("memory_used_mib") if g.get("memory_used_mib") is not None else g.get("memory_used_v1_mib")
        if g.get("processes") or g.get("processes") is None or used is None or used >= HELD_MEMORY_MIB:
            return True
    return False


def nvml_renter_evidence(nv, host, interval=SAMPLE_INTERVAL_S, sleep=time.sleep):
    """(gpu_state, gpu_usage) through NVML, for the renter's checks; never raises.

    ``gpu_state``: per GPU its name, minor number, total memory, MIG mode and instances, and NVML's recovery
    action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION). ``gpu_usage``: two looks ``interval`` seconds apart at each
    GPU's compute processes and memory (v2: used without the driver's reservation), each with the CUDA
    processes of this PID namespace (``cuda_processes``). NVML does not know PID namespaces: in a container it
    lists every process on the GPU by its host PID (NVIDIA/nvidia-docker #1483), so a process is told ours by
    its PID only where the namespaces agree, else by counting our own CUDA processes on that GPU.
    """
    usage = {"interval_s": interval, "samples": [], "error": None}
    if nv is None:
        usage["error"] = "pynvml is not available"
        return None, usage
    try:
        nv.nvmlInit()
    except Exception as exc:
        usage["error"] = "nvmlInit failed: %s" % nvml_error_code(exc)
        return None, usage
    call = _Nvml(nv)
    try:
        count = int(call("gpu_count", "nvmlDeviceGetCount") or 0)
        handles = [(i, call("handle", "nvmlDeviceGetHandleByIndex", i)) for i in range(count)]
        handles = [(i, h) for i, h in handles if h is not None]
        state = [_gpu_state(call, nv, i, h) for i, h in handles]
        looks = 2 if interval and interval > 0 else 1
        for n in range(looks):
            if n:
                if not _worth_a_second_look(usage["samples"][0]):
                    usage["second_look"] = "skipped: the first look found no process and no memory in use"
                    break
                sleep(interval)
            gpus = [_usage(call, nv, i, h) for i, h in handles]
            usage["samples"].append({"gpus": gpus, "cuda_processes": cuda_processes(host.gpu_holders())})
    except Exception as exc:  # defensive: the renter's checks must not lose the rest of the evidence
        usage["error"] = "NVML query failed: %r" % exc
        state = None
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: S110 - shutting down is best effort
            pass
    if call.errors:
        usage["nvml_errors"] = dict(call.errors)
    return state, usage


def _gpus(gpu_facts):
    out = []
    for g in gpu_facts.get("gpus") or ():
        rows = g.get("remapped_rows") or {}
        out.append({"index": g.get("index"), "name": g.get("name"), "compute_capability": g.get("compute_capability"),
                    "persistence_mode": g.get("persistence_mode"), "remapped_rows_failure": rows.get("failure")})
    return out


def nvml_evidence(gpu_facts):
    ok = not gpu_facts.get("error")
    return {"ok": ok, "source": gpu_facts.get("source"), "error_code": gpu_facts.get("error_code"),
            "error_text": gpu_facts.get("error"), "gpu_count": gpu_facts.get("gpu_count") if ok else None,
            "driver_version": gpu_facts.get("driver_version"),
            "cuda_driver_version": gpu_facts.get("cuda_driver_version")}
