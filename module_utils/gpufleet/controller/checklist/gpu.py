# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The checklist's GPU items: 1 torch / CUDA match, 2 cuDNN, 3 GPU memory vs model sizes, 4 compute
capability features, 7 NCCL / multi-GPU readiness (split out of audit.py; checklist.py assembles them).

Each reads the doctor's torch evidence and the GPU facts; on a CPU host by intent the GPU-only items say "not needed".
"""

import re

from ...host.doctor.match_renter import SHM_MIN_MIB
from . import capacity, features
from .item import _CPU_HOST, _NO_DOCTOR, _item, _l, _unknown, _worst

# SHM_MIN_MIB, the /dev/shm floor, comes from doctor_match_renter: the doctor checks the same floor on the host.
MEMLOCK_SOURCE = "NVIDIA NGC PyTorch container docs: docker run --shm-size=1g --ulimit memlock=-1"


def _cuda_tuple(text):
    m = re.match(r"^(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def cudnn_text(value):
    """torch.backends.cudnn.version(): 90100 -> "9.1.0", 8902 -> "8.9.2"."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return None
    if value >= 10000:
        return "%d.%d.%d" % (value // 10000, value // 100 % 100, value % 100)
    return "%d.%d.%d" % (value // 1000, value // 100 % 10, value % 100)


# ----------------------------------------------------------------------------- items 1, 2, 7 (doctor)
def torch_cuda(torch, facts, cpu_host=False):
    if torch is None:
        return _NO_DOCTOR
    if not torch.get("importable"):
        return _item("fail", "torch not importable: %s" % (torch.get("import_error") or torch.get("error") or "?"))
    version = torch.get("version") or "?"
    if cpu_host and not torch.get("cuda"):
        return _item("ok", "torch %s is a CPU build, as intended for a CPU host" % version)
    if cpu_host:
        return _item("warn", "torch %s is a CUDA build (CUDA %s) on a CPU host: it runs on the CPU and carries "
                             "unused CUDA libraries (role torch: torch_cuda_variant: cpu)" % (version, torch["cuda"]))
    if not torch.get("cuda"):
        return _item("fail", "torch %s is a CPU build (torch.version.cuda is None)" % version)
    driver_cuda = facts.get("cuda_driver_version")
    text = "torch %s (CUDA %s), driver %s supports CUDA %s" % (
        version, torch["cuda"], facts.get("driver_version") or "?", driver_cuda or "?")
    if torch.get("is_available") is False:
        return _item("fail", text + "; torch.cuda.is_available() is False: %s" % (
            torch.get("error") or torch.get("warning") or "see the doctor's findings"))
    built, drv = _cuda_tuple(torch["cuda"]), _cuda_tuple(driver_cuda)
    if built and drv and built[0] > drv[0]:
        return _item("fail", text + "; the driver is a major CUDA version behind the build")
    count = torch.get("device_count")
    gpus = facts.get("gpu_count")
    if isinstance(count, int) and isinstance(gpus, int) and count < gpus:
        return _item("warn", text + "; torch sees %d of %d GPUs (CUDA_VISIBLE_DEVICES?)" % (count, gpus))
    if built and drv and built > drv:
        return _item("warn", text + "; runs only through CUDA minor version compatibility (PTX JIT may fail)")
    if torch.get("is_available") is None:
        return _item("unknown", text + "; is_available not reported", "torch.cuda.is_available() not reported")
    return _item("ok", text + "; %s GPU(s) usable" % (count if count is not None else "?"))


def cudnn(torch, cpu_host=False):
    if cpu_host:
        return _CPU_HOST["cudnn"]
    if torch is None:
        return _NO_DOCTOR
    if not torch.get("importable") or not torch.get("cuda"):
        return _item("fail", "no CUDA torch, so no cuDNN through torch")
    if "cudnn_version" not in torch:
        return _unknown("the doctor did not report torch.backends.cudnn.version()")
    text = cudnn_text(torch.get("cudnn_version"))
    if text is None:
        return _item("fail", "torch.backends.cudnn.version() is None: cuDNN not loadable by torch")
    if torch.get("is_available") is False:
        return _item("warn", "cuDNN %s ships with torch, but CUDA is not usable" % text)
    return _item("ok", "cuDNN %s loadable by torch" % text)


def multi_gpu(torch, facts, host, count, link=None, cpu_host=False):
    if cpu_host and not count:
        shm = host.get("shm_size_mib")
        return _item("ok", "CPU host: NCCL and multi-GPU not needed" + (
            "; /dev/shm %d MiB" % shm if isinstance(shm, int) else ""))  # noqa: S108 - report text
    parts, statuses = [], []
    shm = host.get("shm_size_mib")
    if isinstance(shm, int):
        ok = shm >= SHM_MIN_MIB
        parts.append("/dev/shm %d MiB%s" % (  # noqa: S108 - report text, no file is made
            shm, "" if ok else " (< %d MiB: NCCL and DataLoader fail)" % SHM_MIN_MIB))
        statuses.append("ok" if ok else ("fail" if count > 1 else "warn"))
    else:
        parts.append("/dev/shm size unknown")  # noqa: S108 - report text
        statuses.append("unknown")
    mem = host.get("memlock_limit_kib")
    if mem == "unlimited" or isinstance(mem, int) and mem < 0:
        parts.append("memlock unlimited")
        statuses.append("ok")
    elif isinstance(mem, int):
        parts.append("memlock %d KiB (NCCL/RDMA want unlimited)" % mem)
        statuses.append("warn")
    else:
        parts.append("memlock unknown")
        statuses.append("unknown")
    if torch is None:
        parts.append("NCCL/torchrun unknown (no doctor evidence)")
        statuses.append("unknown")
    else:
        nccl = torch.get("nccl_version")
        parts.append("NCCL %s" % nccl if nccl else "no NCCL in torch")
        parts.append("torchrun %s" % ("present" if torch.get("torchrun") else "missing"))
        statuses.append("ok" if nccl and torch.get("torchrun") else ("fail" if count > 1 else "warn"))
    if count > 1:
        link = link or capacity.interconnect_of(facts.get("gpus"))
        parts.append({"nvlink": "NVLink between all GPUs", "pcie": "PCIe only between GPUs (no NVLink)",
                      "unknown": "NVLink unknown"}.get(link, link))
        statuses.append({"nvlink": "ok", "pcie": "warn"}.get(link, "unknown"))
    else:
        parts.append("%d GPU" % count)
    status = _worst(statuses)
    if count <= 1 and status == "fail":
        status = "warn"
    return _item(status, "; ".join(parts), None if status != "unknown" else "some multi-GPU facts missing")


# ----------------------------------------------------------------------------- items 3 and 4
_CAPACITY_CACHE = {}


def capacity_item(facts, link=None):
    """(item, advice): advice is shared between hosts with the same GPUs (read only)."""
    gpus = [g for g in _l(facts.get("gpus")) if isinstance(g, dict)]
    mems = tuple(g.get("memory_total_mib") for g in gpus)
    key = (mems if len(set(mems)) > 1 else (mems[:1], len(mems)), link or capacity.interconnect_of(gpus))
    hit = _CAPACITY_CACHE.get(key)
    if hit is not None:
        return hit
    advice = capacity.for_host(gpus)
    if advice.get("status") != "ok":
        hit = (_unknown(advice["reason"]), None)
    else:
        hit = (_item("ok", capacity.summary_text(advice), largest={
            w["key"]: [w["max_b_one_gpu"], w["max_b_all_gpus"]] for w in advice["workloads"]}), advice)
    if len(_CAPACITY_CACHE) < 10000:
        _CAPACITY_CACHE[key] = hit
    return hit


def features_item(facts):
    texts = {}
    statuses = []
    seen = {}
    for g in _l(facts.get("gpus")):
        if not isinstance(g, dict):
            continue
        key = (g.get("name"), g.get("compute_capability"))
        try:
            if key in seen:
                statuses.append(seen[key])
                continue
        except TypeError:  # unhashable odd input
            key = repr(key)
        m = features.for_cc(g.get("compute_capability"))
        name = "%s (CC %s)" % (g.get("name") or "GPU", g.get("compute_capability") or "?")
        if name not in texts:
            texts[name] = features.cell(g.get("compute_capability"))
        if m.get("status") != "ok":
            statuses.append("unknown")
        elif m["pinned_wheel"]["kernels"] is False:
            statuses.append("warn")
        else:
            statuses.append("ok")
        seen[key] = statuses[-1]
    if not statuses:
        return _unknown("no GPU listed in the facts")
    status = _worst(statuses)
    return _item(status, "; ".join("%s: %s" % kv for kv in texts.items()),
                 "compute capability not reported" if status == "unknown" else None)
