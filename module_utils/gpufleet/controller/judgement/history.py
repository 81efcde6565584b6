"""GPU history on the controller: which boxes and GPUs the fleet had, across report runs (docs/history.md).

A rented box is known by three ids: the inventory's host name, the provider's rental id
(``provider_id``: vast.ai instance, RunPod pod, Lambda instance) and, where the provider tells it,
the physical machine (``provider_machine_id``: vast.ai ``machine_id``). Its GPUs are known by their
NVML UUIDs, which move with the board, not with the rental. The history keeps, per host, those ids
and the GPUs last read there; per GPU UUID, the hosts and machines it was seen on; and the boxes
whose verdict was "return to provider" (the known-bad list), so that the next report can say:

- ``gpu_swapped``: the host's GPU UUIDs changed since the last run (which left, which came);
- ``machine_changed``: the same rental now runs on another machine id;
- ``known_bad``: the host's machine id, rental or host name, or one of its GPU UUIDs, belongs to a
  box flagged "return to provider" in an earlier run (still rented, or returned and rented again), or
  is on the user's own known-bad file. Its verdict becomes "return to provider".

``load(path)`` never raises on a missing, truncated or corrupt file: a file it cannot use is moved
aside (``history.json.corrupt-<time>``) with a warning and a fresh history starts.
``load_known_bad(path)`` reads the user-kept file (never moved or rewritten by gpufleet).
``assess(history, hosts)`` gives each report host entry its findings and its checklist item.
``update(history, summary, now)`` records a finished report summary (never a --check run's) and
bounds the size (``LIMITS``: oldest entries dropped). ``save(path, history)`` writes it atomically
(temp file in the same folder, then rename). Plain Python >= 3.8, stdlib only.
"""

import copy
import datetime
import json
import os
import re
import tempfile

from .. import values as _values
from . import judge as _judge

SCHEMA = 1
FILE_NAME = "history.json"  # beside the run folders: <report root>/history.json
KNOWN_BAD_FILE = "known-bad.json"  # the user's own list, read from beside history.json unless given
RETURN = "return to provider"  # report.ACTION_RETURN (a test keeps them equal)

CHECK_KEY = "history"
CHECK_ITEM = (CHECK_KEY, "known-bad list / GPU swaps")  # the report's checklist item (key, label)

CODE_SWAPPED = "gpu_swapped"
CODE_MACHINE = "machine_changed"
CODE_KNOWN_BAD = "known_bad"
# A machine (or rental) whose storage or network the pre-check measured slow in an earlier run (issue 51): a warning
# with the date and the figures; this run's own measurement, where there is one, is what the verdict reads.
CODE_MEASURED_SLOW = "measured_slow_before"
SEVERITY = {CODE_SWAPPED: "warning", CODE_MACHINE: "warning", CODE_KNOWN_BAD: "error", CODE_MEASURED_SLOW: "warning"}
# The storage and network figures a host entry keeps (``box``: the report row's, judgement/box.py), and the findings
# that say "measured slow" (judge.BOX_SLOW_CODES).
BOX_FIGURES = (("disk", "rand_read_mb_s"), ("disk", "read_mb_s"), ("disk", "write_mb_s"), ("download", "mb_s"),
               ("upload", "mb_s"), ("torch_files", "total_s"))
# The judgement's code for a flag on the same rental (the box flagged before and still rented): present, more
# specific diagnoses outrank it (judgement.OUTRANKS).
CODE_FLAGGED_BEFORE = "flagged_before"

# How much evidence a run had of a host, least first: the GPU facts only (facts.yml), the doctor's diagnosis too.
# A flag recorded with less evidence than the present run has never escalates the present judgement: it is a note.
EVIDENCE_LEVELS = ("facts", "doctor")


def evidence_level(host):
    """The evidence level of a report host entry: "doctor" when the doctor's result is in it, else "facts"."""
    return "doctor" if isinstance(host.get("doctor"), dict) else "facts"


def _less_informed(flag_level, present_level):
    """True when a flag recorded at ``flag_level`` had less evidence than the present run (an unknown level, as in
    a history written before levels were recorded, counts as no less)."""
    if flag_level not in EVIDENCE_LEVELS or present_level not in EVIDENCE_LEVELS:
        return False
    return EVIDENCE_LEVELS.index(flag_level) < EVIDENCE_LEVELS.index(present_level)


