#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module gpu_gate: timed torch benchmarks per GPU against what that GPU model should reach."""

DOCUMENTATION = r"""
---
module: gpu_gate
short_description: Benchmark gate - does each GPU deliver what its model should?
description:
  - Runs timed torch benchmarks on every GPU of the host - a dense BF16 GEMM (FP16 where the GPU has no
    BF16) on random normal data at 8192^3, a TF32 GEMM, device-memory bandwidth with 1 GiB buffers (an SM
    kernel), pinned host-to-device and device-to-host copies, peer-to-peer copies to the next GPU when the
    host has several, and (opt-in) an NCCL all-reduce across all its GPUs.
  - Each test has warm-up runs, then timed repetitions (CUDA events; the thread's CPU time in cpu mode) until
    C(repetitions) or the test's share of
    C(time_budget_s) is spent; the median is the measured figure, reported with its spread, the SM clock, power
    limit and throttle reasons read (NVML) while its last runs are still queued.
  - The expected figure is the GPU's dense vendor peak (C(module_utils/gpufleet/host/gpu/specs.py)) times the floor of
    its class (data-center SXM/HBM, PCIe power-capped, GeForce, workstation) from
    C(module_utils/gpufleet/host/gate/rules.py), overridable per model or class. A GPU also fails a test when it
    is more than C(outlier_margin) below the median of the other GPUs of the host.
  - Returns C(ansible_facts.gpu_gate), the list the fleet report reads. Never fails because a test failed; fails
    on bad input, without torch, and on a host where torch cannot use CUDA (with torch's own message, classified).
  - Must run with the Python of the torch venv (C(ansible_python_interpreter), see EXAMPLES). Changes nothing.
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  device:
    description:
      - C(cuda) runs on the host's GPUs. C(cpu) runs the same code with small sizes on the CPU (one thread) against
        fixed mechanics-only floors, so the gate can be tested on machines without a GPU.
    type: str
    choices: [cuda, cpu]
    default: cuda
  tier:
    description:
      - C(quick) (about a minute) runs the default tests. C(full) (at most 300 s) adds C(nccl_allreduce) (bus
        bandwidth against per-model floors) and C(sustained_gemm) (a C(sustained_s) GEMM on all GPUs at once,
        sampling SM clock and throttle reasons; entries C(sustained_gemm) and C(clock_drop)). C(burn-in) (900 to
        3600 s, opt-in) adds C(burn_in) - GEMM plus memory load for the rest of the budget, sampling
        temperature, power, clocks and throttle reasons, and reading new Xid lines in the kernel log (entries
        C(burn_in_gemm), C(burn_in_clock_drop), C(burn_in_throttle), C(burn_in_temperature), C(burn_in_xid)).
      - In cpu mode every tier runs its mechanics with small sizes and any budget up to the tier's maximum; a gloo
        all-reduce between two local processes stands in for NCCL.
    type: str
    choices: [quick, full, burn-in]
    default: quick
    aliases: [gate_tier]
  tests:
    description:
      - Tests to run (default the tier's). C(bf16_gemm) becomes C(fp16_gemm) on GPUs without BF16. C(p2p_bandwidth)
        and C(nccl_allreduce) need two or more GPUs and are skipped (listed in C(gate.skipped)) otherwise (in cpu
        mode C(nccl_allreduce) runs over gloo).
    type: list
    elements: str
  time_budget_s:
    description:
      - Hard limit in seconds for the whole gate on this host; default the tier's (60, 300, 900), within its range
        on a GPU (quick at most 60, full at most 300, burn-in 900 to 3600). The per-GPU tests share equally what the
        sustained GEMM and burn-in leave; each still runs its warm-up and at least 3 repetitions unless the budget
        ends. Once a test cannot fit in what is left it does not start and is listed in C(gate.skipped) with the
        reason. Less than 1 s per test and GPU is refused.
    type: float
  sustained_s:
    description: Seconds of the full tier's sustained GEMM (default 45 on a GPU, 2 in cpu mode);
      at most half the budget.
    type: float
  repetitions:
    description: Timed repetitions per test (at most; the budget may stop a test earlier, never below 3).
    type: int
    default: 20
  warmup:
    description: Untimed runs before the timed ones.
    type: int
    default: 3
  outlier_margin:
    description: A GPU fails a test when it is more than this fraction below the median of the host's other GPUs.
    type: float
    default: 0.10
  expected:
    description:
      - Absolute expected figures (TFLOPS or GB/s) per spec key (C(h100-sxm)), GPU name as torch reports it, or
        C(cpu); for example C(h100-sxm) mapped to C(bf16_gemm) 720. Wins over C(floors).
    type: dict
    default: {}
  floors:
    description:
      - Fractions of the dense peak a GPU must reach, per spec key or gate class (C(datacenter-hbm),
        C(pcie-capped), C(geforce), C(workstation)); for example C(pcie-capped) mapped to C(bf16_gemm) 0.5.
    type: dict
    default: {}
  gemm_size:
    description: GEMM edge (M=N=K). Default 8192 on a GPU (halved until it fits), 512 in cpu mode.
    type: int
  buffer_mib:
    description:
      - Size of each bandwidth buffer in MiB. Default 1024 on a GPU (256 for host copies), 64 in cpu mode.
      - On a GPU at least 336, so that the memory test's three buffers are 8 x the largest L2 in the spec table
        (B200, 126 MB); a smaller value is refused as bad input. Where free memory shrinks the buffers under 8 x a
        GPU's own L2, its memory test is not measured and fails.
    type: int
requirements:
  - torch (in the interpreter the module runs with)
  - nvidia-ml-py (optional; clocks, power limit and throttle reasons)
notes:
  - Supports check mode; the module never changes anything (it does load the GPUs for up to C(time_budget_s)).
extends_documentation_fragment:
  - gpufleet_attributes
  - gpufleet_attributes.facts
  - gpufleet_attributes.read_only
  - gpufleet_attributes.facts_module
"""

