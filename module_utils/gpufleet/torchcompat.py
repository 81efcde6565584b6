"""torch / CUDA / driver compatibility matrix (data) and the solver that picks a wheel for a host.

One source of truth for "which torch wheel can this rented host run". Every row names its source:
the public document, file or thread the fact was read in (pytorch/pytorch RELEASE.md and its
release PRs, ``.ci/manywheel/build_cuda.sh``, NVIDIA's CUDA release notes and compatibility guide).

Conventions
-----------
* A *variant* is the PyTorch index's local label: ``cpu``, ``cu118``, ``cu121`` ... The index for a
  variant is ``https://download.pytorch.org/whl/<variant>`` and the pin is ``torch==<version>+<variant>``.
* Driver floors come in two columns (CUDA release notes and compatibility guide): ``strict_driver``
  is the CUDA toolkit's own "toolkit driver" for the toolkit the wheels are built with; ``minor_floor`` is the CUDA
  minor-version-compatibility floor of that CUDA major (450.80.02 for 11.x, 525.60.13 for 12.x,
  580 for 13.x), the floors uv's ``--torch-backend=auto`` encodes. ``solve`` uses the minor floor by
  default (``driver_policy="minor"``) and warns below the strict one; ``driver_policy="strict"``
  makes the strict column the floor.
* Kernel coverage: ``arches`` are the ``sm_XY`` cubins of a variant's builds, ``ptx`` the
  ``compute_XY`` PTX shipped with them. A cubin for X.y runs on a GPU of compute capability X.z with
  z >= y; ``sm_90a``-style arch-specific cubins only on exactly X.y; PTX JIT-compiles for any newer
  GPU (CUDA binary-compatibility rules; torch's own ``_check_cubins`` accepts the same major).
  Every CUDA row carries its list from its source. A row without one (``arches=None``) is treated as
  covering no GPU, and the refusal says so; a unit test fails on any such row.
* ``auto`` ranks the builds of a release that run every GPU on the host's driver (see ``rank_variants``):
  stable before experimental; then builds of the driver's own CUDA major that it runs natively (its
  toolkit driver is met), in DEFAULT_PREFER's order (cu121 first: the house pin; then the newest);
  then builds of that major under minor-version compatibility, oldest CUDA first; then older majors.
  That is the field's map (vast-ai/base-image ``.github/workflows/promote-pytorch.yml``: driver CUDA
  12.1-12.6 -> cu126, 12.8-12.9 -> cu128, 13.0-13.1 -> cu130), with the GPU's kernels always checked.
* ``GPU_DRIVER_FLOORS``: a driver older than the first CUDA release that knows a GPU architecture
  cannot run that GPU with any build; the solver refuses before looking at wheels.
* ``confidence``: V checked in a primary source, S secondary, U unverified.
"""

import re
import shlex

_S31 = "pytorch/pytorch RELEASE.md, Release Compatibility Matrix (https://github.com/pytorch/pytorch/blob/main/RELEASE.md)"
_S32 = ("CUDA Toolkit release notes, toolkit driver table (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/), "
        "and the CUDA Compatibility guide (https://docs.nvidia.com/deploy/cuda-compatibility/)")
_S33 = "the PyTorch wheel index https://download.pytorch.org/whl/<variant> (PEP 440 local labels)"
_MOI90 = "moi90/pytorch_compute_capabilities table.md (conda builds)"
_BUILD_28 = ("pytorch/pytorch .ci/manywheel/build_cuda.sh @00c7a380 (12.6/12.8/12.9 matrix of the 2.8 cycle: "
             "12.6 5.0;6.0;7.0;7.5;8.0;8.6;9.0, 12.8 7.0;7.5;8.0;8.6;9.0;10.0;12.0, 12.9 the same with 12.0+PTX)")
_BUILD_29 = "pytorch/pytorch .ci/manywheel/build_cuda.sh @799d09f2 (12.6/12.8/12.9/13.0 matrix of the 2.9 cycle)"

INDEX_BASE = "https://download.pytorch.org/whl"
DEFAULT_TORCH = "2.5.1"
# Order among the builds a driver runs natively (see rank_variants): cu121 first (the house pin, torch
# 2.5.1+cu121), then the newest; cu129 (2.8's experimental build) and cu118 last.
DEFAULT_PREFER = ("cu121", "cu124", "cu128", "cu126", "cu130", "cu132", "cu129", "cu118")
DRIVER_POLICIES = ("minor", "strict")


class CompatError(Exception):
    """Base of this module's errors."""


class NoCompatibleWheel(CompatError):
    """No torch wheel fits the host or the request; the message says why and what to do."""


class InvalidInput(CompatError, ValueError):
    """A driver, compute capability, Python or torch version that cannot be parsed."""


# ---- CUDA variants: driver floors ------------------------------------------------------------
_CUDA_FIELDS = ("variant", "cuda", "toolkit", "strict_driver", "minor_floor", "confidence", "source", "notes")


def _cuda(**kw):
    row = dict.fromkeys(_CUDA_FIELDS)
    unknown = set(kw) - set(_CUDA_FIELDS)
    if unknown:
        raise ValueError("unknown CUDA fields: %s" % sorted(unknown))
    row.update(kw)
    return row


CUDA_VARIANTS = {r["variant"]: r for r in [
    _cuda(variant="cu118", cuda="11.8", toolkit="11.8.0", strict_driver="520.61.05", minor_floor="450.80.02",
          confidence="V", source=_S32 + " (11.8 row); toolkit 11.8.0 -> 520.61.05 per replicate/monobase "
          "torch_cuda_deps", notes="minor floor: 11.x family, drivers >= 450.80.02"),
    _cuda(variant="cu121", cuda="12.1", toolkit="12.1.1", strict_driver="530.30.02", minor_floor="525.60.13",
          confidence="V", source=_S32 + " (12.1 GA / U1 row); toolkit 12.1.1 -> 530.30.02 per monobase"),
    _cuda(variant="cu124", cuda="12.4", toolkit="12.4.1", strict_driver="550.54.15", minor_floor="525.60.13",
          confidence="V", source=_S32 + " (12.4 GA 550.54.14 / U1 550.54.15); torch builds with 12.4.1 -> "
          "550.54.15 per monobase"),
    _cuda(variant="cu126", cuda="12.6", toolkit="12.6.3", strict_driver="560.35.05", minor_floor="525.60.13",
          confidence="V", source=_S32 + " (12.6 U3 560.35.05); RELEASE.md lists 12.6.3"),
    _cuda(variant="cu128", cuda="12.8", toolkit="12.8", strict_driver="570.26", minor_floor="525.60.13",
          confidence="S", source=_S32 + " (12.8 GA 570.26 / U1 570.124.06)",
          notes="which 12.8 update torch builds with was not read from a source: GA driver kept"),
    _cuda(variant="cu129", cuda="12.9", toolkit="12.9", strict_driver="575.51.03", minor_floor="525.60.13",
          confidence="S", source=_S32 + " (12.9 GA 575.51.03 / U1 575.57.08)",
          notes="which 12.9 update torch builds with was not read from a source: GA driver kept"),
    _cuda(variant="cu130", cuda="13.0", toolkit="13.0.2", strict_driver="580.95.05", minor_floor="580",
          confidence="V", source=_S32 + " (13.0 U2 580.95.05; 13.x minor floor >= 580); RELEASE.md lists 13.0.2 "
          ""),
    _cuda(variant="cu132", cuda="13.2", toolkit="13.2", strict_driver=None, minor_floor="580",
          confidence="U", source=_S32 + " (13.x minor floor >= 580); pytorch/pytorch PR #182849 (13.2.1 builds "
          "from 2.12)",
          notes="the 13.2 toolkit driver was not read from a source: no strict floor"),
]}

