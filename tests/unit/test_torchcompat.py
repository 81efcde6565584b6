"""The torch/CUDA/driver matrix as data, the wheel solver, label checks and install-request checks."""

import re

import pytest
from gpufleet.host.pytorch import arch as torcharch
from gpufleet.host.pytorch import check as torchcheck
from gpufleet.host.pytorch import compat as tc
from gpufleet.host.pytorch import parse as torchparse
from gpufleet.host.pytorch import table as torchtable

# ---- the table --------------------------------------------------------------------------------


def test_every_row_has_a_source_and_known_fields():
    for row in torchtable.RELEASES + torchtable.WHEELS + list(torchtable.CUDA_VARIANTS.values()):
        assert row["source"], row
        assert row["confidence"] in ("V", "S", "U"), row
    series = [r["series"] for r in torchtable.RELEASES]
    assert len(series) == len(set(series))
    pairs = [(w["torch"], w["variant"]) for w in torchtable.WHEELS]
    assert len(pairs) == len(set(pairs))
    for w in torchtable.WHEELS:
        assert torchtable.release(w["torch"]) is not None
        assert w["variant"] == "cpu" or w["variant"] in torchtable.CUDA_VARIANTS
    with pytest.raises(ValueError):
        torchtable._wheel(torch="2.5", variant="cu121", colour="blue")


def test_releases_2_1_to_2_9_are_covered_with_kernel_lists():
    for minor in range(1, 10):
        series = "2.%d" % minor
        cuda = [w for w in torchtable.wheels_for(series) if w["variant"] != "cpu"]
        assert cuda, series
        assert all(w["arches"] for w in cuda), series
        assert torchtable.wheel(series, "cpu") is not None


@pytest.mark.parametrize(("series", "variants"), [
    ("2.1", {"cu118", "cu121"}),
    ("2.4", {"cu118", "cu121", "cu124"}),
    ("2.5", {"cu118", "cu121", "cu124"}),
    ("2.6", {"cu118", "cu124", "cu126"}),
    ("2.7", {"cu118", "cu126", "cu128"}),
    ("2.8", {"cu126", "cu128", "cu129"}),
    ("2.9", {"cu126", "cu128", "cu130"}),
])
def test_published_variants_follow_release_md(series, variants):
    assert {w["variant"] for w in torchtable.wheels_for(series)} - {"cpu"} == variants


def test_2_5_is_the_last_release_with_cu121_and_2_7_the_first_with_cu128():
    with_121 = [r["series"] for r in torchtable.RELEASES if torchtable.wheel(r["series"], "cu121")]
    with_128 = [r["series"] for r in torchtable.RELEASES if torchtable.wheel(r["series"], "cu128")]
    assert with_121[-1] == "2.5"
    assert with_128[0] == "2.7"


@pytest.mark.parametrize(("variant", "strict", "minor"), [
    ("cu118", "520.61.05", "450.80.02"),
    ("cu121", "530.30.02", "525.60.13"),
    ("cu124", "550.54.15", "525.60.13"),
    ("cu126", "560.35.05", "525.60.13"),
    ("cu128", "570.26", "525.60.13"),
    ("cu130", "580.95.05", "580"),
])
def test_driver_floors_per_cuda(variant, strict, minor):
    row = torchtable.CUDA_VARIANTS[variant]
    assert (row["strict_driver"], row["minor_floor"]) == (strict, minor)


def test_cu121_wheels_have_no_blackwell_kernels_and_cu128_does():
    w121 = torchtable.wheel("2.5", "cu121")
    assert "sm_90" in w121["arches"] and not any(a in w121["arches"] for a in ("sm_100", "sm_120"))
    assert torcharch.coverage(w121, (12, 0)) is None
    assert torcharch.coverage(torchtable.wheel("2.7", "cu128"), (12, 0)) == ("sass", "sm_120")
    assert torcharch.coverage(torchtable.wheel("2.7", "cu128"), (7, 0)) is None  # 2.7 cu128 starts at sm_75


