"""The storage and network group of the fleet report (issue 51) on its own fixture fleet, tests/fixtures/report-box/
(README there): the judgement's verdicts, the "Storage and network" table in fleet.html and fleet.md, the box_*
columns and check_box in fleet.csv, the host row's ``box`` in fleet.json (valid against the schema), the
gpufleet_host_box_* series through promtool, the GPU history's "measured slow on <date>" when the machine comes
back; and a fleet without that evidence reported as before (the golden reports, tests/unit/test_report_golden.py,
hold it byte for byte; here: none of the group's words appear).
"""

import copy
import csv
import datetime
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from gpufleet.controller import report
from gpufleet.controller.judgement import history

ROOT = Path(__file__).resolve().parents[2]
BOX = ROOT / "tests" / "fixtures" / "report-box"
PLAIN = ROOT / "tests" / "fixtures" / "report"
SCHEMA = ROOT / "docs" / "schema" / "fleet.schema.json"
NOW = datetime.datetime(2026, 12, 7, 10, 0, tzinfo=datetime.timezone.utc)

VERDICTS = {
    "box-vast-slowdisk-01": "return to provider: disk reads 48 MB/s at random 32 KiB, listing 2,500 MB/s (below 0.3x)",
    "box-runpod-ok-02": "keep",
    "box-malformed-04": "keep (note: storage/network evidence unreadable: disk is 'fast', not a table; dns is 'ok', "
                        "not a list; download mb_s is 'lots', not a number)",
    "box-vast-slownet-06": "return to provider: download 3.1 MB/s (25 Mbit/s) from huggingface.co, listing 1,049 "
                           "Mbit/s (below 0.3x)",
    "box-none-07": "keep",
}
ITEM = {"box-vast-slowdisk-01": "fail", "box-runpod-ok-02": "ok", "box-nolisting-03": "warn",
        "box-malformed-04": "unknown", "box-noegress-05": "warn", "box-vast-slownet-06": "fail",
        "box-step4-08": "unknown"}


@pytest.fixture(scope="module")
def summary():
    return report.summarize(report.load_results(BOX), now=NOW)


@pytest.fixture(scope="module")
def hosts(summary):
    return {h["host"]: h for h in summary["hosts"]}


def test_verdicts_and_the_checklist_item(hosts):
    for name, verdict in VERDICTS.items():
        assert hosts[name]["verdict"] == verdict, name
    assert hosts["box-nolisting-03"]["verdict"].startswith("keep (note: disk reads 152 MB/s sequentially")
    assert {h: hosts[h]["checklist"]["box"]["status"] for h in ITEM} == ITEM
    assert "box" not in hosts["box-none-07"]["checklist"] and "box" not in hosts["box-none-07"]
    assert hosts["box-vast-slowdisk-01"]["return_action"].startswith("vast.ai: destroy instance 1001")


def test_json_row_and_schema(summary, hosts):
    row = hosts["box-vast-slowdisk-01"]["box"]
    assert row["disk"]["rand_read_mb_s"] == 48.3 and row["listing"]["disk_read_mb_s"] == 2500
    assert row["listing"]["source"] == "vast.ai disk_bw/inet_down/inet_up/disk_space" and row["problems"] == []
    assert hosts["box-malformed-04"]["box"]["problems"]
    assert summary["totals"]["checklist"]["box"] == {"ok": 1, "warn": 2, "fail": 2, "unknown": 3}
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")
    data = json.loads(report.to_json(summary))
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(data)


def test_csv_has_the_group_after_the_checklist(summary):
    rows = list(csv.DictReader(io.StringIO(report.to_csv(summary))))
    header = list(rows[0])
    assert header.index("check_history") < header.index("check_box") < header.index("box_data_path")
    first = {r["host"]: r for r in rows if r["gpu_index"] in ("0", "")}
    slow = first["box-vast-slowdisk-01"]
    assert (slow["box_disk_read_mb_s"], slow["box_disk_read_kind"], slow["box_listing_disk_read_mb_s"],
            slow["check_box"]) == ("48.3", "random_32kib", "2500", "fail")
    assert first["box-nolisting-03"]["box_disk_read_kind"] == "sequential"
    assert first["box-none-07"]["box_data_path"] == "" and first["box-none-07"]["box_dns"] == ""


@pytest.mark.parametrize("render", [report.to_markdown, report.to_html], ids=["md", "html"])
def test_pages_show_the_storage_and_network_table(summary, render):
    page = render(summary)
    start = page.index("Storage and network")
    table = page[start:page.index("Renter's checklist", start)]
    for name in ITEM:
        assert name in table
    assert "box-none-07" not in table  # no evidence, no row
    assert "48 MB/s at random 32 KiB x8 (listing 2,500 MB/s)" in table
    assert "3.1 MB/s (25 Mbit/s) from huggingface.co; listing 1,049 Mbit/s" in table
    assert "2,000 files in 14.2 s (p90 9.1 ms)" in table and "/workspace (fuse.mfs)" in table
    assert "storage and network" in page[page.index("Renter's checklist"):]  # the checklist's column