# Size bounds: beyond these the entries seen (or flagged) longest ago are dropped. About 300 bytes per
# GPU and 500 per host: a full history stays under about 15 MB; a fleet of 500 8-GPU hosts uses about 1.5 MB.
LIMITS = {
    "hosts": 5000,      # host entries
    "gpus": 40000,      # GPU UUID entries
    "known_bad": 5000,  # boxes flagged "return to provider"
    "seen_on": 8,       # per GPU: the last hosts / machines it was seen on
    "reasons": 3,       # per host and known-bad box: the first reasons of its verdict
    "runs": 100,        # the runs' times and counts
}

# NVML UUIDs that say nothing: anonymised captures and some virtualised GPUs report all zeros. They must never
# tie two boxes together (every such GPU would be "the same GPU").
_PLACEHOLDER = re.compile(r"^(?:GPU-|MIG-)?[0-]*$", re.I)


class HistoryError(Exception):
    """The history cannot be written (save)."""


# ----------------------------------------------------------------------------- small helpers
def _now_iso(now=None):
    if isinstance(now, str) and now:
        return now
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.timezone.utc)
    return now.astimezone(datetime.timezone.utc).replace(microsecond=0).isoformat()  # as report.generated_at


def _text(value):
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


_list = _values.as_list
_dict = _values.as_dict


def _ident(value):
    """An id as text (inventories give numbers or text), None when absent or empty."""
    if value is None or isinstance(value, (bool, dict, list)):
        return None
    value = str(value).strip()
    return value or None


def real_uuid(value):
    """The GPU UUID as text, or None for an absent, 'N/A' or all-zero (anonymised) one."""
    value = _ident(value)
    if value is None or "N/A" in value.upper() or _PLACEHOLDER.match(value):
        return None
    return value


def _gpus_of(entry):
    """[{uuid, name, serial, pci_bus_id}] of a report host entry's GPU rows, real UUIDs only."""
    out = []
    seen = set()
    for g in entry.get("gpus") or ():
        if not isinstance(g, dict):
            continue
        uuid = real_uuid(g.get("uuid"))
        if uuid is None or uuid in seen:
            continue
        seen.add(uuid)
        out.append({"uuid": uuid, "name": _ident(g.get("name")), "serial": _ident(g.get("serial")),
                    "pci_bus_id": _ident(g.get("pci_bus_id"))})
    return out


def _gpu_text(g):
    parts = [x for x in (g.get("name"), "serial %s" % g["serial"] if g.get("serial") else None) if x]
    return "%s (%s)" % (g["uuid"], ", ".join(parts)) if parts else g["uuid"]


def _rental_key(provider, provider_id, host):
    """The rental: the provider's id where there is one, else the inventory's host name."""
    if provider_id is not None:
        return "rental:%s:%s" % (provider or "", provider_id)
    return "host:%s" % host


def _machine_key(provider, machine_id):
    return "machine:%s:%s" % (provider or "", machine_id)


def _box_text(e):
    """'host h (vastai 1005, machine 50005)' of a host or known-bad entry."""
    ids = []
    if e.get("provider_id") is not None:
        ids.append("%s %s" % (e.get("provider") or "provider id", e["provider_id"]))
    if e.get("machine_id") is not None:
        ids.append("machine %s" % e["machine_id"])
    return "host %s%s" % (e.get("host"), " (%s)" % ", ".join(ids) if ids else "")


def _day(iso):
    return _text(iso)[:16].replace("T", " ") or "an earlier run"


# ----------------------------------------------------------------------------- load / save
def empty():
    """A history with nothing in it."""
    return {"schema": SCHEMA, "updated_at": None, "runs": [], "hosts": {}, "gpus": {}, "known_bad": {}}


def _move_aside(path, now):
    now = now if isinstance(now, datetime.datetime) else datetime.datetime.now(datetime.timezone.utc)
    stamp = now.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = "%s.corrupt-%s" % (path, stamp)
    try:
        os.replace(path, aside)
    except OSError as exc:
        return "it could not be moved aside (%s) and will be replaced" % exc
    return "moved aside to %s" % aside


