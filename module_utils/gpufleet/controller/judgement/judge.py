"""One judgement per host: findings in, one decision out (status, action, verdict).

Every piece of evidence about a host (the run's record, GPU facts and their health findings, the benchmark gate,
the doctor's findings, the GPU history, the provider's listing, version drift) becomes a *finding*, a plain dict
made by ``finding()``. ``decide()`` turns a host's findings into its status, its action and a one-line verdict.
Nothing else sets them: the report's model gathers findings, the summary adds the fleet-level ones (history,
drift) and calls ``decide`` once per host; renderers only render the decision.

The precedence is data, read top to bottom:

- ``OUTRANKS``: a specific diagnosis outranks the generic symptoms it explains (a container that lost its GPUs
  *looks* like "no driver" from inside). An outranked finding stays in the host's findings with
  ``outranked_by`` set, and takes no part in the decision.
- ``STATUS_ORDER``: the worst status implied by a finding wins.
- ``ACTION_ORDER``: the worst action called for wins; a host with no finding that calls for an action gets the
  default of its status (``DEFAULT_ACTION``).
- The verdict gives the evidence for the action first (the findings that call for it), then the rest, each part
  worst first; at most ``VERDICT_MAX`` characters, the other findings counted as "(+N more)".

Meanings, remedies and the commands to run are not in the verdict: ``what_to_do()`` groups them by action for
the report's "what to do" section. A doctor finding's evidence in a few words (``brief``, ``BRIEFS``) is worded
in briefs.py.
"""

ACTION_RETURN = "return to provider"
ACTION_RESTART = "restart the container"
ACTION_REBOOT = "reboot"
ACTION_FIX = "fix here"
ACTION_CHECK = "check access / rerun"
KEEP = "keep"

# The pre-check's steps, in order (playbooks/check.yml runs them and records each one's end under its name in
# ``check.steps``; a failed step is recorded by its number, 1-based). The one list: the report's findings, these
# lines and tests/unit/test_check_steps.py (which reads check.yml) take the names from here. A new step is
# check.yml's tasks plus one entry here.
CHECK_STEPS = ("connect", "environment", "probe", "box")

# Worst first: the worst action any finding calls for is the host's action.
ACTION_ORDER = (ACTION_RETURN, ACTION_RESTART, ACTION_REBOOT, ACTION_FIX, ACTION_CHECK)
# Worst first: the worst status any finding implies is the host's status ("ok" when none implies one).
STATUS_ORDER = ("unreachable", "no-gpu", "failed", "degraded", "unknown", "ok")
# The action of a host none of whose findings calls for one.
DEFAULT_ACTION = {"ok": None, "degraded": ACTION_FIX, "failed": ACTION_FIX, "no-gpu": ACTION_RETURN,
                  "unknown": ACTION_CHECK, "unreachable": ACTION_CHECK}
# The status a finding of this severity implies when its source gives none (facts.health's own mapping).
SEVERITY_STATUS = {"critical": "failed", "error": "failed", "warning": "degraded", "unknown": "unknown",
                   "info": None}
SEVERITIES = ("critical", "error", "warning", "unknown", "info")
# Findings of these severities are faults (reasons); info findings are notes.
FAULT_SEVERITIES = ("critical", "error", "warning", "unknown")
VERDICT_MAX = 160

