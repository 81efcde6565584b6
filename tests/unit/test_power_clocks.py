"""A throttled box sold as full: the power limit lowered below the board's default, the clocks held low.

The two health findings (``power_limit_lowered``, ``clocks_locked_low``) on every path that feeds them:
the fake libnvidia-ml.so.1 loaded by the real pynvml (the NVML path), recorded ``nvidia-smi -q -x`` and
``-q`` captures (the nvidia-smi path), and the health rules on plain GPU dicts for the edges. Each finding
fires on its bad case and on no baseline: the healthy fake NVML profiles and every verbatim capture.
"""

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet.host.gpu import facts as gf
from gpufleet.host.gpu import nvsmi

from tests import fakenvml
from tests.unit.doubles import FIXTURES, fixture_bytes

ROOT = Path(__file__).resolve().parents[2]
_VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = _VENV_PYTHON if _VENV_PYTHON.exists() else Path(sys.executable)
CODES = ("power_limit_lowered", "clocks_locked_low")
XML = FIXTURES / "nvidia_smi_xml"
VERBATIM_XML = sorted(glob.glob(str(XML / "*.xml")))
TEXT_CAPTURES = ("gpud_8x-h100-80gb-hbm3_535.161.08_q.txt", "l40s_595.80_q_idle.txt",
                 "gpud_8x-rtx-4090_535.154.05_q.txt", "gpud_a10_535.129.03_q.txt",
                 "h100-80gb-hbm3-mig_590.48.01_q_load.txt")
BASELINE_PROFILES = ("h100-sxm-8x-nvswitch", "h100-sxm-8x-shared", "a100-pcie-4x-degraded", "rtx4090-riser-x4",
                     "h200-1x")


def found(facts, code):
    return [(f["gpu_index"], f["message"]) for f in facts["health"]["findings"] if f["code"] == code]


def health_of(gpu):
    return gf.health({"gpu_count": 1, "gpus": [gpu], "source": "test"})


def gpu(**kw):
    base = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "power_limit_w": 700.0, "power_default_limit_w": 700.0,
            "clocks": {"sm_mhz": 1980, "sm_max_mhz": 1980, "mem_mhz": 2619, "mem_max_mhz": 2619},
            "applications_clocks": {"sm_mhz": 1980, "sm_default_mhz": 1980},
            "throttle_reasons": []}
    clocks = kw.pop("clocks", {})
    applications = kw.pop("applications_clocks", {})
    base.update(kw)
    base["clocks"] = dict(base["clocks"], **clocks)
    base["applications_clocks"] = dict(base["applications_clocks"], **applications)
    return base


# ------------------------------------------------------------------------------------ the rules


def test_thresholds_are_the_documented_ten_percent():
    assert gf.POWER_LIMIT_MIN_RATIO == 0.9 and gf.CLOCKS_MIN_RATIO == 0.9


def test_power_limit_lowered_message_numbers_and_severity():
    h = health_of(gpu(power_limit_w=350.0))
    (finding,) = [f for f in h["findings"] if f["code"] == "power_limit_lowered"]
    assert finding["severity"] == "warning" and finding["gpu_index"] == 0
    assert finding["message"] == "power limit 350 W, default 700 W (50%)"
    assert (finding["power_limit_w"], finding["power_default_limit_w"]) == (350.0, 700.0)
    assert h["status"] == "degraded"
    # the board's own default is the better evidence: no second, spec-based line about the same limit
    assert "power_limit_below_spec" not in [f["code"] for f in h["findings"]]


@pytest.mark.parametrize(("limit", "fires"), [(630.0, False), (629.9, True), (640.0, False), (700.0, False),
                                              (750.0, False)])
def test_power_limit_threshold_edge(limit, fires):
    assert bool(found({"health": health_of(gpu(power_limit_w=limit))}, "power_limit_lowered")) == fires


@pytest.mark.parametrize("default", [None, 0, "700 W", True, -1])
def test_power_limit_unknown_default_is_no_finding_and_never_raises(default):
    h = health_of(gpu(power_limit_w=350.0, power_default_limit_w=default))
    assert not found({"health": h}, "power_limit_lowered")


def test_spec_line_stays_where_the_default_is_unknown():
    h = health_of(gpu(power_limit_w=350.0, power_default_limit_w=None, spec={"power_w": 700}))
    assert [f["code"] for f in h["findings"]] == ["power_limit_below_spec"]


