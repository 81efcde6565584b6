"""Host context (container or VM, init system, OS, CPU, RAM, /dev/shm, memlock) and Xid events.

Everything works on plain inputs: file contents, command outputs and results of system calls
are passed in (``collect_host`` takes the reader callables), so it is testable with recorded
data. ``read_kernel_log`` reads the kernel log through an injected command runner;
``parse_kernel_log`` turns its text into events. ``popen_runner`` and ``Prefetch`` are the
module's command runner: the commands of one gathering start together, each in a thread.
"""

import os
import re
import subprocess
import threading

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

# ----------------------------------------------------------------------------- kernel-log message forms
# ONE table of the NVRM (and GSP firmware) kernel-log lines the parser knows. A row is:
#   form     its name (also what de-duplication of the Xid 79 forms keys on)
#   kind     "xid" (an Xid line: the number and the PCI address are taken from the line), "fallen"
#            (a one-line "fallen off the bus" message without an Xid number), "fallen_multiline" (the
#            probe-time message over several lines), "message" (a notable NVRM line, no Xid event)
#   xid      what the row means: "from the line", 79, or None for a message row (then ``code``)
#   pci      how the PCI address is taken (None: not taken); group 1 of ``pattern`` holds it
#   needle   a plain substring the line must contain before ``pattern`` is tried (a tuple: one of them);
#            where ``pattern`` starts with the needle's text it is matched right there
#   pattern  the compiled expression (for "fallen_multiline": its first line; ``more`` matches the
#            optional middle lines, ``last`` the line that completes it)
#   sample   a real line (or lines) as published, with ``source`` (where it was seen) and ``driver``
# The driver's format strings (NVIDIA/open-gpu-kernel-modules, tags 515.43.04 to 595.45.04):
# src/nvidia/src/kernel/gpu/rc/kernel_rc.c prints the Xid lines ("pid=%s, name=%s, " always up to 565,
# left out without a process from 570 on); src/nvidia/arch/nvalloc/unix/src/osinit.c osHandleGpuLost
# prints "GPU dddd:bb:dd.f: GPU has fallen off the bus." after the Xid 79 line; osapi.c prints the
# three-line probe message (one printk, the same text in every tag) when BOOT_0/BOOT_42 read all ones.
_PCI = r"([0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?)"
_PCI_ID = r"\(PCI ID: [0-9a-fA-F]{4}:[0-9a-fA-F]{4}\)"
_NOLEBASE = ("https://github.com/nolebase/nolebase/blob/15536367a9ae104aa139ac5e3978f7f2486416c5/zh-CN/"
             "%E7%AC%94%E8%AE%B0/%F0%9F%A7%B1%20%E5%9F%BA%E7%A1%80%E8%AE%BE%E6%96%BD/%F0%9F%9A%A2%20Kubernetes/"
             "%E5%9C%A8%20Kubernetes%20%E9%9B%86%E7%BE%A4%E4%B8%8A%E7%9A%84%20GPU%20%E6%8E%89%E5%8D%A1%E5%92%8C"
             "%E6%95%85%E9%9A%9C%E6%8E%92%E6%9F%A5.md (H100 host: dmesg and /var/log/syslog excerpts)")
_PID_RE = re.compile(r"^pid=(?:'([^']*)'|([^,\s]*)),\s*(?:name=([^,]*),\s*)?(.*)$")
_FALLEN_TEXT = "GPU has fallen off the bus (NVRM message without Xid number)"
_PROBE_TEXT = "GPU has fallen off the bus and is not responding to commands (NVRM probe message without Xid number)"


def _row(form, kind, xid, pci, needle, pattern, sample, source, driver, code=None, flags=0, **more):
    row = {"form": form, "kind": kind, "xid": xid, "code": code, "pci": pci, "needle": needle,
           "pattern": re.compile(pattern, flags), "sample": sample, "source": source, "driver": driver,
           "anchored": (isinstance(needle, str) and "|" not in pattern
                        and pattern.replace("\\", "").startswith(needle))}
    row.update((k, re.compile(v)) for k, v in more.items())
    return row