EXAMPLES = r"""
- name: Gate every GPU (quick gate, at most 60 s)
  gpu_gate:
  vars:
    ansible_python_interpreter: /opt/gpufleet/venv/bin/python

- name: Full gate (at most 5 min) - adds the all-reduce and a sustained GEMM with clock sampling
  gpu_gate:
    tier: full
  vars:
    ansible_python_interpreter: /opt/gpufleet/venv/bin/python

- name: Gate with a lower floor for PCIe cards and a fixed figure for one model
  gpu_gate:
    time_budget_s: 45
    floors:
      pcie-capped: {bf16_gemm: 0.5}
    expected:
      h100-sxm: {bf16_gemm: 720}
  vars:
    ansible_python_interpreter: /opt/gpufleet/venv/bin/python

- name: Fail hosts with a GPU below the gate
  ansible.builtin.assert:
    that: ansible_facts['gpu_gate'] | selectattr('passed', 'false') | list | length == 0
    fail_msg: "{{ ansible_facts['gpu_gate'] | selectattr('passed', 'false') | map(attribute='why') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(gpu_gate).
  returned: success
  type: dict
  contains:
    gpu_gate:
      description:
        - One entry per GPU and test - index, test, measured (median), expected, unit (TFLOPS or GB/s),
          fraction_of_peak (measured / dense vendor peak), passed (true, false, or null when there is nothing to
          compare with), why.
        - Also median, min, max, spread ((max-min)/median), iqr, repetitions, peak, floor, expectation_source,
          peer_median, outlier, device, mode, size, dtype, duration_s, sm_mhz, sm_max_mhz, power_limit_w,
          power_draw_w, temperature_c, throttle_reasons.
      type: list
      elements: dict
      sample:
        - {index: 0, test: bf16_gemm, measured: 781.2, expected: 692.3, unit: TFLOPS, fraction_of_peak: 0.79,
           passed: true, why: "781.2 TFLOPS >= expected 692.3 TFLOPS", spread: 0.012, power_limit_w: 700.0}
gate:
  description: Summary of the run.
  returned: success
  type: dict
  contains:
    passed:
      description: False when any entry failed, null when nothing could be compared.
      type: bool
    failed:
      description: C(why) of every failed entry, prefixed with the GPU index and test.
      type: list
      elements: str
    skipped:
      description: Tests not run on this host and why.
      type: list
      elements: dict
    device_count:
      description: GPUs the gate ran on (1 in cpu mode).
      type: int
    torch_version:
      description: torch in the interpreter that ran the gate.
      type: str
    duration_s:
      description: Seconds the benchmarks took (the same as C(wall_s)).
      type: float
    tier:
      description: The tier that ran.
      type: str
    tests:
      description: The tests asked for.
      type: list
      elements: str
    time_budget_s:
      description: The hard budget, seconds.
      type: float
    wall_s:
      description: Measured wall time of the gate on this host, seconds.
      type: float
    budget_spent:
      description: >-
        True when the budget stopped a test from starting, or the gate ended past its budget
        (see C(budget_note) and C(skipped)).
      type: bool
    budget_note:
      description: Why the budget stopped work, or that the gate finished within it.
      type: str
torch_text:
  description: torch's warning or error text when it cannot use CUDA.
  returned: when CUDA is unusable
  type: str
torch_error_code:
  description: The doctor's text code for C(torch_text)
    (C(module_utils/gpufleet/host/doctor/texts.py) explain_torch_error).
  returned: when CUDA is unusable
  type: str
"""

