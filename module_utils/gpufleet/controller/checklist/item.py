# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One checklist item's shape and the facts every item reads (split out of audit.py).

The item keys and labels (``ITEMS``), statuses and their order, ``_item``/``_unknown``/``_worst``, the host's intent
(``expected_gpu_count``, ``is_cpu_host``), the doctor's torch evidence and the answers shared by hosts that lack it.
Plain Python >= 3.8, stdlib only.
"""

import math

from .. import values as _values

ITEMS = (
    ("torch_cuda", "torch / CUDA match"),
    ("cudnn", "cuDNN"),
    ("capacity", "GPU memory vs model sizes"),
    ("features", "compute capability features"),
    ("access", "Jupyter / SSH access"),
    ("image", "image quality"),
    ("multi_gpu", "NCCL / multi-GPU readiness"),
    ("packages", "Python packages"),
    ("monitoring", "monitoring"),
    ("security", "security audit"),
    ("torch_advisories", "torch security advisories"),
    ("driver_security", "driver security"),
)
# Items a host has only where its evidence holds them: the storage and network item (storage.py) where the pre-check
# measured disk and network (issue 51). The report shows such an item's column where some host of the fleet has it,
# so a fleet without that evidence is reported as before.
OPTIONAL_ITEMS = (
    ("box", "storage and network"),
)
STATUSES = ("ok", "warn", "fail", "unknown")
_WORST = {"ok": 0, "unknown": 1, "warn": 2, "fail": 3}


# ----------------------------------------------------------------------------- small helpers
_d = _values.as_dict
_l = _values.as_list


def expected_gpu_count(result):
    """The GPU count the host was rented with (the result's ``expected_gpu_count``, from the inventory's
    gpufleet_expected_gpu_count): a number, also from numeric text; None when unset or unreadable."""
    value = _d(result).get("expected_gpu_count")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return value


def is_cpu_host(result):
    """True for a CPU host by intent: expected_gpu_count is 0."""
    return expected_gpu_count(result) == 0


def in_container(result):
    """True/False when the GPU facts' host context (else the doctor's evidence) says whether the host is a container;
    None when neither says. The one reading of it: the judgement (door.judge_host: who resets a GPU) and the checklist
    (driver_security: whose driver it is) both ask here."""
    result = _d(result)
    ctx = _d(_d(result.get("gpu")).get("host"))
    if isinstance(ctx.get("container"), bool):
        return ctx["container"]
    found = _d(_d(result.get("doctor")).get("evidence")).get("in_container")
    return found if isinstance(found, bool) else None


def _worst(statuses):
    statuses = list(statuses)
    return max(statuses, key=lambda s: _WORST[s]) if statuses else "unknown"


def _item(status, summary, reason=None, **extra):
    out = {"status": status, "summary": summary, "reason": reason}
    out.update(extra)
    return out


def _unknown(reason):
    return _item("unknown", reason, reason)


# Answers shared by every host that lacks the same fact (read only: the report never changes them).
_NO_DOCTOR = _unknown("no doctor evidence about torch (run the doctor)")


def _doctor_torch(doctor):
    doctor = _d(doctor)
    torch = _d(doctor.get("evidence")).get("torch")
    if torch is None:
        torch = doctor.get("torch")
    return torch if isinstance(torch, dict) else None


def _no_torch(doctor):
    """The answer where there is no torch evidence: the doctor's own word when it ran and found none."""
    skipped = _d(_d(doctor).get("evidence")).get("torch_skipped")
    if isinstance(skipped, str) and skipped:
        return _unknown("no torch to check: %s" % skipped)
    return _NO_DOCTOR


_CPU_HOST = {  # the items that only GPUs need, on a CPU host by intent (read only)
    "cudnn": _item("ok", "not needed on a CPU host (cuDNN is a GPU library)"),
    "capacity": _item("ok", "CPU host: no GPU memory; models run in host memory"),
    "features": _item("ok", "CPU host: no GPU compute capability to check"),
    "monitoring": _item("ok", "CPU host: no GPU exporter needed"),
}
