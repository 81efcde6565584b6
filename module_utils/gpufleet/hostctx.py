"""Host context (container or VM, init system, OS, CPU, RAM, /dev/shm, memlock) and Xid events.

Everything works on plain inputs: file contents, command outputs and results of system calls
are passed in (``collect_host`` takes the reader callables), so it is testable with recorded
data. Reading the kernel log is the module's job; ``parse_kernel_log`` turns its text into
events.
"""

import re

# ----------------------------------------------------------------------------- Xid classes
# severity: "critical" = hardware / driver state that needs a reset, a reboot or the provider
# (health: failed); "warning" = degraded or pending repair (health: degraded); "app" = usually
# the application's own fault (informational). Unknown codes get "unknown".
_XID_DOC = "NVIDIA Xid Errors catalog (docs.nvidia.com/deploy/xid-errors/)"
_DESIGN = "shared/DESIGN.md 'The doctor' (needs the provider / a reboot)"
XID_CLASSES = {
    13: {"severity": "app", "name": "Graphics engine exception",
         "source": _XID_DOC + "; usually an application error (out-of-range address)"},
    31: {"severity": "app", "name": "GPU memory page fault (MMU error)",
         "source": _XID_DOC + "; usually an application illegal address"},
    43: {"severity": "app", "name": "GPU stopped processing (channel reset)",
         "source": _XID_DOC + "; user application fault"},
    45: {"severity": "app", "name": "Preemptive cleanup due to previous errors",
         "source": _XID_DOC + "; follows another Xid or a killed process"},
    48: {"severity": "critical", "name": "Double-bit ECC error (DBE)", "source": _XID_DOC + "; " + _DESIGN},
    61: {"severity": "critical", "name": "Internal micro-controller breakpoint/warning", "source": _XID_DOC},
    62: {"severity": "critical", "name": "Internal micro-controller halt", "source": _XID_DOC},
    63: {"severity": "warning", "name": "ECC page retirement / row remapping recorded (reset to activate)",
         "source": _XID_DOC + "; " + _DESIGN},
    64: {"severity": "critical", "name": "ECC page retirement / row remapping failure",
         "source": _XID_DOC + "; " + _DESIGN},
    74: {"severity": "critical", "name": "NVLink error", "source": _XID_DOC},
    79: {"severity": "critical", "name": "GPU has fallen off the bus", "source": _XID_DOC + "; " + _DESIGN},
    92: {"severity": "warning", "name": "High single-bit ECC error rate", "source": _XID_DOC},
    94: {"severity": "warning", "name": "Contained ECC error (affected application killed)",
         "source": _XID_DOC + "; " + _DESIGN},
    95: {"severity": "critical", "name": "Uncontained ECC error", "source": _XID_DOC + "; " + _DESIGN},
    119: {"severity": "critical", "name": "GSP RPC timeout", "source": _XID_DOC},
    120: {"severity": "critical", "name": "GSP error", "source": _XID_DOC},
    154: {"severity": "critical", "name": "GPU recovery action changed (reset or reboot required)",
          "source": _XID_DOC},
}

MAX_EVENTS = 100

_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?)\):"
                     r"\s*(\d+),\s*(.*)$")
_PID_RE = re.compile(r"^pid=(?:'([^']*)'|([^,\s]*)),\s*(?:name=([^,]*),\s*)?(.*)$")
_FALLEN_RE = re.compile(r"NVRM: GPU at (?:PCI:)?([0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?)"
                        r"(?::[^:]*)?:? has fallen off the bus")
# Other NVRM lines worth reporting (the doctor reads them; the health summary does not).
NVRM_PATTERNS = (
    ("api_mismatch", re.compile(r"NVRM: API mismatch")),
    ("rm_init_adapter_failed", re.compile(r"RmInitAdapter failed|rm_init_adapter failed")),
    ("no_adapter_probed", re.compile(r"No NVIDIA (?:graphics adapter|GPU) probed|probe routine was not called")),
    ("gsp_firmware_missing", re.compile(r"(?:GSP|gsp).*firmware.*(?:fail|missing|not found)|"
                                        r"failed to load.*gsp", re.I)),
    ("gsp_rpc_rate_limited", re.compile(r"Rate limiting GSP RPC error prints")),
)


def xid_class(code):
    entry = XID_CLASSES.get(code)
    if entry:
        return dict(entry)
    return {"severity": "unknown", "name": "Xid %s (not in gpufleet's table)" % code, "source": None}


def normalize_pci(pci):
    """"00000000:19:00.0" / "0000:19:00" / "PCI:0000:19:00" -> "0000:19:00" (domain:bus:device)."""
    if not pci:
        return None
    pci = str(pci).strip().lower()
    if pci.startswith("pci:"):
        pci = pci[4:]
    pci = pci.split(".")[0]
    parts = pci.split(":")
    if len(parts) == 3:
        domain, bus, dev = parts
        return "%04x:%s:%s" % (int(domain, 16) & 0xFFFF, bus.zfill(2), dev.zfill(2))
    if len(parts) == 2:
        return "0000:%s:%s" % (parts[0].zfill(2), parts[1].zfill(2))
    return pci