# ---- torch releases: Python range, default patch, PyPI default build -----------------------------
_REL_FIELDS = ("series", "patch", "python_min", "python_max", "python_experimental", "pypi_default",
               "confidence", "source", "notes")


def _release(**kw):
    row = dict.fromkeys(_REL_FIELDS)
    unknown = set(kw) - set(_REL_FIELDS)
    if unknown:
        raise ValueError("unknown release fields: %s" % sorted(unknown))
    row.update(kw)
    row.setdefault("python_experimental", ())
    if row["python_experimental"] is None:
        row["python_experimental"] = ()
    return row


_PATCH_X0 = "X.Y.0: the release itself; later patch releases are not in the table"

# ``patch`` is what ``solve`` installs when only the series is known; a pinned patch of the same
# series is accepted as given. ``pypi_default`` is the CUDA variant PyPI's unlabeled Linux x86_64
# wheel is built with, where a source says it; None: not known.
RELEASES = [
    _release(series="2.1", patch="2.1.2", python_min="3.8", python_max="3.11", pypi_default="cu121",
             confidence="V", source=_S31 + " (2.1 row); patch per " + _MOI90,
             notes="PyPI default: 2.1.0 pulls nvidia-cuda-nvrtc-cu12==12.1.105 (pytorch #111469, section 3.1)"),
    _release(series="2.2", patch="2.2.2", python_min="3.8", python_max="3.11", python_experimental=("3.12",),
             confidence="V", source=_S31 + " (2.2 row); patch per " + _MOI90),
    _release(series="2.3", patch="2.3.1", python_min="3.8", python_max="3.11", python_experimental=("3.12",),
             confidence="V", source=_S31 + " (2.3 row); patch per " + _MOI90),
    _release(series="2.4", patch="2.4.1", python_min="3.8", python_max="3.12",
             confidence="V", source=_S31 + " (2.4 row); patch per " + _MOI90),
    _release(series="2.5", patch="2.5.1", python_min="3.9", python_max="3.12", python_experimental=("3.13",),
             confidence="V", source=_S31 + " (2.5 row: last release with cu121; 2.5.1 is its patch release)",
             notes="house default"),
    _release(series="2.6", patch="2.6.0", python_min="3.9", python_max="3.13", pypi_default="cu124",
             confidence="V", source=_S31 + " (2.6 row, PyPI default 12.4 per RFC #138609); " + _S33),
    _release(series="2.7", patch="2.7.0", python_min="3.9", python_max="3.13", pypi_default="cu126",
             confidence="V", source=_S31 + " (2.7 row, RFC #145544: 12.6 to PyPI); 2.7.0 builds per " + _MOI90,
             notes="first release with cu128 (Blackwell), last with cu118"),
    _release(series="2.8", patch="2.8.0", python_min="3.9", python_max="3.13",
             confidence="V", source=_S31 + " (2.8 row)", notes=_PATCH_X0),
    _release(series="2.9", patch="2.9.0", python_min="3.10", python_max="3.14",
             confidence="V", source=_S31 + " (2.9 row)", notes=_PATCH_X0),
    _release(series="2.10", patch="2.10.0", python_min="3.10", python_max="3.14",
             confidence="V", source=_S31 + " (2.10 row)", notes=_PATCH_X0),
    _release(series="2.11", patch="2.11.0", python_min="3.10", python_max="3.14",
             confidence="V", source=_S31 + " (2.11 row)", notes=_PATCH_X0),
    _release(series="2.12", patch="2.12.0", python_min="3.10", python_max="3.14",
             confidence="V", source=_S31 + " (2.12 row)", notes=_PATCH_X0),
    _release(series="2.13", patch="2.13.0", python_min="3.10", python_max="3.15",
             confidence="V", source=_S31 + " (2.13 row)", notes=_PATCH_X0),
    # pypi_default: pytorch/pytorch RFC #190355 names cu132, but PyPI's torch-2.14.1 cp311 manylinux_2_28
    # x86_64 wheel itself is the cu130 build: its torch/version.py reads 2.14.1+cu130, cuda 13.0, and it
    # requires cuda-toolkit==13.0.3 and the nvidia-*-cu13 libraries (read from the wheel, 2026-11-29).
    _release(series="2.14", patch="2.14.1", python_min="3.10", python_max="3.15", pypi_default="cu130",
             confidence="V", source=_S31 + " (2.14 row); PyPI's torch-2.14.1 wheel (torch/version.py: "
             "2.14.1+cu130) for the PyPI build, where pytorch/pytorch RFC #190355 says cu132; " + _S33,
             notes="2.14.1 is the release read from PyPI's wheel."),
]

# ---- wheels: one row per torch release and variant ----------------------------------------------
_WHEEL_FIELDS = ("torch", "variant", "status", "arches", "ptx", "confidence", "source", "notes")


def _wheel(**kw):
    row = dict.fromkeys(_WHEEL_FIELDS)
    unknown = set(kw) - set(_WHEEL_FIELDS)
    if unknown:
        raise ValueError("unknown wheel fields: %s" % sorted(unknown))
    row.update(kw)
    if row["ptx"] is None:
        row["ptx"] = ()
    return row


def _sm(*ccs):
    return tuple("sm_" + c for c in ccs)


_A118 = _sm("37", "50", "60", "61", "70", "75", "80", "86", "90")          # 2.1-2.5 cu118
_A12X = _sm("50", "60", "61", "70", "75", "80", "86", "90")                # 2.1-2.4 cu121, 2.4 cu124
_A125 = _sm("50", "60", "61", "70", "75", "80", "86", "90", "90a")         # 2.5 cu121 / cu124
_A26 = _sm("50", "60", "70", "75", "80", "86", "90")                       # 2.6-2.7 cu12x, 2.8-2.9 cu126
_A26_118 = _sm("37", "50", "60", "70", "75", "80", "86", "90")             # 2.6-2.7 cu118
_A27_128 = _sm("75", "80", "86", "90", "100", "120")                       # 2.7 cu128
_A28_128 = _sm("70", "75", "80", "86", "90", "100", "120")                 # 2.8-2.9 cu128 / cu129
_A29_130 = _sm("75", "80", "86", "90", "100", "120")                       # 2.9-2.14 cu130, 2.12-2.14 cu132
_A211_128 = _sm("75", "80", "86", "90", "100", "120")                      # 2.11 cu128 (Volta dropped)
_PTX120 = ("compute_120",)