_XID_PCI = "the Xid clause (PCI:dddd:bb:dd), domain:bus:device"
KERNEL_LOG_PATTERNS = [
    # --- Xid lines (most specific first; the first row that matches a line wins)
    _row("xid_mig", "xid", "from the line", _XID_PCI + "; the GPU-I/GPU-CI (MIG instance) part is dropped",
         "NVRM: Xid (", r"NVRM: Xid \((?:PCI:)?" + _PCI + r" GPU-I:\d+(?: GPU-CI:\d+)?\):\s*(\d+),\s*(.*)$",
         "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No",
         "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html (NVIDIA's example; the same line is in "
         "the driver source comment src/nvidia/src/kernel/gpu/arch/ampere/kern_gpu_error_cont_ga100.c)",
         "not stated (A100; pid= without name= is older than 515.43.04, which prints GPU-I:NN [GPU-CI:NN] "
         "with pid=/name=)"),
    _row("xid_pid_unknown", "xid", "from the line", _XID_PCI, "NVRM: Xid (",
         r"NVRM: Xid \((?:PCI:)?" + _PCI + r"\):\s*(\d+),\s*(pid='[^']*', name=.*)$",
         "[ 4254.197860] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
         _NOLEBASE, "525.125.06 proprietary module (515 to 565 print pid='<unknown>', name=<unknown> without a "
         "process)"),
    _row("xid_pid_name", "xid", "from the line", _XID_PCI, "NVRM: Xid (",
         r"NVRM: Xid \((?:PCI:)?" + _PCI + r"\):\s*(\d+),\s*(pid=[^,\s]*, name=.*)$",
         "[22859.081860] NVRM: Xid (PCI:0000:01:00): 31, pid=14292, name=python, Ch 00000030, intr 00000000. "
         "MMU Fault: ENGINE HOST0 HUBCLIENT_ESC faulted @ 0x10_00200000. Fault is of type FAULT_PDE "
         "ACCESS_TYPE_VIRT_READ",
         "https://github.com/tinygrad/tinygrad/issues/6947", "535.183.06"),
    _row("xid_pid", "xid", "from the line", _XID_PCI, "NVRM: Xid (",
         r"NVRM: Xid \((?:PCI:)?" + _PCI + r"\):\s*(\d+),\s*(pid=[^,\s]*,.*)$",
         "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
         "https://github.com/stas00/ml-engineering/blob/7bc7c3054eb93c277a4755c597ae0864d77a63f1/"
         "compute/accelerator/nvidia/debug.md", "not stated (older than 515.43.04, which always prints name=)"),
    _row("xid_plain", "xid", "from the line", _XID_PCI, "NVRM: Xid (",
         r"NVRM: Xid \(PCI:" + _PCI + r"\):\s*(\d+),\s*(.*)$",
         "Apr 19 13:16:41 Kyrios kernel: NVRM: Xid (PCI:0000:02:00): 120, GSP task exception: load access page "
         "fault (cause:0xd) @ pc:0x140ca4a, partition:4#0, task:3",
         "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/829",
         "575.51.02 (570 and later leave out pid=/name= without a process; drivers of the 2010s printed every "
         "Xid this way)"),
    _row("xid_no_pci_prefix", "xid", "from the line", "the Xid clause (dddd:bb:dd) without the PCI: prefix",
         "NVRM: Xid (",
         r"NVRM: Xid \(" + _PCI + r"\):\s*(\d+),\s*(.*)$",
         "Nov 22 18:29:55 hostname kernel: [ 966.503025] NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, "
         "intr 10000000",
         "https://pastebin.com/NGng33SB", "not stated (old driver)"),
    # --- "fallen off the bus" without an Xid number (Xid 79 by meaning; de-duplicated against the Xid line)
    _row("fallen_gpu_dev", "fallen", 79, "'GPU dddd:bb:dd.f:' (function dropped)", "GPU has fallen off the bus",
         r"NVRM: GPU " + _PCI + r":\s+GPU has fallen off the bus",
         "[ 4254.197871] NVRM: GPU 0000:5d:00.0: GPU has fallen off the bus.",
         _NOLEBASE, "525.125.06 (printed right after the Xid 79 line, osinit.c osHandleGpuLost)"),
    _row("fallen_gpu_at_legacy", "fallen", 79, "'GPU at dddd:bb:dd.f' (function dropped)", "has fallen off the bus",
         r"NVRM: GPU at (?:PCI:)?" + _PCI + r"(?::[^:]*)?:? has fallen off the bus",
         "[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.",
         "https://github.com/Bumblebee-Project/Bumblebee/issues/554", "not stated (2014 driver)"),
    _row("fallen_probe_multiline", "fallen_multiline", 79,
         "the first line 'The NVIDIA GPU dddd:bb:dd.f' (function dropped)", "The NVIDIA GPU",
         # only the first line of the fallen-off message: the "not supported" messages that also start with
         # "The NVIDIA GPU ..." carry "(PCI ID: ...)" at the end of their first line
         r"NVRM: The NVIDIA GPU " + _PCI + r"(?=\s*$|\s+NVRM:|\s+" + _PCI_ID + r"\s+installed in this system has)",
         "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
         "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
         "               NVRM: fallen off the bus and is not responding to commands.",
         "https://github.com/NVIDIA/NVSentinel/issues/155",
         "570.158.01 open kernel module (the same three lines from 525.125.06 proprietary on the nolebase host)",
         more=r"NVRM: (?:" + _PCI_ID + r" )?installed in this system has\s*$",
         last=r"NVRM: fallen off the bus and is not responding to commands"),
    # --- NVRM messages reported as nvrm_messages (no Xid event)
    _row("api_mismatch", "message", None, None, "API mismatch", r"NVRM: API mismatch",
         "Jun 30 11:07:05 gpu-0 kernel: NVRM: API mismatch: the client has the version 535.54.03, but#012NVRM: "
         "this kernel module has the version 530.30.02.  Please#012NVRM: make sure that this kernel module and all "
         "NVIDIA driver#012NVRM: components have the same version.",
         "https://github.com/stackhpc/ansible-slurm-appliance/issues/287", "530.30.02 kernel module, 535.54.03 client",
         code="api_mismatch"),
    _row("rm_init_adapter_failed", "message", None, None, "RmInitAdapter failed", r"RmInitAdapter failed",
         "[  903.610907] NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x65:1792)",
         "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/789", "550.144.03",
         code="rm_init_adapter_failed"),
    _row("rm_init_adapter_failed_minor", "message", None, None, "rm_init_adapter failed", r"rm_init_adapter failed",
         "[  903.611884] NVRM: GPU 0000:98:00.0: rm_init_adapter failed, device minor number 0",
         "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/789", "550.144.03",
         code="rm_init_adapter_failed"),
    _row("no_adapter_probed", "message", None, None, "probed", r"No NVIDIA (?:graphics adapter|GPU) probed",
         "[188497.595099] NVRM: No NVIDIA graphics adapter probed!",
         "https://github.com/mattshma/bigdata/issues/133", "384.81", code="no_adapter_probed"),
    _row("probe_not_called", "message", None, None, "probe routine was not called", r"probe routine was not called",
         "[188549.976351] NVRM: The NVIDIA probe routine was not called for 3 device(s).",
         "https://github.com/mattshma/bigdata/issues/133", "384.81", code="no_adapter_probed"),
    _row("gsp_firmware_load_failed", "message", None, None, "Direct firmware load for",
         r"Direct firmware load for \S*gsp\S* failed",
         "Jan  3 07:39:45 ubuntu kernel: [17257.737241] nvidia 0000:18:00.0: Direct firmware load for "
         "nvidia/525.125.06/gsp_tu10x.bin failed with error -2",
         _NOLEBASE, "525.125.06 (the kernel's firmware loader prints it; the line has no NVRM: prefix)",
         code="gsp_firmware_missing"),
    _row("gsp_firmware_missing", "message", None, None, ("irmware", "to load"),
         r"No firmware image found|(?:GSP|gsp).*firmware.*(?:fail|missing|not found)|failed to load.*gsp",
         "[   1.287764] NVRM: RmFetchGspRmImages: No firmware image found\"",
         "https://github.com/kata-containers/kata-containers/pull/11875", "not stated (Kata 3.21 confidential guest)",
         code="gsp_firmware_missing", flags=re.I),
    _row("gsp_rpc_rate_limited", "message", None, None, "Rate limiting GSP RPC", r"Rate limiting GSP RPC error prints",
         "[Sun Feb 23 16:24:36 2025] NVRM: Rate limiting GSP RPC error prints for GPU at PCI:0000:9b:00 "
         "(printing 1 of every 30).  The GPU likely needs to be reset.",
         "https://github.com/leptonai/gpud/blob/4a8de33a3f02e207f39e9023d67125592d599731/"
         "components/accelerator/nvidia/xid/testdata/dmesg-with-xid-119.log", "not stated (H100, Dell XE9680)",
         code="gsp_rpc_rate_limited"),
]
_ROWS = tuple(KERNEL_LOG_PATTERNS)
_PROBE = next(r for r in KERNEL_LOG_PATTERNS if r["kind"] == "fallen_multiline")
_PROBE_MORE_NEEDLE = "installed in this system has"
_PROBE_LAST_NEEDLE = "not responding to commands"
# A first line waits this many lines for its last line (other kernel lines may come between them).
PROBE_WINDOW = 32
# A new boot (kern.log holds several): a GPU that fell off before it is a new event after it.
_BOOT_NEEDLE = "Linux version "


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
    pci = pci.split(".", maxsplit=1)[0]
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
    """Xid events and notable NVRM messages from dmesg / journalctl / syslog text.

    One pass over the lines with the rows of ``KERNEL_LOG_PATTERNS``. The multi-line probe message is
    assembled into one Xid 79 event (PCI address from its first line, ``line`` = its lines joined).
    The forms of one GPU falling off (the Xid 79 line, "GPU dddd:bb:dd.f: GPU has fallen off the bus.",
    the legacy "GPU at ..." line, the probe message) count once: a form not yet seen for that GPU in
    this boot joins its last Xid 79 event (a real Xid line replaces a derived one); the same form
    again is a new event.
    """
    result = {"readable": True, "source": source, "reason": None, "events": [], "counts": {},
              "counts_by_pci": {}, "total": 0, "truncated": False, "nvrm_messages": []}
    if text is None:
        result.update(readable=False, reason="no kernel log text")
        return result
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    events = []
    nvrm = {}
    lost = {}  # normalized PCI address -> [index in events, forms seen] of its last Xid 79 event
    pending = []  # open probe messages: [line number, PCI address, raw lines]
    probe_start, probe_more, probe_last = _PROBE["pattern"], _PROBE["more"], _PROBE["last"]
    for n, line in enumerate(_split_lines(text)):
        if "NVRM" not in line:
            if _BOOT_NEEDLE in line:
                lost.clear()
                pending = []
            if "gsp" not in line:
                continue
        elif _PROBE_LAST_NEEDLE in line and probe_last.search(line):
            m = probe_start.search(line)  # the whole message on one line (newlines replaced)
            if m:
                pci, lines = m.group(1), [line]
            else:
                pending = [p for p in pending if n - p[0] <= PROBE_WINDOW]
                if pending:
                    _unused, pci, lines = pending.pop()  # the most recent first line
                    lines.append(line)
                else:
                    pci, lines = None, [line]  # its first line is not in the text
            ev = _event(79, pci, _PROBE_TEXT, "\n".join(s.rstrip() for s in lines))
            ev["derived"] = True
            _lost(events, lost, ev, _PROBE["form"])
            continue
        elif pending and _PROBE_MORE_NEEDLE in line and probe_more.search(line):
            pending[-1][2].append(line)
            continue
        row, m = match_row(line)
        if row is None:
            continue
        kind = row["kind"]
        if kind == "xid":
            ev = _event(int(m.group(2)), m.group(1), m.group(3), line)
            if ev["xid"] == 79:
                _lost(events, lost, ev, "xid")
            else:
                events.append(ev)
        elif kind == "fallen":
            ev = _event(79, m.group(1), _FALLEN_TEXT, line)
            ev["derived"] = True
            _lost(events, lost, ev, row["form"])
        elif kind == "fallen_multiline":
            pending = [p for p in pending if n - p[0] <= PROBE_WINDOW]
            pending.append([n, m.group(1), [line]])
        else:
            entry = nvrm.setdefault(row["code"], {"code": row["code"], "count": 0, "text": line.strip()[:300]})
            entry["count"] += 1
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


