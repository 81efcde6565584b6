#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module torch_target: the Python environment whose torch the torch role and the doctor act on."""

DOCUMENTATION = r"""
---
module: torch_target
short_description: Decide which Python environment's torch gpufleet acts on, and judge that torch against the GPUs
description:
  - With I(mode=auto), takes the environment C(scripts/find-python) judged (I(found)) when it has torch - the renter's
    login-shell Python, a conda environment, a provider's venv such as C(/venv/main), or the system Python - else
    gpufleet's own venv I(venv). With I(mode=gpufleet), takes I(venv) always.
  - Asks that interpreter (without importing torch) where it lives, whether it is a venv, a conda environment or a
    system Python under PEP 668, and which torch build it holds, and judges that build against the GPUs and driver
    with the solver of C(gpufleet.host.pytorch.compat).
  - With I(state_dir), reads the environment's C(pip freeze) and the saved one and returns what restores it.
  - Returns C(ansible_facts.torch_target). Changes nothing on the host.
version_added: "1.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  mode:
    description: C(auto) (the renter's environment when it has torch, else I(venv)) or C(gpufleet) (I(venv) always).
    type: str
    choices: [auto, gpufleet]
    default: auto
  found:
    description: What C(scripts/find-python) printed on the host (its C(envs) and C(judged)); used with I(mode=auto).
    type: dict
    default: {}
  decided:
    description:
      - The choice made earlier in this run (C(python), C(gpufleet), C(found_kind), C(why) of an earlier result), handed
        down so that provision and remediate act on one environment; I(found) and I(mode) are not read then.
    type: dict
  venv:
    description: gpufleet's torch venv (the torch role's C(torch_venv)).
    type: path
    required: true
  gpufleet_venv:
    description: The venv gpufleet makes (C(gpufleet_common_venv)); an environment inside it is never the renter's.
    type: path
    required: true
  driver_version:
    description: NVIDIA driver version; empty when none.
    type: str
    default: ""
  compute_capabilities:
    description: Compute capability of each GPU; empty when the host shows none (the torch build is then not judged).
    type: list
    elements: str
    default: []
  driver_policy:
    description: Driver floors of the solver, C(minor) or C(strict).
    type: str
    choices: [minor, strict]
    default: minor
  state_dir:
    description:
      - gpufleet's state folder on the host (C(gpufleet_common_state_dir)); the renter environment's C(pip freeze) is
        saved below it, in C(torch/freeze/), one file per environment. When given and the target is not gpufleet's
        venv, returns C(freeze_file), C(freeze), C(saved) and C(rollback).
    type: path
notes:
  - The target's interpreter runs a short probe that reads files only (C(torch/version.py), the PEP 668 marker,
    C(conda-meta)); with I(state_dir) it also runs C(python -m pip freeze).
seealso:
  - module: gpufleet.fleet.torch_variant
extends_documentation_fragment:
  - gpufleet_attributes
  - gpufleet_attributes.facts
  - gpufleet_attributes.read_only
  - gpufleet_attributes.facts_module
"""