# Arch lists of 2.10 and later: PyTorch's "PyTorch CUDA Support Matrix" in RELEASE.md, read in the release
# PRs that wrote it (Linux x86_64 rows), and .ci/manywheel/build_cuda.sh where a stored copy exists.
_RM = "pytorch/pytorch RELEASE.md 'PyTorch CUDA Support Matrix'"
_ARCH_210 = (_RM + " 'For Release 2.9 and 2.10' (the text https://github.com/pytorch/pytorch/pull/175253 replaces: "
             "12.6.3 Maxwell(5.0)..Hopper(9.0); 12.8.1 Volta(7.0)..Blackwell(10.0, 12.0); 13.0 Turing(7.5).."
             "Blackwell(10.0, 12.0+PTX), +PTX on Linux); pytorch/pytorch .ci/manywheel/build_cuda.sh @799d09f2")
_ARCH_211 = (_RM + " for 2.11, https://github.com/pytorch/pytorch/pull/175253 (12.8.1 drops Volta: "
             "Turing(7.5)..Blackwell(10.0, 12.0), no PTX; 13.0.2 Turing(7.5)..Blackwell(10.0, 12.0+PTX)); "
             "RFC https://github.com/pytorch/pytorch/issues/172352")
_ARCH_212 = (_RM + " for 2.12, https://github.com/pytorch/pytorch/pull/182849 (12.8 removed; 13.0.2 and 13.2.1 "
             "Turing(7.5)..Blackwell(10.0, 12.0+PTX), +PTX on Linux)")
_ARCH_213 = (_RM + " 'for 2.12 and 2.13', https://github.com/pytorch/pytorch/pull/187075 (same rows as 2.12)")
_ARCH_214 = (_RM + " 'For Release 2.12, 2.13 and 2.14', https://github.com/pytorch/pytorch/pull/197555 (2.13 and 2.14 "
             "the same); RFC https://github.com/pytorch/pytorch/issues/190355")

WHEELS = [
    _wheel(torch="2.1", variant="cu118", status="stable", arches=_A118, confidence="V",
           source=_S31 + " (2.1 row); arches: " + _MOI90 + " (2.1.2 cuda11.8)"),
    _wheel(torch="2.1", variant="cu121", status="experimental", arches=_A12X, confidence="V",
           source=_S31 + " (2.1 row); arches: " + _MOI90 + " (2.1.2 cuda12.1)"),
    _wheel(torch="2.2", variant="cu118", status="published", arches=_A118, confidence="V",
           source=_S31 + " (2.2 row); arches: " + _MOI90 + " (2.2.2 cuda11.8)"),
    _wheel(torch="2.2", variant="cu121", status="published", arches=_A12X, confidence="V",
           source=_S31 + " (2.2 row); arches: " + _MOI90 + " (2.2.2 cuda12.1)"),
    _wheel(torch="2.3", variant="cu118", status="published", arches=_A118, confidence="V",
           source=_S31 + " (2.3 row); arches: " + _MOI90 + " (2.3.1 cuda11.8)"),
    _wheel(torch="2.3", variant="cu121", status="published", arches=_A12X, confidence="V",
           source=_S31 + " (2.3 row); arches: " + _MOI90 + " (2.3.1 cuda12.1)"),
    _wheel(torch="2.4", variant="cu118", status="published", arches=_A118, confidence="V",
           source=_S31 + " (2.4 row); arches: " + _MOI90 + " (2.4.1 cuda11.8)"),
    _wheel(torch="2.4", variant="cu121", status="stable", arches=_A12X, confidence="V",
           source=_S31 + " (2.4 row); arches: " + _MOI90 + " (2.4.1 cuda12.1)"),
    _wheel(torch="2.4", variant="cu124", status="experimental", arches=_A12X, confidence="V",
           source=_S31 + " (2.4 row); arches: " + _MOI90 + " (2.4.1 cuda12.4)"),
    _wheel(torch="2.5", variant="cu118", status="published", arches=_A118, confidence="V",
           source=_S31 + " (2.5 row); arches: " + _MOI90 + " (2.5.1 cuda11.8)"),
    _wheel(torch="2.5", variant="cu121", status="published", arches=_A125, confidence="V",
           source=_S31 + " (2.5 row, last release with cu121; sm_50..sm_90a, no Blackwell); arches: " + _MOI90),
    _wheel(torch="2.5", variant="cu124", status="published", arches=_A125, confidence="V",
           source=_S31 + " (2.5 row); arches: " + _MOI90 + " (2.5.1 cuda12.4)"),
    _wheel(torch="2.6", variant="cu118", status="stable", arches=_A26_118, confidence="V",
           source=_S31 + " (2.6 row); arches: " + _MOI90 + " (2.6.0 cuda11.8)"),
    _wheel(torch="2.6", variant="cu124", status="stable", arches=_A26, confidence="V",
           source=_S31 + " (2.6 row); arches: " + _MOI90 + " (2.6.0 cuda12.4)"),
    _wheel(torch="2.6", variant="cu126", status="experimental", arches=_A26, confidence="V",
           source=_S31 + " (2.6 row); arches: " + _MOI90 + " (2.6.0 cuda12.6)"),
    _wheel(torch="2.7", variant="cu118", status="stable", arches=_A26_118, confidence="V",
           source=_S31 + " (2.7 row, last with cu118); arches: " + _MOI90 + " (2.7.0 cuda11.8)"),
    _wheel(torch="2.7", variant="cu126", status="stable", arches=_A26, confidence="V",
           source=_S31 + " (2.7 row); arches: " + _MOI90 + " (2.7.0 cuda12.6)"),
    _wheel(torch="2.7", variant="cu128", status="experimental", arches=_A27_128, confidence="V",
           source=_S31 + " (2.7 row, first with cu128; 2.7.0 cu12.8 builds list sm_75-sm_120); arches: " + _MOI90),
    _wheel(torch="2.8", variant="cu126", status="stable", arches=_A26, confidence="S",
           source=_S31 + " (2.8 row); arches: " + _BUILD_28),
    _wheel(torch="2.8", variant="cu128", status="stable", arches=_A28_128, confidence="S",
           source=_S31 + " (2.8 row); arches: " + _BUILD_28),
    _wheel(torch="2.8", variant="cu129", status="experimental", arches=_A28_128, ptx=_PTX120, confidence="S",
           source=_S31 + " (2.8 row); arches: " + _BUILD_28 + " (12.0+PTX)"),
    _wheel(torch="2.9", variant="cu126", status="stable", arches=_A26, confidence="S",
           source=_S31 + " (2.9 row); arches: " + _BUILD_29),
    _wheel(torch="2.9", variant="cu128", status="stable", arches=_A28_128, confidence="S",
           source=_S31 + " (2.9 row); arches: " + _BUILD_29),
    _wheel(torch="2.9", variant="cu130", status="experimental", arches=_A29_130, ptx=_PTX120, confidence="S",
           source=_S31 + " (2.9 row); arches: " + _BUILD_29 + " (13.0: 7.5-12.0+PTX)"),
    _wheel(torch="2.10", variant="cu126", status="stable", arches=_A26, confidence="V",
           source=_S31 + " (2.10 row); arches: " + _ARCH_210),
    _wheel(torch="2.10", variant="cu128", status="stable", arches=_A28_128, confidence="V",
           source=_S31 + " (2.10 row); arches: " + _ARCH_210),
    _wheel(torch="2.10", variant="cu130", status="experimental", arches=_A29_130, ptx=_PTX120, confidence="V",
           source=_S31 + " (2.10 row); arches: " + _ARCH_210),
    _wheel(torch="2.11", variant="cu126", status="published", arches=_A26, confidence="V",
           source=_S31 + " (2.11 row); arches: " + _ARCH_211),
    _wheel(torch="2.11", variant="cu128", status="published", arches=_A211_128, confidence="V",
           source=_S31 + " (2.11 row); arches: " + _ARCH_211, notes="last release with cu128; Volta dropped"),
    _wheel(torch="2.11", variant="cu130", status="published", arches=_A29_130, ptx=_PTX120, confidence="V",
           source=_S31 + " (2.11 row); arches: " + _ARCH_211),
    _wheel(torch="2.12", variant="cu126", status="stable", arches=_A26, confidence="V",
           source=_S31 + " (2.12 row); arches: " + _ARCH_212),
    _wheel(torch="2.12", variant="cu130", status="stable", arches=_A29_130, ptx=_PTX120, confidence="V",
           source=_S31 + " (2.12 row); arches: " + _ARCH_212),
    _wheel(torch="2.12", variant="cu132", status="experimental", arches=_A29_130, ptx=_PTX120, confidence="V",
           source=_S31 + " (2.12 row); arches: " + _ARCH_212),
    _wheel(torch="2.13", variant="cu126", status="published", arches=_A26, confidence="V",
           source=_S31 + " (2.13 row); arches: " + _ARCH_213),
    _wheel(torch="2.13", variant="cu130", status="published", arches=_A29_130, ptx=_PTX120, confidence="V",
           source=_S31 + " (2.13 row); arches: " + _ARCH_213),
    _wheel(torch="2.13", variant="cu132", status="experimental", arches=_A29_130, ptx=_PTX120, confidence="V",
           source=_S31 + " (2.13 row); arches: " + _ARCH_213),
    _wheel(torch="2.14", variant="cu126", status="legacy", arches=_A26, confidence="V",
           source=_S31 + " (2.14 row); arches: " + _ARCH_214),
    _wheel(torch="2.14", variant="cu130", status="published", arches=_A29_130, ptx=_PTX120, confidence="V",
           source=_S31 + " (2.14 row); arches: " + _ARCH_214),
    _wheel(torch="2.14", variant="cu132", status="default", arches=_A29_130, ptx=_PTX120, confidence="V",
           source=_S31 + " (2.14 row); arches: " + _ARCH_214),
]
# Every release also has CPU wheels on the cpu index (section 3.3 lists the ``cpu`` variant).
WHEELS += [_wheel(torch=r["series"], variant="cpu", status="published", arches=(), confidence="V",
                  source=_S33 + " (cpu index)") for r in RELEASES]

