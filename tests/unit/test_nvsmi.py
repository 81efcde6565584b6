"""nvidia-smi XML / -q text parsing and error classification, on recorded real outputs."""

import glob
import os

import pytest
from gpufleet.host.gpu import nvsmi

from tests.unit.doubles import FIXTURES, fixture_bytes

H100_UUIDS = [
    "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa", "GPU-47daa2ad-a218-6286-252b-af45f0dfaf00",
]


def xml(name):
    return fixture_bytes("nvidia_smi_xml", name)


def text(name):
    return fixture_bytes("nvidia_smi_text", name)


def test_a100_xml():
    facts = nvsmi.parse_xml(xml("telegraf_a100-sxm4-v12.xml"))
    assert facts["error"] is None
    assert facts["driver_version"] == "535.54.03"
    assert facts["cuda_driver_version"] == "12.2"
    # the upstream contributor kept 1 of 4 <gpu> elements: we list what is there and say so
    assert facts["gpu_count"] == 1
    assert any("4 GPUs attached" in w for w in facts["warnings"])
    g = facts["gpus"][0]
    assert g["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert g["name"] == "NVIDIA A100-SXM4-80GB"
    assert g["pci_bus_id"] == "00000000:01:00.0"
    assert g["memory_total_mib"] == 81920 and g["memory_used_mib"] == 50
    assert g["pcie"]["gen_max"] == 4 and g["pcie"]["width_max"] == 16 and g["pcie"]["width_current"] == 16
    assert g["clocks"] == {"sm_mhz": 1275, "sm_max_mhz": 1410, "mem_mhz": 1593, "mem_max_mhz": 1593}
    assert g["applications_clocks"] == {"sm_mhz": 1275, "sm_default_mhz": 1275}
    assert g["temperature_c"] == 27 and g["power_draw_w"] == 67.03 and g["power_limit_w"] == 500.0
    assert g["power_default_limit_w"] == 500.0
    assert g["mig_mode"] == "enabled" and g["mig_devices"] == 4
    assert g["persistence_mode"] is False
    assert g["ecc"]["mode"] == "enabled" and g["ecc"]["volatile_uncorrected"] == 0
    assert g["remapped_rows"] == {"correctable": None, "uncorrectable": None, "pending": None, "failure": None}
    assert g["spec"]["key"] == "a100-sxm4-80gb"
    assert g["compute_capability"] == "8.0" and g["compute_capability_source"] == "spec"


def test_v13_dual_gpu_with_processes():
    facts = nvsmi.parse_xml(xml("telegraf-pr_dual_a5000-v13.xml"), include_processes=True)
    assert facts["gpu_count"] == 2
    a, b = facts["gpus"]
    assert (a["index"], b["index"]) == (0, 1)
    assert a["pci_bus_id"] == "00000000:81:00.0" and b["pci_bus_id"] == "00000000:C1:00.0"
    # v13 has instant/average power instead of power_draw
    assert a["power_draw_w"] == 6.52 and a["power_limit_w"] == 230.0
    assert a["pcie"]["gen_current"] == 1 and a["pcie"]["gen_max"] == 4  # idle downtraining
    assert a["throttle_reasons"] == ["gpu_idle"]
    assert a["ecc"]["mode"] == "disabled" and a["ecc"]["volatile_uncorrected"] is None
    assert a["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert a["processes"] == [{"pid": 100477, "type": "C", "name": "/root/src/llama.cpp/build/bin/llama-server",
                               "used_memory_mib": 22430, "gpu_instance_id": None, "compute_instance_id": None}]
    assert a["spec"] is None  # RTX A5000 has no row in the reference table


def test_processes_only_when_asked():
    facts = nvsmi.parse_xml(xml("telegraf-pr_dual_a5000-v13.xml"))
    assert "processes" not in facts["gpus"][0]


