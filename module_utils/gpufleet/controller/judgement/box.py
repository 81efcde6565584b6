# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the renter pays for beside the GPU (issue 51): the pre-check's disk and network measurements
(``gpu_check.box``, written by the host module box_probe through playbooks/check.yml) against the provider's
listing (the inventory's ``gpufleet_listing_*`` variables, which report.yml carries into the result as
``listing_*``).

``read(result)`` is the host row's ``box``: the measurements and the listing as numbers and text, and the values
that could not be read (``problems``); None when the result has no box evidence (the row then looks as it did before
issue 51). ``findings(box)`` turns that row into judgement findings (judge.finding, source "check": the pre-check's
evidence; codes judge.BOX_CODES):

- measured far below its listing (``LISTING_FLOOR``): the provider's, "return to provider", both numbers in the line;
- below what a renter's use needs, without a listing to hold it to (``USE_FLOOR``), a slow ``import torch``, little
  free space against the listing, DNS that fails or is slow, no egress: notes (severity info: they never change keep
  on their own);
- evidence that cannot be read (malformed, missing, a probe's own error): a note that says so; the checklist item
  reads "unknown". A value that cannot be read is never read as good.

Units: MB = 10^6 bytes; the listing's network figures are Mbit/s (10^6 bit/s), 8 Mbit = 1 MB.
Sources: shared/reference/renter-disk-network.md (the reference below).
"""

from .. import values as _values
from . import judge as _judge

_d = _values.as_dict
_number = _values.number
_numeric = _values.number_text
_say = _values.text

# ----------------------------------------------------------------------------- floors: data with their reasons
# Measured below this fraction of the listing, the box is not what was rented: return it. Why these and not the
# field notes' 0.5x for disk: one short run spreads about +-30 % on a shared host (the reference, section 2,
# "Size, duration, stability"), so an honest box can read 0.7x; and the listing's figure is not made as ours is:
# vast's disk_bw is fio with 16 jobs at queue depth 64 on the host's docker disk, our random read runs
# ``rand_threads`` (8) at queue depth 1 per thread, which costs an honest NVMe about another half. 0.7 x 0.5 = 0.35:
# below 0.3x no honest box reads, whatever the spread. The network listing is the host daemon's best-server Ookla
# run with several streams; ours is one stream to the CDN a job uses: the field notes' 0.3x, and never held above
# ``NET_SINGLE_STREAM_MB_S`` (below).
LISTING_FLOOR = {"disk": 0.3, "download": 0.3, "upload": 0.3}
# The network floor is never held above this (MB/s): one transfer from a model hub's CDN gives 40-400 MB/s whatever
# the box (the reference, section 3, "One stream or several"), so a single stream slower than the low end of that
# range on a box listed faster says something about the box; above it, about the CDN and the stream. A box that
# pulls at 40 MB/s or more (a 140 GB model in under an hour) is never returned for its network.
NET_SINGLE_STREAM_MB_S = 40.0
# A transfer shorter than this (seconds) is mostly TCP slow start: too short to hold against a listing.
MIN_TRANSFER_S = 1.0

# Without a listing (or above its floor): what a renter's use needs, in MB/s, each with the use and the cost in time
# (the reference's table, section 3, "What a 2026 renter needs": GB = 10^9 B). Below it: a note, never a return.
USE_FLOOR = {
    # data loading: 15 GB of shards at 200 MB/s take 75 s per pass; RunPod's network volume advertises 200-400.
    "read": (200.0, "data loading: 15 GB take more than 75 s per pass"),
    # checkpointing: a 140 GB (70B bf16) checkpoint at 100 MB/s takes 23 minutes.
    "write": (100.0, "checkpointing: a 140 GB checkpoint takes more than 23 min"),
    # model pulls: at 25 MB/s (200 Mbit/s) a 140 GB model takes 93 minutes.
    "download": (25.0, "model pulls: a 140 GB model takes more than 90 min"),
}
# ``import torch`` opens about 2,339 files (the reference, section 2, "Small-file and metadata latency"): a local
# disk opens them in about 0.02 s, Lustre in 4.3 s, an NFS home in 20 s cold. The probe opens up to 2,000 of them but
# stops at its cap (2 s in check.yml), so on a slow filesystem it opens only some: the judgement is on the estimate
# for the whole package (``torch_estimate``: the seconds taken x files listed / files opened); above this many
# seconds the filesystem is named in a note that says the figure is an estimate.
TORCH_FILES_S = 10.0
# Filesystems that are not the machine's local disk (a network or FUSE mount: RunPod's network volume is MooseFS,
# fuse.mfs; Lambda's filesystems virtiofs; NFS, Ceph, Lustre, 9p, SMB): the listing's disk figure (RunPod's
# diskThroughputMBps, vast's disk_bw: the host's docker disk) is not theirs, so a figure measured there is never held
# against it: a note that says so, with both numbers (the reference, section 1, RunPod "Storage").
NETWORK_FS_PREFIXES = ("fuse.", "nfs")
NETWORK_FS = frozenset(["virtiofs", "ceph", "lustre", "9p", "cifs", "smb3", "glusterfs", "gpfs", "beegfs"])
# A DNS lookup slower than this (ms) is slow: glibc waits 5 s per dead nameserver, a healthy resolver answers in ms.
DNS_SLOW_MS = 1000.0
# Free space on the data path below this fraction of the listing's disk_gb is "far below the listing" (a note:
# df in a container can show the host's disk or a quota, the reference, section 2, "Where the renter's data lives").
FREE_FRACTION = 0.5

# The listing's keys in a result (report.yml's ``listing_*``, from the inventory's ``gpufleet_listing_*``).
LISTING_KEYS = ("disk_read_mb_s", "net_down_mbit", "net_up_mbit", "disk_gb", "source")

_CODES = _judge.BOX_CODES


# ----------------------------------------------------------------------------- reading the evidence
def _problem(problems, where, value, kind="a number"):
    problems.append("%s is %s, not %s" % (where, "null" if value is None else "%.40r" % (value,), kind))


def _rate(part, key, where, problems, required=False):
    """A rate (MB/s) of ``part``: a finite number >= 0, else None with a problem (a null is "not measured": a
    problem only where the measurement was meant to give one, ``required``)."""
    value = part.get(key)
    got = _number(value)
    if got is None or got < 0:
        if value is not None or required:
            _problem(problems, "%s %s" % (where, key), value)
        return None
    return got


def _text_or_none(value):
    return value if isinstance(value, str) and value.strip() else None


def _read_disk(raw, problems):
    if raw is None:
        problems.append("no disk measurement")
        return None
    if not isinstance(raw, dict):
        _problem(problems, "disk", raw, "a table")
        return None
    error = _text_or_none(raw.get("error"))
    out = {"method": _text_or_none(raw.get("method")), "why_method": _text_or_none(raw.get("why_method")),
           "error": error, "bytes": _number(raw.get("bytes")),
           "rand_block_kib": _number(raw.get("rand_block_kib")), "rand_threads": _number(raw.get("rand_threads"))}
    for key in ("write_mb_s", "read_mb_s", "rand_read_mb_s"):
        out[key] = _rate(raw, key, "disk", problems, required=error is None and key != "rand_read_mb_s")
    return out


def _read_transfer(raw, name, problems, required):
    if raw is None:
        if required:
            problems.append("no %s measurement" % name)
        return None
    if not isinstance(raw, dict):
        _problem(problems, name, raw, "a table")
        return None
    error = _text_or_none(raw.get("error"))
    out = {"host": _text_or_none(raw.get("host")), "url": _text_or_none(raw.get("url")), "error": error,
           "bytes": _number(raw.get("bytes")), "seconds": _number(raw.get("seconds")),
           "streams": _number(raw.get("streams")), "status": _number(raw.get("status"))}
    out["mb_s"] = _rate(raw, "mb_s", name, problems, required=error is None)
    return out


def _read_dns(raw, problems):
    if raw is None:
        return []
    if not isinstance(raw, list):
        _problem(problems, "dns", raw, "a list")
        return []
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not _text_or_none(entry.get("name")):
            _problem(problems, "dns entry %d" % i, entry, "a lookup with a name")
            continue
        ok = entry.get("ok")
        if not isinstance(ok, bool):
            _problem(problems, "dns %s ok" % entry["name"], ok, "true/false")
            ok = None
        out.append({"name": entry["name"], "ok": ok, "ms": _number(entry.get("ms")),
                    "error": _text_or_none(entry.get("error"))})
    return out


def _read_torch_files(raw, problems):
    if raw is None:
        return None
    if not isinstance(raw, dict):
        _problem(problems, "torch_files", raw, "a table")
        return None
    error = _text_or_none(raw.get("error"))
    return {"path": _text_or_none(raw.get("path")), "files": _number(raw.get("files")),
            "listed": _number(raw.get("listed")),
            "total_s": _rate(raw, "total_s", "torch_files", problems, required=error is None),
            "p90_ms": _number(raw.get("p90_ms")), "fstype": _text_or_none(raw.get("fstype")), "error": error}


def read_listing(result):
    """The listing's claims in a result (``listing_*``; inventory variables arrive as numbers or numeric text):
    {disk_read_mb_s, net_down_mbit, net_up_mbit, disk_gb, source}, a figure that is not a positive number None."""
    result = _d(result)
    out = {}
    for key in LISTING_KEYS[:-1]:
        value = _numeric(result.get("listing_" + key))
        out[key] = value if value is not None and value > 0 else None
    out["source"] = _text_or_none(result.get("listing_source"))
    return out


# The parts of a record box_probe writes; a record with none of them but an ``error`` is check.yml's own, written
# when step 4 failed or ran past the deadline: {"error": "step 4 did not finish: <text>"}.
_MEASURED = ("data_path", "disk", "torch_files", "dns", "download", "upload")


def _empty_row(listing, problems, error=None):
    return {"data_path": None, "data_path_source": None, "fstype": None, "mount_point": None, "free_bytes": None,
            "total_bytes": None, "disk": None, "torch_files": None, "dns": [], "download": None, "upload": None,
            "listing": listing, "problems": problems, "error": error}


def read(result):
    """The host row's ``box`` (see the module docstring), or None when the result has no box evidence."""
    check = _d(_d(result).get("check"))
    if "box" not in check:
        return None
    raw = check["box"]
    problems = []
    listing = read_listing(result)
    if not isinstance(raw, dict):
        _problem(problems, "box", raw, "a table")
        return _empty_row(listing, problems)
    error = _text_or_none(raw.get("error"))
    if raw.get("error") is not None and error is None:
        _problem(problems, "box error", raw.get("error"), "a text")
    if error is not None and not any(key in raw for key in _MEASURED):
        return _empty_row(listing, problems, error)  # the step did not finish: nothing measured, said as unknown
    return {
        "data_path": _text_or_none(raw.get("data_path")),
        "data_path_source": _text_or_none(raw.get("data_path_source")),
        "fstype": _text_or_none(raw.get("fstype")), "mount_point": _text_or_none(raw.get("mount_point")),
        "free_bytes": _number(raw.get("free_bytes")), "total_bytes": _number(raw.get("total_bytes")),
        "disk": _read_disk(raw.get("disk"), problems),
        "torch_files": _read_torch_files(raw.get("torch_files"), problems),
        "dns": _read_dns(raw.get("dns"), problems),
        "download": _read_transfer(raw.get("download"), "download", problems, required=True),
        "upload": _read_transfer(raw.get("upload"), "upload", problems, required=False),
        "listing": listing, "problems": problems, "error": error,
    }


# ----------------------------------------------------------------------------- numbers as a line says them
def mb_s(value):
    """MB/s as a line says it: "2,500", "48", "3.1"."""
    if value is None:
        return "?"
    if value >= 10:
        return "{:,.0f}".format(value)
    return ("%.1f" % value).rstrip("0").rstrip(".") or "0"


def count(value):
    """A count as a line says it: "2,339"; "?" when unknown."""
    return "{:,.0f}".format(value) if value is not None else "?"


def mbit(value):
    return "{:,.0f}".format(value) if value is not None else "?"


def disk_read_used(disk):
    """(MB/s, how it was read) of the figure the listing's disk_bw is held against: the random read (vast's disk_bw
    is a random 32 KiB read), the sequential read only where no random figure was made."""
    if disk is None:
        return None, None
    if disk.get("rand_read_mb_s") is not None:
        block = disk.get("rand_block_kib")
        return disk["rand_read_mb_s"], "at random %s KiB" % (_say(block) if block is not None else "?")
    if disk.get("read_mb_s") is not None:
        return disk["read_mb_s"], "sequentially (no random figure)"
    return None, None


def network_fs(fstype):
    """True for a filesystem that is not the machine's local disk (``NETWORK_FS``): fuse.*, nfs*, virtiofs, ..."""
    name = (fstype or "").lower()
    return name.startswith(NETWORK_FS_PREFIXES) or name in NETWORK_FS


def torch_estimate(tf):
    """(seconds, estimated) of ``import torch``'s file opens from a ``torch_files`` reading: the seconds taken where
    every listed file was opened, else those seconds x listed / opened (the probe stopped at its cap); (None,
    False) when nothing was timed."""
    total, files, listed = tf.get("total_s"), tf.get("files"), tf.get("listed")
    if total is None:
        return None, False
    if files and listed and listed > files:
        return total * listed / files, True
    return total, False


def held_against_listing(box):
    """{kind: (measured, claim)} of the figures the judgement holds against the listing (kinds disk_read, download,
    upload): both measured and claimed, the disk not on a network filesystem, a transfer without an error and not too
    short to judge. What is not held against it has no entry."""
    out = {}
    if not isinstance(box, dict):
        return out
    listing = _d(box.get("listing"))
    read, _how = disk_read_used(box.get("disk"))
    claim = listing.get("disk_read_mb_s")
    if read is not None and claim is not None and not network_fs(box.get("fstype")):
        out["disk_read"] = (read, claim)
    for name, key in (("download", "net_down_mbit"), ("upload", "net_up_mbit")):
        t = _d(box.get(name))
        claim = listing.get(key)
        short = t.get("seconds") is not None and t["seconds"] < MIN_TRANSFER_S
        if t.get("mb_s") is not None and not t.get("error") and claim is not None and not short:
            out[name] = (t["mb_s"], claim)
    return out


def _where(box):
    path, fstype = box.get("data_path"), box.get("fstype")
    if not path:
        return ""
    return " on %s%s" % (path, " (%s)" % fstype if fstype else "")


# ----------------------------------------------------------------------------- findings
def _reason(text, box, listing):
    """The longer line of a below-listing finding: where it was measured and whose figure the listing is."""
    where = _where(box) if box else ""
    source = listing.get("source")
    return "%s%s%s" % (text, where, "; listing from %s, self-reported by the host" % source if source else "")


def _ret(code, text, reason, evidence):
    return _judge.finding(
        "check", code, "warning", text, reason=reason, action=_judge.ACTION_RETURN, status="degraded",
        evidence=evidence,
        meaning="measured far below what the provider's listing claims (below %s of it): the box is not what was "
                "rented" % ", ".join(sorted({"%gx" % f for f in LISTING_FLOOR.values()})),
        remedy="give the box back and leave its machine out of later searches; the listing is self-reported")


def _note(code, text, evidence, meaning=None, remedy=None):
    return _judge.finding("check", code, "info", text, evidence=evidence, meaning=meaning, remedy=remedy)


def _disk_findings(box, listing):
    disk = box.get("disk")
    out = []
    if disk is None:
        return out
    if disk.get("error"):
        out.append(_note(_CODES["unmeasured"], "disk probe failed%s: %s" % (_where(box), disk["error"]),
                         {"error": disk["error"]}))
    read, how = disk_read_used(disk)
    claim = listing.get("disk_read_mb_s")
    below = False
    far = read is not None and claim is not None and read < LISTING_FLOOR["disk"] * claim
    if far and network_fs(box.get("fstype")):
        below = True  # the renter's network volume against the machine's local disk: said, never held against it
        text = "disk reads %s MB/s %s%s, below %gx of the listing's %s MB/s: not held against it, a network " \
               "filesystem is not the machine's local disk the listing measures" % (
                   mb_s(read), how, _where(box), LISTING_FLOOR["disk"], mb_s(claim))
        out.append(_note(_CODES["unmeasured"], text, {
            "measured_mb_s": read, "how": how, "listing_mb_s": claim, "fstype": box.get("fstype"),
            "method": disk.get("method")},
            meaning="the data path is a network or FUSE filesystem (a RunPod network volume is MooseFS): the "
                    "listing's disk figure is the machine's local disk, so the two are not compared",
            remedy="keep data that is read often on the container's local disk, or measure it there "
                   "(check_data_path)"))
    elif far:
        below = True
        text = "disk reads %s MB/s %s, listing %s MB/s (below %gx)" % (
            mb_s(read), how, mb_s(claim), LISTING_FLOOR["disk"])
        out.append(_ret(_CODES["disk_below_listing"], text, _reason(text, box, listing),
                        {"measured_mb_s": read, "how": how, "listing_mb_s": claim, "floor": LISTING_FLOOR["disk"],
                         "method": disk.get("method")}))
    seq = disk.get("read_mb_s")
    floor, use = USE_FLOOR["read"]
    if seq is not None and seq < floor and not below:
        out.append(_note(_CODES["disk_slow"], "disk reads %s MB/s sequentially%s (< %s MB/s: %s)" % (
            mb_s(seq), _where(box), mb_s(floor), use), {"read_mb_s": seq, "floor_mb_s": floor}))
    write = disk.get("write_mb_s")
    floor, use = USE_FLOOR["write"]
    if write is not None and write < floor:
        method = disk.get("method")
        out.append(_note(_CODES["disk_write_slow"], "disk writes %s MB/s%s%s (< %s MB/s: %s)" % (
            mb_s(write), " (%s)" % method if method else "", _where(box), mb_s(floor), use),
            {"write_mb_s": write, "floor_mb_s": floor, "method": method}))
    return out


def _transfer_findings(box, listing, name, claim_key):
    t = box.get(name)
    if t is None:
        return []
    claim = listing.get(claim_key)
    if t.get("error") or t.get("mb_s") is None:
        if name == "download" and t.get("error"):
            return [_note(_CODES["no_egress"], "no download from %s: %s (egress unknown)" % (
                t.get("host") or "the test URL", t["error"]), {"error": t["error"], "status": t.get("status")},
                meaning="the box could not fetch the test file: egress, DNS, a proxy or the server; not a measure",
                remedy="check the box's network and rerun the pre-check")]
        if t.get("error"):
            return [_note(_CODES["unmeasured"], "%s not measured: %s" % (name, t["error"]), {"error": t["error"]})]
        return []
    rate = t["mb_s"]
    fro = " %s %s" % ("from" if name == "download" else "to", t["host"]) if t.get("host") else ""
    short = t.get("seconds") is not None and t["seconds"] < MIN_TRANSFER_S
    if claim is not None and not short:
        floor = min(LISTING_FLOOR[name] * claim / 8.0, NET_SINGLE_STREAM_MB_S)
        if rate < floor:
            text = "%s %s MB/s (%s Mbit/s)%s, listing %s Mbit/s (below %gx)" % (
                name, mb_s(rate), mbit(rate * 8), fro, mbit(claim), LISTING_FLOOR[name])
            return [_ret(_CODES["%s_below_listing" % name], text, _reason(text, None, listing),
                         {"measured_mb_s": rate, "listing_mbit": claim, "floor_mb_s": floor,
                          "streams": t.get("streams"), "seconds": t.get("seconds")})]
    if name == "download":
        floor, use = USE_FLOOR["download"]
        if rate < floor:
            return [_note(_CODES["download_slow"], "download %s MB/s (%s Mbit/s)%s (< %s MB/s: %s)" % (
                mb_s(rate), mbit(rate * 8), fro, mb_s(floor), use), {"measured_mb_s": rate, "floor_mb_s": floor})]
    return []


def _torch_findings(box):
    tf = box.get("torch_files")
    if tf is None:
        return []
    if tf.get("error"):
        return [_note(_CODES["unmeasured"], "small-file opens not measured: %s" % tf["error"], {"error": tf["error"]})]
    seconds, estimated = torch_estimate(tf)
    if seconds is None or seconds <= TORCH_FILES_S:
        return []
    fstype = tf.get("fstype") or box.get("fstype") or "an unknown filesystem"
    path = tf.get("path") or box.get("data_path")
    at = " at %s" % path if path else ""
    p90 = _say(tf.get("p90_ms")) or "?"
    if estimated:  # the probe stopped at its cap: the whole package's figure is an estimate, and the line says so
        text = "`import torch`'s file opens: about %s s on %s%s (%s of %s files opened in %s s, p90 %s ms)" % (
            "{:,.0f}".format(seconds), fstype, at, count(tf.get("files")), count(tf.get("listed")),
            _say(round(tf["total_s"], 1)), p90)
    else:
        text = "`import torch`'s file opens take %s s on %s%s (%s files, p90 %s ms)" % (
            _say(round(seconds, 1)), fstype, at, count(tf.get("files")), p90)
    return [_note(_CODES["torch_files_slow"], text, {
        "seconds": round(seconds, 1), "estimated": estimated, "total_s": tf.get("total_s"), "files": tf.get("files"),
        "listed": tf.get("listed"), "fstype": fstype, "path": path},
        meaning="opening many small files is slow on this filesystem (a network or FUSE mount answers each open "
                "with a round trip): imports, pip installs and small-file datasets crawl there",
        remedy="keep the venv and small files on the container's local disk")]


def _space_findings(box, listing):
    free, claim = box.get("free_bytes"), listing.get("disk_gb")
    if free is None or claim is None or free >= FREE_FRACTION * claim * 1e9:
        return []
    return [_note(_CODES["free_space_low"], "%s GB free%s, listing %s GB" % (
        "{:,.0f}".format(free / 1e9), _where(box), "{:,.0f}".format(claim)),
        {"free_bytes": free, "listing_gb": claim})]


def _dns_findings(box):
    bad = []
    for e in box.get("dns") or ():
        if e["ok"] is False:
            bad.append("%s failed%s" % (e["name"], ": %s" % e["error"] if e.get("error") else ""))
        elif e["ms"] is not None and e["ms"] > DNS_SLOW_MS:
            bad.append("%s took %s ms" % (e["name"], "{:,.0f}".format(e["ms"])))
    if not bad:
        return []
    return [_note(_CODES["dns"], "DNS: %s" % "; ".join(bad), {"lookups": bad},
                  meaning="name lookups fail or take over %g s: every new connection waits on them" % (
                      DNS_SLOW_MS / 1000),
                  remedy="check /etc/resolv.conf (a dead first nameserver costs 5 s a lookup)")]


def findings(box):
    """The findings of a host row's ``box`` (``read``); none for None."""
    if not isinstance(box, dict):
        return []
    listing = _d(box.get("listing"))
    out = []
    if box.get("error") and not any(box.get(key) for key in _MEASURED):
        return out + [_note(_CODES["unreadable"], "storage and network not measured: %s" % box["error"], {
            "error": box["error"]},
            meaning="the pre-check's storage and network step failed or ran past its time: nothing was measured, "
                    "and nothing is read as good", remedy="rerun the pre-check (playbooks/check.yml)")]
    if box.get("error"):
        out.append(_note(_CODES["unmeasured"], "storage and network: %s" % box["error"], {"error": box["error"]}))
    if box.get("problems"):
        out.append(_note(_CODES["unreadable"], "storage/network evidence unreadable: %s" % "; ".join(
            box["problems"][:4]), {"problems": list(box["problems"])},
            meaning="the pre-check's disk or network measurement is missing or not of the shape box_probe writes: "
                    "it is not read as good", remedy="rerun the pre-check (playbooks/check.yml)"))
    out += _disk_findings(box, listing)
    out += _transfer_findings(box, listing, "download", "net_down_mbit")
    out += _transfer_findings(box, listing, "upload", "net_up_mbit")
    out += _torch_findings(box)
    out += _space_findings(box, listing)
    out += _dns_findings(box)
    return out