# ---- GPU architectures a driver must know ------------------------------------------------------
# A driver runs no GPU newer than its CUDA release: the floor is the toolkit driver of the first CUDA
# release with the architecture's target (a lower bound; a given SKU may need a later driver of that
# branch). Only the architectures a 525+ driver (the CUDA 12 floor) may not know are listed.
_GPU_FIELDS = ("cc", "name", "cuda", "driver", "confidence", "source")
_BW_SRC = ("CUDA 12.8 release notes (sm_100 / sm_120 targets added); the CUDA 12.8 GA toolkit driver 570.26 "
           "(CUDA_VARIANTS cu128); as read in rapids-cmake set_architectures.cmake "
           "(https://github.com/rapidsai/rapids-cmake/pull/746: 100 and 120 need CUDA >= 12.8.0)")
GPU_DRIVER_FLOORS = [dict(zip(_GPU_FIELDS, row)) for row in (
    ((10, 0), "Blackwell (B200, GB200)", "12.8", "570.26", "S", _BW_SRC),
    ((12, 0), "Blackwell (RTX 50xx, RTX PRO 6000)", "12.8", "570.26", "S", _BW_SRC),
    ((10, 3), "Blackwell Ultra (B300, GB300)", "12.9", "575.51.03", "S",
     "CUDA 12.9 is the first toolkit with compute_103 (https://github.com/sonots/cumo/pull/156: 'CUDA 12.8 does not "
     "support compute_103'); the CUDA 12.9 GA toolkit driver 575.51.03 (CUDA_VARIANTS cu129)"),
)]


def gpu_driver_floor(cc):
    """The GPU_DRIVER_FLOORS row of compute capability ``cc`` ((10, 0)), or None when any 525+ driver knows it."""
    for row in GPU_DRIVER_FLOORS:
        if row["cc"] == tuple(cc):
            return row
    return None


_ARCH_NAMES = ((3, None, "Kepler"), (5, None, "Maxwell"), (6, None, "Pascal"), (7, 5, "Turing"), (7, None, "Volta"),
               (8, 9, "Ada Lovelace"), (8, None, "Ampere"), (9, None, "Hopper"), (10, None, "Blackwell"),
               (11, None, "Blackwell"), (12, None, "Blackwell"))

_VARIANT_RE = re.compile(r"^(?:cpu|cu\d{3}|rocm\d+(?:\.\d+)*|xpu)$")
_CUDA_VARIANT_RE = re.compile(r"^cu(\d{2})(\d)$")
_VERSION_RE = re.compile(r"^\s*(?:==)?\s*v?(?P<release>\d+(?:\.\d+)*)(?P<rest>[A-Za-z0-9.]*)"
                         r"(?:\+(?P<local>[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*))?\s*$")


# ---- small parsers ------------------------------------------------------------------------------
def parse_driver(version):
    """"535.129.03" -> (535, 129, 3). Raises InvalidInput."""
    text = str(version).strip() if version is not None else ""
    if not re.match(r"^\d+(?:\.\d+){0,3}$", text):
        raise InvalidInput("driver version %r is not of the form 535.129.03" % (version,))
    return tuple(int(p) for p in text.split("."))


def parse_cc(cc):
    """"8.6", 8.6, (8, 6), "sm_86" -> (8, 6). Raises InvalidInput."""
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        try:
            return int(cc[0]), int(cc[1])
        except (TypeError, ValueError):
            pass
    text = str(cc).strip().lower()
    m = re.match(r"^(\d+)\.(\d)$", text) or re.match(r"^sm_(\d+)(\d)$", text)
    if not m:
        raise InvalidInput("compute capability %r is not of the form 8.6" % (cc,))
    return int(m.group(1)), int(m.group(2))


def parse_python(version):
    """"3.11", "3.11.4", "cp311", (3, 11) -> (3, 11). Raises InvalidInput."""
    if isinstance(version, (tuple, list)) and len(version) >= 2:
        return int(version[0]), int(version[1])
    text = str(version).strip().lower()
    m = re.match(r"^(?:cp|py)?(\d)\.?(\d+)(?:\.\d+)?$", text)
    if not m:
        raise InvalidInput("Python version %r is not of the form 3.11" % (version,))
    return int(m.group(1)), int(m.group(2))


