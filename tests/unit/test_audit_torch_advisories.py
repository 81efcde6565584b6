"""Checklist item torch_advisories: the host's torch against the sourced advisory table (issue 36).

The host results are the report fixtures (tests/fixtures/report/): cpu-box-09.json carries a real doctor torch
probe, a gpufleet venv and its packages; what a test changes in them (the torch version, a pre-check's
environments in the shape playbooks/check.yml keeps them) is named there.
"""

import csv
import datetime
import io
import json

import pytest
from gpufleet.controller import report
from gpufleet.controller.checklist import audit, torch_advisories
from gpufleet.controller.checklist import build as checklist
from gpufleet.controller.checklist import item as checkitem

from tests.unit.doubles import FIXTURES

SCHEMA_FILE = FIXTURES.parents[1] / "docs" / "schema" / "fleet.schema.json"

NOW = datetime.datetime(2025, 6, 3, 9, 30, tzinfo=datetime.timezone.utc)
OLD = "2.5.1+cu121"  # roles/torch's default pin: open to CVE-2025-32434 (fixed 2.6.0) and CVE-2026-24747 (2.10.0)


def result(name="cpu-box-09.json"):
    return json.loads((FIXTURES / "report" / name).read_text())


def with_torch(version, name="cpu-box-09.json"):
    """The fixture with ``version`` as the torch the doctor imported and the gpufleet venv holds."""
    r = result(name)
    r["doctor"]["evidence"]["torch"]["version"] = version
    r["gpu"]["readiness"]["venv"]["packages"]["torch"] = version
    return r


def without_torch(r):
    r["doctor"]["evidence"]["torch"] = None
    r["doctor"]["evidence"]["torch_skipped"] = "torch is not installed in /opt/gpufleet/venv/bin/python"
    del r["gpu"]["readiness"]["venv"]["packages"]["torch"]
    return r


def item(r):
    return checklist.checklist(r)["torch_advisories"]


def test_the_item_is_in_the_checklist_after_security_and_before_history():
    assert ("torch_advisories", "torch security advisories") in checkitem.ITEMS
    keys = [k for k, _ in report.CHECK_ITEMS]
    assert keys.index("torch_advisories") == keys.index("security") + 1 and keys[-1] == "history"
    assert "check_torch_advisories" in report.CSV_COLUMNS


def test_an_old_torch_warns_with_both_advisories_and_the_release_that_fixes_them():
    got = item(with_torch(OLD))
    assert got["status"] == "warn" and got["reason"] is None
    assert got["summary"].startswith(
        "torch 2.5.1+cu121: CVE-2025-32434 (fixed in 2.6.0), CVE-2026-24747 (fixed in 2.10.0): "
        "torch.load of untrusted files; upgrade to >= 2.10.0")
    assert "version from the doctor's torch probe" in got["summary"]
    assert [(a["id"], a["fixed"]) for a in got["advisories"]] == [("CVE-2025-32434", "2.6.0"),
                                                                  ("CVE-2026-24747", "2.10.0")]
    assert all(a["source"] for a in got["advisories"])
    assert got["torch_version"] == OLD and got["version_from"] == "doctor"
    assert "role torch: torch_version >= 2.10.0" in got["fix"]


def test_a_torch_between_the_fixes_names_only_the_advisory_still_open():
    got = item(with_torch("2.7.1+cu126"))
    assert got["status"] == "warn"
    assert "CVE-2025-32434" not in got["summary"]
    assert got["summary"].startswith("torch 2.7.1+cu126: CVE-2026-24747 (fixed in 2.10.0): torch.load of untrusted "
                                     "files; upgrade to >= 2.10.0")


@pytest.mark.parametrize("version", ["2.10.0", "2.10.0+cu128", "2.13.0+cpu"])
def test_a_patched_torch_is_ok_and_says_what_was_checked(version):
    got = item(with_torch(version))
    assert got["status"] == "ok" and got["advisories"] == [] and got["reason"] is None
    assert got["summary"].startswith("torch %s: no open advisory among those checked: CVE-2025-32434" % version)
    assert "fix" not in got


def test_a_prerelease_of_the_fixed_version_still_warns():
    got = item(with_torch("2.10.0a0+git1a2b3c"))
    assert got["status"] == "warn" and [a["id"] for a in got["advisories"]] == ["CVE-2026-24747"]


