"""Issue 36, never install a torch the GPU cannot run: every build's arch list, the field's driver -> build
map with the GPU's compute capability in the choice, and refusals that name a build that would run."""

import re

import pytest
from gpufleet.host.pytorch import arch as torcharch
from gpufleet.host.pytorch import compat as tc
from gpufleet.host.pytorch import parse as torchparse
from gpufleet.host.pytorch import table as torchtable

# ---- every row carries its arch list, from its source ----------------------------------------


def test_every_cuda_row_carries_its_arch_list():
    missing = [(w["torch"], w["variant"]) for w in torchtable.WHEELS if w["variant"] != "cpu" and not w["arches"]]
    assert missing == []
    for w in torchtable.WHEELS:
        assert all(re.match(r"^sm_\d+a?$", a) for a in w["arches"]), w
        assert all(re.match(r"^compute_\d+$", p) for p in w["ptx"]), w


def test_sources_cite_the_original_not_the_shared_reference():
    rows = (torchtable.RELEASES + torchtable.WHEELS + list(torchtable.CUDA_VARIANTS.values())
            + torcharch.GPU_DRIVER_FLOORS)
    for row in rows:
        assert row["source"] and "shared/reference" not in row["source"] and "section 3." not in row["source"], row
    for w in torchtable.WHEELS:
        if w["variant"] != "cpu" and w["torch"] in ("2.10", "2.11", "2.12", "2.13", "2.14"):
            assert "github.com/pytorch/pytorch" in w["source"] or "build_cuda.sh" in w["source"], w


_12_6 = ("50", "60", "70", "75", "80", "86", "90")
_13_X = ("75", "80", "86", "90", "100", "120")


@pytest.mark.parametrize(("series", "variant", "ccs", "ptx"), [
    # RELEASE.md's CUDA support matrix, Linux x86_64, as the release PRs wrote it
    ("2.10", "cu126", _12_6, ()),
    ("2.10", "cu128", ("70", "75", "80", "86", "90", "100", "120"), ()),
    ("2.10", "cu130", _13_X, ("compute_120",)),
    ("2.11", "cu126", _12_6, ()),
    ("2.11", "cu128", ("75", "80", "86", "90", "100", "120"), ()),    # Volta dropped from 12.8 (PR 175253)
    ("2.11", "cu130", _13_X, ("compute_120",)),
    ("2.12", "cu126", _12_6, ()),
    ("2.12", "cu132", _13_X, ("compute_120",)),
    ("2.13", "cu130", _13_X, ("compute_120",)),
    ("2.14", "cu126", _12_6, ()),                                      # sm_50..sm_90 only: no Blackwell
    ("2.14", "cu130", _13_X, ("compute_120",)),
    ("2.14", "cu132", _13_X, ("compute_120",)),
])
def test_arch_lists_of_2_10_to_2_14(series, variant, ccs, ptx):
    w = torchtable.wheel(series, variant)
    assert w["arches"] == tuple("sm_" + c for c in ccs)
    assert w["ptx"] == ptx


def test_12_8_builds_drop_and_regain_volta_as_build_cuda_sh_says():
    # 2.7 cu128 starts at sm_75; 2.8-2.10 carry sm_70 (pytorch issue 157517); 2.11 drops it again; 2.12 has no cu128
    with_70 = [r["series"] for r in torchtable.RELEASES if torchtable.wheel(r["series"], "cu128") and
               "sm_70" in torchtable.wheel(r["series"], "cu128")["arches"]]
    assert with_70 == ["2.8", "2.9", "2.10"]
    assert [r["series"] for r in torchtable.RELEASES if torchtable.wheel(r["series"], "cu128")][-1] == "2.11"


# ---- the four rows ------------------------------------------------------------------------

