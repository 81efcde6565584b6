# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's evidence from the host's own files: NVIDIA devices on the PCI bus, NVSwitch and the fabric
manager, the cgroup CPU quota and pids.max, GPU device nodes that do not open, container or not. Every
function reads through the doctor's ``Host`` (``doctor_probe.Host``, or a test's recorded one).
"""

import os
import re

from ..system import hostenv, hostres

NVSWITCH_DEV_GLOB = "/dev/nvidia-nvswitch*"
NVSWITCH_PROC_GLOB = "/proc/driver/nvidia-nvswitch/devices/*"
PCI_GLOB = "/sys/bus/pci/devices/*"
NVIDIA_PCI_VENDOR = "0x10de"
PCI_CLASS_BRIDGE_OTHER = "0x0680"  # NVSwitch shows as "Bridge: NVIDIA Corporation ..." (class 0680)
PCI_CLASS_DISPLAY = "0x03"  # VGA (0300) and 3D (0302) controllers: the GPUs
FM_UNITS = ("/lib/systemd/system/nvidia-fabricmanager.service", "/usr/lib/systemd/system/nvidia-fabricmanager.service",
            "/etc/systemd/system/nvidia-fabricmanager.service")
FM_BINARIES = ("/usr/bin/nv-fabricmanager", "/usr/sbin/nv-fabricmanager")
FM_PROCESS = "nv-fabricmanager"
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_SELF_CGROUP = "/proc/self/cgroup"


def nvidia_pci_devices(host):
    """{address: class} of the NVIDIA devices on the PCI bus (one walk of /sys/bus/pci), None if unreadable."""
    devices = host.glob(PCI_GLOB)
    if not devices:
        return None
    out = {}
    for dev in devices:
        if (host.read(dev + "/vendor") or "").strip().lower() == NVIDIA_PCI_VENDOR:
            out[os.path.basename(dev)] = (host.read(dev + "/class") or "").strip().lower()
    return out


def pci_gpus(pci):
    """PCI addresses of the display / 3D controllers (class 03xx) among ``nvidia_pci_devices``."""
    return None if pci is None else sorted(a for a, klass in pci.items() if klass.startswith(PCI_CLASS_DISPLAY))


def probe_nvswitch(host, pci=None):
    """True/False from NVSwitch device nodes, the nvswitch driver's proc entries or PCI bridges; None if unknown."""
    if host.glob(NVSWITCH_DEV_GLOB) or host.glob(NVSWITCH_PROC_GLOB):
        return True
    pci = nvidia_pci_devices(host) if pci is None else pci
    if pci is None:
        return None
    return any(klass.startswith(PCI_CLASS_BRIDGE_OTHER) for klass in pci.values())


def probe_fabric_manager(host, systemd):
    """running | stopped | failed | not_installed, or None when it cannot be told."""
    unit = any(host.exists(u) for u in FM_UNITS)
    binary = any(host.exists(b) for b in FM_BINARIES)
    if unit and systemd:
        res = host.run(["systemctl", "is-active", "nvidia-fabricmanager"])
        if res is not None:
            state = (res[1].decode() if isinstance(res[1], bytes) else res[1] or "").strip()
            return {"active": "running", "failed": "failed"}.get(state, "stopped")
    if not unit and not binary:
        return "not_installed"
    comms = host.proc_comms()
    if comms is None:
        return None
    return "running" if FM_PROCESS in comms or FM_PROCESS[:15] in comms else "stopped"


def _cgroup_v2_dirs(host):
    """The cgroup v2 folders of this process, leaf first, up to the root (limits of every ancestor apply)."""
    text = host.read(PROC_SELF_CGROUP) or ""
    path = next((line[3:].strip() for line in text.splitlines() if line.startswith("0::")), None)
    if path is None:
        return []
    parts = [p for p in path.split("/") if p and p != ".."]
    dirs = [CGROUP_ROOT + "/" + "/".join(parts[:i]) for i in range(len(parts), 0, -1)]
    return dirs + [CGROUP_ROOT]


def _int_or_none(text):
    text = (text or "").strip()
    return int(text) if re.match(r"^-?\d+$", text) else None


def cgroup_limits(host):
    """CPU quota (in CPUs) and pids.max that apply to this process, from cgroup v2 (every level up to the root,
    the tightest wins) or v1; with the CPUs the process sees. A missing file or "max" is no limit (None)."""
    out = {"version": None, "cpu_quota": None, "cpu_max": None, "pids_max": None, "pids_max_at": None,
           "cpu_max_at": None, "visible_cpus": host.visible_cpus()}
    dirs = _cgroup_v2_dirs(host)
    if dirs and host.exists(CGROUP_ROOT + "/cgroup.controllers"):
        out["version"] = 2
        for d in dirs:
            text = (host.read(d + "/cpu.max") or "").strip()
            quota = hostres.parse_cpu_max(text)
            if quota is not None and (out["cpu_quota"] is None or quota < out["cpu_quota"]):
                out.update(cpu_quota=quota, cpu_max=text, cpu_max_at=d + "/cpu.max")
            pids = _int_or_none(host.read(d + "/pids.max"))
            if pids is not None and (out["pids_max"] is None or pids < out["pids_max"]):
                out.update(pids_max=pids, pids_max_at=d + "/pids.max")
        return out
    quota = _int_or_none(host.read(CGROUP_ROOT + "/cpu/cpu.cfs_quota_us"))
    period = _int_or_none(host.read(CGROUP_ROOT + "/cpu/cpu.cfs_period_us"))
    pids = _int_or_none(host.read(CGROUP_ROOT + "/pids/pids.max"))
    if quota is not None or pids is not None:
        out["version"] = 1
    if quota is not None and quota > 0 and period:
        out.update(cpu_quota=round(quota / float(period), 2), cpu_max="%d %d" % (quota, period),
                   cpu_max_at=CGROUP_ROOT + "/cpu/cpu.cfs_quota_us")
    if pids is not None:
        out.update(pids_max=pids, pids_max_at=CGROUP_ROOT + "/pids/pids.max")
    return out


def device_open_errors(host, nodes):
    """{node: errno name} for the GPU nodes and /dev/nvidiactl that do not open; {} when all open."""
    want = [n for n in nodes or () if re.match(r"^/dev/nvidia(?:\d+|ctl)$", n)]
    errors = {}
    for node in want:
        err = host.open_error(node)
        if err:
            errors[node] = err
    return errors


def in_container(host):
    environ = host.read("/proc/1/environ")
    found, _kind = hostenv.detect_container(
        dockerenv=host.exists("/.dockerenv"), containerenv=host.exists("/run/.containerenv"),
        cgroup=host.read("/proc/1/cgroup"), environ=environ or None)
    return found
