"""GPU history across report runs (module_utils/gpufleet/controller/judgement/history.py): two runs of the fleet
report made with
report.summarize from the recorded results in tests/fixtures/report/, what the second run's report says about a
swapped GPU and a box returned before, and a history file that is missing, corrupt or too big."""

import copy
import csv
import datetime
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet.controller import report
from gpufleet.controller.judgement import history

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "report"
CLI = ROOT / "scripts" / "fleet-report"
SCHEMA_FILE = ROOT / "docs" / "schema" / "fleet.schema.json"
RUN1 = datetime.datetime(2026, 3, 1, 8, 0, tzinfo=datetime.timezone.utc)
RUN2 = datetime.datetime(2026, 3, 2, 8, 0, tzinfo=datetime.timezone.utc)
NEW_UUID = "GPU-5b0e9c1d-4c2a-4f37-a0d1-9e8c7b6a5f40"


def fixture(name):
    """A recorded host result: gpu-h100-01 is healthy (8 GPUs), gpu-a100-02 is to be returned (GPU 3 lost, ECC)."""
    return json.loads((FIXTURES / ("%s.json" % name)).read_text(encoding="utf-8"))


def rented(result, host, provider_id, machine_id):
    """The result as a vast.ai plugin host: its name, instance id and machine id."""
    out = copy.deepcopy(result)
    out.update(host=host, provider="vastai", provider_id=provider_id, provider_machine_id=machine_id)
    return out


def two_runs(first, second, known_bad=None):
    """(summary of run 1, summary of run 2 read against the history of run 1, the history after run 2)."""
    s1 = report.summarize(first, now=RUN1, history=history.empty())
    h1 = history.update(history.empty(), s1)
    s2 = report.summarize(second, now=RUN2, history=history.with_known_bad(h1, known_bad or {}))
    return s1, s2, history.update(h1, s2)


def host(summary, name):
    return next(h for h in summary["hosts"] if h["host"] == name)


# --------------------------------------------------------------------------- a GPU swapped between two runs
def test_a_swapped_gpu_is_flagged_with_the_uuids_that_left_and_came():
    before = fixture("gpu-h100-01")
    after = copy.deepcopy(before)
    old_uuid = after["gpu"]["gpus"][3]["uuid"]
    after["gpu"]["gpus"][3]["uuid"] = NEW_UUID
    s1, s2, _ = two_runs([before], [after])
    first, second = host(s1, "gpu-h100-01"), host(s2, "gpu-h100-01")
    assert first["history"] == [] and first["checklist"]["history"]["status"] == "ok"
    assert "first seen in this run" in first["checklist"]["history"]["summary"]
    [swap] = second["history"]
    assert swap["code"] == "gpu_swapped" and swap["severity"] == "warning"
    assert swap["left"] == [old_uuid] and swap["came"] == [NEW_UUID]
    assert old_uuid in swap["message"] and NEW_UUID in swap["message"] and "2026-03-01 08:00" in swap["message"]
    # The host's new GPU is judged by this run's checks: the status stays, the renter reads why in the reasons.
    assert second["status"] == "ok" and second["action"] is None
    assert any(r.startswith("history: GPU swapped since the last run") for r in second["reasons"])
    assert second["checklist"]["history"]["status"] == "warn"
    assert s2["totals"]["checklist"]["history"]["warn"] == 1
    # Every rendering carries it: the reason and the checklist cell.
    assert NEW_UUID in report.to_markdown(s2) and NEW_UUID in report.to_html(s2)
    rows = list(csv.DictReader(io.StringIO(report.to_csv(s2))))  # one row per GPU
    assert rows and all(r["check_history"] == "warn" and "GPU swapped" in r["host_reasons"] for r in rows)


def test_the_same_gpus_again_are_no_finding():
    same = fixture("gpu-h100-01")
    _s1, s2, _ = two_runs([same], [copy.deepcopy(same)])
    h = host(s2, "gpu-h100-01")
    assert h["history"] == [] and h["status"] == "ok"
    assert h["checklist"]["history"] == {"status": "ok", "reason": None,
                                         "summary": "same 8 GPU(s) as in the last run; first seen 2026-03-01 08:00; "
                                                    "not on the known-bad list"}


