"""library/ctk_packages.py and library/ctk_config.py run as Ansible runs them (the AnsiballZ payload Ansible
builds; one case of each through the real `ansible localhost -m ...` CLI), with a fake dpkg-query on PATH that
prints what dpkg prints for a mixed toolkit install."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gpufleet.host.cuda import ctk

from tests.unit import ansible_module

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = ansible_module.needs_ansible

SEEDED = {"log-driver": "json-file", "log-opts": {"max-size": "10m"}, "data-root": "/var/lib/docker"}


def run_module(tmp_path, module, args, check=False, diff=False, path_prepend=None, expect_ok=True, cli=False):
    """The module's result: its AnsiballZ payload as Ansible builds it, run by this Python
    (tests/unit/ansible_module.py), or with cli through the real `ansible localhost -m MODULE` CLI."""
    env = dict(os.environ)
    if path_prepend:
        env["PATH"] = "%s:%s" % (path_prepend, env["PATH"])
    if cli:
        rc, result, out = ansible_module.cli_json(module, args or {}, tmp_path, check=check, env=env,
                                                  extra=["--diff"] if diff else [])
        ok = rc == 0
    else:
        ok, result = ansible_module.run(module, args or {}, tmp_path, check=check, diff=diff, env=env)
        out = json.dumps(result)
    if expect_ok:
        assert ok, out
    else:
        assert not ok and result.get("failed"), out
    return result


def fake_dpkg_query(tmp_path, lines, rc=0):
    """A dpkg-query that prints LINES (package, version, status) in the module's -f format, like dpkg does."""
    fakebin = tmp_path / "fakebin"
    fakebin.mkdir(exist_ok=True)
    script = fakebin / "dpkg-query"
    body = "".join("%s\t%s\t%s\n" % line for line in lines)
    script.write_text("#!/bin/sh\n# records its argv for the test\necho \"$@\" > %s\ncat <<'EOF'\n%sEOF\n"
                      "echo 'dpkg-query: no packages found matching something' >&2\nexit %d\n"
                      % (tmp_path / "argv", body, rc))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(fakebin)


# ---- ctk_packages --------------------------------------------------------------------------------

def test_packages_reports_a_lone_old_libnvidia_container1_as_mismatch_and_below_floor(tmp_path):
    fake = fake_dpkg_query(tmp_path, [
        ("nvidia-container-toolkit", "1.20.0-1", "ii "),
        ("nvidia-container-toolkit-base", "1.20.0-1", "ii "),
        ("libnvidia-container-tools", "1.20.0-1", "ii "),
        ("libnvidia-container1:amd64", "1.17.3-1", "ii "),
    ])
    result = run_module(tmp_path, "ctk_packages", {}, path_prepend=fake, cli=True)
    assert result["changed"] is False
    facts = result["ansible_facts"]["nvidia_container_toolkit"]
    assert facts["installed"] == {"nvidia-container-toolkit": "1.20.0-1", "nvidia-container-toolkit-base": "1.20.0-1",
                                  "libnvidia-container-tools": "1.20.0-1", "libnvidia-container1": "1.17.3-1"}
    assert facts["version_mismatch"] is True and facts["below_floor"] is True and facts["ok"] is False
    assert facts["version"] is None
    assert "version_mismatch" in facts["finding_codes"] and "below_floor" in facts["finding_codes"]
    below = [f for f in facts["findings"] if f["code"] == "below_floor"][0]
    assert below["packages"] == ["libnvidia-container1"]
    assert "CVE-2025-23266" in below["cves"] and "CVE-2026-24260" in below["cves"]
    # every error is surfaced as an Ansible warning
    assert any("different versions" in w for w in result.get("warnings", []))
    assert any("below the floor" in w for w in result.get("warnings", []))
    # it asked dpkg about exactly the four packages
    argv = (tmp_path / "argv").read_text().split()
    assert argv[-4:] == list(ctk.PACKAGES)


def test_packages_pinned_install_is_ok_and_quiet(tmp_path):
    fake = fake_dpkg_query(tmp_path, [(p, "1.19.1-1", "ii ") for p in ctk.PACKAGES])
    result = run_module(tmp_path, "ctk_packages", {}, check=True, path_prepend=fake)
    facts = result["ansible_facts"]["nvidia_container_toolkit"]
    assert facts["ok"] is True and facts["version"] == "1.19.1-1" and facts["installed_any"] is True
    assert facts["floor"] == "1.19.1"
    assert facts["finding_codes"] == ["below_preferred"]
    assert not result.get("warnings")


def test_packages_not_installed_and_half_configured(tmp_path):
    # dpkg-query exits 1 when it knows none of some names; a removed package keeps its config ("rc").
    fake = fake_dpkg_query(tmp_path, [("libnvidia-container1", "1.20.0-1", "rc "),
                                      ("libnvidia-container-tools", "1.20.0-1", "iF ")], rc=1)
    result = run_module(tmp_path, "ctk_packages", {"warn": False}, path_prepend=fake)
    facts = result["ansible_facts"]["nvidia_container_toolkit"]
    assert facts["installed_any"] is False and facts["finding_codes"][0] == "not_installed"
    assert facts["not_configured"] == {"libnvidia-container1": "rc", "libnvidia-container-tools": "iF"}
    assert not result.get("warnings")


