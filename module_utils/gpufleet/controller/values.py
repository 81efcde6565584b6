# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The readers of untrusted JSON, written once for the controller: result files, fact caches, runner artifacts and
histories hold whatever a host or a person wrote, so every value is read through one of these and none raises.

    as_dict(v)   v if a dict, else {}          as_list(v)   v if a list, else []
    number(v)    a finite int/float, else None (bools and text are not numbers)
    number_text(v)  a number, also from numeric text ("0.45": inventory vars arrive as text), else None
    flag(v)      True/False from a bool or bool-like text ("yes", "False", "0"), else None
    text(v)      a value as text for a line or a cell ("" for None, "yes"/"no", 2 decimals at most)

Plain Python >= 3.8, no imports from the rest of gpufleet.
"""

import math

_INF = float("inf")


def as_dict(value):
    """``value`` if it is a dict, else an empty dict (null / wrong type tolerated)."""
    return value if isinstance(value, dict) else {}


def as_list(value):
    """``value`` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


def number(value):
    """A finite int/float, or None (bools, strings, NaN and null are not numbers here)."""
    t = type(value)
    if t is int:
        return value
    if t is float:
        return value if -_INF < value < _INF else None  # NaN compares false
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def number_text(value):
    """A number from a number or numeric text (inventory vars are often strings); None otherwise."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    return number(value)


def flag(value):
    """True/False from a bool or a bool-like text ("true", "False", "yes", "0"); None otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "yes", "1"):
            return True
        if low in ("false", "no", "0"):
            return False
    return None


def text(value):
    """Host-provided value as text ("" for None)."""
    t = type(value)  # the common cases first, by exact type: this runs for every table cell
    if t is str:
        return value
    if value is None:
        return ""
    if t is int:
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return ("%.2f" % value).rstrip("0").rstrip(".")
    return str(value)
