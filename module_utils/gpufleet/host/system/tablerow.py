# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The row builder of the reference tables (``specs``' GPUs, ``torchtable``'s variants, releases and wheels,
``ctk``'s CVEs): every row has all of its table's fields, None where the row does not say."""


def table_row(fields, what, kw):
    """A dict with each of ``fields``: its value in ``kw``, else None. ValueError on a key of ``kw`` that is not
    one of ``fields`` ("unknown <what> fields: [...]"), so a misspelt field fails at import."""
    unknown = set(kw) - set(fields)
    if unknown:
        raise ValueError("unknown %s fields: %s" % (what, sorted(unknown)))
    row = dict.fromkeys(fields)
    row.update(kw)
    return row