def test_clocks_locked_low_from_applications_clocks():
    h = health_of(gpu(applications_clocks={"sm_mhz": 1005}, clocks={"sm_mhz": 86}))
    (finding,) = [f for f in h["findings"] if f["code"] == "clocks_locked_low"]
    assert finding["severity"] == "warning"
    assert finding["message"] == "SM application clock 1005 MHz, default 1980 MHz"
    assert h["status"] == "degraded"


@pytest.mark.parametrize(("app", "fires"), [(1782, False), (1781, True), (1980, False), (2100, False)])
def test_applications_clock_threshold_edge(app, fires):
    h = health_of(gpu(applications_clocks={"sm_mhz": app}))
    assert bool(found({"health": h}, "clocks_locked_low")) == fires


def test_clocks_held_by_the_setting_when_applications_clocks_are_deprecated():
    clocks = {"sm_mhz": 1005}
    deprecated = {"sm_mhz": None, "sm_default_mhz": None}
    held = health_of(gpu(clocks=clocks, applications_clocks=deprecated,
                         throttle_reasons=["applications_clocks_setting"]))
    assert found({"health": held}, "clocks_locked_low") == [
        (0, "SM clock 1005 MHz held by a clocks setting (applications clocks setting active), max 1980 MHz")]
    # the same low clock without the reason is an idle or busy GPU, not a setting: nothing to say
    assert not found({"health": health_of(gpu(clocks=clocks, applications_clocks=deprecated))}, "clocks_locked_low")
    # the reason at full clock: the setting holds nothing back
    full = dict(clocks, sm_mhz=1980)
    assert not found({"health": health_of(gpu(clocks=full, applications_clocks=deprecated,
                                              throttle_reasons=["applications_clocks_setting"]))},
                     "clocks_locked_low")


def test_clock_held_below_unchanged_applications_clocks():
    # a lock that leaves the applications clocks at their default (-lgc) on a driver that still reports them
    h = health_of(gpu(clocks={"sm_mhz": 1005}, throttle_reasons=["applications_clocks_setting"]))
    assert found({"health": h}, "clocks_locked_low") == [
        (0, "SM clock 1005 MHz held by a clocks setting (applications clocks setting active), default 1980 MHz")]


def test_held_clock_compares_with_the_default_application_clock_where_known():
    # A V100 at its default application clock (1230 of 1380 MHz max) with the reason active is as shipped.
    h = health_of(gpu(name="Tesla V100-PCIE-32GB", clocks={"sm_mhz": 1230, "sm_max_mhz": 1380},
                      applications_clocks={"sm_mhz": None, "sm_default_mhz": 1230},
                      throttle_reasons=["applications_clocks_setting"]))
    assert not found({"health": h}, "clocks_locked_low")


@pytest.mark.parametrize(("clocks", "applications"), [
    ({}, {}), (None, None), ({"sm_mhz": 1980}, {"sm_mhz": "1005 MHz", "sm_default_mhz": 1980}),
    ({"sm_mhz": None}, {"sm_mhz": 1005, "sm_default_mhz": None}), ({"sm_mhz": True}, "bad"),
])
def test_missing_or_odd_clock_fields_never_raise(clocks, applications):
    g = gpu()
    g["clocks"], g["applications_clocks"] = clocks, applications
    g["throttle_reasons"] = ["applications_clocks_setting"]
    assert not found({"health": health_of(g)}, "clocks_locked_low")


# ---------------------------------------------------------------------------- nvidia-smi path


# The one real capture of a lowered limit: telegraf's RTX 3090 testdata runs at 200 W of its 350 W default.
REAL_LOWERED = "telegraf_rtx-3090-v12.xml"


def test_every_verbatim_capture_is_clean_but_the_one_really_lowered():
    assert len(VERBATIM_XML) == 20
    for path in VERBATIM_XML:
        facts = gf.collect(run_nvidia_smi=_smi(Path(path).read_bytes()), read_file=lambda p: None,
                           exists=lambda p: False, statvfs=lambda p: None, getrlimit=lambda: None)
        assert facts["error"] is None, path
        assert not found(facts, "clocks_locked_low"), (os.path.basename(path), found(facts, "clocks_locked_low"))
        if os.path.basename(path) == REAL_LOWERED:
            assert found(facts, "power_limit_lowered") == [(0, "power limit 200 W, default 350 W (57%)")]
        else:
            assert not found(facts, "power_limit_lowered"), (path, found(facts, "power_limit_lowered"))


