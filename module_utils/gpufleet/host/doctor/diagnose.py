"""The doctor: why is ``torch.cuda.is_available()`` False (or True but unusable)?

Pure part only: evidence in (a plain dict), findings out. Gathering the evidence on a host is the module's job; every
probe it runs must be cheap and free of side effects. The rules are data in ``rules.RULES``.

Evidence schema (every key optional; a missing key or None means "not gathered", which is never read as "absent"):

- ``device_nodes``: paths under /dev starting with ``nvidia`` (``/dev/nvidia0``, ``/dev/nvidiactl``,
  ``/dev/nvidia-uvm`` ...); [] = none there.
- ``proc_modules``: text of /proc/modules.
- ``proc_driver_version``: text of /proc/driver/nvidia/version; "" = file absent.
- ``nvml``: ``{"ok": bool, "error_code": str|None, "error_text": str|None, "gpu_count": int|None, "driver_version":
  str|None}`` (nvml.error_code_for).
- ``cuinit``: ``{"result": int|None, "libcuda_path": str|None, "stub": bool|None, "forward_compat": bool|None,
  "error": str|None}``: cuInit(0) through libcuda.so.1 (ctypes); result None = libcuda.so.1 could not be loaded.
- ``torch``: ``{"importable": bool, "import_error": str|None, "version": "2.5.1+cu121", "cuda": "12.1"|None,
  "is_available": bool, "device_count": int, "arch_list": ["sm_80", ...], "warning": str|None, "error": str|None}``
  from a probe run in the target interpreter.
- ``gpus``: list of ``{"index", "name", "compute_capability": "8.6", "persistence_mode": bool|None,
  "remapped_rows_failure": bool|None}``.
- ``env``: ``{"CUDA_VISIBLE_DEVICES": str, "LD_LIBRARY_PATH": str}``: a key is present only when the variable is set.
- ``cudatk``: ``layout.collect()`` result (toolkits, /usr/local/cuda, LD_LIBRARY_PATH and ld.so.conf entries,
  problems).
- ``pci_gpus``: PCI addresses of NVIDIA display / 3D controllers under /sys/bus/pci (class 03xx), or None when
  /sys/bus/pci could not be read. In a container it lists the whole machine's GPUs, not the container's.
- ``nvswitch_present``: bool|None.
- ``fabric_manager``: "running" | "stopped" | "failed" | "not_installed" | None.
- ``kernel_log``: ``kmsg.parse_kernel_log()`` result (Xid events, NVRM messages).
- ``expected_gpu_count``: int|None (what was rented).
- ``in_container``: bool|None (hostenv's container detection).
- ``device_open_errors``: ``{node: errno name}`` of the /dev/nvidiaN and /dev/nvidiactl nodes that would not open
  read-only ({} = all opened; EPERM = the cgroup device rules deny them).
- ``shm_size_mib``: size of /dev/shm (int) or None.
- ``cgroup``: ``{"version": 1|2|None, "cpu_quota": CPUs|None, "cpu_max", "cpu_max_at", "pids_max": int|None,
  "pids_max_at", "visible_cpus": int|None}`` (hostprobe.cgroup_limits); None for a limit means "max" or no such file.
- ``gpu_state``: per GPU from NVML: ``{"index", "name", "minor_number", "memory_total_mib", "mig_mode":
  "enabled"|"disabled"|None, "mig_devices": [{"name", "memory_total_mib"}]|None, "recovery_action": int|None}``
  (nvmlGpuRecoveryAction_t; match_renter.RECOVERY_ACTIONS).
- ``gpu_usage``: ``{"interval_s", "samples": [{"gpus": [{"index", "memory_used_mib" (v2, without the driver's
  reservation), "memory_reserved_mib", "memory_used_v1_mib", "processes": [{"pid", "used_memory_mib"}]}],
  "cuda_processes": [{"pid", "comm", "minors"}]|None}], "error"}``: two looks seconds apart; ``cuda_processes`` are
  this PID namespace's programs holding /dev/nvidia-uvm (None: /proc could not be read).
- ``provider_claims``: ``{"provider", "gpu_model", "gpu_memory_mib", "driver_version", "cuda_version"}`` from the
  provider's listing (the inventory plugins' host vars); None = nothing claimed.
- ``gpu_expected``: bool|None: whether this host is meant to have GPUs (the inventory says so). None = derive it: a
  rented GPU count above 0, GPUs seen by NVML, GPU device nodes, a loaded or installed NVIDIA driver, a CUDA torch
  build or a torch text about a missing driver all mean yes; none of them means a CPU host, on which a CPU torch, no
  driver and no /dev/nvidia* are normal and not findings.

``diagnose(evidence)`` returns ``{"status": "healthy"|"broken"|"degraded"|"unknown", "cuda_usable": bool|None,
"findings": [...], "unknown": [...], "decision": {...}}`` (``decision``: what the fixes act on, see ``decide``); a
finding is ``{code, severity, remedy_class, evidence, meaning, remedy}``; an unknown entry is ``{"what",
"evidence"}`` with the raw values no rule could classify. Nothing is guessed: evidence that fits no rule stays in
``unknown``.
"""

