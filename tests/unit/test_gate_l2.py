"""The gate's buffers against the GPU's L2: a buffer that fits in it reads the cache, not the memory.

On a real card a working set inside the L2 reads several times the HBM's bandwidth (an RTX 4090, 1.008 TB/s,
read "3.87 TB/s" with 16 MB buffers: shared/reference/gpu-performance.md section 2.2), and a gate measuring it
would pass a card with bad memory. The fake CUDA machine has that hierarchy (tests/unit/doubles/fake_torch_cuda.py:
L2_SPEEDUP, ``memory_ops``), so these tests run the gate's own kernels and copies on it: the pitfall is
reproduced, a card with slow memory fails, and every buffer the gate times on each GPU of the spec table (its
memory, its L2 from ``specs``' ``l2_mb``) is far past that GPU's L2. Where it could not be, the gate says so
instead of timing the cache: a ``buffer_mib`` whose three buffers are under 8 x the largest L2 in the table is bad
input (refused before anything runs), and a GPU whose free memory shrinks the buffers under 8 x its own L2 gets a
memory test that is not measured and does not pass (``passed: false``, so the report does not keep the host).
"""

import math

import pytest

from module_utils.gpufleet.controller.judgement import findings
from module_utils.gpufleet.controller.judgement import judge as judgement
from module_utils.gpufleet.host.gate import bench as gate_bench
from module_utils.gpufleet.host.gate import measure as gate_measure
from module_utils.gpufleet.host.gate import multi as gate_multi
from module_utils.gpufleet.host.gate import rules as gate
from module_utils.gpufleet.host.gpu import specs
from tests.unit.doubles.fake_torch_cuda import L2_SPEEDUP, FakeCudaMachine, FakeGpu, h100_sxm
from tests.unit.test_gate_bench_cuda import _VirtualTime, run

MIB = 2 ** 20
# How far past the L2 a timed buffer must be. The triad is the test the L2 speeds up (a kernel reading and writing
# device memory): its three buffers at least 8 x the L2. A host or peer copy runs at its link's rate, but its buffer
# is still at least twice the L2, so no repetition can come from a warm cache on either side.
TRIAD_OVER_L2 = 8
COPY_OVER_L2 = 2
TIMED = ("add", "h2d", "d2h", "p2p")
L2_ROWS = [r for r in specs.SPECS if r["l2_mb"] is not None]


@pytest.fixture
def virtual_time(monkeypatch):
    """P2P is timed on the wall clock: put gate_bench, gate_measure and gate_multi's ``time`` on the machine's."""

    def install(machine):
        for module in (gate_bench, gate_measure, gate_multi):
            monkeypatch.setattr(module, "time", _VirtualTime(machine))
        return machine

    return install


def _triad_gbs(machine, buffer_mib):
    """GB/s of the gate's memory test (gate_measure._one, c = a + 2b) with buffers of ``buffer_mib``."""
    torch = machine.torch
    p = gate.validate({"warmup": 1, "repetitions": 3})
    figures, _details = gate_measure._one(torch, "cuda", 0, "memory_bandwidth", {"buffer_mib": buffer_mib}, p, 1.0,
                                          gate_measure._Timer(torch, "cuda"))
    return gate.median(figures)


def test_the_double_reads_a_buffer_inside_its_l2_as_the_rtx_4090_did():
    # the reference's pitfall, on a double of that card: 3 x 16 MiB inside its 72 MiB L2 read 3.87 TB/s
    rtx4090 = FakeGpu(name="NVIDIA GeForce RTX 4090", total_mib=24564, cc=(8, 9), hbm_gbs=1008.0, l2_mb=72)
    machine = FakeCudaMachine([rtx4090])
    assert _triad_gbs(machine, 16) == pytest.approx(3870.0, rel=1e-4)
    # 3 x 24 MiB is exactly the L2 (still inside); 3 x 25 MiB is past it, and from there on the card reads its GDDR6X
    assert _triad_gbs(machine, 24) == pytest.approx(1008.0 * L2_SPEEDUP, rel=1e-4)
    assert _triad_gbs(machine, 25) == pytest.approx(1008.0, rel=1e-4)
    assert _triad_gbs(machine, 1024) == pytest.approx(1008.0, rel=1e-4)
    assert [op["l2"] for op in machine.memory_ops if op["op"] == "add"][-1] is False


