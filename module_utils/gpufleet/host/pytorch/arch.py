# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU architectures against the torch table: their names, the driver a GPU needs before any build runs it, and
which wheel rows carry kernels for a compute capability (``coverage``, ``first_covering``). Read by the solver
(``compat``), the doctor's rules and the report.

* Kernel coverage: as ``table``'s docstring says (cubins ``arches``, PTX ``ptx``; ``arches=None`` covers no GPU).
* ``GPU_DRIVER_FLOORS``: a driver older than the first CUDA release that knows a GPU architecture
  cannot run that GPU with any build; the solver refuses before looking at wheels.
"""

import re

from .table import DEFAULT_PREFER, RELEASES, wheel

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


def arch_name(cc):
    major, minor = cc
    for maj, mnr, name in _ARCH_NAMES:
        if major == maj and (mnr is None or minor == mnr):
            return name
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


def first_covering(ccs):
    """Earliest (series, variant) whose wheels carry kernels for every GPU (known arch lists only)."""
    for rel in RELEASES:
        for variant in DEFAULT_PREFER:
            w = wheel(rel["series"], variant)
            if w and w["arches"] is not None and all(coverage(w, c) for c in ccs):
                return rel["series"], variant
    return None
