# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The security audit: checklist item 10 (installed versions against fixed floors, public Jupyter, password SSH)
and item 11 (torch's published advisories). checklist.py assembles these with the other items.

``security(readiness, container, os_release)`` is item 10: installed versions against fixed floors with
their sources (shared/reference/security-reliability.md), Jupyter listening publicly without TLS,
password SSH login; each finding names the gpufleet role and variable that fixes it. Package versions
are compared in dpkg's order (``deb_compare``); where the distro backports fixes (Debian 12/13, Ubuntu
22.04/24.04) the floor is the distro's fixed package version for the host's release, and upstream
version ranges apply only where no distro row (or the package's changelog) decides.

``torch_advisories_item(result)`` is item 11: the host's torch version (``torch_version_of``: the doctor's probe of
the target Python, else the pre-check's judged environment, else the gpufleet venv's packages) against the sourced
advisory table in ``torch_advisories``: warn (never fail) with each open advisory and its fixed release.

The checklist's other items and its assembly live in checklist.py, checklist_gpu.py, checklist_host.py and
checkitem.py (split out of this module, issue 38); their users import them from there.
Plain Python >= 3.8, stdlib only.
"""

import re

from ...host.cuda import ctk as _ctk
from ...host.pytorch import compat as torchcompat
from . import torch_advisories as _torch_advisories
from .item import _d, _doctor_torch, _item, _l

REFERENCE = "shared/reference/security-reliability.md"

# --- security floors (each with its source) -------------------------------------------------------
# Package versions are compared in dpkg's order (deb_compare). The toolkit comes from NVIDIA's own
# repository, not a distro that backports, so its floor is one package version for every release.
CTK_FLOOR = _ctk.FLOOR  # 1.19.1: the host side's floor (host/cuda/ctk.py, where each CVE has its source)
CTK_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                "libnvidia-container1")
CTK_SOURCE = ("NVIDIA bulletin 5850 (2026-06-30): CVE-2026-24260 fixed in 1.19.1 only; CVE-2025-23266 "
              "(NVIDIAScape) and CVE-2025-23267 in 1.17.8 (" + REFERENCE + " 4.1; shared/reference/currency-2026.md)")
# CVE-2024-6387 (regreSSHion), glibc Linux sshd. Where the distro backports fixes, the floor is the distro's
# fixed *package* version (dpkg order, ``deb_compare``): {(os-release ID, VERSION_ID): row}. A package below
# the row's floor whose upstream part is outside SSH_UPSTREAM_AFFECTED is still not affected ("vulnerable
# code introduced later", as the Debian tracker says of bullseye's 8.4p1).
SSH_CVE = "CVE-2024-6387"
_DEBIAN_TRACKER = "https://security-tracker.debian.org/tracker/CVE-2024-6387"
_USN = "USN-6859-1 (https://ubuntu.com/security/notices/USN-6859-1; https://ubuntu.com/security/CVE-2024-6387)"
SSH_DISTRO_FIXED = {
    ("debian", "12"): {"name": "Debian 12 (bookworm)", "fixed": "1:9.2p1-2+deb12u3", "ref": "DSA-5724-1",
                       "source": "DSA-5724-1 (https://security-tracker.debian.org/tracker/DSA-5724-1; "
                                 "shared/reference/ecosystem.md, SSH audits)"},
    ("debian", "13"): {"name": "Debian 13 (trixie)", "fixed": "1:9.7p1-7", "ref": "Debian security tracker",
                       "source": "Debian security tracker %s: fixed in unstable 1:9.7p1-7 before trixie's "
                                 "release (trixie ships 1:10.0p1)" % _DEBIAN_TRACKER},
    ("ubuntu", "22.04"): {"name": "Ubuntu 22.04 (jammy)", "fixed": "1:8.9p1-3ubuntu0.10", "ref": "USN-6859-1",
                          "source": _USN},
    ("ubuntu", "24.04"): {"name": "Ubuntu 24.04 (noble)", "fixed": "1:9.6p1-3ubuntu13.3", "ref": "USN-6859-1",
                          "source": _USN},
}
# Upstream (portable OpenSSH) ranges, used only where no distro row decides: [low, high), low None = any.
SSH_UPSTREAM_AFFECTED = ((None, "4.4p1"), ("8.5p1", "9.8p1"))
SSH_SOURCE = (REFERENCE + " 1.4: regreSSHion CVE-2024-6387 affects 8.5p1 up to (not including) 9.8p1; "
              "Qualys' advisory (2024-07-01): also < 4.4p1 unless patched for CVE-2006-5051 and CVE-2008-4109")
SSH_TEXT_RANGES = "< 4.4p1 or 8.5p1 <= v < 9.8p1"
JUPYTER_ADVISORIES = (  # (fixed in, advisory) from REFERENCE 2.2
    ("1.0.6", "GHSA-grfj-wjv9-4f9v / CVE-2020-26232 open redirect"),
    ("1.15.4", "GHSA-p737-p57g-4cpr / CVE-2022-24757 tokens in log files"),
    ("1.17.1", "GHSA-q874-g24w-4q9g / CVE-2022-29241 hidden files reachable"),
    ("2.7.2", "GHSA-r726-vmfq-j9j3 / CVE-2023-39968 open redirect"),
    ("2.7.2", "GHSA-64x5-55rw-9974 / CVE-2023-40170 XSSI"),
    ("2.11.2", "GHSA-h56g-gq9v-vc8r / CVE-2023-49080 tracebacks in JSON errors"),
    ("2.14.1", "GHSA-hrw6-wg82-cm62 / CVE-2024-35178 (Windows only)"),
    ("2.18.0", "CVE-2026-40110 allow_origin_pat prefix match (CORS bypass)"),
    ("2.18.0", "GHSA-5mrq-x3x5-8v8f / CVE-2026-40934 cookie secret never rotated"),
    ("2.20.0", "GHSA-fcw5-x6j4-ccmp stored XSS via nbconvert handler"),
)
JUPYTER_UNRELEASED = "GHSA-c3mw-737p-c7g2 (token leak via Referer) is fixed in no release yet"
JUPYTER_PROXY_FIXED = (("3.2.3", "4.0.0"), ("4.1.1", None))  # CVE-2024-28179: fixed 3.2.3 and 4.1.1

FIX = {
    "ctk": "role nvidia_container_toolkit: nvidia_container_toolkit_version >= %s-1 (the default is 1.20.0-1) "
           "with nvidia_container_toolkit_enforce_floor: true" % _ctk.FLOOR,
    "openssh": "not upgraded by gpufleet: apt-get install --only-upgrade openssh-server from the distro's "
               "security archive (interim: LoginGraceTime 0 through role ssh_hardening)",
    "jupyter_server": "role jupyter: its pinned jupyter_server (>= 2.20.0) replaces the image's",
    "jupyter_proxy": "remove jupyter-server-proxy or upgrade it to >= 4.1.1 (role jupyter does not install it)",
    "extra_index": "role torch installs from one index or the wheelhouse (torch_pip_index_url / "
                   "torch_pip_wheelhouse) with PIP_CONFIG_FILE=/dev/null; remove extra-index-url from %s",
    "jupyter_public": "role jupyter: binds to loopback (reach it through an SSH tunnel) or serves TLS",
    "password_ssh": "role ssh_hardening: PasswordAuthentication no, KbdInteractiveAuthentication no "
                    "(checked with sshd -T)",
}


# ----------------------------------------------------------------------------- versions
def version_key(text):
    """"9.2p1" -> (9, 2, 0, 1); "1.17.8-1" -> (1, 17, 8, 0, 1); "2.5.1+cu121" -> (2, 5, 1). None if unreadable."""
    if not isinstance(text, str):
        return None
    text = text.split(":", 1)[-1] if re.match(r"^\d+:", text) else text
    m = re.match(r"^(\d+(?:\.\d+)*)(?:p(\d+))?(?:[-~](\d+))?", text.strip())
    if not m:
        return None
    nums = [int(x) for x in m.group(1).split(".")]
    while len(nums) < 3:
        nums.append(0)
    return tuple(nums) + (int(m.group(2) or 0), int(m.group(3) or 0))


def deb_compare(a, b):
    """``dpkg --compare-versions`` as -1, 0 or 1: epoch:upstream-revision, "~" before anything (even the end),
    so "1:9.2p1-2+deb12u10" > "1:9.2p1-2+deb12u3" and "1:8.9p1-3ubuntu0.10" > "1:8.9p1-3ubuntu0.7".
    None when either is not a Debian version string. The one comparison for package versions here
    (gpufleet.host.cuda.ctk's implementation of dpkg's algorithm)."""
    try:
        return _ctk.compare_versions(a, b)
    except _ctk.VersionError:
        return None


def ssh_upstream(text):
    """The portable OpenSSH version in ``ssh -V`` text or a package version: "1:9.2p1-2+deb12u10" -> "9.2p1".
    An OpenBSD-style "9.2" (``sshd -V`` on Debian) reads as its first portable release, "9.2p1". None if none."""
    m = re.match(r"^(?:\d+:)?(\d+\.\d+(?:\.\d+)?)(p\d+)?", text.strip()) if isinstance(text, str) else None
    return m.group(1) + (m.group(2) or "p1") if m else None


# ----------------------------------------------------------------------------- item 10: security
def _finding(code, severity, status, message, fix, source=None, evidence=None):
    out = {"code": code, "severity": severity, "status": status, "message": message, "fix": fix, "source": source}
    if evidence:
        out["evidence"] = evidence  # which evidence decided: distro table, package changelog, upstream version
    return out


def _ssh_release(os_release, package):
    """((ID, VERSION_ID), where from): os-release first; without it a Debian stable-update suffix
    ("+deb12u10") or an Ubuntu one ("ubuntu0.22.04.1") of the package names the release."""
    os_ = _d(os_release)
    if os_.get("id"):
        return (str(os_["id"]).lower(), str(os_.get("version_id") or "")), "os-release"
    m = re.search(r"\+deb(\d+)u\d+", package or "")
    if m:
        return ("debian", m.group(1)), "package suffix +deb%su" % m.group(1)
    m = re.search(r"ubuntu0\.(\d\d\.\d\d)\b", package or "")
    if m:
        return ("ubuntu", m.group(1)), "package suffix ubuntu0.%s" % m.group(1)
    return None, None


def _in_upstream_range(upstream):
    """True/False for a portable version against SSH_UPSTREAM_AFFECTED; None if unreadable."""
    hits = []
    for low, high in SSH_UPSTREAM_AFFECTED:
        above = 0 if low is None else deb_compare(upstream, low)
        below = deb_compare(upstream, high)
        if above is None or below is None:
            return None
        hits.append(above >= 0 and below < 0)
    return any(hits)


def regresshion(sshd, os_release=None):
    """The CVE-2024-6387 verdict for ``readiness["sshd"]`` on a host with this os-release.

    Returns {"verdict": fixed | not_affected | affected | unverified | unknown, "evidence": distro table |
    package changelog | upstream version | None, "text": one line, "source": where the floor comes from}.
    Order: the distro row for the host's release (SSH_DISTRO_FIXED, package version in dpkg order); else the
    package's changelog.Debian.gz naming the CVE (``sshd["changelog"]["cves"]``, when the facts carry it);
    else the upstream ranges, where a distro package in range is "unverified" (its changelog not naming
    the CVE does not prove it vulnerable: Debian's own fix, deb12u3, does not name it) and a build
    without a package is "affected".
    """
    sshd = _d(sshd)
    ver, pkg = sshd.get("version"), sshd.get("package_version")
    pkg = pkg if isinstance(pkg, str) and deb_compare(pkg, pkg) == 0 else None
    upstream = ssh_upstream(ver) or ssh_upstream(pkg)
    what = "OpenSSH %s" % (ver or upstream or "?") + (" (package %s)" % pkg if pkg else "")
    release, release_from = _ssh_release(os_release, pkg)
    row = SSH_DISTRO_FIXED.get(release) if release else None
    if row and pkg:
        where = "%s, %s" % (row["name"], row["ref"])
        if deb_compare(pkg, row["fixed"]) >= 0:
            return {"verdict": "fixed", "evidence": "distro table", "source": row["source"],
                    "text": "%s has the %s fix: >= %s (%s; release from %s)" % (
                        what, SSH_CVE, row["fixed"], where, release_from)}
        if _in_upstream_range(ssh_upstream(pkg)) is False:
            return {"verdict": "not_affected", "evidence": "upstream version", "source": SSH_SOURCE,
                    "text": "%s is below %s's fixed %s but its upstream %s is outside the %s ranges (%s)" % (
                        what, row["name"], row["fixed"], ssh_upstream(pkg), SSH_CVE, SSH_TEXT_RANGES)}
        return {"verdict": "affected", "evidence": "distro table", "source": row["source"],
                "text": "%s < %s, the first fixed package for %s (%s)" % (what, row["fixed"], SSH_CVE, where)}
    changelog = _d(sshd.get("changelog"))
    cves, cl_path, cl_version = changelog.get("cves"), changelog.get("path"), changelog.get("version")
    note = "no changelog.Debian.gz fact"
    if isinstance(cves, list):
        same = not (cl_version and pkg) or deb_compare(cl_version, pkg) == 0
        if SSH_CVE in cves and same:
            return {"verdict": "fixed", "evidence": "package changelog", "source": "%s (%s)" % (cl_path, SSH_CVE),
                    "text": "%s has the %s fix: its changelog %s names it (no distro row for %s)" % (
                        what, SSH_CVE, cl_path, "%s %s" % release if release else "an unknown release")}
        note = ("changelog %s is of %s, not of the installed package" % (cl_path, cl_version) if not same else
                "changelog %s does not name %s" % (cl_path, SSH_CVE))
    elif changelog.get("reason"):
        note = "changelog not read: %s" % changelog["reason"]
    in_range = _in_upstream_range(upstream) if upstream else None
    if in_range is None:
        return {"verdict": "unknown", "evidence": None, "source": SSH_SOURCE,
                "text": "OpenSSH version not known (%s)" % (ver or "not reported")}
    if not in_range:
        return {"verdict": "not_affected", "evidence": "upstream version", "source": SSH_SOURCE,
                "text": "%s outside the %s ranges (%s)" % (what, SSH_CVE, SSH_TEXT_RANGES)}
    if pkg:
        return {"verdict": "unverified", "evidence": "upstream version", "source": SSH_SOURCE,
                "text": "%s is in the %s range (%s); the package may carry a backported fix: no fixed-version "
                        "row for %s and %s; check the distro's advisory" % (
                            what, SSH_CVE, SSH_TEXT_RANGES,
                            "%s %s" % release if release else "an unknown release", note)}
    return {"verdict": "affected", "evidence": "upstream version", "source": SSH_SOURCE,
            "text": "%s is in the %s range (%s), not from a distro package" % (what, SSH_CVE, SSH_TEXT_RANGES)}


def security(readiness, container=None, os_release=None):
    """Security findings (affected, unverified or unknown) and the checks that passed.

    ``os_release`` is the host's ``host.os`` fact ({id, version_id, ...}): it picks the distro row of a floor."""
    findings, passed, unknown = [], [], []
    ctk = _d(readiness.get("container_toolkit"))
    if readiness.get("dpkg_readable") is False:
        unknown.append("package versions (dpkg-query not available)")
    elif not ctk:
        passed.append("NVIDIA container toolkit not installed%s" % (" (inside a container)" if container else ""))
    else:
        order = {p: deb_compare(v, CTK_FLOOR) for p, v in ctk.items()}
        low = {p: ctk[p] for p, c in order.items() if c is not None and c < 0}
        odd = sorted("%s %s" % (p, ctk[p]) for p, c in order.items() if c is None)
        if odd:
            unknown.append("container toolkit version not a Debian version: %s" % ", ".join(odd))
        if low:
            findings.append(_finding("ctk_below_floor", "critical", "affected", "NVIDIA container toolkit %s < %s" % (
                ", ".join("%s %s" % kv for kv in sorted(low.items())), CTK_FLOOR), FIX["ctk"], CTK_SOURCE))
        elif not odd:
            passed.append("NVIDIA container toolkit >= %s" % CTK_FLOOR)
        if len(set(ctk.values())) > 1:
            findings.append(_finding("ctk_versions_differ", "warning", "affected",
                                     "container toolkit packages at different versions: %s" % ", ".join(
                                         "%s %s" % kv for kv in sorted(ctk.items())), FIX["ctk"],
                                     REFERENCE + " 4.2 (all four packages at one version)"))
    sshd = _d(readiness.get("sshd"))
    ssh = regresshion(sshd, os_release)
    if ssh["verdict"] in ("fixed", "not_affected"):
        passed.append("%s [evidence: %s]" % (ssh["text"], ssh["evidence"]))
    elif ssh["verdict"] == "unknown":
        unknown.append("OpenSSH version")
    else:
        findings.append(_finding("openssh_regresshion", "critical" if ssh["verdict"] == "affected" else "warning",
                                 ssh["verdict"], "%s [evidence: %s]" % (ssh["text"], ssh["evidence"]),
                                 FIX["openssh"], ssh["source"], evidence=ssh["evidence"]))
    pkgs = _d(_d(readiness.get("venv")).get("packages"))
    js = pkgs.get("jupyter-server")
    if js:
        open_ = [adv for fixed, adv in JUPYTER_ADVISORIES if (version_key(js) or (0,)) < version_key(fixed)]
        if open_:
            findings.append(_finding("jupyter_server_advisories", "critical" if len(open_) > 2 else "warning",
                                     "affected", "jupyter_server %s: %d published advisories: %s" % (
                                         js, len(open_), "; ".join(open_)), FIX["jupyter_server"],
                                     REFERENCE + " 2.2"))
        else:
            passed.append("jupyter_server %s (%s)" % (js, JUPYTER_UNRELEASED))
    proxy = pkgs.get("jupyter-server-proxy")
    if proxy and version_key(proxy):
        pk = version_key(proxy)
        fixed = any(version_key(lo) <= pk and (hi is None or pk < version_key(hi)) for lo, hi in JUPYTER_PROXY_FIXED)
        if not fixed:
            findings.append(_finding("jupyter_server_proxy", "critical", "affected",
                                     "jupyter-server-proxy %s: CVE-2024-28179 (websocket proxy without auth)" % proxy,
                                     FIX["jupyter_proxy"], REFERENCE + " 2.2"))
    pip = _d(readiness.get("pip"))
    extra = [(f.get("path"), u) for f in _l(pip.get("files")) for u in _l(_d(f).get("extra_index_url"))]
    if _d(pip.get("env")).get("PIP_EXTRA_INDEX_URL"):
        extra.append(("PIP_EXTRA_INDEX_URL", pip["env"]["PIP_EXTRA_INDEX_URL"]))
    if extra and "torch" in pkgs:
        findings.append(_finding(
            "torch_extra_index", "warning", "unverified",
            "pip on this host adds an extra index (%s): torch %s and its dependencies may have come from either "
            "index (dependency confusion, torchtriton Dec 2022)" % (
                "; ".join("%s: %s" % e for e in extra), pkgs["torch"]),
            FIX["extra_index"] % ", ".join(sorted({e[0] for e in extra})), REFERENCE + " 5.1-5.2"))
    elif extra:
        passed.append("extra pip index configured, but no torch in the gpufleet venv")
    elif pip:
        passed.append("no extra pip index")
    listeners = _d(readiness.get("listeners"))
    for s in _l(listeners.get("sockets")):
        if not _d(s).get("jupyter"):
            continue
        where = "%s:%s" % (s.get("address"), s.get("port"))
        if s.get("tls") == "plain":
            findings.append(_finding("jupyter_public_plain", "critical", "affected",
                                     "Jupyter listens publicly on %s without TLS" % where, FIX["jupyter_public"],
                                     REFERENCE + " 2.1 (binding, TLS)"))
        elif s.get("tls") is None:
            findings.append(_finding("jupyter_public_tls_unknown", "warning", "unknown",
                                     "Jupyter listens publicly on %s; TLS not checked" % where,
                                     FIX["jupyter_public"], REFERENCE + " 2.1"))
    if not listeners.get("readable"):
        unknown.append("listening sockets")
    config = _d(sshd.get("config"))
    if config:
        pw = config.get("passwordauthentication")
        kbd = config.get("kbdinteractiveauthentication")
        if pw == "yes" or kbd == "yes":
            findings.append(_finding("password_ssh", "warning", "affected",
                                     "sshd -T: passwordauthentication %s, kbdinteractiveauthentication %s" % (pw, kbd),
                                     FIX["password_ssh"], REFERENCE + " 1.5 and 1.8"))
        else:
            passed.append("SSH password login off (sshd -T)")
    else:
        unknown.append("sshd effective config (%s)" % (sshd.get("reason") or "not read"))
    return {"findings": findings, "passed": passed, "unknown": unknown}


def security_item(audit):
    sev = {f["severity"] for f in audit["findings"]}
    affected = [f for f in audit["findings"] if f["status"] == "affected"]
    if "critical" in sev and affected:
        status = "fail"
    elif audit["findings"]:
        status = "warn"
    elif audit["unknown"] and not audit["passed"]:
        status = "unknown"
    else:
        status = "ok"
    parts = [f["message"] for f in audit["findings"]] or ["no finding"]
    if audit["unknown"]:
        parts.append("not checked: %s" % ", ".join(audit["unknown"]))
    return _item(status, "; ".join(parts), "nothing could be checked" if status == "unknown" else None,
                 findings=audit["findings"], passed=audit["passed"])


# ----------------------------------------------------------------------------- item 11: torch advisories
# Where a host result carries its torch version, best first: what the doctor imported in the target Python, the
# environment the pre-check judged (scripts/find-python reads torch/version.py without importing it), the gpufleet
# venv's dist-info (gpu_facts readiness). The gate's torch_version is in its module return, not in the facts the
# report reads, so it is not a source here.
TORCH_VERSION_SOURCES = ("doctor", "check", "venv")
_TORCH_SOURCE_TEXT = {"doctor": "the doctor's torch probe", "check": "the pre-check's environment",
                      "venv": "the gpufleet venv"}
_NO_TORCH_REASON = ("no torch version in the doctor's evidence, the pre-check's environments or the gpufleet venv's "
                    "packages")
_ADVISORY_CACHE = {}


def _torch_candidates(result):
    """(source, where, version text) for each place in the result that names a torch version, best first."""
    torch = _doctor_torch(result.get("doctor"))
    if torch is not None and torch.get("version") is not None:
        yield "doctor", None, torch.get("version")
    check = _d(result.get("check"))
    python = check.get("torch_python") or _d(check.get("judged")).get("python")
    if isinstance(python, str) and python:
        for env in _l(check.get("environments")):
            if isinstance(env, dict) and env.get("python") == python and env.get("torch") is not None:
                yield "check", python, env.get("torch")
                break
    venv = _d(_d(_d(result.get("gpu")).get("readiness")).get("venv"))
    version = _d(venv.get("packages")).get("torch")
    if version is not None:
        path = venv.get("path")
        yield "venv", path if isinstance(path, str) else "", version


def torch_version_of(result):
    """{"version", "source", "where", "unreadable"} of the host's torch: the first readable version of
    ``_torch_candidates`` (version None when there is none); ``unreadable`` lists the version texts that are not
    versions (a crashed probe's null is not one: it names no version)."""
    unreadable = []
    for source, where, version in _torch_candidates(_d(result)):
        if isinstance(version, str) and _torch_advisories.version_key(version) is not None:
            return {"version": version.strip(), "source": source, "where": where, "unreadable": unreadable}
        unreadable.append("%s: %r" % (_source_text(source, where), (version,)[0]))
    return {"version": None, "source": None, "where": None, "unreadable": unreadable}


def _source_text(source, where):
    return _TORCH_SOURCE_TEXT[source] + (" %s" % where if where else "")


def _torch_fix(fixed):
    default = torchcompat.DEFAULT_TORCH
    note = " (its default %s is affected)" % default if _torch_advisories.advisories(default) else ""
    return ("upgrade torch to >= %s where it is installed; for the gpufleet venv, role torch: torch_version >= %s "
            "with a torch_cuda_variant that release has%s" % (fixed, fixed, note))


def _advisory_answer(version, source, where):
    found = _torch_advisories.advisories(version)
    said = "version from %s" % _source_text(source, where)
    if not found:
        known = ", ".join("%s (fixed in %s)" % (a["id"], a["fixed"]) for a in _torch_advisories.ADVISORIES)
        return _item("ok", "torch %s: no open advisory among those checked: %s; %s" % (
            version, known, said), torch_version=version, version_from=source, advisories=[])
    fixed = max((a["fixed"] for a in found), key=_torch_advisories.version_key)
    risk = " torch.load of untrusted files;" if all("torch.load" in a["summary"] for a in found) else ""
    summary = "torch %s: %s:%s upgrade to >= %s; %s" % (
        version, ", ".join("%s (fixed in %s)" % (a["id"], a["fixed"]) for a in found), risk, fixed, said)
    return _item("warn", summary, torch_version=version, version_from=source, advisories=found,
                 fix=_torch_fix(fixed))


def torch_advisories_item(result):
    """Item 11: the host's torch (``torch_version_of``) against ``torch_advisories``. warn when an advisory is
    open (never fail: an advisory is a risk of loading untrusted files, not a broken box), ok when none is,
    unknown when no torch version is known ("no torch found to check", with the doctor's own word if it ran)."""
    got = torch_version_of(result)
    version = got["version"]
    if version is None:
        if got["unreadable"]:
            reason = "torch version not readable (%s)" % "; ".join(got["unreadable"])
            return _item("unknown", "no torch version to check: %s" % reason, reason)
        skipped = _d(_d(_d(result).get("doctor")).get("evidence")).get("torch_skipped")
        reason = _NO_TORCH_REASON + (" (doctor: %s)" % skipped if isinstance(skipped, str) and skipped else "")
        return _item("unknown", "no torch found to check: %s" % reason, reason)
    key = (version, got["source"], got["where"])
    hit = _ADVISORY_CACHE.get(key)
    if hit is None:
        hit = _advisory_answer(version, got["source"], got["where"])
        if len(_ADVISORY_CACHE) < 10000:
            _ADVISORY_CACHE[key] = hit
    return hit