def test_rtx_5090_on_575_is_refused_for_2_14_1_naming_2_11_0_cu128():
    """Picked torch==2.14.1+cu126 before: cu126 carries sm_50..sm_90, and cu130/cu132 need driver >= 580."""
    with pytest.raises(tc.NoCompatibleWheel) as err:
        tc.solve("575.57.08", ["12.0"], torch_version="2.14.1", python_version="3.11")
    msg = str(err.value)
    assert "12.0 (Blackwell) has no kernels in torch 2.14.1+cu126" in msg
    assert "driver 575.57.08 is older than 580, the minimum for cu130" in msg
    assert "the newest build in the table that runs GPU compute capability 12.0 (Blackwell) on driver 575.57.08 " \
           "with Python 3.11 is torch 2.11.0+cu128 (torch==2.11.0+cu128 from https://download.pytorch.org/whl/cu128)" \
           in msg


def test_b200_on_580_takes_cu130():
    got = tc.solve("580.95.05", ["10.0"] * 8, torch_version="2.14.1", python_version="3.11")
    assert got["requirement"] == "torch==2.14.1+cu130"
    assert "2.14.1+cu130 wheels carry kernels for compute capability 10.0 (sm_100)." in got["reasons"]
    assert any("driver 580.95.05 runs its CUDA 13.0 natively" in r for r in got["reasons"])


def test_h100_on_535_keeps_cu126():
    got = tc.solve("535.183.01", ["9.0"] * 8, torch_version="2.14.1", python_version="3.11")
    assert got["requirement"] == "torch==2.14.1+cu126"
    assert "2.14.1+cu126 wheels carry kernels for compute capability 9.0 (sm_90)." in got["reasons"]


def test_rtx_4090_on_550_keeps_cu126():
    got = tc.solve("550.54.15", ["8.9"], torch_version="2.14.1", python_version="3.11")
    assert got["requirement"] == "torch==2.14.1+cu126"
    assert any("(sm_86, binary-compatible within 8.x)" in r for r in got["reasons"])


# ---- the matrix: GPU x driver for torch 2.14.1 ----------------------------------------------------

D525, D535, D550 = "525.60.13", "535.183.01", "550.54.15"        # CUDA 12.0, 12.2, 12.4
D570, D575, D580, D590 = "570.124.06", "575.57.08", "580.95.05", "590.48.01"   # CUDA 12.8, 12.9, 13.0, 13.1
DRIVERS = (D525, D535, D550, D570, D575, D580, D590)

COMPAT = "through minor-version compatibility"   # a 12.x driver below 12.6's toolkit driver
NATIVE_126 = "runs its CUDA 12.6 natively"
NATIVE_130 = "runs its CUDA 13.0 natively"
OLDER_MAJOR = "no build of torch 2.14 for the driver's own CUDA major runs every GPU here"
NEWEST_2_11 = "is torch 2.11.0+cu128"                # field map: 12.8-12.9 -> cu128, held at torch 2.11 for Blackwell
BW_DRIVER = "needs driver >= 570.26 (CUDA 12.8"
BW_ULTRA_DRIVER = "needs driver >= 575.51.03 (CUDA 12.9"


def _row(cc, *expected):
    return [(cc, d, e) for d, e in zip(DRIVERS, expected)]


TURING_TO_HOPPER = [("cu126", COMPAT)] * 3 + [("cu126", NATIVE_126)] * 2 + [("cu130", NATIVE_130)] * 2
BLACKWELL = [(None, BW_DRIVER)] * 3 + [(None, NEWEST_2_11)] * 2 + [("cu130", NATIVE_130)] * 2
MATRIX = (
    _row("7.0", *([("cu126", COMPAT)] * 3 + [("cu126", NATIVE_126)] * 2 + [("cu126", OLDER_MAJOR)] * 2))  # V100
    + _row("7.5", *TURING_TO_HOPPER)      # T4
    + _row("8.0", *TURING_TO_HOPPER)      # A100
    + _row("8.6", *TURING_TO_HOPPER)      # A10, RTX 3090
    + _row("8.9", *TURING_TO_HOPPER)      # L4, L40S, RTX 4090
    + _row("9.0", *TURING_TO_HOPPER)      # H100, H200
    + _row("10.0", *BLACKWELL)            # B200
    + _row("12.0", *BLACKWELL)            # RTX 5090, RTX PRO 6000
    + _row("10.3", *([(None, BW_ULTRA_DRIVER)] * 4 + [(None, NEWEST_2_11)] + [("cu130", NATIVE_130)] * 2))  # B300
)


