"""Gate tiers (quick / full / burn-in): budgets, the all-reduce figure, stability findings, Xid during load.

Pure parts only (no torch): inputs per tier, the budget rule on an injected clock, nccl-tests' bus
bandwidth, and the findings computed from recorded-style samples and a recorded kernel log
(tests/fixtures/kernel_logs). The cpu mode with real torch (gloo all-reduce, a tiny budget) runs in
tests/unit/test_gate_module.py when GPUFLEET_TORCH_PYTHON names a Python with torch, and in molecule/gate.
"""

import pytest

from module_utils.gpufleet.host.gate import bench as gate_bench
from module_utils.gpufleet.host.gate import load as gate_load
from module_utils.gpufleet.host.gate import rules as gate
from module_utils.gpufleet.host.gpu import specs
from module_utils.gpufleet.host.system import kmsg
from tests.unit.doubles import FIXTURES

XID_LOG = FIXTURES / "kernel_logs" / "gpud_h100-xe9680_xid119-gsp-timeout_dmesg.log"


def h100s(count):
    row = specs.by_key("h100-sxm")
    return {i: {"name": row["name"], "spec": row, "uuid": "GPU-%d" % i, "compute_capability": (9, 0),
                "pci": "0000:%02x:00" % (0x18 + i * 0x20 if i < 4 else 0x9b + (i - 4))} for i in range(count)}


# ---- tiers and their budgets -----------------------------------------------------------------


@pytest.mark.parametrize("tier, budget, tests", [
    ("quick", 60.0, gate.DEFAULT_TESTS),
    ("full", 300.0, gate.DEFAULT_TESTS + ("nccl_allreduce", "sustained_gemm")),
    ("burn-in", 900.0, gate.DEFAULT_TESTS + ("nccl_allreduce", "sustained_gemm", "burn_in")),
])
def test_each_tier_has_its_tests_and_budget(tier, budget, tests):
    p = gate.validate({"tier": tier})
    assert p["time_budget_s"] == budget and p["tests"] == list(tests)
    assert p["sustained_s"] == gate.SUSTAINED_S["cuda"]


@pytest.mark.parametrize("params, message", [
    ({"tier": "quick", "time_budget_s": 120}, "outside the quick tier's range (at most 60 s)"),
    ({"tier": "full", "time_budget_s": 301}, "outside the full tier's range (at most 300 s)"),
    ({"tier": "burn-in", "time_budget_s": 600}, "outside the burn-in tier's range (900 to 3600 s)"),
    ({"tier": "burn-in", "time_budget_s": 4000}, "time_budget_s must be at most 3600"),
    ({"tier": "soak"}, "tier must be one of quick, full, burn-in"),
    ({"tier": "full", "time_budget_s": 60, "sustained_s": 45}, "sustained_s 45 s is more than half"),
    ({"tier": "full", "device": "cpu", "time_budget_s": 6}, "too small to run anything"),
    ({"floors": {"geforce": {"clock_drop": "fast"}}}, "must be a finite number"),
])
def test_budgets_outside_the_tier_are_refused(params, message):
    with pytest.raises(gate.GateInputError) as err:
        gate.validate(params)
    assert message in str(err.value)


def test_cpu_mode_runs_a_tier_with_a_small_budget():
    p = gate.validate({"tier": "burn-in", "device": "cpu", "time_budget_s": 14})
    assert p["sustained_s"] == gate.SUSTAINED_S["cpu"]
    # sustained GEMM 2 s + burn-in at least 2 s set aside; the per-GPU tests share the rest
    assert gate.reserved_s(p) == 4.0


def test_a_gpu_burn_in_keeps_what_the_full_tier_leaves():
    p = gate.validate({"tier": "burn-in", "time_budget_s": 1800})
    assert gate.reserved_s(p) == 45.0 + 1500.0
    assert gate.check_budget(1800, gate.per_gpu_tests(p["tests"]) + ["nccl_allreduce"], 8,
                             gate.reserved_s(p)) == pytest.approx(255.0 / 56)


