# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel log of the host (dmesg, journalctl -k or /var/log/kern.log) and the Xid events in it.

``read_kernel_log`` reads it through an injected command runner (``hostctx.command_runner`` in the modules);
``parse_kernel_log`` turns its text into Xid events and notable NVRM messages, so it is tested on recorded
logs. ``KERNEL_LOG_PATTERNS`` is the one table of the message forms it knows.
"""

import re

from .hostctx import read_tail

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


# ----------------------------------------------------------------------------- reading the kernel log
DMESG = ("dmesg",)
JOURNALCTL_K = ("journalctl", "-k", "-b", "--no-pager", "-q")
KERN_LOG_FILES = ("/var/log/kern.log",)
KERN_LOG_MAX = 8 * 1024 * 1024


def read_kernel_log(run, read_tail=read_tail):
    """{"text", "source"} from dmesg, journalctl -k or /var/log/kern.log, else {"text": None, "source": None,
    "reason"}: what each said. ``run(argv)`` as the probes get it; ``read_tail(path, limit)`` as ``hostctx.read_tail``.
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
