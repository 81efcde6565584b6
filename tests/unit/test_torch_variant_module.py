"""library/torch_variant.py run as Ansible runs it: the AnsiballZ payload Ansible builds, run by this Python
(tests/unit/ansible_module.py); one case also through the real `ansible localhost -m torch_variant -o` CLI."""

import os

import pytest

from tests.unit import ansible_module

CPU_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"

pytestmark = ansible_module.needs_ansible


def _env(env_extra=None):
    env = dict(os.environ)
    for var in ("PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        env.pop(var, None)
    env.update(env_extra or {})
    return env


def run_module(tmp_path, args, env_extra=None):
    """Returns (ok, result) of one module run; args is a dict passed as JSON."""
    return ansible_module.run("torch_variant", args, tmp_path, env=_env(env_extra))


def test_the_cli_gives_the_same_answer_as_the_payload(tmp_path):
    """The whole path once: `ansible localhost -m torch_variant` (inventory, action plugin, local connection)."""
    args = {"torch_version": "2.5.1", "variant": "auto", "python_version": "3.11", "driver_version": "535.129.03",
            "compute_capabilities": ["9.0", "8.0"]}
    state, cli, _out = ansible_module.cli_run("torch_variant", args, tmp_path, env=_env())
    ok, res = run_module(tmp_path, args)
    assert state == "localhost | SUCCESS" and ok
    assert cli["ansible_facts"] == res["ansible_facts"]
    assert cli["ansible_facts"]["torch_selection"]["requirement"] == "torch==2.5.1+cu121"
    failed, why, _out = ansible_module.cli_run("torch_variant", dict(args, compute_capabilities=["12.0"]), tmp_path,
                                               env=_env())
    assert failed == "localhost | FAILED!" and "needs driver >= 570.26" in why["msg"]


def test_auto_on_h100_and_a100_picks_cu121_and_says_why(tmp_path):
    ok, res = run_module(tmp_path, {"torch_version": "2.5.1", "variant": "auto", "python_version": "3.11",
                                    "driver_version": "535.129.03", "compute_capabilities": ["9.0", "8.0"],
                                    "packages": ["torchvision==0.20.1", "torchaudio==2.5.1"]})
    assert ok and res["changed"] is False
    sel = res["ansible_facts"]["torch_selection"]
    assert sel["requirement"] == "torch==2.5.1+cu121"
    assert sel["index_url"] == "https://download.pytorch.org/whl/cu121"
    assert sel["cuda_version"] == "12.1"
    assert sel["requirements"] == ["torch==2.5.1+cu121", "torchvision==0.20.1", "torchaudio==2.5.1"]
    assert any("535.129.03" in r for r in sel["reasons"])


def test_auto_on_blackwell_refuses_the_cu121_release(tmp_path):
    ok, res = run_module(tmp_path, {"torch_version": "2.5.1", "variant": "auto", "python_version": "3.11",
                                    "driver_version": "570.124.06", "compute_capabilities": ["12.0"]})
    assert not ok
    assert "12.0" in res["msg"] and "no kernels" in res["msg"]


def test_auto_without_gpu_installs_cpu(tmp_path):
    ok, res = run_module(tmp_path, {"torch_version": "2.13.0", "variant": "auto", "python_version": "3.11"})
    assert ok
    assert res["ansible_facts"]["torch_selection"]["requirement"] == "torch==2.13.0+cpu"


def test_cuda_variant_on_a_host_without_gpu_is_kept_with_a_warning(tmp_path):
    ok, res = run_module(tmp_path, {"torch_version": "2.5.1", "variant": "cu121", "python_version": "3.11"})
    assert ok
    sel = res["ansible_facts"]["torch_selection"]
    assert sel["requirement"] == "torch==2.5.1+cu121" and sel["cuda_version"] == "12.1"
    assert any("no NVIDIA GPU" in w for w in sel["warnings"])


@pytest.mark.parametrize("args, needle", [
    ({"torch_version": ">=2"}, "not pinned exactly"),
    ({"torch_version": "2.5"}, "not an exact release"),
    ({"torch_version": "2.5.1", "packages": ["torchvision>=0.20"]}, "not pinned exactly"),
    ({"torch_version": "2.5.1", "packages": ["--extra-index-url https://pypi.org/simple"]}, "--extra-index-url"),
    ({"torch_version": "2.5.1", "index_url": "https://download.pytorch.org/whl/cu121 --extra-index-url https://x"},
     "--extra-index-url"),
    ({"torch_version": "2.5.1", "index_url": "http://download.pytorch.org/whl/cu121"}, "is not https"),
    ({"torch_version": "2.5.1+cu118"}, "carries +cu118 but the variant is cu121"),
    ({"torch_version": "2.5.1", "python_version": "3.8"}, "no wheels for Python 3.8"),
    ({"torch_version": "2.13.0", "python_version": "3.11"}, "torch 2.13 has no cu121 wheels"),
    ({"torch_version": "2.5.1", "driver_version": "470.82.01", "compute_capabilities": ["8.0"]},
     "older than 525.60.13"),
])
def test_bad_requests_are_refused(tmp_path, args, needle):
    ok, res = run_module(tmp_path, dict({"variant": "cu121"}, **args))
    assert not ok
    assert res["msg"].startswith("refused: ")
    assert needle in res["msg"]


def test_extra_index_url_in_the_host_environment_is_refused(tmp_path):
    ok, res = run_module(tmp_path, {"torch_version": "2.5.1", "variant": "cu121"},
                         env_extra={"PIP_EXTRA_INDEX_URL": "https://pypi.org/simple"})
    assert not ok
    assert "PIP_EXTRA_INDEX_URL" in res["msg"]


def test_wheelhouse_with_another_variant_is_refused_naming_both(tmp_path):
    ok, res = run_module(tmp_path, {"torch_version": "2.13.0", "variant": "cu126", "python_version": "3.11",
                                    "wheelhouse_files": [CPU_WHEEL, "sympy-1.14.0-py3-none-any.whl"]})
    assert not ok
    assert "torch==2.13.0+cu126" in res["msg"] and "torch 2.13.0+cpu" in res["msg"]


def test_wheelhouse_holding_every_pin_passes(tmp_path):
    ok, res = run_module(tmp_path, {"torch_version": "2.13.0", "variant": "cpu", "python_version": "3.11",
                                    "packages": ["nvidia-ml-py==13.615.71"],
                                    "wheelhouse_files": [CPU_WHEEL, "nvidia_ml_py-13.615.71-py3-none-any.whl"]})
    assert ok, res
    ok, res = run_module(tmp_path, {"torch_version": "2.13.0", "variant": "cpu", "python_version": "3.11",
                                    "packages": ["nvidia-ml-py==13.615.71"], "wheelhouse_files": [CPU_WHEEL]})
    assert not ok and "no nvidia-ml-py wheel at all" in res["msg"]


def test_installed_build_matching_the_request_passes(tmp_path):
    ok, res = run_module(tmp_path, {"torch_version": "2.13.0", "variant": "cpu", "python_version": "3.11",
                                    "installed": {"version": "2.13.0+cpu", "cuda": None}})
    assert ok, res
    assert res["ansible_facts"]["torch_selection"]["installed"]["ok"] is True


@pytest.mark.parametrize("variant, installed, needles", [
    ("cu126", {"version": "2.13.0+cpu", "cuda": None}, ["2.13.0+cu126", "2.13.0+cpu", "not cu126"]),
    ("cpu", {"version": "2.13.0", "cuda": "12.6"}, ["2.13.0+cpu", "torch.version.cuda=12.6"]),
    ("cpu", {"version": "2.12.0+cpu", "cuda": None}, ["2.12.0+cpu is installed, not 2.13.0"]),
])
def test_installed_build_not_matching_the_request_fails_naming_both(tmp_path, variant, installed, needles):
    ok, res = run_module(tmp_path, {"torch_version": "2.13.0", "variant": variant, "python_version": "3.11",
                                    "installed": installed})
    assert not ok
    for needle in needles:
        assert needle in res["msg"], res["msg"]


# PyPI's torch 2.14.1 wheel as it lies on disk: no label in the file name, the cu130 build inside.
PYPI_2141 = "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
H200 = {"driver_version": "590.48.01", "compute_capabilities": ["9.0"]}


def test_auto_takes_the_build_the_wheelhouse_holds_and_pins_pypi_wheel_without_label(tmp_path):
    ok, res = run_module(tmp_path, dict(H200, torch_version="2.14.1", variant="auto", python_version="3.11",
                                        wheelhouse_files=[PYPI_2141]))
    assert ok, res
    sel = res["ansible_facts"]["torch_selection"]
    assert sel["variant"] == "cu130" and sel["requirement"] == "torch==2.14.1"
    assert sel["local_version"] == "2.14.1+cu130" and sel["cuda_version"] == "13.0"
    assert any("unlabelled torch 2.14.1 wheel" in r for r in sel["reasons"])
    assert any("wheelhouse holds torch 2.14.1 builds cu130" in r for r in sel["reasons"])


def test_auto_without_a_wheelhouse_keeps_the_table_order(tmp_path):
    ok, res = run_module(tmp_path, dict(H200, torch_version="2.14.1", variant="auto", python_version="3.11"))
    assert ok, res
    sel = res["ansible_facts"]["torch_selection"]
    assert sel["requirement"] == "torch==%s" % sel["local_version"] and sel["variant"] != "cpu"


def test_pypi_wheel_of_another_build_is_not_taken_for_the_requested_one(tmp_path):
    ok, res = run_module(tmp_path, dict(H200, torch_version="2.14.1", variant="cu126", python_version="3.11",
                                        wheelhouse_files=[PYPI_2141]))
    assert not ok
    assert "torch==2.14.1+cu126" in res["msg"] and "torch 2.14.1" in res["msg"]


def test_auto_with_a_driver_too_old_for_the_held_build_is_refused(tmp_path):
    ok, res = run_module(tmp_path, dict(torch_version="2.14.1", variant="auto", python_version="3.11",
                                        driver_version="550.90.07", compute_capabilities=["9.0"],
                                        wheelhouse_files=[PYPI_2141]))
    assert not ok and "wheelhouse has no wheel for torch==2.14.1+cu126" in res["msg"]


def test_installed_pypi_build_checked_by_its_version_and_cuda(tmp_path):
    ok, res = run_module(tmp_path, dict(H200, torch_version="2.14.1", variant="cu130", python_version="3.11",
                                        installed={"version": "2.14.1+cu130", "cuda": "13.0"}))
    assert ok, res
    ok, res = run_module(tmp_path, dict(H200, torch_version="2.14.1", variant="cu130", python_version="3.11",
                                        installed={"version": "2.13.0+cpu", "cuda": None}))
    assert not ok and "2.13.0+cpu" in res["msg"]


# Issue 36: variant auto never installs a torch the GPU cannot run (each of these picked torch==2.14.1+cu126 before).
@pytest.mark.parametrize("gpu, driver, cc, picked", [
    ("RTX 5090", "575.57.08", "12.0", None),            # no 2.14.1 build runs it on this driver
    ("B200", "580.95.05", "10.0", "torch==2.14.1+cu130"),
    ("H100", "535.183.01", "9.0", "torch==2.14.1+cu126"),
    ("RTX 4090", "550.54.15", "8.9", "torch==2.14.1+cu126"),
])
def test_auto_picks_a_build_that_runs_the_gpu(tmp_path, gpu, driver, cc, picked):
    ok, res = run_module(tmp_path, {"torch_version": "2.14.1", "variant": "auto", "python_version": "3.11",
                                    "driver_version": driver, "compute_capabilities": [cc]})
    if picked is None:
        assert not ok
        assert "12.0 (Blackwell) has no kernels in torch 2.14.1+cu126" in res["msg"]
        assert "is torch 2.11.0+cu128 (torch==2.11.0+cu128 from https://download.pytorch.org/whl/cu128)" in res["msg"]
        return
    assert ok, res
    sel = res["ansible_facts"]["torch_selection"]
    assert sel["requirement"] == picked
    assert any("kernels for compute capability %s" % cc in r for r in sel["reasons"]), sel["reasons"]


# Issue 36, "the refusal always has the facts": the torch role passes the GPU facts with a pinned variant too, so the
# house default on an RTX 5090 is refused (before anything is installed), naming what variant auto would do.
def test_the_default_pin_on_an_rtx_5090_is_refused_naming_the_build_that_runs(tmp_path):
    ok, res = run_module(tmp_path, {"torch_version": "2.5.1", "variant": "cu121", "python_version": "3.11",
                                    "driver_version": "575.57.08", "compute_capabilities": ["12.0"],
                                    "packages": ["torchvision==0.20.1", "torchaudio==2.5.1"]})
    assert not ok
    assert res["msg"].startswith("refused: GPU compute capability 12.0 (Blackwell) has no kernels in torch "
                                 "2.5.1+cu121")
    assert "variant auto has no torch 2.5.1 build for it either" in res["msg"]
    assert "is torch 2.11.0+cu128 (torch==2.11.0+cu128 from https://download.pytorch.org/whl/cu128)" in res["msg"]
