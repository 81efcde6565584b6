# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The renter's checklist: eleven answers per host, the security audit (item 10) and torch's advisories (item 11).

``checklist(result)`` reads one per-host result of the report (``gpu`` = gpu_facts with
``readiness``, ``doctor`` = the doctor's result with its evidence, ``check`` = the pre-check's) and
answers the questions renters ask before they pay (docs/checklist.md). Each item is ``{"status": ok|warn|fail|unknown,
"summary": text, "reason": text|None}``; "unknown" always says which fact was missing. Nothing
is guessed: a value the host did not report is never read as good or bad. A CPU host by intent
(``expected_gpu_count`` 0 in the result, inventory ``gpufleet_expected_gpu_count: 0``) is judged as
one: a CPU torch build is right there, and what only GPUs need (cuDNN, NCCL, a GPU exporter) is
"ok" with a summary that says it is not needed.

Items 1-4 and 7 are in checklist_gpu.py, 5, 6, 8 and 9 in checklist_host.py, the security audit (10) and torch's
advisories (11) in audit.py, the item shape in checkitem.py; here: ``checklist`` and the doctor's renter's-check
findings folded into the items they answer. Plain Python >= 3.8, stdlib only.
"""

from . import capacity
from .audit import security, security_item, torch_advisories_item
from .driver_security import driver_security_item
from .gpu import capacity_item, cudnn, features_item, multi_gpu, torch_cuda
from .host import access, image, monitoring, packages
from .item import _CPU_HOST, _WORST, ITEMS, _d, _doctor_torch, _l, _no_torch, _unknown, _worst, is_cpu_host
from .storage import KEY as _BOX_KEY
from .storage import box_item

# Answers shared by every host that lacks the same fact (read only: the report never changes them).
_NO_READINESS = {
    "access": _unknown("readiness probes not run (gpu_facts readiness: false or an older gpufleet)"),
    "packages": _unknown("no venv facts (readiness probes not run)"),
    "monitoring": _unknown("no monitoring facts (readiness probes not run)"),
    "security": _unknown("readiness probes not run"),
}


# ----------------------------------------------------------------------------- doctor findings in the checklist
# The renter's-check findings of the doctor (doctor_rules.RULES) that answer a checklist question, by item. A finding
# turns its item to fail (critical) or warn (warning) and adds its message; the host's verdict comes from the same
# findings through the report's action. Other doctor findings (a broken CUDA stack, Xid, ECC) are the host's status.
DOCTOR_ITEMS = {
    "container_lost_gpus": "torch_cuda",
    "gpu_recovery_action": "torch_cuda",
    "gpu_used_by_another_tenant": "capacity",
    "gpu_partitioned": "capacity",
    "provider_claim_mismatch": "capacity",
    "cpu_quota_below_visible_cpus": "image",
    "pids_max_low": "image",
    "shm_too_small": "multi_gpu",
}
_DOCTOR_STATUS = {"critical": "fail", "error": "fail", "warning": "warn"}
_REMEDY_WORDS = {"fixable": "fix here", "restart_container": "restart the container", "reboot": "reboot",
                 "provider": "return to provider"}


def _gpus_text(ev, what):
    return ", ".join("GPU %s %s" % (g.get("gpu"), what(g)) for g in _l(ev.get("gpus")) if isinstance(g, dict))


def _share(g):
    if g.get("kind") == "mig":
        return "is a MIG slice"
    frac = g.get("fraction")
    return "has %s of its memory" % ("%d %%" % round(frac * 100) if isinstance(frac, (int, float)) else "a part")


def _claim(m):
    found = ", ".join(map(str, _l(m.get("found")))) or m.get("found")
    return "%s listed %s, found %s" % (m.get("what"), m.get("claimed"), found)


def _claims(ev):
    return ", ".join(_claim(m) for m in _l(ev.get("mismatches")) if isinstance(m, dict))


# One short line of evidence per code (the doctor's evidence; the finding's meaning and remedy are in its table).
_DOCTOR_TEXT = {
    "container_lost_gpus": lambda ev: "the container lost its GPUs (%s)" % (
        ev.get("nvml_error") or ", ".join("%s %s" % kv for kv in sorted(_d(ev.get("open_denied")).items()))),
    "gpu_recovery_action": lambda ev: "NVML recovery action: " + _gpus_text(
        ev, lambda g: "%s (%s)" % (g.get("name"), g.get("renter_action"))),
    "gpu_used_by_another_tenant": lambda ev: "another tenant: " + _gpus_text(ev, lambda g: g.get("why") or "in use"),
    "gpu_partitioned": lambda ev: "not a whole GPU: " + _gpus_text(ev, _share),
    "provider_claim_mismatch": lambda ev: "%s listing: %s" % (ev.get("provider") or "provider", _claims(ev)),
    "cpu_quota_below_visible_cpus": lambda ev: "CPU quota %s of %s visible CPUs; set OMP_NUM_THREADS=%s" % (
        ev.get("cpu_quota"), ev.get("visible_cpus"), ev.get("suggested_threads")),
    "pids_max_low": lambda ev: "pids.max %s (< %s)" % (ev.get("pids_max"), ev.get("threshold")),
    "shm_too_small": lambda ev: "/dev/shm %s MiB (< %s MiB)" % (ev.get("shm_size_mib"), ev.get("minimum_mib")),  # noqa: S108
}


def _doctor_text(f):
    try:
        return _DOCTOR_TEXT[f["code"]](_d(f.get("evidence")))
    except (TypeError, ValueError, AttributeError):  # odd evidence: the finding's own words
        return f.get("message") or f.get("meaning") or "no evidence"


def _doctor_findings(doctor):
    return [f for f in _l(_d(doctor).get("findings")) if isinstance(f, dict) and f.get("code") in DOCTOR_ITEMS]


def _fold_doctor(out, doctor):
    """Raise each item a renter's-check finding answers; the finding's text and remedy join its summary."""
    for f in _doctor_findings(doctor):
        key = DOCTOR_ITEMS[f["code"]]
        status = _DOCTOR_STATUS.get(f.get("severity"))
        item = out.get(key)
        if status is None or not isinstance(item, dict):
            continue
        text = "doctor %s: %s (%s)" % (f["code"], _doctor_text(f),
                                       _REMEDY_WORDS.get(f.get("remedy_class"), f.get("remedy_class") or "?"))
        said = "/dev/shm" in (item.get("summary") or "")  # noqa: S108 - report text
        if f["code"] == "shm_too_small" and said and _WORST.get(item.get("status"), 1) >= _WORST[status]:
            text = None  # the item already says it from the same fact (SHM_MIN_MIB)
        merged = dict(item)  # items may be shared read-only answers: never change one in place
        merged["status"] = _worst([item.get("status") if item.get("status") in _WORST else "unknown", status])
        if merged["status"] != "unknown":
            merged["reason"] = None
        merged["summary"] = "; ".join(x for x in (item.get("summary"), text) if x)
        merged["doctor_codes"] = list(item.get("doctor_codes", ())) + [f["code"]]
        out[key] = merged
    return out


# ----------------------------------------------------------------------------- the checklist
def checklist(result):
    """The eleven items for one per-host result (see the module docstring). Never raises on odd data."""
    cpu_host = is_cpu_host(result)
    facts = _d(result.get("gpu"))
    readiness = _d(facts.get("readiness"))
    torch = _doctor_torch(result.get("doctor"))
    host = _d(facts.get("host"))
    gpus = [g for g in _l(facts.get("gpus")) if isinstance(g, dict)]
    count = len(gpus) or (facts.get("gpu_count") if isinstance(facts.get("gpu_count"), int) else 0)
    if not facts:
        reason = "no GPU facts in the result"
        out = {key: _unknown(reason) for key, _unused in ITEMS}
        if torch is not None:
            out["torch_cuda"] = torch_cuda(torch, facts, cpu_host)
            out["cudnn"] = cudnn(torch, cpu_host)
        out["torch_advisories"] = torch_advisories_item(result)
        out["driver_security"] = driver_security_item(result)
        return _with_box(_fold_doctor(out, result.get("doctor")), result)
    link = capacity.interconnect_of(gpus)
    no_gpu = cpu_host and not gpus  # a CPU host by intent that shows none: GPU questions do not apply
    out = {
        "torch_cuda": torch_cuda(torch, facts, cpu_host),
        "cudnn": cudnn(torch, cpu_host),
        "capacity": _CPU_HOST["capacity"] if no_gpu else capacity_item(facts, link)[0],
        "features": _CPU_HOST["features"] if no_gpu else features_item(facts),
        "access": None,
        "image": image(facts, readiness, count),
        "multi_gpu": multi_gpu(torch, facts, host, count, link, cpu_host),
    }
    if readiness:
        audit = security(readiness, host.get("container"), host.get("os"))
        out.update(access=access(readiness, audit["findings"]), packages=packages(readiness),
                   monitoring=monitoring(readiness, cpu_host), security=security_item(audit))
    else:
        out.update(_NO_READINESS)
        if cpu_host:
            out["monitoring"] = _CPU_HOST["monitoring"]
    if torch is None:
        out["torch_cuda"] = _no_torch(result.get("doctor"))
        if not cpu_host:
            out["cudnn"] = out["torch_cuda"]
    out["torch_advisories"] = torch_advisories_item(result)  # after security, in ITEMS' order
    out["driver_security"] = driver_security_item(result)  # the driver against NVIDIA's bulletins (driver_security.py)
    return _with_box(_fold_doctor(out, result.get("doctor")), result)


def _with_box(out, result):
    """The storage and network item (storage.py, item.OPTIONAL_ITEMS) where the pre-check measured them; a host
    without that evidence has no such item."""
    item = box_item(result)
    if item is not None:
        out[_BOX_KEY] = item
    return out