def _split_lines(text):
    # syslog escapes embedded newlines as "#012" (rsyslog) or "\012"
    for line in text.splitlines():
        if "#012" in line or "\\012" in line:
            yield from re.split(r"#012|\\012", line)
        else:
            yield line


def parse_kernel_log(text, source=None):
    """Xid events and notable NVRM messages from dmesg / journalctl / syslog text."""
    result = {"readable": True, "source": source, "reason": None, "events": [], "counts": {},
              "counts_by_pci": {}, "total": 0, "truncated": False, "nvrm_messages": []}
    if text is None:
        result.update(readable=False, reason="no kernel log text")
        return result
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    events = []
    nvrm = {}
    for line in _split_lines(text):
        if "NVRM" not in line:
            continue
        m = _XID_RE.search(line)
        if m:
            events.append(_event(int(m.group(2)), m.group(1), m.group(3), line))
            continue
        m = _FALLEN_RE.search(line)
        if m:
            ev = _event(79, m.group(1), "GPU has fallen off the bus (NVRM message without Xid number)", line)
            ev["derived"] = True
            events.append(ev)
            continue
        for code, pattern in NVRM_PATTERNS:
            if pattern.search(line):
                entry = nvrm.setdefault(code, {"code": code, "count": 0, "text": line.strip()[:300]})
                entry["count"] += 1
                break
    counts = {}
    by_pci = {}
    for ev in events:
        counts[str(ev["xid"])] = counts.get(str(ev["xid"]), 0) + 1
        key = "%d@%s" % (ev["xid"], ev["pci"])
        by_pci[key] = by_pci.get(key, 0) + 1
    result["counts"] = counts
    result["counts_by_pci"] = by_pci
    result["total"] = len(events)
    if len(events) > MAX_EVENTS:
        result["truncated"] = True
        events = _keep(events)
    result["events"] = events
    result["nvrm_messages"] = list(nvrm.values())
    return result


def _keep(events):
    """Keep the first event of every (xid, pci) pair plus the most recent ones, up to MAX_EVENTS."""
    seen = set()
    firsts = []
    for i, ev in enumerate(events):
        key = (ev["xid"], ev["pci"])
        if key not in seen:
            seen.add(key)
            firsts.append(i)
    firsts = firsts[:MAX_EVENTS]
    rest = [i for i in range(len(events) - 1, -1, -1) if i not in set(firsts)][: MAX_EVENTS - len(firsts)]
    return [events[i] for i in sorted(set(firsts) | set(rest))]


def _event(xid, pci, rest, line):
    pid = name = None
    text = rest.strip()
    m = _PID_RE.match(text)
    if m:
        raw_pid = m.group(1) if m.group(1) is not None else m.group(2)
        pid = int(raw_pid) if raw_pid and raw_pid.isdigit() else None
        name = (m.group(3) or "").strip() or None
        if name == "<unknown>":
            name = None
        text = m.group(4).strip()
    cls = xid_class(xid)
    return {"xid": xid, "pci": normalize_pci(pci), "pid": pid, "process": name, "text": text[:300],
            "severity": cls["severity"], "name": cls["name"], "line": line.strip()[:400]}


def unreadable(source, reason):
    return {"readable": False, "source": source, "reason": reason, "events": [], "counts": {},
            "counts_by_pci": {}, "total": 0, "truncated": False, "nvrm_messages": []}


# ----------------------------------------------------------------------------- host context
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


def parse_meminfo_mib(text):
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text or "", re.M)
    return int(m.group(1)) // 1024 if m else None


def parse_cpuinfo(text):
    model = None
    count = 0
    for line in (text or "").splitlines():
        key, _, value = line.partition(":")
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


def collect_host(read_file, exists, run=None, statvfs=None, getrlimit=None, rlim_infinity=-1, uname_release=None):
    """Host context from injected readers.

    read_file(path) -> str|bytes|None, exists(path) -> bool, run(argv) -> (rc, out, err) or None,
    statvfs(path) -> os.statvfs_result or None, getrlimit() -> (soft, hard) of RLIMIT_MEMLOCK.
    """
    def rf(path):
        try:
            data = read_file(path)
        except Exception:
            return None
        if isinstance(data, bytes) and not path.endswith("environ"):
            data = data.decode("utf-8", "replace")
        return data

    def cmd(argv):
        if run is None:
            return None
        try:
            rc, out, _ = run(argv)
        except Exception:
            return None
        if isinstance(out, bytes):
            out = out.decode("utf-8", "replace")
        # systemd-detect-virt exits 1 and prints "none" when there is nothing
        if rc not in (0, 1):
            return None
        return (out or "").strip() or None

    virt_c = cmd(["systemd-detect-virt", "--container"])
    virt_v = cmd(["systemd-detect-virt", "--vm"])
    container, kind = detect_container(
        dockerenv=exists("/.dockerenv"), containerenv=exists("/run/.containerenv"),
        cgroup=rf("/proc/1/cgroup"), environ=rf("/proc/1/environ"), detect_virt_container=virt_c)
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
