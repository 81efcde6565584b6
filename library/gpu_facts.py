#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module gpu_facts: GPU, host and Xid facts for one rented GPU host."""

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU facts, host context, Xid events and a health summary
description:
  - Reads every GPU through NVML (the C(pynvml) module of C(nvidia-ml-py)) and falls back to
    C(nvidia-smi -q -x) when NVML is not usable; never fails because a GPU, the driver or a library is
    missing or broken, it reports that instead.
  - Adds host context (container or VM, init system, OS, CPU, RAM, C(/dev/shm), memlock limit),
    Xid lines from the kernel log, the vendor spec row for each GPU model and a C(health) summary.
  - Returns C(ansible_facts.gpu). Changes nothing on the host.
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  include_processes:
    description: List the compute processes running on each GPU (pid, name, memory).
    type: bool
    default: false
  nvidia_smi_path:
    description: Name or path of the C(nvidia-smi) binary used when NVML is not usable.
    type: str
    default: nvidia-smi
  nvidia_smi_timeout:
    description:
      - Seconds C(nvidia-smi) may run before it is killed (it hangs on GPUs that fell off the bus).
      - Enforced with C(timeout) from coreutils when that is installed.
    type: int
    default: 20
  kernel_log:
    description:
      - Read the kernel log for Xid errors, trying C(dmesg), then C(journalctl -k), then C(/var/log/kern.log).
      - When none is readable (common in containers) C(xid.readable) is false and C(xid.reason) says why.
    type: bool
    default: true
  prefer:
    description:
      - Which source to try first. C(auto) and C(nvml) try NVML first; C(nvidia-smi) tries it first.
        The other one is always the fallback.
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  expected_gpu_count:
    description: Number of GPUs rented; fewer visible GPUs is a critical health finding.
    type: int
  readiness:
    description:
      - Also read what a renter checks before paying (see docs/checklist.md), all read-only - disk free and
        kind of C(/) and of O(data_dirs), listening TCP sockets on non-loopback addresses and their process,
        the OpenSSH version and (as root) the effective C(sshd -T) settings, installed NVIDIA container
        toolkit and openssh-server package versions, the packages in O(venv), pip index configuration, and
        the gpu_monitoring exporter's textfile and supervisord program.
      - A Jupyter server found listening publicly gets one local TLS handshake attempt, to tell TLS from
        plain HTTP.
    type: bool
    default: true
  venv:
    description: The gpufleet virtual environment whose installed packages are listed.
    type: path
    default: /opt/gpufleet/venv
  data_dirs:
    description: Data folders whose disk is checked besides C(/) (those that exist).
    type: list
    elements: path
    default: [/workspace, /data]
requirements:
  - nvidia-ml-py (optional; without it only nvidia-smi is used)
notes:
  - Supports check mode; the module never changes anything.
  - The read-only commands a gathering needs (C(dmesg), C(systemd-detect-virt), the OpenSSH version and
    C(sshd -T), C(dpkg-query), C(supervisorctl status)) start together, each in a thread, while NVML is read.
extends_documentation_fragment:
  - gpufleet_attributes
  - gpufleet_attributes.facts
  - gpufleet_attributes.read_only
  - gpufleet_attributes.facts_module
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpu_facts:

- name: Gather GPU facts with processes, nvidia-smi first
  gpu_facts:
    include_processes: true
    prefer: nvidia-smi
    nvidia_smi_timeout: 30