def test_coverage_rules():
    w = torchtable.wheel("2.5", "cu121")
    assert torcharch.coverage(w, (8, 9)) == ("sass", "sm_86")        # Ada runs sm_86 cubins
    assert torcharch.coverage(w, (9, 0)) == ("sass", "sm_90")
    assert torcharch.coverage(w, (3, 7)) is None
    w129 = torchtable.wheel("2.8", "cu129")
    assert torcharch.coverage(w129, (12, 1)) == ("sass", "sm_120")
    assert torcharch.coverage(w129, (13, 0)) == ("ptx", "compute_120")
    arch_specific = dict(w, arches=("sm_90a",))
    assert torcharch.coverage(arch_specific, (9, 0)) == ("sass", "sm_90a")
    assert torcharch.coverage(arch_specific, (9, 1)) is None
    assert torcharch.coverage(torchtable.wheel("2.10", "cu128"), (12, 0)) == ("sass", "sm_120")
    assert torcharch.coverage(dict(torchtable.wheel("2.10", "cu128"), arches=None), (12, 0)) == ("unknown", None)
    # B300 runs the sm_100 code
    assert torcharch.coverage(torchtable.wheel("2.14", "cu130"), (10, 3)) == ("sass", "sm_100")
    assert torcharch.coverage(torchtable.wheel("2.5", "cpu"), (8, 0)) is None


# ---- the solver across the matrix -------------------------------------------------------------