# Health finding codes that point at the rented hardware: the provider has to act.
PROVIDER_CODES = frozenset([
    "gpu_lost", "gpu_reset_required", "ecc_uncorrectable_volatile", "ecc_uncorrectable_aggregate",
    "row_remap_failure", "gpu_count_low", "no_gpus", "gpu_stack_broken", "pcie_width_below_max",
    "nvlink_links_down", "clocks_throttled_hw",
    # A GPU at its slowdown temperature: the cooling is the provider's.
    "high_temperature",
    # A throttled box sold as full: the power limit lowered below the model's default, the clocks locked low.
    "power_limit_lowered", "clocks_locked_low",
])
# Health finding codes that only say "no GPU here": what a CPU host by intent is (kept there as info).
NO_GPU_CODES = frozenset(["gpu_stack_broken", "no_gpus", "gpu_facts_unavailable"])
# The finding codes playbooks/remediate.yml has a fix for (roles/remediate/filter_plugins/remediate.py ACTIONS; a
# unit test keeps the two equal). Only these call for "fix here": a finding the renter cannot have fixed by
# remediate.yml calls for what the renter can do on that kind of host, or is a note.
FIX_HERE_CODES = frozenset([
    "cuda_link_wrong_target", "ld_library_path_shadowing", "cuda_visible_devices_empty_or_invalid", "cpu_only_wheel",
    "wrong_variant_for_driver", "arch_missing_from_wheel", "libcudart_not_found", "nvidia_uvm_not_loaded",
    "device_nodes_missing", "error_802_fabric_manager", "persistence_mode_off",
])
# The pre-check's storage and network findings (judgement/box.py, issue 51), by what they say. Measured far below the
# listing calls for the provider (``BOX_RETURN_CODES``); every other one is a note (severity info) that never changes
# keep on its own. ``BOX_SLOW_CODES``: measured slow, what the GPU history records and says when the machine comes
# back (history.py).
BOX_CODES = {
    "disk_below_listing": "box_disk_below_listing", "download_below_listing": "box_download_below_listing",
    "upload_below_listing": "box_upload_below_listing", "disk_slow": "box_disk_slow",
    "disk_write_slow": "box_disk_write_slow", "download_slow": "box_download_slow",
    "torch_files_slow": "box_torch_files_slow", "free_space_low": "box_free_space_low", "dns": "box_dns",
    "no_egress": "box_no_egress", "unmeasured": "box_unmeasured", "unreadable": "box_evidence_unreadable",
}
BOX_RETURN_CODES = frozenset(BOX_CODES[k] for k in ("disk_below_listing", "download_below_listing",
                                                    "upload_below_listing"))
BOX_SLOW_CODES = BOX_RETURN_CODES | frozenset(BOX_CODES[k] for k in ("disk_slow", "disk_write_slow", "download_slow",
                                                                     "torch_files_slow"))
# Health codes whose remedy is a GPU reset or a reboot of the machine (a pending page retirement or row remap, the
# driver's "reset required"): the renter of a VM or a machine reboots it, the renter of a container cannot.
MACHINE_RESTART_CODES = frozenset(["retired_pages_pending", "row_remap_pending", "gpu_reset_required"])


def machine_restart_action(in_container):
    """What a renter does about a GPU reset or a reboot: "reboot" on a VM or a machine, the provider in a
    container (only the machine's owner can reset a GPU or reboot under a container)."""
    return ACTION_RETURN if in_container else ACTION_REBOOT


# The facts' "no GPU visible" symptom and the facts health codes that say the same.
_NO_GPU_SYMPTOMS = ("no_gpu", "no_gpus", "gpu_stack_broken", "gpu_facts_unavailable")

# (specific finding, the generic findings it explains, why). A code on the left outranks every code on its right
# when both are present on a host. Doctor codes: module_utils/gpufleet/host/doctor/rules.py; facts health codes:
# module_utils/gpufleet/host/gpu/facts.py (health); "no_gpu": the facts read no GPU at all.
OUTRANKS = (
    ("no_gpu", ("no_gpus", "gpu_stack_broken", "gpu_facts_unavailable"),
     "the facts' own lines for the same fact: no GPU is visible"),
    ("container_lost_gpus", _NO_GPU_SYMPTOMS + (
        "no_driver", "container_without_gpus", "device_nodes_missing", "nvidia_uvm_not_loaded", "gpu_count_low",
        "fewer_gpus_than_rented"),
     "the container had its GPUs and lost them: from inside, that looks like no driver and no GPU"),
    ("container_without_gpus", _NO_GPU_SYMPTOMS + ("no_driver", "gpu_count_low", "fewer_gpus_than_rented"),
     "the container was started without GPUs: no driver and no GPU are what that looks like from inside"),
    ("driver_library_mismatch", _NO_GPU_SYMPTOMS,
     "NVML fails on a driver/library mismatch until the reboot that loads the new driver"),
    ("no_driver", _NO_GPU_SYMPTOMS, "no GPU is visible because no driver is loaded"),
    ("fewer_gpus_than_rented", ("gpu_count_low",), "the same count, read by the doctor with the listing"),
    ("xid_79_fallen_off_bus", ("xid_79", "gpu_lost"), "the GPU fell off the bus: lost is what follows"),
    ("ecc_or_row_remap_failure", ("ecc_uncorrectable_volatile", "ecc_uncorrectable_aggregate", "row_remap_failure"),
     "the doctor's memory finding covers the same counters"),
    ("gpu_recovery_action", ("gpu_reset_required",), "the driver names the recovery it needs"),
    ("check_timed_out", ("playbook_failed",), "the pre-check stopped the step that ran past the host's deadline"),
    ("check_step_failed", ("playbook_failed",), "the pre-check names the step that failed and goes on to the report"),
    # A box flagged "return to provider" by an earlier run of the same rental is evidence with its date; a present,
    # more specific diagnosis of what would restore it outranks the flag (history.py: a flag from a run with less
    # evidence than this one is a note anyway).
    ("container_lost_gpus", ("flagged_before",), "this run's diagnosis names the restart that gives the GPUs back"),
    ("nvidia_uvm_not_loaded", ("flagged_before",), "this run's diagnosis names what starts CUDA again"),
    ("driver_library_mismatch", ("flagged_before",), "this run's diagnosis names the reboot that loads the driver"),
    ("gpu_recovery_action", ("flagged_before",), "this run's diagnosis names the recovery the driver asks for"),
)


