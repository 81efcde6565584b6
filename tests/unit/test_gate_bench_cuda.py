"""The gate's CUDA code, run on a fake CUDA machine (tests/unit/doubles/fake_torch_cuda.py).

``gate_bench`` takes torch and pynvml as arguments; here it gets the double's ``torch`` and NVML, whose
kernels and copies take scripted times (work / a synthetic rate). So every ``device == "cuda"`` branch runs
on CI without a GPU, and the figures it reports are checked against the rates that went in: TFLOPS from
FLOPs and CUDA-event time, GB/s from bytes, NCCL bus bandwidth = algbw x 2(n-1)/n, the sustained and burn-in
samples with NVML read mid-round, and the findings made of them. The pass rule at the floor is at the end.

Time is the double's own clock (``machine.now``), which moves only when the host waits for a device. Event-timed
figures read it through CUDA events; where gate_bench reads the wall clock instead (P2P and the all-reduce:
``time.perf_counter`` around synchronised copies; the repetition loop's and the sustained load's
``time.monotonic``; the rest before TF32's ``time.sleep``), the ``virtual_time`` fixture points the ``time`` of
the modules that read it (gate_bench, gate_measure, gate_multi) at that clock. So every figure is exact and no
test depends on how busy the machine is (a mutation run at load 12 used to fail the wall-clock ones).
"""

import sys
import time

import pytest

from module_utils.gpufleet.host.gate import bench as gate_bench
from module_utils.gpufleet.host.gate import load as gate_load
from module_utils.gpufleet.host.gate import measure as gate_measure
from module_utils.gpufleet.host.gate import multi as gate_multi
from module_utils.gpufleet.host.gate import rules as gate
from module_utils.gpufleet.host.gpu import specs
from tests.unit.doubles.fake_torch_cuda import FakeCudaMachine, FakeGpu, h100_sxm

H100 = specs.by_key("h100-sxm")
NO_XID = {"events": [], "source": "dmesg"}


class _VirtualTime:
    """gate_bench's ``time`` module on the machine's clock: perf_counter, monotonic and sleep; the rest is time's."""

    def __init__(self, machine):
        self.perf_counter = self.monotonic = machine.now
        self.sleep = lambda seconds: machine._wait_until(machine.now() + seconds)

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.fixture
def virtual_time(monkeypatch):
    """Put the gate's wall clock on ``machine``'s clock; returns ``machine``. Every module that reads ``time``:
    gate_bench (run: TF32's sleep, entry durations), gate_measure (the timer, the repetition loop) and gate_multi
    (the all-reduce entries' durations); gate_load takes its clock as an argument."""

    def install(machine):
        for module in (gate_bench, gate_measure, gate_multi):
            monkeypatch.setattr(module, "time", _VirtualTime(machine))
        return machine

    return install


def run(machine, clock=None, **params):
    p = gate.validate(dict({"warmup": 2, "repetitions": 5}, **params))
    kw = {"clock": clock} if clock else {}
    result = gate_bench.run(machine.torch, p, specs.lookup, pynvml=machine.nvml, kernel_log=lambda: NO_XID, **kw)
    entries = gate.evaluate(result["raw"], result["gpus"], p)
    return result, {(e["index"], e["test"]): e for e in entries}


@pytest.fixture
def nccl_import(monkeypatch):
    """gate_multi._allreduce does ``from torch.cuda import nccl`` instead of using the torch it was given: the
    import system is pointed at the machine's torch for the test (the only thing not injected)."""

    def install(machine):
        monkeypatch.setitem(sys.modules, "torch", machine.torch)
        monkeypatch.setitem(sys.modules, "torch.cuda", machine.torch.cuda)
        monkeypatch.setitem(sys.modules, "torch.cuda.nccl", machine.torch.cuda.nccl)

    return install


# ---- per-GPU tests: CUDA events, sizes, TF32, pinned copies ----------------------------------------------