OK = "ok"
# (driver, compute capabilities, pinned torch, python, requested, extra kwargs) -> expected
# expected: (OK, "version+variant") or (NoCompatibleWheel, fragment of the message)
MATRIX = [
    # default: 2.5.1 + cu121 wherever the host runs it
    ("535.129.03", ["8.0"], None, "3.11", "auto", {}, (OK, "2.5.1+cu121")),            # A100
    ("535.154.05", ["8.9"] * 8, None, "3.10", "auto", {}, (OK, "2.5.1+cu121")),        # 8x RTX 4090
    ("535.161.08", ["9.0"] * 8, None, "3.12", "auto", {}, (OK, "2.5.1+cu121")),        # 8x H100
    ("550.54.15", ["8.6"], None, None, "auto", {}, (OK, "2.5.1+cu121")),               # A10
    ("470.82.01", ["7.5"], None, "3.11", "auto", {}, (OK, "2.5.1+cu118")),              # T4 on 470
    ("590.48.01", ["7.0"], None, "3.11", "auto", {}, (OK, "2.5.1+cu121")),              # V100, newer driver
    # driver boundaries (minor-version compatibility, the default policy)
    ("450.80.02", ["7.5"], None, None, "auto", {}, (OK, "2.5.1+cu118")),
    ("450.80.01", ["7.5"], None, None, "auto", {},
     (tc.NoCompatibleWheel, "driver 450.80.01 is older than 450.80.02, the minimum for cu118")),
    ("440.33.01", ["7.5"], None, None, "auto", {},
     (tc.NoCompatibleWheel, "driver 440.33.01 is older than 450.80.02, the minimum for cu118")),
    ("515.105.01", ["8.0"], None, None, "auto", {}, (OK, "2.5.1+cu118")),
    ("520.61.05", ["8.6"], None, None, "auto", {}, (OK, "2.5.1+cu118")),
    ("525.60.12", ["8.6"], None, None, "auto", {}, (OK, "2.5.1+cu118")),
    ("525.60.13", ["8.6"], None, None, "auto", {}, (OK, "2.5.1+cu121")),
    # strict policy: the toolkit driver is the floor
    ("470.82", ["7.5"], None, None, "auto", {"driver_policy": "strict"},
     (tc.NoCompatibleWheel, "driver 470.82 is older than 520.61.05, the minimum for cu118")),
    ("515.105.01", ["8.0"], None, None, "auto", {"driver_policy": "strict"},
     (tc.NoCompatibleWheel, "older than 520.61.05, the minimum for cu118")),
    ("520.61.05", ["8.0"], None, None, "auto", {"driver_policy": "strict"}, (OK, "2.5.1+cu118")),
    ("525.60.13", ["8.0"], None, None, "auto", {"driver_policy": "strict"}, (OK, "2.5.1+cu118")),
    ("530.30.02", ["8.0"], None, None, "auto", {"driver_policy": "strict"}, (OK, "2.5.1+cu121")),
    # Blackwell: B200 (10.0), RTX 5090 (12.0)
    ("570.124.06", ["10.0"] * 8, None, "3.11", "auto", {}, (OK, "2.7.0+cu128")),
    ("575.51.03", ["12.0"], None, "3.12", "auto", {}, (OK, "2.7.0+cu128")),
    ("570.124.06", ["12.0"], "2.5.1", "3.11", "auto", {},
     (tc.NoCompatibleWheel, "GPU compute capability 12.0 (Blackwell) has no kernels in torch 2.5.1+cu121: "
                            "use torch >= 2.7 with cu128")),
    ("570.124.06", ["10.0"], "2.6.0", None, "auto", {},
     (tc.NoCompatibleWheel, "compute capability 10.0 (Blackwell) has no kernels in torch 2.6.0")),
    ("570.124.06", ["12.0"], "2.7.1", None, "auto", {}, (OK, "2.7.1+cu128")),
    ("580.95.05", ["12.0"], "2.9", "3.13", "auto", {}, (OK, "2.9.0+cu128")),
    ("570.124.06", ["12.0"], None, None, "cu126", {},
     (tc.NoCompatibleWheel, "has no kernels in torch 2.6.0+cu126: use torch >= 2.7 with cu128")),
    # mixed fleet: Volta + Blackwell needs a build with both (2.7 cu128 starts at sm_75)
    ("570.124.06", ["7.0", "10.0"], None, None, "auto", {}, (OK, "2.8.0+cu128")),
    # Hopper / Ampere with pinned releases and requested variants
    ("550.54.15", ["9.0"], "2.4.1", "3.8", "auto", {}, (OK, "2.4.1+cu121")),
    ("550.54.15", ["9.0"], "2.5.1+cu124", None, "auto", {}, (OK, "2.5.1+cu124")),
    ("550.54.15", ["8.0"], None, None, "cu124", {}, (OK, "2.5.1+cu124")),
    ("535.129.03", ["8.0"], "2.6.0", None, "cu121", {},
     (tc.NoCompatibleWheel, "torch 2.6 has no cu121 wheels")),
    ("520.61.05", ["8.0"], None, None, "cu121", {},
     (tc.NoCompatibleWheel, "driver 520.61.05 is older than 525.60.13, the minimum for cu121")),
    ("520.61.05", ["8.0"], None, None, "cu128", {},
     (tc.NoCompatibleWheel, "driver 520.61.05 is older than 525.60.13, the minimum for cu128")),
    ("570.124.06", ["9.0"], "2.9.0", None, "cu130", {},
     (tc.NoCompatibleWheel, "driver 570.124.06 is older than 580, the minimum for cu130")),
    ("580.95.05", ["9.0"], "2.9.0", None, "cu130", {}, (OK, "2.9.0+cu130")),
    # Python decides the release when it must
    ("535.129.03", ["8.0"], None, "3.8", "auto", {}, (OK, "2.4.1+cu121")),
    ("535.129.03", ["8.0"], None, "3.14", "auto", {}, (OK, "2.9.0+cu126")),
    ("535.129.03", ["8.0"], "2.5.1", "3.14", "auto", {},
     (tc.NoCompatibleWheel, "torch 2.5.1 has no wheels for Python 3.14 (cp39-cp312; cp313 experimental)")),
    ("535.129.03", ["8.0"], None, "3.7", "auto", {},
     (tc.NoCompatibleWheel, "no torch release in the table has wheels for Python 3.7")),
    # CPU only
    (None, [], None, "3.11", "auto", {}, (OK, "2.5.1+cpu")),
    ("535.129.03", ["8.0"], "2.13.0", "3.11", "cpu", {}, (OK, "2.13.0+cpu")),
    (None, [], None, None, "cu121", {},
     (tc.NoCompatibleWheel, "cu121 was requested but the host reports no NVIDIA GPU")),
    (None, ["8.0"], None, None, "auto", {}, (tc.NoCompatibleWheel, "but no NVIDIA driver version")),
    # pins and variants outside the table
    ("535.129.03", ["8.0"], "1.13.1", None, "auto", {}, (tc.NoCompatibleWheel, "not in the compatibility table")),
    ("535.129.03", ["8.0"], None, None, "rocm6.2", {}, (tc.NoCompatibleWheel, "is not one this matrix knows")),
    ("535.129.03", ["8.0"], "2.5.1+cu118", None, "cu121", {},
     (tc.NoCompatibleWheel, "carries the label +cu118, which contradicts the requested variant cu121")),
]