def parse_torch_version(version):
    """"2.5.1+cu121" -> {"release": "2.5.1", "series": "2.5", "local": "cu121", "pre": ""}."""
    m = _VERSION_RE.match(str(version or ""))
    if not m:
        raise InvalidInput("torch version %r is not of the form 2.5.1 or 2.5.1+cu121" % (version,))
    parts = m.group("release").split(".")
    if len(parts) < 2:
        raise InvalidInput("torch version %r needs at least major.minor" % (version,))
    return {"release": m.group("release"), "series": "%s.%s" % (int(parts[0]), int(parts[1])),
            "local": m.group("local"), "pre": m.group("rest") or ""}


def cuda_of(variant):
    """"cu121" -> "12.1"; "cpu" and other labels -> None."""
    m = _CUDA_VARIANT_RE.match(variant or "")
    return "%d.%s" % (int(m.group(1)), m.group(2)) if m else None


def index_url(variant):
    return "%s/%s" % (INDEX_BASE, variant)


def arch_name(cc):
    major, minor = cc
    for maj, mnr, name in _ARCH_NAMES:
        if major == maj and (mnr is None or minor == mnr):
            return name
    return None


def _cc_text(cc):
    return "%d.%d" % cc


def _vtext(t):
    return ".".join(str(p) for p in t)


def _pytext(t):
    return "%d.%d" % t


# ---- lookups ------------------------------------------------------------------------------------
def release(series):
    for r in RELEASES:
        if r["series"] == series:
            return r
    return None


def wheels_for(series):
    return [w for w in WHEELS if w["torch"] == series]


def wheel(series, variant):
    for w in WHEELS:
        if w["torch"] == series and w["variant"] == variant:
            return w
    return None


def coverage(w, cc):
    """How wheel row ``w`` runs on a GPU of compute capability ``cc``.

    Returns ("sass", "sm_86"), ("ptx", "compute_120"), ("unknown", None) when the row has no arch
    list, or None when the wheel has no kernels for it.
    """
    if w["variant"] == "cpu":
        return None
    if w["arches"] is None:
        return ("unknown", None)
    major, minor = cc
    best = None
    for arch in w["arches"]:
        m = re.match(r"^sm_(\d+)(\d)([a-z]?)$", arch)
        if not m:
            continue
        a_major, a_minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
        if a_major != major:
            continue
        if suffix and a_minor != minor:
            continue
        if a_minor <= minor and (best is None or a_minor > best[0]):
            best = (a_minor, arch)
    if best:
        return ("sass", best[1])
    for ptx in w["ptx"]:
        m = re.match(r"^compute_(\d+)(\d)$", ptx)
        if m and (int(m.group(1)), int(m.group(2))) <= cc:
            return ("ptx", ptx)
    return None


def _python_support(rel, py):
    """"stable", "experimental" or None."""
    lo, hi = parse_python(rel["python_min"]), parse_python(rel["python_max"])
    if lo <= py <= hi:
        return "stable"
    if _pytext(py) in rel["python_experimental"]:
        return "experimental"
    return None


def _python_range(rel):
    text = "cp%s-cp%s" % (rel["python_min"].replace(".", ""), rel["python_max"].replace(".", ""))
    if rel["python_experimental"]:
        text += "; %s experimental" % ", ".join("cp" + p.replace(".", "") for p in rel["python_experimental"])
    return text


def _floor(cuda_row, policy):
    if policy == "strict" and cuda_row["strict_driver"]:
        return cuda_row["strict_driver"], "the CUDA %s toolkit driver" % cuda_row["cuda"]
    return cuda_row["minor_floor"], "CUDA %s.x minor-version compatibility" % cuda_row["cuda"].split(".")[0]


def _describe_ccs(ccs):
    names = sorted({arch_name(c) for c in ccs if arch_name(c)})
    text = ", ".join(_cc_text(c) for c in ccs)
    word = "capability" if len(ccs) == 1 else "capabilities"
    return "GPU compute %s %s%s" % (word, text, " (%s)" % "/".join(names) if names else "")


def first_covering(ccs):
    """Earliest (series, variant) whose wheels carry kernels for every GPU (known arch lists only)."""
    for rel in RELEASES:
        for variant in DEFAULT_PREFER:
            w = wheel(rel["series"], variant)
            if w and w["arches"] is not None and all(coverage(w, c) for c in ccs):
                return rel["series"], variant
    return None


# ---- evaluation of one (release, variant) -------------------------------------------------------
def _evaluate(rel, w, version, driver, ccs, py, policy, driver_text=None, pinned=False):
    """Return (problems, warnings, reasons) for wheel row ``w`` of release ``rel`` on this host."""
    problems, warnings, reasons = [], [], []
    dtext = driver_text or (_vtext(driver) if driver else None)
    variant = w["variant"]
    label = "%s+%s" % (version, variant)
    if py is not None:
        support = _python_support(rel, py)
        if support is None:
            problems.append(("python", "torch %s has no wheels for Python %s (%s)"
                             % (version, _pytext(py), _python_range(rel))))
        elif support == "experimental":
            warnings.append("Python %s is experimental for torch %s (RELEASE.md)" % (_pytext(py), rel["series"]))
        else:
            reasons.append("Python %s is in torch %s's wheel range (%s)." % (
                _pytext(py), rel["series"], _python_range(rel)))
    if w["status"] == "experimental":
        warnings.append("%s is marked experimental for torch %s in RELEASE.md (the wheels are published)"
                        % (variant, rel["series"]))
    if variant == "cpu":
        return problems, warnings, reasons
    cuda_row = CUDA_VARIANTS[variant]
    floor, why = _floor(cuda_row, policy)
    if driver is None:
        problems.append(("driver", "no NVIDIA driver version is known for this host, and %s needs driver >= %s"
                         % (variant, floor), floor))
    elif driver < parse_driver(floor):
        problems.append(("driver", "driver %s is older than %s, the minimum for %s (%s): update the driver or "
                         "rent another host" % (dtext, floor, variant, why), floor))
    else:
        reasons.append("Driver %s runs %s wheels: it is at least %s (%s)." % (dtext, variant, floor, why))
        strict = cuda_row["strict_driver"]
        if policy == "minor" and strict and driver < parse_driver(strict):
            warnings.append("driver %s is below %s, the toolkit driver for CUDA %s: %s runs under CUDA minor-version "
                            "compatibility with a limited feature set; PTX JIT of newer code and torch.compile "
                            "(Triton) may fail, so prefer a driver >= %s"
                            % (dtext, strict, cuda_row["cuda"], label, strict))
        elif strict is None:
            warnings.append("the toolkit driver for CUDA %s is not in the table: only the %s floor %s was "
                            "checked" % (cuda_row["cuda"], why, floor))
    uncovered, unknown = [], False
    for cc in ccs:
        cov = coverage(w, cc)
        if cov is None:
            uncovered.append(cc)
        elif cov[0] == "unknown":
            unknown = True
        elif cov[0] == "ptx":
            strict = cuda_row["strict_driver"]
            if driver is not None and strict and driver < parse_driver(strict):
                problems.append(("arch", "GPU compute capability %s runs %s only through PTX JIT (%s), which needs "
                                 "driver >= %s (\"the provided PTX was compiled with an unsupported toolchain\")"
                                 % (_cc_text(cc), label, cov[1], strict)))
            else:
                warnings.append("GPU compute capability %s runs %s through PTX JIT (%s): the first launch of each "
                                "kernel compiles it" % (_cc_text(cc), label, cov[1]))
        else:
            exact = cov[1] == "sm_%d%d" % cc
            reasons.append("%s wheels carry kernels for compute capability %s (%s%s)." % (
                label, _cc_text(cc), cov[1], "" if exact else ", binary-compatible within %d.x" % cc[0]))
    if uncovered:
        hint = first_covering(ccs)
        msg = "%s %s no kernels in torch %s" % (
            _describe_ccs(uncovered), "has" if len(uncovered) == 1 else "have", label)
        if hint:
            msg += ": use torch >= %s with %s" % hint
        problems.append(("arch", msg))
    if unknown:
        # A row without its arch list covers no GPU: installing it would be a guess.
        problems.append(("arch", "torch %s has no architecture list in the table, so it is treated as covering no "
                         "GPU: add the list from its source (RELEASE.md's CUDA support matrix) first" % label))
    return problems, warnings, reasons


