# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's torch / CUDA error texts (``TORCH_ERROR_PATTERNS``) and the cuInit codes it knows.

``doctor.view`` turns torch's texts into text codes with these patterns; the rules (``doctor_rules``) and
their matchers decide what a code means on this host. Nothing in this file reads the host.
"""

import re

from ..system.textmatch import first_match

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

# torch / CUDA error texts -> text codes (first match wins): the code, its pattern (matched ignoring case) and the
# fixtures under torch_errors/ it was written against. These are *text* codes: the rules below decide what they
# mean on this host.
_PATTERN_TEXTS = [
    ("error_802", r"Error 802\b|error=802\b|\(802\)|system not yet initialized", "error-802_*.txt"),
    ("error_804", r"Error 804\b|error=804\b|forward compatibility was attempted on non supported HW",
     "error-804_*.txt"),
    ("driver_too_old", r"NVIDIA driver on your system is too old", "driver-too-old_found-*.txt"),
    ("no_nvidia_driver", r"Found no NVIDIA driver on your system", "found-no-nvidia-driver_*.txt"),
    ("devices_busy_or_unavailable", r"(?:devices?|device\(s\)).{0,12}(?:is/are|are|is) busy or unavailable",
     "*busy-or-unavailable_*.txt"),
    ("cuda_unknown_error", r"CUDA unknown error|CUDA error: unknown error", "cuda-unknown-error_*.txt"),
    ("no_kernel_image", r"no kernel image is available|with CUDA capability sm_\d+ is not compatible "
                        r"with the current PyTorch installation", "no-kernel-image_*.txt"),
    ("libcudart_not_found", r"libcudart\.so(?:\.[\d.]+)?: cannot open shared object file",
     "libcudart-so-12-cannot-open_*.txt"),
    ("nvjitlink_symbol_mismatch", r"undefined symbol: __nvJitLink\w*",
     "nvjitlink-undefined-symbol-*.txt; " + REF + " section 2.3"),
    # ldd of a pip nvidia-* library resolving a CUDA library from a system toolkit directory
    ("cuda_library_shadowed", r"(?:site|dist)-packages/[^\n]*nvidia/[^\n]*\n(?:[^\n]*\n)*?"
                              r"\s*lib(?:nvJitLink|cu\w+|cudart|nvrtc)\.so[.\d]* => "
                              r"(?![^\n]*(?:site|dist)-packages)[^\n]*cuda[^\n]*",
     "nvjitlink-shadowed-by-LD_LIBRARY_PATH-*.txt"),
]
TORCH_ERROR_PATTERNS = [(code, re.compile(regex, re.I), TE + fixtures) for code, regex, fixtures in _PATTERN_TEXTS]

_FOUND_VERSION_RE = re.compile(r"too old \(found version (\d+)\)", re.I)


def explain_torch_error(text):
    """(code, the line that matched) for a torch / CUDA error text; (None, None) when nothing is recognised."""
    return first_match(text, TORCH_ERROR_PATTERNS)


def found_version(text):
    """The NNNNN of "driver ... too old (found version NNNNN)", as an int, or None."""
    m = _FOUND_VERSION_RE.search(text or "")
    return int(m.group(1)) if m else None


def _text_hit(v, *codes):
    hits = {c: v["torch_text_codes"][c] for c in codes if c in v["torch_text_codes"]}
    return hits or None
