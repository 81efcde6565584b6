"""Security floors of the audit: distro package versions in dpkg order, with the evidence that decided.

The version strings are recorded ones:
- Debian 12: 1:9.2p1-2+deb12u1 and 1:9.2p1-2+deb12u3 are entries of openssh-client's changelog.Debian.gz in
  a Debian 12 image (the deb12u3 entry, DSA-5724-1, reads "Disable async-signal-unsafe code from the
  sshsigdie() function" and does not name CVE-2024-6387); 1:9.2p1-2+deb12u10 is the package in
  tests/fixtures/host/debian12_dpkg-query.txt, and DEBIAN12_CHANGELOG_CVES is every CVE id that package's
  changelog names.
- Debian 13: 1:10.0p1-7+deb13u4 is openssh-client in a Debian 13 image's package list.
- Ubuntu: USN-6859-1 (canonical/ubuntu-security-notices osv/usn/USN-6859-1.json) fixes jammy in
  1:8.9p1-3ubuntu0.10 and noble in 1:9.6p1-3ubuntu13.3, and lists 1:8.9p1-3ubuntu0.7 and 1:9.6p1-3ubuntu13
  (noble's release version) among the versions before the fix.
"""

import copy
import shutil
import subprocess

import pytest
from gpufleet.controller.checklist import audit
from gpufleet.controller.checklist import build as checklist

from tests.unit.test_audit import h100

DEBIAN12 = {"id": "debian", "version_id": "12", "pretty_name": "Debian GNU/Linux 12 (bookworm)"}
DEBIAN13 = {"id": "debian", "version_id": "13", "pretty_name": "Debian GNU/Linux 13 (trixie)"}
UBUNTU2204 = {"id": "ubuntu", "version_id": "22.04", "pretty_name": "Ubuntu 22.04.4 LTS"}
UBUNTU2404 = {"id": "ubuntu", "version_id": "24.04", "pretty_name": "Ubuntu 24.04.1 LTS"}
UBUNTU2310 = {"id": "ubuntu", "version_id": "23.10", "pretty_name": "Ubuntu 23.10"}  # no row in the table
DEBIAN12_CHANGELOG_CVES = [
    "CVE-2021-28041", "CVE-2021-41617", "CVE-2023-28531", "CVE-2023-38408", "CVE-2023-48795", "CVE-2023-51384",
    "CVE-2023-51385", "CVE-2025-26465", "CVE-2025-32728", "CVE-2025-61984", "CVE-2025-61985", "CVE-2026-3497",
    "CVE-2026-35385", "CVE-2026-35386", "CVE-2026-35387", "CVE-2026-35388", "CVE-2026-35414"]
CHANGELOG = "/usr/share/doc/openssh-server/changelog.Debian.gz"


def sshd(version, package=None, changelog=None):
    out = {"version": version, "version_source": "ssh -V", "package_version": package, "config": None,
           "reason": "not root: sshd -T (effective config) not read"}
    if changelog is not None:
        out["changelog"] = changelog
    return out


# (os-release, ssh -V version, dpkg package version, verdict, evidence)
RECORDED = [
    (DEBIAN12, "9.2p1", "1:9.2p1-2+deb12u1", "affected", "distro table"),
    (DEBIAN12, "9.2p1", "1:9.2p1-2+deb12u3", "fixed", "distro table"),
    (DEBIAN12, "9.2p1", "1:9.2p1-2+deb12u10", "fixed", "distro table"),
    (DEBIAN13, "10.0p1", "1:10.0p1-7+deb13u4", "fixed", "distro table"),
    (UBUNTU2204, "8.9p1", "1:8.9p1-3ubuntu0.7", "affected", "distro table"),
    (UBUNTU2204, "8.9p1", "1:8.9p1-3ubuntu0.10", "fixed", "distro table"),
    (UBUNTU2404, "9.6p1", "1:9.6p1-3ubuntu13", "affected", "distro table"),
    (UBUNTU2404, "9.6p1", "1:9.6p1-3ubuntu13.3", "fixed", "distro table"),
    (None, "9.8p1", None, "not_affected", "upstream version"),   # an upstream build, the first fixed release
    (None, "8.4p1", None, "not_affected", "upstream version"),   # below 8.5p1, where the regression came in
    (None, "4.3p1", None, "affected", "upstream version"),       # < 4.4p1 (CVE-2006-5051 era)
]


@pytest.mark.parametrize(("os_release", "version", "package", "verdict", "evidence"), RECORDED)
def test_recorded_versions(os_release, version, package, verdict, evidence):
    got = audit.regresshion(sshd(version, package), os_release)
    assert (got["verdict"], got["evidence"]) == (verdict, evidence)
    assert got["source"]
    a = audit.security({"sshd": sshd(version, package), "dpkg_readable": True}, os_release=os_release)
    found = [f for f in a["findings"] if f["code"] == "openssh_regresshion"]
    if verdict in ("fixed", "not_affected"):
        assert found == []
        assert any(p.startswith("OpenSSH %s" % version) and "[evidence: %s]" % evidence in p for p in a["passed"])
    else:
        assert len(found) == 1
        f = found[0]
        assert (f["status"], f["severity"], f["evidence"]) == ("affected", "critical", evidence)
        assert "[evidence: %s]" % evidence in f["message"] and f["fix"].startswith("not upgraded by gpufleet")


