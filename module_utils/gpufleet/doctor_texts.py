# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's torch / CUDA error texts (``TORCH_ERROR_PATTERNS``) and the cuInit codes it knows.

``doctor.view`` turns torch's texts into text codes with these patterns; the rules (``doctor_rules``) and
their matchers decide what a code means on this host. Nothing in this file reads the host.
"""

import re

REF = "shared/reference/cuda-failures-and-compat.md"
TE = "fixtures torch_errors/"

# CUresult values of cuInit (cuda.h). Anything else is reported as unknown.
CU_RESULTS = {
    0: "CUDA_SUCCESS",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

# torch / CUDA error texts -> text codes (first match wins). Each pattern names the fixtures it was
# written against. These are *text* codes: the rules below decide what they mean on this host.
TORCH_ERROR_PATTERNS = [
    ("error_802", re.compile(r"Error 802\b|error=802\b|\(802\)|system not yet initialized", re.I),
     TE + "error-802_*.txt"),
    ("error_804", re.compile(r"Error 804\b|error=804\b|forward compatibility was attempted on non supported HW",
                             re.I), TE + "error-804_*.txt"),
    ("driver_too_old", re.compile(r"NVIDIA driver on your system is too old", re.I),
     TE + "driver-too-old_found-*.txt"),
    ("no_nvidia_driver", re.compile(r"Found no NVIDIA driver on your system", re.I),
     TE + "found-no-nvidia-driver_*.txt"),
    ("devices_busy_or_unavailable", re.compile(r"(?:devices?|device\(s\)).{0,12}(?:is/are|are|is) busy or unavailable",
                                               re.I), TE + "*busy-or-unavailable_*.txt"),
    ("cuda_unknown_error", re.compile(r"CUDA unknown error|CUDA error: unknown error", re.I),
     TE + "cuda-unknown-error_*.txt"),
    ("no_kernel_image", re.compile(r"no kernel image is available|with CUDA capability sm_\d+ is not compatible "
                                   r"with the current PyTorch installation", re.I), TE + "no-kernel-image_*.txt"),
    ("libcudart_not_found", re.compile(r"libcudart\.so(?:\.[\d.]+)?: cannot open shared object file", re.I),
     TE + "libcudart-so-12-cannot-open_*.txt"),
    ("nvjitlink_symbol_mismatch", re.compile(r"undefined symbol: __nvJitLink\w*", re.I),
     TE + "nvjitlink-undefined-symbol-*.txt; " + REF + " section 2.3"),
    # ldd of a pip nvidia-* library resolving a CUDA library from a system toolkit directory
    ("cuda_library_shadowed", re.compile(r"(?:site|dist)-packages/[^\n]*nvidia/[^\n]*\n(?:[^\n]*\n)*?"
                                         r"\s*lib(?:nvJitLink|cu\w+|cudart|nvrtc)\.so[.\d]* => "
                                         r"(?![^\n]*(?:site|dist)-packages)[^\n]*cuda[^\n]*", re.I),
     TE + "nvjitlink-shadowed-by-LD_LIBRARY_PATH-*.txt"),
]

_FOUND_VERSION_RE = re.compile(r"too old \(found version (\d+)\)", re.I)


def found_version(text):
    """The NNNNN of "driver ... too old (found version NNNNN)", as an int, or None."""
    m = _FOUND_VERSION_RE.search(text or "")
    return int(m.group(1)) if m else None


def _text_hit(v, *codes):
    hits = {c: v["torch_text_codes"][c] for c in codes if c in v["torch_text_codes"]}
    return hits or None
