"""Fleet-report input from ansible-runner artifacts: the report of a finished job, built outside any play.

AWX keeps what a job left behind (its events and, with fact storage on, each host's facts), not the
run's hostvars; job slicing splits one run into several jobs over disjoint parts of the inventory.
This module turns the artifact folders of one job or of several sliced jobs
(``<private_data_dir>/artifacts/<ident>/``: ``job_events/<n>-<uuid>.json``, ``fact_cache/<host>``,
``status``; ansible-runner ``docs/intro.rst``) into the per-host result objects that
``playbooks/report.yml`` writes, so ``report.summarize_folder`` renders them the same way:

- a host's facts: ``ansible_facts`` of its ``runner_on_ok`` events in order, then its fact cache file
  (complete, never blanked: runner empties an event's ``res`` over ``MAX_EVENT_RES`` characters; read in
  ansible-core 2.19's ``s1_<host>`` format too, which runner 2.4's ``get_fact_cache`` misses);
  the ``ansible_`` prefix is dropped as Ansible does for ``hostvars[host].ansible_facts``;
- why a host dropped out: its first ``runner_on_unreachable`` or ``runner_on_failed`` event that
  callback_plugins/gpufleet_status.py would have recorded (same play, task and message), checked
  against the job's final ``playbook_on_stats``;
- the inventory's side (provider, price, simulated, expected GPU count, readiness) from an
  ``ansible-inventory --list`` JSON (AWX: ``/api/v2/inventories/N/script/?hostvars=1``): only the
  ``gpufleet_*`` variables report.yml reads are taken, never any other host variable.

What a result carries, and where each key comes from, is one table, ``RESULT_FIELDS``: report.yml writes the
same keys from the same sources (a unit test holds the two together), the pre-check's record (``check``) and
where a host dropped out (``failed_in``) included.

Several jobs merge by host; a host found in two jobs keeps the result of the job that started later,
with a warning. A fact cache file of a host that ran no task in the job is ignored: AWX seeds a job's
cache with stored facts, which say nothing about this run. Plain Python >= 3.8, stdlib only.
"""

import datetime
import json
import os
import re

from . import report as _report
from . import values as _values

# The events that name a host's result; a host with none of them (and not in the job's recap) did not run.
HOST_EVENTS = frozenset([
    "runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped", "runner_on_async_ok",
    "runner_on_async_failed", "runner_item_on_ok", "runner_item_on_failed", "runner_item_on_skipped",
    "runner_on_start", "runner_retry",
])
# The host counters of playbook_on_stats (its other keys, such as set_stats' artifact_data, name no hosts).
RECAP_KEYS = ("ok", "changed", "dark", "failures", "skipped", "rescued", "ignored", "processed")
# The report play itself runs on the controller: never a fleet host (report.yml drops it too).
CONTROLLER = "localhost"
# callback_plugins/gpufleet_status.py's cut of a failure message (tests/unit/test_runner_results.py
# checks the two agree).
MAX_MESSAGE = 600
NO_MESSAGE = "failed without a message"
# What ansible-core 2.19 puts before a failure's cause, dropped by the callback (the same pattern, checked by the test).
ANSIBLE_PREFIX = re.compile(r"^(?:(?:Task|Action|Module) failed: )+")
NOT_IN_JOBS = _report.NOT_REACHED


class RunnerArtifactsError(Exception):
    """An artifact folder or inventory file cannot be used (missing, not JSON, no job in it)."""


# --------------------------------------------------------------------------- small helpers
_d = _values.as_dict


def ansible_bool(value):
    """``value | bool`` as Ansible 2.19's filter reads it: yes/on/true/1 (any case) and 1 are true,
    no/off/false/0 false, anything else true only if it equals 1."""
    check = value
    if isinstance(value, str):
        check = value.lower()
    elif isinstance(value, int):  # bool is an int too
        check = str(value).lower()
    try:
        if check in ("yes", "on", "true", "1"):
            return True
        if check in ("no", "off", "false", "0"):
            return False
        return check == 1
    except TypeError:  # an unhashable value
        return False


def namespace_facts(facts):
    """A module's or the cache's facts as ``hostvars[host].ansible_facts`` shows them: ``ansible_x`` -> ``x``."""
    out = {}
    for key, value in _d(facts).items():
        if isinstance(key, str) and key.startswith("ansible_") and key != "ansible_local":
            out[key[len("ansible_"):]] = value
        else:
            out[key] = value
    return out