def test_event_timed_figures_are_the_rates_that_went_in():
    machine = FakeCudaMachine(h100_sxm(1))
    result, entries = run(machine)
    assert result["device_count"] == 1 and result["gpus"][0]["spec"]["key"] == "h100-sxm"
    assert result["skipped"] == [{"test": "p2p_bandwidth", "why": "needs two or more GPUs (cuda has 1)"}]
    bf16, tf32, hbm = entries[0, "bf16_gemm"], entries[0, "tf32_gemm"], entries[0, "memory_bandwidth"]
    h2d, d2h = entries[0, "h2d_bandwidth"], entries[0, "d2h_bandwidth"]
    # 2 x 8192^3 FLOPs over the event time of a 750-TFLOPS GEMM -> 750 TFLOPS; bytes / time -> the GB/s set
    assert bf16["measured"] == pytest.approx(750.0, rel=1e-4) and bf16["repetitions"] == 5
    assert bf16["size"] == "8192x8192x8192" and bf16["dtype"] == "bfloat16"
    assert bf16["fraction_of_peak"] == pytest.approx(750.0 / 989, rel=1e-4) and bf16["passed"] is True
    # FP32 matmul at the TF32 rate (allow_tf32 set for the test, put back after), after its rest
    assert tf32["measured"] == pytest.approx(380.0, rel=1e-4) and tf32["dtype"] == "tf32"
    assert tf32["rested_s"] == gate_bench.TF32_REST_S
    assert machine.torch.backends.cuda.matmul.allow_tf32 is False
    assert hbm["measured"] == pytest.approx(2900.0, rel=1e-4) and hbm["size"] == "3 x 1024 MiB float32"
    assert "SM kernel" in hbm["kernel"]
    # pinned host memory, non-blocking: the pinned rates (pageable would be 12 GB/s)
    assert h2d["measured"] == pytest.approx(55.0, rel=1e-4) and h2d["pinned"] is True and h2d["size"] == "256 MiB"
    assert d2h["measured"] == pytest.approx(53.0, rel=1e-4) and d2h["pinned"] is True
    assert all(e["passed"] is True for e in entries.values()), [e["why"] for e in entries.values()]
    # telemetry read by NVML while the last runs of each test were still queued on the GPU
    assert bf16["sm_mhz"] == 1980 and bf16["power_limit_w"] == 700.0 and bf16["throttle_reasons"] == ["sw_power_cap"]
    assert machine.nvml.reads and all(busy for _h, _t, busy in machine.nvml.reads)


def test_each_gpu_is_timed_on_its_own_stream_with_its_own_telemetry():
    # GPU 1 is held at 1485 of 1980 MHz by a lowered power limit: its GEMM runs at 750 x 1485/1980
    capped = FakeGpu(pci_bus_id=0x38, telemetry={"sm_mhz": 1485, "power_limit_w": 350.0, "power_draw_w": 349.0})
    machine = FakeCudaMachine(h100_sxm(1) + [capped])
    result, entries = run(machine, tests=["bf16_gemm"])
    good, slow = entries[0, "bf16_gemm"], entries[1, "bf16_gemm"]
    assert good["measured"] == pytest.approx(750.0, rel=1e-4) and good["power_limit_w"] == 700.0
    assert slow["measured"] == pytest.approx(562.5, rel=1e-4)
    assert slow["power_limit_w"] == 350.0 and slow["sm_mhz"] == 1485 and slow["uuid"] == machine.gpus[1].uuid
    assert slow["passed"] is False and slow["outlier"] is True and "< expected 692.3" in slow["why"]
    # one GEMM per warm-up, repetition and probe run on each GPU: every repetition had a non-zero event time
    # (events on another device than the GEMM's time nothing, and the loop would go on until the budget's end)
    per_gpu = [sum(1 for m in machine.matmuls if m[0] == i) for i in (0, 1)]
    assert per_gpu == [2 + 5 + gate_measure.PROBE_RUNS] * 2
    assert result["gpus"][1]["pci"] == "0000:38:00"  # from torch's pci_*_id: how burn-in Xid lines find the GPU


