# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shape of a host's evidence, as the judgement reads it: what a value must be, and what could not be read.

A host's result (playbooks/report.yml, runner_results.host_result) arrives as JSON from a box we do not control,
through the fact cache, AWX's artifacts or a hand-edited file. The judgement reads some of its fields; a field of
the wrong shape (``"ecc": "garbled"``, a GPU entry that is ``null``, ``"passed": "maybe"``) must never be read as
"nothing wrong". ``problems(result)`` lists, per part of the result, what could not be read, in words a renter can
act on ("GPU 0: ecc is 'garbled', not a table"); the report turns each part's problems into one finding of severity
``unknown`` (judgement/findings.py ``unreadable``), so such a host is never "keep": its action is "check access /
rerun" with the reason. ``clean_gpu_facts(facts)`` is a copy of the GPU facts with every value of the wrong shape
set to null (GPU entries that are not tables dropped), so the evidence that *can* be read still counts.

``SHAPES`` is the one table of what the judgement reads (tests/unit/test_evidence.py holds it against the fields
``facts.health`` and the report really read). A null is "not read on this host" and is allowed for any field;
an absent field likewise. Only the report (controller side) imports this module. Plain Python >= 3.8.
"""

import math

from .. import values as _values

# Kinds of value. A table is a JSON object, a list a JSON array.
TABLE, LIST, NUMBER, NUMERIC, FLAG, FLAGGY, TEXT = "table", "list", "number", "numeric", "flag", "flaggy", "text"

_KIND_WORDS = {
    TABLE: "a table", LIST: "a list", NUMBER: "a number", NUMERIC: "a number", FLAG: "true/false",
    FLAGGY: "true/false", TEXT: "text",
}
# Most problems named in one finding; the rest are counted.
MAX_SAID = 4


def _number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _numeric(value):
    """A number, or numeric text (a Jinja-templated value arrives as text)."""
    return _values.number_text(value) is not None


def _flaggy(value):
    """true/false, or text Ansible reads as one ("True", "no", "0")."""
    if isinstance(value, bool):
        return True
    return isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "1", "0")


_FITS = {
    TABLE: lambda v: isinstance(v, dict), LIST: lambda v: isinstance(v, list), NUMBER: _number,
    NUMERIC: _numeric, FLAG: lambda v: isinstance(v, bool), FLAGGY: _flaggy, TEXT: lambda v: isinstance(v, str),
}


def table(**fields):
    """A JSON object whose named fields have these shapes (other fields are not read)."""
    return (TABLE, fields)


def list_of(item):
    """A JSON array whose every item has this shape (a null item is a problem: an entry that says nothing)."""
    return (LIST, item)


_COUNTERS = NUMBER
GPU = table(
    index=NUMBER, name=TEXT, uuid=TEXT, pci_bus_id=TEXT, compute_capability=TEXT,
    memory_total_mib=NUMBER, memory_used_mib=NUMBER,
    temperature_c=NUMBER, power_draw_w=NUMBER, power_limit_w=NUMBER, power_default_limit_w=NUMBER,
    lost=FLAG, reset_required=FLAG, persistence_mode=FLAG,
    throttle_reasons=list_of(TEXT),
    pcie=table(gen_current=NUMBER, gen_max=NUMBER, width_current=NUMBER, width_max=NUMBER),
    clocks=table(sm_mhz=NUMBER, sm_max_mhz=NUMBER, mem_mhz=NUMBER, mem_max_mhz=NUMBER),
    applications_clocks=table(sm_mhz=NUMBER, sm_default_mhz=NUMBER),
    ecc=table(mode=TEXT, volatile_corrected=_COUNTERS, volatile_uncorrected=_COUNTERS,
              aggregate_corrected=_COUNTERS, aggregate_uncorrected=_COUNTERS),
    retired_pages=table(single_bit=_COUNTERS, double_bit=_COUNTERS, pending=FLAG),
    remapped_rows=table(correctable=_COUNTERS, uncorrectable=_COUNTERS, pending=FLAG, failure=FLAG),
    nvlink=table(links_active=NUMBER, links_total=NUMBER),
    spec=table(form_factor=TEXT, power_w=NUMBER, bf16_tflops=NUMBER),
)
HEALTH_FINDING = table(code=TEXT, severity=TEXT, message=TEXT)
XID_EVENT = table(xid=NUMBER, pci=TEXT, severity=TEXT, name=TEXT, text=TEXT)

# Per part of a result: the key it is under, how a problem there is named, and its shape.
SHAPES = {
    "run": table(reachable=FLAGGY, failed=FLAGGY, reason=TEXT, failed_in=TEXT, expected_gpu_count=NUMERIC),
    "facts": table(
        gpu_count=NUMBER, error=TEXT, error_code=TEXT, source=TEXT, gpus=list_of(GPU),
        health=table(status=TEXT, findings=list_of(HEALTH_FINDING)),
        xid=table(readable=FLAG, events=list_of(XID_EVENT), counts_by_pci=TABLE),
    ),
    "gate": list_of(table(test=TEXT, index=NUMBER, measured=NUMBER, expected=NUMBER, fraction_of_peak=NUMBER,
                          passed=FLAG, unit=TEXT)),
    "check": table(failed_step=NUMERIC, timed_out=FLAGGY, steps=TABLE, total_s=NUMERIC, deadline_s=NUMERIC,
                   torch_python=TEXT, environments=list_of(table(python=TEXT, kind=TEXT)), judged=TABLE,
                   probes=TABLE, probe_run=FLAGGY),
    "doctor": table(status=TEXT, findings=list_of(table(code=TEXT, severity=TEXT, fixable=FLAG, remedy_class=TEXT)),
                    remediation=TABLE),
}
# Where each part lies in a result ("run" is the result itself).
PART_KEYS = {"run": None, "facts": "gpu", "gate": "gate", "check": "check", "doctor": "doctor"}
# A health status outside these is a problem (facts.health's words).
HEALTH_STATUSES = ("ok", "degraded", "failed", "unknown")
# facts.health's severities that set a status other than ok.
FAULT_SEVERITIES = ("critical", "error", "warning", "unknown")


def shown(value, limit=40):
    """A value as a problem quotes it: 'garbled', null, a table, a list."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    text = repr(value) if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _where(path):
    """A path as a renter reads it: ['gpus', 0, 'ecc'] -> 'GPU 0: ecc'; ['gate', 2, 'passed'] -> 'entry 2: passed'."""
    words, i = [], 0
    while i < len(path):
        step = path[i]
        if step == "gpus" and i + 1 < len(path) and isinstance(path[i + 1], int):
            words.append(("GPU %d:" % path[i + 1]) if i + 2 < len(path) else "GPU entry %d" % path[i + 1])
            i += 2
            continue
        if isinstance(step, int):
            words.append(("entry %d:" % step) if i + 1 < len(path) else "entry %d" % step)
        else:
            words.append(str(step) if i + 1 == len(path) else "%s" % step)
        i += 1
    return " ".join(words).replace(": ", ": ", 1)