# --------------------------------------------------------------------------- a box returned before, rented again
def test_a_returned_box_rented_again_under_a_new_instance_is_flagged_by_its_machine_id():
    bad = rented(fixture("gpu-a100-02"), "vast-1005", 1005, 50005)
    # Run 2: a new rental (another host name and instance id) on the same machine; it even looks healthy now
    # (the recorded healthy H100's facts), so only the history can tell.
    again = rented(fixture("gpu-h100-01"), "vast-2001", 2001, "50005")
    s1, s2, h2 = two_runs([bad], [again])
    assert host(s1, "vast-1005")["action"] == report.ACTION_RETURN
    assert host(s1, "vast-1005")["checklist"]["history"]["status"] == "fail"  # to be returned: goes on the list
    h = host(s2, "vast-2001")
    [found] = h["history"]
    assert found["code"] == "known_bad" and found["severity"] == "error" and found["same_rental"] is False
    assert found["matched"] == ["machine:vastai:50005"]
    assert "returned before: machine 50005 was on host vast-1005 (vastai 1005, machine 50005)" in found["message"]
    assert "2026-03-01 08:00" in found["message"]
    assert h["status"] == "degraded" and h["action"] == report.ACTION_RETURN
    assert "instance 2001" in h["return_action"] and "machine_id 50005" in h["return_action"]
    assert h["checklist"]["history"]["status"] == "fail"
    [listed] = s2["bad_hosts"]
    assert listed["host"] == "vast-2001" and listed["action"] == report.ACTION_RETURN
    assert any("returned before" in r for r in listed["reasons"])
    assert "vast-1005" in report.to_markdown(s2) and "returned before" in report.to_html(s2)
    # The new rental is now on the known-bad list too: both boxes, the first one's flag time kept.
    assert set(h2["known_bad"]) == {"rental:vastai:1005", "rental:vastai:2001"}
    assert h2["known_bad"]["rental:vastai:1005"]["flagged_at"] == "2026-03-01T08:00:00+00:00"


def test_a_gpu_seen_on_a_returned_box_is_flagged_without_any_provider_id():
    bad = fixture("gpu-a100-02")
    moved = fixture("gpu-h100-01")
    moved["host"] = "static-box"
    moved["gpu"]["gpus"][0]["uuid"] = bad["gpu"]["gpus"][1]["uuid"]
    _s1, s2, _ = two_runs([bad], [moved])
    [found] = host(s2, "static-box")["history"]
    assert found["matched"] == ["gpu:%s" % bad["gpu"]["gpus"][1]["uuid"]]
    assert "was on host gpu-a100-02" in found["message"] and host(s2, "static-box")["action"] == report.ACTION_RETURN


def test_a_box_still_rented_after_its_flag_says_so():
    bad = rented(fixture("gpu-a100-02"), "vast-1005", 1005, 50005)
    _s1, s2, _ = two_runs([bad], [copy.deepcopy(bad)])
    [found] = host(s2, "vast-1005")["history"]
    assert found["same_rental"] is True
    assert found["message"].startswith("flagged 'return to provider' since 2026-03-01 08:00 and not given back")


def test_all_zero_uuids_tie_no_boxes_together():
    """Anonymised captures and some virtual GPUs report GPU-00000000-...: never 'the same GPU'."""
    zero = "GPU-00000000-0000-0000-0000-000000000000"
    bad, other = fixture("gpu-a100-02"), fixture("gpu-h100-01")
    bad["gpu"]["gpus"][0]["uuid"] = zero
    other["gpu"]["gpus"][0]["uuid"] = zero
    _s1, s2, h2 = two_runs([bad], [other])
    assert host(s2, "gpu-h100-01")["history"] == [] and zero not in h2["gpus"]
    assert history.real_uuid(zero) is None and history.real_uuid("[N/A]") is None
    assert history.real_uuid("GPU-00000000-0000-0000-0000-000000000200") is not None


