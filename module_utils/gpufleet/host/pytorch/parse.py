# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsing the inputs of the torch compatibility code: NVIDIA driver versions, compute capabilities, Python and
torch versions, and a variant's CUDA version and index URL; with the errors they raise (``CompatError`` is the
base of every torch compatibility error, ``torchcompat.NoCompatibleWheel`` included).
"""

import re

INDEX_BASE = "https://download.pytorch.org/whl"


class CompatError(Exception):
    """Base of the torch compatibility errors (InvalidInput here, torchcompat.NoCompatibleWheel)."""


class InvalidInput(CompatError, ValueError):
    """A driver, compute capability, Python or torch version that cannot be parsed."""


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