def test_the_budget_refuses_work_that_cannot_fit_and_says_so():
    now = [100.0]
    budget = gate_bench.Budget(10, clock=lambda: now[0])
    assert budget.left() == 10 and not budget.over() and budget.stopped is None
    now[0] = 107.5
    skip = budget.refuse("nccl_allreduce", 5.0)
    assert skip == {"test": "nccl_allreduce", "budget": True,
                    "why": "time budget: 7.5 s of 10 s used, 2.5 s left, nccl_allreduce needs at least 5.0 s"}
    assert budget.stopped == skip["why"]
    now[0] = 110.0
    assert budget.over() and budget.refuse("burn_in", 2.5, index=0)["index"] == 0
    assert budget.stopped == skip["why"]  # the first refusal is the one reported


# ---- the all-reduce figure -----------------------------------------------------------------


def test_bus_bandwidth_is_nccl_tests_formula():
    # nccl-tests: busbw = algbw x 2(n-1)/n. 1 GiB on 8 GPUs in 4.4 ms: 244 GB/s algbw, 427 GB/s busbw
    nbytes = 2 ** 30
    assert gate.allreduce_bus_bytes(nbytes, 8) == nbytes * 2 * 7 / 8
    assert gate.allreduce_bus_bytes(nbytes, 8) / 0.0044 / 1e9 == pytest.approx(427.0, rel=1e-3)
    assert gate.allreduce_bus_bytes(nbytes, 2) == nbytes  # two ranks (the gloo stand-in): busbw = algbw


def test_allreduce_floor_per_model_for_the_host_size_it_was_measured_on():
    spec = specs.by_key("h100-sxm")
    eight = gate.expectation("nccl_allreduce", spec, gpu_count=8)
    assert eight["expected"] == 329.0 and "365.6" in eight["source"] and "8 GPUs" in eight["source"]
    four = gate.expectation("nccl_allreduce", spec, gpu_count=4)
    assert four["expected"] == pytest.approx(450 * 0.68)  # the class floor of per-direction NVLink
    a100 = gate.expectation("nccl_allreduce", specs.by_key("a100-sxm4-80gb"), gpu_count=8)
    assert a100["expected"] == 228.0 and "Azure NHC" in a100["source"]
    override = gate.expectation("nccl_allreduce", spec, floors={"h100-sxm": {"nccl_allreduce": 0.9}}, gpu_count=8)
    assert override["expected"] == pytest.approx(405.0)
    for row in gate.NCCL_BUSBW_FLOORS.values():
        assert "ref" in row["source"] and row["gpus"] == 8


def test_an_allreduce_below_the_floor_fails_on_every_gpu():
    raw = [{"index": i, "test": "nccl_allreduce", "gpus": 8, "figures": [300.0] * 5} for i in range(8)]
    entries = gate.evaluate(raw, h100s(8), gate.validate({"tier": "full"}))
    assert all(e["passed"] is False and "< expected 329" in e["why"] for e in entries)
    assert not any(e.get("outlier") for e in entries)


# ---- stability findings from samples ---------------------------------------------------------


def samples(clocks, reasons=None, temps=None, tflops=700.0):
    out = []
    for n, mhz in enumerate(clocks):
        out.append({"t": float(n), "tflops": tflops, "sm_mhz": mhz,
                    "throttle_reasons": (reasons[n] if reasons else ["sw_power_cap"]),
                    "temperature_c": (temps[n] if temps else 70), "power_draw_w": 690.0})
    return out


def test_clock_drop_is_settled_against_the_first_samples():
    assert gate.drop_pct([1980] * 5 + [1755] * 10) == pytest.approx(100 * 225 / 1980.0)
    assert gate.drop_pct([1755, 1980, 1980, 1980, 1980, 1980]) == 0.0  # first fifth is at least 3 samples
    assert gate.drop_pct([1980] * 5) is None  # too few to say


def test_sustained_gemm_entries_judge_the_clock_drop():
    load = {0: {"samples": samples([1980] * 10 + [1900] * 20), "seconds": 45.0, "dtype": "bfloat16"},
            1: {"samples": samples([1980] * 10 + [1600] * 20), "seconds": 45.0, "dtype": "bfloat16"}}
    raw = gate_load.sustained_entries(load, h100s(2), "cuda", "")
    entries = gate.evaluate(raw, h100s(2), gate.validate({"tier": "full"}))
    assert [e["test"] for e in entries] == ["sustained_gemm", "clock_drop"] * 2
    gemm0, drop0, _gemm1, drop1 = entries
    assert gemm0["measured"] == 700.0 and gemm0["passed"] is True
    assert gemm0["expected"] == pytest.approx(692.3 * gate.SUSTAINED_SHARE)
    assert drop0["measured"] == pytest.approx(4.0404, abs=1e-3) and drop0["passed"] is True
    assert drop1["passed"] is False and drop1["expected"] == 10.0 and drop1["unit"] == "%"
    assert "> limit 10 %" in drop1["why"] and "SM clock (NVML)" in drop1["why"]
    assert "outlier" not in drop1  # "at most" findings have no peer rule


