"""Capacity advisor: the worked examples in docs/capacity.md are the code's own output."""

from pathlib import Path

import pytest
from gpufleet.controller.checklist import capacity

DOC = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"


def test_doc_block_is_generated_from_the_table():
    text = DOC.read_text(encoding="utf-8")
    block = text.split(capacity.DOC_BEGIN, 1)[1].split(capacity.DOC_END, 1)[0]
    assert block == "\n" + capacity.render_examples(), (
        "docs/capacity.md is stale: regenerate it with capacity.update_doc (command in the doc)")


def test_issue_example_7b():
    # "a 7B model needs ~14 GB of fp16 weights and well over 40 GB for full fine-tuning"
    assert capacity.need_gb(7, "infer_16bit", with_overhead=False) == 14.0
    assert capacity.need_gb(7, "full_adam") == 134.4 > 40
    assert "| 7B | 14 GB | 16.8 GB | 8.4 GB | 4.2 GB | 19.6 GB | 4.9 GB | 134.4 GB |" in DOC.read_text()


def test_qlora_rule_agrees_with_its_source():
    # QLoRA paper: a 65B model fine-tunes on one 48 GB GPU (RTX A6000: 49140 MiB in NVML)
    a = capacity.advise(49140, 1, "single")
    qlora = next(w for w in a["workloads"] if w["key"] == "qlora")
    assert qlora["max_b_one_gpu"] >= 65


def test_h100_8x_nvlink_row():
    a = capacity.advise(81559, 8, "nvlink")
    full = next(w for w in a["workloads"] if w["key"] == "full_adam")
    assert (full["max_b_one_gpu"], full["max_b_all_gpus"]) == (4.0, 32.0)
    assert full["fits"]["7"] == "sharded over 8 GPUs" and full["fits"]["70"] == "no"
    assert "ZeRO-3 / FSDP" in full["note"] and "PCIe" not in full["note"]
    infer = next(w for w in a["workloads"] if w["key"] == "infer_16bit")
    assert infer["fits"]["7"] == "one GPU" and infer["fits"]["70"] == "sharded over 8 GPUs"
    assert "| 8 x H100 80 GB SXM (NVLink) | 77 | 32 (256.5 sharded) |" in DOC.read_text()


def test_pcie_sharding_is_warned():
    a = capacity.advise(24576, 2, "pcie")
    assert all("PCIe only" in w["note"] for w in a["workloads"])


def test_for_host_from_facts_rows():
    gpus = [{"memory_total_mib": 81559, "nvlink": {"links_active": 18}} for _ in range(8)]
    a = capacity.for_host(gpus)
    assert a["status"] == "ok" and a["interconnect"] == "nvlink" and a["gpus"] == 8
    assert capacity.summary_text(a).startswith("inference fp16/bf16 up to 32B (256.5B over 8 GPUs)")
    assert capacity.for_host([])["status"] == "unknown"
    assert capacity.for_host([{"memory_total_mib": None}])["reason"] == "GPU memory not reported for any GPU"
    lost = capacity.for_host([{"memory_total_mib": 81920}, {"memory_total_mib": None}])
    assert lost["gpus"] == 1 and "1 GPU(s) without reported memory left out" in capacity.summary_text(lost)
    mixed = capacity.for_host([{"memory_total_mib": 24564}, {"memory_total_mib": 81920}])
    assert mixed["mixed_memory"] and mixed["gpu_memory_gb"] == 25.8 and mixed["interconnect"] == "unknown"


@pytest.mark.parametrize(("gpus", "link"), [
    ([{"nvlink": {"links_active": 0}}, {"nvlink": {"links_active": 0}}], "pcie"),
    ([{"nvlink": {"links_active": 4}}, {"nvlink": {"links_active": 0}}], "unknown"),
    ([{}, {}], "unknown"),
    ([{}], "single"),
])
def test_interconnect(gpus, link):
    assert capacity.interconnect_of(gpus) == link


@pytest.mark.parametrize(("mib", "count"), [(0, 1), (-5, 1), ("80", 1), (True, 1), (1024, 0), (1024, 1.5)])
def test_bad_input(mib, count):
    with pytest.raises(capacity.CapacityInputError):
        capacity.advise(mib, count)
