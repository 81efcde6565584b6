"""NVIDIA container toolkit: CVE floor, package version checks, dpkg version order, daemon.json merge."""

import functools
import json
from pathlib import Path

import pytest
from gpufleet.host.cuda import ctk


def at(version, **override):
    pkgs = dict.fromkeys(ctk.PACKAGES, version)
    pkgs.update(override)
    return pkgs


def by_code(findings, code):
    return [f for f in findings if f["code"] == code]


# ---- the CVE table ----------------------------------------------------------------------------

def test_cve_rows_have_sources_and_the_floor_covers_every_verified_fix():
    assert ctk.FLOOR == "1.19.1"
    for row in ctk.CVES:
        assert row["cve"].startswith("CVE-") and row["summary"] and row["source"]
        if row["fixed"]:
            assert ctk.compare_versions(row["fixed"], ctk.FLOOR) <= 0
    fixed = {r["cve"]: r["fixed"] for r in ctk.CVES}
    assert fixed["CVE-2024-0132"] == "1.16.2"
    assert fixed["CVE-2024-0134"] == "1.17.0"
    assert fixed["CVE-2025-23359"] == "1.17.4"
    assert fixed["CVE-2025-23266"] == fixed["CVE-2025-23267"] == "1.17.8"


def test_cve_2026_24260_is_fixed_in_1_19_1_per_bulletin_5850_and_sets_the_floor():
    row = [r for r in ctk.CVES if r["cve"] == "CVE-2026-24260"]
    assert len(row) == 1
    row = row[0]
    assert row["fixed"] == "1.19.1" == ctk.FLOOR and row["confidence"] == "V"
    assert "a_id 5850" in row["source"] and "nvidia.custhelp.com/app/answers/detail/a_id/5850" in row["source"]
    # the newest verified fix is the floor: nothing in the table is fixed later
    newest = max((r["fixed"] for r in ctk.CVES if r["fixed"]), key=functools.cmp_to_key(ctk.compare_versions))
    assert newest == ctk.FLOOR
    # no row is left without a verified fixed version
    assert all(r["fixed"] for r in ctk.CVES)


def test_preferred_is_at_or_above_the_floor():
    assert ctk.PREFERRED == "1.20.0"
    assert ctk.compare_versions(ctk.PREFERRED, ctk.FLOOR) > 0


# ---- check_versions ---------------------------------------------------------------------------

def test_current_toolkit_has_no_findings():
    assert ctk.check_versions(at("1.20.0-1")) == []


def test_at_the_floor_is_fine_but_newer_is_preferred():
    findings = ctk.check_versions(at("1.19.1-1"))
    assert not [f for f in findings if f["severity"] != "info"]
    preferred = by_code(findings, "below_preferred")
    assert preferred and "1.20.0 or later is preferred" in preferred[0]["message"]
    assert "shared/reference" not in preferred[0]["message"]


@pytest.mark.parametrize("version", ["1.19.0-1", "1.18.2-1", "1.17.9-1", "1.17.8-1", "1.19.1~rc.1-1"])
def test_every_release_before_1_19_1_is_below_the_floor_for_cve_2026_24260(version):
    # bulletin 5850: "all versions up to and including 1.19.0"; no 1.18.x fix exists
    below = by_code(ctk.check_versions(at(version)), "below_floor")
    assert len(below) == 1 and below[0]["cves"] == ["CVE-2026-24260"]
    assert "below the floor 1.19.1" in below[0]["message"]


@pytest.mark.parametrize(("version", "cves"), [
    ("1.17.7-1", ["CVE-2025-23266", "CVE-2025-23267", "CVE-2026-24260"]),
    ("1.17.4-1", ["CVE-2025-23266", "CVE-2025-23267", "CVE-2026-24260"]),
    ("1.17.3-1", ["CVE-2025-23359", "CVE-2025-23266", "CVE-2025-23267", "CVE-2026-24260"]),
    ("1.17.0-1", ["CVE-2024-0135", "CVE-2024-0136", "CVE-2024-0137", "CVE-2025-23359", "CVE-2025-23266",
                  "CVE-2025-23267", "CVE-2026-24260"]),
    ("1.16.1-1", ["CVE-2024-0132", "CVE-2024-0133", "CVE-2024-0134", "CVE-2024-0135", "CVE-2024-0136",
                  "CVE-2024-0137", "CVE-2025-23359", "CVE-2025-23266", "CVE-2025-23267", "CVE-2026-24260"]),
    ("1.17.8~rc.1-1", ["CVE-2025-23266", "CVE-2025-23267", "CVE-2026-24260"]),  # a release candidate is before 1.17.8
])
def test_below_floor_names_the_cves_that_apply(version, cves):
    findings = ctk.check_versions(at(version))
    below = by_code(findings, "below_floor")
    assert len(below) == 1
    f = below[0]
    assert f["severity"] == "error" and f["cves"] == cves and f["version"] == version
    assert sorted(f["packages"]) == sorted(ctk.PACKAGES)
    assert "below the floor 1.19.1" in f["message"]
    for cve in cves:
        assert cve in f["message"]
    assert not by_code(findings, "version_mismatch")