def test_sizes_fit_half_the_free_memory():
    # 1 GiB free: the 8192 GEMM (3 x 256 MiB float32) and 3 x 1 GiB buffers do not fit in half of it
    small = FakeGpu(name="NVIDIA H100 80GB HBM3", total_mib=1536, used_mib=512)
    machine = FakeCudaMachine([small])
    free = machine.torch.cuda.mem_get_info(0)[0]
    _result, entries = run(machine, tests=["bf16_gemm", "memory_bandwidth", "h2d_bandwidth"])
    assert entries[0, "bf16_gemm"]["size"] == "4096x4096x4096"
    assert entries[0, "memory_bandwidth"]["size"] == "3 x 128 MiB float32"
    assert entries[0, "h2d_bandwidth"]["size"] == "128 MiB"
    assert entries[0, "bf16_gemm"]["measured"] == pytest.approx(750.0, rel=1e-4)  # 2 x 4096^3 FLOPs now
    assert 0 < small.peak_allocated <= free / 2 and small.allocated == 0


def test_a_gpu_without_bf16_runs_the_fp16_gemm_instead():
    v100 = FakeGpu(name="Tesla V100-SXM2-32GB", total_mib=32768, cc=(7, 0),
                   tflops={"bfloat16": None, "float16": 110.0, "tf32": None, "float32": 14.0})
    _result, entries = run(FakeCudaMachine([v100]), tests=["bf16_gemm"])
    fp16 = entries[0, "fp16_gemm"]
    assert fp16["substituted_for"] == "bf16_gemm" and fp16["dtype"] == "float16"
    assert fp16["measured"] == pytest.approx(110.0, rel=1e-4) and fp16["passed"] is True  # 125 x 0.70 = 87.5


# ---- multi-GPU: P2P and the in-process NCCL all-reduce (wall clock) --------------------------------------


def test_p2p_copies_each_gpu_to_the_next_at_the_link_rate(virtual_time):
    machine = virtual_time(FakeCudaMachine(h100_sxm(4), p2p_gbs=380.0))
    _result, entries = run(machine, clock=machine.now, tests=["p2p_bandwidth"], buffer_mib=8192, warmup=1,
                           repetitions=3)
    for i in range(4):
        e = entries[i, "p2p_bandwidth"]
        assert e["peer"] == (i + 1) % 4 and e["peer_access"] is True and e["size"] == "8192 MiB"
        # 8 GiB per copy at 380 GB/s (22.6 ms of the machine's clock): the figure is the rate that went in
        assert e["measured"] == pytest.approx(380.0, rel=1e-4), e
        assert e["passed"] is True  # 450 x 0.75 = 337.5


@pytest.mark.parametrize("count, floor", [(2, 306.0), (4, 306.0), (8, 329.0)])
def test_nccl_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n(nccl_import, virtual_time, count, floor):
    machine = virtual_time(FakeCudaMachine(h100_sxm(count), link_gbs=360.0))
    nccl_import(machine)
    _result, entries = run(machine, clock=machine.now, tests=["nccl_allreduce"], buffer_mib=8192, warmup=1,
                           repetitions=3)
    nbytes = 8192 * 2 ** 20
    done = machine.allreduces
    assert done and all(a["gpus"] == count and a["bytes"] == nbytes for a in done)
    algbw = nbytes / done[-1]["seconds"] / 1e9  # what one all-reduce of 8 GiB per GPU moved per second
    busbw = algbw * 2 * (count - 1) / count
    assert busbw == pytest.approx(360.0)  # the ring's links run at 360 GB/s: nccl-tests' busbw is that
    for i in range(count):
        e = entries[i, "nccl_allreduce"]
        assert e["gpus"] == count and e["backend"] == "nccl" and e["bus_bytes"] == nbytes * 2 * (count - 1) / count
        assert e["measured"] == pytest.approx(busbw, rel=1e-4), e
        assert e["expected"] == floor and e["passed"] is True


# ---- sustained GEMM and burn-in: rounds between events, NVML read mid-round ------------------------------


