"""library/gpu_gate.py run as Ansible runs it (the AnsiballZ payload Ansible builds, run by this Python or the torch
venv's; one case through the real `ansible localhost -m gpu_gate` CLI: tests/unit/ansible_module.py).

Without a GPU here, the module is run (a) with bad input, (b) in an interpreter without torch and
(c) with a stand-in ``torch`` package (written into tmp_path, a test double of a host whose driver
is too old) that raises the warning real torch printed in a recorded report. The cpu mode with real
torch runs end to end in molecule/gate; here, when GPUFLEET_TORCH_PYTHON names a Python with torch, the sustained
load's stopping rule and a budget too small for the all-reduce.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from module_utils.gpufleet.host.gate import rules as gate
from tests.unit import ansible_module
from tests.unit.doubles import FIXTURES

ROOT = Path(__file__).resolve().parents[2]

pytestmark = ansible_module.needs_ansible

FAKE_TORCH = '''
import warnings
__version__ = "2.5.1+cu121"
_TEXT = {text!r}


class cuda:
    @staticmethod
    def is_available():
        warnings.warn(_TEXT, UserWarning)
        return False

    @staticmethod
    def device_count():
        return 0

    @staticmethod
    def init():
        raise RuntimeError(_TEXT)
'''


def run_module(tmp_path, args, python=None, pythonpath=None, check=False, cli=False):
    """The module's result: its AnsiballZ payload as Ansible builds it, run by PYTHON (tests/unit/ansible_module.py),
    or with cli through the real `ansible localhost -m gpu_gate` CLI."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    if cli:  # this Python only
        assert python is None
        return ansible_module.cli_json("gpu_gate", args, tmp_path, check=check, env=env)[1]
    return ansible_module.run("gpu_gate", args, tmp_path, check=check, env=env, python=python, timeout=300)[1]


@pytest.mark.parametrize("args, message", [
    ('{"outlier_margin": -0.5}', "outlier_margin must be a number between 0 and 1"),
    ('{"tests": ["bf16_gemm", "fp8_gemm"]}', "unknown test name(s) 'fp8_gemm'"),
    ('{"time_budget_s": 1}', "time_budget_s 1 s is too small to run anything"),
    ('{"expected": {"h100-sxm": {"bf16_gemm": "fast"}}}', "expected['h100-sxm']['bf16_gemm'] must be a finite number"),
    ('{"time_budget_s": "NaN"}', "time_budget_s must be a finite number"),
])
def test_bad_input_fails_before_anything_runs(tmp_path, args, message):
    result = run_module(tmp_path, args)
    assert result["failed"] is True
    assert result["msg"].startswith("gpu_gate: invalid input:") and message in result["msg"]


def test_string_threshold_is_refused_by_the_argument_spec(tmp_path):
    result = run_module(tmp_path, '{"outlier_margin": "ten percent"}', cli=True)
    assert result["failed"] is True and "outlier_margin" in result["msg"] and "float" in result["msg"]


def test_without_torch_it_says_which_interpreter_to_use(tmp_path):
    pytest.importorskip("ansible")
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("this Python has torch")
    result = run_module(tmp_path, '{"device": "cpu"}')
    assert result["failed"] is True
    assert "torch" in result["msg"] and "/opt/gpufleet/venv/bin/python" in result["msg"]
    assert "Traceback" not in result["msg"]


def test_host_without_usable_cuda_fails_with_the_doctors_classification(tmp_path):
    recorded = (FIXTURES / "doctor" / "torch_errors" / "driver-too-old_found-10010_userwarning_yolov5-2389.txt"
                ).read_text()
    text = recorded.split("UserWarning: ", 1)[1].splitlines()[0]
    (tmp_path / "fake" / "torch").mkdir(parents=True)
    (tmp_path / "fake" / "torch" / "__init__.py").write_text(FAKE_TORCH.format(text=text))
    result = run_module(tmp_path, '{"device": "cuda"}', pythonpath=tmp_path / "fake", check=True)
    assert result["failed"] is True
    assert result["msg"].startswith("gpu_gate: no usable GPU: torch 2.5.1+cu121 cannot use CUDA on this host")
    assert "doctor code driver_too_old" in result["msg"] and "found version 10010" in result["msg"]
    assert result["torch_error_code"] == "driver_too_old"
    assert "Traceback" not in result["msg"]