# ---- the solver ---------------------------------------------------------------------------------
def _candidate_series(pinned):
    if pinned:
        return [pinned]
    default = parse_torch_version(DEFAULT_TORCH)["series"]
    order = [r["series"] for r in RELEASES]
    i = order.index(default)
    return order[i:] + list(reversed(order[:i]))


def _cuda_tuple(variant):
    return tuple(int(p) for p in CUDA_VARIANTS[variant]["cuda"].split("."))


def driver_cuda(driver):
    """What a driver runs, from the table: {"major": CUDA major under minor-version compatibility,
    "native": newest CUDA version (tuple) whose toolkit driver it meets}; None values when below every floor."""
    drv = parse_driver(driver) if not isinstance(driver, tuple) else driver
    majors = [_cuda_tuple(v)[0] for v, row in CUDA_VARIANTS.items() if drv >= parse_driver(row["minor_floor"])]
    native = [_cuda_tuple(v) for v, row in CUDA_VARIANTS.items()
              if row["strict_driver"] and drv >= parse_driver(row["strict_driver"])]
    return {"major": max(majors) if majors else None, "native": max(native) if native else None}


def _tier(variant, driver):
    """0: the driver's CUDA major, run natively; 1: that major, minor-version compatibility; 2: an older
    major; 3: a newer major (the driver cannot run it)."""
    if driver is None:
        return 0
    dc = driver_cuda(driver)
    major = _cuda_tuple(variant)[0]
    if dc["major"] is None or major > dc["major"]:
        return 3
    if major < dc["major"]:
        return 2
    strict = CUDA_VARIANTS[variant]["strict_driver"]
    return 0 if strict and driver >= parse_driver(strict) else 1


def _why_variant(series, variant, driver, driver_text):
    """One sentence: why ``auto`` took ``variant`` among the builds of ``series`` that run here."""
    cuda = CUDA_VARIANTS[variant]["cuda"]
    tier = _tier(variant, driver)
    if tier == 0:
        why = "driver %s runs its CUDA %s natively" % (driver_text, cuda)
    elif tier == 1:
        why = ("driver %s runs no CUDA %s build of torch %s natively, and %s is the oldest CUDA it runs through "
               "minor-version compatibility" % (driver_text, cuda.split(".")[0], series, cuda))
    else:
        why = ("no build of torch %s for the driver's own CUDA major runs every GPU here, and driver %s runs CUDA %s"
               % (series, driver_text, cuda))
    return "Of torch %s's builds that run here, %s is preferred: %s." % (series, variant, why)


def rank_variants(series, driver=None):
    """The CUDA builds of ``series``, in the order ``auto`` tries them on ``driver`` (a tuple or None).

    Stable before experimental; then the driver's own CUDA major run natively (DEFAULT_PREFER order:
    cu121, then the newest), then that major under minor-version compatibility (oldest CUDA first), then
    older majors (DEFAULT_PREFER order). The field's map (vast-ai/base-image promote-pytorch.yml: driver
    CUDA 12.1-12.6 -> cu126, 12.8-12.9 -> cu128, 13.0-13.1 -> cu130) is this order on current releases.
    """
    order = list(DEFAULT_PREFER)

    def key(w):
        v = w["variant"]
        tier = _tier(v, driver)
        within = _cuda_tuple(v) if tier == 1 else (order.index(v) if v in order else len(order),)
        return (w["status"] == "experimental", tier, within, v)

    return [w["variant"] for w in sorted((w for w in wheels_for(series) if w["variant"] in CUDA_VARIANTS), key=key)]


def _ordered_variants(series, requested, prefer, driver=None):
    if requested != "auto":
        return [requested]
    ranked = rank_variants(series, driver)
    first = [v for v in (prefer or ()) if v in ranked]
    return first + [v for v in ranked if v not in first]


def newest_runnable(driver_version, compute_capabilities, python_version=None, driver_policy="minor"):
    """The newest (release, variant) in the table that runs every GPU on this driver (and Python, when
    given), as {"torch_version", "variant", "requirement", "index_url"}; None when no build does."""
    driver = parse_driver(driver_version)
    ccs = [parse_cc(c) for c in compute_capabilities or []]
    py = parse_python(python_version) if python_version not in (None, "") else None
    if any(_gpu_too_new(driver, cc) for cc in ccs):
        return None
    for rel in reversed(RELEASES):
        for variant in rank_variants(rel["series"], driver):
            problems, _unused, _unused = _evaluate(rel, wheel(rel["series"], variant), rel["patch"], driver, ccs, py,
                                                   driver_policy)
            if not problems:
                return {"torch_version": rel["patch"], "variant": variant,
                        "requirement": "torch==%s+%s" % (rel["patch"], variant), "index_url": index_url(variant)}
    return None


def _gpu_too_new(driver, cc):
    row = gpu_driver_floor(cc)
    return row if row and driver < parse_driver(row["driver"]) else None