def test_a_card_with_slow_memory_fails_the_memory_test():
    # HBM at half an H100's 2900 GB/s: below its floor (3350 x 0.72 = 2412), whatever its L2 could serve
    machine = FakeCudaMachine(h100_sxm(1, hbm_gbs=1450.0))
    _result, entries = run(machine, tests=["memory_bandwidth"])
    hbm = entries[0, "memory_bandwidth"]
    assert hbm["measured"] == pytest.approx(1450.0, rel=1e-4)
    assert hbm["passed"] is False and "< expected 2412 GB/s" in hbm["why"]
    assert not any(op["l2"] for op in machine.memory_ops if op["op"] == "add")


@pytest.mark.parametrize("row", L2_ROWS, ids=[r["key"] for r in L2_ROWS])
def test_every_buffer_the_gate_times_is_far_past_the_gpus_l2(virtual_time, row):
    # two GPUs of this model (its memory, its L2 from the spec table), the memory, host-copy and P2P tests as the
    # gate sizes them for it
    l2 = row["l2_mb"] * MIB
    machine = virtual_time(FakeCudaMachine([FakeGpu(name=row["name"], total_mib=int(row["memory_gib"] * 1024 * 0.97),
                                                    l2_mb=row["l2_mb"], pci_bus_id=0x18 + 0x20 * i)
                                            for i in range(2)]))
    _result, entries = run(machine, clock=machine.now, warmup=1, repetitions=3,
                           tests=["memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth", "p2p_bandwidth"])
    timed = {op: [m for m in machine.memory_ops if m["op"] == op] for op in TIMED}
    assert all(timed.values()), {op: len(ms) for op, ms in timed.items()}
    assert min(m["working_set"] for m in timed["add"]) >= TRIAD_OVER_L2 * l2
    for op in ("h2d", "d2h", "p2p"):
        assert min(m["working_set"] for m in timed[op]) >= COPY_OVER_L2 * l2, op
    assert not any(m["l2"] for m in machine.memory_ops)
    # so the memory test reads the memory: the double's HBM rate, not its L2's
    assert entries[0, "memory_bandwidth"]["measured"] == pytest.approx(machine.gpus[0].hbm_gbs, rel=1e-4)


def test_each_l2_size_names_its_source_and_a_chip_has_one_size():
    assert L2_ROWS, "the spec table gives no L2 size"
    for row in specs.SPECS:
        if row["l2_mb"] is None:
            assert row["l2_source"] is None, row["key"]
            continue
        assert row["l2_mb"] > 0 and ("https://" in row["l2_source"] or specs.REFERENCE in row["l2_source"]), row["key"]
    # the rows of one chip agree: V100 16/32 GB SXM2 and PCIe, A100 40/80 GB PCIe and SXM4, H100 SXM and PCIe
    for keys in (("v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb", "v100-pcie-32gb"),
                 ("a100-pcie-40gb", "a100-pcie-80gb", "a100-sxm4-40gb", "a100-sxm4-80gb"), ("h100-sxm", "h100-pcie")):
        assert len({specs.by_key(k)["l2_mb"] for k in keys}) == 1, keys


# ---- where the buffers cannot be past the L2: refused, or not measured (never a pass) -------------------------

LARGEST_L2 = max(r["l2_mb"] for r in L2_ROWS)
# the smallest buffer_mib whose three triad buffers are TRIAD_OVER_L2 x the largest L2 in the table (B200: 336)
FLOOR_MIB = math.ceil(TRIAD_OVER_L2 * LARGEST_L2 / 3)