def failure_message(res):
    """The reason text callback_plugins/gpufleet_status.py records for a failed or unreachable result."""
    res = _d(res)
    msg = res.get("msg") or res.get("stderr") or res.get("reason") or ""
    results = res.get("results")
    if results and (not msg or msg == "One or more items failed"):  # a loop: each item's own message
        msgs = [r.get("msg", "") for r in results if isinstance(r, dict) and r.get("failed")]
        msg = "; ".join(m for m in msgs if m) or msg
    # ansible-core 2.19 puts "Task failed: " (and "Action failed: ") before the cause; the callback drops it.
    return ANSIBLE_PREFIX.sub("", str(msg).strip())[:MAX_MESSAGE] or NO_MESSAGE


def task_name(event_data):
    """The task's name as Ansible's ``Task.get_name()`` gives it ("role : task" inside a role), from an
    event's data (runner records the bare name, the role and, when it differs, the role's full name)."""
    data = _d(event_data)
    name = data.get("task") or data.get("task_action") or ""
    role = data.get("resolved_role") or data.get("role")
    return "%s : %s" % (role, name) if role else name


def _time(text):
    """An event's ``created`` as an aware datetime (runner writes UTC), or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def _iso(when):
    return when.isoformat() if when is not None else None


# --------------------------------------------------------------------------- one job
def job_summary(events, fact_cache=None, name=None):
    """What one job says of each host, from its events (in order) and its fact cache ``{host: facts}``.

    Returns ``{"name", "started", "finished", "complete", "hosts": {host: {"facts", "dropped",
    "last_event_at"}}}``: ``complete`` is False when the job has no final ``playbook_on_stats`` (it
    was cut off); ``dropped`` is None or ``{"state": "failed"|"unreachable", "play", "task", "reason"}``.
    """
    hosts = {}
    started = finished = stats = None
    candidates = {}  # host: its failed / unreachable events in order, judged once the recap is known

    def host_entry(host):
        return hosts.setdefault(host, {"facts": {}, "dropped": None, "last_event_at": None})

    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        data = _d(event.get("event_data"))
        created = _time(event.get("created"))
        if kind == "playbook_on_start" and started is None:
            started = created
        elif kind == "playbook_on_stats":
            stats, finished = data, created
        host = data.get("host")
        if kind not in HOST_EVENTS or not isinstance(host, str) or not host or host == CONTROLLER:
            continue
        entry = host_entry(host)
        if created is not None:
            entry["last_event_at"] = created
        res = _d(data.get("res"))
        if kind == "runner_on_ok" and isinstance(res.get("ansible_facts"), dict):
            entry["facts"].update(namespace_facts(res["ansible_facts"]))
        elif (kind == "runner_on_failed" and not data.get("ignore_errors")) or kind == "runner_on_unreachable":
            state = "failed" if kind == "runner_on_failed" else "unreachable"
            candidates.setdefault(host, []).append(_dropped(state, data, res))

    dark = _d(_d(stats).get("dark"))
    for host, found in candidates.items():
        # The first reason is the one that matters (as the callback keeps it). An unreachable event
        # counts only if the recap says so: a task with ignore_unreachable leaves the host in the run.
        for dropped in found:
            if dropped["state"] == "failed" or stats is None or dark.get(host):
                hosts[host]["dropped"] = dropped
                break
    if stats is not None:
        for state, counts in (("unreachable", dark), ("failed", _d(stats.get("failures")))):
            for host, count in counts.items():  # the recap's word, where no event was recorded
                if count and host != CONTROLLER and host_entry(host)["dropped"] is None:
                    hosts[host]["dropped"] = {"state": state, "play": None, "task": None,
                                              "reason": "%s (no event recorded)" % state}
        for key in RECAP_KEYS:  # every host of the recap ran in this job
            for host in _d(stats.get(key)):
                if isinstance(host, str) and host and host != CONTROLLER:
                    host_entry(host)

    for host, facts in _d(fact_cache).items():
        if host in hosts and isinstance(facts, dict):
            hosts[host]["facts"].update(namespace_facts(facts))
    return {"name": name, "started": started, "finished": finished, "complete": stats is not None,
            "hosts": hosts}


def _dropped(state, data, res):
    return {"state": state, "play": data.get("play"), "task": task_name(data), "reason": failure_message(res)}


# --------------------------------------------------------------------------- what a result carries
# Where a result key comes from: a fact of the host (``hostvars[host].ansible_facts[name]``), an inventory
# variable (null where unset), an inventory flag (read with ``| bool``, false where unset), or the run itself
# (reachability, why and where the host dropped out, the host's name, the time: computed in ``host_result``).
FACT, INVENTORY, FLAG, RUN = "fact", "inventory", "flag", "run"
# The keys of one host result, in the order report.yml writes them, each with its source: the one list of what a
# result carries. playbooks/report.yml's task "Write the hosts' results" writes the same keys from the same
# sources (tests/unit/test_runner_results.py reads its template and compares), so a key added to one and not the
# other fails a test, and the report of a job reads the same whether report.yml or fleet-report
# --runner-artifacts built it.
RESULT_FIELDS = (
    ("host", RUN, None),
    ("reachable", RUN, None),
    ("failed", RUN, None),
    ("reason", RUN, None),
    ("failed_in", RUN, None),  # "<play> / <task>" of the record that dropped the host, as the callback kept it
    ("provider", INVENTORY, "gpufleet_provider"),
    ("provider_id", INVENTORY, "gpufleet_provider_id"),
    ("provider_machine_id", INVENTORY, "gpufleet_provider_machine_id"),
    ("provider_readiness", INVENTORY, "gpufleet_readiness"),
    ("price_per_hour", INVENTORY, "gpufleet_price_per_hour"),
    ("simulated", FLAG, "gpufleet_simulated"),
    ("expected_gpu_count", INVENTORY, "gpufleet_expected_gpu_count"),
    # The provider's listing of what is rented beside the GPU (docs/inventories.md; judgement/box.py holds the
    # pre-check's storage and network against it): disk read MB/s, network down and up Mbit/s, disk GB, whose figures.
    ("listing_disk_read_mb_s", INVENTORY, "gpufleet_listing_disk_read_mb_s"),
    ("listing_net_down_mbit", INVENTORY, "gpufleet_listing_net_down_mbit"),
    ("listing_net_up_mbit", INVENTORY, "gpufleet_listing_net_up_mbit"),
    ("listing_disk_gb", INVENTORY, "gpufleet_listing_disk_gb"),
    ("listing_source", INVENTORY, "gpufleet_listing_source"),
    ("gpu", FACT, "gpu"),
    ("gate", FACT, "gpu_gate"),
    ("doctor", FACT, "gpu_doctor"),
    ("check", FACT, "gpu_check"),  # the pre-check's record (playbooks/check.yml)
    ("collected_at", RUN, None),
)
# The inventory variables the run's own keys read: whether the provider lists the host as ready, and why not.
READINESS_VARS = ("gpufleet_ready", "gpufleet_not_ready_reason")
# Every inventory variable a result reads; no other host variable is taken from an inventory.
INVENTORY_VARS = tuple(name for _key, source, name in RESULT_FIELDS if source in (INVENTORY, FLAG)) + READINESS_VARS


def inventory_hostvars(data):
    """``{host: vars}`` from ``ansible-inventory --list`` output (every host of every group, localhost
    left out as report.yml leaves it out), each host's vars cut to ``INVENTORY_VARS`` (a key file's path or
    any other connection setting is never taken); a host without variables gets ``{}``."""
    data = _d(data)
    hostvars = _d(_d(data.get("_meta")).get("hostvars"))
    found = {}
    for group, body in data.items():
        if group == "_meta":
            continue
        for host in (body.get("hosts") if isinstance(body, dict) else None) or ():
            if isinstance(host, str):
                found.setdefault(host, _d(hostvars.get(host)))
    for host, hv in hostvars.items():
        found.setdefault(host, _d(hv))
    found.pop(CONTROLLER, None)
    return {host: {k: hv[k] for k in INVENTORY_VARS if k in hv} for host, hv in found.items()}


def load_inventory(path):
    """``inventory_hostvars`` of a JSON file; raises ``RunnerArtifactsError`` when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise RunnerArtifactsError("cannot read inventory %r (ansible-inventory --list JSON): %s" % (path, exc)) \
            from None
    if not isinstance(data, dict):
        raise RunnerArtifactsError("inventory %r is not an ansible-inventory --list object" % path)
    return inventory_hostvars(data)