def kernel_log_patterns_markdown():
    """The message forms of ``KERNEL_LOG_PATTERNS`` as a Markdown section (for docs/doctor-rules.md)."""
    def cell(text):
        return "<br>".join("`%s`" % part.strip().replace("|", "\\|") for part in text.splitlines())

    lines = ["## Recognised kernel-log message forms", "",
             "Generated from `KERNEL_LOG_PATTERNS` in `module_utils/gpufleet/hostctx.py` (what `xid_79_fallen_off_bus` "
             "and the Xid rules count). The lines of the multi-line probe message may come with dmesg, journalctl "
             "or syslog prefixes and with other kernel lines between them; they make one Xid 79 event. The forms "
             "of one GPU falling off (Xid 79 line, `GPU ...: GPU has fallen off the bus.`, legacy `GPU at ...`, "
             "probe message) count once per boot.", "",
             "| form | means | PCI address from | sample | seen in (driver) |", "|---|---|---|---|---|"]
    for row in KERNEL_LOG_PATTERNS:
        if row["kind"] == "message":
            means = "message `%s`" % row["code"]
        elif row["xid"] == 79:
            means = "Xid 79 (derived)"
        else:
            means = "Xid number from the line"
        lines.append("| `%s` | %s | %s | %s | %s; driver: %s |" % (
            row["form"], means, (row["pci"] or "-").replace("|", "\\|"), cell(row["sample"]),
            row["source"], row["driver"]))
    return "\n".join(lines) + "\n"


