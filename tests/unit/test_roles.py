"""Every role keeps the project's conventions: its argument spec mirrors its defaults, its
README table is generated from the spec, and its inputs are checked before anything changes."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir())


def load(path):
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_argument_spec_mirrors_defaults(role):
    defaults = load(role / "defaults" / "main.yml") or {}
    options = load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options), "defaults and argument_specs list different variables"
    for name, value in defaults.items():
        assert options[name].get("default") == value, "%s: default differs from argument_specs" % name
        assert options[name].get("description"), "%s has no description" % name
        assert name.startswith(role.name + "_"), "%s is not prefixed with the role name" % name


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_checks_inputs_first(role):
    main = load(role / "tasks" / "main.yml")
    first = main[0]
    assert first.get("ansible.builtin.import_tasks") == "assert.yml"
    assert "always" in first.get("tags", [])


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_secrets_have_no_default(role):
    options = load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    for name, option in options.items():
        if "password" in name or "token" in name or "secret" in name:
            assert option.get("no_log") is True, "%s must be no_log" % name
            assert option.get("default", "") == "", "%s must not have a default secret" % name


def test_readme_tables_are_generated_from_the_specs():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "role-docs"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("role, variable, package", [
    ("supervisord", "supervisord_version", "supervisor"),
    ("torch", "torch_nvidia_ml_py_version", "nvidia-ml-py"),
    ("gpu_monitoring", "gpu_monitoring_nvidia_ml_py_version", "nvidia-ml-py"),
    ("gpu_monitoring", "gpu_monitoring_prometheus_client_version", "prometheus-client"),
])
def test_host_pins_match_the_controller_pins(role, variable, package):
    role_pin = load(ROOT / "roles" / role / "defaults" / "main.yml")[variable]
    reqs = (ROOT / "requirements.txt").read_text().split()
    assert "%s==%s" % (package, role_pin) in reqs


def test_controller_requirements_are_exact_pins():
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            assert "==" in line and not any(op in line for op in (">", "<", "~", "*")), line
