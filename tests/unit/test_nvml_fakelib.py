"""The NVML path of the facts code, run against the fake libnvidia-ml.so.1 (tests/fakenvml).

Nothing here is a Python double: the real pynvml (nvidia-ml-py) loads the library built from
``tests/fakenvml/fake_nvml.c`` through ctypes, and ``gpufleet.host.gpu.facts.collect`` runs unchanged.
pynvml keeps the loaded library for the life of a process, so each profile is collected in its
own subprocess. Every expected value is read from the profile JSON, not repeated here.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fakenvml

ROOT = Path(__file__).resolve().parents[2]
_VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = _VENV_PYTHON if _VENV_PYTHON.exists() else Path(sys.executable)
ANSIBLE = PYTHON.parent / "ansible"
MIB = 1024 * 1024

HEALTHY = ("h100-sxm-8x-nvswitch", "a100-pcie-4x-degraded", "rtx4090-riser-x4", "h200-1x")
INIT_FAILS = {
    # profile -> error_code gpufleet must report, and the health status that code leads to
    "no-driver": ("driver_not_loaded", "failed"),
    "driver-mismatch": ("driver_library_mismatch", "failed"),
    "no-permission": ("insufficient_permissions", "unknown"),
}


pytestmark = pytest.mark.skipif(not fakenvml.usable(PYTHON), reason=fakenvml.NEEDS)

# Runs in the subprocess. nvidia-smi is "not installed" (rc 127), so there is no fallback:
# everything in the output came through pynvml and the fake library.
COLLECT = r"""
import json
import pynvml
from gpufleet.host.gpu import facts


def no_smi():
    return 127, b"", b"nvidia-smi: command not found"