@pytest.mark.parametrize(("driver", "ccs", "torch", "python", "requested", "kw", "expected"), MATRIX)
def test_solve_matrix(driver, ccs, torch, python, requested, kw, expected):
    kind, what = expected
    if kind is OK:
        got = tc.solve(driver, ccs, torch_version=torch, python_version=python, requested_variant=requested, **kw)
        assert got["local_version"] == what
        version, variant = what.split("+")
        assert got["torch_version"] == version and got["variant"] == variant
        assert got["index_url"] == "https://download.pytorch.org/whl/" + variant
        assert got["requirement"] == "torch==" + what
        assert got["reasons"] and all(r.endswith(".") for r in got["reasons"])
    else:
        with pytest.raises(kind) as err:
            tc.solve(driver, ccs, torch_version=torch, python_version=python, requested_variant=requested, **kw)
        assert what in str(err.value)


def test_blackwell_result_explains_the_move_and_warns_experimental():
    got = tc.solve("570.124.06", ["12.0"])
    assert "The default torch 2.5.1 does not fit this host" in got["reasons"][0]
    assert "sm_120" in " ".join(got["reasons"])
    assert any("experimental" in w for w in got["warnings"])


def test_minor_compat_driver_is_warned_about():
    got = tc.solve("525.60.13", ["8.6"])
    assert got["driver_floor"] == "525.60.13"
    assert any("below 530.30.02, the toolkit driver for CUDA 12.1" in w for w in got["warnings"])
    assert not tc.solve("535.129.03", ["8.6"])["warnings"]


def test_prefer_orders_variants_within_a_release():
    assert tc.solve("550.54.15", ["8.0"], prefer=("cu124", "cu121"))["variant"] == "cu124"
    assert tc.solve("550.54.15", ["8.0"], prefer=("cu118",))["variant"] == "cu118"


def test_ptx_only_coverage_needs_the_toolkit_driver():
    # a compute capability 13.0 GPU only runs 2.9 cu130 through compute_120 PTX
    ok = tc.solve("580.95.05", ["13.0"], torch_version="2.9.0", requested_variant="cu130")
    assert any("PTX JIT" in w for w in ok["warnings"])
    with pytest.raises(tc.NoCompatibleWheel, match="only through PTX JIT"):
        tc.solve("580.65.06", ["13.0"], torch_version="2.9.0", requested_variant="cu130")


def test_a_row_without_an_arch_list_covers_no_gpu_and_says_so(monkeypatch):
    rows = [dict(w, arches=None) if (w["torch"], w["variant"]) == ("2.12", "cu130") else w for w in torchtable.WHEELS]
    monkeypatch.setattr(torchtable, "WHEELS", rows)
    with pytest.raises(tc.NoCompatibleWheel, match="has no architecture list in the table, so it is treated as "
                                                   "covering no GPU"):
        tc.solve("580.95.05", ["9.0"], torch_version="2.12.0", requested_variant="cu130")
    # auto goes past it to a build whose list covers the GPU
    assert tc.solve("580.95.05", ["9.0"], torch_version="2.12.0")["variant"] == "cu126"


def test_experimental_python_warns():
    got = tc.solve("535.129.03", ["8.0"], python_version="3.13.1", torch_version="2.5.1")
    assert any("Python 3.13 is experimental" in w for w in got["warnings"])