def test_mismatched_versions_are_reported_with_each_package():
    findings = ctk.check_versions(at("1.20.0-1", **{"libnvidia-container1": "1.19.0-1"}))
    mismatch = by_code(findings, "version_mismatch")
    assert len(mismatch) == 1
    assert "libnvidia-container1 1.19.0-1" in mismatch[0]["message"]
    assert "nvidia-container-toolkit 1.20.0-1" in mismatch[0]["message"]
    below = by_code(findings, "below_floor")
    assert [f["packages"] for f in below] == [["libnvidia-container1"]]


def test_versions_equal_in_dpkg_terms_are_one_version():
    findings = ctk.check_versions(at("1.20.0-1", **{"libnvidia-container1": "0:1.20.0-1"}))
    assert not by_code(findings, "version_mismatch")


def test_missing_packages():
    pkgs = at("1.20.0-1")
    del pkgs["libnvidia-container-tools"]
    pkgs["nvidia-container-toolkit-base"] = None
    findings = ctk.check_versions(pkgs)
    missing = by_code(findings, "missing_package")
    assert sorted(f["packages"][0] for f in missing) == ["libnvidia-container-tools", "nvidia-container-toolkit-base"]
    assert all(f["severity"] == "error" for f in missing)


def test_nothing_installed_is_one_finding():
    for installed in ({}, None, {"docker.io": "20.10.24+dfsg1-1"}):
        findings = ctk.check_versions(installed)
        assert [f["code"] for f in findings] == ["not_installed"]


def test_garbage_version_is_a_finding_not_a_crash():
    findings = ctk.check_versions(at("1.20.0-1", **{"libnvidia-container1": "latest version"}))
    assert by_code(findings, "unparseable_version")[0]["packages"] == ["libnvidia-container1"]


def test_a_cve_without_a_verified_fix_is_an_info_finding(monkeypatch):
    row = ctk._cve(cve="CVE-2099-0001", fixed=None, confidence="U", summary="reported, no fixed version yet",
                   source="test row")
    monkeypatch.setattr(ctk, "CVES", [*ctk.CVES, row])
    findings = ctk.check_versions(at("1.20.0-1"))
    assert [f["code"] for f in findings] == ["unverified_cve"] and findings[0]["cves"] == ["CVE-2099-0001"]
    assert ctk.cves_below("1.0.0-1")[-1]["cve"] == "CVE-2026-24260"  # a row without a fix is never "below"


def test_a_stricter_floor_can_be_passed():
    findings = ctk.check_versions(at("1.20.0-1"), floor="1.20.1")
    assert by_code(findings, "below_floor")[0]["cves"] == []


# ---- dpkg version order -----------------------------------------------------------------------

# a OP b as dpkg --compare-versions orders them (data: tests/unit/data/dpkg-version-order.json).
VERSION_ORDER = json.loads((Path(__file__).resolve().parent / "data" / "dpkg-version-order.json").read_text())


@pytest.mark.parametrize(("a", "op", "b"), VERSION_ORDER["cases"])
def test_compare_versions(a, op, b):
    result = ctk.compare_versions(a, b)
    assert {"<": result < 0, "==": result == 0, ">": result > 0}[op]
    assert ctk.compare_versions(b, a) == -result


@pytest.mark.parametrize("bad", ["", None, "abc", "1.0 beta", "x:1.0", "1.0-", "a:b"])
def test_bad_versions_raise(bad):
    with pytest.raises(ctk.VersionError):
        ctk.compare_versions(bad, "1.0")


def test_parse_version():
    assert ctk.parse_version("1:1.17.8-1") == (1, "1.17.8", "1")
    assert ctk.parse_version("1.17.8") == (0, "1.17.8", "")
    assert ctk.parse_version("1.0-1-2") == (0, "1.0-1", "2")


# ---- daemon.json ------------------------------------------------------------------------------

NVIDIA = {"path": "/usr/bin/nvidia-container-runtime", "args": []}


def test_new_file_from_nothing():
    for existing in (None, "", "  \n"):
        text, changed = ctk.merge_daemon_json(existing)
        assert changed
        assert json.loads(text) == {"runtimes": {"nvidia": NVIDIA}}