@pytest.mark.parametrize(("cc", "driver", "expected"), MATRIX, ids=["%s@%s" % (c, d) for c, d, _unused in MATRIX])
def test_matrix_for_2_14_1(cc, driver, expected):
    variant, reason = expected
    if variant is None:
        with pytest.raises(tc.NoCompatibleWheel) as err:
            tc.solve(driver, [cc], torch_version="2.14.1", python_version="3.11")
        assert reason in str(err.value)
        return
    got = tc.solve(driver, [cc], torch_version="2.14.1", python_version="3.11")
    assert got["local_version"] == "2.14.1+" + variant
    assert any(reason in r for r in got["reasons"]), got["reasons"]
    # the GPU's compute capability is part of every pick
    assert any("kernels for compute capability %s" % cc in r for r in got["reasons"]), got["reasons"]


@pytest.mark.parametrize(("driver", "variant"), [
    # the field's map (vast-ai/base-image promote-pytorch.yml) on a release with cu126, cu128 and cu130
    (D535, "cu126"), (D550, "cu126"),       # CUDA 12.1-12.6 -> cu126
    (D570, "cu128"), (D575, "cu128"),       # 12.8-12.9 -> cu128
    (D580, "cu130"), (D590, "cu130"),       # 13.0-13.1 -> cu130
])
def test_field_map_on_2_11(driver, variant):
    assert tc.solve(driver, ["9.0"], torch_version="2.11.0")["variant"] == variant
    blackwell_ok = torchparse.parse_driver(driver) >= torchparse.parse_driver(D570)
    assert tc.solve(driver, ["12.0"] if blackwell_ok else ["8.6"], torch_version="2.11.0")["variant"] == variant


def test_rank_variants_puts_stable_and_the_driver_s_own_cuda_first():
    drv = torchparse.parse_driver
    assert tc.rank_variants("2.11", drv(D550)) == ["cu126", "cu128", "cu130"]
    assert tc.rank_variants("2.11", drv(D575)) == ["cu128", "cu126", "cu130"]
    assert tc.rank_variants("2.11", drv(D590)) == ["cu130", "cu128", "cu126"]
    assert tc.rank_variants("2.14", drv(D590)) == ["cu130", "cu132", "cu126"]   # 13.2's toolkit driver is unknown
    assert tc.rank_variants("2.10", drv(D590))[-1] == "cu130"                  # experimental in 2.10
    assert tc.rank_variants("2.5", drv(D550))[0] == "cu121"                   # the house pin stays first
    assert tc.driver_cuda(D575) == {"major": 12, "native": (12, 9)}
    assert tc.driver_cuda("470.82.01") == {"major": 11, "native": None}


def test_mixed_hosts_need_a_build_with_every_gpu():
    # Volta + Hopper on a 13.x driver: cu130 has no sm_70, so the CUDA 12.6 build
    assert tc.solve(D590, ["7.0", "9.0"], torch_version="2.14.1")["variant"] == "cu126"
    # Volta + Blackwell: no 2.14 build has both; the newest that does is 2.10's cu128
    with pytest.raises(tc.NoCompatibleWheel, match=r"is torch 2\.10\.0\+cu128"):
        tc.solve(D580, ["7.0", "12.0"], torch_version="2.14.1")


# ---- refusals name a build that would run ------------------------------------------------------

