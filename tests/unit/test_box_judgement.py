"""The storage and network judgement (issue 51, module_utils/gpufleet/controller/judgement/box.py): the pre-check's
``gpu_check.box`` against the provider's listing (``listing_*`` in the result), one row per rule.

Each row builds a result from a healthy box and one change, and says which finding codes it must give, what the
line must read (both numbers where a listing is held against a measurement) and the action it leads to through the
judgement's one door. A mutation a renter would notice (a floor moved, random and sequential swapped, the Mibit
unit forgotten, a null read as 0, an error read as good) fails a row here.
"""

import copy

import pytest
from gpufleet.controller.checklist import storage
from gpufleet.controller.judgement import box, door, judge

RETURN = judge.ACTION_RETURN


def _box(**over):
    """A healthy measurement: fast local disk, a fast download, quick DNS, plenty of room."""
    b = {"data_path": "/workspace", "data_path_source": "workspace", "fstype": "xfs", "mount_point": "/",
         "free_bytes": 400 * 10 ** 9, "total_bytes": 500 * 10 ** 9,
         "disk": {"method": "O_DIRECT", "why_method": None, "bytes": 268435456, "write_mb_s": 1200.0,
                  "read_mb_s": 2000.0, "rand_read_mb_s": 1800.0, "rand_block_kib": 32, "rand_threads": 8,
                  "seconds": {}, "error": None},
         "torch_files": {"path": "/workspace/p", "files": 2000, "total_s": 0.4, "p90_ms": 0.2, "fstype": "xfs",
                         "error": None},
         "dns": [{"name": "huggingface.co", "ms": 12.0, "ok": True, "error": None}],
         "download": {"url": "https://huggingface.co/x", "host": "huggingface.co", "bytes": 10 ** 8, "seconds": 1.1,
                      "mb_s": 90.0, "streams": 1, "error": None, "status": 200},
         "upload": None, "left_behind": []}
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(b.get(key), dict):
            b[key] = dict(b[key], **value)
        else:
            b[key] = value
    return b


VAST = {"listing_disk_read_mb_s": 2500, "listing_net_down_mbit": 1048.6, "listing_net_up_mbit": 524.3,
        "listing_disk_gb": 500, "listing_source": "vast.ai disk_bw/inet_down/inet_up/disk_space"}


def _result(b, listing=None):
    r = {"host": "h", "reachable": True, "failed": False, "check": {"steps": {}}}
    if b is not _NO_BOX:
        r["check"]["box"] = b
    r.update(listing or {})
    return r


_NO_BOX = object()


def _judged(result):
    row = {"gpus": [], "gate_other": [], "gpu_count": 0, "doctor": None, "box": box.read(result),
           "check": {"steps": {}, "torch_python": None, "environments": [], "judged": None}}
    found = [f for f in door.judge_host(result, row)["findings"] if f["code"].startswith("box_")]
    decided = judge.decide(list(found))
    return found, decided