def test_output_is_what_nvidia_ctk_writes():
    # Go's json.MarshalIndent(cfg, "", "    "): sorted keys, 4 spaces, no trailing newline
    text, _ = ctk.merge_daemon_json('{"log-driver": "json-file"}')
    assert text == ('{\n    "log-driver": "json-file",\n    "runtimes": {\n        "nvidia": {\n'
                    '            "args": [],\n            "path": "/usr/bin/nvidia-container-runtime"\n'
                    '        }\n    }\n}')


def test_merge_keeps_every_other_key():
    existing = {
        "data-root": "/mnt/docker",
        "log-driver": "json-file",
        "log-opts": {"max-size": "100m", "max-file": "3"},
        "registry-mirrors": ["https://mirror.gcr.io"],
        "exec-opts": ["native.cgroupdriver=systemd"],
        "max-concurrent-downloads": 10,
        "live-restore": True,
        "runtimes": {"runsc": {"path": "/usr/local/bin/runsc", "runtimeArgs": ["--platform=kvm"]}},
    }
    text, changed = ctk.merge_daemon_json(json.dumps(existing))
    assert changed
    merged = json.loads(text)
    expected = dict(existing)
    expected["runtimes"] = dict(existing["runtimes"], nvidia=NVIDIA)
    assert merged == expected


def test_second_merge_changes_nothing():
    text, changed = ctk.merge_daemon_json('{"log-driver":"json-file","log-opts":{"max-size":"10m"}}',
                                          set_default=True)
    assert changed
    again, changed_again = ctk.merge_daemon_json(text, set_default=True)
    assert not changed_again and again == text


def test_already_configured_file_is_returned_untouched():
    # someone else's formatting and key order: no change, no rewrite
    existing = '{"runtimes":{"nvidia":{"args":[],"path":"/usr/bin/nvidia-container-runtime"}},\n"debug":true}\n'
    text, changed = ctk.merge_daemon_json(existing)
    assert not changed and text is existing


def test_set_default_runtime():
    text, changed = ctk.merge_daemon_json('{"default-runtime": "runc"}', set_default=True)
    assert changed and json.loads(text)["default-runtime"] == "nvidia"
    # without set_default an existing default is left alone, as nvidia-ctk does
    text, _ = ctk.merge_daemon_json('{"default-runtime": "runc"}')
    assert json.loads(text)["default-runtime"] == "runc"
    text, _ = ctk.merge_daemon_json("{}")
    assert "default-runtime" not in json.loads(text)


def test_existing_nvidia_runtime_with_another_path_is_updated():
    existing = json.dumps({"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": ["--debug"]}},
                           "log-driver": "local"})
    text, changed = ctk.merge_daemon_json(existing)
    assert changed
    merged = json.loads(text)
    assert merged["runtimes"]["nvidia"] == NVIDIA
    assert merged["log-driver"] == "local"
    text, changed = ctk.merge_daemon_json(text, runtime_path="nvidia-container-runtime")
    assert changed and json.loads(text)["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"


def test_null_runtimes_is_treated_as_empty():
    text, changed = ctk.merge_daemon_json('{"runtimes": null, "log-driver": "json-file"}')
    assert changed and json.loads(text) == {"runtimes": {"nvidia": NVIDIA}, "log-driver": "json-file"}


def test_cdi_feature_merges_into_existing_features():
    text, changed = ctk.merge_daemon_json('{"features": {"containerd-snapshotter": true}}', enable_cdi=True)
    assert changed
    assert json.loads(text)["features"] == {"cdi": True, "containerd-snapshotter": True}


def test_html_characters_are_escaped_like_go():
    text, _ = ctk.merge_daemon_json('{"labels": ["a<b>&c"]}')
    assert "a\\u003cb\\u003e\\u0026c" in text
    assert json.loads(text)["labels"] == ["a<b>&c"]


@pytest.mark.parametrize(("existing", "fragment"), [
    ('{"log-driver": "json-file",}', "not valid JSON"),
    ("{'single': 'quotes'}", "not valid JSON"),
    ('["runtimes"]', "JSON object at the top level"),
    ('"nvidia"', "JSON object at the top level"),
    ('{"runtimes": ["nvidia"]}', "'runtimes' is a list"),
    (b"\xff\xfe{}", "not UTF-8"),
])
def test_unmergeable_files_raise_and_are_never_overwritten(existing, fragment):
    with pytest.raises(ctk.DaemonJsonError, match=fragment):
        ctk.merge_daemon_json(existing)


def test_features_of_the_wrong_type_raise_only_when_cdi_is_asked_for():
    with pytest.raises(ctk.DaemonJsonError, match="'features' is a str"):
        ctk.merge_daemon_json('{"features": "cdi"}', enable_cdi=True)
    text, changed = ctk.merge_daemon_json('{"features": "cdi"}')
    assert changed and json.loads(text)["features"] == "cdi"