def match_row(line):
    """(row, match) of the first ``KERNEL_LOG_PATTERNS`` row that matches one line, or (None, None)."""
    for row in _ROWS:
        needle = row["needle"]
        if needle.__class__ is str:
            at = line.find(needle)
            if at < 0:
                continue
            m = row["pattern"].match(line, at) if row["anchored"] else row["pattern"].search(line)
        elif any(s in line for s in needle):
            m = row["pattern"].search(line)
        else:
            continue
        if m is not None:
            return row, m
    return None, None


def _lost(events, lost, ev, form):
    """Add an Xid 79 event unless it is another form of the last one for the same GPU."""
    last = lost.get(ev["pci"])
    if last is not None and form not in last[1]:
        last[1].add(form)
        if form == "xid":  # the Xid line carries the number, the process and the driver's text
            events[last[0]] = ev
        return
    lost[ev["pci"]] = [len(events), {form}]
    events.append(ev)


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


# ----------------------------------------------------------------------------- commands, kernel log
# The probes call ``run(argv) -> (rc, stdout, stderr)``, or None when argv[0] is not installed.
# ``popen_runner`` is the real one. ``Prefetch`` starts the commands a gathering needs at once, each
# in its own thread, so their run times overlap one another and the NVML reads instead of adding up.
SBIN_DIRS = ("/sbin", "/usr/sbin", "/usr/local/sbin")
DMESG = ("dmesg",)
JOURNALCTL_K = ("journalctl", "-k", "-b", "--no-pager", "-q")
KERN_LOG_FILES = ("/var/log/kern.log",)
KERN_LOG_MAX = 8 * 1024 * 1024
# What AnsibleModule.run_command strips from a child's PYTHONPATH: the module payload's own entries.
_PAYLOAD_PATHS = ("/ansible_modlib.zip", "/debug_dir")