def test_no_torch_anywhere_is_unknown_and_says_so():
    got = item(without_torch(result()))
    assert got["status"] == "unknown"
    assert got["summary"].startswith("no torch found to check")
    assert "doctor: torch is not installed in /opt/gpufleet/venv/bin/python" in got["reason"]
    bare = item(result("gpu-h100-01.json"))  # facts, no doctor evidence, no readiness: nothing names a torch
    assert bare["status"] == "unknown" and bare["summary"].startswith("no torch found to check") and bare["reason"]
    unreachable = checklist.checklist(result("gpu-unreach-05.json"))["torch_advisories"]
    assert unreachable["status"] == "unknown" and unreachable["summary"].startswith("no torch found to check")


def test_a_version_that_is_not_one_is_unknown_not_ok():
    got = item(with_torch("unknown"))
    assert got["status"] == "unknown" and got["summary"].startswith("no torch version to check")
    assert "'unknown'" in got["reason"]


def test_the_doctors_probe_comes_first_then_the_pre_check_then_the_venv():
    r = with_torch("2.13.0+cpu")
    r["gpu"]["readiness"]["venv"]["packages"]["torch"] = OLD
    assert item(r)["status"] == "ok" and item(r)["version_from"] == "doctor"
    # The doctor's probe died importing torch (no version): the pre-check's judged environment is next.
    r["doctor"]["evidence"]["torch"] = {"importable": None, "version": None, "error": "torch probe died (139)"}
    r["check"] = {"torch_python": "/opt/conda/bin/python", "judged": {"python": "/opt/conda/bin/python", "why": "x"},
                  "environments": [
                      {"python": "/usr/bin/python3", "kind": "system", "version": "3.11.2", "torch": None,
                       "nvml": None},
                      {"python": "/opt/conda/bin/python", "kind": "conda", "version": "3.11.9", "torch": "2.6.0",
                       "nvml": None}]}
    got = item(r)
    assert got["version_from"] == "check" and got["torch_version"] == "2.6.0"
    assert got["summary"].startswith("torch 2.6.0: CVE-2026-24747 (fixed in 2.10.0)")
    assert "version from the pre-check's environment /opt/conda/bin/python" in got["summary"]
    # No torch in the judged environment: the gpufleet venv's packages.
    r["check"]["environments"][1]["torch"] = None
    got = item(r)
    assert got["version_from"] == "venv" and got["torch_version"] == OLD
    assert "version from the gpufleet venv /opt/gpufleet/venv" in got["summary"]


def test_the_item_never_changes_the_hosts_status_or_action():
    """summarize on the same hosts with a patched and an old torch: only the checklist item differs."""
    hosts = ("cpu-box-09.json", "gpu-h100-01.json")

    def fleet(version):
        out = []
        for name in hosts:
            r = result(name)
            if name == "gpu-h100-01.json":
                r["doctor"].setdefault("evidence", {})["torch"] = {"importable": True, "version": version,
                                                                   "cuda": "12.4", "is_available": True}
            else:
                r = with_torch(version, name)
            out.append(r)
        return report.summarize(out, now=NOW)

    patched, old = fleet("2.13.0+cu126"), fleet(OLD)
    for a, b in zip(patched["hosts"], old["hosts"]):
        assert a["checklist"]["torch_advisories"]["status"] == "ok"
        assert b["checklist"]["torch_advisories"]["status"] == "warn"
        for key in ("status", "action", "verdict", "reasons"):
            assert a[key] == b[key], (a["host"], key)
    assert {h["host"]: h["status"] for h in old["hosts"]} == {"cpu-box-09": "ok", "gpu-h100-01": "ok"}
    assert old["totals"]["hosts_by_status"] == patched["totals"]["hosts_by_status"]
    assert old["totals"]["checklist"]["torch_advisories"] == {"ok": 0, "warn": 2, "fail": 0, "unknown": 0}
    rows = list(csv.DictReader(io.StringIO(report.to_csv(old))))
    assert rows and {r["check_torch_advisories"] for r in rows} == {"warn"}
    assert "CVE-2026-24747 (fixed in 2.10.0)" in report.to_markdown(old)
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    assert [e.message for e in validator.iter_errors(json.loads(report.to_json(old)))] == []
    assert "torch_advisories" in validator.schema["$defs"]["checklist"]["required"]
    enum = validator.schema["$defs"]["check_item"]["properties"]["version_from"]["enum"]
    assert enum == list(audit.TORCH_VERSION_SOURCES)


def test_the_table_it_reads_is_the_sourced_one():
    assert {a["id"] for a in torch_advisories.ADVISORIES} == {a["id"] for a in item(with_torch(OLD))["advisories"]}
    assert torch_advisories.advisories(None) == [] and torch_advisories.advisories("2.10.0") == []
