# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What kind of host this is: container or VM, init system, OS release and kernel (with its resources).

``collect_host`` reads /.dockerenv, /proc/1/{cgroup,environ,comm}, systemd-detect-virt, the DMI ids,
/etc/os-release, /proc/cpuinfo, /proc/meminfo, cgroup v2 limits, /dev/shm and RLIMIT_MEMLOCK through
injected readers, so it is testable with recorded data.
"""

import re

from .hostctx import read_text, safe_call
from .hostres import memlock_kib, parse_cpu_max, parse_cpuinfo, parse_meminfo_mib, shm_mib


def parse_os_release(text):
    out = {"id": None, "version_id": None, "pretty_name": None}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key = key.strip().lower()
        value = value.strip().strip('"').strip("'")
        if key in out:
            out[key] = value
    return out


def detect_container(dockerenv=False, containerenv=False, cgroup=None, environ=None, detect_virt_container=None):
    """(container: bool, kind: str|None) from the usual signs, strongest first."""
    dv = (detect_virt_container or "").strip()
    if dv and dv != "none":
        return True, dv
    if dockerenv:
        return True, "docker"
    if containerenv:
        return True, "podman"
    env = environ or b""
    if isinstance(env, str):
        env = env.encode("utf-8", "replace")
    for item in env.split(b"\0"):
        if item.startswith(b"container="):
            return True, item.split(b"=", 1)[1].decode("utf-8", "replace") or "container"
    cg = cgroup or ""
    for marker, kind in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"),
                         ("containerd", "containerd"), ("/lxc/", "lxc"), ("lxc.payload", "lxc")):
        if marker in cg:
            return True, kind
    return False, None


_DMI_VIRT = (
    ("kvm", "kvm"), ("qemu", "qemu"), ("vmware", "vmware"), ("virtualbox", "oracle"), ("xen", "xen"),
    ("google compute engine", "google"), ("amazon ec2", "amazon"), ("microsoft corporation", "microsoft"),
    ("openstack", "kvm"),
)


def detect_virtualization(detect_virt=None, dmi_product=None, dmi_vendor=None, cpuinfo=None):
    dv = (detect_virt or "").strip()
    if dv:
        return None if dv == "none" else dv
    hint = ("%s %s" % (dmi_product or "", dmi_vendor or "")).lower()
    for marker, name in _DMI_VIRT:
        if marker in hint:
            return name
    if cpuinfo and re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M):
        return "unknown-hypervisor"
    return None


def detect_init(run_systemd_system=False, pid1_comm=None):
    comm = (pid1_comm or "").strip() or None
    if run_systemd_system:
        return "systemd", comm
    if comm == "systemd":
        return "systemd", comm
    return "none", comm


# systemd-detect-virt --container, then --vm: collect_host runs both.
HOST_COMMANDS = (("systemd-detect-virt", "--container"), ("systemd-detect-virt", "--vm"))


def collect_host(read_file, exists, run=None, statvfs=None, getrlimit=None, rlim_infinity=-1, uname_release=None):
    """Host context from injected readers.

    read_file(path) -> str|bytes|None, exists(path) -> bool, run(argv) -> (rc, out, err) or None,
    statvfs(path) -> os.statvfs_result or None, getrlimit() -> (soft, hard) of RLIMIT_MEMLOCK.
    """
    def rf(path):
        return read_text(read_file, path)

    def cmd(argv):
        if run is None:
            return None
        try:
            rc, out, _unused = run(argv)
        except Exception:
            return None
        if isinstance(out, bytes):
            out = out.decode("utf-8", "replace")
        # systemd-detect-virt exits 1 and prints "none" when there is nothing
        if rc not in (0, 1):
            return None
        return (out or "").strip() or None

    virt_c = cmd(list(HOST_COMMANDS[0]))
    virt_v = cmd(list(HOST_COMMANDS[1]))
    container, kind = detect_container(
        dockerenv=exists("/.dockerenv"), containerenv=exists("/run/.containerenv"),
        cgroup=rf("/proc/1/cgroup"), environ=safe_call(read_file, "/proc/1/environ"), detect_virt_container=virt_c)
    cpuinfo = rf("/proc/cpuinfo")
    init, comm = detect_init(exists("/run/systemd/system"), rf("/proc/1/comm"))
    cpu = parse_cpuinfo(cpuinfo)
    cpu["quota"] = parse_cpu_max(rf("/sys/fs/cgroup/cpu.max"))
    mem_limit = (rf("/sys/fs/cgroup/memory.max") or "").strip()
    try:
        shm = shm_mib(statvfs("/dev/shm")) if statvfs else None  # noqa: S108 - size of /dev/shm, no file made
    except Exception:
        shm = None
    try:
        limits = getrlimit() if getrlimit else None
    except Exception:
        limits = None
    kernel = uname_release or (rf("/proc/sys/kernel/osrelease") or "").strip() or None
    return {
        "container": container,
        "container_kind": kind,
        "virtualization": detect_virtualization(virt_v, rf("/sys/class/dmi/id/product_name"),
                                                rf("/sys/class/dmi/id/sys_vendor"), cpuinfo),
        "init_system": init,
        "pid1_comm": comm,
        "os": parse_os_release(rf("/etc/os-release")),
        "kernel": kernel,
        "cpu": cpu,
        "memory_total_mib": parse_meminfo_mib(rf("/proc/meminfo")),
        "memory_limit_mib": int(mem_limit) // (1024 * 1024) if mem_limit.isdigit() else None,
        "shm_size_mib": shm,
        "memlock_limit_kib": memlock_kib(limits, rlim_infinity),
    }