def which(name, environ=None):
    """Path of the executable ``name`` the way AnsibleModule.get_bin_path finds it (PATH, then /sbin,
    /usr/sbin and /usr/local/sbin), or None."""
    dirs = [d for d in (os.environ if environ is None else environ).get("PATH", "").split(os.pathsep) if d]
    dirs += [d for d in SBIN_DIRS if d not in dirs]
    for d in dirs:
        path = os.path.join(d, name)  # an absolute ``name`` stays itself
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def popen_runner(which=which, environ=None):
    """A ``run(argv)`` that may be called from several threads at once, for ``Prefetch``.

    AnsibleModule.run_command may not: it keeps per-call state on the module object, forks through
    a Python ``preexec_fn`` (documented as unsafe with threads) and calls ``fail_json`` when a
    program cannot start. Here argv[0] is resolved with ``which`` (the module passes its
    ``get_bin_path``), stdin is /dev/null, the environment is ``environ`` (default this process's)
    less the module payload's PYTHONPATH entries, as run_command does, and the output is bytes. A
    program that is found but cannot be started gives ``(126, b"", reason)``.
    """
    env = dict(os.environ if environ is None else environ)
    if "PYTHONPATH" in env:
        kept = [p for p in env["PYTHONPATH"].split(":") if p and not p.endswith(_PAYLOAD_PATHS)]
        if kept:
            env["PYTHONPATH"] = ":".join(kept)
        else:
            del env["PYTHONPATH"]

    def run(argv):
        exe = which(argv[0])
        if not exe:
            return None
        try:
            proc = subprocess.Popen([exe] + [str(a) for a in argv[1:]], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, close_fds=True)
        except OSError as exc:
            return 126, b"", ("%s: %s" % (exe, exc.strerror or exc)).encode("utf-8", "replace")
        out, err = proc.communicate()
        return proc.returncode, out, err

    return run


class _Job:
    """One command, run in a thread (``background``) or at once; ``get`` waits and returns or re-raises."""

    def __init__(self, run, argv, background):
        self.result = self.error = self.thread = None
        if background:
            thread = threading.Thread(target=self._do, args=(run, argv), daemon=True)
            try:
                thread.start()
                self.thread = thread
                return
            except RuntimeError:  # "can't start new thread" (a tight process limit): run it here instead
                pass
        self._do(run, argv)

    def _do(self, run, argv):
        try:
            self.result = run(argv)
        except Exception as exc:  # handed to the caller in get(), as a direct call would raise it
            self.error = exc

    def get(self):
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


class Prefetch:
    """A command runner that starts the commands in ``ahead`` at once, each in a thread.

    ``run(argv)`` answers from those (waiting for the one asked for) and runs anything else then
    and there. Every answer is kept for the gathering: a command asked for twice, by name or by
    path ("sshd -V", then "/usr/sbin/sshd -V"), runs once. ``which`` resolves argv[0] for that
    (None: argv is the key as given); a name it does not find gives None without running anything.
    ``run`` must be safe to call from several threads (``popen_runner`` is). Use it as a context
    manager: leaving the block waits for what is still running, so no command outlives the module.
    ``ran`` lists the commands started, in order.
    """

    def __init__(self, run, ahead=(), which=None):
        self._run = run
        self._which = which
        self._jobs = {}
        self.ran = []
        for argv in ahead:
            self._job(argv, background=True)

    def _job(self, argv, background):
        argv = list(argv)
        if self._which is not None:
            exe = self._which(argv[0])
            if not exe:
                return None
            argv[0] = exe
        key = tuple(argv)
        if key not in self._jobs:
            self.ran.append(argv)
            self._jobs[key] = _Job(self._run, argv, background)
        return self._jobs[key]

    def __call__(self, argv):
        job = self._job(argv, background=False)
        return job.get() if job is not None else None

    def wait(self):
        for job in list(self._jobs.values()):
            if job.thread is not None:
                job.thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.wait()
        return False


def read_tail(path, limit):
    """The last ``limit`` bytes of ``path`` as text; "" when it does not exist; None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - limit))
            return fh.read(limit).decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    except OSError:
        return None


def read_kernel_log(run, read_tail=read_tail):
    """{"text", "source"} from dmesg, journalctl -k or /var/log/kern.log, else {"text": None, "source": None,
    "reason"}: what each said. ``run(argv)`` as the probes get it; ``read_tail(path, limit)`` as above.
    ``doctor_probe.read_kernel_log`` calls it over the doctor's Host."""
    reasons = []
    for argv, name in ((DMESG, "dmesg"), (JOURNALCTL_K, "journalctl -k")):
        res = run(list(argv))
        if res is None:
            reasons.append("%s: not installed" % argv[0])
            continue
        rc, out, err = res
        if rc == 0 and out.strip():
            return {"text": out, "source": name}
        detail = err.strip() or out.strip()
        detail = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else detail
        reasons.append("%s: rc=%s %s" % (name, rc, detail[:200]))
    for path in KERN_LOG_FILES:
        text = read_tail(path, KERN_LOG_MAX)
        if text:
            return {"text": text, "source": path}
        reasons.append("%s: %s" % (path, "absent or empty" if text == "" else "not readable"))
    return {"text": None, "source": None, "reason": "; ".join(reasons)}


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


