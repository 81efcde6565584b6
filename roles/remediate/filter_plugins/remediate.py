# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the remediate role: what to fix on a host, and what came of it.

Pure functions over the gpu_doctor result (ansible_facts.gpu_doctor), unit tested in
tests/unit/test_remediate_filters.py.
"""

import json

# code -> (fix group, how it is fixed). A group is one task file of the role (tasks/fix_<group>.yml).
ACTIONS = {
    "cuda_link_wrong_target": ("links", "repoint /usr/local/cuda and the loader configuration (cuda_links role)"),
    "ld_library_path_shadowing": ("links", "take CUDA directories out of the global LD_LIBRARY_PATH and extra "
                                           "ld.so.conf entries (cuda_links role)"),
    "cuda_visible_devices_empty_or_invalid": ("env", "remove CUDA_VISIBLE_DEVICES from the file that sets it "
                                                     "(a copy is kept)"),
    "cpu_only_wheel": ("torch", "reinstall torch with the CUDA variant the driver supports (torch role)"),
    "wrong_variant_for_driver": ("torch", "install the torch variant the driver supports (torch role)"),
    "arch_missing_from_wheel": ("torch", "install a torch build whose arch list covers the GPU (torch role)"),
    "libcudart_not_found": ("torch", "reinstall torch with its CUDA runtime wheels (torch role)"),
    "nvidia_uvm_not_loaded": ("modules", "load nvidia_uvm (nvidia-modprobe -u -c 0, else modprobe) and at boot"),
    "device_nodes_missing": ("modules", "create the device nodes (nvidia-modprobe -u -c 0)"),
    "error_802_fabric_manager": ("fabric_manager", "start and enable nvidia-fabricmanager"),
    "persistence_mode_off": ("persistence", "enable nvidia-persistenced (nvidia-smi -pm 1 where it is missing)"),
}
GROUP_ORDER = ("env", "links", "modules", "fabric_manager", "persistence", "torch")


def remediate_plan(doctor, codes=None, only_when_unusable=True, allow_reboot=False):
    """What to do on this host: {act, why_not, items, groups, reboot, provider, manual}."""
    doctor = doctor or {}
    allowed = set(codes) if codes is not None else set(ACTIONS)
    findings = [f for f in doctor.get("findings") or () if isinstance(f, dict)]
    in_container = ((doctor.get("evidence") or {}).get("in_container")) is True
    plan = {"act": False, "why_not": None, "items": [], "groups": [], "reboot": [], "provider": [], "manual": [],
            "restart": []}
    for f in findings:
        code, cls = f.get("code"), f.get("remedy_class")
        if cls == "provider":
            plan["provider"].append(code)
        elif cls == "reboot":
            plan["reboot"].append(code)
        elif cls == "restart_container":
            plan["restart"].append(code)  # the renter restarts the container (provider console / API): never here
        elif cls == "fixable" and code in ACTIONS and code in allowed:
            group, how = ACTIONS[code]
            plan["items"].append({"code": code, "group": group, "how": how, "severity": f.get("severity")})
        elif cls == "fixable":
            plan["manual"].append(code)
    plan["reboot_now"] = bool(plan["reboot"]) and bool(allow_reboot) and not in_container
    if not plan["items"] and not plan["reboot_now"]:
        plan["why_not"] = "nothing this role can fix" if findings else "no findings"
    elif only_when_unusable and doctor.get("cuda_usable") is True:
        plan["why_not"] = "CUDA is usable here (remediate_only_when_unusable)"
    else:
        plan["act"] = True
        present = {i["group"] for i in plan["items"]}
        plan["groups"] = [g for g in GROUP_ORDER if g in present]
    return plan


def _major_minor(version):
    parts = str(version or "").split(".")
    return "%s.%s" % (parts[0], parts[1]) if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() else ""


def remediate_handoff(doctor, pinned=""):
    """What the doctor decided (its ``decision``), as the inputs of the roles that act on it.

    ``cuda_links_version``: the toolkit /usr/local/cuda must point at (major.minor; cuda_links pins it, so its own
    choice is the doctor's); ``cuda_links_driver_cuda_version``: the driver's CUDA version however the doctor read it
    (NVML where only NVML answers); ``driver_version`` and ``compute_capabilities``: what the torch build is solved
    for. Empty strings where the doctor decided nothing (the role then decides as it always does), except
    ``cuda_links_version``: the inventory's own pin (``pinned``) stays, so a pin that is not installed is refused by
    cuda_links as before, never replaced by another toolkit.
    """
    d = (doctor or {}).get("decision") or {}
    tk = d.get("toolkit") or {}
    return {"cuda_links_version": _major_minor(tk.get("major_minor")) or str(pinned or ""),
            "cuda_links_driver_cuda_version": _major_minor(d.get("driver_cuda_version")),
            "cuda_link_target": tk.get("root") or "",
            "driver_version": str(d.get("driver_version") or ""),
            "compute_capabilities": [str(c) for c in d.get("compute_capabilities") or () if c]}


def remediate_details(doctor, torch_pick=None, torch_source=None):
    """What each planned fix group would do on this host, in words naming the exact target: group -> text.

    links: the target the doctor decided for /usr/local/cuda (what cuda_links is handed); torch: the build the
    solver picked (``torch_pick``, the registered torch_variant result: ``torch==2.5.1+cu121``), or why none fits.
    """
    d = (doctor or {}).get("decision") or {}
    out = {}
    tk = d.get("toolkit")
    if tk:
        driver = d.get("driver_cuda_version")
        out["links"] = "point /usr/local/cuda at %s (CUDA %s, %s%s)" % (
            tk.get("root"), tk.get("version") or tk.get("major_minor"), tk.get("rule"),
            ": the driver supports CUDA %s, read by %s" % (driver, d.get("driver_cuda_version_source"))
            if driver else ": the driver's CUDA version is unknown")
    elif d.get("toolkit_why_none"):
        out["links"] = "leave /usr/local/cuda as it is (%s)" % d["toolkit_why_none"]
    pick = torch_pick or {}
    selection = (pick.get("ansible_facts") or {}).get("torch_selection") or {}
    if pick.get("failed"):
        out["torch"] = "install no torch build: %s" % (pick.get("msg") or "the solver found none for this host")
    elif selection.get("requirement"):
        out["torch"] = "install %s from %s" % (
            selection["requirement"], torch_source or selection.get("index_url") or "the wheelhouse")
    return out


def remediate_torch_variant(torch_pick, default="auto"):
    """The variant the torch role is handed: the one the solver picked in diagnose (``torch_pick``, the registered
    torch_variant result), else ``default`` (remediate_torch_cuda_variant) when it picked none."""
    pick = torch_pick or {}
    selection = (pick.get("ansible_facts") or {}).get("torch_selection") or {}
    return selection.get("variant") if selection.get("variant") and not pick.get("failed") else default


def remediate_plan_lines(plan, details=None):
    """One line per planned fix, for people: "would fix CODE by HOW: WHAT" (WHAT: the exact target, from
    ``remediate_details``)."""
    details = details or {}
    lines = ["would fix %s by %s%s" % (i["code"], i["how"], (": " + details[i["group"]]) if details.get(i["group"])
                                       else "") for i in plan.get("items", ())] if plan.get("act") else []
    if plan.get("reboot_now"):
        lines.append("would reboot for %s" % ", ".join(plan["reboot"]))
    if plan.get("why_not"):
        lines.append("nothing to do: %s" % plan["why_not"])
    lines += ["needs the provider: %s" % c for c in plan.get("provider", ())]
    lines += ["needs a reboot: %s" % c for c in plan.get("reboot", ()) if not plan.get("reboot_now")]
    lines += ["needs a container restart: %s" % c for c in plan.get("restart", ())]
    lines += ["not automated, see its remedy: %s" % c for c in plan.get("manual", ())]
    return lines


def _by_code(doctor):
    return {f.get("code"): f for f in (doctor or {}).get("findings") or () if isinstance(f, dict)}


GLOBAL_LOGIN_FILES = ("/etc/environment", "/etc/profile", "/etc/bash.bashrc")
GLOBAL_LOGIN_DIR = "/etc/profile.d/"


def _is_global(source):
    return source in GLOBAL_LOGIN_FILES or (source.startswith(GLOBAL_LOGIN_DIR) and source.endswith(".sh"))


def still_there_why(finding):
    """Why a fix that ran left its finding, from the finding's evidence: a setting outside what gpufleet edits
    (a per-user dotfile, the container's own environment) is named with what the user does about it."""
    ev = finding.get("evidence") or {}
    left = [e for e in ev.get("ld_library_path") or () if isinstance(e, dict)
            and not _is_global(str(e.get("source") or ""))]
    if left:
        parts = []
        for e in left:
            source = str(e.get("source") or "")
            if source.startswith("/"):
                parts.append("%s sets it in %s, a per-user file gpufleet leaves alone: remove that directory from "
                             "LD_LIBRARY_PATH there" % (e.get("path"), source))
            else:
                parts.append("%s comes from the %s (the container's or the service's own environment): unset it "
                             "there (a provider / template setting)" % (e.get("path"), source or "unknown source"))
        return "LD_LIBRARY_PATH still shadows pip's CUDA libraries: " + "; ".join(parts)
    return "the fix ran but the doctor still finds it"


def remediate_record(before, after, plan, failures=None, check_mode=False, planned_details=None):
    """Outcome per host: state plus fixed / still_broken (with why) / needs_provider / needs_reboot / planned.

    ``planned_details`` (group -> text) says what a fix group would do on this host, for the --check plan: for
    torch, the build the torch role picked ("torch==2.5.1+cu121 from https://download.pytorch.org/whl/cu121")."""
    failures = failures or {}
    planned_details = planned_details or {}
    was, now = _by_code(before), _by_code(after if after is not None else before)
    record = {"state": None, "acted": bool(plan.get("act")) and not check_mode, "fixed": [], "still_broken": [],
              "needs_provider": [], "needs_reboot": [], "needs_restart": [], "planned": [],
              "not_automated": list(plan.get("manual", ()))}
    if check_mode and plan.get("act"):
        record["planned"] = [dict({"code": i["code"], "how": i["how"]},
                                  **({"would": planned_details[i["group"]]} if planned_details.get(i["group"]) else {}))
                             for i in plan["items"]]
    for item in plan.get("items", ()) if record["acted"] else ():
        code = item["code"]
        if code not in now:
            record["fixed"].append(code)
        else:
            why = failures.get(item["group"]) or still_there_why(now[code])
            record["still_broken"].append({"code": code, "why": why})
    for code, f in now.items():
        entry = {"code": code, "meaning": f.get("meaning"), "remedy": f.get("remedy")}
        if f.get("remedy_class") == "provider":
            record["needs_provider"].append(entry)
        elif f.get("remedy_class") == "reboot":
            record["needs_reboot"].append(entry)
        elif f.get("remedy_class") == "restart_container":
            record["needs_restart"].append(entry)
    if check_mode and record["planned"]:
        record["state"] = "planned"
    elif record["still_broken"]:
        record["state"] = "still_broken"
    elif record["needs_provider"]:
        record["state"] = "needs_provider"
    elif record["needs_reboot"]:
        record["state"] = "needs_reboot"
    elif record["needs_restart"]:
        record["state"] = "needs_restart"
    elif record["fixed"]:
        record["state"] = "fixed"
    else:
        record["state"] = "nothing_to_fix" if not was else "unchanged"
    return record


OUTCOME_KEYS = ("state", "fixed", "still_broken", "needs_provider", "needs_reboot", "needs_restart", "planned",
                "not_automated")


def remediate_outcome(record):
    """The outcome of a record, without its words: the state and the codes in each list. A failure's text (a pip
    log's temporary paths, a command's timing) differs from run to run; the outcome does not."""
    record = record or {}
    out = {"state": record.get("state")}
    for key in OUTCOME_KEYS[1:]:
        out[key] = sorted(str(e.get("code") if isinstance(e, dict) else e) for e in record.get(key) or ())
    return out


def remediate_record_changed(previous, record):
    """Whether ``record`` says something ``previous`` (the last-action.json of an earlier run: its text or its data;
    None or "" when there is none) did not: only then is it written, so a remediation whose outcome did not change
    reports changed=0. A file that is not a JSON object is replaced."""
    if isinstance(previous, (str, bytes)):
        try:
            previous = json.loads(previous)
        except ValueError:
            return True
    if not isinstance(previous, dict) or not previous:
        return True
    return remediate_outcome(previous) != remediate_outcome(record)


class FilterModule:
    def filters(self):
        return {"remediate_plan": remediate_plan, "remediate_plan_lines": remediate_plan_lines,
                "remediate_record": remediate_record, "remediate_handoff": remediate_handoff,
                "remediate_details": remediate_details, "remediate_record_changed": remediate_record_changed,
                "remediate_torch_variant": remediate_torch_variant}