def _load(machine, seconds, memory=False):
    torch, nvml = machine.torch, machine.nvml
    count = len(machine.gpus)
    gpus = gate_bench.describe_gpus(torch, "cuda", count, specs.lookup)
    handles = gate_bench._nvml_handles(nvml, torch, count)
    sizes = {i: gate_measure._sizes(torch, "cuda", i, {}) for i in gpus}
    load = gate_load.sustained_load(torch, "cuda", gpus, sizes, seconds, nvml, handles, memory=memory,
                                    clock=machine.now)
    return gpus, handles, load


def test_sustained_samples_are_flops_over_event_time_and_the_clock_drop_rule():
    # GPU 1's SM clock falls from 1980 to 1500 MHz after 2 of the 6 s, and its GEMM rate with it
    falling = FakeGpu(pci_bus_id=0x38, telemetry=lambda t: {"sm_mhz": 1980 if t < 2.0 else 1500})
    machine = FakeCudaMachine(h100_sxm(1) + [falling])
    gpus, _handles, load = _load(machine, 6.0)
    steady, dropped = load[0]["samples"], load[1]["samples"]
    assert load[0]["dtype"] == "bfloat16" and load[0]["seconds"] == pytest.approx(6.0, abs=0.2)
    assert 50 <= len(steady) <= 70  # about SAMPLES, one round per 0.1 s
    assert all(s["tflops"] == pytest.approx(750.0, rel=1e-4) for s in steady)
    # a round that starts after the drop runs at 1500/1980 of the rate (the one straddling 2 s is in between)
    assert all(s["tflops"] == pytest.approx(750.0, rel=1e-4) for s in dropped if s["t"] < 1.9)
    assert all(s["tflops"] == pytest.approx(750.0 * 1500 / 1980, rel=1e-4) for s in dropped if s["t"] >= 2.0)
    assert {s["sm_mhz"] for s in dropped if s["t"] >= 2.0} == {1500}
    # one NVML read per GPU and round, each while that round's GEMMs were queued
    assert len(machine.nvml.reads) == len(steady) + len(dropped)
    assert all(busy for _h, _t, busy in machine.nvml.reads)
    entries = gate.evaluate(gate_load.sustained_entries(load, gpus, "cuda", ""), gpus, gate.validate({"tier": "full"}))
    e = {(x["index"], x["test"]): x for x in entries}
    assert e[0, "sustained_gemm"]["measured"] == pytest.approx(750.0, rel=1e-4) and e[0, "sustained_gemm"]["passed"]
    assert e[0, "clock_drop"]["measured"] == 0.0 and e[0, "clock_drop"]["passed"] is True
    assert e[1, "clock_drop"]["measured"] == pytest.approx(100.0 * 480 / 1980, rel=1e-4)
    assert e[1, "clock_drop"]["passed"] is False and "> limit 10 %" in e[1, "clock_drop"]["why"]
    assert e[1, "clock_drop"]["basis"] == "SM clock (NVML)"
    # two thirds of the samples at 568 TFLOPS: below 989 x 0.70 x 0.85 = 588.5
    assert e[1, "sustained_gemm"]["measured"] == pytest.approx(750.0 * 1500 / 1980, rel=1e-4)
    assert e[1, "sustained_gemm"]["passed"] is False


