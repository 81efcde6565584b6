"""Feature matrix per compute capability, and the pinned cu121 wheel's kernels (from torchcompat)."""

import pytest
from gpufleet.controller.checklist import features
from gpufleet.host.pytorch import compat as torchcompat


@pytest.mark.parametrize(("cc", "tf32", "bf16", "fp8", "te_fp8", "kernels"), [
    ("7.0", False, False, False, False, True),    # V100
    ("7.5", False, False, False, False, True),    # T4
    ("8.0", True, True, False, False, True),      # A100
    ("8.6", True, True, False, False, True),      # A10 / RTX 3090
    ("8.9", True, True, True, True, True),        # L4 / L40S / RTX 4090: runs the sm_86 kernels
    ("9.0", True, True, True, True, True),        # H100 / H200
    ("10.0", True, True, True, True, False),      # B200: 2.5.1+cu121 has no sm_100
    ("12.0", True, True, True, True, False),      # RTX 5090
])
def test_matrix(cc, tf32, bf16, fp8, te_fp8, kernels):
    m = features.for_cc(cc)
    assert (m["tf32"], m["bf16"], m["fp8"], m["te_fp8"], m["pinned_wheel"]["kernels"]) == (
        tf32, bf16, fp8, te_fp8, kernels)
    assert m["sparsity_2_4"] is tf32 and m["te_bf16"] is bf16


def test_pinned_wheel_is_the_torch_role_default():
    assert features.PINNED_TORCH == torchcompat.DEFAULT_TORCH == "2.5.1"
    assert features.for_cc("8.9")["pinned_wheel"]["how"] == "sass sm_86"
    assert features.text(features.for_cc("12.0")).endswith("cu121 wheel: NO kernels")


def test_transformer_engine_fp8_from_8_9_block_scaling_from_9_0():
    assert not features.for_cc("8.9")["te_fp8_block"] and features.for_cc("9.0")["te_fp8_block"]


@pytest.mark.parametrize("cc", [None, "", "eight", 8])
def test_unknown_is_said(cc):
    m = features.for_cc(cc)
    assert m["status"] == "unknown" and "compute capability" in m["reason"]
    assert features.text(m).startswith("unknown: ")


def test_every_feature_has_a_source():
    assert all(f["source"] for f in features.FEATURES)