import os
import traceback

# torch's device indices in NVML's (PCI bus) order, so gate entry N is the GPU gpu_facts lists as N.
# Read by CUDA when it initialises, which happens after this import; a value the user set wins.
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.gpufleet.host.doctor import texts as doctor_texts
from ansible.module_utils.gpufleet.host.gate import bench as gate_bench
from ansible.module_utils.gpufleet.host.gate import rules as gate
from ansible.module_utils.gpufleet.host.gpu import specs

try:
    import torch

    TORCH_IMPORT_ERROR = None
except Exception:  # ImportError, or a broken install (a CUDA library that does not load)
    torch = None
    TORCH_IMPORT_ERROR = traceback.format_exc()


def _pynvml():
    try:
        import pynvml

        return pynvml
    except Exception:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            device=dict(type="str", default="cuda", choices=list(gate.DEVICES)),
            tier=dict(type="str", default="quick", choices=list(gate.TIERS), aliases=["gate_tier"]),
            tests=dict(type="list", elements="str"),
            time_budget_s=dict(type="float"),
            sustained_s=dict(type="float"),
            repetitions=dict(type="int", default=gate.DEFAULTS["repetitions"]),
            warmup=dict(type="int", default=gate.DEFAULTS["warmup"]),
            outlier_margin=dict(type="float", default=gate.DEFAULTS["outlier_margin"]),
            expected=dict(type="dict", default={}),
            floors=dict(type="dict", default={}),
            gemm_size=dict(type="int"),
            buffer_mib=dict(type="int"),
        ),
        supports_check_mode=True,
    )
    try:
        # module.params also holds each alias under its own name; the gate reads the option names
        params = gate.validate({k: v for k, v in module.params.items() if k != "gate_tier"})
    except gate.GateInputError as exc:
        module.fail_json(msg="gpu_gate: invalid input: %s" % exc)
    if torch is None:
        hint = "Run it with the torch venv's Python (ansible_python_interpreter: /opt/gpufleet/venv/bin/python)."
        module.fail_json(msg="gpu_gate: %s %s" % (missing_required_lib("torch"), hint), exception=TORCH_IMPORT_ERROR)
    try:
        result = gate_bench.run(torch, params, specs.lookup, _pynvml() if params["device"] == "cuda" else None)
    except gate.GateInputError as exc:
        module.fail_json(msg="gpu_gate: invalid input: %s" % exc)
    except gate_bench.CudaUnavailable as exc:
        code, line = doctor_texts.explain_torch_error(exc.text)
        detail = ("doctor code %s: %s" % (code, line)) if code else (
            "torch says: %s" % (exc.text.strip().splitlines() or ["nothing (no GPU visible)"])[-1][:500])
        module.fail_json(msg="gpu_gate: no usable GPU: %s (%s). The gpu_doctor module names the cause and the "
                             "remedy." % (exc, detail), torch_text=exc.text, torch_error_code=code)
    entries = gate.evaluate(result["raw"], result["gpus"], params)
    verdicts = [e["passed"] for e in entries if e["passed"] is not None]
    budget = result["budget"]
    summary = {
        "passed": (all(verdicts) if verdicts else None),
        "failed": ["GPU %s %s: %s" % (e["index"], e["test"], e["why"]) for e in entries if e["passed"] is False],
        "skipped": result["skipped"], "device_count": result["device_count"],
        "torch_version": result["torch_version"], "duration_s": result["duration_s"],
        "tier": params["tier"], "tests": params["tests"], "time_budget_s": params["time_budget_s"],
        "wall_s": budget["wall_s"], "budget_spent": budget["stopped"] is not None,
        "budget_note": budget["stopped"] or "finished within the budget ({0:.1f} of {1:.0f} s)".format(
            budget["wall_s"], params["time_budget_s"]),
    }
    module.exit_json(changed=False, ansible_facts={"gpu_gate": entries}, gate=summary)


if __name__ == "__main__":
    main()