def _outranked_by():
    out = {}
    for specific, generics, _why in OUTRANKS:
        for generic in generics:
            out.setdefault(generic, []).append(specific)
    return out


_OUTRANKED_BY = _outranked_by()

# What to run for each action: the "what to do" section's command (HOSTS: the group's hosts, comma separated).
COMMANDS = {
    ACTION_RETURN: "ansible-playbook playbooks/return.yml -i INVENTORY --limit HOSTS"
                   " (prints the plan; add -e gpufleet_return_confirm=yes to send it)",
    ACTION_RESTART: "restart each container with its GPUs from the provider's console or API, then"
                    " ansible-playbook site.yml -i INVENTORY --limit HOSTS",
    ACTION_REBOOT: "ansible HOSTS -i INVENTORY -b -m ansible.builtin.reboot, then"
                   " ansible-playbook site.yml -i INVENTORY --limit HOSTS",
    ACTION_FIX: "ansible-playbook playbooks/remediate.yml -i INVENTORY --limit HOSTS",
    ACTION_CHECK: "ansible HOSTS -i INVENTORY -m ansible.builtin.ping, then"
                  " ansible-playbook site.yml -i INVENTORY --limit HOSTS",
}

# A command names its hosts up to this many; past that it reads them from a file (one name a line, as
# ansible-playbook's --limit @FILE reads it) that the user writes from fleet.json's what_to_do hosts.
COMMAND_HOSTS = 20
HOSTS_FILE = {ACTION_RETURN: "return-hosts.txt", ACTION_RESTART: "restart-hosts.txt",
              ACTION_REBOOT: "reboot-hosts.txt", ACTION_FIX: "fix-hosts.txt", ACTION_CHECK: "check-hosts.txt"}


def finding(source, code, severity, text, action=None, status=None, evidence=None, meaning=None, remedy=None,
            gpu_index=None, reason=None, echo=False):
    """One finding. ``source``: facts, health, gate, doctor, history, listing, drift or run. ``text``: the evidence
    in a few words and numbers (the verdict quotes it); ``reason``: the longer line for the host's reasons (default
    ``text``). ``action``: the action this finding calls for by itself (None: none). ``status``: the host status
    it implies (default: from the severity). ``echo``: it repeats earlier evidence (the history) and comes after
    the host's own evidence in the verdict."""
    if severity not in SEVERITIES:
        severity = "unknown"
    return {
        "source": source, "code": str(code), "severity": severity,
        "status": status if status is not None else SEVERITY_STATUS[severity],
        "action": action, "text": " ".join(str(text).split()), "reason": reason if reason is not None else text,
        "meaning": meaning, "remedy": remedy, "gpu_index": gpu_index,
        "evidence": evidence if evidence is not None else {}, "echo": bool(echo), "outranked_by": None,
    }


def _worst(values, order):
    ranks = [order.index(v) for v in values if v in order]
    return order[min(ranks)] if ranks else None


def decide(findings, listing_failed=False):
    """The decision for one host from its findings: ``{"status", "action", "verdict", "findings"}``.

    ``findings`` are ordered in place for the verdict (the evidence for the action first, each part worst first,
    outranked ones last) and each outranked one gets ``outranked_by``. ``listing_failed``: the provider lists
    the box as failed: a host that cannot be judged from its own evidence (unreachable, unknown) is returned."""
    codes = {f["code"] for f in findings}
    for f in findings:
        by = [c for c in _OUTRANKED_BY.get(f["code"], ()) if c in codes and c != f["code"]]
        f["outranked_by"] = by[0] if by else None
    active = [f for f in findings if f["outranked_by"] is None]
    status = _worst([f["status"] for f in active], STATUS_ORDER) or "ok"
    action = None
    if status != "ok":
        called = [f["action"] for f in active if f["severity"] in FAULT_SEVERITIES]
        action = _worst(called + [DEFAULT_ACTION[status]], ACTION_ORDER)
        if listing_failed and status in ("unreachable", "unknown"):
            action = ACTION_RETURN
    findings.sort(key=lambda f: (f["outranked_by"] is not None, action is None or f["action"] != action,
                                 f["echo"], SEVERITIES.index(f["severity"])))
    return {"status": status, "action": action, "verdict": verdict(action, findings), "findings": findings}


