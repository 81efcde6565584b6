#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module gpu_doctor: why CUDA does not work on this host, from evidence."""

DOCUMENTATION = r"""
---
module: gpu_doctor
short_description: Diagnose why CUDA (torch.cuda.is_available()) does not work on a host
description:
  - Gathers evidence with side-effect-free probes - C(/dev/nvidia*) nodes, C(/proc/modules),
    C(/proc/driver/nvidia/version), NVML (C(nvidia-ml-py), falling back to C(nvidia-smi -q -x)),
    C(cuInit) through C(libcuda.so.1) in a child process (and whether that libcuda is a stub or a
    forward-compat library), a torch probe in the target interpreter (version, CUDA build, is_available,
    device count, arch list, warnings, cuDNN and NCCL versions, torchrun), C(CUDA_VISIBLE_DEVICES) and
    C(LD_LIBRARY_PATH) as a login gets them (process environment, C(/etc/environment), the login shell), the CUDA
    toolkit layout (C(/usr/local/cuda), ld.so.conf, shadowing paths), NVSwitch presence and the fabric
    manager's state, Xid lines from the kernel log, persistence mode and container detection.
  - The renter's checks - two looks at each GPU's compute processes and memory some seconds apart (another
    tenant's processes, or memory held with no process while none of this host's CUDA programs uses the GPU),
    GPU device nodes that no longer open (a container that lost its GPUs), MIG mode and the memory NVML reports
    against the GPU's datasheet (a slice or a share), NVML's recovery action, the cgroup CPU quota and
    C(pids.max) against the visible CPUs, the size of C(/dev/shm), and what the provider's listing claims.
  - Applies the rules of C(module_utils/gpufleet/host/doctor/rules.py) (reference page C(docs/doctor-rules.md))
    and returns C(ansible_facts.gpu_doctor) - status, findings (code, severity, remedy class, evidence,
    meaning, remedy) and what no rule could classify, with the raw evidence.
  - Changes nothing on the host, with one exception it cannot prevent - run as root, NVML and libcuda create
    missing C(/dev/nvidia*) nodes themselves (as every C(nvidia-smi) call does); the nodes are listed before
    those libraries are called, and the ones that appeared are in C(evidence.device_nodes_created_by_probes).
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  python:
    description:
      - Interpreter whose torch is probed (the torch role's venv). When it does not exist, torch is
        reported as not installed and cuInit is probed with C(python3).
    type: path
    default: /opt/gpufleet/venv/bin/python
  expected_gpu_count:
    description: Number of GPUs rented; fewer visible GPUs is a finding. Also says that GPUs are expected.
    type: int
  gpu_expected:
    description:
      - Whether this host is meant to have GPUs. Unset - derived from the evidence (any NVIDIA driver,
        device node, NVML library, CUDA torch build or C(expected_gpu_count) above 0). On a host where
        no GPU is expected a CPU torch and no driver are not findings.
    type: bool
  timeout:
    description: Seconds each child probe (torch, cuInit, nvidia-smi) may run before it is killed.
    type: int
    default: 120
  kernel_log:
    description: Read the kernel log for Xid lines (C(dmesg), C(journalctl -k), C(/var/log/kern.log)).
    type: bool
    default: true
  nvidia_smi_path:
    description: Name or path of C(nvidia-smi), used when NVML is not usable.
    type: str
    default: nvidia-smi
  login_user:
    description:
      - The account whose login environment is judged (C(CUDA_VISIBLE_DEVICES), C(LD_LIBRARY_PATH), C(PATH),
        C(CUDA_HOME), C(NVIDIA_VISIBLE_DEVICES)). Its login shell runs with C(/etc/environment) applied first,
        as at an SSH login, so a variable exported from C(/etc/profile.d) or the user's C(~/.profile) is seen
        with the file that sets it.
      - Default, the user that became root (C(SUDO_USER)), else the account the module runs as.
    type: str
  sample_interval:
    description:
      - Seconds between the two looks at each GPU's processes and memory. A job of this host that was starting at
        the first look holds the GPU at the second, so it is not taken for another tenant.
      - C(0) takes one look only, which cannot tell another tenant from a job starting; that check is then off.
    type: int
    default: 3
  cuda_pinned_version:
    description:
      - CUDA major.minor that C(/usr/local/cuda) must point at (the C(cuda_links) role's C(cuda_links_version)). The
        doctor then judges the link against the pin, as the role sets it; empty, the highest toolkit the driver
        supports (C(decision.toolkit) in the result).
    type: str
  provider_claims:
    description:
      - What the provider's listing says of this host, compared with what NVML finds (finding
        C(provider_claim_mismatch)). The inventory plugins set C(gpufleet_claimed_gpu_model) and, for vast.ai,
        C(gpufleet_provider_driver_version) and C(gpufleet_provider_cuda_max_good); the GPU count is
        O(expected_gpu_count).
    type: dict
    suboptions:
      provider:
        description: Provider name, for the finding's evidence.
        type: str
      gpu_model:
        description: GPU model as listed (C(RTX 4090), C(H100 SXM), C(NVIDIA H100 80GB HBM3)); compared by chip.
        type: str
      gpu_memory_mib:
        description: Memory per GPU as listed, in MiB.
        type: int
      driver_version:
        description: NVIDIA driver version as listed.
        type: str
      cuda_version:
        description: Highest CUDA version the listing says the driver supports (C(12.4)).
        type: str
requirements:
  - nvidia-ml-py in the interpreter that runs the module (optional; without it nvidia-smi is used)
notes:
  - Supports check mode; the module never changes anything.
extends_documentation_fragment:
  - gpufleet_attributes
  - gpufleet_attributes.facts
  - gpufleet_attributes.read_only
  - gpufleet_attributes.facts_module
"""