# --------------------------------------------------------------------------- results
def host_result(host, seen=None, hostvars=None, collected_at=None):
    """One result object as report.yml writes it: the keys of ``RESULT_FIELDS``, from their sources.

    ``seen``: the host's entry of ``job_summary`` (None: the host ran in no job given); ``hostvars``:
    its inventory variables (None: not known); ``collected_at``: when the job finished (datetime). A host of
    the inventory that ran in no job also gets ``"missing": true`` (report.yml never sees such a host).
    """
    hv = _d(hostvars)
    ready = ansible_bool(hv.get("gpufleet_ready", True))
    facts = _d(_d(seen).get("facts"))
    dropped = _d(seen).get("dropped") if seen else None
    if seen is None and ready:
        reachable, reason = False, NOT_IN_JOBS
    elif dropped:
        reachable = dropped["state"] != "unreachable" and ready
        reason = dropped.get("reason")
    else:
        reachable = ready
        reason = None if ready else hv.get("gpufleet_not_ready_reason")
    run = {
        "host": host,
        "reachable": reachable,
        "failed": bool(dropped) and dropped["state"] == "failed",
        "reason": reason,
        "failed_in": failed_in(dropped),
        "collected_at": _iso(collected_at),
    }
    result = {}
    for key, source, name in RESULT_FIELDS:
        if source == FACT:
            result[key] = facts.get(name)
        elif source == INVENTORY:
            result[key] = hv.get(name)
        elif source == FLAG:
            result[key] = ansible_bool(hv.get(name, False))
        else:
            result[key] = run[key]
    if seen is None and ready:
        result["missing"] = True
    return result