# systemd-detect-virt --container, then --vm: collect_host runs both.
HOST_COMMANDS = (("systemd-detect-virt", "--container"), ("systemd-detect-virt", "--vm"))


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


# ----------------------------------------------------------------------------- readiness probes
# Cheap, side-effect-free reads for the renter's checklist (docs/checklist.md). Each helper takes
# plain inputs (file text, command output) so the tests feed it recorded data; ``collect_readiness``
# wires them to the injected readers and never raises.
GPUFLEET_VENV = "/opt/gpufleet/venv"
DATA_DIRS = ("/workspace", "/data")
MONITORING_TEXTFILE = "/var/lib/gpufleet/textfile/gpufleet_gpu.prom"
MONITORING_PROGRAM = "gpufleet-gpu-exporter"
SUPERVISORCTL = "/usr/local/bin/supervisorctl"
DPKG_PACKAGES = ("openssh-server", "nvidia-container-toolkit", "nvidia-container-toolkit-base",
                 "libnvidia-container-tools", "libnvidia-container1")
# The commands collect_readiness runs, in its order (see readiness_commands).
SSH_VERSION_COMMANDS = (("sshd", "-V"), ("/usr/sbin/sshd", "-V"), ("ssh", "-V"))
SSHD_T_COMMANDS = (("sshd", "-T"), ("/usr/sbin/sshd", "-T"))  # as root; the second when the first is not there
DPKG_QUERY = ("dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n") + DPKG_PACKAGES
SUPERVISOR_STATUS = (SUPERVISORCTL, "status", MONITORING_PROGRAM)  # when SUPERVISORCTL exists
PIP_CONFIG_FILES = ("/etc/pip.conf", "/etc/xdg/pip/pip.conf", "/root/.config/pip/pip.conf", "/root/.pip/pip.conf")
NETWORK_FS = frozenset(["nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "9p", "beegfs",
                        "gpfs", "wekafs", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.juicefs", "fuse.rclone",
                        "fuse.glusterfs", "fuse.mountpoint-s3", "fuse.blobfuse2"])
MAX_SOCKET_FDS = 20000
MAX_LISTENERS = 64
_TCP_LISTEN = "0A"
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


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


def _hex_addr(text):
    """Address field of /proc/net/tcp{,6} ("0100007F:22C3") -> (address text, port)."""
    addr, _unused, port = text.partition(":")
    raw = bytes.fromhex(addr)
    if len(raw) == 4:
        ip = ".".join(str(b) for b in raw[::-1])
    else:  # four 32-bit words, each in host (little-endian) order
        words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
        flat = b"".join(words)
        groups = ["%x" % int.from_bytes(flat[i:i + 2], "big") for i in range(0, 16, 2)]
        if flat[:12] == b"\0" * 10 + b"\xff\xff":  # IPv4-mapped: written the way people read it
            ip = "::ffff:" + ".".join(str(b) for b in flat[12:])
        else:
            ip = _compress_v6(":".join(groups))
    return ip, int(port, 16)


def _compress_v6(ip):
    try:
        import ipaddress

        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ip


def is_loopback(address):
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1") or address.startswith("::ffff:127.")


def parse_proc_net_tcp(text, proto="tcp"):
    """Listening sockets from /proc/net/tcp or tcp6: [{"proto", "address", "port", "inode"}]."""
    out = []
    for line in (text or "").splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or parts[3] != _TCP_LISTEN:
            continue
        try:
            address, port = _hex_addr(parts[1])
        except ValueError:
            continue
        out.append({"proto": proto, "address": address, "port": port, "inode": parts[9]})
    return out


def socket_owners(listdir, readlink, read_file, inodes, max_fds=MAX_SOCKET_FDS):
    """{inode: process name} for the given socket inodes, from /proc/<pid>/fd (what is readable)."""
    owners = {}
    if not inodes or listdir is None or readlink is None:
        return owners
    wanted = {"socket:[%s]" % i: i for i in inodes}
    seen = 0
    for pid in listdir("/proc") or ():
        if not pid.isdigit():
            continue
        fds = listdir("/proc/%s/fd" % pid) or ()
        for fd in fds:
            seen += 1
            if seen > max_fds:
                return owners
            target = readlink("/proc/%s/fd/%s" % (pid, fd))
            if target in wanted and wanted[target] not in owners:
                comm = read_file("/proc/%s/comm" % pid)
                if isinstance(comm, bytes):
                    comm = comm.decode("utf-8", "replace")
                cmdline = read_file("/proc/%s/cmdline" % pid) or b""
                if isinstance(cmdline, str):
                    cmdline = cmdline.encode()
                args = [a.decode("utf-8", "replace") for a in cmdline.split(b"\0") if a][:4]
                owners[wanted[target]] = {"pid": int(pid), "name": (comm or "").strip() or None,
                                          "jupyter": any("jupyter" in a for a in args)}
        if len(owners) == len(wanted):
            break
    return owners