@pytest.mark.parametrize(("kw", "fragment"), [
    ({"driver_version": "five-three-five", "compute_capabilities": ["8.0"]}, "driver version"),
    ({"driver_version": "535.129.03", "compute_capabilities": ["eight"]}, "compute capability"),
    ({"driver_version": "535.129.03", "compute_capabilities": ["8.0"], "python_version": "three"}, "Python version"),
    ({"driver_version": "535.129.03", "compute_capabilities": ["8.0"], "torch_version": "latest"}, "torch version"),
    ({"driver_version": "535.129.03", "compute_capabilities": ["8.0"], "driver_policy": "lenient"}, "driver_policy"),
])
def test_bad_input_is_refused(kw, fragment):
    with pytest.raises(torchparse.InvalidInput, match=fragment):
        tc.solve(**kw)


@pytest.mark.parametrize(("given", "expected"), [
    ("8.6", (8, 6)), (8.6, (8, 6)), ((9, 0), (9, 0)), ("12.0", (12, 0)), (12.0, (12, 0)), ("sm_120", (12, 0)),
])
def test_parse_cc(given, expected):
    assert torchparse.parse_cc(given) == expected


def test_parsers():
    assert torchparse.parse_driver("535.129.03") == (535, 129, 3)
    assert torchparse.parse_python("cp311") == (3, 11) and torchparse.parse_python("3.12.4") == (3, 12)
    assert torchparse.parse_torch_version("2.5.1+cu121") == {"release": "2.5.1", "series": "2.5", "local": "cu121",
                                                             "pre": ""}
    assert torchparse.parse_torch_version("2.6.0.dev20241112+cu124")["local"] == "cu124"
    assert torchparse.cuda_of("cu121") == "12.1" and torchparse.cuda_of("cu130") == "13.0"
    assert torchparse.cuda_of("cpu") is None


# ---- check_label ------------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "expected", "kw", "ok", "fragment"), [
    ("2.5.1+cu121", "cu121", {}, True, "is the cu121 build"),
    ("2.13.0+cpu", "cpu", {}, True, "is the cpu build"),
    ("2.5.1+cu118", "cu121", {}, False, "is the cu118 build, not cu121: reinstall torch==2.5.1+cu121 from "
                                        "https://download.pytorch.org/whl/cu121"),
    ("2.13.0+cpu", "cu130", {}, False, "is the cpu build, not cu130"),
    ("2.5.1+cu121", "cu121", {"cuda_version": "12.1"}, True, "torch.version.cuda=12.1 matches cu121"),
    ("2.5.1+cu121", "cu121", {"cuda_version": None}, False, "is not cu121"),
    # unlabeled: PyPI's default CUDA build on Linux x86_64
    ("2.5.1", "cpu", {}, False, "a CUDA build"),
    ("2.6.0", "cu124", {}, True, "PyPI's default for torch 2.6 on Linux x86_64 is cu124"),
    ("2.7.1", "cu121", {}, False, "PyPI's default for torch 2.7 on Linux x86_64 is cu126, not cu121"),
    ("2.5.1", "cu121", {}, False, "check torch.version.cuda == '12.1'"),
    ("2.5.1", "cu121", {"cuda_version": "12.1"}, True, "matches cu121"),
    ("2.13.0", "cpu", {"cuda_version": None}, True, "matches cpu"),
    # vendor / source builds
    ("2.5.0a0+e000cf0ad9.nv24.10", "cu126", {}, False, "not a PyTorch index variant"),
    ("2.5.0a0+e000cf0ad9.nv24.10", "cu126", {"cuda_version": "12.6"}, True, "matches cu126"),
    ("not a version", "cu121", {}, False, "is not of the form"),
])
def test_check_label(version, expected, kw, ok, fragment):
    got_ok, message = torchcheck.check_label(version, expected, **kw)
    assert got_ok is ok
    assert fragment in message


# ---- validate_request -------------------------------------------------------------------------

GOOD_INDEX = "https://download.pytorch.org/whl/cu121"


def codes(problems):
    return [p["code"] for p in problems]


def test_a_clean_request_has_no_problems():
    reqs = ["torch==2.5.1+cu121", "torchvision==0.20.1+cu121", "torchaudio==2.5.1", "numpy==1.26.4",
            "# a comment", "", "pytz==2024.1"]
    assert torchcheck.validate_request(reqs, GOOD_INDEX, ["--require-hashes", "--only-binary", ":all:"]) == []
    assert torchcheck.validate_request(["torch==2.5.1 --hash=sha256:" + "0" * 64], GOOD_INDEX, None) == []