def _fit(head, texts):
    """``head`` + ``texts[0]`` + "(+N more)" within VERDICT_MAX characters (the evidence cut with "...")."""
    if not texts:
        return head[:VERDICT_MAX]
    more = " (+%d more)" % (len(texts) - 1) if len(texts) > 1 else ""
    room = VERDICT_MAX - len(head) - len(more)
    return head + _cut(texts[0], room) + more


def _cut(text, room):
    """``text`` within ``room`` characters: whole, or cut at a word's end, outside parentheses, with "..."."""
    if len(text) <= room:
        return text
    cut = text[:max(room - 3, 0) + 1]
    cut = cut[:cut.rfind(" ")] if " " in cut else cut[:-1]
    stack = []
    for i, ch in enumerate(cut):
        if ch in "([":
            stack.append(i)
        elif ch in ")]" and stack:
            stack.pop()
    if stack:  # an open parenthesis: cut before the outermost one
        cut = cut[:stack[0]]
    return cut.rstrip(" ,;:(") + "..."


def verdict(action, findings):
    """One line a renter acts on: the action, then the worst evidence in numbers, then "(+N more)"."""
    active = [f for f in findings if f["outranked_by"] is None]
    faults = [f["text"] for f in active if f["severity"] in FAULT_SEVERITIES]
    notes = [f["text"] for f in active if f["severity"] not in FAULT_SEVERITIES]
    if action is None:
        if not notes:
            return KEEP
        line = _fit(KEEP + " (note: ", notes)
        return line + ")" if len(line) < VERDICT_MAX else line[:VERDICT_MAX - 4] + "...)"
    return _fit(action + ": ", faults or notes or ["no reason recorded"])


def what_to_do(hosts):
    """The report's "what to do" section: one group per action (worst first) with the command to run, its
    hosts, and per finding that calls for that action its meaning and remedy with the hosts it was seen on.
    ``hosts``: host rows with ``host``, ``action`` and ``judgement`` (the decided findings)."""
    groups = []
    for action in ACTION_ORDER:
        members = [h for h in hosts if h.get("action") == action]
        if not members:
            continue
        items = {}
        for h in members:
            for f in h.get("judgement") or ():
                if f.get("outranked_by") or f.get("severity") not in FAULT_SEVERITIES:
                    continue
                if f.get("action") not in (action, None) and action != ACTION_CHECK:
                    continue
                key = f["code"]
                item = items.setdefault(key, {"code": key, "meaning": f.get("meaning") or f.get("text"),
                                              "remedy": f.get("remedy"), "hosts": []})
                if h["host"] not in item["hosts"]:
                    item["hosts"].append(h["host"])
        names = [h["host"] for h in members]
        limit = ",".join(names) if len(names) <= COMMAND_HOSTS else "@%s" % HOSTS_FILE[action]
        groups.append({"action": action, "hosts": names, "command": COMMANDS[action].replace("HOSTS", limit),
                       "return_actions": [h["return_action"] for h in members if h.get("return_action")],
                       "items": sorted(items.values(), key=lambda i: (-len(i["hosts"]), i["code"]))})
    return groups


# ----------------------------------------------------------------------------- the pre-check's lines
# The exit-status contract (docs/check.md): 0 when every host is keep or fix here, 2 otherwise (a host to return,
# restart, reboot or check again, an unreachable one included).
CHECK_OK_ACTIONS = (None, ACTION_FIX)
EXIT_OK, EXIT_GIVE_BACK = 0, 2


def needs_more_than_keeping(host):
    """True when a host's action is neither keep nor fix here (the pre-check then exits 2)."""
    return host.get("action") not in CHECK_OK_ACTIONS


