"""NVML collection against a pynvml double that serves recorded machines."""

import pytest
from gpufleet.host.gpu import nvml, nvsmi

from tests.unit.doubles import fake_pynvml, fixture_bytes
from tests.unit.doubles.fake_pynvml import FakeNvml

COMPARED = ("uuid", "name", "serial", "pci_bus_id", "memory_total_mib", "memory_used_mib", "pcie", "clocks",
            "temperature_c", "power_draw_w", "power_limit_w", "throttle_reasons", "persistence_mode", "mig_mode",
            "ecc", "retired_pages", "remapped_rows", "spec")


def recorded(name, kind="nvidia_smi_text", include_processes=False):
    data = fixture_bytes(kind, name)
    if kind == "nvidia_smi_xml":
        return nvsmi.parse_xml(data, include_processes=include_processes)
    return nvsmi.parse_text(data, include_processes=include_processes)


@pytest.fixture
def h100():
    facts = recorded("gpud_8x-h100-80gb-hbm3_535.161.08_q.txt")
    # -q output has no compute capability; the machine (an H100) reports 9.0 through NVML
    for g in facts["gpus"]:
        g["compute_capability"] = "9.0"
        g["pcie"].update(gen_device_max=None, gen_host_max=None)
    return facts


def test_h100_machine_matches_the_recorded_nvidia_smi(h100):
    nv = FakeNvml.from_facts(h100, nvlinks={i: [1] * 18 for i in range(8)})
    facts = nvml.collect(nv)
    assert facts["source"] == "nvml" and facts["error"] is None
    assert facts["driver_version"] == "535.161.08"
    assert facts["cuda_driver_version"] == "12.2"
    assert facts["nvml_version"] == "12.535.161.08"
    assert facts["gpu_count"] == 8
    for got, want in zip(facts["gpus"], h100["gpus"]):
        for key in COMPARED:
            assert got[key] == want[key], key
        assert got["compute_capability"] == "9.0" and got["compute_capability_source"] == "nvml"
        assert got["nvlink"] == {"links_active": 18, "links_total": 18}
    assert facts["gpus"][0]["throttle_reasons"] == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert nv.shutdown_called


def test_a100_xml_machine_and_not_supported_fields():
    rec = recorded("telegraf_a100-sxm4-v12.xml", "nvidia_smi_xml")
    rec["gpus"][0]["compute_capability"] = "8.0"
    nv = FakeNvml.from_facts(rec)
    g = nvml.collect(nv)["gpus"][0]
    assert g["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert g["mig_mode"] == "enabled"
    # recorded N/A -> NVML "Not Supported" -> None, not an error
    assert g["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    assert g["remapped_rows"]["pending"] is None
    assert g["nvlink"] == {"links_active": None, "links_total": None}
    assert "nvml_errors" not in g


def test_processes_only_when_asked():
    rec = recorded("gpud_8x-rtx-4090_535.154.05_q.txt", include_processes=True)
    nv = FakeNvml.from_facts(rec)
    assert "processes" not in nvml.collect(nv)["gpus"][0]
    procs = nvml.collect(nv, include_processes=True)["gpus"][0]["processes"]
    assert procs == [{"pid": 58130, "type": "C", "name": "/usr/bin/python", "used_memory_mib": 20322,
                      "gpu_instance_id": None, "compute_instance_id": None}]


def test_nvlink_link_down_is_counted(h100):
    nv = FakeNvml.from_facts(h100, nvlinks={0: [1] * 17 + [0]})
    gpus = nvml.collect(nv)["gpus"]
    assert gpus[0]["nvlink"] == {"links_active": 17, "links_total": 18}
    assert gpus[1]["nvlink"] == {"links_active": None, "links_total": None}


@pytest.mark.parametrize(("error", "code"), [
    (fake_pynvml.NVMLError_DriverNotLoaded(), "driver_not_loaded"),
    (fake_pynvml.NVMLError_LibraryNotFound(), "nvml_library_not_found"),
    (fake_pynvml.NVMLError_LibRmVersionMismatch(), "driver_library_mismatch"),
    (RuntimeError("Failed to initialize NVML: Driver/library version mismatch"), "driver_library_mismatch"),
    (RuntimeError("something else"), "nvml_error"),
])
def test_init_failure_gives_structured_facts(h100, error, code):
    nv = FakeNvml.from_facts(h100, init_error=error)
    facts = nvml.collect(nv)
    assert facts["error_code"] == code
    assert facts["error"].startswith("nvmlInit failed")
    assert facts["gpus"] == [] and facts["gpu_count"] == 0


def test_missing_pynvml():
    facts = nvml.collect(None)
    assert facts["error_code"] == "pynvml_missing" and facts["source"] == "none"


def test_lost_gpu_is_flagged_and_others_still_read(h100):
    nv = FakeNvml.from_facts(h100, lost={3})
    gpus = nvml.collect(nv)["gpus"]
    assert gpus[3].get("lost") is True
    assert gpus[3]["uuid"] is None and "gpu_lost" in gpus[3]["nvml_errors"]["uuid"]
    assert gpus[4]["uuid"] == h100["gpus"][4]["uuid"] and not gpus[4].get("lost")


def test_older_binding_without_event_reasons_uses_throttle_reasons(h100):
    nv = FakeNvml.from_facts(h100)
    nv.nvmlDeviceGetCurrentClocksThrottleReasons = nv.nvmlDeviceGetCurrentClocksEventReasons
    nv.nvmlDeviceGetCurrentClocksEventReasons = None
    assert nvml.collect(nv)["gpus"][0]["throttle_reasons"] == ["hw_slowdown", "hw_power_brake_slowdown"]


@pytest.mark.parametrize(("mask", "names"), [
    (0, []),
    (0x1, ["gpu_idle"]),
    (0x88, ["hw_slowdown", "hw_power_brake_slowdown"]),
    (0x44, ["sw_power_cap", "hw_thermal_slowdown"]),
    (0x1000, ["bit_0x1000"]),
    (None, []),
])
def test_decode_throttle(mask, names):
    assert nvml.decode_throttle(mask) == names


def test_throttle_bits_match_the_real_binding():
    pynvml = pytest.importorskip("pynvml")
    attrs = {"gpu_idle": "GpuIdle", "applications_clocks_setting": "ApplicationsClocksSetting",
             "sw_power_cap": "SwPowerCap", "hw_slowdown": "HwSlowdown", "sync_boost": "SyncBoost",
             "sw_thermal_slowdown": "SwThermalSlowdown", "hw_thermal_slowdown": "HwThermalSlowdown",
             "hw_power_brake_slowdown": "HwPowerBrakeSlowdown", "display_clocks_setting": "DisplayClockSetting"}
    for bit, name in nvml.THROTTLE_BITS:
        assert getattr(pynvml, "nvmlClocksEventReason" + attrs[name]) == bit, name


@pytest.mark.parametrize(("value", "text"), [(12020, "12.2"), (12040, "12.4"), (11080, "11.8"), (13010, "13.1"),
                                             (0, None), (None, None)])
def test_cuda_version_string(value, text):
    assert nvml.cuda_version_string(value) == text
