"""The fake libnvidia-ml.so.1 (tests/fakenvml) as the real pynvml sees it.

Each profile is probed in a subprocess (pynvml caches the loaded library per process)
running the real pynvml against the library built from C for this test session.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fakenvml

pynvml = pytest.importorskip("pynvml")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not (os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")),
    reason="needs Linux and a C compiler",
)

# Runs in the subprocess: calls every implemented NVML function through pynvml and
# prints one JSON document; an NVML error becomes {"error": "<pynvml exception class>"}.
PROBE = r"""
import json
import pynvml as n


def plain(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if hasattr(v, "_fields_"):
        return {f[0]: plain(getattr(v, f[0])) for f in v._fields_}
    if isinstance(v, n.nvmlFriendlyObject):
        return {k: plain(x) for k, x in vars(v).items()}
    return v


def call(fn, *args, **kwargs):
    try:
        return plain(fn(*args, **kwargs))
    except n.NVMLError as e:
        return {"error": type(e).__name__}


def device(h):
    d = {
        "name": call(n.nvmlDeviceGetName, h),
        "uuid": call(n.nvmlDeviceGetUUID, h),
        "serial": call(n.nvmlDeviceGetSerial, h),
        "index": call(n.nvmlDeviceGetIndex, h),
        "minor": call(n.nvmlDeviceGetMinorNumber, h),
        "vbios": call(n.nvmlDeviceGetVbiosVersion, h),
        "pci": call(n.nvmlDeviceGetPciInfo, h),
        "memory": call(n.nvmlDeviceGetMemoryInfo, h),
        "memory_v2": call(n.nvmlDeviceGetMemoryInfo, h, version=n.nvmlMemory_v2),
        "cc": call(n.nvmlDeviceGetCudaComputeCapability, h),
        "pcie_curr_gen": call(n.nvmlDeviceGetCurrPcieLinkGeneration, h),
        "pcie_max_gen": call(n.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "pcie_curr_width": call(n.nvmlDeviceGetCurrPcieLinkWidth, h),
        "pcie_max_width": call(n.nvmlDeviceGetMaxPcieLinkWidth, h),
        "pcie_gpu_max_gen": call(n.nvmlDeviceGetGpuMaxPcieLinkGeneration, h),
        "pcie_replays": call(n.nvmlDeviceGetPcieReplayCounter, h),
        "mig_max": call(n.nvmlDeviceGetMaxMigDeviceCount, h),
        "mig_dev0": call(lambda: n.nvmlDeviceGetMigDeviceHandleByIndex(h, 0) and "handle"),
        "clocks": [call(n.nvmlDeviceGetClockInfo, h, t) for t in range(4)],
        "max_clocks": [call(n.nvmlDeviceGetMaxClockInfo, h, t) for t in range(4)],
        "temperature": call(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
        "fan": call(n.nvmlDeviceGetFanSpeed, h),
        "power": call(n.nvmlDeviceGetPowerUsage, h),
        "enforced_limit": call(n.nvmlDeviceGetEnforcedPowerLimit, h),
        "limit": call(n.nvmlDeviceGetPowerManagementLimit, h),
        "default_limit": call(n.nvmlDeviceGetPowerManagementDefaultLimit, h),
        "app_clocks": [call(n.nvmlDeviceGetApplicationsClock, h, t) for t in range(3)],
        "default_app_clocks": [call(n.nvmlDeviceGetDefaultApplicationsClock, h, t) for t in range(3)],
        "throttle": call(n.nvmlDeviceGetCurrentClocksThrottleReasons, h),
        "event_reasons": call(n.nvmlDeviceGetCurrentClocksEventReasons, h),
        "pstate": call(n.nvmlDeviceGetPerformanceState, h),
        "persistence": call(n.nvmlDeviceGetPersistenceMode, h),
        "mig": call(n.nvmlDeviceGetMigMode, h),
        "ecc_mode": call(n.nvmlDeviceGetEccMode, h),
        "ecc": {
            f"{counter}_{kind}": call(n.nvmlDeviceGetTotalEccErrors, h, e, c)
            for c, counter in ((n.NVML_VOLATILE_ECC, "volatile"), (n.NVML_AGGREGATE_ECC, "aggregate"))
            for e, kind in ((n.NVML_MEMORY_ERROR_TYPE_CORRECTED, "corrected"),
                            (n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "uncorrected"))
        },
        "retired_sbe": call(n.nvmlDeviceGetRetiredPages, h, 0),
        "retired_dbe_v2": call(n.nvmlDeviceGetRetiredPages_v2, h, 1),
        "retired_pending": call(n.nvmlDeviceGetRetiredPagesPendingStatus, h),
        "remapped_rows": call(n.nvmlDeviceGetRemappedRows, h),
        "utilization": call(n.nvmlDeviceGetUtilizationRates, h),
        "processes": call(n.nvmlDeviceGetComputeRunningProcesses, h),
    }
    if isinstance(d["processes"], list):
        d["process_names"] = [call(n.nvmlSystemGetProcessName, p["pid"]) for p in d["processes"]]
    links = []
    for link in range(n.NVML_NVLINK_MAX_LINKS):
        state = call(n.nvmlDeviceGetNvLinkState, h, link)
        links.append(state)
        if isinstance(state, dict):
            break
    d["nvlink"] = links
    return d


out = {"init": call(n.nvmlInit)}
if out["init"] is None:
    out["driver"] = call(n.nvmlSystemGetDriverVersion)
    out["nvml"] = call(n.nvmlSystemGetNVMLVersion)
    out["cuda"] = call(n.nvmlSystemGetCudaDriverVersion)
    out["cuda_v2"] = call(n.nvmlSystemGetCudaDriverVersion_v2)
    out["count"] = call(n.nvmlDeviceGetCount)
    out["gpus"] = []
    for i in range(out["count"]):
        try:
            h = n.nvmlDeviceGetHandleByIndex(i)
        except n.NVMLError as e:
            out["gpus"].append({"handle_error": type(e).__name__, "str": str(e)})
            continue
        out["gpus"].append(device(h))
    out["missing_symbol"] = call(n.nvmlDeviceGetBoardPartNumber, n.nvmlDeviceGetHandleByIndex(0)) \
        if out["count"] else None
    out["shutdown"] = call(n.nvmlShutdown)
    out["after_shutdown"] = call(n.nvmlDeviceGetCount)
print(json.dumps(out))
"""

NS = "NVMLError_NotSupported"
MIB = 1024 * 1024


@pytest.fixture(scope="session")
def fake_libdir(tmp_path_factory):
    libdir = tmp_path_factory.mktemp("fakenvml")
    fakenvml.build(libdir)
    return libdir


def run_probe(libdir, profile, extra_env=None):
    env = {**os.environ, **fakenvml.env_for(profile, libdir), **(extra_env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


@pytest.fixture(scope="session")
def probe(fake_libdir):
    cache = {}

    def _probe(profile):
        if profile not in cache:
            cache[profile] = run_probe(fake_libdir, profile)[0]
        return cache[profile]

    return _probe


def err(name):
    return {"error": name}


# ---------------------------------------------------------------- profiles themselves


@pytest.mark.parametrize("name", fakenvml.list_profiles())
def test_bundled_profiles_are_labelled_and_valid(name):
    data = fakenvml.load_profile(name)
    assert data["name"] == name
    assert fakenvml.validate_profile(data) == []


def test_expected_profiles_are_bundled():
    assert {
        "h100-sxm-8x-nvswitch",
        "a100-pcie-4x-degraded",
        "rtx4090-riser-x4",
        "h200-1x",
        "h100-sxm-8x-power-capped",
        "h100-sxm-8x-clocks-locked",
        "no-driver",
        "driver-mismatch",
        "no-permission",
    } <= set(fakenvml.list_profiles())


def test_validate_profile_flags_typos():
    problems = fakenvml.validate_profile(
        {"simulated": True, "description": "x", "gpus": [{"name": "a", "uuid": "b", "pci": {}, "temprature_c": 1}]}
    )
    assert problems == ["gpus[0]: unknown key 'temprature_c'"]


def test_env_for_puts_libdir_first(tmp_path):
    env = fakenvml.env_for("h200-1x", tmp_path, base={"LD_LIBRARY_PATH": "/opt/other"})
    assert env["LD_LIBRARY_PATH"] == f"{tmp_path.resolve()}{os.pathsep}/opt/other"
    assert Path(env[fakenvml.PROFILE_ENV]) == fakenvml.PROFILES_DIR / "h200-1x.json"
    with pytest.raises(FileNotFoundError):
        fakenvml.env_for("no-such-profile")


# ------------------------------------------------------------------ the built library


def test_library_exports_only_nvml_symbols_and_old_glibc(fake_libdir):
    lib = fake_libdir / fakenvml.LIBRARY_NAME
    if not shutil.which("nm") or not shutil.which("objdump"):
        pytest.skip("binutils not installed")
    defined = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
    symbols = {line.split()[-1] for line in defined.stdout.splitlines() if line.strip()}
    assert {"nvmlInit_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetPciInfo_v3"} <= symbols
    assert all(s.startswith("nvml") for s in symbols), sorted(s for s in symbols if not s.startswith("nvml"))
    # Debian 12 ships glibc 2.36; stay far below so a library built here runs in any container.
    dyn = subprocess.run(["objdump", "-T", str(lib)], capture_output=True, text=True, check=True).stdout
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([0-9][0-9.]*[0-9])", dyn)}
    assert versions and max(versions) <= (2, 17)


# ------------------------------------------------------------------------ H100 node


def test_h100_node_reads_like_a_healthy_hgx(probe):
    out = probe("h100-sxm-8x-nvswitch")
    assert out["init"] is None
    assert (out["driver"], out["nvml"], out["cuda"], out["cuda_v2"]) == ("550.90.07", "12.550.90.07", 12040, 12040)
    assert out["count"] == 8
    gpus = out["gpus"]
    assert {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [g["index"] for g in gpus] == list(range(8))
    assert gpus[0]["uuid"] == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"
    assert gpus[0]["serial"] == "1650124031592"
    assert len({g["uuid"] for g in gpus}) == 8
    assert [g["pci"]["busId"] for g in gpus][:2] == ["00000000:19:00.0", "00000000:3B:00.0"]
    assert gpus[0]["pci"]["busIdLegacy"] == "0000:19:00.0"
    assert (gpus[0]["pci"]["bus"], gpus[0]["pci"]["pciDeviceId"]) == (0x19, 0x233010DE)
    for g in gpus:
        assert g["cc"] == [9, 0]
        assert (g["pcie_curr_gen"], g["pcie_max_gen"], g["pcie_curr_width"], g["pcie_max_width"]) == (5, 5, 16, 16)
        assert g["enforced_limit"] == g["limit"] == g["default_limit"] == 700000
        # graphics, SM, memory: the applications clocks of the 535.161.08 -q capture, at their defaults
        assert g["app_clocks"] == g["default_app_clocks"] == [1980, 1980, 2619]
        assert g["persistence"] == 1
        assert g["mig"] == [0, 0]
        assert g["ecc_mode"] == [1, 1]
        assert set(g["ecc"].values()) == {0}
        assert g["remapped_rows"] == [0, 0, 0, 0]
        assert g["nvlink"] == [1] * 18 + [err("NVMLError_InvalidArgument")]
        assert g["retired_sbe"] == g["retired_pending"] == err(NS)
        assert g["fan"] == err(NS)
        assert g["processes"] == []
        assert g["throttle"] == g["event_reasons"] == 0
    assert [g["pcie_replays"] for g in gpus] == [67, 63, 52, 43, 49, 53, 82, 67]
    assert gpus[0]["pcie_gpu_max_gen"] == 5
    assert (gpus[0]["mig_max"], gpus[0]["mig_dev0"]) == (7, err("NVMLError_NotFound"))
    assert gpus[0]["clocks"] == [86, 86, 2619, 765]
    assert gpus[0]["max_clocks"] == [1980, 1980, 2619, 1545]
    assert (gpus[0]["temperature"], gpus[0]["power"]) == (27, 72000)
    mem, mem2 = gpus[0]["memory"], gpus[0]["memory_v2"]
    assert mem["total"] == mem2["total"] == 81559 * MIB
    assert (mem2["reserved"], mem2["used"]) == (551 * MIB, 1 * MIB)
    assert mem["used"] == 552 * MIB and mem["free"] == mem2["free"] == (81559 - 552) * MIB
    assert out["missing_symbol"] == err("NVMLError_FunctionNotFound")
    assert out["shutdown"] is None and out["after_shutdown"] == err("NVMLError_Uninitialized")


# ---------------------------------------------------------------------- A100 box


def test_a100_degraded_ecc_remap_and_lost_gpu(probe):
    out = probe("a100-pcie-4x-degraded")
    assert out["init"] is None
    assert (out["driver"], out["count"]) == ("535.161.08", 4)
    gpus = out["gpus"]
    assert [g.get("name") for g in gpus[:3]] == ["NVIDIA A100 80GB PCIe"] * 3
    assert gpus[0]["cc"] == [8, 0] and gpus[0]["pcie_max_gen"] == 4
    healthy, sick, lost = gpus[0], gpus[2], gpus[3]
    assert healthy["ecc"]["volatile_uncorrected"] == 0 and healthy["remapped_rows"] == [0, 0, 0, 0]
    assert sick["ecc"] == {
        "volatile_corrected": 14,
        "volatile_uncorrected": 2,
        "aggregate_corrected": 31,
        "aggregate_uncorrected": 2,
    }
    assert sick["remapped_rows"] == [0, 2, 1, 1]
    assert lost == {"handle_error": "NVMLError_GpuIsLost", "str": "GPU is lost"}
    assert healthy["nvlink"][0] == 0 and len(healthy["nvlink"]) == 13


# ---------------------------------------------------------------------- RTX 4090


def test_rtx4090_on_x4_riser(probe):
    out = probe("rtx4090-riser-x4")
    (gpu,) = out["gpus"]
    assert (out["driver"], out["cuda"]) == ("550.54.15", 12040)
    assert gpu["name"] == "NVIDIA GeForce RTX 4090"
    assert gpu["cc"] == [8, 9]
    assert (gpu["pcie_curr_width"], gpu["pcie_max_width"], gpu["pcie_curr_gen"]) == (4, 16, 4)
    assert gpu["serial"] == err(NS)
    assert all(v == err(NS) for v in gpu["ecc"].values())
    assert gpu["ecc_mode"] == [0, 0]
    assert gpu["mig"] == gpu["mig_max"] == gpu["nvlink"][0] == err(NS)
    assert (gpu["fan"], gpu["pstate"], gpu["limit"], gpu["default_limit"]) == (38, 2, 450000, 450000)
    assert gpu["app_clocks"] == gpu["default_app_clocks"] == [err(NS)] * 3
    assert gpu["processes"] == [
        {"pid": 58130, "usedGpuMemory": 20322 * MIB, "gpuInstanceId": 0xFFFFFFFF, "computeInstanceId": 0xFFFFFFFF}
    ]


# -------------------------------------------------------------------------- H200


def test_h200_single_gpu_values_from_capture(probe):
    out = probe("h200-1x")
    assert (out["driver"], out["nvml"], out["cuda_v2"], out["count"]) == ("590.48.01", "13.590.48.01", 13010, 1)
    (gpu,) = out["gpus"]
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["memory_v2"]["total"] == 143771 * MIB
    assert gpu["pci"]["busId"] == "00000000:83:00.0" and gpu["pci"]["pciDeviceId"] == 0x233510DE
    assert gpu["cc"] == [9, 0]
    assert (gpu["power"], gpu["temperature"], gpu["utilization"]) == (627400, 52, {"gpu": 100, "memory": 7})
    assert [p["pid"] for p in gpu["processes"]] == [10291, 10293, 10309]
    assert gpu["process_names"] == ["/root/tools/memhog", "/root/tools/memhog", "./gpu_burn"]
    assert gpu["pcie_replays"] == err(NS)
    # R590 drivers report applications clocks as deprecated (the capture: "Requested functionality has been
    # deprecated"); the power limits are all 700 W.
    assert gpu["app_clocks"] == gpu["default_app_clocks"] == [err("NVMLError_Deprecated")] * 3
    assert (gpu["enforced_limit"], gpu["limit"], gpu["default_limit"]) == (700000, 700000, 700000)
    assert sum(p["usedGpuMemory"] for p in gpu["processes"]) == (2566 + 1542 + 28234) * MIB


# ------------------------------------------- a throttled box sold as full (power, clocks)


def test_power_capped_node_lowers_enforced_and_management_limits_not_the_default(probe):
    gpus = probe("h100-sxm-8x-power-capped")["gpus"]
    assert [g["enforced_limit"] for g in gpus] == [350000] * 7 + [640000]
    assert [g["limit"] for g in gpus] == [g["enforced_limit"] for g in gpus]
    assert {g["default_limit"] for g in gpus} == {700000}
    assert {tuple(g["app_clocks"]) for g in gpus} == {(1980, 1980, 2619)}


def test_clocks_locked_node_has_low_applications_clocks_and_the_reason_set(probe):
    gpus = probe("h100-sxm-8x-clocks-locked")["gpus"]
    for g in gpus:
        assert g["app_clocks"] == [1005, 1005, 2619]
        assert g["default_app_clocks"] == [1980, 1980, 2619]
        assert g["clocks"][:2] == [1005, 1005]
        assert g["event_reasons"] == g["throttle"] == pynvml.nvmlClocksThrottleReasonApplicationsClocksSetting
        assert g["enforced_limit"] == g["default_limit"] == 700000


def test_new_calls_are_not_supported_when_the_profile_lacks_them(fake_libdir, tmp_path):
    data = fakenvml.load_profile("h100-sxm-8x-nvswitch")
    for gpu in data["gpus"]:
        for key in ("default_power_limit_mw", "applications_clocks_mhz", "default_applications_clocks_mhz"):
            del gpu[key]
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(data))
    gpu = run_probe(fake_libdir, str(path))[0]["gpus"][0]
    assert gpu["default_limit"] == err(NS)
    assert gpu["app_clocks"] == gpu["default_app_clocks"] == [err(NS)] * 3


# ----------------------------------------------------------------- init failures


@pytest.mark.parametrize(
    ("profile", "error"),
    [
        ("no-driver", "NVMLError_DriverNotLoaded"),
        ("driver-mismatch", "NVMLError_LibRmVersionMismatch"),
        ("no-permission", "NVMLError_NoPermission"),
    ],
)
def test_init_failures(probe, profile, error):
    assert probe(profile) == {"init": err(error)}


def test_missing_profile_env_fails_init_loudly(fake_libdir):
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_libdir)}
    env.pop(fakenvml.PROFILE_ENV, None)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(proc.stdout) == {"init": err("NVMLError_Unknown")}
    assert "GPUFLEET_FAKE_NVML_PROFILE is not set" in proc.stderr


def test_broken_profile_json_is_reported(fake_libdir, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"simulated": true, "gpus": [}')
    out, stderr = run_probe(fake_libdir, bad)
    assert out == {"init": err("NVMLError_Unknown")}
    assert "bad.json" in stderr and "byte" in stderr


# ----------------------------------------------------------------- injected errors


def test_injected_errors_and_unsupported_calls(fake_libdir, tmp_path):
    data = fakenvml.load_profile("h200-1x")
    data["unsupported"] = ["nvmlDeviceGetPowerUsage"]
    gpu = data["gpus"][0]
    gpu["errors"] = {"nvmlDeviceGetTemperature": "NVML_ERROR_GPU_IS_LOST", "nvmlDeviceGetPciInfo": 999}
    gpu["unsupported"] = ["nvmlDeviceGetMemoryInfo"]
    del gpu["pcie"]["curr_width"]
    gpu["retired_pages"] = {
        "single_bit_ecc": ["0x1a2b000", 4096],
        "double_bit_ecc": [{"address": 8192, "timestamp": 1720000000}],
        "pending": True,
    }
    path = tmp_path / "custom.json"
    path.write_text(json.dumps(data))
    out, _ = run_probe(fake_libdir, path)
    (g,) = out["gpus"]
    assert g["power"] == err(NS)
    assert g["temperature"] == err("NVMLError_GpuIsLost")
    assert g["pci"] == err("NVMLError_Unknown")
    assert g["memory"] == g["memory_v2"] == err(NS)
    assert g["pcie_curr_width"] == err(NS) and g["pcie_max_width"] == 16
    assert g["name"] == "NVIDIA H200"
    assert g["retired_sbe"] == [0x1A2B000, 4096]
    assert g["retired_dbe_v2"] == [{"address": 8192, "timestamp": 1720000000}]
    assert g["retired_pending"] == 1