print(json.dumps(facts.collect(pynvml=pynvml, run_nvidia_smi=no_smi, include_processes=True)))
"""


@pytest.fixture(scope="session")
def fakelib_dir(tmp_path_factory):
    libdir = tmp_path_factory.mktemp("fakenvml-facts")
    fakenvml.build(libdir)
    return libdir


@pytest.fixture(scope="session")
def collected(fakelib_dir):
    """collected(profile) -> facts dict from ``facts.collect`` in a subprocess (cached per profile)."""
    cache = {}

    def _collected(profile):
        if profile not in cache:
            env = {**os.environ, **fakenvml.env_for(profile, fakelib_dir), "PYTHONPATH": str(ROOT / "module_utils")}
            proc = subprocess.run([str(PYTHON), "-c", COLLECT], env=env, cwd=str(ROOT), capture_output=True,
                                  text=True, timeout=60, check=False)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert "fake-nvml:" not in proc.stderr, proc.stderr  # the library could not read the profile
            cache[profile] = json.loads(proc.stdout)
        return cache[profile]

    return _collected


def cuda_string(value):
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


def findings(facts, code=None, gpu_index="any"):
    return [f for f in facts["health"]["findings"]
            if (code is None or f["code"] == code) and (gpu_index == "any" or f["gpu_index"] == gpu_index)]


def live_gpus(profile):
    return [(i, g) for i, g in enumerate(fakenvml.load_profile(profile)["gpus"]) if not g.get("lost")]


# ---------------------------------------------------------------- whole-system values


@pytest.mark.parametrize("profile", HEALTHY)
def test_system_values_match_profile(collected, profile):
    data = fakenvml.load_profile(profile)
    facts = collected(profile)
    assert facts["source"] == "nvml"
    assert facts["error"] is None and facts["error_code"] is None
    assert facts["attempts"] == [{"source": "nvml", "error_code": None, "error": None}]
    assert facts["driver_version"] == data["driver_version"]
    assert facts["nvml_version"] == data["nvml_version"]
    assert facts["cuda_driver_version"] == cuda_string(data["cuda_driver_version"])
    assert facts["gpu_count"] == len(data["gpus"])
    assert [g["index"] for g in facts["gpus"]] == list(range(len(data["gpus"])))
    assert facts["warnings"] == []


def test_cuda_version_strings_are_the_expected_ones(collected):
    # Guards cuda_string() above against agreeing with a wrong conversion in the code.
    assert collected("h100-sxm-8x-nvswitch")["cuda_driver_version"] == "12.4"
    assert collected("a100-pcie-4x-degraded")["cuda_driver_version"] == "12.2"
    assert collected("h200-1x")["cuda_driver_version"] == "13.1"


# ---------------------------------------------------------------- per-GPU values


@pytest.mark.parametrize("profile", HEALTHY)
def test_gpu_values_match_profile(collected, profile):
    facts = collected(profile)
    for i, want in live_gpus(profile):
        gpu = facts["gpus"][i]
        where = "%s gpu %d" % (profile, i)
        assert gpu["index"] == i, where
        assert gpu["name"] == want["name"], where
        assert gpu["uuid"] == want["uuid"], where
        assert gpu["serial"] == want.get("serial"), where  # RTX 4090: no serial -> None
        assert gpu["vbios_version"] == want["vbios_version"], where
        assert gpu["pci_bus_id"] == want["pci"]["bus_id"], where
        assert gpu["memory_total_mib"] == want["memory_mib"]["total"], where
        mem = want["memory_mib"]
        # NVML v1 memory info folds the reserved memory into "used"; v2 reports it apart.
        assert mem["used"] <= gpu["memory_used_mib"] <= mem["used"] + mem["reserved"], where
        assert gpu["compute_capability"] == "%d.%d" % tuple(want["compute_capability"]), where
        assert gpu["compute_capability_source"] == "nvml", where
        pcie = want["pcie"]
        assert gpu["pcie"]["gen_current"] == pcie["curr_gen"], where
        assert gpu["pcie"]["gen_max"] == pcie["max_gen"], where
        assert gpu["pcie"]["gen_device_max"] == pcie.get("gpu_max_gen", pcie["max_gen"]), where
        assert gpu["pcie"]["width_current"] == pcie["curr_width"], where
        assert gpu["pcie"]["width_max"] == pcie["max_width"], where
        assert gpu["pcie"]["replays"] == pcie.get("replay_counter"), where
        assert gpu["clocks"] == {
            "sm_mhz": want["clocks_mhz"]["sm"], "sm_max_mhz": want["max_clocks_mhz"]["sm"],
            "mem_mhz": want["clocks_mhz"]["mem"], "mem_max_mhz": want["max_clocks_mhz"]["mem"],
        }, where
        assert gpu["temperature_c"] == want["temperature_c"], where
        assert gpu["power_draw_w"] == round(want["power_usage_mw"] / 1000.0, 2), where  # W, 2 decimals
        assert gpu["power_limit_w"] == pytest.approx(want["enforced_power_limit_mw"] / 1000.0), where
        assert gpu["power_limit_w"] == pytest.approx(want["power_limit_mw"] / 1000.0), where
        assert gpu["persistence_mode"] is want["persistence_mode"], where
        ecc_on = bool(want["ecc_mode"]["current"])
        assert gpu["ecc"]["mode"] == ("enabled" if ecc_on else "disabled"), where
        if ecc_on:
            errs = want["ecc_errors"]
            assert gpu["ecc"] == {
                "mode": "enabled",
                "volatile_corrected": errs["volatile"]["corrected"],
                "volatile_uncorrected": errs["volatile"]["uncorrected"],
                "aggregate_corrected": errs["aggregate"]["corrected"],
                "aggregate_uncorrected": errs["aggregate"]["uncorrected"],
            }, where
        assert gpu["remapped_rows"] == want["remapped_rows"], where
        if "mig_mode" in want:
            assert gpu["mig_mode"] == ("enabled" if want["mig_mode"]["current"] else "disabled"), where
        else:
            assert gpu["mig_mode"] is None, where
        if "nvlink" in want:
            total = want["nvlink"]["count"]
            assert gpu["nvlink"] == {"links_total": total,
                                     "links_active": total - len(want["nvlink"]["inactive"])}, where
        else:
            assert gpu["nvlink"] == {"links_active": None, "links_total": None}, where
        assert [(p["pid"], p["name"], p["used_memory_mib"]) for p in gpu["processes"]] == [
            (p["pid"], p["name"], p["used_memory_mib"]) for p in want.get("processes", [])], where
        assert all(p["gpu_instance_id"] is None and p["compute_instance_id"] is None
                   for p in gpu["processes"]), where
        assert "nvml_errors" not in gpu, where
        assert not gpu.get("lost"), where


@pytest.mark.parametrize(("profile", "spec_key"), [
    ("h100-sxm-8x-nvswitch", "h100-sxm"),
    ("a100-pcie-4x-degraded", "a100-pcie-80gb"),
    ("rtx4090-riser-x4", "rtx-4090"),
    ("h200-1x", "h200-sxm"),
])
def test_spec_row_matches_model(collected, profile, spec_key):
    facts = collected(profile)
    for i, want in live_gpus(profile):
        spec = facts["gpus"][i]["spec"]
        assert spec is not None, (profile, i)
        assert spec["key"] == spec_key, (profile, i)
        assert spec["compute_capability"] == "%d.%d" % tuple(want["compute_capability"])


# ---------------------------------------------------------------- health per profile


def test_h100_node_is_healthy(collected):
    facts = collected("h100-sxm-8x-nvswitch")
    assert facts["health"]["status"] == "ok"
    assert findings(facts, gpu_index="any") == findings(facts, "kernel_log_unreadable")
    assert {g["compute_capability"] for g in facts["gpus"]} == {"9.0"}
    assert all(g["power_limit_w"] == 700.0 for g in facts["gpus"])


def test_h200_under_load_is_healthy(collected):
    facts = collected("h200-1x")
    assert facts["health"]["status"] == "ok"
    assert facts["gpus"][0]["memory_total_mib"] == 143771
    assert facts["gpus"][0]["pcie"]["replays"] is None  # absent from the capture -> NOT_SUPPORTED


def test_rtx4090_riser_link_width_is_a_finding(collected):
    facts = collected("rtx4090-riser-x4")
    want = fakenvml.load_profile("rtx4090-riser-x4")["gpus"][0]["pcie"]
    pcie = facts["gpus"][0]["pcie"]
    assert pcie["width_current"] == want["curr_width"] == 4
    assert pcie["width_max"] == want["max_width"] == 16
    assert pcie["width_current"] < pcie["width_max"]
    found = findings(facts, "pcie_width_below_max", gpu_index=0)
    assert len(found) == 1
    assert found[0]["severity"] == "warning"
    assert "x4" in found[0]["message"] and "x16" in found[0]["message"]
    assert facts["health"]["status"] == "degraded"
    # GeForce without ECC counters: none read, none invented.
    assert facts["gpus"][0]["ecc"]["volatile_uncorrected"] is None
    assert findings(facts, "ecc_uncorrectable_volatile") == []


def test_a100_degraded_gpu2_fails_health(collected):
    facts = collected("a100-pcie-4x-degraded")
    want = fakenvml.load_profile("a100-pcie-4x-degraded")["gpus"][2]
    gpu = facts["gpus"][2]
    assert gpu["ecc"]["volatile_uncorrected"] == want["ecc_errors"]["volatile"]["uncorrected"] == 2
    assert gpu["remapped_rows"]["uncorrectable"] == want["remapped_rows"]["uncorrectable"]
    assert gpu["remapped_rows"]["pending"] is True and gpu["remapped_rows"]["failure"] is True
    assert facts["health"]["status"] == "failed"
    codes = {f["code"]: f for f in findings(facts, gpu_index=2)}
    assert codes["ecc_uncorrectable_volatile"]["severity"] == "critical"
    assert codes["row_remap_failure"]["severity"] == "critical"
    assert codes["row_remap_pending"]["severity"] == "warning"
    # The healthy A100s carry no ECC / row-remap findings.
    for i in (0, 1):
        assert not [f for f in findings(facts, gpu_index=i) if f["code"].startswith(("ecc_", "row_remap"))]


def test_a100_lost_gpu3_is_listed_without_crashing(collected):
    facts = collected("a100-pcie-4x-degraded")
    assert facts["error"] is None
    assert facts["gpu_count"] == 4  # nvmlDeviceGetCount still counts the lost GPU
    gpu = facts["gpus"][3]
    assert gpu["index"] == 3
    assert gpu["name"] is None and gpu["uuid"] is None and gpu["pci_bus_id"] is None
    assert gpu["nvml_errors"]["handle"].startswith("gpu_lost")


def test_a100_lost_gpu3_has_health_finding(collected):
    facts = collected("a100-pcie-4x-degraded")
    assert facts["gpus"][3].get("lost") is True
    found = findings(facts, "gpu_lost", gpu_index=3)
    assert len(found) == 1 and found[0]["severity"] == "critical"


def test_bridgeless_pcie_a100_links_are_no_finding(collected):
    facts = collected("a100-pcie-4x-degraded")
    assert facts["gpus"][0]["nvlink"]["links_active"] == 0
    assert findings(facts, "nvlink_links_down") == []


# ---------------------------------------------------------------- nvmlInit failures


@pytest.mark.parametrize("profile", sorted(INIT_FAILS))
def test_init_failure_is_reported_not_raised(collected, profile):
    code, status = INIT_FAILS[profile]
    assert fakenvml.load_profile(profile)["init_error"]  # the profile really makes nvmlInit fail
    facts = collected(profile)
    assert facts["source"] == "nvml"  # the NVML error says more than "nvidia-smi missing"
    assert facts["error_code"] == code
    assert facts["error"].startswith("nvmlInit failed: ")
    assert facts["gpu_count"] == 0 and facts["gpus"] == []
    assert facts["driver_version"] is None
    assert [a["source"] for a in facts["attempts"]] == ["nvml", "nvidia-smi"]
    assert facts["attempts"][0]["error_code"] == code
    assert facts["attempts"][1]["error_code"] == "nvidia_smi_missing"
    assert facts["health"]["status"] == status != "ok"
    head = facts["health"]["findings"][0]
    assert head["error_code"] == code
    assert head["code"] == ("gpu_stack_broken" if status == "failed" else "gpu_facts_unavailable")


# ---------------------------------------------------------------- the Ansible module end to end


@pytest.mark.skipif(not ANSIBLE.exists(), reason="ansible not installed next to the venv python")
def test_ansible_module_reads_gpus_through_fake_lib(fakelib_dir, tmp_path):
    profile = "h100-sxm-8x-nvswitch"
    env = {**os.environ, **fakenvml.env_for(profile, fakelib_dir)}
    env.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_HOME=str(tmp_path / "home"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="0")
    cmd = [str(ANSIBLE), "localhost", "-M", str(ROOT / "library"), "-m", "gpu_facts", "-o",
           "-a", "kernel_log=false", "-e", "ansible_python_interpreter=%s" % PYTHON]
    proc = subprocess.run(cmd, env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("localhost | "))
    assert line.startswith("localhost | SUCCESS => "), line[:300]
    result = json.loads(line.split(" => ", 1)[1])
    assert result["changed"] is False
    gpu = result["ansible_facts"]["gpu"]
    data = fakenvml.load_profile(profile)
    assert gpu["source"] == "nvml" and gpu["error"] is None
    assert gpu["gpu_count"] == 8 == len(data["gpus"])
    assert gpu["driver_version"] == data["driver_version"]
    assert [g["uuid"] for g in gpu["gpus"]] == [g["uuid"] for g in data["gpus"]]
    assert [g["pci_bus_id"] for g in gpu["gpus"]] == [g["pci"]["bus_id"] for g in data["gpus"]]
    assert gpu["health"]["status"] == "ok"