# (id, box changes, listing, codes expected, words the line must hold, action)
ROWS = [
    ("healthy box with a listing", {}, VAST, [], [], None),
    ("healthy box without a listing", {}, None, [], [], None),
    ("random read far below disk_bw: return, both numbers",
     {"disk": {"rand_read_mb_s": 48.0}}, VAST, ["box_disk_below_listing"],
     ["disk reads 48 MB/s at random 32 KiB", "listing 2,500 MB/s", "below 0.3x"], RETURN),
    ("random read at 0.31x of the listing is within the spread: keep",
     {"disk": {"rand_read_mb_s": 775.0}}, VAST, [], [], None),
    ("random read just below 0.3x: return",
     {"disk": {"rand_read_mb_s": 740.0}}, VAST, ["box_disk_below_listing"], ["740 MB/s", "2,500 MB/s"], RETURN),
    ("like for like: a fast sequential read does not hide a slow random one",
     {"disk": {"rand_read_mb_s": 100.0, "read_mb_s": 3000.0}}, VAST, ["box_disk_below_listing"],
     ["100 MB/s at random 32 KiB"], RETURN),
    ("like for like: a slow sequential read is not held against disk_bw when the random read is fine",
     {"disk": {"rand_read_mb_s": 2400.0, "read_mb_s": 150.0}}, VAST, ["box_disk_slow"],
     ["150 MB/s sequentially", "< 200 MB/s"], None),
    ("no random figure: the sequential read is held against the listing, and says so",
     {"disk": {"rand_read_mb_s": None, "read_mb_s": 300.0}}, VAST, ["box_disk_below_listing"],
     ["300 MB/s sequentially (no random figure)", "listing 2,500 MB/s"], RETURN),
    ("download far below inet_down: return, MB/s and Mbit/s",
     {"download": {"mb_s": 3.1, "seconds": 10.0}}, VAST, ["box_download_below_listing"],
     ["download 3.1 MB/s (25 Mbit/s)", "listing 1,049 Mbit/s", "below 0.3x"], RETURN),
    ("download at 0.3x of 1,049 Mbit/s (39 MB/s) is kept",
     {"download": {"mb_s": 40.0}}, VAST, [], [], None),
    ("a 200 Mbit/s listing is 25 MB/s: 10 MB/s is 0.4x of it, kept (a note for the slow pull only)",
     {"download": {"mb_s": 10.0, "seconds": 5.0}}, {"listing_net_down_mbit": 200}, ["box_download_slow"],
     ["download 10 MB/s (80 Mbit/s)", "< 25 MB/s"], None),
    ("a 200 Mbit/s listing: 7 MB/s is below 0.3x (7.5 MB/s), returned",
     {"download": {"mb_s": 7.0, "seconds": 5.0}}, {"listing_net_down_mbit": 200}, ["box_download_below_listing"],
     ["download 7 MB/s (56 Mbit/s)", "listing 200 Mbit/s"], RETURN),
    ("one stream at 45 MB/s on a 5,102 Mbit/s listing: the CDN's cap, kept",
     {"download": {"mb_s": 45.0}}, {"listing_net_down_mbit": 5102}, [], [], None),
    ("one stream at 35 MB/s on a 5,102 Mbit/s listing: below the cap, returned",
     {"download": {"mb_s": 35.0}}, {"listing_net_down_mbit": 5102}, ["box_download_below_listing"],
     ["35 MB/s", "5,102 Mbit/s"], RETURN),
    ("a download too short to judge against a listing is a note at most",
     {"download": {"mb_s": 3.0, "seconds": 0.5}}, VAST, ["box_download_slow"], ["3 MB/s", "< 25 MB/s"], None),
    ("upload far below inet_up: return",
     {"upload": {"host": "speed.cloudflare.com", "mb_s": 2.0, "seconds": 5.0, "error": None}}, VAST,
     ["box_upload_below_listing"], ["upload 2 MB/s (16 Mbit/s)", "listing 524 Mbit/s"], RETURN),
    ("no listing: a slow download is a note with what it costs",
     {"download": {"mb_s": 12.0, "seconds": 8.0}}, None, ["box_download_slow"],
     ["download 12 MB/s (96 Mbit/s)", "< 25 MB/s", "140 GB model"], None),
    ("no listing: a slow sequential read and write are notes",
     {"disk": {"rand_read_mb_s": None, "read_mb_s": 150.0, "write_mb_s": 80.0}}, None,
     ["box_disk_slow", "box_disk_write_slow"], ["150 MB/s", "80 MB/s", "checkpoint"], None),
    ("no listing: a random read as slow as can be is not a return",
     {"disk": {"rand_read_mb_s": 5.0}}, None, [], [], None),
    ("import torch's opens over 10 s name the filesystem",
     {"torch_files": {"total_s": 14.2, "fstype": "fuse.mfs", "p90_ms": 9.1, "files": 2339}}, None,
     ["box_torch_files_slow"], ["14.2 s on fuse.mfs", "2,339 files", "p90 9.1 ms"], None),
    ("free space far below the listing's disk_gb: a note",
     {"free_bytes": 12 * 10 ** 9}, VAST, ["box_free_space_low"], ["12 GB free", "listing 500 GB"], None),
    ("a failed and a slow DNS lookup: a note, not a return",
     {"dns": [{"name": "pypi.org", "ms": None, "ok": False, "error": "timed out"},
              {"name": "huggingface.co", "ms": 5012.0, "ok": True, "error": None}]}, VAST,
     ["box_dns"], ["pypi.org failed: timed out", "huggingface.co took 5,012 ms"], None),
    ("no egress: unknown, a note, never slow",
     {"download": {"mb_s": None, "seconds": None, "error": "URLError: Network is unreachable"}}, VAST,
     ["box_no_egress"], ["no download from huggingface.co", "egress unknown"], None),
    ("the disk probe's own error: not measured, not good",
     {"disk": {"error": "no space left", "write_mb_s": None, "read_mb_s": None, "rand_read_mb_s": None}}, VAST,
     ["box_unmeasured"], ["disk probe failed on /workspace (xfs)", "no space left"], None),
    ("a null rate where a figure was meant: unreadable, never 0 nor good",
     {"disk": {"read_mb_s": None}}, VAST, ["box_evidence_unreadable"], ["disk read_mb_s is null"], None),
    ("a rate as text: unreadable",
     {"download": {"mb_s": "fast"}}, VAST, ["box_evidence_unreadable"], ["download mb_s is 'fast'"], None),
    ("a negative rate: unreadable",
     {"disk": {"rand_read_mb_s": -1.0}}, VAST, ["box_evidence_unreadable"], ["rand_read_mb_s is -1.0"], None),
    ("disk not a table: unreadable, the rest still judged",
     {"disk": "fast", "download": {"mb_s": 3.0, "seconds": 10.0}}, VAST,
     ["box_evidence_unreadable", "box_download_below_listing"], ["disk is 'fast', not a table"], RETURN),
]