def parse_sshd_t(text):
    """`sshd -T` output -> the settings the checklist reads (lower-case keys, text values)."""
    keep = ("passwordauthentication", "kbdinteractiveauthentication", "permitrootlogin", "pubkeyauthentication",
            "authenticationmethods", "permitemptypasswords", "logingracetime")
    out = {}
    ports = []
    for line in (text or "").splitlines():
        key, _unused, value = line.strip().partition(" ")
        key = key.lower()
        if key in keep and key not in out:
            out[key] = value.strip()
        elif key == "port":
            ports.append(value.strip())
    if ports:
        out["port"] = ports
    return out


def parse_openssh_version(text):
    """"OpenSSH_9.2p1 Debian-2+deb12u10, OpenSSL ..." -> "9.2p1"; "OpenSSH_9.2, OpenSSL" -> "9.2"."""
    m = re.search(r"OpenSSH_(\d+\.\d+(?:p\d+)?)", text or "")
    return m.group(1) if m else None


def parse_dpkg_query(text):
    """Lines "name<TAB>version<TAB>ii " -> {name: version} for installed packages only."""
    out = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) == 2 or len(parts) >= 3 and parts[2].strip().startswith("ii"):
            out[parts[0].strip()] = parts[1].strip()
    return out


def parse_dist_info(names):
    """site-packages entries ("torch-2.5.1+cu121.dist-info") -> {"torch": "2.5.1+cu121"} (names normalized)."""
    out = {}
    for entry in names or ():
        if not entry.endswith(".dist-info"):
            continue
        stem = entry[: -len(".dist-info")]
        name, sep, version = stem.partition("-")
        if sep and version:
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def redact_url(url):
    return _URL_CREDENTIALS.sub("***@", url)


def parse_pip_conf(text):
    """index-url / extra-index-url of a pip.conf (any section), credentials in URLs masked."""
    out = {"index_url": [], "extra_index_url": []}
    current = None  # key whose value continues on indented lines (ini multi-line values)
    for line in (text or "").splitlines():
        if current and line[:1] in (" ", "\t") and line.strip() and not line.strip().startswith(("#", ";")):
            out[current] += [redact_url(v) for v in line.split() if v]
            continue
        current = None
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key = key.strip().lower().replace("_", "-")
        if key in ("index-url", "extra-index-url"):
            current = key.replace("-", "_")
            out[current] += [redact_url(v) for v in value.split() if v]
    return out


def parse_supervisorctl_status(text, program):
    """`supervisorctl status PROGRAM` -> its state ("RUNNING", "FATAL", ...) or None."""
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in (program, "%s:%s" % (program, program)):
            return parts[1]
    return None


def tls_probe(address, port, timeout=2.0):
    """"tls" if a TLS handshake to address:port succeeds, "plain" if the peer answers but not with TLS,
    None when nothing answers. Connects locally only; sends a ClientHello and nothing else."""
    import socket
    import ssl

    target = "127.0.0.1" if address in ("0.0.0.0", "") else ("::1" if address == "::" else address)  # noqa: S104
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # only asks "does it speak TLS", trusts nothing it says
    try:
        sock = socket.create_connection((target, port), timeout=timeout)
    except OSError:
        return None
    try:
        with ctx.wrap_socket(sock, server_hostname=None):
            return "tls"
    except ssl.SSLError:
        return "plain"
    except OSError:
        return "plain"
    finally:
        sock.close()


def _site_packages(listdir, venv):
    for lib in ("lib", "lib64"):
        for entry in sorted(listdir("%s/%s" % (venv, lib)) or ()):
            if re.match(r"^python3\.\d+$", entry):
                return "%s/%s/%s/site-packages" % (venv, lib, entry), entry[len("python"):]
    return None, None


def readiness_commands(exists=None, geteuid=None):
    """The commands ``collect_readiness`` will run with these readers, slowest first, to start together.

    All three OpenSSH version commands are listed although the probe stops at the first that gives
    the portable version ("9.2p1"): on Debian ``sshd -V`` does not, so all three run there anyway
    (and "sshd" resolves to /usr/sbin/sshd, which ``Prefetch`` runs once). The second ``sshd -T`` only
    runs when the first is not installed, so it is not listed.
    """
    def safe(fn, *args):
        try:
            return fn(*args)
        except Exception:
            return None

    cmds = []
    if exists is not None and safe(exists, SUPERVISORCTL):
        cmds.append(list(SUPERVISOR_STATUS))  # a Python program: the slowest by far
    if geteuid is not None and safe(geteuid) == 0:
        cmds.append(list(SSHD_T_COMMANDS[0]))
    cmds.append(list(DPKG_QUERY))
    cmds += [list(argv) for argv in SSH_VERSION_COMMANDS]
    return cmds


