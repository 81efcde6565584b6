# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The checklist's host items: 5 Jupyter / SSH access, 6 image quality, 8 Python packages, 9 monitoring (split
out of audit.py; checklist.py assembles them). They read gpu_facts' readiness probes (listeners, sshd, disks,
venv, monitoring) and the host context.
"""

from ...host.system.hostctx import GPUFLEET_VENV
from .item import _CPU_HOST, _d, _item, _l, _unknown, _worst

# --- thresholds, each with where it comes from --------------------------------------------------
ROOT_FREE_MIN_GIB = 50     # room for one 70B checkpoint in 4 bits or a 13B one in 16 bits, plus caches
CPU_PER_GPU_MIN = 4        # data loading workers per GPU; fewer starves the GPU on image/text pipelines
TEXTFILE_MAX_AGE_S = 300   # the exporter rewrites the file every few seconds; five minutes is stale
WANTED_PACKAGES = ("torch", "transformers", "datasets", "accelerate", "tqdm")


# ----------------------------------------------------------------------------- items 5, 6, 8, 9
def access(readiness, findings):
    listeners = _d(readiness.get("listeners"))
    sockets = [s for s in _l(listeners.get("sockets")) if isinstance(s, dict)]
    sshd = _d(readiness.get("sshd"))
    config = _d(sshd.get("config"))
    parts = []
    ssh_ports = {int(p) for p in _l(config.get("port")) if str(p).isdigit()} or {22}
    ssh_socks = [s for s in sockets if s.get("process") == "sshd" or s.get("port") in ssh_ports]
    if ssh_socks:
        pw = config.get("passwordauthentication")
        parts.append("SSH on %s (%s)" % (",".join(sorted({str(s["port"]) for s in ssh_socks})),
                                         "password login %s" % pw if pw else "auth settings unknown"))
    elif listeners.get("readable"):
        parts.append("no SSH listener seen")
    jup = [s for s in sockets if s.get("jupyter")]
    for s in jup:
        parts.append("Jupyter public on %s:%s (%s)" % (s.get("address"), s.get("port"),
                                                       {"tls": "TLS", "plain": "plain HTTP, no TLS"}.get(
                                                           s.get("tls"), "TLS unknown")))
    if listeners.get("readable") and not jup:
        parts.append("no public Jupyter" + ("" if listeners.get("owners_readable") else
                                            " (socket owners not readable: not root?)"))
    if not listeners.get("readable") and not sshd:
        return _unknown("no listening-socket facts (readiness probes not run)")
    codes = {f["code"]: f for f in findings}
    if "jupyter_public_plain" in codes:
        status = "fail"
    elif "password_ssh" in codes:
        status = "warn"
    elif ssh_socks or jup:
        status = "ok"
    else:
        status = "unknown"
    return _item(status, "; ".join(parts), None if status != "unknown" else "no SSH or Jupyter listener identified")


def image(facts, readiness, count):
    host = _d(facts.get("host"))
    if not host:
        return _unknown("no host context in the facts")
    os_ = _d(host.get("os"))
    venv = _d(readiness.get("venv"))
    where = host.get("container_kind") if host.get("container") else (host.get("virtualization") or "bare metal")
    parts = ["%s" % (os_.get("pretty_name") or os_.get("id") or "OS unknown"),
             "kernel %s" % (host.get("kernel") or "?"),
             "Python %s (venv)" % venv["python"] if venv.get("python") else "gpufleet venv Python unknown",
             "%s %s" % ("container" if host.get("container") else "host", where or ""),
             "init %s" % (host.get("init_system") or "?")]
    statuses = []
    cpu = _d(host.get("cpu"))
    cores = cpu.get("quota") or cpu.get("count")
    if isinstance(cores, (int, float)) and count:
        per = cores / float(count)
        parts.append("%.1f CPU cores per GPU" % per)
        statuses.append("ok" if per >= CPU_PER_GPU_MIN else "warn")
    for disk in _l(readiness.get("disks")):
        free = disk.get("free_gib")
        text = "%s %s GiB free" % (disk.get("path"), "?" if free is None else free)
        kind = {True: "local SSD", False: "not local SSD"}.get(disk.get("local_ssd"))
        text += " (%s%s)" % (disk.get("fstype") or "?", ", " + kind if kind else "")
        parts.append(text)
        if disk.get("path") == "/" and isinstance(free, (int, float)):
            statuses.append("ok" if free >= ROOT_FREE_MIN_GIB else "warn")
        if disk.get("network") or disk.get("local_ssd") is False and disk.get("path") != "/":
            statuses.append("warn")
    if not readiness:
        parts.append("disk facts unknown (readiness probes not run)")
    return _item(_worst(statuses) if statuses else "ok", "; ".join(parts))


def packages(readiness):
    """The packages of the environment the facts listed: gpufleet's venv, or the renter's environment the torch
    role acted on (playbooks/facts.yml hands gpu_facts torch_target's venv or conda prefix), named when it is not
    gpufleet's."""
    venv = _d(readiness.get("venv"))
    if not venv:
        return _unknown("no venv facts (readiness probes not run)")
    renter = venv.get("path") not in (None, GPUFLEET_VENV)
    if not venv.get("exists"):
        if renter:
            return _item("warn", "environment %s absent (the torch target of the last run)" % venv.get("path"))
        return _item("warn", "gpufleet venv %s absent: install it with the torch role" % venv.get("path"))
    pkgs = _d(venv.get("packages"))
    have = ["%s %s" % (n, pkgs[n]) for n in WANTED_PACKAGES if n in pkgs]
    missing = [n for n in WANTED_PACKAGES if n not in pkgs]
    text = ", ".join(have) or "none of %s" % ", ".join(WANTED_PACKAGES)
    if renter:
        text = "in %s: %s" % (venv["path"], text)
    if missing:
        text += "; missing: %s (role torch: torch_extra_packages)" % ", ".join(missing)
    return _item("ok" if not missing else ("warn" if "torch" in pkgs else "fail"), text)


def monitoring(readiness, cpu_host=False):
    if cpu_host:
        return _CPU_HOST["monitoring"]
    mon = _d(readiness.get("monitoring"))
    if not mon:
        return _unknown("no monitoring facts (readiness probes not run)")
    age = mon.get("textfile_age_s")
    prog = mon.get("program")
    parts = []
    if age is None:
        # What was seen, not why: the role may have run and its exporter failed to write (permissions ...).
        path = mon.get("textfile") or "?"
        why = str(mon.get("reason") or "not found")
        if why.startswith(path):
            why = why[len(path):].strip() or "not found"
        parts.append("no exporter textfile at %s (%s); the gpu_monitoring role writes it" % (path, why))
        status = "fail"
    elif age <= TEXTFILE_MAX_AGE_S:
        parts.append("textfile fresh (%d s old)" % age)
        status = "ok"
    else:
        parts.append("textfile stale (%d s old)" % age)
        status = "warn"
    if prog:
        parts.append("gpufleet-gpu-exporter %s" % prog)
        if prog != "RUNNING":
            status = _worst([status, "warn"])
    else:
        parts.append("exporter program not seen in supervisord")
    return _item(status, "; ".join(parts))
