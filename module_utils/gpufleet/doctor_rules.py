"""The doctor's rules, as data: one row per finding code, each with its source.

A row: ``code``, ``severity`` ("critical" = CUDA cannot be used or the hardware needs attention,
"warning" = works but will bite, "info"), ``remedy_class`` (``fixable`` here, ``reboot``,
``provider``, ``unknown``), ``blocks_cuda`` (the finding alone explains why CUDA is unusable),
``meaning`` and ``remedy`` in plain words, ``source`` (reference section or fixture) and
``match``: a function over the doctor's *view* (the evidence with the raw texts already parsed,
built by ``doctor.view``) that returns the raw values that matched, or None. ``severity_of``
(optional) refines the severity from the matched values.

Also here: the table of torch / CUDA error texts (``TORCH_ERROR_PATTERNS``) and the cuInit codes
the rules know. Nothing in this file reads the host.
"""

import re

from . import specs
from .nvml import cuda_version_string as cuda_from_int  # 10010 -> "10.1", the same encoding as NVML's
from .torcharch import first_covering
from .torchparse import InvalidInput, parse_driver
from .torchtable import CUDA_VARIANTS

REF = "shared/reference/cuda-failures-and-compat.md"
DESIGN = "shared/DESIGN.md 'The doctor'"
TE = "fixtures torch_errors/"

SEVERITIES = ("critical", "warning", "info")
# fixable: software on this host can fix it; restart_container: the renter recreates / restarts the container
# (the provider's console or API), nothing inside it can; reboot: the machine must restart; provider: the
# machine's owner must act, or the rental goes back.
REMEDY_CLASSES = ("fixable", "restart_container", "reboot", "provider", "unknown")