@pytest.mark.parametrize("changes, listing, codes, words, action", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_each_rule(changes, listing, codes, words, action):
    found, decided = _judged(_result(_box(**copy.deepcopy(changes)), listing))
    assert sorted(f["code"] for f in found) == sorted(codes)
    lines = " | ".join(f["text"] for f in found)
    for word in words:
        assert word in lines, (word, lines)
    assert decided["action"] == action
    for f in found:
        if f["code"] in judge.BOX_RETURN_CODES:
            assert (f["severity"], f["action"]) == ("warning", RETURN)
        else:  # a note never changes keep on its own
            assert (f["severity"], f["action"], f["status"]) == ("info", None, None)


def test_no_box_evidence_no_finding_no_item():
    """A result without gpu_check.box (no pre-check, or one before issue 51) is judged as before."""
    result = _result(_NO_BOX, VAST)
    assert box.read(result) is None
    assert box.findings(None) == []
    assert storage.box_item(result) is None


@pytest.mark.parametrize("raw", [None, "garbled", 7, ["a"]])
def test_a_box_that_is_no_table_reads_unknown(raw):
    result = _result(raw, VAST)
    found, decided = _judged(result)
    assert [f["code"] for f in found] == ["box_evidence_unreadable"]
    assert decided["action"] is None  # a note: the GPU evidence decides the host
    assert storage.box_item(result)["status"] == "unknown"


def test_listing_is_read_from_numbers_or_numeric_text_and_nothing_else():
    listing = box.read_listing({"listing_disk_read_mb_s": "2500", "listing_net_down_mbit": 0,
                                "listing_net_up_mbit": "fast", "listing_disk_gb": True, "listing_source": 3})
    assert listing == {"disk_read_mb_s": 2500.0, "net_down_mbit": None, "net_up_mbit": None, "disk_gb": None,
                       "source": None}


def test_the_listing_line_names_where_and_whose_figure():
    found, decided = _judged(_result(_box(disk={"rand_read_mb_s": 48.0}), VAST))
    (f,) = found
    assert f["reason"].startswith(f["text"])
    assert "on /workspace (xfs)" in f["reason"] and "vast.ai disk_bw" in f["reason"]
    assert "self-reported" in f["reason"]
    assert decided["verdict"] == "return to provider: disk reads 48 MB/s at random 32 KiB, listing 2,500 MB/s " \
                                 "(below 0.3x)"
    assert f["evidence"]["measured_mb_s"] == 48.0 and f["evidence"]["listing_mb_s"] == 2500


@pytest.mark.parametrize("changes, listing, status", [
    ({}, VAST, "ok"),
    ({"disk": {"rand_read_mb_s": 48.0}}, VAST, "fail"),
    ({"download": {"mb_s": 12.0, "seconds": 8.0}}, None, "warn"),
    ({"download": {"mb_s": "x"}}, VAST, "unknown"),
    ({"download": {"mb_s": "x"}, "dns": [{"name": "a", "ok": False, "ms": None}]}, VAST, "warn"),
], ids=["ok", "fail", "warn", "unknown", "warn-with-unreadable"])
def test_the_checklist_item_follows_the_findings(changes, listing, status):
    item = storage.box_item(_result(_box(**copy.deepcopy(changes)), listing))
    assert item["status"] == status
    if status == "ok":
        assert "disk reads 1,800 MB/s at random 32 KiB (listing 2,500)" in item["summary"]
    if status == "fail":
        assert "return to provider" in item["summary"] and "2,500 MB/s" in item["summary"]
    if "unreadable" in "".join(item.get("codes") or ()):
        assert "unreadable" in item["summary"]


def test_floors_are_the_documented_ones():
    """The floors say what the docstring and docs/report.md say: 0.3x of the listing; the network floor never above
    one stream's 40 MB/s; the use floors from the reference's table."""
    assert box.LISTING_FLOOR == {"disk": 0.3, "download": 0.3, "upload": 0.3}
    assert box.NET_SINGLE_STREAM_MB_S == 40.0
    assert {k: v[0] for k, v in box.USE_FLOOR.items()} == {"read": 200.0, "write": 100.0, "download": 25.0}
    assert (box.TORCH_FILES_S, box.DNS_SLOW_MS, box.FREE_FRACTION) == (10.0, 1000.0, 0.5)


# ----------------------------------------------------------------------------- issue 51's review
def test_a_slow_import_torch_is_judged_on_the_estimate_for_the_whole_package(tmp_path):
    """The probe stops opening torch's files at its cap (2 s from check.yml): a slow filesystem gives files < listed
    and total_s about the cap, never over 10 s. The note is judged on total_s x listed / files, and says so."""
    from gpufleet.host.box import disk as boxdisk

    for i in range(1200):  # a package of 1,200 small files
        (tmp_path / ("m%04d.py" % i)).write_text("x = 1\n")
    now = [0.0]

    class Slow:  # 12 ms an open (a network filesystem's round trip), the clock advanced by each call
        def __getattr__(self, name):
            return getattr(boxdisk.os, name)

        def open(self, path, flags):
            now[0] += 0.012
            return boxdisk.os.open(path, flags)

    tf = boxdisk.torch_files(str(tmp_path), cap=2.0, limit=2000, clock=lambda: now[0],
                             ops=Slow())
    assert tf["listed"] > tf["files"] > 0 and 2.0 <= tf["total_s"] < 2.1  # what the probe really writes
    tf["fstype"] = "fuse.mfs"
    found, decided = _judged(_result(_box(torch_files=tf), None))
    assert [f["code"] for f in found] == ["box_torch_files_slow"], found
    est = tf["total_s"] * tf["listed"] / tf["files"]
    assert est > box.TORCH_FILES_S
    assert found[0]["text"].startswith("`import torch`'s file opens: about %s s on fuse.mfs" % "{:,.0f}".format(est))
    said = "(%s of %s files opened in 2 s, p90 12 ms)" % ("{:,.0f}".format(tf["files"]), "{:,.0f}".format(tf["listed"]))
    assert said in found[0]["text"]
    assert found[0]["evidence"]["estimated"] is True and decided["action"] is None


@pytest.mark.parametrize("tf, codes", [
    ({"files": 300, "listed": 2000, "total_s": 2.0, "p90_ms": 6.5}, ["box_torch_files_slow"]),  # about 13 s
    ({"files": 1500, "listed": 2000, "total_s": 2.0, "p90_ms": 1.2}, []),  # about 2.7 s
    ({"files": 2000, "listed": 2000, "total_s": 0.4}, []),
], ids=["capped-slow", "capped-fast", "all-opened"])
def test_torch_estimate_rows(tf, codes):
    found, _decided = _judged(_result(_box(torch_files=dict(tf, fstype="nfs4", path="/w/torch", error=None)), None))
    assert [f["code"] for f in found] == codes
    if codes:
        assert "about 13 s on nfs4 at /w/torch (300 of 2,000 files opened in 2 s, p90 6.5 ms)" in found[0]["text"]


@pytest.mark.parametrize("fstype", ["fuse.mfs", "nfs4", "virtiofs", "ceph", "lustre", "9p"])
def test_a_network_volume_is_not_held_against_the_machines_local_disk_listing(fstype):
    """A RunPod network volume (MooseFS) at /workspace reads far below diskThroughputMBps: the renter chose it; a
    note with both numbers and the filesystem, never a return."""
    runpod = {"listing_disk_read_mb_s": 3612, "listing_source": "RunPod diskThroughputMBps"}
    found, decided = _judged(_result(_box(fstype=fstype, disk={"rand_read_mb_s": 150.0, "read_mb_s": 400.0}), runpod))
    assert [f["code"] for f in found] == ["box_unmeasured"], found
    text = found[0]["text"]
    assert "150 MB/s at random 32 KiB on /workspace (%s)" % fstype in text and "3,612 MB/s" in text
    assert "network filesystem" in text and "not held against" in text
    assert decided["action"] is None and found[0]["severity"] == "info"
    assert storage.box_item(_result(_box(fstype=fstype, disk={"rand_read_mb_s": 150.0}), runpod))["status"] == "warn"
    # the local disk of the same machine is still held against it
    found, decided = _judged(_result(_box(fstype="xfs", disk={"rand_read_mb_s": 150.0}), runpod))
    assert [f["code"] for f in found] == ["box_disk_below_listing"] and decided["action"] == RETURN


STEP4 = {"error": "step 4 did not finish: the storage and network probe (box_probe) did not return within the 60 s "
                  "deadline"}


def test_a_step_that_did_not_finish_is_unknown_with_its_text():
    """check.yml writes {"error": "step 4 did not finish: ..."} alone when step 4 failed or timed out."""
    result = _result(dict(STEP4), VAST)
    row = box.read(result)
    assert row["error"] == STEP4["error"] and row["problems"] == [] and row["disk"] is None
    found, decided = _judged(result)
    assert [f["code"] for f in found] == ["box_evidence_unreadable"]
    assert found[0]["text"] == "storage and network not measured: " + STEP4["error"]
    assert (found[0]["severity"], found[0]["action"], decided["action"]) == ("info", None, None)
    item = storage.box_item(result)
    assert item["status"] == "unknown" and STEP4["error"] in item["summary"]