def collect_readiness(read_file, exists, run=None, statvfs=None, listdir=None, readlink=None, stat=None,
                      environ=None, geteuid=None, probe_tls=None, now=None, venv=GPUFLEET_VENV,
                      data_dirs=DATA_DIRS):
    """Readiness facts for the checklist. Every part has a value or a ``reason``; nothing raises."""
    def safe(fn, *args):
        try:
            return fn(*args)
        except Exception:
            return None

    def rf(path):
        data = safe(read_file, path)
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else data

    def out_of(argv):
        """(rc, stdout + stderr text) or None when the command is missing or failed to start."""
        if run is None:
            return None
        res = safe(run, argv)
        if not res:
            return None
        rc, out, err = res
        text = b"".join(x if isinstance(x, bytes) else (x or "").encode() for x in (out, err))
        return rc, text.decode("utf-8", "replace")

    ls = (lambda p: safe(listdir, p) or []) if listdir else (lambda p: [])
    result = {}

    mounts = parse_mounts(rf("/proc/mounts"))
    disks = []
    for path in ("/",) + tuple(d for d in data_dirs if safe(exists, d)):
        m = mount_of(path, mounts)
        dev = block_device(m["device"]) if m else None
        rot = rf("/sys/block/%s/queue/rotational" % dev) if dev else None
        disks.append(disk_info(path, mounts, safe(statvfs, path) if statvfs else None, rot))
    result["disks"] = disks

    listeners = []
    tables = {"tcp": rf("/proc/net/tcp"), "tcp6": rf("/proc/net/tcp6")}  # read once: large on busy hosts
    for proto, text in tables.items():
        listeners += [s for s in parse_proc_net_tcp(text, proto) if not is_loopback(s["address"])]
    listeners = listeners[:MAX_LISTENERS]
    owners = safe(socket_owners, listdir, readlink, read_file, [s["inode"] for s in listeners]) or {}
    for s in listeners:
        owner = owners.get(s.pop("inode"))
        s["process"] = owner["name"] if owner else None
        s["jupyter"] = bool(owner and (owner["jupyter"] or "jupyter" in (owner["name"] or "")))
        s["tls"] = None
        if s["jupyter"] and probe_tls:
            s["tls"] = safe(probe_tls, s["address"], s["port"])
    result["listeners"] = {"readable": tables["tcp"] is not None, "owners_readable": bool(owners),
                           "sockets": listeners}

    sshd = {"version": None, "version_source": None, "package_version": None, "config": None, "reason": None}
    # sshd -V prints "OpenSSH_9.2" on Debian 12 (no portable suffix); ssh -V (the client, same source
    # package) prints "OpenSSH_9.2p1 Debian-2+deb12u10": keep the most precise answer and say where from.
    for argv in SSH_VERSION_COMMANDS:
        res = out_of(list(argv))
        ver = parse_openssh_version(res[1]) if res else None
        if ver and (sshd["version"] is None or ("p" in ver and "p" not in sshd["version"])):
            sshd["version"], sshd["version_source"] = ver, " ".join(argv)
        if sshd["version"] and "p" in sshd["version"]:
            break
    is_root = safe(geteuid) == 0 if geteuid else False
    if is_root:
        res = out_of(list(SSHD_T_COMMANDS[0])) or out_of(list(SSHD_T_COMMANDS[1]))
        if res and res[0] == 0:
            sshd["config"] = parse_sshd_t(res[1])
        else:
            sshd["reason"] = "sshd -T failed: %s" % (res[1].strip()[:200] if res else "sshd not found")
    else:
        sshd["reason"] = "not root: sshd -T (effective config) not read"
    dpkg = out_of(list(DPKG_QUERY))
    packages = parse_dpkg_query(dpkg[1]) if dpkg else {}
    result["dpkg_readable"] = dpkg is not None
    sshd["package_version"] = packages.get("openssh-server")
    result["sshd"] = sshd
    result["container_toolkit"] = {k: v for k, v in packages.items() if k in DPKG_PACKAGES and k != "openssh-server"}

    site, pyver = _site_packages(ls, venv)
    result["venv"] = {"path": venv, "exists": bool(safe(exists, venv)), "python": pyver,
                      "packages": parse_dist_info(ls(site)) if site else {}}

    pip = {"files": [], "env": {}}
    for path in PIP_CONFIG_FILES + ("%s/pip.conf" % venv,):
        conf = rf(path)
        if conf is not None:
            parsed = parse_pip_conf(conf)
            parsed["path"] = path
            pip["files"].append(parsed)
    env = environ or {}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE"):
        if env.get(key):
            pip["env"][key] = redact_url(env[key])
    for line in (rf("/etc/environment") or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
            pip["env"].setdefault(key.strip(), redact_url(value.strip().strip('"').strip("'")))
    result["pip"] = pip

    mon = {"textfile": MONITORING_TEXTFILE, "textfile_age_s": None, "textfile_size": None, "program": None,
           "reason": None}
    st = safe(stat, MONITORING_TEXTFILE) if stat else None
    if st is not None and now is not None:
        mon["textfile_age_s"] = max(0, int(safe(now) - st.st_mtime)) if safe(now) is not None else None
        mon["textfile_size"] = st.st_size
    elif st is None:
        mon["reason"] = "%s absent" % MONITORING_TEXTFILE
    if safe(exists, SUPERVISORCTL):
        res = out_of(list(SUPERVISOR_STATUS))
        status = parse_supervisorctl_status(res[1], MONITORING_PROGRAM) if res else None
        mon["program"] = status
    result["monitoring"] = mon
    return result