def test_throttle_onsets_count_thermal_and_power_slowdowns_only():
    reasons = [["sw_power_cap"]] * 10 + [["hw_slowdown"], []] * 5 + [["sw_power_cap", "hw_power_brake_slowdown"]]
    rate, share = gate.throttle_onsets_per_min(samples([1980] * 21, reasons), 60.0)
    assert rate == 6.0 and share == pytest.approx(6 / 21.0)
    assert gate.throttle_onsets_per_min([{"throttle_reasons": None}], 60.0) == (None, None)


def test_new_xid_lines_during_the_load():
    text = XID_LOG.read_text()
    lines = [ln for ln in text.splitlines() if "NVRM: Xid" in ln]
    before = kmsg.parse_kernel_log("\n".join(lines[:2]))
    after = kmsg.parse_kernel_log("\n".join(lines))
    new = gate.new_xid_events(before, after)
    assert len(new) == len(lines) - 2 and {e["xid"] for e in new} == {119}
    assert gate.new_xid_events(after, after) == []


def test_burn_in_findings_from_samples_and_the_kernel_log():
    gpus = h100s(8)
    hot = samples([1980] * 30, reasons=[["sw_power_cap"]] * 20 + [["hw_thermal_slowdown"], []] * 5,
                  temps=[70] * 25 + [88] * 5)
    cool = samples([1980] * 30)
    load = {4: {"samples": hot, "seconds": 60.0, "dtype": "bfloat16"},
            5: {"samples": cool, "seconds": 60.0, "dtype": "bfloat16"}}
    text = XID_LOG.read_text()
    xid = {"events": gate.new_xid_events(kmsg.parse_kernel_log(""), kmsg.parse_kernel_log(text)),
           "source": "dmesg"}
    raw = gate_load.sustained_entries(load, gpus, "cuda", "burn_in_", xid, slowdown={4: 87, 5: 87})
    entries = {(e["index"], e["test"]): e for e in gate.evaluate(raw, gpus, gate.validate({"tier": "burn-in"}))}
    assert sorted({t for _i, t in entries}) == sorted(gate.BURN_IN_ENTRIES)
    assert entries[(4, "burn_in_throttle")]["measured"] == 5.0 and entries[(4, "burn_in_throttle")]["passed"] is False
    assert entries[(5, "burn_in_throttle")]["measured"] == 0.0 and entries[(5, "burn_in_throttle")]["passed"] is True
    assert entries[(4, "burn_in_temperature")]["passed"] is False and entries[(4, "burn_in_temperature")][
        "expected"] == 87
    assert entries[(5, "burn_in_temperature")]["passed"] is True
    # the Xid 119 lines are for PCI 0000:9b:00, GPU 4 here: GPU 5 has none
    assert entries[(4, "burn_in_xid")]["passed"] is False and entries[(4, "burn_in_xid")]["measured"] >= 1
    assert entries[(4, "burn_in_xid")]["xid_events"][0]["xid"] == 119
    assert entries[(5, "burn_in_xid")]["measured"] == 0 and entries[(5, "burn_in_xid")]["passed"] is True


def test_findings_without_readings_are_said_not_failed():
    load = {0: {"samples": [{"t": 0.0, "tflops": 0.2}] * 8, "seconds": 2.0, "dtype": "bfloat16"}}
    cpu = {0: {"name": "cpu (x86_64)", "spec": None}}
    raw = gate_load.sustained_entries(load, cpu, "cpu", "burn_in_", {"reason": "dmesg: Operation not permitted"})
    entries = {e["test"]: e for e in gate.evaluate(raw, cpu, gate.validate({"device": "cpu", "tier": "full"}))}
    assert entries["burn_in_clock_drop"]["passed"] is True and "GEMM throughput" in entries["burn_in_clock_drop"][
        "why"]
    for test in ("burn_in_throttle", "burn_in_temperature", "burn_in_xid"):
        assert entries[test]["passed"] is None and entries[test]["why"].startswith("not judged:")
    assert "Operation not permitted" in entries["burn_in_xid"]["why"]