def test_a_buffer_mib_inside_8x_the_largest_l2_is_refused_before_anything_runs():
    # why: the double's RTX 4090 with memory at half its 1008 GB/s reads 1920 GB/s with 16 MiB buffers, past its
    # floor (1008 x 0.72 = 725.8): a user-set buffer_mib of 16 would pass a card with bad memory
    slow_4090 = FakeGpu(name="NVIDIA GeForce RTX 4090", total_mib=24564, cc=(8, 9), hbm_gbs=504.0, l2_mb=72)
    assert _triad_gbs(FakeCudaMachine([slow_4090]), 16) > 1008.0 * 0.72
    assert gate.BUFFER_FLOOR_MIB == FLOOR_MIB == 336
    machine = FakeCudaMachine(h100_sxm(1))
    with pytest.raises(gate.GateInputError) as err:
        run(machine, tests=["memory_bandwidth"], buffer_mib=16)
    text = str(err.value)
    assert text.startswith("buffer_mib 16 MiB is below its floor of %d MiB on a GPU: " % FLOOR_MIB), text
    assert "(3 x 16 = 48 MiB) must be at least 8 x the largest L2 in the spec table (b200: 126 MiB" in text
    assert text.endswith("or it times the L2 cache, not the memory"), text
    assert machine.memory_ops == [] and machine.matmuls == []  # nothing ran
    with pytest.raises(gate.GateInputError, match="buffer_mib %d MiB is below its floor" % (FLOOR_MIB - 1)):
        gate.validate({"buffer_mib": FLOOR_MIB - 1})
    assert gate.validate({"buffer_mib": FLOOR_MIB})["buffer_mib"] == FLOOR_MIB
    # cpu mode times the mechanics against its own floors, not a GPU's: any size
    assert gate.validate({"device": "cpu", "buffer_mib": 16})["buffer_mib"] == 16


def test_the_floor_holds_at_its_edge_on_the_gpu_with_the_largest_l2():
    # buffer_mib at the floor on a B200: 3 x 336 MiB = 8 x its 126 MiB L2, measured, its HBM's rate
    b200 = specs.by_key("b200")
    machine = FakeCudaMachine([FakeGpu(name=b200["name"], total_mib=183359, l2_mb=b200["l2_mb"], hbm_gbs=7000.0)])
    _result, entries = run(machine, tests=["memory_bandwidth"], buffer_mib=FLOOR_MIB)
    hbm = entries[0, "memory_bandwidth"]
    assert hbm["size"] == "3 x %d MiB float32" % FLOOR_MIB and "error" not in hbm
    assert hbm["measured"] == pytest.approx(7000.0, rel=1e-4) and hbm["passed"] is True  # 7700 x 0.72 = 5544


# Free memory that shrinks the buffers to _sizes' smallest, 64 MiB (3 x 128 MiB do not fit in half of it).
NEARLY_FULL_FREE_MIB = 3 * 64 * 2 + 100
# The names NVML gives the V100s (their rows' display names are not what the driver reports).
NVML_NAMES = {"v100-sxm2-16gb": "Tesla V100-SXM2-16GB", "v100-sxm2-32gb": "Tesla V100-SXM2-32GB",
              "v100-pcie-16gb": "Tesla V100-PCIE-16GB", "v100-pcie-32gb": "Tesla V100-PCIE-32GB"}