EXAMPLES = r"""
- name: Find the renter's environments (read-only)
  ansible.builtin.script:
    cmd: scripts/find-python
  register: found
  changed_when: false
  check_mode: false

- name: Decide the environment torch is judged and repaired in
  torch_target:
    mode: auto
    found: "{{ found.stdout | from_json }}"
    venv: /opt/gpufleet/venv
    gpufleet_venv: /opt/gpufleet/venv
    driver_version: "{{ ansible_facts['gpu']['driver_version'] | default('', true) }}"
    compute_capabilities: "{{ ansible_facts['gpu']['gpus'] | map(attribute='compute_capability') | select | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(torch_target).
  returned: always
  type: dict
  contains:
    torch_target:
      description: The environment gpufleet's torch work acts on.
      returned: always
      type: dict
      contains:
        mode:
          description: The I(mode) option.
          type: str
        python:
          description: Its interpreter.
          type: str
          sample: /venv/main/bin/python
        prefix:
          description: Its C(sys.prefix); null when the interpreter does not run (gpufleet's venv before it exists).
          type: str
        gpufleet:
          description: Whether it is gpufleet's own venv (today's isolated install) rather than the renter's.
          type: bool
        kind:
          description: venv, conda or system (null when it does not run yet).
          type: str
        found_kind:
          description: How find-python found it (login_shell, conda, venv, system, gpufleet).
          type: str
        managed:
          description: A system Python under PEP 668 or a conda environment, which pip changes only when allowed.
          type: bool
        managed_why:
          description: Why it is managed; null when not.
          type: str
        python_version:
          description: Its Python major.minor (null when it does not run yet).
          type: str
        pip:
          description: Whether pip is importable there.
          type: bool
        torch:
          description: Its torch version (read from torch/version.py), null for none.
          type: str
          sample: 2.5.1+cu121
        torch_cuda:
          description: Its torch.version.cuda, read from the same file.
          type: str
        runs:
          description: True when that torch runs every GPU on this driver, false when it cannot, null when not judged.
          type: bool
        runs_why:
          description: Why (the solver's reason when it cannot).
          type: str
        why:
          description: Why this environment.
          type: str
        pip_path:
          description:
            - The pip command next to the interpreter (C(bin/pip), C(pip3), C(pipX.Y)), else one in C(/usr/local/bin),
              C(/usr/bin) or C(/bin) whose C(#!) line runs that interpreter (pip installed with pip for a system
              Python, as RunPod's images have it); null when none.
          type: str
        freeze_file:
          description: With I(state_dir), where its freeze is saved before gpufleet first changes it.
          type: str
        freeze:
          description: With I(state_dir), its current C(pip freeze) lines.
          type: list
          elements: str
        saved:
          description: With I(state_dir), whether the saved freeze exists.
          type: bool
        rollback:
          description: With I(state_dir), C(install) (saved pins that differ), C(uninstall) (added since), C(skipped).
          type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpufleet.host.pytorch import target as tt
from ansible.module_utils.gpufleet.host.system import hostctx


def _run(run, argv, env=None):
    """(rc, stdout, stderr) as text through the host side's one command runner (cwd /, C locale)."""
    rc, out, err = run(argv, env=env) or (127, b"", b"%s: not found" % argv[0].encode())
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", default="auto", choices=list(tt.MODES)),
            found=dict(type="dict", default={}),
            decided=dict(type="dict"),
            venv=dict(type="path", required=True),
            gpufleet_venv=dict(type="path", required=True),
            driver_version=dict(type="str", default=""),
            compute_capabilities=dict(type="list", elements="str", default=[]),
            driver_policy=dict(type="str", default="minor", choices=["minor", "strict"]),
            state_dir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    run = hostctx.command_runner(module.get_bin_path)
    try:
        chosen = tt.choose(p["mode"], p["found"], p["venv"], p["gpufleet_venv"], p["decided"])
    except tt.TargetError as exc:
        module.fail_json(msg=str(exc))
    target = dict(chosen, mode=p["mode"], prefix=None, kind=None, managed=False, managed_why=None,
                  python_version=None, pip=False, pip_path=None, torch=None, torch_cuda=None, runs=None,
                  runs_why="%s does not run yet" % chosen["python"])
    if os.access(chosen["python"], os.X_OK):
        rc, out, err = _run(run, [chosen["python"], "-c", tt.PROBE])
        if rc != 0:
            module.fail_json(msg="%s does not run (rc %s): %s" % (chosen["python"], rc, (err or out).strip()[-800:]))
        try:
            probe = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            module.fail_json(msg="%s gave no answer to the probe: %s" % (chosen["python"], out[-800:]))
        target.update(tt.classify(probe), prefix=probe["prefix"], pip=bool(probe["pip"]), torch=probe["torch"],
                      torch_cuda=probe["torch_cuda"], python_version=".".join(probe["version"].split(".")[:2]))
        target["runs"], target["runs_why"] = tt.judge(probe["torch"], probe["torch_cuda"], p["driver_version"],
                                                      p["compute_capabilities"], p["driver_policy"])
        if target["gpufleet"]:  # gpufleet's own venv: pip may change it whatever the marker says
            target.update(managed=False, managed_why=None)
        target["pip_path"] = tt.pip_command(chosen["python"], target["python_version"])
    if p["state_dir"] and target["prefix"] and not target["gpufleet"]:
        target["freeze_file"] = tt.freeze_file(p["state_dir"], target["prefix"])
        current = []
        if target["pip"]:
            rc, out, err = _run(run, [chosen["python"], "-m", "pip", "freeze"], {"PIP_DISABLE_PIP_VERSION_CHECK": "1"})
            if rc != 0:
                module.fail_json(msg="%s -m pip freeze failed (rc %s): %s" % (chosen["python"], rc, err.strip()))
            current = out.splitlines()
        saved = None
        if os.path.isfile(target["freeze_file"]):
            with open(target["freeze_file"]) as f:
                saved = f.read().splitlines()
        target.update(freeze=current, saved=saved is not None,
                      rollback=tt.rollback_plan(saved, current) if saved is not None else None)
    module.exit_json(changed=False, ansible_facts={"torch_target": target})


if __name__ == "__main__":
    main()
