# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's matchers for the renter's checks, with their thresholds: another tenant on a GPU, lost GPUs,
a MIG slice or memory share, the cgroup CPU quota and pids.max, /dev/shm, the provider's claim, NVML's
recovery action. Each is a row's ``match`` in ``doctor_rules.RULES``. Nothing in this file reads the host.
"""

import re

from ..gpu import specs
from .texts import _text_hit

# Sources of the thresholds below: shared/reference/ecosystem.md "Rented-host checks" names the checks; the
# figures are ours unless a source is named.
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


def _vkey(text):
    return tuple(int(p) for p in re.findall(r"\d+", str(text or "")))


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
