"""Torch security advisories: the sourced table and advisories(torch_version)."""

import pytest
from gpufleet.controller.checklist import torch_advisories as ta

CVE_LOAD, CVE_UNPICKLER = "CVE-2025-32434", "CVE-2026-24747"


def ids(version):
    return [a["id"] for a in ta.advisories(version)]


def test_the_table_names_its_sources():
    for a in ta.ADVISORIES:
        assert a["id"].startswith("CVE-") and a["summary"] and a["fixed"] and a["affected"]
        assert "https://" in a["source"] and "shared/reference" not in a["source"]
        assert ta.version_key(a["fixed"]) is not None
    by_id = {a["id"]: a for a in ta.ADVISORIES}
    assert by_id[CVE_LOAD]["fixed"] == "2.6.0" and "GHSA-53q9-r3pm-6pq6" in by_id[CVE_LOAD]["aliases"]
    assert by_id[CVE_UNPICKLER]["fixed"] == "2.10.0"


@pytest.mark.parametrize(("version", "expected"), [
    ("2.5.1", [CVE_LOAD, CVE_UNPICKLER]),               # the house default pin
    ("2.5.1+cu121", [CVE_LOAD, CVE_UNPICKLER]),
    ("1.13.1+cu117", [CVE_LOAD, CVE_UNPICKLER]),
    ("2.6.0", [CVE_UNPICKLER]),
    ("2.6.0+cu124", [CVE_UNPICKLER]),
    ("2.9.1+cu128", [CVE_UNPICKLER]),
    ("2.10.0", []),
    ("2.10.0+cu130", []),
    ("2.14.1", []),
    ("2.14.1+cu130", []),
    ("3.0", []),
    # pre-releases, nightlies and source builds sort before their release (PEP 440)
    ("2.7.0a0+git1a2b3c4", [CVE_UNPICKLER]),
    ("2.5.0a0+e000cf0ad9.nv24.10", [CVE_LOAD, CVE_UNPICKLER]),    # an NGC container's build
    ("2.8.0.dev20250101", [CVE_UNPICKLER]),
    ("2.8.0.dev20250101+cu128", [CVE_UNPICKLER]),
    ("2.6.0.dev20241112+cu124", [CVE_LOAD, CVE_UNPICKLER]),
    ("2.6.0rc1", [CVE_LOAD, CVE_UNPICKLER]),
    ("2.10.0a0+gitdeadbee", [CVE_UNPICKLER]),
    ("2.10.0.post1", []),
    ("  v2.9.0  ", [CVE_UNPICKLER]),
])
def test_advisories_by_version(version, expected):
    assert ids(version) == expected


@pytest.mark.parametrize("garbage", [None, "", "   ", "latest", "torch", "2.x", "cu121", "+cu121", "2.5.1+",
                                     "2.5.1 cu121", 2.5, 251, b"2.5.1", ["2.5.1"], {"version": "2.5.1"}])
def test_garbage_gives_nothing(garbage):
    assert ta.advisories(garbage) == []


def test_each_entry_has_the_shape_the_report_reads():
    got = ta.advisories("2.5.1+cu121")
    assert [sorted(a) for a in got] == [["fixed", "id", "source", "summary"]] * 2
    first = got[0]
    assert first["id"] == CVE_LOAD and first["fixed"] == "2.6.0"
    assert "weights_only=True" in first["summary"] and "GHSA-53q9-r3pm-6pq6" in first["summary"]
    assert "affects <= 2.5.1" in first["summary"]
    assert first["source"].startswith("https://github.com/pytorch/pytorch/security/advisories/GHSA-53q9-r3pm-6pq6")
    assert got[1]["id"] == CVE_UNPICKLER and got[1]["fixed"] == "2.10.0"


def test_version_key_orders_like_pep_440():
    order = ["2.6.0.dev1", "2.6.0a0", "2.6.0a1", "2.6.0b1", "2.6.0rc1", "2.6.0", "2.6.0+cu124", "2.6.0.post1",
             "2.6.1", "2.10.0"]
    keys = [ta.version_key(v) for v in order]
    assert all(k is not None for k in keys)
    assert keys == sorted(keys)
    assert ta.version_key("2.6.0") == ta.version_key("2.6.0+cu124") == ta.version_key("2.6")
