# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Error texts to codes: the first of a table's patterns that matches, and the line it matched in."""


def first_match(text, patterns, by_line=False):
    """(code, the line that matched) for the first row (code, compiled pattern, ...) of ``patterns`` whose pattern
    matches ``text`` (str, or bytes read as UTF-8); (None, None) when none does. ``by_line``: each pattern is tried
    on each line in turn, else on the whole text (a pattern may span lines; all of them are returned)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not text:
        return None, None
    chunks = text.splitlines() if by_line else [text]
    for row in patterns:
        for chunk in chunks:
            m = row[1].search(chunk)
            if m:
                return row[0], line_of(chunk, m)
    return None, None


def line_of(text, m):
    """The line(s) of ``text`` that the match ``m`` lies in, stripped, at most 500 characters."""
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start:end if end >= 0 else len(text)].strip()[:500]