@pytest.mark.parametrize("name", TEXT_CAPTURES)
def test_text_captures_are_clean(name):
    parsed = nvsmi.parse_text(fixture_bytes("nvidia_smi_text", name))
    assert parsed["gpus"]
    for code in CODES:
        assert not found({"health": gf.health(parsed)}, code), name


@pytest.mark.parametrize(("name", "default_w", "app", "default_app"), [
    ("telegraf_a100-sxm4-v12.xml", 500.0, 1275, 1275),             # v12 <gpu_power_readings>
    ("datakit_tesla-v100-pcie-32gb_460.39.xml", 250.0, 1230, 1230),  # v11 <power_readings>
    ("telegraf-pr_3090-v13.xml", 350.0, None, None),               # applications clocks "deprecated"
    ("datakit_gtx-1050_515.65.01.xml", None, None, None),           # everything N/A
    ("telegraf_rtx-3080-v12.xml", 320.0, None, None),               # limit raised above default (336 W)
])
def test_xml_fields_per_schema(name, default_w, app, default_app):
    g = nvsmi.parse_xml(fixture_bytes("nvidia_smi_xml", name))["gpus"][0]
    assert g["power_default_limit_w"] == default_w
    assert g["applications_clocks"] == {"sm_mhz": app, "sm_default_mhz": default_app}


def test_text_fields_from_the_535_h100_capture():
    g = nvsmi.parse_text(fixture_bytes("nvidia_smi_text", "gpud_8x-h100-80gb-hbm3_535.161.08_q.txt"))["gpus"][0]
    assert (g["power_limit_w"], g["power_default_limit_w"]) == (700.0, 700.0)
    assert g["applications_clocks"] == {"sm_mhz": 1980, "sm_default_mhz": 1980}


@pytest.mark.parametrize(("name", "code", "message"), [
    ("a100-sxm4-v12_power-limit-250w.xml", "power_limit_lowered", "power limit 250 W, default 500 W (50%)"),
    ("tesla-p100_power-limit-150w.xml", "power_limit_lowered", "power limit 150 W, default 250 W (60%)"),
    ("tesla-v100-pcie_applications-clocks-937mhz.xml", "clocks_locked_low",
     "SM application clock 937 MHz, default 1230 MHz"),
    ("rtx-3090-v13_clocks-held-by-setting.xml", "clocks_locked_low",
     "SM clock 900 MHz held by a clocks setting (applications clocks setting active), max 2100 MHz"),
])
def test_edited_captures_fail_on_their_finding_only(name, code, message):
    facts = gf.collect(run_nvidia_smi=_smi(fixture_bytes("nvidia_smi_xml", "edited", name)),
                       read_file=lambda p: None, exists=lambda p: False, statvfs=lambda p: None,
                       getrlimit=lambda: None)
    assert facts["source"] == "nvidia-smi" and facts["error"] is None
    assert found(facts, code) == [(0, message)]
    other = [c for c in CODES if c != code][0]
    assert not found(facts, other)
    assert facts["health"]["status"] == "degraded"


def _smi(data):
    return lambda: (0, data, b"")


# ------------------------------------------------------------------------------ NVML path


needs_fake_nvml = pytest.mark.skipif(not fakenvml.usable(PYTHON), reason=fakenvml.NEEDS)

# Runs in a subprocess (pynvml keeps the loaded library per process); nvidia-smi is "not installed".
COLLECT = r"""
import json
import pynvml
from gpufleet.host.gpu import facts

print(json.dumps(facts.collect(pynvml=pynvml, run_nvidia_smi=lambda: (127, b"", b"not found"),
                               read_file=lambda p: None, exists=lambda p: False, statvfs=lambda p: None,
                               getrlimit=lambda: None)))
"""


