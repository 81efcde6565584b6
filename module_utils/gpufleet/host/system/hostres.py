# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host's resources: CPUs and the cgroup's CPU quota, RAM, the memlock limit, /dev/shm and the disks.

Parsers of /proc/cpuinfo, /proc/meminfo, cgroup v2 cpu.max, /proc/mounts and /sys/block/<dev>/queue/rotational,
and of what statvfs and getrlimit return; the callers read the host (``hostenv.collect_host``, ``hostready``).
"""

import re

NETWORK_FS = frozenset(["nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "9p", "beegfs",
                        "gpfs", "wekafs", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.juicefs", "fuse.rclone",
                        "fuse.glusterfs", "fuse.mountpoint-s3", "fuse.blobfuse2"])


def parse_meminfo_mib(text):
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text or "", re.M)
    return int(m.group(1)) // 1024 if m else None


def parse_cpuinfo(text):
    model = None
    count = 0
    for line in (text or "").splitlines():
        key, _unused, value = line.partition(":")
        key = key.strip().lower()
        if key == "processor":
            count += 1
        elif key in ("model name", "cpu model", "hardware") and model is None:
            model = value.strip() or None
    return {"model": model, "count": count or None}


def parse_cpu_max(text):
    """cgroup v2 cpu.max ("200000 100000" or "max 100000") -> CPUs allowed, or None for no limit."""
    parts = (text or "").split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        return round(int(parts[0]) / float(int(parts[1])), 2)
    except (ValueError, ZeroDivisionError):
        return None


def memlock_kib(limits, infinity=-1):
    """getrlimit(RLIMIT_MEMLOCK) soft value -> KiB or "unlimited"."""
    if limits is None:
        return None
    soft = limits[0]
    if soft == infinity or soft < 0:
        return "unlimited"
    return int(soft) // 1024


def shm_mib(statvfs_result):
    if statvfs_result is None:
        return None
    try:
        return int(statvfs_result.f_frsize * statvfs_result.f_blocks) // (1024 * 1024)
    except (AttributeError, TypeError):
        return None


def _mount_unescape(text):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_mounts(text):
    """/proc/mounts text -> [{"device", "mountpoint", "fstype"}] in file order."""
    out = []
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 3:
            out.append({"device": _mount_unescape(parts[0]), "mountpoint": _mount_unescape(parts[1]),
                        "fstype": parts[2]})
    return out


def mount_of(path, mounts):
    """The mount that holds ``path``: the longest mount point that is a prefix (the last one wins)."""
    best = None
    for m in mounts:
        mp = m["mountpoint"].rstrip("/") or "/"
        inside = path == mp or path.startswith(mp + "/") or mp == "/"
        if inside and (best is None or len(mp) >= len(best["mountpoint"].rstrip("/") or "/")):
            best = m
    return best


def block_device(device):
    """"/dev/nvme0n1p2" -> "nvme0n1", "/dev/sda1" -> "sda", "/dev/vda" -> "vda"; None for non-/dev sources."""
    if not device or not device.startswith("/dev/"):
        return None
    name = device[5:]
    if name.startswith("mapper/") or "/" in name:
        return None
    m = re.match(r"^((?:nvme|mmcblk)\d+(?:n\d+)?)(?:p\d+)?$", name)
    if m:
        return m.group(1)
    m = re.match(r"^([a-z]+)\d*$", name)
    return m.group(1) if m else name


def disk_info(path, mounts, statvfs_result, rotational_text):
    """Free space and kind of the filesystem holding ``path``; ``local_ssd`` None when it cannot be told."""
    info = {"path": path, "mountpoint": None, "fstype": None, "device": None, "free_gib": None,
            "total_gib": None, "rotational": None, "network": None, "local_ssd": None, "reason": None}
    try:
        info["free_gib"] = round(statvfs_result.f_frsize * statvfs_result.f_bavail / 1073741824.0, 1)
        info["total_gib"] = round(statvfs_result.f_frsize * statvfs_result.f_blocks / 1073741824.0, 1)
    except (AttributeError, TypeError):
        pass
    m = mount_of(path, mounts) if mounts else None
    if m is None:
        info["reason"] = "mount table not readable"
        return info
    info.update(mountpoint=m["mountpoint"], fstype=m["fstype"], device=m["device"])
    fstype = m["fstype"]
    info["network"] = fstype in NETWORK_FS or fstype.startswith("nfs")
    rot = (rotational_text or "").strip()
    info["rotational"] = {"0": False, "1": True}.get(rot)
    if info["network"]:
        info["local_ssd"] = False
        info["reason"] = "network filesystem (%s)" % fstype
    elif fstype == "overlay":
        info["reason"] = "container overlay: the disk under it is not visible from inside"
    elif fstype in ("tmpfs", "ramfs"):
        info["reason"] = "%s: memory, not a disk" % fstype
    elif info["rotational"] is None:
        info["reason"] = "no /sys/block/<dev>/queue/rotational for %s" % m["device"]
    else:
        info["local_ssd"] = not info["rotational"]
        if info["rotational"]:
            info["reason"] = "kernel says rotational (virtual disks often do whatever the medium)"
    return info