@pytest.mark.parametrize("req", ["torch", "torch>=2.5", "torch==2.*", "torch~=2.5.1", "torch===2.5.1",
                                 "torch==2", "torch==latest", "git+https://github.com/pytorch/pytorch"])
def test_unpinned_requirements_are_refused(req):
    problems = torchcheck.validate_request([req], GOOD_INDEX, [])
    assert codes(problems) == ["unpinned"]
    assert "is not pinned exactly: write name==X.Y.Z[+local]" in problems[0]["message"]


@pytest.mark.parametrize(("reqs", "args"), [
    (["torch==2.5.1"], ["--extra-index-url", "https://download.pytorch.org/whl/cu121"]),
    (["torch==2.5.1"], ["--extra-index-url=https://download.pytorch.org/whl/nightly/cu121"]),
    (["torch==2.5.1"], "--no-deps --extra-index-url https://pypi.org/simple"),
    (["--extra-index-url https://download.pytorch.org/whl/cu121", "torch==2.5.1"], []),
])
def test_extra_index_url_is_refused_anywhere(reqs, args):
    problems = torchcheck.validate_request(reqs, GOOD_INDEX, args)
    assert codes(problems) == ["extra_index_url"]
    assert "torchtriton" in problems[0]["message"] and "--index-url" in problems[0]["message"]


@pytest.mark.parametrize(("index", "args"), [
    ("http://download.pytorch.org/whl/cu121", []),
    (GOOD_INDEX, ["-i", "http://mirror.local/simple"]),
    (GOOD_INDEX, ["--index-url=ftp://mirror.local/simple"]),
])
def test_non_https_index_is_refused(index, args):
    problems = torchcheck.validate_request(["torch==2.5.1+cu121"], index, args)
    assert codes(problems) == ["insecure_index"]
    assert "is not https" in problems[0]["message"]


def test_trusted_host_is_refused():
    assert codes(torchcheck.validate_request(["torch==2.5.1"], GOOD_INDEX, ["--trusted-host", "x"])) == ["trusted_host"]


def test_label_contradicting_the_variant_is_refused():
    problems = torchcheck.validate_request(["torch==2.5.1+cu118", "torchvision==0.20.1+cu121"], GOOD_INDEX, [])
    assert codes(problems) == ["label_mismatch"]
    assert "carries +cu118 but the variant is cu121" in problems[0]["message"]
    # an explicit variant wins over the index URL (a mirror with another path)
    problems = torchcheck.validate_request(["torch==2.5.1+cu121"], "https://mirror.local/simple", [], variant="cpu")
    assert codes(problems) == ["label_mismatch"]


def test_several_problems_are_all_reported():
    problems = torchcheck.validate_request(["torch", "torch==2.5.1+cu118"], "http://x/whl/cu121",
                                           ["--extra-index-url", "y"])
    assert sorted(codes(problems)) == ["extra_index_url", "insecure_index", "label_mismatch", "unpinned"]
    assert all(re.search(r"\w", p["message"]) for p in problems)


def test_a_series_pin_takes_the_release_in_the_table():
    got = tc.solve("535.129.03", ["8.0"], torch_version="2.5")
    assert got["local_version"] == "2.5.1+cu121"
    assert got["reasons"][0] == "torch 2.5 is pinned; 2.5.1 is its release in the table."
    assert tc.solve("535.129.03", ["8.0"], torch_version="2.5.0")["reasons"][0] == "torch 2.5.0 is pinned."


def test_python_3_15_takes_the_first_release_with_it_and_the_driver_s_own_cuda():
    # 2.13 is the first release with cp315; driver 590 (CUDA 13.1) runs cu130 natively
    assert tc.solve("590.48.01", ["9.0"], python_version="3.15")["local_version"] == "2.13.0+cu130"
    assert tc.solve("590.48.01", ["9.0"], python_version="3.15", torch_version="2.13.0")["local_version"] == \
        "2.13.0+cu130"