import re

from ..cuda import toolkit as cudatk
from ..gpu.nvml import cuda_version_string as cuda_from_int
from ..system.textmatch import line_of
from .match_renter import model_tokens
from .rules import RULES, TEXT_CODES_NEEDING_CONTEXT
from .texts import CU_RESULTS, TORCH_ERROR_PATTERNS, explain_torch_error, found_version

SCHEMA = 1
# NVML / nvidia-smi error codes that only say the NVIDIA user space is not installed.
NO_NVIDIA_STACK_CODES = (None, "pynvml_missing", "nvml_library_not_found", "nvidia_smi_missing", "no_gpu_stack")

_NVRM_RE = re.compile(r"NVRM version:\s+NVIDIA UNIX (?P<open>Open )?(?:x86_64 |aarch64 |ppc64le )?Kernel Module"
                      r"(?: for (?P<arch>\S+))?\s+(?P<version>\d+(?:\.\d+)+)")
_ARCH_RE = re.compile(r"NVIDIA UNIX (\S+) Kernel Module")
_GPU_NODE_RE = re.compile(r"^/dev/nvidia\d+$")


def parse_proc_driver_version(text):
    """/proc/driver/nvidia/version text -> {"version", "flavor": "open"|"proprietary", "arch"} or None."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    m = _NVRM_RE.search(text or "")
    if not m:
        return None
    arch = m.group("arch")
    if not arch:
        a = _ARCH_RE.search(m.group(0))
        arch = a.group(1) if a else None
    return {"version": m.group("version"), "flavor": "open" if m.group("open") else "proprietary", "arch": arch}


def parse_proc_modules(text):
    """Names of loaded modules from /proc/modules text."""
    return {line.split()[0] for line in (text or "").splitlines() if line.strip()}


def classify_torch_error(text):
    """Text code for a torch / CUDA error or warning text, or None when nothing is recognised."""
    return explain_torch_error(text)[0]


def _cc(text):
    m = re.match(r"^\s*(\d+)\.(\d+)\s*$", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _torch_texts(torch):
    out = {}
    for key in ("import_error", "warning", "error"):
        text = (torch or {}).get(key)
        if not text:
            continue
        for code, pattern, _source in TORCH_ERROR_PATTERNS:
            m = None if code in out else pattern.search(text)
            if m:
                out[code] = line_of(text, m)
    return out


def view(evidence):
    """The evidence with its raw texts parsed, as the rules read it."""
    ev = dict(evidence or {})
    v = dict(ev)
    nodes = ev.get("device_nodes")
    v["device_nodes"] = set(nodes) if nodes is not None else None
    v["gpu_nodes"] = sorted(n for n in (nodes or ()) if _GPU_NODE_RE.match(n))
    v["proc_modules_known"] = ev.get("proc_modules") is not None
    v["modules"] = parse_proc_modules(ev.get("proc_modules"))
    v["proc_driver_known"] = ev.get("proc_driver_version") is not None
    v["proc_driver_text"] = ev.get("proc_driver_version") or ""
    parsed = parse_proc_driver_version(ev.get("proc_driver_version"))
    v["driver"] = parsed
    v["driver_version"] = (parsed or {}).get("version") or (ev.get("nvml") or {}).get("driver_version")
    v["cuinit_result"] = (ev.get("cuinit") or {}).get("result")
    torch = ev.get("torch") or None
    v["torch"] = torch
    label = None
    if torch and torch.get("version") and "+" in str(torch["version"]):
        label = str(torch["version"]).split("+", 1)[1].lower()
    v["torch_label"] = label
    v["torch_text_codes"] = _torch_texts(torch)
    gpus = []
    for g in ev.get("gpus") or ():
        g = dict(g)
        g["cc"] = _cc(g.get("compute_capability"))
        gpus.append(g)
    v["gpus"] = gpus
    log = ev.get("kernel_log") or {}
    v["xid_counts"] = {int(k): n for k, n in (log.get("counts") or {}).items()}
    v["xid_events"] = log.get("events") or []
    v["nvrm_messages"] = log.get("nvrm_messages") or []
    v["gpu_count"], v["gpu_count_source"] = count_gpus(ev, v)
    v["gpu_expected"] = gpu_expected(ev, v)
    v["decision"] = decide(v)
    return v


def driver_cuda_version(v):
    """(version, source): the highest CUDA version the driver supports, however it was read.

    NVML or nvidia-smi (gpu_facts, the doctor's own read), else what the cuda_toolkits facts were given, else the
    "found version NNNNN" of torch's "driver too old" text. (None, None) when nothing said it.
    """
    nvml = v.get("nvml") or {}
    if nvml.get("cuda_driver_version"):
        return str(nvml["cuda_driver_version"]), nvml.get("source") or "nvml"
    tk = v.get("cudatk") or {}
    if tk.get("driver_cuda_version"):
        return str(tk["driver_cuda_version"]), tk.get("driver_cuda_version_source") or "cuda_toolkits"
    fv = found_version((v.get("torch_text_codes") or {}).get("driver_too_old"))
    if fv is not None:
        return cuda_from_int(fv), "torch text (found version %d)" % fv
    return None, None


def decide(v):
    """What this host's fixes must act on, decided once from the doctor's view.

    ``driver_cuda_version`` (and its source), the driver, the GPUs' compute capabilities, ``toolkit``: the toolkit
    /usr/local/cuda should point at, chosen by ``cudatk.choose_target`` (the one function that chooses it, also
    behind the cuda_toolkits facts) from the installed toolkits, the pin and this driver CUDA version, and
    ``cuda_link``: the link and the target it should get. The remediate role hands these to the roles that act
    (cuda_links, torch), so a diagnosis and its fix cannot disagree.
    """
    driver_cuda, source = driver_cuda_version(v)
    tk = v.get("cudatk") or {}
    toolkit, why_none = None, None
    if tk.get("toolkits") is not None:
        try:
            toolkit = cudatk.choose_target(tk["toolkits"], pinned=tk.get("pinned_version"), driver_cuda=driver_cuda)
        except cudatk.CudaTkError as exc:
            why_none = exc.message
    else:
        toolkit = tk.get("chosen")
    if toolkit is None and why_none is None:
        why_none = "no CUDA toolkit is installed" if tk else "the CUDA layout was not read"
    keep = ("root", "version", "major_minor", "kind", "rule", "reasons")
    link = tk.get("cuda_symlink") or {}
    return {
        "driver_cuda_version": driver_cuda, "driver_cuda_version_source": source,
        "driver_version": v.get("driver_version"),
        "compute_capabilities": [g.get("compute_capability") for g in v.get("gpus") or ()
                                 if g.get("compute_capability")],
        "toolkit": {k: toolkit.get(k) for k in keep} if toolkit else None, "toolkit_why_none": why_none,
        "cuda_link": {"path": cudatk.CUDA_LINK, "target": toolkit["root"] if toolkit else None,
                      "now": link.get("resolved"), "right": None if not toolkit or not link
                      else bool(link.get("exists")) and link.get("resolved") == toolkit["root"]},
    }


def count_gpus(evidence, v):
    """(count, source) of the GPUs this host has; (None, None) when nothing could count them.

    NVML counts when it works. When it fails (a driver/library mismatch, a lost GPU), its empty GPU
    list is no count: the /dev/nvidiaN nodes count, else the PCI bus outside a container (where it
    lists only this machine's GPUs); otherwise the count is unknown, never 0.
    """
    nvml = evidence.get("nvml")
    if nvml and nvml.get("ok") is not False:
        if nvml.get("gpu_count") is not None:
            return nvml["gpu_count"], "nvml"
        if evidence.get("gpus") is not None:
            return len(evidence["gpus"]), "gpus"
    elif nvml is None and evidence.get("gpus"):
        return len(evidence["gpus"]), "gpus"
    if v["gpu_nodes"]:
        return len(v["gpu_nodes"]), "device_nodes"
    pci = evidence.get("pci_gpus")
    if pci is not None and evidence.get("in_container") is False:
        return len(pci), "pci"
    return None, None


def gpu_expected(evidence, v):
    """True when the host should have usable GPUs (see ``gpu_expected`` in the module docstring)."""
    told = evidence.get("gpu_expected")
    if told is not None:
        return bool(told)
    expected = evidence.get("expected_gpu_count")
    if expected is not None:
        return expected > 0
    gathered = ("nvml", "device_nodes", "proc_modules", "proc_driver_version", "torch", "gpus")
    if all(evidence.get(k) is None for k in gathered):
        return None  # nothing was gathered: not known
    nvml = evidence.get("nvml") or {}
    signs = (
        (v.get("gpu_count") or 0) > 0,
        bool(v["gpu_nodes"]) or "/dev/nvidiactl" in (v["device_nodes"] or ()),
        "nvidia" in v["modules"] or v["driver_version"] is not None,
        nvml.get("ok") is False and nvml.get("error_code") not in NO_NVIDIA_STACK_CODES,
        (v.get("torch_label") or "").startswith("cu") or bool((v.get("torch") or {}).get("cuda")),
        bool(v["torch_text_codes"]),
    )
    return any(signs)


def _finding(rule, matched, v):
    severity = rule["severity_of"](matched) if rule["severity_of"] else rule["severity"]
    remedy_class = rule["remedy_class_of"](v) if rule["remedy_class_of"] else rule["remedy_class"]
    return {"code": rule["code"], "severity": severity, "remedy_class": remedy_class,
            "evidence": matched, "meaning": rule["meaning"], "remedy": rule["remedy"]}


def _unknowns(v, findings, blocking):
    out = []
    codes = {f["code"] for f in findings}
    for code, line in sorted(v["torch_text_codes"].items()):
        if code in TEXT_CODES_NEEDING_CONTEXT and not blocking:
            out.append({"what": "torch_error_" + code, "evidence": {"text": line}})
    torch = v.get("torch") or {}
    for key in ("import_error", "warning", "error"):
        text = torch.get(key)
        if text and not any(p.search(text) for _c, p, _s in TORCH_ERROR_PATTERNS):
            out.append({"what": "torch_" + key + "_unrecognised", "evidence": {"text": text[:2000]}})
    res = v.get("cuinit_result")
    cuinit = v.get("cuinit") or {}
    if res not in (None, 0) and not blocking:
        out.append({"what": "cuinit_failed", "evidence": {"result": res, "name": CU_RESULTS.get(res),
                                                          "libcuda_path": cuinit.get("libcuda_path")}})
    nvml = v.get("nvml") or {}
    if (nvml and nvml.get("ok") is False and not blocking and "driver_library_mismatch" not in codes
            and nvml.get("error_code") not in NO_NVIDIA_STACK_CODES):
        out.append({"what": "nvml_init_failed", "evidence": {"error_code": nvml.get("error_code"),
                                                             "error_text": nvml.get("error_text")}})
    model = (v.get("provider_claims") or {}).get("gpu_model")
    if model and not model_tokens(model):
        out.append({"what": "provider_claim_model_unparsed", "evidence": {"gpu_model": model}})
    if v["proc_driver_text"].strip() and v["driver"] is None:
        out.append({"what": "proc_driver_version_unparsed", "evidence": {"text": v["proc_driver_text"][:500]}})
    for x, n in sorted(v["xid_counts"].items()):
        sev = next((e.get("severity") for e in v["xid_events"] if e.get("xid") == x), None)
        if sev == "unknown":
            out.append({"what": "xid_unclassified", "evidence": {"xid": x, "count": n}})
    explained = any(u["what"].startswith(("torch_", "cuinit_", "nvml_")) for u in out)
    if (torch and torch.get("importable") and torch.get("is_available") is False and not blocking and not explained
            and v["gpu_expected"]):
        out.append({"what": "torch_cuda_unavailable_unexplained",
                    "evidence": {k: torch.get(k) for k in ("version", "cuda", "is_available", "device_count",
                                                           "warning")}})
    return out


def diagnose(evidence):
    """Findings for one host's evidence; see the module docstring for the shapes."""
    v = view(evidence)
    findings = []
    blocking = False
    for rule in RULES:
        matched = rule["match"](v)
        if matched:
            findings.append(_finding(rule, matched, v))
            blocking = blocking or rule["blocks_cuda"]
    unknown = _unknowns(v, findings, blocking)
    torch = v.get("torch") or {}
    if blocking:
        cuda_usable = False
    elif torch.get("importable") and torch.get("is_available") is not None:
        cuda_usable = bool(torch["is_available"])
    elif torch.get("importable") is False:
        cuda_usable = False
    elif v.get("cuinit_result") is not None:
        cuda_usable = v["cuinit_result"] == 0
    else:
        cuda_usable = None
    severities = {f["severity"] for f in findings}
    if v["gpu_expected"] is False and not findings and not unknown:
        status = "healthy"  # a CPU host: no GPU is expected, none is missing
    elif "critical" in severities or (cuda_usable is False and not unknown):
        status = "broken"
    elif unknown or cuda_usable is None:
        status = "unknown"
    elif "warning" in severities:
        status = "degraded"
    else:
        status = "healthy"
    return {"schema": SCHEMA, "status": status, "cuda_usable": cuda_usable, "gpu_expected": v["gpu_expected"],
            "findings": findings, "unknown": unknown, "decision": v["decision"]}