def test_burn_in_findings_from_telemetry_read_during_the_load():
    # GPU 1 heats 5 C per second from 70 C and enters HW thermal slowdown at 3 s; GPU 0 stays at 65 C
    def hot(t):
        return {"temperature_c": int(70 + 5 * t),
                "throttle_reasons": ["sw_power_cap"] + (["hw_thermal_slowdown"] if t >= 3.0 else [])}

    machine = FakeCudaMachine(h100_sxm(1) + [FakeGpu(pci_bus_id=0x38, telemetry=hot)])
    gpus, handles, load = _load(machine, 6.0, memory=True)
    slowdown = {i: gate_load._slowdown_temperature(machine.nvml, handles[i]) for i in gpus}
    assert slowdown == {0: 87, 1: 87}
    # the triad memory load runs after each round's end event: the GEMM figure is still the GEMM's alone
    assert all(s["tflops"] == pytest.approx(750.0, rel=1e-4) for s in load[0]["samples"])
    assert machine.gpus[0].peak_allocated >= 3 * 2 ** 30  # 3 x 1 GiB triad buffers held on the GPU
    raw = gate_load.sustained_entries(load, gpus, "cuda", "burn_in_", NO_XID, slowdown)
    e = {(x["index"], x["test"]): x for x in gate.evaluate(raw, gpus, gate.validate({"tier": "full"}))}
    assert e[0, "burn_in_throttle"]["measured"] == 0.0 and e[0, "burn_in_throttle"]["passed"] is True
    assert e[0, "burn_in_temperature"]["measured"] == 65 and e[0, "burn_in_temperature"]["passed"] is True
    secs = load[1]["seconds"]
    assert e[1, "burn_in_throttle"]["measured"] == pytest.approx(60.0 / secs, rel=1e-4)  # one onset in the load
    assert e[1, "burn_in_throttle"]["passed"] is False
    hottest = e[1, "burn_in_temperature"]
    assert hottest["expected"] == 87 and hottest["measured"] >= 95 and hottest["passed"] is False
    assert hottest["expectation_source"] == "the GPU's slowdown temperature (NVML)"
    assert e[1, "burn_in_xid"]["measured"] == 0 and e[1, "burn_in_xid"]["passed"] is True
    assert e[0, "burn_in_gemm"]["passed"] is True and e[0, "burn_in_clock_drop"]["passed"] is True


def test_the_full_tier_on_fake_gpus_through_run(nccl_import, virtual_time):
    machine = virtual_time(FakeCudaMachine(h100_sxm(2)))
    nccl_import(machine)
    result, entries = run(machine, clock=machine.now, tier="full",
                          tests=["bf16_gemm", "nccl_allreduce", "sustained_gemm"], time_budget_s=30, sustained_s=0.6,
                          buffer_mib=8192, warmup=1, repetitions=3)
    assert [t for (i, t) in entries if i == 0] == ["bf16_gemm", "nccl_allreduce", "sustained_gemm", "clock_drop"]
    for i in (0, 1):
        assert entries[i, "sustained_gemm"]["measured"] == pytest.approx(750.0, rel=1e-4)
        assert entries[i, "sustained_gemm"]["repetitions"] >= gate.DROP_MIN_SAMPLES
        assert entries[i, "clock_drop"]["measured"] == 0.0 and entries[i, "clock_drop"]["passed"] is True
        assert entries[i, "nccl_allreduce"]["measured"] == pytest.approx(360.0, rel=1e-4)  # two GPUs: busbw = algbw
    assert result["budget"]["within"] is True and result["budget"]["stopped"] is None


# ---- the hard budget: an overrun is said, never "within the budget" --------------------------------------


def test_a_gate_that_ends_past_its_budget_says_it_overran():
    # a GPU at 1 TFLOPS: each 8192^3 GEMM takes 1.1 s of the machine's (injected) clock; warm-up alone spends
    # the 2 s budget, so one repetition runs (below 3, the budget's end is hard) and the probe's runs after it
    slow = FakeGpu(tflops={"bfloat16": 1.0})
    machine = FakeCudaMachine([slow])
    result, entries = run(machine, clock=machine.now, tests=["bf16_gemm"], time_budget_s=2, warmup=3,
                          repetitions=3)
    budget = result["budget"]
    assert entries[0, "bf16_gemm"]["repetitions"] == 1
    assert budget["within"] is False and budget["wall_s"] == pytest.approx(9 * 2 * 8192 ** 3 / 1e12, rel=1e-4)
    # library/gpu_gate.py: budget_spent = stopped is not None; budget_note = stopped or "finished within ..."
    assert budget["stopped"] == "time budget overrun: 9.9 s of 2 s used, 7.9 s past its end"
    assert result["skipped"] == []


