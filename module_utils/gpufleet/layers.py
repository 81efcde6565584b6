# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where each module of module_utils/gpufleet runs: on the rented host, or on the controller (issue 38).

Host side: what a module in library/ or roles/*/library/ that runs on a host carries there. Ansible's
``module_common.recursive_finder`` puts every module_utils file the module imports, and what those import (at
any depth, imports inside functions included) with their package ``__init__`` files, into the module's
AnsiballZ payload. A file the roles copy to the host counts as host side too.
Controller side: what only controller code uses: callback, inventory and filter plugins, scripts/, the modules
of localhost plays (``CONTROLLER_MODULES``), and other controller-side modules.

The rule, held by tests/unit/test_layers.py: a host-side module imports nothing from the controller side,
directly or through another module, so a payload carries host code only. Controller code may import host
code (the report reads ``specs``). Every module here is in exactly one of ``HOST`` and ``CONTROLLER`` (a
package, ``report``, stands for all its files); the test fails on a new module that is in neither.
Each entry says who ships or uses it. Nothing imports this file: it is data for the test and the docs
(docs/architecture.md, "Host and controller").
"""

HOST = {
    "__init__": "the package: in every payload",
    "ctk": "ctk_config, ctk_packages (the audit reads its checks too)",
    "cudafind": "finding the CUDA toolkits: cuda_toolkits, gpu_doctor (through cudalayout)",
    "cudalayout": "the CUDA layout report (collect): cuda_toolkits, gpu_doctor",
    "cudalinks": "the /usr/local/cuda link, loader and LD_LIBRARY_PATH probes: cuda_toolkits, gpu_doctor",
    "cudaread": "HostFS and the CUDA text parsers: cuda_toolkits, gpu_doctor",
    "cudatk": "CUDA layout paths and the toolkit choice: cuda_toolkits, gpu_doctor, gpu_gate (through doctor)",
    "doctor": "gpu_doctor (through doctor_probe), gpu_gate",
    "doctor_childprobe": "the doctor's torch and cuInit probes run in a child interpreter: gpu_doctor",
    "doctor_hostprobe": "the doctor's PCI, NVSwitch, fabric manager, cgroup and device-node probes: gpu_doctor",
    "doctor_loginenv": "the login session's environment, for the doctor: gpu_doctor",
    "doctor_nvmlprobe": "the doctor's NVML evidence and the renter's GPU looks: gpu_doctor",
    "doctor_probe": "gpu_doctor",
    "doctor_match_cuda": "the doctor's CUDA stack and GPU matchers: gpu_doctor, gpu_gate (through doctor_rules)",
    "doctor_match_renter": "the doctor's renter-check matchers and thresholds: gpu_doctor, gpu_gate (through doctor)",
    "doctor_rules": "gpu_doctor, gpu_gate (through doctor)",
    "doctor_texts": "the doctor's torch/CUDA error texts and cuInit codes: gpu_doctor, gpu_gate (through doctor)",
    "facts": "gpu_facts, cuda_toolkits, gpu_doctor",
    "gate": "gpu_gate",
    "gate_bench": "gpu_gate",
    "gate_load": "the gate's sustained GEMM and burn-in load and their entries: gpu_gate",
    "gate_measure": "the gate's timer, repetition loop, telemetry, sizes and single-GPU tests: gpu_gate",
    "gate_multi": "the gate's P2P, NCCL all-reduce and gloo stand-in: gpu_gate",
    "hostctx": "the command runner and shared readers: gpu_facts, cuda_toolkits, gpu_doctor, gpu_gate",
    "hostenv": "gpu_facts, cuda_toolkits, gpu_doctor (through facts, doctor_probe)",
    "hostnet": "gpu_facts, cuda_toolkits, gpu_doctor (through facts and hostready)",
    "hostready": "gpu_facts, cuda_toolkits, gpu_doctor (through facts)",
    "hostres": "gpu_facts, cuda_toolkits, gpu_doctor (through hostenv, hostready, doctor_probe)",
    "jupyter": "copied to the host as the config checker (roles/jupyter/tasks/install.yml); the jupyter filters",
    "kmsg": "gpu_facts, cuda_toolkits, gpu_doctor, gpu_gate (through facts, doctor, gate_bench)",
    "nvml": "gpu_facts, cuda_toolkits, gpu_doctor, gpu_gate",
    "nvsmi": "gpu_facts, cuda_toolkits, gpu_doctor, gpu_gate (through nvml and facts)",
    "specs": "gpu_gate, and every module that reads nvml",
    "tablerow": "the reference tables' row builder: specs, torchtable, ctk (and who ships them)",
    "torcharch": "GPU arches and kernel coverage: gpu_doctor, gpu_gate (through doctor_rules), torch_variant",
    "torchcheck": "installed-torch and install-request checks: torch_variant",
    "torchcompat": "the torch build chooser (solve): torch_variant, torch_target (through torchtarget)",
    "torchparse": "torch/driver/CUDA version parsers: torch_variant, torch_target, gpu_doctor, gpu_gate",
    "torchtable": "the torch/CUDA wheel table: torch_variant, torch_target, gpu_doctor, gpu_gate",
    "torchtarget": "torch_target",
}

CONTROLLER = {
    "audit": "the checklist's security items 10-11; the report (report/_common, report/model) reads the checklist here",
    "briefs": "the judgement (a doctor finding's evidence in a few words): the report, scripts/check-verdicts",
    "capacity": "the audit and the report's cells",
    "checkitem": "the checklist's item shape: audit, checklist and its item modules",
    "checklist": "the report's checklist (through audit), tests",
    "checklist_gpu": "the checklist's GPU items (checklist)",
    "checklist_host": "the checklist's host items (checklist)",
    "evidence": "the shape of a host's evidence as the judgement reads it: the report's findings",
    "features": "the audit and the report's model",
    "history": "scripts/fleet-report, the report",
    "judgement": "the report, scripts/check-verdicts",
    "layers": "this table: tests/unit/test_layers.py",
    "providers": "the package: inventory_plugins/*, provider_return (a localhost play), the report's model",
    "report": "scripts/fleet-report (playbooks/report.yml on localhost); the whole package",
    "runner_results": "scripts/fleet-report (AWX job results)",
    "sshcrypto": "the ssh_hardening role's filters (run on the controller)",
    "torch_advisories": "the audit",
}

# Modules that run on the controller (a play on localhost): their payload may carry controller code.
CONTROLLER_MODULES = {
    "provider_return": "playbooks/return.yml (hosts: localhost, connection: local)",
}
