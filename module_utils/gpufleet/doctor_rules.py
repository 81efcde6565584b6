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

from .nvml import cuda_version_string as cuda_from_int  # 10010 -> "10.1", the same encoding as NVML's
from .torchcompat import CUDA_VARIANTS, InvalidInput, parse_driver

REF = "shared/reference/cuda-failures-and-compat.md"
DESIGN = "shared/DESIGN.md 'The doctor'"
TE = "fixtures torch_errors/"

SEVERITIES = ("critical", "warning", "info")
REMEDY_CLASSES = ("fixable", "reboot", "provider", "unknown")

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
            out.update(arch_list=list(arch_list), gpus=[{"index": g.get("index"), "name": g.get("name"),
                                                        "compute_capability": g.get("compute_capability")}
                                                       for g in missing])
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
    if not v["proc_modules_known"] or "nvidia" not in v["modules"] or "nvidia_uvm" in v["modules"]:
        return None
    if v.get("in_container") and "/dev/nvidia-uvm" in (v["device_nodes"] or ()):
        return None  # the host's module list is what a container sees; the node says uvm works
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
    probs = [p for p in tk.get("problems", ()) if p.get("code") in ("cuda_link_wrong_target", "cuda_link_dangling")]
    if not probs:
        return None
    link = tk.get("cuda_symlink") or {}
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
          match=m_driver_library_mismatch,
          meaning="The loaded kernel module and the user-space driver libraries are different versions "
                  "(typically an upgrade without a reboot).",
          remedy="Reboot so the new kernel module loads (or reinstall the matching user-space driver); hold the "
                 "driver packages against unattended upgrades.",
          source=REF + " section 2.2; fixtures nvidia_smi_text/error_nvml-driver-library-mismatch_*, "
                       "kernel_logs/*api-mismatch*"),
    _rule(code="nvidia_uvm_not_loaded", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_nvidia_uvm_not_loaded, remedy_class_of=host_side_in_container,
          meaning="The nvidia module is loaded but nvidia_uvm is not; CUDA needs it.",
          remedy="modprobe nvidia-uvm (or nvidia-modprobe -u -c=0) and load it at boot; in a container the "
                 "machine's owner (the provider) must do it.",
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
]

# torch text codes that no rule can explain by themselves: reported as unknown with the raw text.
TEXT_CODES_NEEDING_CONTEXT = ("error_802", "devices_busy_or_unavailable", "cuda_unknown_error")
