# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checklist item "driver security": the host's NVIDIA driver against NVIDIA's security bulletins.

The table is data, generated from NVIDIA PSIRT's CSAF files by scripts/driver-bulletins (driver_bulletins.json; its
reader driver_bulletins.py gives per branch the newest fixed version, its bulletin and date, and whether the branch
still gets security fixes).
``assess(version)`` looks a driver version up in it; ``driver_security_item(result)`` is the checklist item of one
per-host result. Versions are compared by their numeric parts (580.95.05 < 580.178.04).

Whose matter it is decides the status: on a VM or bare metal the renter administers the driver, so a driver without
the fixes is "fail" with "fix here" (update the driver; gpufleet never does it by itself); in a container the driver
is the host's, the provider's, so it is "warn". A branch the table does not have is "unknown" (not checked), never
"ok". Like every checklist item it changes neither the host's status nor its action; the item's ``note`` is the line
playbooks/check.yml prints under the host's verdict (judgement.driver_note). Plain Python >= 3.8, stdlib only.
"""

from . import driver_bulletins as table
from .driver_bulletins import version_key
from .item import _d, _item, _unknown, in_container, is_cpu_host

KEY = "driver_security"
LABEL = "driver security"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
FIX_HERE = "fix here"
PROVIDER = "ask the provider"


def branch_of(version):
    """"R580" for "580.95.05"; None when it is not a driver version."""
    key = version_key(version)
    return "R%d" % key[0] if key else None


def _month(date):
    """"April 2025" for "2025-04-24"."""
    try:
        return "%s %s" % (_MONTHS[int(date[5:7]) - 1], date[:4])
    except (TypeError, ValueError, IndexError):
        return date


def supported():
    """"R580 >= 580.178.04, R595 >= 595.91.07, ...": the branches that still get security fixes, at their floors."""
    return ", ".join("%s >= %s" % (b, r["fixed"]) for b, r in table.BRANCHES.items() if r["security_fixes"])


def assess(version):
    """The table's word on one driver version: {"state", "version", "branch", "row", "text", "target"}.

    state: ok (at or above its branch's floor), below (under it), ended (the branch gets no security fixes any
    more, whatever the version), not_in_table (a branch the bulletins do not list), unreadable (not a version).
    ``text`` says it in a line; ``target`` is what to update to (None for ok and the unknowns).
    """
    key, branch = version_key(version), branch_of(version)
    row = table.BRANCHES.get(branch)
    out = {"version": version, "branch": branch, "row": row, "target": None}
    if key is None:
        out.update(state="unreadable", text="driver version %r does not read as a version" % (version,))
    elif row is None:
        out.update(state="not_in_table", text="driver %s: branch %s is not in the table of NVIDIA's Linux driver "
                                              "bulletins (%s to %s, as of %s): not checked" % (
                                                  version, branch, table.BULLETINS[0]["id"], table.NEWEST_BULLETIN,
                                                  table.AS_OF))
    elif not row["security_fixes"]:
        out.update(state="ended", target="a supported branch (%s)" % supported(),
                   text="driver %s: branch %s receives no security fixes (last: %s, bulletin %s)" % (
                       version, branch, _month(row["date"]), row["bulletin"]))
    elif key < version_key(row["fixed"]):
        out.update(state="below", target="%s >= %s" % (branch, row["fixed"]),
                   text="driver %s is below %s (bulletin %s)" % (version, row["fixed"], row["bulletin"]))
    else:
        out.update(state="ok", text="driver %s meets bulletin %s (%s >= %s)" % (
            version, row["bulletin"], branch, row["fixed"]))
    return out


def driver_version_of(result):
    """(version, where it was read: "facts" or "doctor") of a per-host result; (None, None) when none is."""
    result = _d(result)
    facts = _d(result.get("gpu"))
    if isinstance(facts.get("driver_version"), str) and facts["driver_version"].strip():
        return facts["driver_version"].strip(), "facts"
    nvml = _d(_d(_d(result.get("doctor")).get("evidence")).get("nvml"))
    if isinstance(nvml.get("driver_version"), str) and nvml["driver_version"].strip():
        return nvml["driver_version"].strip(), "doctor"
    return None, None


def where_of(result):
    """"container", "vm", "bare metal" or None (not known): who administers the driver follows from it."""
    container = in_container(result)
    host = _d(_d(_d(result).get("gpu")).get("host"))
    if container is True:
        return "container"
    if container is False and host:
        return "vm" if host.get("virtualization") else "bare metal"
    return None


def _context(result, where):
    host = _d(_d(_d(result).get("gpu")).get("host"))
    if where == "container":
        return "%s container" % host["container_kind"] if host.get("container_kind") else "a container"
    if where == "vm":
        return "a VM (%s)" % host.get("virtualization")
    return where


_CACHE = {}
_NO_DRIVER = _unknown("no driver version in the facts or the doctor's evidence")
_CPU_HOST = _item("ok", "CPU host: no GPU driver to check")


def _answer(version, source, where, context):
    got = assess(version)
    row = got["row"] or {}
    extra = {"driver_version": version, "driver_version_from": source, "branch": got["branch"], "where": where,
             "floor": row.get("fixed"), "bulletin": row.get("bulletin"), "bulletin_date": row.get("date"),
             "security_fixes": row.get("security_fixes"), "as_of": table.AS_OF}
    if got["state"] == "ok":
        return _item("ok", got["text"], **extra)
    if got["state"] == "unreadable":
        return _item("unknown", got["text"], got["text"], **extra)
    if got["state"] == "not_in_table":
        fix = "refresh the table (scripts/driver-bulletins) or check NVIDIA's bulletins by hand"
        return _item("unknown", got["text"], got["text"], fix=fix, note="note: " + got["text"], **extra)
    if where in ("vm", "bare metal"):
        status, remedy = "fail", FIX_HERE
        fix = ("update the NVIDIA driver on this host to %s (a driver update, by hand or the image's tooling; "
               "gpufleet never updates a driver by itself; reboot or reload the kernel modules after)" % got["target"])
        said = "%s; fix here on %s: update the driver to %s" % (got["text"], context, got["target"])
    elif where == "container":
        status, remedy = "warn", PROVIDER
        fix = "the driver is the host's, the provider's: ask the provider for %s, or rent another box" % got["target"]
        said = "%s; the driver belongs to the provider (%s): ask them for %s" % (got["text"], context, got["target"])
    else:
        status, remedy = "warn", None
        fix = ("on a VM or bare metal, update the NVIDIA driver to %s; in a container it is the provider's: ask "
               "them" % got["target"])
        said = "%s; container or not is not known: update the driver to %s, or ask the provider" % (
            got["text"], got["target"])
    return _item(status, said, remedy=remedy, fix=fix, note="note: " + said, **extra)


def driver_security_item(result):
    """The item for one per-host result: its driver (``driver_version_of``) against the table, judged by whose the
    driver is (``where_of``). Never raises on odd data."""
    version, source = driver_version_of(result)
    if version is None:
        return _CPU_HOST if is_cpu_host(result) else _NO_DRIVER
    where = where_of(result)
    context = _context(result, where)
    key = (version, source, where, context)
    hit = _CACHE.get(key)
    if hit is None:
        hit = _answer(version, source, where, context)
        if len(_CACHE) < 10000:
            _CACHE[key] = hit
    return hit