def _clean(data):
    """Keep the well-formed parts of a parsed history; (history, number of entries dropped)."""
    out = empty()
    dropped = 0
    out["updated_at"] = data.get("updated_at") if isinstance(data.get("updated_at"), str) else None
    runs = data.get("runs")
    if isinstance(runs, list):
        out["runs"] = [r for r in runs if isinstance(r, dict)]
        dropped += len(runs) - len(out["runs"])
    elif runs is not None:
        dropped += 1
    for section in ("hosts", "gpus", "known_bad"):
        part = data.get(section)
        if part is None:
            continue
        if not isinstance(part, dict):
            dropped += 1
            continue
        for key, entry in part.items():
            if isinstance(entry, dict):
                out[section][key] = entry
            else:
                dropped += 1
    return out, dropped


def load(path, now=None):
    """(history, warnings) from ``path``. A missing file is a fresh history, no warning. A file that is not a
    JSON object of this schema is moved aside with a warning and a fresh history starts; malformed entries
    in a usable file are dropped with a warning. Never raises."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return empty(), []
    except OSError as exc:
        return empty(), ["GPU history %s cannot be read (%s): this report uses none" % (path, exc)]
    try:
        data = json.loads(raw.decode("utf-8"))
        problem = None
        if not isinstance(data, dict):
            problem = "not a JSON object"
        elif data.get("schema") != SCHEMA:
            problem = "schema %r, this gpufleet reads %d" % (data.get("schema"), SCHEMA)
    except (UnicodeDecodeError, ValueError) as exc:
        problem = "not valid JSON: %s" % exc
    if problem is not None:
        return empty(), ["GPU history %s is not usable (%s): %s; a fresh history starts with this run" % (
            path, problem, _move_aside(path, now))]
    history, dropped = _clean(data)
    warnings = []
    if dropped:
        warnings.append("GPU history %s: %d malformed entr%s dropped" % (path, dropped, "y" if dropped == 1 else "ies"))
    return history, warnings


def save(path, history):
    """Write ``history`` as JSON atomically: a temp file in the same folder, fsync, rename over ``path``.
    Transient keys (``_...``: the user's known-bad entries, load warnings) are not written. Raises
    HistoryError with the reason when it cannot."""
    data = {k: v for k, v in history.items() if not str(k).startswith("_")}
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".history-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True, separators=(",", ":"))
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o640)
        os.replace(tmp, path)
        tmp = None
    except (OSError, TypeError, ValueError) as exc:
        raise HistoryError("cannot write the GPU history %s: %s" % (path, exc)) from exc
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


# ----------------------------------------------------------------------------- the user's known-bad file
def _user_entry(kind, item, source):
    """One entry of the user's file as (key, entry); None when it names nothing."""
    if not isinstance(item, dict):
        item = {"id": item}
    why = _text(item.get("why") or item.get("note")) or "no reason given"
    if kind == "machines":
        mid = _ident(item.get("machine_id", item.get("id")))
        if mid is None:
            return None
        provider = _ident(item.get("provider"))
        return _machine_key(provider or "*", mid), {"kind": "machine", "provider": provider, "machine_id": mid,
                                                    "why": why, "source": source}
    if kind == "gpus":
        uuid = real_uuid(item.get("uuid", item.get("id")))
        return None if uuid is None else ("gpu:%s" % uuid, {"kind": "gpu", "uuid": uuid, "why": why,
                                                            "source": source})
    if kind == "hosts":
        host = _ident(item.get("host", item.get("id")))
        return None if host is None else ("host:%s" % host, {"kind": "host", "host": host, "why": why,
                                                             "source": source})
    return None


def load_known_bad(path):
    """(entries, warnings) from the user's known-bad file, a JSON object (docs/history.md)::

        {"machines": [{"provider": "vastai", "machine_id": "50005", "why": "Xid 79 twice"}, "61234"],
         "gpus": [{"uuid": "GPU-3c1f7a52-...", "why": "ECC"}], "hosts": ["box-7"]}

    A machine without a provider matches that machine id at any provider. ``entries`` maps match keys to
    entries. A missing file is an empty list; an unusable one is a warning (the user's file is never moved)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}, []
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return {}, ["known-bad file %s is not usable (%s): not used in this report" % (path, exc)]
    if not isinstance(data, dict):
        return {}, ["known-bad file %s is not a JSON object with machines / gpus / hosts lists: not used" % path]
    entries = {}
    skipped = 0
    unknown = sorted(k for k in data if k not in ("machines", "gpus", "hosts") and not str(k).startswith("_"))
    for kind in ("machines", "gpus", "hosts"):
        items = data.get(kind) or []
        if not isinstance(items, list):
            skipped += 1
            continue
        for item in items:
            found = _user_entry(kind, item, path)
            if found is None:
                skipped += 1
            else:
                entries[found[0]] = found[1]
    warnings = []
    if skipped:
        warnings.append("known-bad file %s: %d entr%s naming nothing usable skipped" % (
            path, skipped, "y" if skipped == 1 else "ies"))
    if unknown:
        warnings.append("known-bad file %s: unknown keys %s ignored (it reads machines, gpus, hosts)" % (
            path, ", ".join(unknown)))
    return entries, warnings


def with_known_bad(history, entries, warnings=()):
    """The history with the user's known-bad entries and the load warnings attached (not saved)."""
    out = dict(history)
    out["_known_bad"] = dict(entries or {})
    out["_warnings"] = list(history.get("_warnings") or ()) + list(warnings)
    return out


# ----------------------------------------------------------------------------- findings
def _bad_index(history):
    """{match key: (kind, entry)} over the boxes flagged in earlier runs and the user's list."""
    index = {}
    for entry in (history.get("known_bad") or {}).values():
        if not isinstance(entry, dict):
            continue
        keys = [_rental_key(entry.get("provider"), _ident(entry.get("provider_id")), entry.get("host"))]
        if _ident(entry.get("machine_id")) is not None:
            keys.append(_machine_key(entry.get("provider"), _ident(entry["machine_id"])))
        keys += ["gpu:%s" % u for u in (real_uuid(x) for x in _list(entry.get("gpus"))) if u]
        for key in keys:
            index.setdefault(key, ("report", entry))
    for key, entry in (history.get("_known_bad") or {}).items():
        index.setdefault(key, ("user", entry))
    return index


def _finding(code, message, **extra):
    f = {"code": code, "severity": SEVERITY[code], "message": message,
         "action": RETURN if code == CODE_KNOWN_BAD else None}
    f.update(extra)
    return f


def _swap_findings(prev, entry, gpus, machine_id):
    out = []
    before = [dict(g, uuid=real_uuid(g.get("uuid"))) for g in _list(prev.get("gpus"))
              if isinstance(g, dict) and real_uuid(g.get("uuid"))]
    if before and gpus:
        was = {g["uuid"] for g in before}
        now = {g["uuid"] for g in gpus}
        left = [g for g in before if g["uuid"] not in now]
        came = [g for g in gpus if g["uuid"] not in was]
        if left or came:
            parts = []
            if left:
                parts.append("gone %s" % ", ".join(_gpu_text(g) for g in left))
            if came:
                parts.append("new %s" % ", ".join(_gpu_text(g) for g in came))
            out.append(_finding(CODE_SWAPPED, "GPU swapped since the last run (%s): %s" % (
                _day(prev.get("gpus_seen_at")), "; ".join(parts)),
                left=[g["uuid"] for g in left], came=[g["uuid"] for g in came], since=prev.get("gpus_seen_at")))
    was_machine = _ident(prev.get("machine_id"))
    if (was_machine is not None and machine_id is not None and was_machine != machine_id
            and prev.get("provider") == entry.get("provider")):
        out.append(_finding(CODE_MACHINE, "the provider's machine id changed since the last run (%s): %s, was %s" % (
            _day(prev.get("last_seen")), machine_id, was_machine), since=prev.get("last_seen")))
    return out


def _match_text(key):
    kind, _sep, rest = key.partition(":")
    if kind == "machine":
        return "machine %s" % rest.split(":", 1)[-1]
    if kind == "gpu":
        return rest if rest.upper().startswith(("GPU-", "MIG-")) else "GPU %s" % rest
    if kind == "host":
        return "host name %s" % rest
    return "%s id %s" % tuple(rest.split(":", 1)) if ":" in rest else rest


def _known_bad_findings(index, entry, gpus, machine_id, rental, level=None):
    keys = [rental] if rental.startswith("host:") else [rental, "host:%s" % entry["host"]]  # the user's host names
    if machine_id is not None:
        keys += [_machine_key(entry.get("provider"), machine_id), _machine_key("*", machine_id)]
    keys += ["gpu:%s" % g["uuid"] for g in gpus]
    matched = {}  # id(entry) -> [source, entry, keys]
    for key in keys:
        hit = index.get(key)
        if hit is not None:
            matched.setdefault(id(hit[1]), [hit[0], hit[1], []])[2].append(key)
    out = []
    for source, bad, keys in matched.values():
        what = ", ".join(_match_text(k) for k in keys)
        if source == "user":
            text = "on the known-bad list %s: %s (%s)" % (bad.get("source"), what, bad.get("why"))
            out.append(_finding(CODE_KNOWN_BAD, text, matched=keys, source="known-bad file"))
            continue
        reason = "; ".join(_text(r) for r in _list(bad.get("reasons"))[:1]) or "no reason recorded"
        same = _rental_key(bad.get("provider"), _ident(bad.get("provider_id")), bad.get("host")) == rental
        weaker = same and _less_informed(bad.get("evidence"), level)
        if weaker:
            # A judgement on less evidence than this run has (facts only, before the doctor ran): informs, never
            # overrides the present diagnosis.
            message = "flagged 'return to provider' on %s by a run with the GPU facts only (%s); this run's " \
                      "diagnosis stands" % (_day(bad.get("last_flagged_at") or bad.get("flagged_at")), reason)
        elif same:
            since = _day(bad.get("flagged_at"))
            message = "flagged 'return to provider' since %s and not given back: %s" % (since, reason)
        else:
            message = "returned before: %s was on %s, flagged 'return to provider' on %s: %s" % (
                what, _box_text(bad), _day(bad.get("last_flagged_at") or bad.get("flagged_at")), reason)
        found = _finding(CODE_KNOWN_BAD, message, matched=keys, source="history", same_rental=same,
                         since=bad.get("flagged_at"), was_host=bad.get("host"), flag_evidence=bad.get("evidence"))
        if weaker:
            found.update(severity="info", action=None)
        out.append(found)
    return out


def _box_record(h, at):
    """What a host entry keeps of a report row's storage and network (``box``): when, the figures, and the lines of
    the findings that say it measured slow (judge.BOX_SLOW_CODES); None for a row without that evidence."""
    box = h.get("box")
    if not isinstance(box, dict):
        return None
    figures = {}
    for part, key in BOX_FIGURES:
        value = _values.number(_dict(box.get(part)).get(key))
        if value is not None:
            figures["%s_%s" % (part, key)] = value
    listing = {k: v for k, v in _dict(box.get("listing")).items() if v is not None}
    slow = [_text(f.get("text")) for f in _list(h.get("judgement"))
            if isinstance(f, dict) and f.get("code") in _judge.BOX_SLOW_CODES and not f.get("outranked_by")]
    return {"measured_at": at, "data_path": box.get("data_path"), "fstype": box.get("fstype"), "figures": figures,
            "listing": listing, "slow": slow[:LIMITS["reasons"]]}


def _slow_index(known):
    """{rental or machine key: host entry} of the hosts whose last storage and network record measured slow."""
    index = {}
    for entry in known.values():
        if not isinstance(entry, dict) or not _list(_dict(entry.get("box")).get("slow")):
            continue
        index.setdefault(_rental_key(entry.get("provider"), _ident(entry.get("provider_id")), entry.get("host")),
                         entry)
        if _ident(entry.get("machine_id")) is not None:
            index.setdefault(_machine_key(entry.get("provider"), _ident(entry["machine_id"])), entry)
    return index


def _slow_findings(index, h, machine_id, rental):
    """"measured slow on <date>: ..." for a host whose machine (another rental) or own rental measured slow in an
    earlier run. The same rental's earlier figures are said only when this run measured nothing of its own: a fresh
    measurement is the evidence then."""
    own = isinstance(h.get("box"), dict)
    seen, out = set(), []
    keys = [rental] + ([_machine_key(h.get("provider"), machine_id)] if machine_id is not None else [])
    for key in keys:
        entry = index.get(key)
        if entry is None or id(entry) in seen:
            continue
        seen.add(id(entry))
        same = _rental_key(entry.get("provider"), _ident(entry.get("provider_id")), entry.get("host")) == rental
        if same and own:
            continue
        box = _dict(entry.get("box"))
        where = "" if same else " on %s" % _box_text({"host": entry.get("host"), "provider": entry.get("provider"),
                                                      "provider_id": _ident(entry.get("provider_id")),
                                                      "machine_id": _ident(entry.get("machine_id"))})
        message = "measured slow on %s%s: %s" % (_day(box.get("measured_at")), where,
                                                 "; ".join(_text(s) for s in _list(box.get("slow"))))
        out.append(_finding(CODE_MEASURED_SLOW, message, matched=[key], since=box.get("measured_at"),
                            was_host=entry.get("host"), figures=_dict(box.get("figures"))))
    return out


def _not_kept():
    reason = "no GPU history given to the report (scripts/fleet-report --history; playbooks/report.yml passes it)"
    return {"status": "unknown", "summary": "no GPU history kept", "reason": reason}


def _check(findings, prev, gpus, action):
    bad = [f for f in findings if f["code"] == CODE_KNOWN_BAD and f.get("action") == RETURN]
    if bad:
        return {"status": "fail", "summary": "; ".join(f["message"] for f in bad), "reason": None}
    if action == RETURN:
        # So the item reads the same in the run that flags a box and in the runs after it.
        return {"status": "fail", "summary": "to be returned: goes on the known-bad list for later runs",
                "reason": None}
    if findings:
        return {"status": "warn", "summary": "; ".join(f["message"] for f in findings), "reason": None}
    if not prev:
        return {"status": "ok", "summary": "first seen in this run; not on the known-bad list", "reason": None}
    if not gpus:
        return {"status": "unknown" if prev.get("gpus") else "ok",
                "summary": "not on the known-bad list; first seen %s" % _day(prev.get("first_seen")),
                "reason": "no GPU UUID read in this run: swaps not checked" if prev.get("gpus") else None}
    return {"status": "ok", "summary": "same %d GPU(s) as in the last run; first seen %s; not on the known-bad list"
                                       % (len(gpus), _day(prev.get("first_seen"))), "reason": None}


def assess(history, hosts):
    """[(host entry, {"findings": [...], "check": checklist item})] for the report's host entries (report/model.py
    ``_host_entry`` rows, with their status and action). ``history`` None: kept by no one, every item
    "unknown". Reads only; the caller applies the findings."""
    if history is None:
        return [(h, {"findings": [], "check": _not_kept()}) for h in hosts]
    index = _bad_index(history)
    known = history.get("hosts") or {}
    slow = _slow_index(known)
    out = []
    for h in hosts:
        try:
            name = str(h.get("host"))
            prev = known.get(name) if isinstance(known.get(name), dict) else {}
            gpus = _gpus_of(h)
            machine_id = _ident(h.get("provider_machine_id"))
            rental = _rental_key(h.get("provider"), _ident(h.get("provider_id")), name)
            findings = _swap_findings(prev, h, gpus, machine_id) if prev else []
            findings += _known_bad_findings(index, {"host": name, "provider": h.get("provider"),
                                                    "provider_id": _ident(h.get("provider_id"))},
                                            gpus, machine_id, rental, evidence_level(h))
            findings += _slow_findings(slow, h, machine_id, rental)
            out.append((h, {"findings": findings, "check": _check(findings, prev, gpus, h.get("action"))}))
        except Exception as exc:  # defensive: odd history data must not sink the fleet report
            reason = "GPU history could not be read for this host: %r" % exc
            out.append((h, {"findings": [], "check": {"status": "unknown", "summary": reason, "reason": reason}}))
    return out


def overview(history):
    """The report's top-level ``history`` block: whether one is kept, its size, the previous run, warnings."""
    if history is None:
        return {"kept": False, "previous_run": None, "runs": 0, "hosts": 0, "gpus": 0, "known_bad": 0,
                "known_bad_listed": 0, "warnings": []}
    runs = [r for r in _list(history.get("runs")) if isinstance(r, dict)]
    return {"kept": True, "previous_run": runs[-1].get("at") if runs else None, "runs": len(runs),
            "hosts": len(history.get("hosts") or {}), "gpus": len(history.get("gpus") or {}),
            "known_bad": len(history.get("known_bad") or {}), "known_bad_listed": len(history.get("_known_bad") or {}),
            "warnings": [str(w) for w in history.get("_warnings") or ()]}


# ----------------------------------------------------------------------------- update
def _bound(section, limit, stamp):
    """Drop the entries with the oldest ``stamp`` beyond ``limit``."""
    if len(section) <= limit:
        return section
    ranked = sorted(section.items(), key=lambda kv: (_text(kv[1].get(stamp)), kv[0]), reverse=True)
    return dict(ranked[:limit])


def update(history, summary, now=None, limits=None):
    """A new history: ``history`` plus the report ``summary`` of this run (report.summarize output). Per host:
    provider, provider_id, machine_id, GPUs (uuid, name, serial, PCI bus id), first/last seen, last status,
    action and reasons; per GPU UUID the hosts and machines it was seen on; the boxes whose action is
    "return to provider" join the known-bad list. A --check run's summary (a plan) is not recorded.
    ``limits`` overrides ``LIMITS`` keys. ``history`` is not changed."""
    lim = dict(LIMITS, **(limits or {}))
    new = copy.deepcopy({k: v for k, v in (history or empty()).items() if not str(k).startswith("_")})
    for section in ("hosts", "gpus", "known_bad"):
        if not isinstance(new.get(section), dict):
            new[section] = {}
    if not isinstance(new.get("runs"), list):
        new["runs"] = []
    new["schema"] = SCHEMA
    if summary.get("check_mode"):
        return new
    at = _now_iso(now or summary.get("generated_at"))
    hosts, gpus_seen, bad = new["hosts"], new["gpus"], new["known_bad"]
    returned = 0
    for h in summary.get("hosts") or ():
        if not isinstance(h, dict):
            continue
        name = str(h.get("host"))
        prev = _dict(hosts.get(name))
        provider, provider_id = h.get("provider"), _ident(h.get("provider_id"))
        # A machine id the inventory gave once stays with the same rental.
        machine_id = _ident(h.get("provider_machine_id")) or (
            _ident(prev.get("machine_id")) if provider_id == _ident(prev.get("provider_id")) else None)
        reasons = [_text(r) for r in h.get("reasons") or () if not _text(r).startswith("history: ")]
        gpus = _gpus_of(h)
        entry = {"host": name, "provider": provider, "provider_id": provider_id, "machine_id": machine_id,
                 "first_seen": prev.get("first_seen") or at, "last_seen": at, "last_status": h.get("status"),
                 "last_action": h.get("action"), "last_reasons": reasons[:lim["reasons"]],
                 "gpus": gpus or _list(prev.get("gpus")), "gpus_seen_at": at if gpus else prev.get("gpus_seen_at")}
        box = _box_record(h, at) or (_dict(prev.get("box")) if provider_id == _ident(prev.get("provider_id")) else None)
        if box:
            entry["box"] = box
        hosts[name] = entry
        where = {"host": name, "provider": provider, "provider_id": provider_id, "machine_id": machine_id,
                 "last_seen": at}
        for g in gpus:
            seen = _dict(gpus_seen.get(g["uuid"]))
            on = [w for w in _list(seen.get("seen_on")) if isinstance(w, dict) and (
                w.get("host"), w.get("provider_id"), w.get("machine_id")) != (name, provider_id, machine_id)]
            gpus_seen[g["uuid"]] = {"uuid": g["uuid"], "name": g["name"], "serial": g["serial"],
                                    "first_seen": seen.get("first_seen") or at, "last_seen": at,
                                    "seen_on": ([where] + on)[:lim["seen_on"]]}
        if h.get("action") == RETURN:
            returned += 1
            key = _rental_key(provider, provider_id, name)
            was = _dict(bad.get(key))
            own = reasons or [_text(r) for r in h.get("reasons") or ()]
            bad[key] = {"host": name, "provider": provider, "provider_id": provider_id, "machine_id": machine_id,
                        "gpus": [g["uuid"] for g in entry["gpus"] if isinstance(g, dict) and real_uuid(g.get("uuid"))],
                        "status": h.get("status"), "evidence": evidence_level(h),
                        "flagged_at": was.get("flagged_at") or at, "last_flagged_at": at,
                        "reasons": own[:lim["reasons"]] or _list(was.get("reasons"))}
    new["runs"] = (new["runs"] + [{"at": at, "hosts": len(summary.get("hosts") or ()), "returned": returned}])[
        -lim["runs"]:] if lim["runs"] else []
    new["hosts"] = _bound(hosts, lim["hosts"], "last_seen")
    new["gpus"] = _bound(gpus_seen, lim["gpus"], "last_seen")
    new["known_bad"] = _bound(bad, lim["known_bad"], "last_flagged_at")
    new["updated_at"] = at
    return new