def test_the_users_known_bad_file(tmp_path):
    path = tmp_path / "known-bad.json"
    path.write_text(json.dumps({"machines": [{"machine_id": 61234, "why": "Xid 79 twice in May"}],
                                "gpus": [{"uuid": NEW_UUID, "why": "ECC"}], "hosts": ["box-7", {"note": "nothing"}],
                                "colour": "red"}))
    entries, warnings = history.load_known_bad(str(path))
    assert set(entries) == {"machine:*:61234", "gpu:%s" % NEW_UUID, "host:box-7"}
    assert len(warnings) == 2 and "1 entry" in warnings[0] and "colour" in warnings[1]
    box = rented(fixture("gpu-h100-01"), "vast-3001", 3001, 61234)  # a machine id at any provider
    clean = fixture("gpu-h100-01")
    _s1, s2, h2 = two_runs([clean], [box, clean], known_bad=entries)
    [found] = host(s2, "vast-3001")["history"]
    assert found["source"] == "known-bad file" and "Xid 79 twice in May" in found["message"]
    assert host(s2, "vast-3001")["action"] == report.ACTION_RETURN and host(s2, "gpu-h100-01")["history"] == []
    assert "_known_bad" not in h2  # the user's list stays in the user's file
    bad_file = tmp_path / "broken.json"
    bad_file.write_text("{machines: [")
    assert history.load_known_bad(str(bad_file))[0] == {} and bad_file.exists()  # warned, never moved
    assert history.load_known_bad(str(tmp_path / "none.json")) == ({}, [])


# --------------------------------------------------------------------------- the file: corrupt, partial, bounded
def test_a_corrupt_history_is_moved_aside_with_a_warning_and_a_fresh_one_starts(tmp_path):
    path = tmp_path / "history.json"
    path.write_text('{"schema": 1, "hosts": {"a": {"host"')  # cut off mid-write
    loaded, warnings = history.load(str(path), now=RUN1)
    assert loaded == history.empty()
    [warning] = warnings
    assert "not valid JSON" in warning and "moved aside" in warning and "fresh history" in warning
    assert not path.exists() and (tmp_path / "history.json.corrupt-20260301T080000Z").exists()
    path.write_text(json.dumps(["not", "an", "object"]))
    assert "not a JSON object" in history.load(str(path), now=RUN2)[1][0]
    path.write_text(json.dumps({"schema": 99}))
    assert "schema 99" in history.load(str(path), now=RUN2)[1][0]
    assert history.load(str(tmp_path / "missing.json")) == (history.empty(), [])


def test_a_partly_damaged_history_keeps_its_good_entries(tmp_path):
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"schema": 1, "hosts": {"good": {"host": "good", "gpus": []}, "bad": 7},
                                "gpus": [1, 2], "known_bad": {}, "runs": [{"at": "x"}, "y"]}))
    loaded, [warning] = history.load(str(path))
    assert set(loaded["hosts"]) == {"good"} and loaded["gpus"] == {} and loaded["runs"] == [{"at": "x"}]
    assert "3 malformed entries dropped" in warning
    # Odd entries that survive the load never sink a report.
    loaded["hosts"]["gpu-h100-01"] = {"gpus": "not a list", "first_seen": 5}
    loaded["known_bad"]["x"] = {"gpus": 12}
    s = report.summarize([fixture("gpu-h100-01")], history=loaded)
    assert host(s, "gpu-h100-01")["checklist"]["history"]["status"] in ("ok", "unknown")


def test_the_size_is_bounded_oldest_dropped():
    limits = {"hosts": 3, "gpus": 4, "known_bad": 2, "seen_on": 2, "runs": 2}
    kept = history.empty()
    base = fixture("gpu-a100-02")  # 4 GPUs, to be returned: each run adds a known-bad box
    for n in range(5):
        box = rented(base, "vast-%d" % n, n, 500 + n)
        for i, g in enumerate(box["gpu"]["gpus"]):
            g["uuid"] = "GPU-%08d-0000-0000-0000-%012d" % (n + 1, i + 1)
        box["gpu"]["gpus"][0]["uuid"] = "GPU-aaaaaaaa-0000-0000-0000-000000000001"  # the same board every time
        now = RUN1 + datetime.timedelta(hours=n)
        kept = history.update(kept, report.summarize([box], now=now), limits=limits)
    assert sorted(kept["hosts"]) == ["vast-2", "vast-3", "vast-4"]
    assert len(kept["gpus"]) == 4 and "GPU-aaaaaaaa-0000-0000-0000-000000000001" in kept["gpus"]
    assert sorted(kept["known_bad"]) == ["rental:vastai:3", "rental:vastai:4"]
    board = kept["gpus"]["GPU-aaaaaaaa-0000-0000-0000-000000000001"]
    assert [w["host"] for w in board["seen_on"]] == ["vast-4", "vast-3"]
    assert [r["at"] for r in kept["runs"]] == ["2026-03-01T11:00:00+00:00", "2026-03-01T12:00:00+00:00"]
    assert len(json.dumps(history.update(history.empty(), report.summarize([base])))) < 4000


