# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's matchers for the CUDA stack and the GPU itself: driver and kernel modules, device nodes,
CUDA_VISIBLE_DEVICES, the toolkit and loader path, the torch wheel, fabric manager, Xid / ECC, GPU count.

Each is a row's ``match`` in ``doctor_rules.RULES``: it takes the view built by doctor.view(evidence) and
returns a dict of the raw values that matched, or None. Nothing in this file reads the host.
"""

import re

from ..gpu.nvml import cuda_version_string as cuda_from_int
from ..pytorch.arch import first_covering
from ..pytorch.parse import InvalidInput, parse_driver
from ..pytorch.table import CUDA_VARIANTS
from .texts import _text_hit, found_version


def _torch(v, key):
    t = v.get("torch") or {}
    return t.get(key)


def m_cpu_only_wheel(v):
    t = v.get("torch")
    if not t or not t.get("importable") or not v.get("gpu_expected"):
        return None
    label = v.get("torch_label")
    if label == "cpu" or ("cuda" in t and t.get("cuda") is None and not t.get("hip")):
        return {"torch_version": t.get("version"), "torch_cuda": t.get("cuda")}
    return None


def _text_and_cuinit(v, text_code, cuinit_code):
    """{"torch_text": torch's text with ``text_code``, "cuinit_result": ``cuinit_code``}, each only where the
    evidence has it: the two signs of one CUDA error."""
    out = {}
    hit = _text_hit(v, text_code)
    if hit:
        out["torch_text"] = hit[text_code]
    if v.get("cuinit_result") == cuinit_code:
        out["cuinit_result"] = cuinit_code
    return out


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
    out.update(_text_and_cuinit(v, "error_802", 802))
    return out


def m_error_804_forward_compat(v):
    out = _text_and_cuinit(v, "error_804", 804)
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