TORCH_PYTHON = os.environ.get("GPUFLEET_TORCH_PYTHON")
# What a gate in cpu mode may end past its budget on the 2-core CI machine (docs/gate.md, "The budget"): the round of
# the sustained load that started before the deadline, 0.1 s of CPU time (gate_load.MIN_INTERVAL_S) that a CPU
# shared with a load of 15 stretches to about 0.8 s of wall time; 2 s leaves room for more.
BUDGET_SLACK_S = 2.0


# The quick and full tiers in cpu mode with real torch, end to end through Ansible (every figure positive and passed,
# the gloo all-reduce's bus bandwidth, the sustained GEMM's samples, the budget held) are molecule/gate's verify: the
# same module on the same torch, so the unit lane does not spend a minute running them again.


@pytest.mark.skipif(not TORCH_PYTHON, reason="set GPUFLEET_TORCH_PYTHON to a Python with torch")
def test_a_starved_sustained_load_goes_on_for_the_samples_a_clock_drop_needs():
    # A clock where every read is a second later: a thread that a loaded machine lets run for one round in its
    # 2 s. The load goes on past its seconds until it has the samples gate.drop_pct needs, within the budget;
    # with a budget too short for them it stops at the budget's end.
    code = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from gpufleet.host.gate import bench as gate_bench; from gpufleet.host.gate import load as gate_load
def run(budget_s):
    ticks = iter(range(10 ** 6))
    clock = lambda: float(next(ticks))
    budget = gate_bench.Budget(budget_s, clock=clock)
    load = gate_load.sustained_load(torch, "cpu", {0: {}}, {0: {"gemm": 32, "buffer_mib": 1}}, 2.0,
                                    budget=budget, clock=clock)
    return len(load[0]["samples"]), budget.over()
print(json.dumps([run(100), run(5)]))
"""
    res = subprocess.run([TORCH_PYTHON, "-c", code, str(ROOT / "module_utils")], capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    (roomy, roomy_over), (short, short_over) = json.loads(res.stdout)
    assert (roomy, roomy_over) == (gate.DROP_MIN_SAMPLES, False)
    assert 0 < short < gate.DROP_MIN_SAMPLES and short_over is True


@pytest.mark.skipif(not TORCH_PYTHON, reason="set GPUFLEET_TORCH_PYTHON to a Python with torch")
def test_a_budget_too_small_for_the_allreduce_stops_it_and_says_so(tmp_path):
    # 6 s: the GEMM's share, 2 s set aside for the sustained GEMM, less than the gloo start-up needs in between
    args = '{"device": "cpu", "tier": "full", "tests": ["bf16_gemm", "nccl_allreduce", "sustained_gemm"], ' \
           '"time_budget_s": 6, "repetitions": 5}'
    result = run_module(tmp_path, args, python=TORCH_PYTHON)
    assert result.get("failed") is not True, result
    gate = result["gate"]
    skipped = {s["test"]: s for s in gate["skipped"]}
    assert skipped["nccl_allreduce"]["budget"] is True
    assert skipped["nccl_allreduce"]["why"].startswith("time budget: ") and "needs at least" in skipped[
        "nccl_allreduce"]["why"]
    assert gate["budget_spent"] is True and gate["budget_note"].startswith(skipped["nccl_allreduce"]["why"])
    assert [e["test"] for e in result["ansible_facts"]["gpu_gate"]] == ["bf16_gemm", "sustained_gemm", "clock_drop"]
    # The budget holds, or the record says it did not: past its 6 s, the note goes on "; then time budget overrun".
    assert (gate["wall_s"] <= 6) is ("time budget overrun" not in gate["budget_note"])
    # A runaway guard on top, the budget plus BUDGET_SLACK_S (docs/gate.md, "The budget"): only the sampling round
    # the sustained GEMM started before the deadline may end past it.
    assert gate["wall_s"] <= 6 + BUDGET_SLACK_S