def test_save_is_atomic_and_round_trips(tmp_path):
    path = tmp_path / "reports" / "history.json"
    h = history.update(history.empty(), report.summarize([fixture("gpu-h100-01")], now=RUN1))
    history.save(str(path), history.with_known_bad(h, {"host:x": {"kind": "host"}}, ["w"]))
    assert os.listdir(path.parent) == ["history.json"]  # no temp file left behind
    loaded, warnings = history.load(str(path))
    assert warnings == [] and loaded == h and "_known_bad" not in json.loads(path.read_text())
    assert oct(path.stat().st_mode & 0o777) == "0o640"
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(history.HistoryError, match="cannot write the GPU history"):
        history.save(str(blocker / "history.json"), h)


def test_a_check_run_is_not_recorded_and_the_report_names_its_history():
    recorded = history.update(history.empty(), report.summarize([fixture("gpu-h100-01")], now=RUN1))
    plan = report.summarize([fixture("gpu-a100-02")], now=RUN2, check_mode=True, history=recorded)
    assert history.update(recorded, plan) == recorded
    assert plan["history"] == {"kept": True, "previous_run": "2026-03-01T08:00:00+00:00", "runs": 1, "hosts": 1,
                               "gpus": 8, "known_bad": 0, "known_bad_listed": 0, "warnings": []}
    none = report.summarize([fixture("gpu-h100-01")])
    assert none["history"]["kept"] is False and host(none, "gpu-h100-01")["history"] == []
    assert host(none, "gpu-h100-01")["checklist"]["history"]["status"] == "unknown"


def test_history_shared_names_and_the_schema(tmp_path):
    assert history.RETURN == report.ACTION_RETURN
    assert report.CHECK_ITEMS[-1] == history.CHECK_ITEM and "check_history" in report.CSV_COLUMNS
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    _s1, s2, _ = two_runs([rented(fixture("gpu-a100-02"), "vast-1005", 1005, 50005)],
                          [rented(fixture("gpu-h100-01"), "vast-2001", 2001, 50005)])
    data = json.loads(report.to_json(s2))
    assert [e.message for e in validator.iter_errors(data)] == []
    del data["hosts"][0]["history"]
    assert any("'history' is a required property" in e.message for e in validator.iter_errors(data))


# --------------------------------------------------------------------------- the CLI report.yml runs
def _cli(*args):
    return subprocess.run([sys.executable, str(CLI), *args], capture_output=True, text=True, timeout=120)


def test_fleet_report_history_option(tmp_path):
    results = tmp_path / "hosts"
    results.mkdir()
    for name in ("gpu-h100-01", "gpu-a100-02"):
        (results / ("%s.json" % name)).write_text((FIXTURES / ("%s.json" % name)).read_text())
    hist = tmp_path / "history.json"
    first = _cli(str(results), "--out", str(tmp_path / "r1"), "--history", str(hist))
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert set(json.loads(hist.read_text())["hosts"]) == {"gpu-h100-01", "gpu-a100-02"}
    # A swapped GPU, and a file the user keeps beside the history.
    data = json.loads((results / "gpu-h100-01.json").read_text())
    data["gpu"]["gpus"][0]["uuid"] = NEW_UUID
    (results / "gpu-h100-01.json").write_text(json.dumps(data))
    (tmp_path / "known-bad.json").write_text(json.dumps({"gpus": [NEW_UUID]}))
    saved = hist.read_text()
    plan = _cli(str(results), "--out", str(tmp_path / "plan"), "--history", str(hist), "--check-mode")
    assert plan.returncode == 0 and hist.read_text() == saved  # a plan is not recorded
    second = _cli(str(results), "--out", str(tmp_path / "r2"), "--history", str(hist))
    assert second.returncode == 0, second.stderr
    h = host(json.loads((tmp_path / "r2" / "fleet.json").read_text()), "gpu-h100-01")
    assert {f["code"] for f in h["history"]} == {"gpu_swapped", "known_bad"} and h["action"] == "return to provider"
    hist.write_text("garbage")
    third = _cli(str(results), "--out", str(tmp_path / "r3"), "--history", str(hist))
    assert third.returncode == 0 and "moved aside" in third.stderr and (tmp_path / "r3" / "fleet.json").exists()
    assert json.loads(hist.read_text())["schema"] == history.SCHEMA  # a fresh history, this run in it
    assert _cli(str(results), "--out", str(tmp_path / "r4"), "--known-bad", "x").returncode == 2