def failed_in(dropped):
    """Where the host dropped out, as report.yml writes it (``play ~ ' / ' ~ task`` of the callback's record):
    ``"<play> / <task>"``; None when it did not drop out, or when only the job's recap says it did."""
    if not dropped or (dropped.get("play") is None and dropped.get("task") is None):
        return None
    return "%s / %s" % (dropped.get("play"), dropped.get("task"))


def build_results(jobs, inventory=None):
    """Per-host results of several ``job_summary`` outputs (one job, or the slices of one), merged.

    ``inventory``: ``{host: vars}`` (``inventory_hostvars``) or None. Hosts of the inventory that ran in
    no job are reported as not reached (or with their provider's not-ready reason). Returns
    ``(results sorted by host, warnings)``; a host in two jobs keeps the later-started job's result.
    """
    inventory = inventory or {}
    warnings = []
    order = sorted(enumerate(jobs), key=lambda ij: (ij[1]["started"] is None, ij[1]["started"] or 0, ij[0]))
    chosen = {}
    for _index, job in order:
        if not job["complete"]:
            warnings.append("job %s has no final recap (playbook_on_stats): it was cut off, its hosts' results "
                            "may be partial" % job["name"])
        for host, seen in job["hosts"].items():
            if host in chosen:
                warnings.append("host %s is in jobs %s and %s: the later job's result is used (%s)" % (
                    host, chosen[host][0]["name"], job["name"], job["name"]))
            chosen[host] = (job, seen)
    # A host of no job is as the inventory said at the end of the last job.
    last = max((j["finished"] for j in jobs if j["finished"] is not None), default=None)
    results = []
    for host in sorted(set(chosen) | set(inventory)):
        job, seen = chosen.get(host, (None, None))
        when = last if job is None else (job["finished"] or seen.get("last_event_at"))
        results.append(host_result(host, seen, inventory.get(host), when))
    return results, warnings


