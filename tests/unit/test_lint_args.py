"""ansible-lint's args rule checks the calls of the checkout's own modules (scripts/lint-ansible, make lint).

Without scripts/lint-ansible the rule cannot import a custom module (`ansible.module_utils.gpufleet` exists only in
Ansible's module runs) and skips the call with "Ignored exception from ArgsRule"; the lint then passes whatever the
call says. Here a call with an option the module does not have must fail the lint, and a right one must pass.
"""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAY = """---
- name: Probe
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Probe | Read the GPU facts
      gpu_facts:
        %s: 1
"""


@pytest.mark.parametrize("option,fails", [("bogus_option", True), ("nvidia_smi_timeout", False)])
def test_a_custom_module_call_is_checked_against_its_arguments(tmp_path, option, fails):
    probe = tmp_path / "probe.yml"
    probe.write_text(PLAY % option)
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "lint-ansible"), "--offline", "--nocolor",
                           str(probe)], cwd=str(REPO), capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert "Ignored exception from ArgsRule" not in out
    if fails:
        assert proc.returncode != 0, out
        assert "args[module]" in out and "Unsupported parameters" in out and "bogus_option" in out, out
    else:
        assert proc.returncode == 0, out