# CUresult values of cuInit (cuda.h). Anything else is reported as unknown.
CU_RESULTS = {
    0: "CUDA_SUCCESS",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

# torch / CUDA error texts -> text codes (first match wins). Each pattern names the fixtures it was
# written against. These are *text* codes: the rules below decide what they mean on this host.
TORCH_ERROR_PATTERNS = [
    ("error_802", re.compile(r"Error 802\b|error=802\b|\(802\)|system not yet initialized", re.I),
     TE + "error-802_*.txt"),
    ("error_804", re.compile(r"Error 804\b|error=804\b|forward compatibility was attempted on non supported HW",
                             re.I), TE + "error-804_*.txt"),
    ("driver_too_old", re.compile(r"NVIDIA driver on your system is too old", re.I),
     TE + "driver-too-old_found-*.txt"),
    ("no_nvidia_driver", re.compile(r"Found no NVIDIA driver on your system", re.I),
     TE + "found-no-nvidia-driver_*.txt"),
    ("devices_busy_or_unavailable", re.compile(r"(?:devices?|device\(s\)).{0,12}(?:is/are|are|is) busy or unavailable",
                                               re.I), TE + "*busy-or-unavailable_*.txt"),
    ("cuda_unknown_error", re.compile(r"CUDA unknown error|CUDA error: unknown error", re.I),
     TE + "cuda-unknown-error_*.txt"),
    ("no_kernel_image", re.compile(r"no kernel image is available|with CUDA capability sm_\d+ is not compatible "
                                   r"with the current PyTorch installation", re.I), TE + "no-kernel-image_*.txt"),
    ("libcudart_not_found", re.compile(r"libcudart\.so(?:\.[\d.]+)?: cannot open shared object file", re.I),
     TE + "libcudart-so-12-cannot-open_*.txt"),
    ("nvjitlink_symbol_mismatch", re.compile(r"undefined symbol: __nvJitLink\w*", re.I),
     TE + "nvjitlink-undefined-symbol-*.txt; " + REF + " section 2.3"),
    # ldd of a pip nvidia-* library resolving a CUDA library from a system toolkit directory
    ("cuda_library_shadowed", re.compile(r"(?:site|dist)-packages/[^\n]*nvidia/[^\n]*\n(?:[^\n]*\n)*?"
                                         r"\s*lib(?:nvJitLink|cu\w+|cudart|nvrtc)\.so[.\d]* => "
                                         r"(?![^\n]*(?:site|dist)-packages)[^\n]*cuda[^\n]*", re.I),
     TE + "nvjitlink-shadowed-by-LD_LIBRARY_PATH-*.txt"),
]

_FOUND_VERSION_RE = re.compile(r"too old \(found version (\d+)\)", re.I)


def found_version(text):
    """The NNNNN of "driver ... too old (found version NNNNN)", as an int, or None."""
    m = _FOUND_VERSION_RE.search(text or "")
    return int(m.group(1)) if m else None


def _vkey(text):
    return tuple(int(p) for p in re.findall(r"\d+", str(text or "")))


# ----------------------------------------------------------------------------- match functions
# Each takes the view built by doctor.view(evidence) and returns a dict of the raw values that
# matched, or None.

def _torch(v, key):
    t = v.get("torch") or {}
    return t.get(key)


def _text_hit(v, *codes):
    hits = {c: v["torch_text_codes"][c] for c in codes if c in v["torch_text_codes"]}
    return hits or None


def m_cpu_only_wheel(v):
    t = v.get("torch")
    if not t or not t.get("importable") or not v.get("gpu_expected"):
        return None
    label = v.get("torch_label")
    if label == "cpu" or ("cuda" in t and t.get("cuda") is None and not t.get("hip")):
        return {"torch_version": t.get("version"), "torch_cuda": t.get("cuda")}
    return None


def m_wrong_variant_for_driver(v):
    out = {}
    text = _text_hit(v, "driver_too_old")
    if text:
        out["torch_text"] = text["driver_too_old"]
        fv = found_version(text["driver_too_old"])
        if fv is not None:
            out["found_version"] = fv
            out["driver_supports_cuda"] = cuda_from_int(fv)
    if v.get("cuinit_result") == 35:
        out["cuinit_result"] = 35
    torch_cuda = _torch(v, "cuda")
    driver = v.get("driver_version")
    row = CUDA_VARIANTS.get("cu" + str(torch_cuda).replace(".", "")) if torch_cuda else None
    if row and driver:
        try:
            if parse_driver(driver) < parse_driver(row["minor_floor"]):
                out.update(driver_below_floor=row["minor_floor"])
        except InvalidInput:
            pass
    if not out:
        return None
    out.update(torch_version=_torch(v, "version"), torch_cuda=torch_cuda, driver_version=driver)
    return out


def _sm_covers(arch_list, cc):
    major, minor = cc
    for arch in arch_list or ():
        m = re.match(r"^(sm|compute)_(\d+)(\d)([a-z]?)$", str(arch))
        if not m:
            continue
        kind, a_major, a_minor, suffix = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if kind == "compute" and (a_major, a_minor) <= cc:
            return True
        if kind == "sm" and a_major == major and (a_minor == minor if suffix else a_minor <= minor):
            return True
    return False


def m_arch_missing_from_wheel(v):
    out = {}
    arch_list = _torch(v, "arch_list")
    if arch_list:
        missing = [g for g in v["gpus"] if g.get("cc") and not _sm_covers(arch_list, g["cc"])]
        if missing:
            out.update(arch_list=list(arch_list), gpus=[
                {"index": g.get("index"), "name": g.get("name"), "compute_capability": g.get("compute_capability")}
                for g in missing])
            # The earliest torch release and CUDA variant with kernels for them (torchcompat's table), for the line
            # "needs cu128 or later"; None when no release known there has them.
            needs = first_covering([g["cc"] for g in missing])
            out["needs"] = {"series": needs[0], "variant": needs[1]} if needs else None
    text = _text_hit(v, "no_kernel_image")
    if text:
        out["torch_text"] = text["no_kernel_image"]
    if out:
        out["torch_version"] = _torch(v, "version")
        return out
    return None


def m_driver_library_mismatch(v):
    out = {}
    nvml = v.get("nvml") or {}
    if nvml.get("error_code") == "driver_library_mismatch" or re.search(
            r"driver/library version mismatch", nvml.get("error_text") or "", re.I):
        out["nvml_error"] = nvml.get("error_text") or nvml.get("error_code")
    if v.get("cuinit_result") == 803:
        out["cuinit_result"] = 803
    api = [m for m in v["nvrm_messages"] if m.get("code") == "api_mismatch"]
    if api:
        out["kernel_log"] = api[0].get("text")
    return out or None


def _no_driver_signs(v):
    signs = {}
    if v["proc_modules_known"] and not v["modules"].intersection({"nvidia"}):
        signs["nvidia_module_loaded"] = False
    if v["proc_driver_known"] and v["driver_version"] is None and not v["proc_driver_text"]:
        signs["proc_driver_nvidia_version"] = None
    text = _text_hit(v, "no_nvidia_driver")
    if text:
        signs["torch_text"] = text["no_nvidia_driver"]
    nvml = v.get("nvml") or {}
    if nvml.get("error_code") in ("driver_not_loaded", "driver_not_reachable"):
        signs["nvml_error"] = nvml.get("error_text") or nvml.get("error_code")
    return signs


def _driver_present(v):
    return "nvidia" in v["modules"] or v["driver_version"] is not None


def m_no_driver(v):
    if v.get("in_container") is not False or not v.get("gpu_expected"):
        return None
    signs = _no_driver_signs(v)
    if _driver_present(v) or not signs:
        return None
    return signs


def m_container_without_gpus(v):
    if v.get("in_container") is not True or v["device_nodes"] is None or not v.get("gpu_expected"):
        return None
    if v["gpu_nodes"]:
        return None  # /dev/nvidiactl alone is no GPU: NVML / libcuda create it themselves when run as root
    out = {"in_container": True, "device_nodes": sorted(v["device_nodes"])}
    out.update(_no_driver_signs(v))
    if v["driver_version"]:
        out["host_driver_version"] = v["driver_version"]
    return out


def m_nvidia_uvm_not_loaded(v):
    nodes = v["device_nodes"]
    if v.get("in_container") is True and nodes is not None:
        # In a container the device nodes are the evidence: the runtime passes /dev/nvidia-uvm in with the GPUs
        # (and loads nvidia_uvm on the machine first). GPU nodes without it: the container was started without
        # it, whatever the machine's module list (read through /proc/modules, or not readable) says.
        if not v["gpu_nodes"] or "/dev/nvidia-uvm" in nodes:
            return None  # no GPU nodes at all is container_without_gpus
        out = {"in_container": True, "missing": ["/dev/nvidia-uvm"], "device_nodes": sorted(nodes)}
        if v["proc_modules_known"]:
            out["modules"] = sorted(m for m in v["modules"] if m.startswith("nvidia"))
        return out
    if not v["proc_modules_known"] or "nvidia" not in v["modules"] or "nvidia_uvm" in v["modules"]:
        return None
    return {"modules": sorted(m for m in v["modules"] if m.startswith("nvidia"))}


def m_device_nodes_missing(v):
    nodes = v["device_nodes"]
    if nodes is None or not _driver_present(v) or v.get("in_container"):
        return None
    want = ["/dev/nvidiactl"]
    if "nvidia_uvm" in v["modules"]:
        want.append("/dev/nvidia-uvm")
    missing = [n for n in want if n not in nodes]
    if not v["gpu_nodes"]:
        missing.append("/dev/nvidia0..N")
    if not missing:
        return None
    return {"missing": missing, "device_nodes": sorted(nodes), "driver_version": v["driver_version"]}


_CVD_ITEM = re.compile(r"^(?:\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F/-]+)$")


def m_cuda_visible_devices(v):
    env = v.get("env") or {}
    if "CUDA_VISIBLE_DEVICES" not in env or env["CUDA_VISIBLE_DEVICES"] is None:
        return None
    value = str(env["CUDA_VISIBLE_DEVICES"])
    items = [i.strip() for i in value.split(",")]
    count = v.get("gpu_count")
    problems = []
    if not value.strip():
        problems.append("empty: hides every GPU")
    else:
        for i in items:
            if not _CVD_ITEM.match(i):
                problems.append("%r is neither an index nor a GPU-/MIG- UUID" % i)
                break  # CUDA ignores this entry and every one after it
            if i.isdigit() and count is not None and int(i) >= count:
                problems.append("index %s but only %d GPU(s)" % (i, count))
                break
    if not problems:
        return None
    return {"CUDA_VISIBLE_DEVICES": value, "gpu_count": count, "problems": problems}


def m_libcudart_not_found(v):
    hit = _text_hit(v, "libcudart_not_found")
    return {"torch_text": hit["libcudart_not_found"]} if hit else None


def m_ld_library_path_shadowing(v):
    out = {}
    tk = v.get("cudatk") or {}
    llp = tk.get("ld_library_path") or {}
    shadow = [{"path": e.get("path"), "source": e.get("source")} for e in llp.get("entries", ()) if e.get("shadowing")]
    if shadow:
        out["ld_library_path"] = shadow
    ld_conf = [p for p in tk.get("problems", ()) if p.get("code") == "ldconfig_cuda_entries_multiple"]
    if ld_conf:
        out["ld_so_conf"] = ld_conf[0].get("message")
    hit = _text_hit(v, "nvjitlink_symbol_mismatch", "cuda_library_shadowed")
    if hit:
        out["torch_text"] = hit
    return out or None


def m_cuda_link_wrong_target(v):
    tk = v.get("cudatk") or {}
    link = tk.get("cuda_symlink") or {}
    want = (v.get("decision") or {}).get("toolkit")
    chosen = tk.get("chosen") or {}
    if want and want.get("root") != chosen.get("root"):
        # The decision read the driver's CUDA version where the layout facts had none (or another): the link is
        # judged against the decision, the one the fix is handed.
        if link.get("dangling"):
            problem, message = "cuda_link_dangling", "%s -> %s points at nothing; it should point at %s" % (
                link.get("path"), link.get("target"), want["root"])
        elif link.get("is_link") and link.get("exists") and link.get("resolved") != want["root"]:
            problem, message = "cuda_link_wrong_target", "%s resolves to %s; it should point at %s (CUDA %s)" % (
                link.get("path"), link.get("resolved"), want["root"], want.get("version"))
        else:
            return None
        return {"problem": problem, "message": message, "target": link.get("target"),
                "resolved": link.get("resolved"), "expected": want["root"]}
    probs = [p for p in tk.get("problems", ()) if p.get("code") in ("cuda_link_wrong_target", "cuda_link_dangling")]
    if not probs:
        return None
    return {"problem": probs[0]["code"], "message": probs[0].get("message"), "target": link.get("target"),
            "resolved": link.get("resolved"), "expected": probs[0].get("expected")}


def m_error_802_fabric_manager(v):
    if v.get("nvswitch_present") is not True:
        return None
    state = v.get("fabric_manager")
    if state in (None, "running"):
        return None  # unknown FM state is not guessed; 802 then stays in "unknown"
    out = {"nvswitch_present": True, "fabric_manager": state}
    hit = _text_hit(v, "error_802")
    if hit:
        out["torch_text"] = hit["error_802"]
    if v.get("cuinit_result") == 802:
        out["cuinit_result"] = 802
    return out


def m_error_804_forward_compat(v):
    out = {}
    hit = _text_hit(v, "error_804")
    if hit:
        out["torch_text"] = hit["error_804"]
    if v.get("cuinit_result") == 804:
        out["cuinit_result"] = 804
    if not out:
        return None
    cu = v.get("cuinit") or {}
    out.update(libcuda_path=cu.get("libcuda_path"), libcuda_forward_compat=cu.get("forward_compat"))
    return out


def _xids(v, codes):
    return {x: n for x, n in v["xid_counts"].items() if x in codes}


def m_xid_79(v):
    hits = _xids(v, (79,))
    if not hits:
        return None
    lines = [e.get("line") for e in v["xid_events"] if e.get("xid") == 79][:3]
    return {"xid_counts": hits, "lines": lines}


ECC_XIDS = (48, 63, 64, 94, 95)
ECC_CRITICAL_XIDS = (48, 64, 95)


def m_ecc(v):
    out = {}
    hits = _xids(v, ECC_XIDS)
    if hits:
        out["xid_counts"] = hits
        out["lines"] = [e.get("line") for e in v["xid_events"] if e.get("xid") in ECC_XIDS][:3]
    failed = [g.get("index") for g in v["gpus"] if g.get("remapped_rows_failure")]
    if failed:
        out["remapped_rows_failure_gpus"] = failed
    return out or None


def sev_ecc(ev):
    if ev.get("remapped_rows_failure_gpus") or any(x in ECC_CRITICAL_XIDS for x in ev.get("xid_counts", {})):
        return "critical"
    return "warning"


def m_fewer_gpus(v):
    expected = v.get("expected_gpu_count")
    seen = v.get("gpu_count")
    if expected is None or seen is None or seen >= expected:
        return None
    return {"expected_gpu_count": expected, "gpu_count": seen, "counted_from": v.get("gpu_count_source")}


def m_persistence_off(v):
    off = [g.get("index") for g in v["gpus"] if g.get("persistence_mode") is False]
    return {"gpus": off} if off else None


def host_side_in_container(v):
    """Remedy class of a fix that needs the machine's kernel or services: a container cannot apply it."""
    return "provider" if v.get("in_container") else "fixable"


host_side_in_container.doc = "provider in a container"


def uvm_remedy_class(v):
    """Remedy class of a missing nvidia_uvm: a container gets /dev/nvidia-uvm when it is started with its devices
    (the runtime loads the module on the machine first), so it is restarted; elsewhere it is loaded here."""
    return "restart_container" if v.get("in_container") else "fixable"


uvm_remedy_class.doc = "restart_container in a container"


def container_setting(v):
    """Remedy class of a limit the container was started with (--shm-size, --pids-limit): a new container fixes
    it; on a VM or bare metal it is this host's own setting."""
    return "restart_container" if v.get("in_container") else "fixable"


container_setting.doc = "restart_container in a container"


def machine_restart(v):
    """Remedy class of a GPU reset or reboot: the renter of a VM or a machine does it, a container's renter cannot."""
    return "provider" if v.get("in_container") else "reboot"


machine_restart.doc = "provider in a container"


# ----------------------------------------------------------------------------- the renter's checks
# Sources of the thresholds below: shared/reference/ecosystem.md "Rented-host checks" names the checks; the
# figures are ours unless a source is named.
ECOSYSTEM = "shared/reference/ecosystem.md 'Rented-host checks'"
CTK_48 = "https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"
# canhazgpu counts a GPU with more than 100 MB used as in use (russellb/canhazgpu docs/features-unauthorized.md);
# a CUDA context alone takes several hundred MiB, and an idle GPU's v2 "used" (without the driver's reservation)
# is a few MiB.
HELD_MEMORY_MIB = 100
# A quota below half the visible CPUs is "far below": torch, OpenMP and MKL size their pools by the visible CPUs
# and the quota then throttles them (vast-ai/base-image test 56-cpu-thread-limits checks the same two limits).
CPU_QUOTA_FRACTION = 0.5
# pids.max counts threads: every process (and every DataLoader worker) starts one OpenMP thread per visible CPU
# unless OMP_NUM_THREADS says otherwise, so a few workers on a large machine reach a limit of this size.
PIDS_MAX_LOW = 1024
# NVML reports 97-100 % of the datasheet memory for a whole GPU (H100 80GB 81559 MiB, H200 143771 MiB of
# 141 GB, RTX 4090 24564 MiB of 24 GB; tests/fakenvml profiles): well below that is a share or another card.
WHOLE_GPU_FRACTION = 0.9
# NVIDIA's PyTorch container docs start containers with --shm-size=1g --ulimit memlock=-1 for NCCL and DataLoader
# workers; Docker's default /dev/shm is 64 MiB. The audit's shm item reads the same floor (it lives here, on the host
# side, so the doctor's payload does not carry the audit).
SHM_MIN_MIB = 1024
# The thread-pool sizes of OpenMP, MKL, OpenBLAS and numexpr (the probe reads them from the login environment).
THREAD_ENV_KEYS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
# nvmlGpuRecoveryAction_t (nvml.h; pynvml NVML_GPU_RECOVERY_ACTION_*): what the driver says the GPU needs, and
# what the renter does about it.
RECOVERY_ACTIONS = {
    0: ("NONE", None),
    1: ("GPU_RESET", "reset the GPU (nvidia-smi -r -i N with no process on it) or reboot"),
    2: ("NODE_REBOOT", "reboot the machine"),
    3: ("DRAIN_P2P", "stop the multi-GPU (peer-to-peer) jobs, then reset the GPU or reboot"),
    4: ("DRAIN_AND_RESET", "stop the jobs on the GPU, then reset it or reboot"),
    5: ("RECOVER_IMEX_DOMAIN", "the provider must recover the NVLink / IMEX domain"),
    6: ("BUS_RESET", "reset the GPU's PCIe bus: reboot the machine"),
    7: ("SYSTEM_REBOOT", "reboot the machine"),
}


def _gpu_minor(v, index):
    for g in v.get("gpu_state") or ():
        if g.get("index") == index:
            return g.get("minor_number") if g.get("minor_number") is not None else index
    return index


def _tenant_look(v, sample, gpu):
    """(candidates, foreign count, ours) of one GPU in one look. A listed PID that is one of our CUDA processes is
    ours (the namespaces agree); the other listed processes are foreign beyond the number of our own CUDA
    processes on the GPU that were not matched (in a container NVML lists them by host PIDs)."""
    minor = _gpu_minor(v, gpu.get("index"))
    ours = {c["pid"] for c in sample.get("cuda_processes") or () if minor in (c.get("minors") or ())}
    listed = {p.get("pid") for p in gpu.get("processes") or ()}
    unmatched = listed - ours
    foreign = len(unmatched) - len(ours - listed)
    return unmatched, max(foreign, 0), ours


def m_other_tenant(v):
    usage = v.get("gpu_usage") or {}
    samples = usage.get("samples") or []
    if len(samples) < 2 or any(s.get("cuda_processes") is None for s in samples):
        return None  # one look, or our own processes unknown: nothing is told apart
    by_index = {}
    for s in samples:
        for g in s.get("gpus") or ():
            by_index.setdefault(g.get("index"), []).append(g)
    hits = []
    for index, looks in sorted(by_index.items(), key=lambda kv: str(kv[0])):
        if len(looks) != len(samples) or any(g.get("processes") is None for g in looks):
            continue
        seen = [_tenant_look(v, s, g) for s, g in zip(samples, looks)]
        stable = set.intersection(*(candidates for candidates, _n, _o in seen))
        if stable and all(n > 0 for _c, n, _o in seen):
            hits.append({"gpu": index, "why": "compute processes that are not this host's (in every look)",
                         "foreign_count": min(n for _c, n, _o in seen),
                         "processes": [p for p in looks[-1]["processes"] if p.get("pid") in stable]})
            continue
        used = [g.get("memory_used_mib") for g in looks]
        if (not any(ours for _c, _n, ours in seen) and all(not g["processes"] for g in looks)
                and all(isinstance(u, int) and u >= HELD_MEMORY_MIB for u in used)):
            hits.append({"gpu": index, "why": "memory held with no process listed and none of ours on the GPU",
                         "memory_used_mib": used})
    if not hits:
        return None
    return {"gpus": hits, "looks": len(samples), "interval_s": usage.get("interval_s"),
            "in_container": v.get("in_container")}


def m_container_lost_gpus(v):
    if v.get("in_container") is not True or not v["gpu_nodes"]:
        return None
    out = {}
    denied = {n: e for n, e in (v.get("device_open_errors") or {}).items() if e == "EPERM"}
    if denied:
        out["open_denied"] = denied
    nvml = v.get("nvml") or {}
    driver_here = "nvidia" in v["modules"] or v["driver"]
    if (nvml.get("error_code") == "nvml_unknown_error" and driver_here) or (denied and nvml.get("ok") is False):
        out["nvml_error"] = nvml.get("error_text") or nvml.get("error_code")
    if not out:
        return None
    hit = _text_hit(v, "cuda_unknown_error")
    if hit:
        out["torch_text"] = hit["cuda_unknown_error"]
    out.update(gpu_nodes=v["gpu_nodes"], driver_version=v.get("driver_version"))
    return out


def _spec_gib(name, memory_total_mib=None):
    row = specs.lookup(name, memory_total_mib) if name else None
    return row.get("memory_gib") if row else None


def m_gpu_partitioned(v):
    hits = []
    for g in v.get("gpu_state") or ():
        if g.get("mig_mode") == "enabled":
            spec = _spec_gib(g.get("name"))
            devices = g.get("mig_devices") or []
            mem = [d.get("memory_total_mib") for d in devices if isinstance(d.get("memory_total_mib"), int)]
            frac = round(sum(mem) / (spec * 1024.0), 3) if mem and spec else None
            hits.append({"gpu": g.get("index"), "name": g.get("name"), "kind": "mig",
                         "mig_devices": devices, "fraction": frac,
                         "fraction_unknown_why": None if frac is not None else
                         "no MIG instance readable here" if not mem else "GPU not in the spec table"})
            continue
        total = g.get("memory_total_mib")
        spec = _spec_gib(g.get("name"))
        if isinstance(total, int) and spec and total < WHOLE_GPU_FRACTION * spec * 1024:
            hits.append({"gpu": g.get("index"), "name": g.get("name"), "kind": "memory_share",
                         "memory_total_mib": total, "spec_memory_gib": spec,
                         "fraction": round(total / (spec * 1024.0), 3)})
    return {"gpus": hits} if hits else None


def _int_env(env, key):
    try:
        return int(str(env.get(key)).strip())
    except (TypeError, ValueError):
        return None


def m_cpu_quota(v):
    cg = v.get("cgroup") or {}
    quota, cpus = cg.get("cpu_quota"), cg.get("visible_cpus")
    if not isinstance(quota, (int, float)) or not isinstance(cpus, int) or quota >= CPU_QUOTA_FRACTION * cpus:
        return None
    threads = max(1, int(quota))
    env = v.get("env") or {}
    set_now = {k: env[k] for k in THREAD_ENV_KEYS if k in env}
    omp = _int_env(env, "OMP_NUM_THREADS")
    too_many = {k: val for k, val in set_now.items() if _int_env(env, k) is None or _int_env(env, k) > -(-quota // 1)}
    if omp is not None and 0 < omp <= -(-quota // 1) and not too_many:
        return None  # the pools are already sized to the quota
    return {"cpu_quota": quota, "visible_cpus": cpus, "cpu_max": cg.get("cpu_max"), "cpu_max_at": cg.get("cpu_max_at"),
            "thread_settings_now": set_now, "suggested_threads": threads,
            "fix": {k: str(threads) for k in THREAD_ENV_KEYS}}


def m_pids_low(v):
    cg = v.get("cgroup") or {}
    pids = cg.get("pids_max")
    if not isinstance(pids, int) or pids >= PIDS_MAX_LOW:
        return None
    return {"pids_max": pids, "pids_max_at": cg.get("pids_max_at"), "visible_cpus": cg.get("visible_cpus"),
            "threshold": PIDS_MAX_LOW}


def m_shm_small(v):
    shm = v.get("shm_size_mib")
    if not isinstance(shm, int) or shm >= SHM_MIN_MIB or not v.get("gpu_expected"):
        return None
    return {"shm_size_mib": shm, "minimum_mib": SHM_MIN_MIB, "gpu_count": v.get("gpu_count"),
            "in_container": v.get("in_container")}


# Tokens of a model text that say the form factor, memory or bus, not the chip.
_NOT_A_MODEL_TOKEN = re.compile(r"^(?:sxm\d*|hbm\d*e?|gddr\d*x?|pcie\d*|gen\d+|\d+gb|nvl\d*)$")


def model_tokens(name):
    """The tokens that name the chip in a GPU model text ("RTX 4090" -> {"4090"}, "H100 (80 GB SXM5)" -> {"h100"},
    "NVIDIA H100 80GB HBM3" -> {"h100"}): letters with digits, or a four-digit number; no sizes or form factors."""
    out = set()
    for t in re.split(r"[^a-z0-9]+", specs.normalize_name(name or "")):
        if not re.search(r"\d", t) or _NOT_A_MODEL_TOKEN.match(t):
            continue
        if t.isdigit() and len(t) != 4:
            continue  # a size ("80") or a count, not a model number
        out.add(t)
    return out


def _claimed_size_gib(name):
    m = re.search(r"(\d+)\s*gb\b", (name or "").lower())
    return int(m.group(1)) if m else None


def m_provider_claim(v):
    claims = v.get("provider_claims") or {}
    if not claims:
        return None
    names = [g.get("name") for g in v["gpus"] if g.get("name")] or [
        g.get("name") for g in v.get("gpu_state") or () if g.get("name")]
    totals = [g.get("memory_total_mib") for g in v.get("gpu_state") or () if isinstance(g.get("memory_total_mib"), int)]
    mismatches = []
    model = claims.get("gpu_model")
    if model and names:
        want = model_tokens(model)
        wrong = sorted({n for n in names if want and not want <= model_tokens(n)})
        if wrong:
            mismatches.append({"what": "gpu_model", "claimed": model, "found": wrong})
        size = _claimed_size_gib(model)
        if size and totals and not wrong and min(totals) < WHOLE_GPU_FRACTION * size * 1024:
            mismatches.append({"what": "gpu_memory", "claimed": "%d GB (in the model name)" % size,
                               "found_mib": min(totals)})
    mem = claims.get("gpu_memory_mib")
    if isinstance(mem, int) and totals and min(totals) < WHOLE_GPU_FRACTION * mem:
        mismatches.append({"what": "gpu_memory", "claimed_mib": mem, "found_mib": min(totals)})
    driver = claims.get("driver_version")
    found_driver = v.get("driver_version")
    if driver and found_driver and _vkey(driver) != _vkey(found_driver):
        mismatches.append({"what": "driver_version", "claimed": driver, "found": found_driver})
    cuda = claims.get("cuda_version")
    found_cuda = (v.get("nvml") or {}).get("cuda_driver_version")
    if cuda and found_cuda and _vkey(found_cuda)[:2] < _vkey(cuda)[:2]:
        mismatches.append({"what": "cuda_version", "claimed": str(cuda), "found": found_cuda})
    if not mismatches:
        return None
    return {"provider": claims.get("provider"), "mismatches": mismatches}


def sev_claim(ev):
    hard = {"gpu_model", "gpu_memory"}
    return "critical" if any(m["what"] in hard for m in ev.get("mismatches", ())) else "warning"


def m_recovery_action(v):
    hits = []
    for g in v.get("gpu_state") or ():
        action = g.get("recovery_action")
        if action in (None, 0):
            continue
        name, what = RECOVERY_ACTIONS.get(action, ("unknown (%s)" % action, None))
        hits.append({"gpu": g.get("index"), "recovery_action": action, "name": name,
                     "renter_action": what or "not known to gpufleet: ask the provider"})
    return {"gpus": hits, "in_container": v.get("in_container")} if hits else None


def _rule(**kw):
    row = {"code": None, "severity": None, "remedy_class": None, "blocks_cuda": False, "meaning": None,
           "remedy": None, "source": None, "match": None, "severity_of": None, "remedy_class_of": None}
    unknown = set(kw) - set(row)
    if unknown:
        raise ValueError("unknown rule fields: %s" % sorted(unknown))
    row.update(kw)
    if row["severity"] not in SEVERITIES or row["remedy_class"] not in REMEDY_CLASSES:
        raise ValueError("bad severity / remedy class in rule %s" % row["code"])
    return row


RULES = [
    _rule(code="no_driver", severity="critical", remedy_class="provider", blocks_cuda=True, match=m_no_driver,
          meaning="No NVIDIA kernel driver is loaded on this (non-container) host.",
          remedy="Install the NVIDIA driver the image is meant to carry, or ask the provider for a host with it.",
          source=DESIGN + " (driver not loaded); " + REF + " section 2.1; " + TE + "found-no-nvidia-driver_*"),
    _rule(code="container_without_gpus", severity="critical", remedy_class="provider", blocks_cuda=True,
          match=m_container_without_gpus,
          meaning="This is a container with no /dev/nvidia* GPU nodes: it was started without GPUs "
                  "(no --gpus / nvidia runtime / CDI device).",
          remedy="Recreate the container with GPUs attached (provider setting or --gpus all); nothing inside "
                 "the container can add them.",
          source=DESIGN + " (container started without GPUs); fixtures nvidia_smi_text/error_couldnt-communicate_*"),
    _rule(code="driver_library_mismatch", severity="critical", remedy_class="reboot", blocks_cuda=True,
          match=m_driver_library_mismatch, remedy_class_of=machine_restart,
          meaning="The loaded kernel module and the user-space driver libraries are different versions "
                  "(typically an upgrade without a reboot).",
          remedy="Reboot so the new kernel module loads (or reinstall the matching user-space driver); hold the "
                 "driver packages against unattended upgrades. In a container only the provider can reboot the "
                 "machine under it.",
          source=REF + " section 2.2; fixtures nvidia_smi_text/error_nvml-driver-library-mismatch_*, "
                       "kernel_logs/*api-mismatch*"),
    _rule(code="nvidia_uvm_not_loaded", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_nvidia_uvm_not_loaded, remedy_class_of=uvm_remedy_class,
          meaning="The nvidia module is loaded but nvidia_uvm is not, or (in a container) the GPU nodes are there "
                  "but /dev/nvidia-uvm is not; CUDA needs it.",
          remedy="modprobe nvidia-uvm (or nvidia-modprobe -u -c=0) and load it at boot; in a container, restart "
                 "(or recreate) it with its devices (--gpus / the nvidia runtime pass /dev/nvidia-uvm in), or ask "
                 "the provider to.",
          source=DESIGN + " (nvidia_uvm not loaded); " + REF + " section 2.1 (gpu-operator #2685)"),
    _rule(code="device_nodes_missing", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_device_nodes_missing,
          meaning="The driver is loaded but /dev/nvidiactl, /dev/nvidia-uvm or /dev/nvidiaN nodes are missing.",
          remedy="Create them with nvidia-modprobe -u -c=0 (and nvidia-ctk system create-dev-char-symlinks).",
          source=DESIGN + " (device nodes missing); " + REF + " sections 2.1, 2.4"),
    _rule(code="cuda_visible_devices_empty_or_invalid", severity="critical", remedy_class="fixable",
          blocks_cuda=True, match=m_cuda_visible_devices,
          meaning="CUDA_VISIBLE_DEVICES is empty or names GPUs that do not exist; CUDA then sees fewer or no GPUs.",
          remedy="Unset CUDA_VISIBLE_DEVICES or set it to valid indices / GPU UUIDs in the environment that sets it.",
          source=DESIGN + " (CUDA_VISIBLE_DEVICES empty/invalid); " + REF + " section 2.1 (pytorch #90543, #52675)"),
    _rule(code="cpu_only_wheel", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_cpu_only_wheel,
          meaning="The installed torch is a CPU-only build; it will never use a GPU.",
          remedy="Reinstall torch from the CUDA variant index the driver supports (torchcompat.solve picks it).",
          source=DESIGN + " (CPU-only torch wheel); " + REF + " section 3.3"),
    _rule(code="wrong_variant_for_driver", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_wrong_variant_for_driver,
          meaning="The torch wheel is built for a newer CUDA than the host driver supports "
                  "(\"found version NNNNN\" is the driver's CUDA version: 10010 = CUDA 10.1).",
          remedy="Install the torch variant the driver supports (torchcompat.solve), or a newer driver if the "
                 "host is yours to change.",
          source=REF + " sections 2.1, 3.2; " + TE + "driver-too-old_found-*"),
    _rule(code="arch_missing_from_wheel", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_arch_missing_from_wheel,
          meaning="The torch wheel carries no kernels for this GPU's architecture (e.g. Blackwell sm_120 with a "
                  "cu121 wheel): is_available() may be True but kernels fail.",
          remedy="Install a torch release/variant whose arch list covers the GPU (torchcompat.first_covering).",
          source=REF + " sections 2.1, 3.1; " + TE + "no-kernel-image_*"),
    _rule(code="libcudart_not_found", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_libcudart_not_found,
          meaning="A CUDA extension could not load libcudart: the runtime for its CUDA major is not installed "
                  "or not on the loader path.",
          remedy="Install the matching nvidia-cuda-runtime-cuXX wheel in the venv (or the toolkit) instead of "
                 "adding paths to LD_LIBRARY_PATH.",
          source=REF + " section 2.3; " + TE + "libcudart-so-12-cannot-open_*"),
    _rule(code="ld_library_path_shadowing", severity="warning", remedy_class="fixable",
          match=m_ld_library_path_shadowing,
          meaning="LD_LIBRARY_PATH or ld.so.conf puts a system CUDA library directory where pip torch's own "
                  "nvidia-* libraries should be found (undefined symbol __nvJitLink*).",
          remedy="Remove the CUDA directories from the global LD_LIBRARY_PATH / extra ld.so.conf entries for "
                 "pip-wheel venvs.",
          source=REF + " section 2.3; " + TE + "nvjitlink-*"),
    _rule(code="cuda_link_wrong_target", severity="warning", remedy_class="fixable", match=m_cuda_link_wrong_target,
          meaning="/usr/local/cuda points at a toolkit other than the one that should be used (or at nothing).",
          remedy="Repoint /usr/local/cuda at the chosen toolkit (the cuda_links role).",
          source=DESIGN + " (/usr/local/cuda wrong toolkit); " + REF + " section 2.3"),
    _rule(code="error_802_fabric_manager", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_error_802_fabric_manager, remedy_class_of=host_side_in_container,
          meaning="An NVSwitch machine without a running fabric manager: CUDA init fails with Error 802 "
                  "\"system not yet initialized\".",
          remedy="Install nvidia-fabricmanager matching the driver branch and start it (only on NVSwitch hosts); "
                 "in a container the fabric manager runs on the machine, so the provider must start it.",
          source=REF + " section 2.7; " + TE + "error-802_*"),
    _rule(code="error_804_forward_compat", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_error_804_forward_compat,
          meaning="A forward-compatibility libcuda (cuda-compat) was loaded on a GPU that does not support it "
                  "(Error 804).",
          remedy="Take the cuda-compat directory off the loader path and install the torch variant the host "
                 "driver supports.",
          source=REF + " sections 2.2, 3.2; " + TE + "error-804_*"),
    _rule(code="xid_79_fallen_off_bus", severity="critical", remedy_class="provider", blocks_cuda=True,
          match=m_xid_79,
          meaning="A GPU has fallen off the PCIe bus (Xid 79): hardware, power or firmware fault.",
          remedy="Needs a host reboot at least; if it recurs, report the GPU to the provider.",
          source=REF + " section 2.5; fixtures kernel_logs/bumblebee-554_*"),
    _rule(code="ecc_or_row_remap_failure", severity="critical", remedy_class="provider",
          match=m_ecc, severity_of=sev_ecc,
          meaning="ECC errors or row-remapping events (Xid 48/63/64/94/95, or a failed row remap) on a GPU.",
          remedy="A pending remap needs a GPU reset or reboot; a failed remap or uncontained error is a provider "
                 "(RMA) matter.",
          source=REF + " sections 2.5, 2.6; fixtures kernel_logs/gpud_xid48-63-94_*"),
    _rule(code="fewer_gpus_than_rented", severity="critical", remedy_class="provider",
          match=m_fewer_gpus,
          meaning="Fewer GPUs are visible than were rented.",
          remedy="Ask the provider for the missing GPUs or a refund; check Xid 79 first.",
          source=DESIGN + " (GPU count lower than rented)"),
    _rule(code="persistence_mode_off", severity="info", remedy_class="fixable", match=m_persistence_off,
          remedy_class_of=host_side_in_container,
          meaning="Persistence mode is off: the driver state is torn down between jobs (slower start-up).",
          remedy="Enable nvidia-persistenced (not the deprecated nvidia-smi -pm); in a container the machine's "
                 "owner (the provider) must do it.",
          source=REF + " section 2.8"),
    _rule(code="container_lost_gpus", severity="critical", remedy_class="restart_container", blocks_cuda=True,
          match=m_container_lost_gpus,
          meaning="This container had its GPUs and lost them: the /dev/nvidia* nodes are there but opening them is "
                  "denied (EPERM) or NVML fails with \"Unknown Error\" - the cgroup device rules were rewritten, "
                  "typically when the host ran systemctl daemon-reload (cgroup v2, systemd cgroup driver).",
          remedy="Restart (or recreate) the container: it gets its GPUs back. Nothing inside the container can "
                 "restore them. The provider's fix on the machine: nvidia-ctk system create-dev-char-symlinks "
                 "--create-all (and its udev rule), or Docker's cgroupfs driver, or --device for every node.",
          source=CTK_48 + "; https://github.com/NVIDIA/nvidia-container-toolkit/issues/1227; " + ECOSYSTEM),
    _rule(code="gpu_used_by_another_tenant", severity="warning", remedy_class="provider", match=m_other_tenant,
          meaning="Someone else is on this GPU: compute processes that are not this host's, or memory held with "
                  "no process listed while none of ours uses it - the same in two looks seconds apart.",
          remedy="Ask the provider to clear the GPU, or return the rental; your jobs would share its memory and "
                 "compute. (A job of yours in another container on the same machine also looks like this.)",
          source=ECOSYSTEM + " (Datura-ai/lium-io PR #1242); https://github.com/NVIDIA/nvidia-docker/issues/1483 "
                 "(NVML lists host PIDs in a container); russellb/canhazgpu docs/features-unauthorized.md (100 MB)"),
    _rule(code="gpu_partitioned", severity="warning", remedy_class="provider", match=m_gpu_partitioned,
          meaning="A GPU is a MIG slice or a memory-limited share, not the whole GPU; the evidence gives the "
                  "fraction of the GPU's memory that is yours.",
          remedy="If a whole GPU was rented, ask the provider for it or return the rental; if a slice was rented, "
                 "size the jobs to the fraction.",
          source=ECOSYSTEM + "; NVML nvmlDeviceGetMigMode and nvmlDeviceGetMemoryInfo_v2; "
                 "https://github.com/Project-HAMi/HAMi/issues/235 (3000 MiB of a 16 GB V100 in a container)"),
    _rule(code="cpu_quota_below_visible_cpus", severity="warning", remedy_class="fixable", match=m_cpu_quota,
          meaning="The container may use far fewer CPUs (cgroup cpu.max) than it sees; torch, OpenMP and MKL start "
                  "one thread per visible CPU, and the quota then throttles them (oversubscription, slow data "
                  "loading).",
          remedy="Size the thread pools to the quota: set OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS "
                 "and NUMEXPR_NUM_THREADS to the evidence's suggested_threads (e.g. in /etc/environment) and keep "
                 "DataLoader num_workers near it.",
          source=ECOSYSTEM + " (vast-ai/base-image test 56-cpu-thread-limits)"),
    _rule(code="pids_max_low", severity="warning", remedy_class="fixable", match=m_pids_low,
          remedy_class_of=container_setting,
          meaning="The cgroup's pids.max (which counts threads) is low: DataLoader workers and thread pools fail "
                  "with \"can't start new thread\" / EAGAIN.",
          remedy="Start the container with a higher --pids-limit (a provider or template setting); on a VM, raise "
                 "the systemd TasksMax of the session or service.",
          source=ECOSYSTEM + " (vast-ai/base-image test 56-cpu-thread-limits)"),
    _rule(code="shm_too_small", severity="warning", remedy_class="fixable", match=m_shm_small,
          remedy_class_of=container_setting,
          meaning="/dev/shm is smaller than NCCL and DataLoader workers need (Docker's default is 64 MB); "  # noqa: S108
                  "multi-GPU NCCL and workers fail with bus errors.",
          remedy="Recreate the container with --shm-size=1g or more (or --ipc=host); on a VM, remount /dev/shm "
                 "larger (mount -o remount,size=1G /dev/shm).",
          source="NVIDIA NGC PyTorch container docs: docker run --shm-size=1g --ulimit memlock=-1 "
                 "(module_utils/gpufleet/doctor_rules.py SHM_MIN_MIB); " + ECOSYSTEM),
    _rule(code="provider_claim_mismatch", severity="critical", remedy_class="provider", match=m_provider_claim,
          severity_of=sev_claim,
          meaning="The provider's listing does not match the machine: another GPU model or less memory than "
                  "listed (critical), or another driver / CUDA version (warning).",
          remedy="Return the rental or ask the provider to correct it; the evidence lists what was claimed and "
                 "what NVML found.",
          source="shared/reference/provider-apis.md (vast.ai gpu_name, num_gpus, driver_version, cuda_max_good; "
                 "inventory plugin host vars gpufleet_claimed_gpu_model, gpufleet_provider_*)"),
    _rule(code="gpu_recovery_action", severity="critical", remedy_class="reboot", match=m_recovery_action,
          remedy_class_of=machine_restart,
          meaning="The driver says a GPU needs recovery (NVML recovery action: GPU reset, node reboot, drain, "
                  "bus reset ...); until then the GPU is not to be trusted.",
          remedy="Do what the evidence's renter_action says: on a VM or machine of yours reset the GPU or reboot; "
                 "in a container only the provider can, so ask them (or return the rental).",
          source="NVML NVML_FI_DEV_GET_GPU_RECOVERY_ACTION / nvmlGpuRecoveryAction_t (nvml.h, pynvml); "
                 "shared/reference/ecosystem.md 'GPU health tools'"),
]

# torch text codes that no rule can explain by themselves: reported as unknown with the raw text.
TEXT_CODES_NEEDING_CONTEXT = ("error_802", "devices_busy_or_unavailable", "cuda_unknown_error")