def solve(driver_version, compute_capabilities, torch_version=None, python_version=None, requested_variant="auto",
          prefer=(), driver_policy="minor"):
    """Pick the torch wheel for a host, or raise NoCompatibleWheel saying why.

    ``driver_version``: the NVIDIA driver ("535.129.03") or None; ``compute_capabilities``: one per
    GPU ("8.0", (9, 0), ...), empty when the host has none; ``torch_version``: a pin ("2.5.1",
    "2.5", "2.5.1+cu121") or None for the house default; ``requested_variant``: "auto", "cpu" or
    "cuXYZ"; ``prefer``: CUDA variants to try first within a release, in this order (a wheelhouse's
    builds); the others follow in ``rank_variants`` order. With ``auto`` the pick is the first build in
    that order that runs every GPU on this driver; when none of the release's builds does, the refusal
    names the newest build in the table that would (``newest_runnable``).
    """
    if driver_policy not in DRIVER_POLICIES:
        raise InvalidInput("driver_policy must be one of %s" % ", ".join(DRIVER_POLICIES))
    requested = (requested_variant or "auto").strip().lower()
    driver = parse_driver(driver_version) if driver_version not in (None, "") else None
    driver_text = str(driver_version).strip() if driver is not None else None
    ccs = [parse_cc(c) for c in (compute_capabilities or [])]
    py = parse_python(python_version) if python_version not in (None, "") else None

    pinned_series, pinned_release = None, None
    if torch_version not in (None, ""):
        pin = parse_torch_version(torch_version)
        if pin["local"]:
            if requested == "auto":
                requested = pin["local"]
            elif requested != pin["local"]:
                raise NoCompatibleWheel("torch pin %s carries the label +%s, which contradicts the requested variant "
                                        "%s" % (torch_version, pin["local"], requested))
        if release(pin["series"]) is None:
            raise NoCompatibleWheel("torch %s is not in the compatibility table (%s to %s): add its row to "
                                    "gpufleet/torchcompat.py first" % (pin["release"], RELEASES[0]["series"],
                                                                       RELEASES[-1]["series"]))
        pinned_series = pin["series"]
        pinned_release = pin["release"] + pin["pre"] if len(pin["release"].split(".")) > 2 else None

    if requested != "auto" and requested != "cpu" and requested not in CUDA_VARIANTS:
        raise NoCompatibleWheel("variant %r is not one this matrix knows (cpu, %s)"
                                % (requested, ", ".join(sorted(CUDA_VARIANTS))))

    want_cpu = requested == "cpu" or (requested == "auto" and not ccs)
    if requested not in ("auto", "cpu") and not ccs:
        raise NoCompatibleWheel("%s was requested but the host reports no NVIDIA GPU: request variant cpu, or fix the "
                                "driver / GPU visibility first" % requested)
    if not want_cpu and driver is None:
        raise NoCompatibleWheel("the host reports GPUs (compute capability %s) but no NVIDIA driver version: "
                                "install or repair the driver first, or request variant cpu"
                                % ", ".join(_cc_text(c) for c in ccs))
    if not want_cpu:
        for cc in ccs:
            row = _gpu_too_new(driver, cc)
            if row:
                raise NoCompatibleWheel(
                    "GPU compute capability %s (%s) needs driver >= %s (CUDA %s, the first CUDA release with its "
                    "kernels); driver %s cannot run it with any torch build: update the driver to >= %s"
                    % (_cc_text(cc), row["name"], row["driver"], row["cuda"], driver_text, row["driver"]))

    failures = []
    for series in _candidate_series(pinned_series):
        rel = release(series)
        version = pinned_release or rel["patch"]
        variants = ["cpu"] if want_cpu else _ordered_variants(series, requested, prefer, driver)
        for variant in variants:
            w = wheel(series, variant)
            if w is None:
                published = [x["variant"] for x in wheels_for(series)]
                last = [r["series"] for r in RELEASES if wheel(r["series"], variant)]
                msg = "torch %s has no %s wheels (published: %s)" % (series, variant, ", ".join(published))
                if last:
                    msg += "; %s wheels exist for torch %s to %s" % (variant, last[0], last[-1])
                failures.append((series, variant, [("missing", msg)]))
                continue
            problems, warnings, reasons = _evaluate(rel, w, version, driver, ccs if not want_cpu else [], py,
                                                    driver_policy, driver_text, bool(pinned_series))
            if problems:
                failures.append((series, variant, problems))
                continue
            if requested == "auto" and not want_cpu:
                reasons = [_why_variant(series, variant, driver, driver_text)] + reasons
            return _result(rel, version, variant, reasons, warnings, failures, pinned_series, requested,
                           driver_policy, pinned_release is not None)
    message = _failure_message(failures, py)
    if not want_cpu and any(p[0] in ("arch", "driver") for _unused, _unused, probs in failures for p in probs):
        if requested != "auto":
            # A pinned variant the GPUs or the driver cannot run: say what variant auto takes of the same release.
            try:
                auto = solve(driver_text, ccs, torch_version=pinned_release or pinned_series,
                             python_version=python_version, driver_policy=driver_policy)
            except CompatError:
                auto = None
            if auto:
                raise NoCompatibleWheel("%s; variant auto picks torch %s here (%s from %s)" % (
                    message, auto["local_version"], auto["requirement"], auto["index_url"]))
            message += "; variant auto has no torch %s build for it either" % (pinned_release or pinned_series
                                                                               or DEFAULT_TORCH)
        newest = newest_runnable(driver_text, ccs, python_version=python_version, driver_policy=driver_policy)
        if newest:
            message += ("; the newest build in the table that runs %s on driver %s%s is torch %s+%s (%s from %s)"
                        % (_describe_ccs(ccs), driver_text, " with Python %s" % _pytext(py) if py else "",
                           newest["torch_version"], newest["variant"], newest["requirement"], newest["index_url"]))
        else:
            message += "; no build in the table runs %s on driver %s" % (_describe_ccs(ccs), driver_text)
    raise NoCompatibleWheel(message)


def _result(rel, version, variant, reasons, warnings, failures, pinned_series, requested, policy, pinned_full):
    lead = []
    if variant == "cpu":
        lead.append("Variant cpu was requested." if requested == "cpu" else
                    "The host reports no NVIDIA GPU, so the CPU build is installed.")
    elif requested not in ("auto", "cpu"):
        lead.append("Variant %s was requested." % variant)
    if pinned_series and pinned_full:
        lead.append("torch %s is pinned." % version)
    elif pinned_series:
        lead.append("torch %s is pinned; %s is its release in the table." % (pinned_series, version))
    elif version == DEFAULT_TORCH:
        lead.append("torch %s is the house default (the last release with cu121 wheels)." % version)
    else:
        first = failures[0] if failures else None
        why = first[2][0][1] if first else "it does not fit this host"
        lead.append("The default torch %s does not fit this host (%s); torch %s is the first release that does."
                    % (DEFAULT_TORCH, why, version))
    cuda_row = CUDA_VARIANTS.get(variant)
    return {
        "torch_version": version,
        "variant": variant,
        "index_url": index_url(variant),
        "local_version": "%s+%s" % (version, variant),
        "requirement": "torch==%s+%s" % (version, variant),
        "cuda_version": cuda_of(variant),
        "driver_floor": _floor(cuda_row, policy)[0] if cuda_row else None,
        "driver_policy": policy,
        "reasons": lead + reasons,
        "warnings": warnings,
    }


