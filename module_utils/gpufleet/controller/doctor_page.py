# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/doctor-rules.md, generated from the doctor's rules (host/doctor/rules.py), its torch / CUDA error texts and
the kernel-log message forms (host/system/kmsg.py). Controller code: a host's payload does not carry the page's
writer. Regenerate with ``python -c "import sys; sys.path.insert(0, 'module_utils'); from gpufleet.controller import
doctor_page; open('docs/doctor-rules.md', 'w').write(doctor_page.render_rules_markdown())"``.
"""

from ..host.doctor.rules import REMEDY_CLASSES, RULES
from ..host.doctor.texts import TORCH_ERROR_PATTERNS
from ..host.system.kmsg import KERNEL_LOG_PATTERNS


def _md(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_rules_markdown():
    """A reference page generated from the rules table and the kernel-log forms (for docs/)."""
    lines = ["# gpufleet doctor: finding codes", "",
             "Generated from `module_utils/gpufleet/host/doctor/rules.py`; do not edit by hand.", "",
             "Remedy classes: " + ", ".join("`%s`" % c for c in REMEDY_CLASSES) + ".", "",
             "| code | severity | remedy class | meaning | remedy | source |",
             "|---|---|---|---|---|---|"]
    for r in RULES:
        remedy_class = r["remedy_class"] + (" (%s)" % getattr(r["remedy_class_of"], "doc", "depends on the host")
                                            if r["remedy_class_of"] else "")
        lines.append("| `%s` | %s | %s | %s | %s | %s |" % (
            r["code"], r["severity"], remedy_class, _md(r["meaning"]), _md(r["remedy"]), _md(r["source"])))
    lines += ["", "## Recognised torch / CUDA error texts", "", "| text code | source |", "|---|---|"]
    for code, _pattern, source in TORCH_ERROR_PATTERNS:
        lines.append("| `%s` | %s |" % (code, _md(source)))
    return "\n".join(lines) + "\n\n" + kernel_log_patterns_markdown()


def kernel_log_patterns_markdown():
    """The message forms of ``KERNEL_LOG_PATTERNS`` as a Markdown section (for docs/doctor-rules.md)."""
    def cell(text):
        return "<br>".join("`%s`" % part.strip().replace("|", "\\|") for part in text.splitlines())

    lines = ["## Recognised kernel-log message forms", "",
             "Generated from `KERNEL_LOG_PATTERNS` in `module_utils/gpufleet/host/system/kmsg.py` "
             "(what `xid_79_fallen_off_bus` and the Xid rules count). The lines of the multi-line probe message "
             "may come with dmesg, journalctl or syslog prefixes and with other kernel lines between them; they make "
             "one Xid 79 event. The forms of one GPU falling off (Xid 79 line, `GPU ...: GPU has fallen off the "
             "bus.`, legacy `GPU at ...`, probe message) count once per boot.", "",
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