def test_an_overrun_after_a_refusal_is_said_too():
    # the same slow GPU: its GEMM spends the budget, the memory test that follows is refused (budget_spent), and
    # the gate still ends 7.9 s past its end: the note names both, the refusal first
    machine = FakeCudaMachine([FakeGpu(tflops={"bfloat16": 1.0})])
    result, _entries = run(machine, clock=machine.now, tests=["bf16_gemm", "memory_bandwidth"], time_budget_s=2,
                           warmup=3, repetitions=3)
    budget = result["budget"]
    (refused,) = result["skipped"]
    assert refused["test"] == "memory_bandwidth" and refused["budget"] is True
    assert budget["within"] is False
    assert budget["stopped"] == "%s; then time budget overrun: 9.9 s of 2 s used, 7.9 s past its end" % refused["why"]


def test_a_gate_that_ends_in_time_has_no_budget_note():
    machine = FakeCudaMachine(h100_sxm(1))
    result, _entries = run(machine, clock=machine.now, tests=["bf16_gemm"], time_budget_s=2)
    assert result["budget"]["within"] is True and result["budget"]["stopped"] is None
    assert 0 < result["budget"]["wall_s"] <= 2


# ---- the pass rule at the floor (gate.verdict) ------------------------------------------------------------


def _judge(test, figure, count=1, **extra):
    raw = [dict({"index": i, "test": test, "figures": [figure] * 5}, **extra) for i in range(count)]
    gpus = {i: {"name": H100["name"], "spec": H100} for i in range(count)}
    return gate.evaluate(raw, gpus, gate.validate({"tier": "full"}))[0]


def test_a_figure_exactly_at_the_floor_passes():
    at = _judge("bf16_gemm", 692.3)  # 989 x 0.70
    assert at["expected"] == 692.3 and at["passed"] is True and ">= expected" in at["why"]
    assert _judge("bf16_gemm", 692.29)["passed"] is False


def test_an_allreduce_exactly_at_the_nccl_floor_passes():
    at = _judge("nccl_allreduce", 329.0, count=8, gpus=8)  # NCCL_BUSBW_FLOORS h100-sxm, 8 GPUs
    assert at["expected"] == 329.0 and at["passed"] is True
    assert _judge("nccl_allreduce", 328.99, count=8, gpus=8)["passed"] is False


def test_a_finding_exactly_at_its_limit_passes():
    raw = [{"index": 0, "test": "clock_drop", "value": 10.0, "samples_n": 60}]
    at = gate.evaluate(raw, {0: {"name": H100["name"], "spec": H100}}, gate.validate({"tier": "full"}))[0]
    assert at["expected"] == 10.0 and at["passed"] is True and "<= limit" in at["why"]


# ---- sizes, shares and paths a user sets or meets: gemm_size, the per-test share, no peer access, the burn-in ------


def test_gemm_size_sets_every_gemm_the_gate_runs(virtual_time):
    machine = virtual_time(FakeCudaMachine(h100_sxm(1)))
    _result, entries = run(machine, clock=machine.now, tier="full", tests=["bf16_gemm", "tf32_gemm", "sustained_gemm"],
                           gemm_size=4096, sustained_s=1.0, time_budget_s=30)
    assert entries[0, "bf16_gemm"]["size"] == entries[0, "tf32_gemm"]["size"] == "4096x4096x4096"
    # every GEMM that ran, the sustained load's included, was 4096^3
    assert machine.matmuls and {n for _i, _kind, n, _s in machine.matmuls} == {4096}
    # and each figure counts the FLOPs of that size: the rates that went in, as at 8192
    assert entries[0, "bf16_gemm"]["measured"] == pytest.approx(750.0, rel=1e-4)
    assert entries[0, "tf32_gemm"]["measured"] == pytest.approx(380.0, rel=1e-4)
    assert entries[0, "sustained_gemm"]["measured"] == pytest.approx(750.0, rel=1e-4)