def check_exit_status(summary):
    """The pre-check's exit status for a fleet summary: EXIT_OK or EXIT_GIVE_BACK."""
    hosts = [h for h in summary.get("hosts") or () if isinstance(h, dict)]
    return EXIT_GIVE_BACK if any(needs_more_than_keeping(h) for h in hosts) else EXIT_OK


def advisory_note(host):
    """The pre-check's note under a host's line when its torch has open security advisories (the checklist's
    ``torch_advisories`` item at warn: the CVEs and their fixed releases); None otherwise. A note only: the
    advisories take no part in the host's verdict, action or exit status."""
    checklist = host.get("checklist") if isinstance(host.get("checklist"), dict) else {}
    item = checklist.get("torch_advisories")
    if not isinstance(item, dict) or item.get("status") != "warn" or not item.get("summary"):
        return None
    return "note: %s" % item["summary"]


def driver_note(host):
    """The pre-check's note under a host's line when its NVIDIA driver lacks security fixes or its branch is not in
    the bulletin table (the checklist's ``driver_security`` item carries it as ``note``); None otherwise. A note
    only, like ``advisory_note``: it takes no part in the host's verdict, action or exit status."""
    checklist = host.get("checklist") if isinstance(host.get("checklist"), dict) else {}
    item = checklist.get("driver_security")
    return item["note"] if isinstance(item, dict) and isinstance(item.get("note"), str) and item["note"] else None


def torch_note(host):
    """The pre-check's line under a host that lists every environment with torch and its build, the judged one
    first with why (``judged``'s reason), e.g. "torch: 2.5.1+cu121 in /venv/main (judged: the login shell's
    python), 2.4.0 in /usr/bin/python3". Only where it says more than the verdict: two or more environments with
    torch, or the judged one is not the login shell's python; None otherwise."""
    check = host.get("check") if isinstance(host.get("check"), dict) else {}
    envs = [e for e in check.get("environments") or () if isinstance(e, dict) and e.get("torch")]
    judged = check.get("judged") if isinstance(check.get("judged"), dict) else None
    if not envs or not (len(envs) > 1 or (judged and judged.get("named"))):
        return None  # the verdict says it all: no torch ("no torch on this image"), or the login shell's only
    first = [e for e in envs if judged and e.get("python") == judged.get("python")]
    parts = []
    for e in first + [e for e in envs if e not in first]:
        text = "%s in %s" % (e.get("torch"), e.get("where") or e.get("python"))
        if e in first:
            text += " (judged%s)" % (": %s" % judged["reason"] if judged.get("reason") else "")
        parts.append(text)
    return "torch: " + ", ".join(parts)


def check_lines(summary):
    """(lines, bad hosts) for the pre-check's terminal: one line per host (name, verdict, step times), under it
    the environments with torch (``torch_note``) and a note when its torch has open security advisories
    (``advisory_note``), then a count in which each host is counted once, in one category. A host is bad when its
    action is neither keep nor fix here (``needs_more_than_keeping``). A driver without NVIDIA's security fixes adds
    one more note (``driver_note``)."""
    hosts, seen = [], set()
    for h in summary.get("hosts") or ():
        if isinstance(h, dict) and str(h.get("host")) not in seen:  # one row per host, however often it is listed
            seen.add(str(h.get("host")))
            hosts.append(h)
    width = max([len(str(h.get("host"))) for h in hosts] + [4])
    lines, bad = [], []
    for h in hosts:
        check = h.get("check") if isinstance(h.get("check"), dict) else {}
        steps = check.get("steps") if isinstance(check.get("steps"), dict) else {}
        times, before = [], 0.0
        for name in CHECK_STEPS:
            at = steps.get(name)
            if isinstance(at, (int, float)):
                times.append("%s %.1f s" % (name, at - before))
                before = at
        timing = "  [%s]" % ", ".join(times) if times else ""
        lines.append("%-*s  %s%s" % (width, h.get("host"), h.get("verdict") or KEEP, timing))
        for note in (torch_note(h), advisory_note(h), driver_note(h)):
            if note:
                lines.append("%-*s  %s" % (width, "", note))
        if needs_more_than_keeping(h):
            bad.append(str(h.get("host")))
    keep = sum(1 for h in hosts if h.get("action") is None)
    fix = sum(1 for h in hosts if h.get("action") == ACTION_FIX)
    lines.append("%d host(s): %d keep, %d fix here, %d to give back, restart, reboot or check again%s" % (
        len(hosts), keep, fix, len(bad), ": %s" % ", ".join(bad) if bad else ""))
    return lines, bad