@pytest.mark.parametrize("row", L2_ROWS, ids=[r["key"] for r in L2_ROWS])
def test_a_nearly_full_gpu_whose_buffers_shrink_into_its_l2_does_not_pass_the_memory_test(row):
    total = int(row["memory_gib"] * 1024)
    name = NVML_NAMES.get(row["key"], row["name"])
    assert specs.lookup(name, total)["key"] == row["key"]  # held to its own row's L2
    gpu = FakeGpu(name=name, total_mib=total, used_mib=total - NEARLY_FULL_FREE_MIB, l2_mb=row["l2_mb"],
                  hbm_gbs=float(row["memory_bandwidth_gbs"] or 1000.0))
    machine = FakeCudaMachine([gpu])
    _result, entries = run(machine, tests=["memory_bandwidth"])
    hbm = entries[0, "memory_bandwidth"]
    assert hbm["size"] == "3 x 64 MiB float32"
    if TRIAD_OVER_L2 * row["l2_mb"] <= 3 * 64:
        # a small L2 (T4, V100, A10, RTX 3090, A6000): 3 x 64 MiB are past 8 x it, so the memory is measured
        assert "error" not in hbm and not any(m["l2"] for m in machine.memory_ops)
        assert hbm["measured"] == pytest.approx(gpu.hbm_gbs, rel=1e-4)
        return
    # not timed at all (no kernel ran), and the entry is a failure that names the free memory and the L2
    assert not [m for m in machine.memory_ops if m["op"] == "add"]
    assert hbm["measured"] is None and hbm["passed"] is False, hbm
    assert hbm["why"] == hbm["error"]
    assert hbm["why"].startswith("free memory too small to measure past the L2 (%d MiB free): buffers of 3 x 64 MiB "
                                 "are under 8 x the GPU's %s MiB L2 (3 x %d MiB needed)"
                                 % (NEARLY_FULL_FREE_MIB, row["l2_mb"], math.ceil(8 * row["l2_mb"] / 3))), hbm["why"]
    # the fleet report reads it as a failed gate, so the host is not kept
    found = findings.gate([{"index": 0, "gate": [hbm]}])
    assert [f["code"] for f in found] == ["gate_failed"]
    assert judgement.decide(found)["verdict"] != "keep"


def test_without_the_l2_rule_a_gpu_unknown_to_the_table_would_pass_on_its_cache(monkeypatch):
    # a GPU the spec table does not know, with a 512 MiB L2 and memory at half the 2000 GB/s it is expected to reach:
    # 1 GiB free shrinks the buffers to 3 x 128 MiB, inside that L2. It is held to the largest L2 the table knows
    # (126 MiB: 3 x 336 MiB needed), so the memory test is not measured and fails.
    def machine():
        return FakeCudaMachine([FakeGpu(name="NVIDIA Future GPU", total_mib=1536, used_mib=512, l2_mb=512,
                                        hbm_gbs=1000.0)])

    expected = {"nvidia future gpu": {"memory_bandwidth": 2000.0}}
    _result, entries = run(machine(), tests=["memory_bandwidth"], expected=expected)
    hbm = entries[0, "memory_bandwidth"]
    assert hbm["passed"] is False
    assert "under 8 x 126 MiB, the largest L2 in the spec table (none known for this GPU)" in hbm["why"]
    # the rule is what stops it: without it the gate times the cache (3839 GB/s) and passes the card
    monkeypatch.setattr(gate_bench, "below_l2", lambda size, spec, params: None)
    _result, entries = run(machine(), tests=["memory_bandwidth"], expected=expected)
    cached = entries[0, "memory_bandwidth"]
    assert cached["measured"] == pytest.approx(1000.0 * L2_SPEEDUP, rel=1e-4) and cached["passed"] is True


def test_the_defaults_on_a_healthy_gpu_are_measured_and_pass_as_before():
    machine = FakeCudaMachine(h100_sxm(1))
    _result, entries = run(machine, tests=["memory_bandwidth"])
    hbm = entries[0, "memory_bandwidth"]
    assert hbm["size"] == "3 x 1024 MiB float32" and "error" not in hbm
    assert hbm["measured"] == pytest.approx(2900.0, rel=1e-4) and hbm["passed"] is True  # 3350 x 0.72 = 2412
