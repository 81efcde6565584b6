# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torch / CUDA compatibility table: CUDA variants and their driver floors, torch releases, and one wheel row
per (release, variant) with its arch list; plus the lookups over it. Data only: ``torchcompat`` decides with it,
``torcharch`` reads its arch lists, the doctor reads its CUDA variants.

One source of truth for "which torch wheels exist and what they need". Every row names its source:
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
* ``confidence``: V checked in a primary source, S secondary, U unverified.
"""

from ..system.tablerow import table_row

_S31 = "pytorch/pytorch RELEASE.md, Release Compatibility Matrix (https://github.com/pytorch/pytorch/blob/main/RELEASE.md)"
_S32 = ("CUDA Toolkit release notes, toolkit driver table (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/), "
        "and the CUDA Compatibility guide (https://docs.nvidia.com/deploy/cuda-compatibility/)")
_S33 = "the PyTorch wheel index https://download.pytorch.org/whl/<variant> (PEP 440 local labels)"
_MOI90 = "moi90/pytorch_compute_capabilities table.md (conda builds)"
_BUILD_28 = ("pytorch/pytorch .ci/manywheel/build_cuda.sh @00c7a380 (12.6/12.8/12.9 matrix of the 2.8 cycle: "
             "12.6 5.0;6.0;7.0;7.5;8.0;8.6;9.0, 12.8 7.0;7.5;8.0;8.6;9.0;10.0;12.0, 12.9 the same with 12.0+PTX)")
_BUILD_29 = "pytorch/pytorch .ci/manywheel/build_cuda.sh @799d09f2 (12.6/12.8/12.9/13.0 matrix of the 2.9 cycle)"

# Order among the builds a driver runs natively (see rank_variants): cu121 first (the house pin, torch
# 2.5.1+cu121), then the newest; cu129 (2.8's experimental build) and cu118 last.
DEFAULT_PREFER = ("cu121", "cu124", "cu128", "cu126", "cu130", "cu132", "cu129", "cu118")


# ---- CUDA variants: driver floors ------------------------------------------------------------
_CUDA_FIELDS = ("variant", "cuda", "toolkit", "strict_driver", "minor_floor", "confidence", "source", "notes")


def _cuda(**kw):
    return table_row(_CUDA_FIELDS, "CUDA", kw)


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
    row = table_row(_REL_FIELDS, "release", kw)
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
    row = table_row(_WHEEL_FIELDS, "wheel", kw)
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