def test_a_fleet_without_box_evidence_shows_nothing_of_it():
    s = report.summarize(report.load_results(PLAIN), now=NOW)
    for text in (report.to_markdown(s), report.to_html(s), report.to_csv(s), report.to_prometheus(s)):
        assert "Storage and network" not in text and "box_" not in text and "storage and network" not in text
    assert all("box" not in h and "box" not in h["checklist"] for h in s["hosts"])
    assert "box" not in s["totals"]["checklist"]


def test_prometheus_series_pass_promtool(summary, tmp_path):
    text = report.to_prometheus(summary)
    assert 'gpufleet_host_box_disk_read_bytes_per_second{host="box-vast-slowdisk-01",kind="random_32k"} 48300000' \
        in text
    assert 'gpufleet_host_box_below_listing{host="box-vast-slowdisk-01",kind="disk_read"} 1' in text
    assert 'gpufleet_host_box_below_listing{host="box-runpod-ok-02",kind="download"} 0' in text
    assert 'gpufleet_host_box_listing_bytes_per_second{host="box-runpod-ok-02",kind="download"} 637750000' in text
    assert 'host="box-none-07"' not in "".join(line for line in text.splitlines(True) if "_box_" in line)
    tool = shutil.which("promtool")
    if not tool:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    path = tmp_path / "gpufleet.prom"
    path.write_text(text)
    with open(path, "rb") as fh:
        proc = subprocess.run([tool, "check", "metrics"], stdin=fh, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_machine_measured_slow_is_flagged_when_rented_again():
    """Run 1 measures the vast machine 50001 slow (and returns it); run 2 rents it again as another instance, whose
    pre-check has no box record yet: the history says when and what was measured, with the figures kept."""
    first = report.load_results(BOX)
    kept = history.update(history.empty(), report.summarize(first, now=NOW), now=NOW)
    entry = kept["hosts"]["box-vast-slowdisk-01"]
    assert entry["box"]["figures"]["disk_rand_read_mb_s"] == 48.3
    assert entry["box"]["slow"] == [VERDICTS["box-vast-slowdisk-01"].split(": ", 1)[1]]
    assert "box" in kept["hosts"]["box-runpod-ok-02"] and kept["hosts"]["box-runpod-ok-02"]["box"]["slow"] == []
    again = copy.deepcopy(next(r for r in first if r["host"] == "box-runpod-ok-02"))
    again.update(host="vast-2001", provider="vastai", provider_id="2001", provider_machine_id="50001")
    del again["check"]["box"]
    later = report.summarize([again], now=NOW + datetime.timedelta(days=1), history=kept)
    (h,) = later["hosts"]
    said = [f for f in h["history"] if f["code"] == history.CODE_MEASURED_SLOW]
    assert said and said[0]["message"] == (
        "measured slow on 2026-12-07 10:00 on host box-vast-slowdisk-01 (vastai 1001, machine 50001): disk reads "
        "48 MB/s at random 32 KiB, listing 2,500 MB/s (below 0.3x)")
    assert h["checklist"]["history"]["status"] == "fail"  # the box was returned: it is on the known-bad list too
    assert any(r.startswith("history: measured slow on 2026-12-07") for r in h["reasons"])


def test_the_same_rental_measuring_again_is_judged_on_its_own_figures():
    first = report.load_results(BOX)
    kept = history.update(history.empty(), report.summarize(first, now=NOW), now=NOW)
    again = copy.deepcopy(next(r for r in first if r["host"] == "box-nolisting-03"))
    later = report.summarize([again], now=NOW, history=kept)
    assert not [f for f in later["hosts"][0]["history"] if f["code"] == history.CODE_MEASURED_SLOW]
    del again["check"]["box"]
    later = report.summarize([again], now=NOW, history=kept)
    said = [f["message"] for f in later["hosts"][0]["history"] if f["code"] == history.CODE_MEASURED_SLOW]
    assert said and said[0].startswith("measured slow on 2026-12-07 10:00: disk reads 152 MB/s sequentially")
    assert later["hosts"][0]["action"] is None  # a warning with its date: keep stays keep


def test_below_listing_is_written_only_where_a_figure_met_a_claim(summary):
    """No listing (03), no figure (05's failed download, no upload), or a figure not held against the listing (02's
    upload of 0.9 s, too short to judge): no sample, never a 0 that reads as fine."""
    text = report.to_prometheus(summary)
    below = {line.split(" ")[0] for line in text.splitlines() if line.startswith("gpufleet_host_box_below_listing{")}
    assert below == {'gpufleet_host_box_below_listing{host="%s",kind="%s"}' % hk for hk in [
        ("box-vast-slowdisk-01", "disk_read"), ("box-vast-slowdisk-01", "download"),
        ("box-runpod-ok-02", "disk_read"), ("box-runpod-ok-02", "download"),
        ("box-noegress-05", "disk_read"),
        ("box-vast-slownet-06", "disk_read"), ("box-vast-slownet-06", "download")]}


def test_a_step_that_did_not_finish_reads_unknown_in_the_report(hosts):
    h = hosts["box-step4-08"]
    assert h["verdict"] == "keep (note: storage and network not measured: step 4 did not finish: the storage and " \
                           "network probe (box_probe) did not return within the 60 s deadline)"
    assert h["checklist"]["box"]["status"] == "unknown" and h["box"]["error"].startswith("step 4 did not finish")
