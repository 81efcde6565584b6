# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A finding's evidence in a few words and numbers: the text the verdict quotes (``brief``), one phrase maker per
doctor code (``BRIEFS``: the renter-check phrases, the torch build, the driver's signs), else the meaning's first
whole sentence (``first_sentence``). The judgement (judgement.py) decides; this only words the evidence.
"""

import re


def _gib(mib):
    return "%.1f GiB" % (mib / 1024.0) if isinstance(mib, (int, float)) else "?"


def _times(n):
    return {1: "once", 2: "twice"}.get(n, "%s times" % n)


def _tenant(ev):
    parts = []
    for g in ev.get("gpus") or ():
        used = [u for u in g.get("memory_used_mib") or () if isinstance(u, (int, float))]
        if used:
            parts.append("GPU %s holds %s with no process of this host" % (g.get("gpu"), _gib(min(used))))
        else:
            parts.append("GPU %s runs %s process(es) not of this host" % (g.get("gpu"), g.get("foreign_count")))
    looks, gap = ev.get("looks"), ev.get("interval_s")
    return "%s, seen %s%s" % ("; ".join(parts), _times(looks), " %s s apart" % gap if gap else "") if parts else None


def _partitioned(ev):
    parts = []
    for g in ev.get("gpus") or ():
        frac = g.get("fraction")
        share = "%.0f%%" % (100 * frac) if isinstance(frac, (int, float)) else "an unknown share"
        if g.get("kind") == "mig":
            parts.append("GPU %s is a MIG slice (%s of its memory)" % (g.get("gpu"), share))
        else:
            parts.append("GPU %s has %s of %s GiB (%s)" % (
                g.get("gpu"), _gib(g.get("memory_total_mib")), g.get("spec_memory_gib"), share))
    return "; ".join(parts) or None


def _lost(ev):
    denied = sorted(ev.get("open_denied") or ())
    nvml = ev.get("nvml_error")
    bits = ["%d GPU node(s) refuse opening (%s)" % (len(denied), ", ".join(denied[:2])) if denied else
            "GPU nodes present"]
    if nvml:
        bits.append("NVML: %s" % nvml)
    return "the container lost its GPUs: " + "; ".join(bits)


def _claim(ev):
    parts = []
    for m in ev.get("mismatches") or ():
        found = m.get("found")
        if m.get("found_mib") is not None:
            found = _gib(m["found_mib"])
        elif isinstance(found, list):
            found = ", ".join(str(f) for f in found)
        claimed = m.get("claimed") or (_gib(m["claimed_mib"]) if m.get("claimed_mib") else "?")
        parts.append("listing says %s %s, host has %s" % (str(m.get("what")).replace("_", " "), claimed, found))
    return "; ".join(parts) or None


def _uvm(ev):
    if ev.get("in_container"):
        gpus = [n for n in ev.get("device_nodes") or () if str(n)[len("/dev/nvidia"):].isdigit()]
        return "no /dev/nvidia-uvm beside %d GPU node(s) in this container: CUDA cannot start" % len(gpus)
    return "nvidia_uvm is not loaded (%s loaded): CUDA cannot start" % ", ".join(ev.get("modules") or ["nvidia"])


def _short_gpu(name):
    """A GPU's model as a renter says it: "NVIDIA GeForce RTX 5090" -> "RTX 5090"."""
    text = " ".join(str(name or "GPU").split())
    for prefix in ("NVIDIA ", "GeForce "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text


def _torch_build(ev, where):
    """ "torch 2.7.1+cu126", with " in WHERE" when the judged environment is not the login shell's python."""
    return "torch %s%s" % (ev.get("torch_version") or "(version unknown)", " in %s" % where if where else "")


def _sm(cc):
    major, minor = (str(cc).split(".") + ["0"])[:2]
    return "sm_%s%s" % (int(major), int(minor))


def _arch_missing(ev, where):
    gpus = [g for g in ev.get("gpus") or () if isinstance(g, dict) and g.get("compute_capability")]
    if not gpus:
        return None  # only torch's text: the meaning says it
    arches = sorted({_sm(g["compute_capability"]) for g in gpus})
    names = []
    for g in gpus:
        if _short_gpu(g.get("name")) not in names:
            names.append(_short_gpu(g.get("name")))
    needs = ev.get("needs") if isinstance(ev.get("needs"), dict) else None
    if needs is None:
        needs = _first_covering([g["compute_capability"] for g in gpus])
    return "%s has no %s kernels (%s)%s" % (
        _torch_build(ev, where), "/".join(arches), ", ".join(names),
        ": needs %s or later" % needs["variant"] if needs and needs.get("variant") else
        ": no torch release known here has them")


def _first_covering(ccs):
    """{"series", "variant"} of the earliest torch build with kernels for every one of ``ccs``, or None."""
    try:
        from ...host.pytorch.arch import first_covering
        from ...host.pytorch.parse import parse_cc

        got = first_covering([parse_cc(c) for c in ccs])
    except Exception:  # the compatibility table is optional here: a line must render without it
        return None
    return {"series": got[0], "variant": got[1]} if got else None


def _wrong_variant(ev, where):
    have = ev.get("driver_supports_cuda")
    floor = ev.get("driver_below_floor")
    driver = ev.get("driver_version")
    if ev.get("torch_cuda") and (have or floor or driver):
        tail = ("the driver supports CUDA %s" % have if have else
                "driver %s is below its floor %s" % (driver or "?", floor) if floor else
                "driver %s cannot run it" % driver)
        return "%s is built for CUDA %s: %s" % (_torch_build(ev, where), ev["torch_cuda"], tail)
    return None


def _gpus_of(ev, key="gpus"):
    return ", ".join(str(g) for g in ev.get(key) or ())


def _no_driver(ev):
    signs = []
    if ev.get("nvidia_module_loaded") is False:
        signs.append("no nvidia module in /proc/modules")
    if "proc_driver_nvidia_version" in ev:
        signs.append("no /proc/driver/nvidia/version")
    if ev.get("nvml_error"):
        signs.append("NVML: %s" % ev["nvml_error"])
    return "no NVIDIA driver loaded: %s" % "; ".join(signs) if signs else None


def _without_gpus(ev):
    if "device_nodes" not in ev:
        return None
    nodes = ev.get("device_nodes") or []
    parts = ["no /dev/nvidiaN node (%s)" % ("only %s" % ", ".join(nodes) if nodes else "no /dev/nvidia* at all")]
    if ev.get("nvml_error"):
        parts.append("NVML: %s" % ev["nvml_error"])
    if ev.get("host_driver_version"):
        parts.append("the machine runs driver %s" % ev["host_driver_version"])
    return "container started without GPUs: %s" % "; ".join(parts)


def _mismatch(ev):
    said = ev.get("nvml_error") or ("cuInit %s" % ev["cuinit_result"] if ev.get("cuinit_result") else None) \
        or ev.get("kernel_log")
    return "driver/library version mismatch: %s" % " ".join(str(said).split())[:100] if said else None


def _nodes_missing(ev):
    if not ev.get("missing"):
        return None
    return "driver %s loaded, %s missing" % (ev.get("driver_version") or "?", ", ".join(ev.get("missing") or ()))


def _cvd(ev):
    if "CUDA_VISIBLE_DEVICES" not in ev:
        return None
    problems = ev.get("problems") or ["invalid"]
    count = ev.get("gpu_count")
    here = " (%s GPU(s) here)" % count if count is not None else ""
    return "CUDA_VISIBLE_DEVICES=%r: %s%s" % (ev["CUDA_VISIBLE_DEVICES"], problems[0], here)


def _library(text, pattern):
    m = re.search(pattern, str(text or ""))
    return m.group(0) if m else None


def _libcudart(ev, where):
    lib = _library(ev.get("torch_text"), r"libcudart\.so[\d.]*")
    return "%s cannot be loaded%s" % (lib, " (torch in %s)" % where if where else "") if lib else None


def _shadowing(ev):
    entries = ev.get("ld_library_path") or []
    if entries:
        return "LD_LIBRARY_PATH puts %s (%s) before torch's own CUDA libraries" % (
            entries[0].get("path"), entries[0].get("source") or "environment")
    if ev.get("ld_so_conf"):
        return "ld.so.conf: %s" % ev["ld_so_conf"]
    symbol = _library(ev.get("torch_text"), r"undefined symbol: __nvJitLink\w*")
    return "import torch: %s (a system CUDA library shadows torch's own)" % symbol if symbol else None


def _fabric(ev):
    if not ev.get("fabric_manager"):
        return None
    return "NVSwitch machine with the fabric manager %s%s" % (
        ev.get("fabric_manager"), ": cuInit error 802" if ev.get("cuinit_result") == 802 else ": Error 802")


def _compat(ev):
    if not (ev.get("libcuda_path") or ev.get("cuinit_result") or ev.get("torch_text")):
        return None
    return "Error 804: forward-compatibility libcuda %s on a GPU without support" % (
        ev.get("libcuda_path") or "(path unknown)")


def _ecc(ev):
    parts = []
    if ev.get("xid_counts"):
        parts.append("Xid %s" % ", ".join("%s x%s" % kv for kv in sorted(ev["xid_counts"].items())))
    if ev.get("remapped_rows_failure_gpus"):
        parts.append("failed row remap on GPU %s" % _gpus_of(ev, "remapped_rows_failure_gpus"))
    return "ECC: %s" % "; ".join(parts) if parts else None


def _recovery(ev):
    hits = [g for g in ev.get("gpus") or () if isinstance(g, dict)]
    return "; ".join("GPU %s needs recovery %s (%s)" % (g.get("gpu"), g.get("name"), g.get("renter_action"))
                     for g in hits) or None


def _quota(ev):
    if ev.get("cpu_quota") is None:
        return None
    return "CPU quota %s of %s visible CPUs: thread pools of %s would be throttled, size them to %s" % (
        ev.get("cpu_quota"), ev.get("visible_cpus"), ev.get("visible_cpus"), ev.get("suggested_threads"))


# Doctor code -> its evidence as a few words in numbers (the verdict quotes it); other codes: their meaning's first
# whole sentence. Each takes the finding's evidence and ``where``: the environment whose torch was judged, named
# only when it is not the login shell's python (None otherwise).
BRIEFS = {
    "nvidia_uvm_not_loaded": lambda ev, where: _uvm(ev),
    "gpu_used_by_another_tenant": lambda ev, where: _tenant(ev),
    "gpu_partitioned": lambda ev, where: _partitioned(ev),
    "container_lost_gpus": lambda ev, where: _lost(ev),
    "provider_claim_mismatch": lambda ev, where: _claim(ev),
    "fewer_gpus_than_rented": lambda ev, where: "%s GPU(s) visible, %s rented" % (
        ev.get("gpu_count"), ev.get("expected_gpu_count")),
    "cpu_only_wheel": lambda ev, where: "%s is a CPU-only build" % _torch_build(ev, where),
    "arch_missing_from_wheel": _arch_missing,
    "wrong_variant_for_driver": _wrong_variant,
    "xid_79_fallen_off_bus": lambda ev, where: "Xid 79 (GPU fell off the bus): %s" % ", ".join(
        "%s x%s" % kv for kv in sorted((ev.get("xid_counts") or {}).items())),
    "no_driver": lambda ev, where: _no_driver(ev),
    "container_without_gpus": lambda ev, where: _without_gpus(ev),
    "driver_library_mismatch": lambda ev, where: _mismatch(ev),
    "device_nodes_missing": lambda ev, where: _nodes_missing(ev),
    "cuda_visible_devices_empty_or_invalid": lambda ev, where: _cvd(ev),
    "libcudart_not_found": _libcudart,
    "ld_library_path_shadowing": lambda ev, where: _shadowing(ev),
    "cuda_link_wrong_target": lambda ev, where: ev.get("message"),
    "error_802_fabric_manager": lambda ev, where: _fabric(ev),
    "error_804_forward_compat": lambda ev, where: _compat(ev),
    "ecc_or_row_remap_failure": lambda ev, where: _ecc(ev),
    "persistence_mode_off": lambda ev, where: "persistence mode off on GPU %s" % _gpus_of(ev) if ev.get("gpus")
    else None,
    "cpu_quota_below_visible_cpus": lambda ev, where: _quota(ev),
    "pids_max_low": lambda ev, where: "pids.max %s (threads included), below %s" % (
        ev["pids_max"], ev.get("threshold")) if ev.get("pids_max") is not None else None,
    "shm_too_small": lambda ev, where: "/dev/shm %s MiB, below the %s MiB NCCL and DataLoader workers need" % (  # noqa: S108
        ev["shm_size_mib"], ev.get("minimum_mib")) if ev.get("shm_size_mib") is not None else None,
    "gpu_recovery_action": lambda ev, where: _recovery(ev),
}
# Doctor codes about the judged torch: their line names the environment when it is not the login shell's python.
TORCH_CODES = frozenset(["cpu_only_wheel", "arch_missing_from_wheel", "wrong_variant_for_driver",
                         "libcudart_not_found"])
# Words that end with a period inside a sentence ("e.g. Blackwell"): no sentence ends there.
_ABBREVIATIONS = ("e.g", "i.e", "etc", "vs", "cf", "approx")


def first_sentence(text):
    """The first whole sentence of ``text``, without its period: never cut inside parentheses or quotes, nor after
    an abbreviation ("e.g.")."""
    text = " ".join(str(text).split())
    depth, quoted = 0, False
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(depth - 1, 0)
        elif ch == '"':
            quoted = not quoted
        elif ch == "." and not depth and not quoted and text[i + 1:i + 2] in (" ", ""):
            word = text[:i].rsplit(" ", 1)[-1].lstrip("(\"'").lower()
            if word in _ABBREVIATIONS:
                continue
            return text[:i]
    return text


def brief(code, evidence, meaning, where=None):
    """The doctor finding ``code`` in a few words and numbers from its ``evidence``; else its ``meaning``'s first
    whole sentence. ``where``: the environment whose torch was judged, for a torch finding when it is not the
    login shell's python."""
    make = BRIEFS.get(code)
    if make and isinstance(evidence, dict) and evidence:
        try:
            text = make(evidence, where if code in TORCH_CODES else None)
        except (TypeError, ValueError, KeyError, AttributeError):
            text = None
        if text:
            return text
    text = first_sentence(meaning or code)
    if where and code in TORCH_CODES:
        text = "%s (torch in %s)" % (text, where)
    return text