- name: Fail hosts whose GPUs are broken
  ansible.builtin.assert:
    that: ansible_facts['gpu']['health']['status'] != 'failed'
    fail_msg: "{{ ansible_facts['gpu']['health']['findings'] | map(attribute='message') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(gpu).
  returned: always
  type: dict
  contains:
    gpu:
      description: GPU facts (schema 1).
      returned: always
      type: dict
      contains:
        schema:
          description: Version of this layout.
          type: int
          sample: 1
        source:
          description: Where the GPU facts came from.
          type: str
          sample: nvml
        error:
          description: Why no GPU facts could be read, or null.
          type: str
          sample: "Failed to initialize NVML: Driver/library version mismatch"
        error_code:
          description: Short code for C(error), e.g. C(driver_library_mismatch), C(driver_not_reachable),
            C(no_devices), C(nvidia_smi_missing).
          type: str
          sample: driver_library_mismatch
        driver_version:
          description: NVIDIA driver version.
          type: str
          sample: "535.161.08"
        cuda_driver_version:
          description: Highest CUDA version the driver supports.
          type: str
          sample: "12.2"
        nvml_version:
          description: NVML library version (NVML source only).
          type: str
        gpu_count:
          description: Number of GPUs listed.
          type: int
          sample: 8
        gpus:
          description: >-
            One entry per GPU: index, uuid, name, serial, pci_bus_id, memory_total_mib, memory_used_mib,
            compute_capability, pcie (gen_current, gen_max, width_current, width_max), clocks, temperature_c,
            power_draw_w, power_limit_w, throttle_reasons, persistence_mode, mig_mode, ecc, retired_pages,
            remapped_rows, nvlink, spec (vendor peak figures or null), processes (when asked).
          type: list
          elements: dict
        host:
          description: Host context (container, container_kind, virtualization, init_system, os, kernel, cpu,
            memory_total_mib, shm_size_mib, memlock_limit_kib).
          type: dict
        readiness:
          description: >-
            Readiness probes (null when O(readiness=false)) - disks (path, mountpoint, fstype, free_gib,
            total_gib, rotational, network, local_ssd, reason), listeners (sockets with address, port, process,
            jupyter, tls), sshd (version, package_version, config from C(sshd -T), reason), container_toolkit
            (package versions), dpkg_readable, venv (path, exists, python, packages), pip (files and env with
            index_url / extra_index_url, credentials masked), monitoring (textfile, textfile_age_s, program).
          type: dict
        xid:
          description: Xid events from the kernel log (readable, source, reason, events, counts).
          type: dict
        health:
          description: Status (ok, degraded, failed, unknown) and findings (code, severity, gpu_index, message).
          type: dict
        collected_at:
          description:
            - When the facts were read (the start of the gathering on the host), ISO 8601 in UTC with a
              C(Z) suffix, whole seconds.
          type: str
          sample: "2026-12-01T20:51:03Z"
        duration_s:
          description: Seconds spent gathering (reading the kernel log included).
          type: float
"""

import os
import platform
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.gpufleet.host.gpu import facts as gpufacts
from ansible.module_utils.gpufleet.host.system import hostctx, hostready, kmsg

try:
    import pynvml

    PYNVML_IMPORT_ERROR = None
except Exception:  # ImportError, or a broken install
    pynvml = None
    PYNVML_IMPORT_ERROR = traceback.format_exc()


def _smi_runner(module, path, timeout):
    """nvidia-smi -q -x through the command runner, killed after ``timeout`` s (a GPU off the bus can hang it)."""
    run = hostctx.command_runner(module.get_bin_path, timeout=timeout)

    def run_smi():
        smi = path if os.path.sep in path else module.get_bin_path(path)
        if not smi or not os.path.exists(smi):
            return 127, b"", ("%s: command not found" % path).encode()
        res = run([smi, "-q", "-x"])
        if res is None:  # there, but not executable
            return 127, b"", ("%s: not executable" % smi).encode()
        return res

    return run_smi


def _commands(module, kernel_log, readiness):
    """The module's command runner: what a gathering runs starts at once, each command in a thread.

    Not module.run_command: it is not safe to call from several threads (see hostctx.command_runner).
    """
    planned = gpufacts.planned_commands(kernel_log, readiness)
    return hostctx.Prefetch(hostctx.command_runner(module.get_bin_path), planned, which=module.get_bin_path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            include_processes=dict(type="bool", default=False),
            nvidia_smi_path=dict(type="str", default="nvidia-smi"),
            nvidia_smi_timeout=dict(type="int", default=20),
            kernel_log=dict(type="bool", default=True),
            prefer=dict(type="str", default="auto", choices=["auto", "nvml", "nvidia-smi"]),
            expected_gpu_count=dict(type="int"),
            readiness=dict(type="bool", default=True),
            venv=dict(type="path", default=hostctx.GPUFLEET_VENV),
            data_dirs=dict(type="list", elements="path", default=list(hostready.DATA_DIRS)),
        ),
        supports_check_mode=True,
    )
    p = module.params
    readiness = gpufacts.default_readiness(p["venv"], p["data_dirs"]) if p["readiness"] else None
    with _commands(module, p["kernel_log"], readiness) as run:
        facts = gpufacts.collect(
            pynvml=pynvml,
            run_nvidia_smi=_smi_runner(module, p["nvidia_smi_path"], p["nvidia_smi_timeout"]),
            run=run,
            kernel_log=(lambda: kmsg.read_kernel_log(run)) if p["kernel_log"] else None,
            prefer=p["prefer"],
            include_processes=p["include_processes"],
            expected_gpu_count=p["expected_gpu_count"],
            uname_release=platform.release(),
            readiness=readiness,
        )
    if pynvml is None:
        facts.setdefault("warnings", []).append(
            "NVML not used: " + missing_required_lib("nvidia-ml-py") + " Fell back to nvidia-smi.")
    module.exit_json(changed=False, ansible_facts={"gpu": facts})


if __name__ == "__main__":
    main()
