"""Published security advisories on torch, and which of them a given torch version is open to.

A small table (one row per advisory, with its source) and one pure function, ``advisories``, for the
report and the audit: ``advisories("2.5.1+cu121")`` lists what that install is exposed to. Plain
Python >= 3.8, stdlib only.

Versions are compared by PEP 440 release order, ignoring the local label (``+cu121``, ``+git...``):
a pre-release, dev or source build (``2.7.0a0+git...``, ``2.8.0.dev20250101``) counts as earlier
than its final release, so ``2.10.0a0`` is still reported as open to an advisory fixed in 2.10.0
(it may or may not carry the fix; only its version is known here).
"""

import re

_FIELDS = ("id", "aliases", "summary", "affected", "fixed", "source")

# ``fixed``: the first release with the fix; every release before it is affected (the ``affected``
# text repeats the advisory's own range).
ADVISORIES = tuple(dict(zip(_FIELDS, row)) for row in (
    ("CVE-2025-32434", ("GHSA-53q9-r3pm-6pq6",),
     "torch.load(..., weights_only=True) can still run code from a crafted file (remote code execution)",
     "<= 2.5.1", "2.6.0",
     "https://github.com/pytorch/pytorch/security/advisories/GHSA-53q9-r3pm-6pq6; "
     "https://nvd.nist.gov/vuln/detail/CVE-2025-32434"),
    ("CVE-2026-24747", ("GHSA-63cw-57p8-fm3p",),
     "the weights_only unpickler of torch.load lets a crafted checkpoint corrupt memory and run code",
     "< 2.10.0", "2.10.0",
     "pytorch/pytorch advisory published 2026-01-26 (GitHub Advisory Database "
     "https://github.com/advisories/GHSA-63cw-57p8-fm3p: affected < 2.10.0, patched 2.10.0); "
     "https://nvd.nist.gov/vuln/detail/CVE-2026-24747"),
))

_VERSION = re.compile(
    r"^\s*v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|alpha|b|beta|c|rc|pre|preview)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?(?:post|rev|r)[-_.]?(?P<post>\d*))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?"
    r"(?:\+[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*)?\s*$",
    re.IGNORECASE)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_INF = float("inf")


def version_key(version):
    """PEP 440 sort key of a torch version string ("2.5.1+cu121", "2.7.0a0+git1a2b3c", "2.8.0.dev20250101");
    None when it is not one."""
    if not isinstance(version, str):
        return None
    m = _VERSION.match(version)
    if not m:
        return None
    release = tuple(int(p) for p in m.group("release").split("."))
    release += (0,) * max(0, 4 - len(release))
    pre, post, dev = m.group("pre"), m.group("post"), m.group("dev")
    if pre is not None:
        phase = (_PRE_RANK[pre.lower()], int(m.group("pre_n") or 0))
    elif dev is not None and post is None:
        phase = (-1, 0)            # X.Y.Z.devN sorts before X.Y.Za0
    else:
        phase = (3, 0)             # the final release
    return (release, phase, int(post or 0) if post is not None else -1, int(dev or 0) if dev is not None else _INF)


def advisories(torch_version):
    """The advisories ``torch_version`` is open to, oldest first, each {"id", "summary", "fixed", "source"}.

    ``torch_version`` is ``torch.__version__`` as a host reports it; None or a string that is not a
    version gives [] (nothing is known, so nothing is claimed).
    """
    key = version_key(torch_version)
    if key is None:
        return []
    return [{"id": a["id"], "summary": "%s (%s; affects %s)" % (a["summary"], ", ".join(a["aliases"]), a["affected"]),
             "fixed": a["fixed"], "source": a["source"]}
            for a in ADVISORIES if key < version_key(a["fixed"])]
