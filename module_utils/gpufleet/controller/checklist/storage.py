# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The checklist's storage and network item (``box``, issue 51): what the renter pays for beside the GPU, as the
pre-check measured it (``gpu_check.box``) against the provider's listing. The item reads the same findings the
judgement makes (judgement/box.py), so the item and the verdict never disagree:

- fail: measured far below the listing (the finding calls for "return to provider");
- warn: below what a renter's use needs, a slow ``import torch``, little free space, DNS failing or slow, no egress;
- unknown: the evidence could not be read (the problems named), or nothing was measured;
- ok: each figure measured, with the listing where there is one.

A host whose result has no box evidence (no pre-check, or one before issue 51) has no such item: ``box_item`` gives
None and the checklist stays as it was. Plain Python >= 3.8, stdlib only.
"""

from ..judgement import box as _box
from ..judgement import judge as _judge
from .item import OPTIONAL_ITEMS, _item, _unknown

KEY, LABEL = OPTIONAL_ITEMS[0]


def _figures(box):
    """The measured figures in a few words: "random 32 KiB read 1,850 MB/s (listing 2,500), download 95 MB/s"."""
    parts = []
    disk = box.get("disk") or {}
    listing = box.get("listing") or {}
    read, how = _box.disk_read_used(disk)
    if read is not None:
        claim = listing.get("disk_read_mb_s")
        parts.append("disk reads %s MB/s %s%s" % (_box.mb_s(read), how, " (listing %s)" % _box.mb_s(claim)
                                                  if claim is not None else ""))
    if disk.get("write_mb_s") is not None:
        parts.append("writes %s MB/s" % _box.mb_s(disk["write_mb_s"]))
    for name, key in (("download", "net_down_mbit"), ("upload", "net_up_mbit")):
        t = box.get(name) or {}
        if t.get("mb_s") is not None:
            claim = listing.get(key)
            parts.append("%s %s MB/s%s" % (name, _box.mb_s(t["mb_s"]), " (listing %s Mbit/s)" % _box.mbit(claim)
                                           if claim is not None else ""))
    return ", ".join(parts)


def box_item(result, box=None):
    """The item for one result, or None when it has no box evidence. ``box``: the row's reading (judgement/box.py
    ``read``) when the caller has it."""
    box = _box.read(result) if box is None else box
    if box is None:
        return None
    found = _box.findings(box)
    codes = [f["code"] for f in found]
    returns = [f for f in found if f["code"] in _judge.BOX_RETURN_CODES]
    if returns:
        return _item("fail", "; ".join(f["text"] for f in returns) + ": return to provider", codes=codes)
    unreadable = [f for f in found if f["code"] == _judge.BOX_CODES["unreadable"]]
    notes = [f for f in found if f not in unreadable]
    figures = _figures(box)
    if notes:  # what could not be read is said too: it is never read as good
        return _item("warn", "; ".join(f["text"] for f in notes + unreadable), codes=codes)
    if unreadable:
        reason = unreadable[0]["text"]
        return dict(_unknown(reason), codes=codes)
    if not figures:
        return dict(_unknown("no storage or network figure measured"), codes=codes)
    return _item("ok", figures, codes=codes)