EXAMPLES = r"""
- name: Ask the doctor
  gpu_doctor:
    expected_gpu_count: 8
  vars:
    ansible_python_interpreter: /opt/gpufleet/venv/bin/python

- name: Ask the doctor, with what the provider's listing claims (host vars of the inventory plugins)
  gpu_doctor:
    expected_gpu_count: "{{ gpufleet_expected_gpu_count | default(omit) }}"
    provider_claims:
      provider: "{{ gpufleet_provider | default(omit) }}"
      gpu_model: "{{ gpufleet_claimed_gpu_model | default(omit) }}"
      driver_version: "{{ gpufleet_provider_driver_version | default(omit) }}"
      cuda_version: "{{ gpufleet_provider_cuda_max_good | default(omit) }}"

- name: Say why CUDA is unusable
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu_doctor.findings | map(attribute='meaning') | list }}"
  when: ansible_facts.gpu_doctor.cuda_usable is false
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(gpu_doctor).
  returned: always
  type: dict
  contains:
    gpu_doctor:
      description: The diagnosis.
      returned: always
      type: dict
      contains:
        status:
          description: healthy, degraded, broken or unknown.
          type: str
          sample: broken
        cuda_usable:
          description: Whether CUDA works for torch here; null when it could not be told.
          type: bool
        gpu_expected:
          description: Whether GPUs are expected on this host (given or derived).
          type: bool
        findings:
          description: One per rule that matched - code, severity (critical, warning, info), remedy_class
            (fixable, restart_container, reboot, provider, unknown), evidence, meaning, remedy.
          type: list
          elements: dict
        fixable:
          description: Codes of the findings that software on this host can fix.
          type: list
          elements: str
        decision:
          description:
            - What the fixes act on, decided once (module_utils/gpufleet/host/doctor/diagnose.py C(decide)) - the
              driver's CUDA version and where it was read (C(driver_cuda_version), C(driver_cuda_version_source)),
              the driver, the GPUs' compute capabilities, the C(toolkit) C(/usr/local/cuda) should point at (root,
              version, major_minor, rule, reasons; null with C(toolkit_why_none)) and C(cuda_link) (path, target,
              now, right). The remediate role hands it to cuda_links and torch.
          type: dict
        unknown:
          description: Evidence no rule could classify (what, evidence), kept raw.
          type: list
          elements: dict
        evidence:
          description: Everything the probes gathered (schema in module_utils/gpufleet/host/doctor/diagnose.py).
          type: dict
        duration_s:
          description: Seconds spent.
          type: float
"""

