"""The spec table as data, and the lookup from names real GPUs report."""

import re

import pytest
from gpufleet.host.gpu import specs

REQUIRED = ("key", "name", "arch", "compute_capability", "form_factor", "memory_gib", "memory_bandwidth_gbs",
            "bf16_tflops", "fp16_tflops", "tf32_tflops", "fp32_tflops", "pcie_gen", "pcie_width", "nvlink_gbs",
            "gpu_class", "source")


@pytest.mark.parametrize(("nvml_name", "memory_mib", "key"), [
    # names as printed in the recorded fixtures (tests/fixtures/nvidia_smi_*)
    ("NVIDIA H100 80GB HBM3", 81559, "h100-sxm"),
    ("NVIDIA H200", 143771, "h200-sxm"),
    ("NVIDIA A100-SXM4-80GB", 81920, "a100-sxm4-80gb"),
    ("NVIDIA L40S", 46068, "l40s"),
    ("NVIDIA GeForce RTX 4090", 24564, "rtx-4090"),
    ("NVIDIA A10", 23028, "a10"),
    ("NVIDIA RTX A6000", 49140, "rtx-a6000"),
    ("Tesla V100-PCIE-32GB", 32510, "v100-pcie-32gb"),
    ("Tesla T4", 15360, "t4"),
    ("NVIDIA GeForce RTX 3090", 24576, "rtx-3090"),
    # names from NVML documentation / DCGM SKU lists
    ("Tesla V100-SXM2-16GB", None, "v100-sxm2-16gb"),
    ("NVIDIA H100 PCIe", None, "h100-pcie"),
    ("NVIDIA H100 NVL", None, "h100-nvl"),
    ("NVIDIA A100-PCIE-40GB", None, "a100-pcie-40gb"),
    ("NVIDIA A100 80GB PCIe", None, "a100-pcie-80gb"),
    ("NVIDIA A100-SXM4-40GB", None, "a100-sxm4-40gb"),
    ("NVIDIA L40", None, "l40"),
    ("NVIDIA L4", None, "l4"),
    ("NVIDIA RTX 6000 Ada Generation", None, "rtx-6000-ada"),
])
def test_lookup_real_names(nvml_name, memory_mib, key):
    row = specs.lookup(nvml_name, memory_mib)
    assert row is not None and row["key"] == key


def test_lookup_tells_variants_apart():
    assert specs.lookup("NVIDIA H100 80GB HBM3")["form_factor"] == "SXM"
    assert specs.lookup("NVIDIA H100 PCIe")["form_factor"] == "PCIe"
    assert specs.lookup("NVIDIA H100 NVL")["form_factor"] == "NVL"
    # The L40 is not an L40S, and an RTX 4090 D / laptop part is not an RTX 4090.
    assert specs.lookup("NVIDIA L40")["key"] != specs.lookup("NVIDIA L40S")["key"]
    assert specs.lookup("NVIDIA GeForce RTX 4090 D") is None
    assert specs.lookup("NVIDIA GeForce RTX 3060 Laptop GPU") is None


def test_memory_decides_when_the_name_does_not():
    assert specs.lookup("Tesla V100-SXM2", 16160)["key"] == "v100-sxm2-16gb"
    assert specs.lookup("Tesla V100-SXM2", 32510)["key"] == "v100-sxm2-32gb"
    # without a size the two rows are equally likely: no guess
    assert specs.lookup("Tesla V100-SXM2") is None
    # a size that fits neither row
    assert specs.lookup("Tesla V100-SXM2", 8000) is None


def test_mig_device_names_map_to_the_parent_gpu():
    assert specs.lookup("NVIDIA H100 80GB HBM3 MIG 1g.10gb")["key"] == "h100-sxm"
    assert specs.mig_profile("NVIDIA H100 80GB HBM3 MIG 3g.40gb") == "3g.40gb"
    assert specs.mig_profile("NVIDIA H100 80GB HBM3") is None


@pytest.mark.parametrize("name", ["", None, "Graphics Device", "NVIDIA GeForce GTX 1050", "Quadro P400", b"\xff\xfe"])
def test_unknown_names_give_none(name):
    assert specs.lookup(name) is None


def test_bytes_names_are_accepted():
    assert specs.lookup(b"NVIDIA L40S")["key"] == "l40s"


def test_every_row_is_complete_and_cited():
    keys = [r["key"] for r in specs.SPECS]
    assert len(keys) == len(set(keys))
    for row in specs.SPECS:
        for field in REQUIRED:
            assert field in row, (row["key"], field)
        assert "gpu-performance.md" in row["source"], row["key"]
        assert row["gpu_class"] in ("datacenter-hbm", "datacenter-pcie", "geforce", "workstation")
        assert row["form_factor"] in ("SXM", "PCIe", "NVL", "GeForce", "workstation")
        assert re.fullmatch(r"\d+\.\d", row["compute_capability"])
        assert row["confidence"] in ("V", "S", "U")


def test_rows_hold_dense_figures_from_the_reference():
    # gpu-performance.md 1.2: H100 SXM 989 dense (1,979 sparse); A100 312; L40S 362; RTX 4090 165.2 FP32-acc
    assert specs.by_key("h100-sxm")["bf16_tflops"] == 989
    assert specs.by_key("h200-sxm")["memory_bandwidth_gbs"] == 4800
    assert specs.by_key("a100-sxm4-80gb")["bf16_tflops"] == 312
    assert specs.by_key("a100-sxm4-80gb")["memory_bandwidth_gbs"] == 2039
    assert specs.by_key("l40s")["bf16_tflops"] == 362
    assert specs.by_key("rtx-4090")["bf16_tflops"] == 165.2
    assert specs.by_key("rtx-4090")["fp16_acc16_tflops"] == 330.3
    assert specs.by_key("t4")["bf16_tflops"] is None  # no BF16 in hardware
    # tensor peaks never exceed the FP16-accumulate rate, and TF32 is at most half of BF16 on data-center parts
    for row in specs.SPECS:
        if row["bf16_tflops"] and row["tf32_tflops"] and row["gpu_class"].startswith("datacenter"):
            assert abs(row["tf32_tflops"] - row["bf16_tflops"] / 2) <= 0.02 * row["bf16_tflops"], row["key"]
    # unverified figures are not invented
    assert specs.by_key("rtx-6000-ada")["bf16_tflops"] is None


def test_lookup_returns_a_copy():
    row = specs.lookup("NVIDIA L40S")
    row["bf16_tflops"] = 1
    assert specs.lookup("NVIDIA L40S")["bf16_tflops"] == 362
    assert "_re" not in row