@pytest.fixture(scope="module")
def nvml_facts(tmp_path_factory):
    libdir = tmp_path_factory.mktemp("fakenvml-power-clocks")
    fakenvml.build(libdir)
    cache = {}

    def _facts(profile):
        key = str(profile)
        if key not in cache:
            env = {**os.environ, **fakenvml.env_for(profile, libdir), "PYTHONPATH": str(ROOT / "module_utils")}
            proc = subprocess.run([str(PYTHON), "-c", COLLECT], env=env, cwd=str(ROOT), capture_output=True,
                                  text=True, timeout=60, check=False)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert "fake-nvml:" not in proc.stderr, proc.stderr
            cache[key] = json.loads(proc.stdout)
        return cache[key]

    return _facts


@needs_fake_nvml
@pytest.mark.parametrize("profile", BASELINE_PROFILES)
def test_baseline_profiles_are_clean(nvml_facts, profile):
    facts = nvml_facts(profile)
    assert facts["source"] == "nvml" and facts["error"] is None
    for code in CODES:
        assert not found(facts, code), (profile, found(facts, code))
    for g in facts["gpus"]:
        assert "nvml_errors" not in g or not any(k in ("power", "clocks") for k in g["nvml_errors"]), g["nvml_errors"]


@needs_fake_nvml
def test_nvml_fields_read_from_the_profiles(nvml_facts):
    h100 = nvml_facts("h100-sxm-8x-nvswitch")["gpus"][0]
    assert h100["power_default_limit_w"] == 700.0
    assert h100["applications_clocks"] == {"sm_mhz": 1980, "sm_default_mhz": 1980}
    # R590: applications clocks deprecated (NVML_ERROR_DEPRECATED) -> None, not an error
    h200 = nvml_facts("h200-1x")["gpus"][0]
    assert h200["applications_clocks"] == {"sm_mhz": None, "sm_default_mhz": None}
    assert h200["power_default_limit_w"] == 700.0 and "nvml_errors" not in h200
    # GeForce: not supported -> None
    rtx = nvml_facts("rtx4090-riser-x4")["gpus"][0]
    assert rtx["applications_clocks"]["sm_mhz"] is None and rtx["power_default_limit_w"] == 450.0


@needs_fake_nvml
def test_power_capped_profile(nvml_facts):
    facts = nvml_facts("h100-sxm-8x-power-capped")
    assert found(facts, "power_limit_lowered") == [(i, "power limit 350 W, default 700 W (50%)") for i in range(7)]
    assert not found(facts, "clocks_locked_low")
    assert facts["gpus"][7]["power_limit_w"] == 640.0  # a 9 % trim: tolerated
    assert facts["health"]["status"] == "degraded"


@needs_fake_nvml
def test_clocks_locked_profile(nvml_facts):
    facts = nvml_facts("h100-sxm-8x-clocks-locked")
    assert found(facts, "clocks_locked_low") == [(i, "SM application clock 1005 MHz, default 1980 MHz")
                                                 for i in range(8)]
    assert not found(facts, "power_limit_lowered")
    assert all("applications_clocks_setting" in g["throttle_reasons"] for g in facts["gpus"])
    assert facts["health"]["status"] == "degraded"


@needs_fake_nvml
def test_clock_held_by_the_setting_on_a_deprecated_applications_clocks_driver(nvml_facts, tmp_path):
    """The H200 (R590: applications clocks deprecated) with its clock held at 1005 MHz and the reason set."""
    data = fakenvml.load_profile("h200-1x")
    data["gpus"][0]["clocks_mhz"].update(graphics=1005, sm=1005)
    data["gpus"][0]["clocks_event_reasons"] = 2  # nvmlClocksEventReasonApplicationsClocksSetting
    path = tmp_path / "h200-clock-held.json"
    path.write_text(json.dumps(data))
    facts = nvml_facts(path)
    assert found(facts, "clocks_locked_low") == [
        (0, "SM clock 1005 MHz held by a clocks setting (applications clocks setting active), max 1980 MHz")]


@needs_fake_nvml
def test_default_limit_not_supported_gives_none_and_no_finding(nvml_facts, tmp_path):
    data = fakenvml.load_profile("h100-sxm-8x-power-capped")
    for g in data["gpus"]:
        del g["default_power_limit_mw"]
    path = tmp_path / "capped-no-default.json"
    path.write_text(json.dumps(data))
    facts = nvml_facts(path)
    assert {g["power_default_limit_w"] for g in facts["gpus"]} == {None}
    assert not found(facts, "power_limit_lowered")
    assert all("nvml_errors" not in g for g in facts["gpus"])