# --------------------------------------------------------------------------- reading artifact folders
def job_folders(path):
    """The job folders (``artifacts/<ident>``, each with ``job_events/``) under ``path``: the job folder
    itself, a private data dir (its ``artifacts/*``, or ``artifacts/`` itself where runner wrote no ident
    folder) or an ``artifacts`` folder. Sorted by name."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise RunnerArtifactsError("runner artifacts %r: no such folder" % path)
    if os.path.isdir(os.path.join(path, "job_events")):
        return [path]
    base = os.path.join(path, "artifacts") if os.path.isdir(os.path.join(path, "artifacts")) else path
    if os.path.isdir(os.path.join(base, "job_events")):  # `ansible-runner process DIR` without --ident
        return [base]
    found = sorted(os.path.join(base, n) for n in os.listdir(base)
                   if os.path.isdir(os.path.join(base, n, "job_events")))
    if not found:
        raise RunnerArtifactsError("runner artifacts %r: no job folder (one with job_events/) in it" % path)
    return found


def _counter(name):
    head = name.split("-", 1)[0]
    return (0, int(head), name) if head.isdigit() else (1, 0, name)


def read_events(folder):
    """The job's events from ``folder/job_events/*.json`` in runner's order (their counter); a file that
    is not a JSON object (runner still writing it) is skipped."""
    events_dir = os.path.join(folder, "job_events")
    events = []
    for name in sorted((n for n in os.listdir(events_dir) if n.endswith(".json")), key=_counter):
        try:
            with open(os.path.join(events_dir, name), encoding="utf-8") as fh:
                event = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


# ansible-core 2.19 names a cache entry s<schema>_<host> and wraps the facts as {"__payload__": "<JSON>"},
# in which tagged values are {"value": ..., "tags": [...], "__ansible_type": ...} (ansible
# lib/ansible/_internal/_plugins/_cache.py; ansible/ansible issue #86028). Earlier versions, and the files AWX
# writes to seed a job's cache, are plain <host> files of plain JSON.
PAYLOAD_KEY = "__payload__"
_TYPE_KEY = "__ansible_type"


def _untag(value):
    """Plain data from ansible-core's cache encoding: a tagged value becomes its value, a date its ISO text."""
    if isinstance(value, list):
        return [_untag(v) for v in value]
    if not isinstance(value, dict):
        return value
    if _TYPE_KEY in value:
        if "value" in value:
            return _untag(value["value"])
        if "iso8601" in value:
            return value["iso8601"]
    return {k: _untag(v) for k, v in value.items() if k != _TYPE_KEY}


def cache_entry(name, data):
    """``(host, facts, wrapped)`` of one fact cache file called ``name`` holding JSON ``data``, or None
    when it holds no facts. ``wrapped``: the file is in ansible-core 2.19's format."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get(PAYLOAD_KEY), str):
        schema, sep, host = name.partition("_")
        if not (sep and host and schema[:1] == "s" and schema[1:].isdigit()):
            return None
        try:
            facts = json.loads(data[PAYLOAD_KEY])
        except ValueError:
            return None
        return (host, _untag(facts), True) if isinstance(facts, dict) else None
    return name, data, False


def read_fact_cache(folder):
    """``{host: facts}`` from ``folder/fact_cache/`` (runner's jsonfile cache, in either format); {} when
    there is none. Where a host has both, the 2.19 entry wins: Ansible wrote it in this job."""
    cache_dir = os.path.join(folder, "fact_cache")
    if not os.path.isdir(cache_dir):
        return {}
    cache, wrapped = {}, set()
    for name in sorted(os.listdir(cache_dir)):
        path = os.path.join(cache_dir, name)
        if name.startswith(".") or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                entry = cache_entry(name, json.load(fh))
        except (OSError, ValueError):
            continue
        if entry is None or (entry[0] in wrapped and not entry[2]):
            continue
        cache[entry[0]] = entry[1]
        if entry[2]:
            wrapped.add(entry[0])
    return cache


def read_job(folder):
    """``job_summary`` of one job folder (``artifacts/<ident>``)."""
    return job_summary(read_events(folder), read_fact_cache(folder), name=os.path.basename(os.path.normpath(folder)))


def results_from_artifacts(paths, inventory=None):
    """``build_results`` of every job under ``paths`` (see ``job_folders``); ``inventory`` as there."""
    jobs = [read_job(folder) for path in paths for folder in job_folders(path)]
    return build_results(jobs, inventory)


def write_results(results, folder):
    """Write each result to ``folder/<host>.json`` (what ``report.summarize_folder`` reads); returns the
    host names. Raises ``RunnerArtifactsError`` on a host name that is not a plain file name."""
    for result in results:
        host = result["host"]
        if "/" in host or host in (".", "..") or host.startswith("."):
            raise RunnerArtifactsError("host name %r cannot be a result file name" % host)
    os.makedirs(folder, exist_ok=True)
    for result in results:
        with open(os.path.join(folder, result["host"] + ".json"), "w", encoding="utf-8") as out:
            json.dump(result, out, sort_keys=True)
            out.write("\n")
    return [r["host"] for r in results]