def test_a_slow_gemm_keeps_to_its_share_of_the_budget_and_the_next_test_still_runs(virtual_time):
    # A GPU at 10 TFLOPS: each 8192^3 GEMM takes 0.11 s. Two tests in a 20 s budget get 10 s each: the GEMM stops
    # repeating once its share is spent (far below the 1000 repetitions asked), and the memory test gets its turn.
    machine = virtual_time(FakeCudaMachine([FakeGpu(tflops={"bfloat16": 10.0})]))
    result, entries = run(machine, clock=machine.now, tests=["bf16_gemm", "memory_bandwidth"], time_budget_s=20,
                          warmup=1, repetitions=1000)
    share, per_gemm = 20 / 2, 2 * 8192 ** 3 / 10e12
    gemm, hbm = entries[0, "bf16_gemm"], entries[0, "memory_bandwidth"]
    assert share / per_gemm - 2 <= gemm["repetitions"] <= share / per_gemm
    assert gemm["measured"] == pytest.approx(10.0, rel=1e-4) and gemm["passed"] is False
    # the GEMM entry's time: its share, the repetition that crossed it and the runs queued while NVML is read
    assert share <= gemm["duration_s"] <= share + (2 + gate_measure.PROBE_RUNS) * per_gemm
    assert hbm["measured"] == pytest.approx(2900.0, rel=1e-4) and hbm["passed"] is True
    assert result["skipped"] == [] and result["budget"]["within"] is True and result["budget"]["stopped"] is None


def test_p2p_between_gpus_without_peer_access_goes_through_host_memory_and_fails(virtual_time):
    # GPUs 2 and 3 of four cannot reach each other (no P2P between them: copies are staged in host memory at the
    # pageable rate, 12 GB/s); the other pairs copy over NVLink
    machine = virtual_time(FakeCudaMachine(h100_sxm(4), no_peer_access={(2, 3), (3, 2)}))
    _result, entries = run(machine, clock=machine.now, tests=["p2p_bandwidth"], buffer_mib=8192, warmup=1,
                           repetitions=3)
    staged = entries[2, "p2p_bandwidth"]
    assert staged["peer"] == 3 and staged["peer_access"] is False
    assert staged["measured"] == pytest.approx(12.0, rel=1e-4)
    assert staged["passed"] is False and "< expected 337.5 GB/s" in staged["why"]
    for i in (0, 1, 3):
        e = entries[i, "p2p_bandwidth"]
        assert e["peer_access"] is True and e["measured"] == pytest.approx(380.0, rel=1e-4) and e["passed"] is True


def test_the_burn_in_through_run_holds_each_gpu_to_the_slowdown_temperature_nvml_gives_it():
    # GPU 0 stays at 65 C, under its 87 C slowdown point. GPU 1's NVML puts its slowdown at 83 C; it warms 1 C every
    # 10 s from 70 C and goes past it two minutes into the load.
    def warming(t):
        return {"temperature_c": min(95, int(70 + t / 10.0)), "slowdown_c": 83}

    machine = FakeCudaMachine(h100_sxm(1) + [FakeGpu(pci_bus_id=0x38, telemetry=warming)])
    # a 32768^3 GEMM (6.4 GiB of operands, 94 ms each) keeps the 890 s load to a few thousand GEMMs on the double
    result, entries = run(machine, clock=machine.now, tier="burn-in", tests=["burn_in"], time_budget_s=900,
                          gemm_size=32768)
    assert [t for i, t in entries if i == 1] == list(gate.BURN_IN_ENTRIES)
    load_s = 900 - gate_bench.BURN_IN_MARGIN_S["cuda"]
    assert entries[1, "burn_in_gemm"]["duration_s"] == pytest.approx(load_s, abs=2.0)
    cool, hot = entries[0, "burn_in_temperature"], entries[1, "burn_in_temperature"]
    assert cool["expected"] == 87 and cool["measured"] == 65 and cool["passed"] is True
    assert hot["expected"] == 83 and hot["measured"] == 95 and hot["passed"] is False
    assert "95 C > limit 83 C" in hot["why"]
    assert hot["expectation_source"] == cool["expectation_source"] == "the GPU's slowdown temperature (NVML)"
    # nothing else went wrong: the GEMM held its rate, no throttle reason, no Xid
    for i in (0, 1):
        for test in ("burn_in_gemm", "burn_in_clock_drop", "burn_in_throttle", "burn_in_xid"):
            assert entries[i, test]["passed"] is True, entries[i, test]["why"]
    assert result["budget"]["within"] is True and result["skipped"] == []