def test_floor_table_rows_and_sources():
    rows = audit.SSH_DISTRO_FIXED
    assert {k: r["fixed"] for k, r in rows.items()} == {
        ("debian", "12"): "1:9.2p1-2+deb12u3", ("debian", "13"): "1:9.7p1-7",
        ("ubuntu", "22.04"): "1:8.9p1-3ubuntu0.10", ("ubuntu", "24.04"): "1:9.6p1-3ubuntu13.3"}
    assert "DSA-5724-1" in rows[("debian", "12")]["source"]
    assert "security-tracker.debian.org/tracker/CVE-2024-6387" in rows[("debian", "13")]["source"]
    assert all("USN-6859-1" in rows[k]["source"] for k in (("ubuntu", "22.04"), ("ubuntu", "24.04")))


def test_the_false_alarm_is_gone():
    """Issue 17 item 6: Debian 12's package was called "in the CVE-2024-6387 range ... unverified"."""
    got = audit.regresshion(sshd("9.2p1", "1:9.2p1-2+deb12u10"), DEBIAN12)
    assert got["verdict"] == "fixed" and "DSA-5724-1" in got["text"] and ">= 1:9.2p1-2+deb12u3" in got["text"]


def test_table_decides_before_the_changelog():
    # Debian's fix (deb12u3) does not name the CVE in its changelog: the row decides, not the missing id.
    cl = {"path": CHANGELOG, "version": "1:9.2p1-2+deb12u10", "cves": DEBIAN12_CHANGELOG_CVES}
    got = audit.regresshion(sshd("9.2p1", "1:9.2p1-2+deb12u10", cl), DEBIAN12)
    assert (got["verdict"], got["evidence"]) == ("fixed", "distro table")


@pytest.mark.parametrize(("changelog", "verdict", "evidence", "says"), [
    ({"path": CHANGELOG, "version": "1:9.3p1-1ubuntu3.6", "cves": ["CVE-2023-51385", "CVE-2024-6387"]},
     "fixed", "package changelog", "changelog %s names it" % CHANGELOG),
    ({"path": CHANGELOG, "version": "1:9.3p1-1ubuntu3.6", "cves": ["CVE-2023-51385"]},
     "unverified", "upstream version", "does not name CVE-2024-6387"),
    ({"path": CHANGELOG, "version": "1:9.3p1-1ubuntu3.2", "cves": ["CVE-2024-6387"]},  # another build's changelog
     "unverified", "upstream version", "not of the installed package"),
    ({"path": None, "version": None, "cves": None, "reason": "no changelog.Debian.gz (path-exclude?)"},
     "unverified", "upstream version", "changelog not read: no changelog.Debian.gz"),
    (None, "unverified", "upstream version", "no changelog.Debian.gz fact"),
])
def test_changelog_where_the_table_has_no_row(changelog, verdict, evidence, says):
    got = audit.regresshion(sshd("9.3p1", "1:9.3p1-1ubuntu3.6", changelog), UBUNTU2310)
    assert (got["verdict"], got["evidence"]) == (verdict, evidence) and says in got["text"]
    if verdict == "unverified":
        f = audit.security({"sshd": sshd("9.3p1", "1:9.3p1-1ubuntu3.6", changelog)}, os_release=UBUNTU2310)
        f = next(x for x in f["findings"] if x["code"] == "openssh_regresshion")
        assert (f["status"], f["severity"]) == ("unverified", "warning") and "ubuntu 23.10" in f["message"]


def test_package_below_the_row_but_outside_the_upstream_range():
    # a focal build (8.2p1) on a jammy host: older than jammy's fix, but the regression came in with 8.5p1
    got = audit.regresshion(sshd("8.2p1", "1:8.2p1-4ubuntu0.11"), UBUNTU2204)
    assert (got["verdict"], got["evidence"]) == ("not_affected", "upstream version")


def test_release_from_the_package_suffix_without_os_release():
    got = audit.regresshion(sshd("9.2p1", "1:9.2p1-2+deb12u1"), None)
    assert (got["verdict"], got["evidence"]) == ("affected", "distro table") and "+deb12u" in got["text"]
    assert audit._ssh_release(None, "2.9.12+dfsg-5ubuntu0.22.04.1")[0] == ("ubuntu", "22.04")
    assert audit._ssh_release(None, "1:9.6p1-3ubuntu13.3") == (None, None)


