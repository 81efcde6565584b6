"""The gate's buffers against the GPU's L2: a buffer that fits in it reads the cache, not the memory.

On a real card a working set inside the L2 reads several times the HBM's bandwidth (an RTX 4090, 1.008 TB/s,
read "3.87 TB/s" with 16 MB buffers: shared/reference/gpu-performance.md section 2.2), and a gate measuring it
would pass a card with bad memory. The fake CUDA machine has that hierarchy (tests/unit/doubles/fake_torch_cuda.py:
L2_SPEEDUP, ``memory_ops``), so these tests run the gate's own kernels and copies on it: the pitfall is
reproduced, a card with slow memory fails, and every buffer the gate times on each GPU of the spec table (its
memory, its L2 from ``specs``' ``l2_mb``) is far past that GPU's L2.
"""

import pytest

from module_utils.gpufleet import gate, gate_bench, gate_measure, gate_multi, specs
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
