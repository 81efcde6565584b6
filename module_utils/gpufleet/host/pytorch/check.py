# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checking torch installs against the table: ``check_label`` says whether an installed torch is the expected
variant's build, ``validate_request`` refuses unsafe install requests (unpinned requirements, extra indexes,
plain-http indexes, a local label that contradicts the variant).
"""

import re
import shlex

from .parse import InvalidInput, cuda_of, index_url, parse_torch_version
from .table import release

_VARIANT_RE = re.compile(r"^(?:cpu|cu\d{3}|rocm\d+(?:\.\d+)*|xpu)$")


# ---- checking what is installed -----------------------------------------------------------------
_UNSET = object()


def check_label(version_string, expected_variant, cuda_version=_UNSET):
    """Does installed ``torch.__version__`` match ``expected_variant``? Returns (ok, message).

    Pass ``cuda_version`` (``torch.version.cuda``: "12.1", or None for a CPU build) when known: PyPI's
    wheels carry no local label, so verify with it, not with the version string alone. An unlabeled
    version is a PyPI build, the default CUDA build on Linux x86_64 for 2.x.
    """
    try:
        parsed = parse_torch_version(version_string)
    except InvalidInput as exc:
        return False, str(exc)
    expected = (expected_variant or "").strip().lower()
    label = (parsed["local"] or "").lower()
    have_cuda = cuda_version is not _UNSET
    want_cuda = cuda_of(expected)
    fix = "reinstall torch==%s+%s from %s" % (parsed["release"], expected, index_url(expected))

    def _by_cuda(prefix):
        if cuda_version is None:
            found = "cpu"
        else:
            found = "cu" + str(cuda_version).replace(".", "") if re.match(r"^\d+\.\d$", str(cuda_version)) else None
        if found == expected:
            return True, "%s: torch.version.cuda=%s matches %s" % (prefix, cuda_version, expected)
        return False, "%s: torch.version.cuda=%s is not %s (%s): %s" % (
            prefix, cuda_version, expected, want_cuda or "no CUDA", fix)

    if label:
        if _VARIANT_RE.match(label):
            if label != expected:
                return False, "torch %s is the %s build, not %s: %s" % (version_string, label, expected, fix)
            if have_cuda:
                return _by_cuda("torch %s is labelled %s" % (version_string, label))
            return True, "torch %s is the %s build" % (version_string, expected)
        if have_cuda:
            return _by_cuda("torch %s has the local label +%s (a source or vendor build)" % (version_string, label))
        return False, ("torch %s has the local label +%s, not a PyTorch index variant (a source or vendor build): "
                       "check torch.version.cuda" % (version_string, label))
    if have_cuda:
        return _by_cuda("torch %s has no local label (PyPI build)" % version_string)
    rel = release(parsed["series"])
    default = rel["pypi_default"] if rel else None
    if expected == "cpu":
        return False, ("torch %s has no local label: PyPI's build on Linux x86_64 is a CUDA build (%s), not cpu: %s"
                       % (version_string, default or "CUDA version not in the table", fix))
    if default is None:
        return False, ("torch %s has no local label: a PyPI build whose CUDA version is not in the table for torch %s; "
                       "check torch.version.cuda == %r" % (version_string, parsed["series"], want_cuda))
    if default == expected:
        return True, ("torch %s has no local label: PyPI's default for torch %s on Linux x86_64 is %s; confirm with "
                      "torch.version.cuda == %r" % (version_string, parsed["series"], default, want_cuda))
    return False, ("torch %s has no local label: PyPI's default for torch %s on Linux x86_64 is %s, not %s: %s"
                   % (version_string, parsed["series"], default, expected, fix))


# ---- checking an install request ----------------------------------------------------------------
_PIN_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?:\[[A-Za-z0-9._,-]+\])?"
    r"==(?P<version>\d+(?:\.\d+)+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)"
    r"(?:\+(?P<local>[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*))?$")


def _split_args(args):
    if args is None:
        return []
    if isinstance(args, str):
        return shlex.split(args)
    out = []
    for a in args:
        out.extend(shlex.split(str(a)))
    return out


def _variant_of_index(url):
    path = (url or "").rstrip("/").rsplit("/", 1)[-1].lower()
    return path if _VARIANT_RE.match(path) else None


def validate_request(requirements, index_url=None, extra_args=None, variant=None):
    """Problems with a torch install request, as [{"code", "message", "item"}]; empty when it is safe.

    Refuses: a requirement that is not an exact ``name==X.Y.Z[+local]`` pin, ``--extra-index-url``
    anywhere (dependency confusion: the Dec 2022 torchtriton compromise, pytorch/pytorch PR #91539
    renamed the package), ``--trusted-host``, an index URL that is not https, and a local label that contradicts
    the variant (from ``variant`` or the index URL's last path segment).
    """
    problems = []

    def add(code, message, item):
        problems.append({"code": code, "message": message, "item": item})

    variant = (variant or _variant_of_index(index_url) or "").lower() or None
    if index_url is not None and not str(index_url).lower().startswith("https://"):
        add("insecure_index", "index URL %s is not https: packages could be swapped in transit; use "
            "https://download.pytorch.org/whl/<variant> or an https mirror" % index_url, index_url)

    def check_option(tokens, where):
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            name, _unused, value = tok.partition("=")
            if name in ("--extra-index-url",):
                add("extra_index_url", "--extra-index-url in %s: pip picks the highest version across all indexes, "
                    "which is how the Dec 2022 torchtriton dependency-confusion compromise happened; use only "
                    "--index-url" % where, tok)
            elif name in ("--trusted-host",):
                add("trusted_host", "--trusted-host in %s turns off TLS verification for that host" % where, tok)
            elif name in ("-i", "--index-url", "--index"):
                url = value or (tokens[i + 1] if i + 1 < len(tokens) else "")
                if not url.lower().startswith("https://"):
                    add("insecure_index", "index URL %s in %s is not https" % (url or "(missing)", where), tok)
            i += 1

    check_option(_split_args(extra_args), "the pip arguments")
    for raw in requirements or []:
        line = str(raw).split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-"):
            check_option(_split_args(line), "the requirements")
            continue
        spec = line.split(";", 1)[0]
        tokens = spec.split()
        extra = [t for t in tokens if t.startswith("-")]
        spec = "".join(t for t in tokens if not t.startswith("-"))
        check_option([t for t in extra if not t.startswith("--hash")], "requirement %r" % line)
        m = _PIN_RE.match(spec)
        if not m:
            add("unpinned", "requirement %r is not pinned exactly: write name==X.Y.Z[+local]" % line, line)
            continue
        local = (m.group("local") or "").lower()
        if local and variant and _VARIANT_RE.match(local) and local != variant:
            add("label_mismatch", "requirement %r carries +%s but the variant is %s (index %s)"
                % (line, local, variant, index_url or "-"), line)
    return problems