import os
import time
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpufleet.host.cuda import find as cudafind
from ansible.module_utils.gpufleet.host.cuda import layout as cudalayout
from ansible.module_utils.gpufleet.host.cuda import read as cudaread
from ansible.module_utils.gpufleet.host.doctor import nvmlprobe as doctor_nvmlprobe
from ansible.module_utils.gpufleet.host.doctor import probe as doctor_probe
from ansible.module_utils.gpufleet.host.gpu import facts as gpufacts
from ansible.module_utils.gpufleet.host.system import hostctx

try:
    import pynvml
except Exception:  # ImportError, or a broken install: nvidia-smi is the fallback
    pynvml = None

SBIN = ["/sbin", "/usr/sbin"]


def _runner(module, default_timeout):
    """The host side's command runner (hostctx.command_runner): C locale, every command killed after its timeout."""
    return hostctx.command_runner(lambda name: module.get_bin_path(name, opt_dirs=SBIN), timeout=default_timeout)


def _site_packages(python):
    venv = os.path.dirname(os.path.dirname(python or ""))
    return cudafind.default_site_packages([os.path.join(venv, "lib", "python3*", "site-packages")])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", default="/opt/gpufleet/venv/bin/python"),
            expected_gpu_count=dict(type="int"),
            gpu_expected=dict(type="bool"),
            timeout=dict(type="int", default=120),
            kernel_log=dict(type="bool", default=True),
            nvidia_smi_path=dict(type="str", default="nvidia-smi"),
            login_user=dict(type="str"),
            sample_interval=dict(type="int", default=3),
            cuda_pinned_version=dict(type="str"),
            provider_claims=dict(type="dict", options=dict(
                provider=dict(type="str"), gpu_model=dict(type="str"), gpu_memory_mib=dict(type="int"),
                driver_version=dict(type="str"), cuda_version=dict(type="str"))),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["expected_gpu_count"] is not None and not 0 <= p["expected_gpu_count"] <= 64:
        module.fail_json(msg="expected_gpu_count must be from 0 to 64, got %s" % p["expected_gpu_count"])
    if not 1 <= p["timeout"] <= 600:
        module.fail_json(msg="timeout must be from 1 to 600 seconds, got %s" % p["timeout"])
    if not 0 <= p["sample_interval"] <= 60:
        module.fail_json(msg="sample_interval must be from 0 to 60 seconds, got %s. Nothing was changed."
                         % p["sample_interval"])
    start = time.monotonic()
    run = _runner(module, p["timeout"])
    host = doctor_probe.Host(run)
    nodes = host.glob(doctor_probe.DEV_GLOB)  # before NVML / libcuda, which create missing nodes as root
    try:
        gpu = gpufacts.gpu_facts(pynvml, lambda: run([p["nvidia_smi_path"], "-q", "-x"]))
        gpufacts.explain_without_driver(gpu, os.path.exists)
        # Before the torch and cuInit probes: their CUDA contexts must not show up as GPU users.
        renter = doctor_nvmlprobe.nvml_renter_evidence(pynvml, host, p["sample_interval"])
        kernel_log = doctor_probe.read_kernel_log(host) if p["kernel_log"] else None
        nvml = doctor_nvmlprobe.nvml_evidence(gpu)
        tk = cudalayout.collect(cudaread.HostFS("/"), site_packages=_site_packages(p["python"]), run=run,
                                environ_ld_library_path=os.environ.get("LD_LIBRARY_PATH"),
                                pinned=p["cuda_pinned_version"] or None, driver_cuda=nvml.get("cuda_driver_version"))
        evidence = doctor_probe.gather(host, python=p["python"], gpu_facts=gpu, kernel_log=kernel_log,
                                       cudatk_facts=tk, expected_gpu_count=p["expected_gpu_count"],
                                       gpu_expected=p["gpu_expected"], timeout=p["timeout"], device_nodes=nodes,
                                       login_user=p["login_user"] or os.environ.get("SUDO_USER") or None,
                                       renter_nvml=renter, provider_claims=p["provider_claims"])
        result = doctor_probe.examine(evidence)
    except Exception:
        module.fail_json(msg="gpu_doctor failed while gathering evidence (a bug, please report it)",
                         exception=traceback.format_exc())
    result["duration_s"] = round(time.monotonic() - start, 3)
    module.exit_json(changed=False, ansible_facts={"gpu_doctor": result})


if __name__ == "__main__":
    main()
