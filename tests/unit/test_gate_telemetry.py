"""What the gate reads from NVML around its tests (gate_measure.telemetry): every field in its unit, from the fake
CUDA machine's scripted GPU state (tests/unit/doubles/fake_torch_cuda.py), the older NVML name for the clocks-event
reasons, and None where NVML cannot answer. The samples of the sustained load and the burn-in, and the report's
power and clock columns, are made of these readings; mutation testing found them unchecked (docs/testing.md)."""

from module_utils.gpufleet.host.gate import measure as gate_measure
from tests.unit.doubles.fake_torch_cuda import FakeCudaMachine, FakeGpu

HOT = {"sm_mhz": 1410, "sm_max_mhz": 1980, "power_limit_w": 350.25, "power_draw_w": 349.25, "temperature_c": 91,
       "throttle_reasons": ["sw_power_cap", "hw_thermal_slowdown"]}


def _machine(telemetry=None):
    machine = FakeCudaMachine([FakeGpu(telemetry=telemetry)])
    machine.nvml.nvmlInit()
    return machine


def test_each_field_in_its_unit():
    machine = _machine(HOT)
    assert gate_measure.telemetry(machine.nvml, 0) == {
        "sm_mhz": 1410, "sm_max_mhz": 1980, "power_limit_w": 350.2, "power_draw_w": 349.2,  # mW -> W, 0.1 W
        "temperature_c": 91, "throttle_reasons": ["sw_power_cap", "hw_thermal_slowdown"]}


def test_an_older_nvml_names_the_reasons_throttle():
    machine = _machine(HOT)

    class OlderNvml:  # nvidia-ml-py before 12.535: no ...ClocksEventReasons, the same mask under the old name
        def __getattr__(self, name):
            if name == "nvmlDeviceGetCurrentClocksEventReasons":
                raise AttributeError(name)
            if name == "nvmlDeviceGetCurrentClocksThrottleReasons":
                return machine.nvml.nvmlDeviceGetCurrentClocksEventReasons
            return getattr(machine.nvml, name)

    assert gate_measure.telemetry(OlderNvml(), 0)["throttle_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]


def test_what_nvml_cannot_answer_is_none():
    machine = FakeCudaMachine([FakeGpu(telemetry=HOT)])  # NVML not initialised: every call raises
    none = dict.fromkeys(HOT)
    assert gate_measure.telemetry(machine.nvml, 0) == none
    assert gate_measure.telemetry(None, 0) == none and gate_measure.telemetry(machine.nvml, None) == none


def test_the_probe_records_what_it_read_into_the_entry():
    machine = _machine(HOT)
    seen = {}
    gate_measure._telemetry_probe(seen, machine.nvml, 0)()
    assert seen == gate_measure.telemetry(machine.nvml, 0) and seen["sm_mhz"] == 1410