def test_sshd_v_without_portable_suffix_and_unknown_version():
    assert audit.ssh_upstream("9.2") == "9.2p1" and audit.ssh_upstream("1:9.2p1-2+deb12u10") == "9.2p1"
    assert audit.regresshion(sshd("9.8"), None)["verdict"] == "not_affected"
    assert audit.regresshion(sshd("8.5"), None)["verdict"] == "affected"
    got = audit.regresshion(sshd(None), None)
    assert got["verdict"] == "unknown"
    assert "OpenSSH version" in audit.security({"sshd": sshd(None)})["unknown"]
    # the package version alone is enough where the row decides
    assert audit.regresshion(sshd(None, "1:9.2p1-2+deb12u3"), DEBIAN12)["verdict"] == "fixed"


def test_checklist_passes_the_hosts_os_release():
    r = h100()
    r["gpu"]["host"]["os"] = copy.deepcopy(UBUNTU2204)
    r["gpu"]["readiness"]["sshd"].update(version="8.9p1", package_version="1:8.9p1-3ubuntu0.7")
    item = checklist.checklist(r)["security"]
    f = next(x for x in item["findings"] if x["code"] == "openssh_regresshion")
    assert f["status"] == "affected" and "USN-6859-1" in f["message"] and item["status"] == "fail"
    r["gpu"]["readiness"]["sshd"]["package_version"] = "1:8.9p1-3ubuntu0.10"
    item = checklist.checklist(r)["security"]
    assert "openssh_regresshion" not in {x["code"] for x in item["findings"]}


def test_ctk_floor_in_dpkg_order():
    def codes(version):
        a = audit.security({"container_toolkit": {"nvidia-container-toolkit": version}})
        return {f["code"] for f in a["findings"]}, a
    assert "ctk_below_floor" in codes("1.19.1~rc.1-1")[0]  # a pre-release sorts before the release in dpkg
    assert "ctk_below_floor" in codes("1.19.0-1")[0]  # CVE-2026-24260: every release up to 1.19.0 (bulletin 5850)
    assert "ctk_below_floor" in codes("1.18.2-1")[0]  # no 1.18.x fix
    assert "ctk_below_floor" not in codes("1.19.1-1")[0] and "ctk_below_floor" not in codes("1.20.0-1")[0]
    found, a = codes("latest")
    assert "ctk_below_floor" not in found
    assert any("not a Debian version: nvidia-container-toolkit latest" in u for u in a["unknown"])


# (a, b, dpkg's answer): epochs, "~", +debNNuN and ubuntu0.YY.MM.N suffixes, revisions, leading zeros
PAIRS = [
    ("1:9.2p1-2+deb12u1", "1:9.2p1-2+deb12u3", -1), ("1:9.2p1-2+deb12u10", "1:9.2p1-2+deb12u3", 1),
    ("1:9.2p1-2", "1:9.2p1-2+deb12u1", -1), ("1:9.2p1-2+deb12u3", "1:9.2p1-2+deb12u3", 0),
    ("1:8.9p1-3ubuntu0.10", "1:8.9p1-3ubuntu0.7", 1), ("1:9.6p1-3ubuntu13", "1:9.6p1-3ubuntu13.3", -1),
    ("1:10.0p1-7+deb13u4", "1:9.7p1-7", 1), ("1:8.2p1-4ubuntu0.11", "1:8.9p1-3ubuntu0.10", -1),
    ("9.2p1", "1:8.5p1", -1), ("0:9.2p1", "9.2p1", 0), ("1:9.2p1", "9.8p1", 1),
    ("1.0~rc1", "1.0", -1), ("1.0~~", "1.0~", -1), ("1.0~", "1.0", -1), ("1.0-1~bpo12+1", "1.0-1", -1),
    ("2.9.12+dfsg-5ubuntu0.22.04.1", "2.9.12+dfsg-5ubuntu0.20.04.3", 1), ("1.9.9-1ubuntu2.4", "1.9.9-1ubuntu2", 1),
    ("1.17.8-1", "1.17.8", 1), ("1.17.8~rc.1-1", "1.17.8", -1), ("1.18.0~rc.1-1", "1.17.8-1", 1),
    ("1.0a", "1.0+", -1), ("1.0.", "1.0", 1), ("1.0-0", "1.0", 0), ("1.01", "1.1", 0),
    ("9.8p1", "9.8", 1), ("10.0p1", "9.8p1", 1), ("4.3p1", "4.4p1", -1),
]


@pytest.mark.parametrize(("a", "b", "want"), PAIRS)
def test_deb_compare(a, b, want):
    assert audit.deb_compare(a, b) == want
    assert audit.deb_compare(b, a) == -want


def test_deb_compare_unreadable():
    assert audit.deb_compare("latest", "1.0") is None and audit.deb_compare(None, "1.0") is None


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg not installed here")
def test_deb_compare_agrees_with_dpkg():
    for a, b, want in PAIRS:
        lt = subprocess.run(["dpkg", "--compare-versions", a, "lt", b], check=False).returncode == 0
        eq = subprocess.run(["dpkg", "--compare-versions", a, "eq", b], check=False).returncode == 0
        assert (-1 if lt else 0 if eq else 1) == want == audit.deb_compare(a, b), (a, b)