def _walk(value, shape, path, out):
    """Append (path, value, kind) for each value of the wrong shape under ``value``; return the value cleaned
    (wrong-shaped leaves -> None, list items of the wrong shape dropped)."""
    kind, inner = shape if isinstance(shape, tuple) else (shape, None)
    if value is None:
        return None
    if not _FITS[kind](value):
        out.append((path, value, kind))
        return None
    if kind == TABLE and inner:
        clean = dict(value)
        for key, sub in inner.items():
            if key in value:
                clean[key] = _walk(value[key], sub, path + [key], out)
        return clean
    if kind == LIST and inner is not None:
        clean = []
        for i, item in enumerate(value):
            if item is None:
                out.append((path + [i], item, inner[0] if isinstance(inner, tuple) else inner))
                continue
            got = _walk(item, inner, path + [i], out)
            if got is not None:
                clean.append(got)
        return clean
    return value


def _words(path, value, kind):
    return "%s is %s, not %s" % (_where(path) or "the record", shown(value), _KIND_WORDS[kind])


def check_part(part, value):
    """(the part cleaned, [problem texts]) of one part of a result (``SHAPES``)."""
    found = []
    clean = _walk(value, SHAPES[part], [], found)
    texts = [_words(path, bad, kind) for path, bad, kind in found]
    if part == "facts" and isinstance(clean, dict):
        texts.extend(_facts_agree(value, clean))
    if part == "run" and isinstance(clean, dict):
        texts.extend(_run_agrees(clean))
    return clean, texts


def _run_agrees(run):
    """A run record that says why the host dropped out (``reason``, ``failed_in``) but neither that it failed nor
    that it was unreachable: report.yml writes a reason only with one of them (or a host the provider lists as not
    ready, which is unreachable)."""
    said = [k for k in ("reason", "failed_in") if run.get(k)]
    reached = run.get("reachable") in (True, "true", "True", "yes")
    if said and reached and run.get("failed") in (None, False, "false", "False", "no"):
        return ["%s is given, but failed is %s and reachable %s" % (
            " and ".join(said), shown(run.get("failed")), shown(run.get("reachable")))]
    return []


def _facts_agree(facts, clean):
    """What the GPU facts say against themselves: a health status outside facts.health's words, fewer GPU entries
    than the count the same facts give (a GPU whose entry is missing is a GPU nobody judged)."""
    out = []
    health = _d(clean.get("health"))
    status = health.get("status")
    if status is not None and status not in HEALTH_STATUSES:
        out.append("health status is %s, not one of %s" % (shown(status), ", ".join(HEALTH_STATUSES)))
    faults = [f for f in health.get("findings") or () if _d(f).get("severity") in FAULT_SEVERITIES]
    if status in HEALTH_STATUSES and status != "ok" and not faults:
        out.append("health status is %s with no finding that says why" % status)
    count, listed = clean.get("gpu_count"), facts.get("gpus")
    if count is not None and not facts.get("error") and count > (len(listed) if isinstance(listed, list) else 0):
        out.append("gpus lists %d of the %d GPU(s) gpu_count gives" % (
            len(listed) if isinstance(listed, list) else 0, count))
    return out


_d = _values.as_dict


def problems(result):
    """{part: [problem texts]} of a result, parts with none left out (``SHAPES``, ``PART_KEYS``)."""
    out = {}
    if not isinstance(result, dict):
        return {"run": ["the result is %s, not a table" % shown(result)]}
    for part, key in PART_KEYS.items():
        value = result if key is None else result.get(key)
        if value is None:
            continue
        texts = check_part(part, value)[1]
        if texts:
            out[part] = texts
    return out


def clean_gpu_facts(facts):
    """The GPU facts with every value of the wrong shape set to null (``SHAPES["facts"]``)."""
    return check_part("facts", facts)[0] or {}


def summary(texts):
    """Problem texts as one line: the first MAX_SAID, then how many more."""
    said = "; ".join(texts[:MAX_SAID])
    return said if len(texts) <= MAX_SAID else "%s (+%d more)" % (said, len(texts) - MAX_SAID)