def test_old_schemas():
    t4 = nvsmi.parse_xml(xml("telegraf_tesla-t4.xml"))["gpus"][0]
    # v11: power_readings/power_limit, clocks_throttle_reasons, x8 link on an x16 card
    assert t4["power_limit_w"] == 70.0 and t4["power_draw_w"] == 26.78
    assert t4["pcie"]["width_current"] == 8 and t4["pcie"]["width_max"] == 16
    assert t4["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
    assert t4["spec"]["key"] == "t4"
    p100 = nvsmi.parse_xml(xml("netdata_tesla-p100.xml"))["gpus"][0]
    assert p100["ecc"]["aggregate_corrected"] == 3 and p100["ecc"]["aggregate_uncorrected"] == 0
    # 418.43 (no DOCTYPE, single_bit/double_bit ECC layout, all N/A)
    p400 = nvsmi.parse_xml(xml("telegraf_quadro-p400.xml"))
    assert p400["error"] is None and p400["driver_version"] == "418.43"
    assert p400["gpus"][0]["ecc"]["volatile_uncorrected"] is None
    assert p400["gpus"][0]["power_draw_w"] is None  # N/A


def test_h100_text_eight_gpus():
    facts = nvsmi.parse_text(text("gpud_8x-h100-80gb-hbm3_535.161.08_q.txt"))
    assert facts["error"] is None
    assert facts["driver_version"] == "535.161.08" and facts["cuda_driver_version"] == "12.2"
    assert facts["gpu_count"] == 8
    gpus = facts["gpus"]
    assert [g["uuid"] for g in gpus[:2]] == H100_UUIDS
    assert len({g["uuid"] for g in gpus}) == 8
    assert [g["pci_bus_id"][9:11] for g in gpus] == ["19", "3B", "4C", "5D", "9B", "BB", "CB", "DB"]
    for g in gpus:
        assert g["name"] == "NVIDIA H100 80GB HBM3"
        assert g["compute_capability"] == "9.0"
        assert g["pcie"]["gen_max"] == 5 and g["pcie"]["width_max"] == 16
        assert g["memory_total_mib"] == 81559
        assert g["spec"]["key"] == "h100-sxm"
        assert g["power_limit_w"] == 700.0
        assert g["fabric"]["state"] == "Completed"
    # GPU 0 was recorded with HW slowdown + power brake active (nested under "HW Slowdown" in -q text)
    assert gpus[0]["throttle_reasons"] == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert gpus[0]["pcie"]["replays"] == 67


def test_a10_text_pending_row_remap():
    g = nvsmi.parse_text(text("gpud_a10_535.129.03_q.txt"))["gpus"][0]
    assert g["remapped_rows"] == {"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False}
    assert g["spec"]["key"] == "a10"


def test_4090_text_processes():
    facts = nvsmi.parse_text(text("gpud_8x-rtx-4090_535.154.05_q.txt"), include_processes=True)
    assert facts["gpu_count"] == 8
    procs = facts["gpus"][0]["processes"]
    assert procs == [{"pid": 58130, "type": "C", "name": "/usr/bin/python", "used_memory_mib": 20322,
                      "gpu_instance_id": None, "compute_instance_id": None}]


def test_mig_text_processes_keep_instance_ids():
    g = nvsmi.parse_text(text("h100-80gb-hbm3-mig_590.48.01_q_load.txt"), include_processes=True)["gpus"][0]
    assert g["mig_mode"] == "enabled"
    assert len(g["processes"]) >= 2
    assert g["processes"][0]["gpu_instance_id"] == 2 and g["processes"][0]["pid"] == 21180


@pytest.mark.parametrize("path", sorted(glob.glob(str(FIXTURES / "nvidia_smi_xml" / "*.xml"))),
                         ids=os.path.basename)
def test_every_recorded_xml_parses(path):
    with open(path, "rb") as fh:
        facts = nvsmi.parse_xml(fh.read(), include_processes=True)
    assert facts["error"] is None
    assert facts["gpu_count"] >= 1
    for g in facts["gpus"]:
        assert g["name"] and g["pci_bus_id"]
        assert isinstance(g["throttle_reasons"], list)


@pytest.mark.parametrize(("name", "code"), [
    ("error_nvml-driver-library-mismatch_570.124_tinygrad-ogkm-47.txt", "driver_library_mismatch"),
    ("error_nvml-driver-library-mismatch_shine-cluster-30.txt", "driver_library_mismatch"),
    ("error_couldnt-communicate_mattshma-bigdata-108.txt", "driver_not_reachable"),
    ("error_couldnt-communicate_in-container_ameli-manylinux-cuda-5.txt", "driver_not_reachable"),
    ("error_no-devices-were-found_rtx5090_ogkm-862.txt", "no_devices"),
    ("error_unable-to-determine-device-handle_nvidia-smi-a-i-0_nvidia-docker-1553.txt", "device_handle_error"),
    ("error_unable-to-determine-device-handle_old-format_xxd3vin-workspace-19.txt", "device_handle_error"),
])
def test_error_texts(name, code):
    data = text(name)
    assert nvsmi.classify_error(data) == code
    facts = nvsmi.parse_output(9, data, b"")
    assert facts["error_code"] == code
    assert facts["gpu_count"] == 0 and facts["gpus"] == []
    # the error names the line that matched, not the shell prompt before it
    assert not facts["error"].startswith("$")


def test_error_on_stderr_with_exit_code():
    facts = nvsmi.parse_output(9, b"", b"Failed to initialize NVML: Driver/library version mismatch\n")
    assert facts["error_code"] == "driver_library_mismatch"
    assert facts["error"].startswith("Failed to initialize NVML")


def test_truncated_xml_is_an_error_not_an_exception():
    data = xml("telegraf_a100-sxm4-v12.xml")
    facts = nvsmi.parse_xml(data[: len(data) // 2])
    assert facts["error_code"] == "xml_parse_error"
    assert facts["gpus"] == []
    facts = nvsmi.parse_output(0, data[:3000], b"")
    assert facts["error_code"] == "xml_parse_error"


def test_non_utf8_bytes_are_replaced_not_fatal():
    data = xml("telegraf-pr_dual_a5000-v13.xml").replace(b"llama-server", b"llama-\xff\xfeserver")
    facts = nvsmi.parse_xml(data, include_processes=True)
    assert facts["error"] is None
    assert facts["gpus"][0]["processes"][0]["name"] == "/root/src/llama.cpp/build/bin/llama-\ufffd\ufffdserver"
    assert any("UTF-8" in w for w in facts["warnings"])


@pytest.mark.parametrize("data", [b"", b"   \n", None])
def test_empty_output(data):
    assert nvsmi.parse_xml(data)["error_code"] == "empty_output"


def test_unexpected_xml_root():
    assert nvsmi.parse_xml(b"<html><body>proxy error</body></html>")["error_code"] == "xml_parse_error"


def test_missing_fields_give_none():
    facts = nvsmi.parse_xml(b"<nvidia_smi_log><driver_version>550.54.15</driver_version>"
                            b"<gpu id='00000000:3B:00.0'><product_name>NVIDIA L4</product_name>"
                            b"<fb_memory_usage><total>[Not Supported]</total></fb_memory_usage></gpu></nvidia_smi_log>")
    g = facts["gpus"][0]
    assert g["pci_bus_id"] == "00000000:3B:00.0"  # from the id attribute
    assert g["memory_total_mib"] is None and g["temperature_c"] is None and g["pcie"]["gen_max"] is None
    assert g["spec"]["key"] == "l4"
    assert facts["cuda_driver_version"] is None


@pytest.mark.parametrize(("value", "expected"), [
    ("81920 MiB", 81920), ("16x", 16), ("N/A", None), ("[Not Supported]", None), ("0x19", 25), ("", None), (None, None),
])
def test_to_int(value, expected):
    assert nvsmi.to_int(value) == expected