def test_a_requested_variant_the_gpu_cannot_run_names_the_build_that_can():
    with pytest.raises(tc.NoCompatibleWheel) as err:
        tc.solve(D590, ["7.0"], torch_version="2.14.1", requested_variant="cu130")
    assert "7.0 (Volta) has no kernels in torch 2.14.1+cu130" in str(err.value)
    assert "variant auto picks torch 2.14.1+cu126 here (torch==2.14.1+cu126 from " \
           "https://download.pytorch.org/whl/cu126)" in str(err.value)


# Issue 36, "the refusal always has the facts": a pinned variant the GPU cannot run names the build auto takes.
def test_the_default_pin_on_an_rtx_5090_names_what_auto_would_install():
    with pytest.raises(tc.NoCompatibleWheel) as err:
        tc.solve("575.57.08", ["12.0"], torch_version="2.5.1", python_version="3.11", requested_variant="cu121")
    msg = str(err.value)
    assert msg.startswith("GPU compute capability 12.0 (Blackwell) has no kernels in torch 2.5.1+cu121")
    assert "variant auto has no torch 2.5.1 build for it either; the newest build in the table that runs GPU " \
           "compute capability 12.0 (Blackwell) on driver 575.57.08 with Python 3.11 is torch 2.11.0+cu128" in msg


@pytest.mark.parametrize(("driver", "cc", "pin", "variant", "auto"), [
    ("575.57.08", "12.0", "2.7.1", "cu126", "2.7.1+cu128"),      # RTX 5090: cu126 has no sm_120
    ("580.95.05", "10.0", "2.8.0", "cu126", "2.8.0+cu128"),      # B200: the same release's stable Blackwell build
    ("535.183.01", "9.0", "2.14.1", "cu130", "2.14.1+cu126"),    # H100 on 535: cu130 needs driver 580
])
def test_a_pinned_variant_refusal_names_the_same_releases_auto_build(driver, cc, pin, variant, auto):
    with pytest.raises(tc.NoCompatibleWheel) as err:
        tc.solve(driver, [cc], torch_version=pin, python_version="3.11", requested_variant=variant)
    assert "; variant auto picks torch %s here (torch==%s from https://download.pytorch.org/whl/%s)" % (
        auto, auto, auto.split("+")[1]) in str(err.value)
    assert tc.solve(driver, [cc], torch_version=pin, python_version="3.11")["local_version"] == auto


def test_a_driver_too_old_for_the_gpu_is_refused_before_any_wheel():
    with pytest.raises(tc.NoCompatibleWheel) as err:
        tc.solve(D550, ["12.0"], torch_version="2.11.0")
    assert str(err.value) == (
        "GPU compute capability 12.0 (Blackwell (RTX 50xx, RTX PRO 6000)) needs driver >= 570.26 (CUDA 12.8, the "
        "first CUDA release with its kernels); driver 550.54.15 cannot run it with any torch build: update the "
        "driver to >= 570.26")
    assert tc.newest_runnable(D550, ["12.0"]) is None


@pytest.mark.parametrize(("driver", "ccs", "python", "expected"), [
    (D570, ["12.0"], None, "2.11.0+cu128"),
    (D575, ["10.0"], "3.11", "2.11.0+cu128"),
    (D590, ["7.0"], None, "2.14.1+cu126"),
    (D590, ["9.0"], "3.15", "2.14.1+cu130"),
    (D580, ["12.0"], "3.9", "2.8.0+cu128"),          # the newest release with cp39 wheels
    ("470.82.01", ["8.0"], None, "2.7.0+cu118"),     # CUDA 11 driver: the last cu118 release
])
def test_newest_runnable(driver, ccs, python, expected):
    got = tc.newest_runnable(driver, ccs, python_version=python)
    assert "%s+%s" % (got["torch_version"], got["variant"]) == expected
    assert got["requirement"] == "torch==" + expected
    assert got["index_url"] == "https://download.pytorch.org/whl/" + expected.split("+")[1]