def test_packages_missing_package_with_a_custom_floor(tmp_path):
    fake = fake_dpkg_query(tmp_path, [(p, "1.20.0-1", "ii ") for p in ctk.PACKAGES[:3]], rc=1)
    result = run_module(tmp_path, "ctk_packages", {"floor": "1.20.0", "warn": False}, path_prepend=fake)
    facts = result["ansible_facts"]["nvidia_container_toolkit"]
    assert facts["floor"] == "1.20.0"
    assert "missing_package" in facts["finding_codes"] and facts["ok"] is False
    assert not facts["below_floor"]


def test_packages_refuses_a_bad_floor(tmp_path):
    fake = fake_dpkg_query(tmp_path, [])
    result = run_module(tmp_path, "ctk_packages", {"floor": "latest"}, path_prepend=fake, expect_ok=False)
    assert "floor" in result["msg"]


# ---- ctk_config ----------------------------------------------------------------------------------

def test_config_merges_keeps_keys_backs_up_and_is_idempotent(tmp_path):
    daemon = tmp_path / "daemon.json"
    daemon.write_text(json.dumps(SEEDED))
    daemon.chmod(0o600)
    first = run_module(tmp_path, "ctk_config", {"path": str(daemon)}, diff=True, cli=True)
    assert first["changed"] is True and first["created"] is False
    data = json.loads(daemon.read_text())
    assert data["runtimes"] == {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}}
    assert {k: data[k] for k in SEEDED} == SEEDED
    assert first["kept_keys"] == sorted(SEEDED)
    assert json.loads(Path(first["backup_file"]).read_text()) == SEEDED
    assert stat.S_IMODE(daemon.stat().st_mode) == 0o600  # an existing file keeps its mode
    assert '"runtimes"' in first["diff"]["after"]
    text = daemon.read_text()
    second = run_module(tmp_path, "ctk_config", {"path": str(daemon)})
    assert second["changed"] is False and daemon.read_text() == text
    assert len(list(tmp_path.glob("daemon.json.*~"))) == 1


def test_config_check_mode_changes_nothing(tmp_path):
    daemon = tmp_path / "daemon.json"
    daemon.write_text(json.dumps(SEEDED))
    result = run_module(tmp_path, "ctk_config", {"path": str(daemon), "set_default": True, "enable_cdi": True},
                        check=True)
    assert result["changed"] is True
    assert json.loads(daemon.read_text()) == SEEDED
    assert not list(tmp_path.glob("daemon.json.*~"))


def test_config_creates_a_missing_file_and_folder(tmp_path):
    daemon = tmp_path / "etc" / "docker" / "daemon.json"
    result = run_module(tmp_path, "ctk_config", {"path": str(daemon), "set_default": True, "enable_cdi": True})
    assert result["changed"] is True and result["created"] is True and "backup_file" not in result
    data = json.loads(daemon.read_text())
    assert data["default-runtime"] == "nvidia" and data["features"] == {"cdi": True}
    assert stat.S_IMODE(daemon.stat().st_mode) == 0o644


@pytest.mark.parametrize("text", ['{"log-driver": "json-file",, "oops"', '["not", "an", "object"]',
                                  '{"runtimes": "nvidia"}'])
def test_config_never_touches_a_file_it_cannot_merge(tmp_path, text):
    daemon = tmp_path / "daemon.json"
    daemon.write_text(text)
    for check in (True, False):
        result = run_module(tmp_path, "ctk_config", {"path": str(daemon)}, check=check, expect_ok=False)
        assert "not touching it" in result["msg"]
    assert daemon.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("daemon")) == ["daemon.json"]


@pytest.mark.parametrize("mode", ["abc", "0999", "644x", "u+rw"])
def test_config_refuses_a_mode_that_is_not_octal_before_writing(tmp_path, mode):
    daemon = tmp_path / "docker" / "daemon.json"
    result = run_module(tmp_path, "ctk_config", {"path": str(daemon), "mode": mode}, expect_ok=False)
    assert "not an octal file mode" in result["msg"]
    assert not daemon.parent.exists()


# ---- the role's copy of the floor ----------------------------------------------------------------

def test_role_floor_and_package_list_match_module_utils():
    role_vars = yaml.safe_load((ROOT / "roles" / "nvidia_container_toolkit" / "vars" / "main.yml").read_text())
    assert role_vars["__nvidia_container_toolkit_floor"] == ctk.FLOOR
    assert sorted(role_vars["__nvidia_container_toolkit_packages"]) == sorted(ctk.PACKAGES)
    defaults = yaml.safe_load((ROOT / "roles" / "nvidia_container_toolkit" / "defaults" / "main.yml").read_text())
    assert ctk.compare_versions(defaults["nvidia_container_toolkit_version"], ctk.FLOOR) >= 0
    # the default is the preferred release (it carries every fix in the table)
    assert ctk.compare_versions(defaults["nvidia_container_toolkit_version"], ctk.PREFERRED) >= 0


def test_stand_in_debs_are_named_and_versioned_like_nvidias(tmp_path):
    out = tmp_path / "debs"
    subprocess.run([str(ROOT / "tests" / "debs" / "build-ctk-debs"), str(out), "1.17.3-1", "amd64"], check=True,
                   capture_output=True)
    debs = sorted(p.name for p in out.iterdir())
    assert debs == sorted("%s_1.17.3-1_amd64.deb" % p for p in ctk.PACKAGES)
    info = subprocess.run(["dpkg-deb", "-f", str(out / "nvidia-container-toolkit_1.17.3-1_amd64.deb"),
                           "Package", "Version", "Depends"], check=True, capture_output=True, text=True).stdout
    assert "Version: 1.17.3-1" in info and "nvidia-container-toolkit-base (= 1.17.3-1)" in info
