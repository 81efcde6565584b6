"""Feature matrix per GPU from its compute capability, and kernels in the pinned torch wheel.

``FEATURES`` is the table (one row per feature: lowest compute capability, source). Whether the
torch wheel that roles/torch installs by default has kernels for the GPU comes from
``torchtable`` (its arch lists per release and variant) through ``torcharch.coverage``, not from a copy here.

Note on the issue text: Transformer Engine does not need 9.0. Its support matrix lists BF16 from
8.0 (Ampere) and FP8 (per-tensor scaling) from 8.9 (Ada); block-scaled FP8 needs 9.0 (Hopper) and
MXFP8 10.0 (Blackwell data centre).
"""

from ...host.pytorch import arch as torcharch
from ...host.pytorch import compat as torchcompat
from ...host.pytorch import parse as torchparse
from ...host.pytorch import table as torchtable

_CUDA_GUIDE = "CUDA C++ Programming Guide, compute capabilities / Tensor Core data types"
_AMPERE = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (TF32, BF16, 2:4 structured sparsity from Ampere)"
_TE = "Transformer Engine support matrix (nvidia.github.io/TransformerEngine/support_matrix.html)"

FEATURES = (
    {"key": "tf32", "label": "TF32", "min_cc": (8, 0), "source": _AMPERE},
    {"key": "bf16", "label": "BF16", "min_cc": (8, 0), "source": _AMPERE + "; " + _CUDA_GUIDE},
    {"key": "fp8", "label": "FP8", "min_cc": (8, 9), "source": _CUDA_GUIDE + " (Ada 8.9 and Hopper 9.0 add FP8)"},
    {"key": "sparsity_2_4", "label": "2:4 sparsity", "min_cc": (8, 0), "source": _AMPERE},
    {"key": "te_bf16", "label": "Transformer Engine (BF16)", "min_cc": (8, 0), "source": _TE},
    {"key": "te_fp8", "label": "Transformer Engine FP8", "min_cc": (8, 9), "source": _TE},
    {"key": "te_fp8_block", "label": "Transformer Engine FP8 block scaling", "min_cc": (9, 0), "source": _TE},
)

PINNED_TORCH = torchcompat.DEFAULT_TORCH  # what roles/torch installs by default
PINNED_VARIANT = "cu121"

_CACHE = {}


def _pinned_wheel():
    series = torchparse.parse_torch_version(PINNED_TORCH)["series"]
    return torchtable.wheel(series, PINNED_VARIANT)


def for_cc(cc):
    """Feature matrix for a compute capability ("8.6", (8, 6)); {"status": "unknown", "reason"} if unreadable."""
    key = cc if isinstance(cc, (str, tuple)) else str(cc)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    try:
        parsed = torchparse.parse_cc(cc)
    except Exception:
        result = {"status": "unknown", "reason": "compute capability %r not reported or unreadable" % (cc,)}
    else:
        result = {"status": "ok", "compute_capability": "%d.%d" % parsed, "arch": torcharch.arch_name(parsed)}
        for f in FEATURES:
            result[f["key"]] = parsed >= f["min_cc"]
        w = _pinned_wheel()
        cov = torcharch.coverage(w, parsed) if w else ("unknown", None)
        wheel = "torch %s+%s" % (PINNED_TORCH, PINNED_VARIANT)
        if cov is None:
            result["pinned_wheel"] = {"wheel": wheel, "kernels": False, "how": None,
                                      "text": "%s has no kernels for sm_%d%d" % ((wheel,) + parsed)}
        elif cov[0] == "unknown":
            result["pinned_wheel"] = {"wheel": wheel, "kernels": None, "how": None,
                                      "text": "%s: arch list unknown" % wheel}
        else:
            result["pinned_wheel"] = {"wheel": wheel, "kernels": True, "how": "%s %s" % cov,
                                      "text": "%s runs it (%s %s)" % ((wheel,) + cov)}
    if len(_CACHE) < 1000:
        _CACHE[key] = result
    return result


_CELLS = {}


def cell(cc):
    """``text(for_cc(cc))``, cached per value (the report asks once per GPU)."""
    try:
        hit = _CELLS.get(cc)
    except TypeError:  # unhashable odd input
        return text(for_cc(cc))
    if hit is None:
        hit = text(for_cc(cc))
        if len(_CELLS) < 1000:
            _CELLS[cc] = hit
    return hit


def text(matrix):
    """Short cell text: the features present, then the pinned wheel's answer."""
    if matrix.get("status") != "ok":
        return "unknown: %s" % matrix.get("reason")
    have = [f["label"] for f in FEATURES if matrix.get(f["key"]) and not f["key"].startswith("te_")]
    te = [f for f in FEATURES if f["key"].startswith("te_") and matrix.get(f["key"])]
    if te:
        have.append("TE " + "/".join(f["label"].replace("Transformer Engine", "").strip(" ()") or "BF16" for f in te))
    pw = matrix["pinned_wheel"]
    kernels = {True: "cu121 wheel: yes", False: "cu121 wheel: NO kernels", None: "cu121 wheel: unknown"}[pw["kernels"]]
    return "%s; %s" % (", ".join(have) or "none of TF32/BF16/FP8/2:4", kernels)