def _failure_message(failures, py):
    """The most useful reason among the wheels tried (none of which fit)."""
    if not failures:
        return "no torch wheel fits this host"

    def has(kind, probs):
        return any(p[0] == kind for p in probs)

    def only(kind, probs):
        return all(p[0] == kind for p in probs)

    if all(has("python", probs) for _unused, _unused, probs in failures):
        series = {s for s, _unused, _unused in failures}
        if len(series) == 1:
            return next(p[1] for p in failures[0][2] if p[0] == "python")
        return "no torch release in the table has wheels for Python %s" % _pytext(py)
    rest = [f for f in failures if not has("python", f[2])]
    if all(only("missing", probs) for _unused, _unused, probs in rest):
        return rest[0][2][0][1]
    rest = [f for f in rest if not only("missing", f[2])]
    driver_probs = [p for _unused, _unused, probs in rest for p in probs if p[0] == "driver"]
    for _unused, _unused, probs in rest:
        if only("arch", probs):
            if driver_probs:  # the other builds need a newer driver: say both
                return probs[0][1] + "; " + min(driver_probs, key=lambda p: parse_driver(p[2]))[1]
            return probs[0][1]
    if all(has("driver", probs) for _unused, _unused, probs in rest):
        return min(driver_probs, key=lambda p: parse_driver(p[2]))[1]
    return "no torch wheel fits this host: " + "; ".join(p[1] for p in rest[0][2])


# ---- checking what is installed -----------------------------------------------------------------
_UNSET = object()


def check_label(version_string, expected_variant, cuda_version=_UNSET):
    """Does installed ``torch.__version__`` match ``expected_variant``? Returns (ok, message).

    Pass ``cuda_version`` (``torch.version.cuda``: "12.1", or None for a CPU build) when known: PyPI's
    wheels carry no local label, so verify with it, not with the version string alone. An unlabeled
    version is a PyPI build, the default CUDA build on Linux x86_64 for 2.x.
    """
    try:
        parsed = parse_torch_version(version_string)
    except InvalidInput as exc:
        return False, str(exc)
    expected = (expected_variant or "").strip().lower()
    label = (parsed["local"] or "").lower()
    have_cuda = cuda_version is not _UNSET
    want_cuda = cuda_of(expected)
    fix = "reinstall torch==%s+%s from %s" % (parsed["release"], expected, index_url(expected))

    def _by_cuda(prefix):
        if cuda_version is None:
            found = "cpu"
        else:
            found = "cu" + str(cuda_version).replace(".", "") if re.match(r"^\d+\.\d$", str(cuda_version)) else None
        if found == expected:
            return True, "%s: torch.version.cuda=%s matches %s" % (prefix, cuda_version, expected)
        return False, "%s: torch.version.cuda=%s is not %s (%s): %s" % (
            prefix, cuda_version, expected, want_cuda or "no CUDA", fix)

    if label:
        if _VARIANT_RE.match(label):
            if label != expected:
                return False, "torch %s is the %s build, not %s: %s" % (version_string, label, expected, fix)
            if have_cuda:
                return _by_cuda("torch %s is labelled %s" % (version_string, label))
            return True, "torch %s is the %s build" % (version_string, expected)
        if have_cuda:
            return _by_cuda("torch %s has the local label +%s (a source or vendor build)" % (version_string, label))
        return False, ("torch %s has the local label +%s, not a PyTorch index variant (a source or vendor build): "
                       "check torch.version.cuda" % (version_string, label))
    if have_cuda:
        return _by_cuda("torch %s has no local label (PyPI build)" % version_string)
    rel = release(parsed["series"])
    default = rel["pypi_default"] if rel else None
    if expected == "cpu":
        return False, ("torch %s has no local label: PyPI's build on Linux x86_64 is a CUDA build (%s), not cpu: %s"
                       % (version_string, default or "CUDA version not in the table", fix))
    if default is None:
        return False, ("torch %s has no local label: a PyPI build whose CUDA version is not in the table for torch %s; "
                       "check torch.version.cuda == %r" % (version_string, parsed["series"], want_cuda))
    if default == expected:
        return True, ("torch %s has no local label: PyPI's default for torch %s on Linux x86_64 is %s; confirm with "
                      "torch.version.cuda == %r" % (version_string, parsed["series"], default, want_cuda))
    return False, ("torch %s has no local label: PyPI's default for torch %s on Linux x86_64 is %s, not %s: %s"
                   % (version_string, parsed["series"], default, expected, fix))


# ---- checking an install request ----------------------------------------------------------------
_PIN_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?:\[[A-Za-z0-9._,-]+\])?"
    r"==(?P<version>\d+(?:\.\d+)+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)"
    r"(?:\+(?P<local>[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*))?$")


def _split_args(args):
    if args is None:
        return []
    if isinstance(args, str):
        return shlex.split(args)
    out = []
    for a in args:
        out.extend(shlex.split(str(a)))
    return out


def _variant_of_index(url):
    path = (url or "").rstrip("/").rsplit("/", 1)[-1].lower()
    return path if _VARIANT_RE.match(path) else None


def validate_request(requirements, index_url=None, extra_args=None, variant=None):
    """Problems with a torch install request, as [{"code", "message", "item"}]; empty when it is safe.

    Refuses: a requirement that is not an exact ``name==X.Y.Z[+local]`` pin, ``--extra-index-url``
    anywhere (dependency confusion: the Dec 2022 torchtriton compromise, pytorch/pytorch PR #91539
    renamed the package), ``--trusted-host``, an index URL that is not https, and a local label that contradicts
    the variant (from ``variant`` or the index URL's last path segment).
    """
    problems = []

    def add(code, message, item):
        problems.append({"code": code, "message": message, "item": item})

    variant = (variant or _variant_of_index(index_url) or "").lower() or None
    if index_url is not None and not str(index_url).lower().startswith("https://"):
        add("insecure_index", "index URL %s is not https: packages could be swapped in transit; use "
            "https://download.pytorch.org/whl/<variant> or an https mirror" % index_url, index_url)

    def check_option(tokens, where):
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            name, _unused, value = tok.partition("=")
            if name in ("--extra-index-url",):
                add("extra_index_url", "--extra-index-url in %s: pip picks the highest version across all indexes, "
                    "which is how the Dec 2022 torchtriton dependency-confusion compromise happened; use only "
                    "--index-url" % where, tok)
            elif name in ("--trusted-host",):
                add("trusted_host", "--trusted-host in %s turns off TLS verification for that host" % where, tok)
            elif name in ("-i", "--index-url", "--index"):
                url = value or (tokens[i + 1] if i + 1 < len(tokens) else "")
                if not url.lower().startswith("https://"):
                    add("insecure_index", "index URL %s in %s is not https" % (url or "(missing)", where), tok)
            i += 1

    check_option(_split_args(extra_args), "the pip arguments")
    for raw in requirements or []:
        line = str(raw).split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-"):
            check_option(_split_args(line), "the requirements")
            continue
        spec = line.split(";", 1)[0]
        tokens = spec.split()
        extra = [t for t in tokens if t.startswith("-")]
        spec = "".join(t for t in tokens if not t.startswith("-"))
        check_option([t for t in extra if not t.startswith("--hash")], "requirement %r" % line)
        m = _PIN_RE.match(spec)
        if not m:
            add("unpinned", "requirement %r is not pinned exactly: write name==X.Y.Z[+local]" % line, line)
            continue
        local = (m.group("local") or "").lower()
        if local and variant and _VARIANT_RE.match(local) and local != variant:
            add("label_mismatch", "requirement %r carries +%s but the variant is %s (index %s)"
                % (line, local, variant, index_url or "-"), line)
    return problems
