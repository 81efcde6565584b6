"""NVIDIA Container Toolkit: version floor and CVE table (data), package checks, daemon.json merge.

Sources: NVIDIA's security bulletins (NVIDIA/product-security, ``<year>/<a_id>/<a_id>.md``; the page for each is
https://nvidia.custhelp.com/app/answers/detail/a_id/<a_id>), the toolkit's release notes
(NVIDIA/cloud-native-docs ``container-toolkit/release-notes.md``) and NVIDIA/nvidia-container-toolkit
``pkg/config/engine/docker/docker.go`` (``AddRuntime``, ``Save``: what ``nvidia-ctk runtime configure
--runtime=docker`` writes). The older rows were first gathered in ``shared/reference/security-reliability.md``
section 4 (outside this project); each row's ``source`` names the original it rests on.

Plain Python, no Ansible: a package listing in, findings out; text in, text out.
"""

import json
import re

from ..system.tablerow import table_row

REFERENCE = "shared/reference/security-reliability.md"
_S41 = REFERENCE + " section 4.1"

# Policy floor: every CVE below is fixed at or before it. Bulletin 5850 (2026-06-30): CVE-2026-24260 affects "all
# versions up to and including 1.19.0", fixed in 1.19.1; NVIDIA made no 1.18.x fix (release-1.18 ends at v1.18.2), so
# the floor is 1.19.1 on every line.
FLOOR = "1.19.1"
# The newest release (v1.20.0, tagged 2026-08-12), which NVIDIA's documentation marks "preferred"
# (NVIDIA/cloud-native-docs container-toolkit/versions1.json). No CVE is fixed in it beyond 1.19.1.
PREFERRED = "1.20.0"
PREFERRED_SOURCE = "NVIDIA/cloud-native-docs container-toolkit/versions1.json (1.20.0 'preferred')"

# All four must be installed at one version (section 4.2 item 1; the install guide pins all four
# to the same ``${version}-1``; 1.18.0-rc.1 "Require matching version of libnvidia-container-tools").
PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
            "libnvidia-container1")

DEFAULT_RUNTIME_PATH = "/usr/bin/nvidia-container-runtime"


class CtkError(Exception):
    """Base of this module's errors."""


class VersionError(CtkError, ValueError):
    """A Debian version string that cannot be parsed."""


class DaemonJsonError(CtkError, ValueError):
    """daemon.json that we cannot parse or merge safely: never overwrite it."""


_CVE_FIELDS = ("cve", "fixed", "summary", "confidence", "source")


def _cve(**kw):
    return table_row(_CVE_FIELDS, "CVE", kw)


# ``fixed`` None: the reference has no verified fixed version.
CVES = [
    _cve(cve="CVE-2024-0132", fixed="1.16.2", confidence="V",
         summary="TOCTOU container escape / host filesystem access with the default config, via a crafted image "
                 "(CVSS 9.0)",
         source=_S41 + " (release notes 'critical security updates', bulletin a_id 5582)"),
    _cve(cve="CVE-2024-0133", fixed="1.16.2", confidence="V",
         summary="TOCTOU container escape / host filesystem access with the default config, via a crafted image",
         source=_S41 + " (release notes, bulletin a_id 5582)"),
    _cve(cve="CVE-2024-0134", fixed="1.17.0", confidence="V",
         summary="symlinks created at container start could escape the container root",
         source=_S41 + " (release notes)"),
    # one bulletin (a_id 5599), one fix, three CVEs
    *(_cve(cve=cve, fixed="1.17.3", confidence="V",
           summary="bulletin a_id 5599; fixed by host-relative LDConfig paths only and a virtual copy of host ldconfig",
           source=_S41 + " (release notes + CHANGELOG)")
      for cve in ("CVE-2024-0135", "CVE-2024-0136", "CVE-2024-0137")),
    _cve(cve="CVE-2025-23359", fixed="1.17.4", confidence="V",
         summary="bypass of the CVE-2024-0132 fix via CUDA compat libs / crafted symlinks",
         source=_S41 + " (release notes a_id 5616; containers/toolbox#1627, GHSA-4hmh-pm5p-9j7j)"),
    _cve(cve="CVE-2025-23266", fixed="1.17.8", confidence="V",
         summary="'NVIDIAScape': createContainer hooks inherited the container env (LD_PRELOAD from the image), "
                 "code execution in a privileged hook",
         source=_S41 + (" (bulletin a_id 5659, 2025-07-15; security merge d6f61079; pytorch/test-infra#6941, "
                        "microsoft/azurelinux#14382, containers/toolbox#1687)")),
    _cve(cve="CVE-2025-23267", fixed="1.17.8", confidence="V",
         summary="update-ldcache hook followed links",
         source=_S41 + " (bulletin a_id 5659; the same issues as CVE-2025-23266 cite 1.17.8)"),
    _cve(cve="CVE-2026-24260", fixed="1.19.1", confidence="V",
         summary="TOCTOU race (CWE-367), CVSS 8.5 high, in all versions up to and including 1.19.0; the fix "
                 "resolves paths with filepath-securejoin in the cudacompat and create-symlinks hooks",
         source="NVIDIA security bulletin a_id 5850 'Container Toolkit - June 2026', 2026-06-30 "
                "(https://nvidia.custhelp.com/app/answers/detail/a_id/5850; "
                "NVIDIA/product-security 2026/5850/5850.md); "
                "fix commits e62aacfd, 4c324ff0, tag v1.19.1 2026-05-21"),
]


# ---- Debian version comparison (dpkg's algorithm) -----------------------------------------------
_ALLOWED = re.compile(r"^[A-Za-z0-9.+~:-]+$")
_DIGITS = "0123456789"


def parse_version(version):
    """"1:1.17.8-1" -> (1, "1.17.8", "1"). Raises VersionError."""
    text = str(version).strip() if version is not None else ""
    if not text or not _ALLOWED.match(text):
        raise VersionError("version %r is not a Debian version string" % (version,))
    epoch = 0
    if ":" in text:
        head, text = text.split(":", 1)
        if not head.isdigit():
            raise VersionError("version %r has a non-numeric epoch" % (version,))
        epoch = int(head)
    upstream, revision = text, ""
    if "-" in text:
        upstream, revision = text.rsplit("-", 1)
    if not upstream or upstream[0] not in _DIGITS:
        raise VersionError("version %r: the upstream part must start with a digit" % (version,))
    if ":" in upstream or (text.endswith("-")):
        raise VersionError("version %r is not a Debian version string" % (version,))
    return epoch, upstream, revision


def _order(ch):
    if ch == "~":
        return -1
    if ch.isalpha() and ch.isascii():
        return ord(ch)
    return ord(ch) + 256


def _verrevcmp(a, b):
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and a[i] not in _DIGITS) or (j < len(b) and b[j] not in _DIGITS):
            ac = _order(a[i]) if i < len(a) and a[i] not in _DIGITS else 0
            bc = _order(b[j]) if j < len(b) and b[j] not in _DIGITS else 0
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i] in _DIGITS and j < len(b) and b[j] in _DIGITS:
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i] in _DIGITS:
            return 1
        if j < len(b) and b[j] in _DIGITS:
            return -1
        if first_diff:
            return first_diff
    return 0


def compare_versions(a, b):
    """dpkg --compare-versions: negative, 0 or positive. Raises VersionError."""
    ea, ua, ra = parse_version(a)
    eb, ub, rb = parse_version(b)
    if ea != eb:
        return -1 if ea < eb else 1
    result = _verrevcmp(ua, ub) or _verrevcmp(ra, rb)
    return (result > 0) - (result < 0)


# ---- package checks -----------------------------------------------------------------------------
def _finding(code, severity, message, **extra):
    out = {"code": code, "severity": severity, "message": message}
    out.update(extra)
    return out


def cves_below(version):
    """CVE rows whose verified fix is newer than ``version``."""
    return [c for c in CVES if c["fixed"] and compare_versions(version, c["fixed"]) < 0]


def check_versions(installed, floor=FLOOR):
    """Findings for the toolkit packages ``installed`` ({package: version or None}).

    Codes: ``not_installed`` (none of the four), ``missing_package``, ``unparseable_version``,
    ``version_mismatch``, ``below_floor`` (naming the CVEs that apply), ``below_preferred`` (info),
    ``unverified_cve`` (info: a CVE without a verified fix). Empty list: nothing to report.
    """
    installed = {k: v for k, v in (installed or {}).items() if v not in (None, "")}
    present = {p: installed[p] for p in PACKAGES if p in installed}
    findings = []
    if not present:
        return [_finding("not_installed", "warning", "the NVIDIA container toolkit is not installed (none of %s)"
                         % ", ".join(PACKAGES), packages=list(PACKAGES))]
    for pkg in PACKAGES:
        if pkg not in present:
            findings.append(_finding("missing_package", "error", "%s is not installed: the four toolkit packages "
                                     "(%s) are installed together at one version" % (pkg, ", ".join(PACKAGES)),
                                     packages=[pkg]))
    parsed = {}
    for pkg, version in present.items():
        try:
            parse_version(version)
            parsed[pkg] = version
        except VersionError as exc:
            findings.append(_finding("unparseable_version", "error", "%s: %s" % (pkg, exc), packages=[pkg]))
    groups = []  # [(version, [packages])], versions equal in dpkg's sense share a group
    for pkg, version in parsed.items():
        for group in groups:
            if compare_versions(group[0], version) == 0:
                group[1].append(pkg)
                break
        else:
            groups.append((version, [pkg]))
    if len(groups) > 1:
        detail = ", ".join("%s %s" % (p, v) for v, pkgs in groups for p in pkgs)
        findings.append(_finding("version_mismatch", "error", "the toolkit packages are at different versions (%s): "
                                 "install all four at one version" % detail,
                                 packages=[p for _unused, pkgs in groups for p in pkgs], versions=dict(parsed)))
    for version, pkgs in groups:
        if compare_versions(version, floor) < 0:
            cves = cves_below(version)
            names = ", ".join(c["cve"] for c in cves) or "none in the table"
            findings.append(_finding("below_floor", "error", "%s %s below the floor %s; known CVEs fixed since: %s"
                                     % (", ".join(pkgs), "at %s is" % version if len(pkgs) == 1
                                        else "at %s are" % version, floor, names),
                                     packages=pkgs, version=version, cves=[c["cve"] for c in cves]))
        elif compare_versions(version, PREFERRED) < 0:
            findings.append(_finding("below_preferred", "info", "%s at %s meets the floor %s; %s or later is "
                                     "preferred (%s)" % (", ".join(pkgs), version, floor, PREFERRED, PREFERRED_SOURCE),
                                     packages=pkgs, version=version))
    for c in CVES:
        if not c["fixed"]:
            findings.append(_finding("unverified_cve", "info", "%s (%s): check NVIDIA's bulletin for the fixed "
                                     "version" % (c["cve"], c["summary"]), cves=[c["cve"]]))
    return findings


# ---- /etc/docker/daemon.json --------------------------------------------------------------------
def _go_json(obj):
    """What Go's ``json.MarshalIndent(cfg, "", "    ")`` writes for a map: sorted keys, 4 spaces,
    <, > and & escaped, no trailing newline (``nvidia-ctk`` writes exactly this)."""
    text = json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=False, separators=(",", ": "))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def parse_daemon_json(text):
    """daemon.json text -> dict ({} for None / empty). Raises DaemonJsonError."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DaemonJsonError("daemon.json is not UTF-8 (%s): not touching it" % exc) from exc
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DaemonJsonError("daemon.json is not valid JSON (%s): not touching it; fix or move it away first"
                              % exc) from exc
    if not isinstance(data, dict):
        raise DaemonJsonError("daemon.json must hold a JSON object at the top level, found %s: not touching it"
                              % type(data).__name__)
    return data


def _object_member(config, key):
    """``config[key]``, an object ({} when absent); DaemonJsonError when it is anything else."""
    value = config.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DaemonJsonError("daemon.json '%s' is a %s, not an object: not touching it" % (key, type(value).__name__))
    return value


def merge_daemon_json(existing_text, runtime_path=DEFAULT_RUNTIME_PATH, set_default=False, runtime_name="nvidia",
                      enable_cdi=False):
    """Merge the NVIDIA runtime into daemon.json the way ``nvidia-ctk runtime configure --runtime=docker`` does.

    Sets ``runtimes.<runtime_name> = {"path": runtime_path, "args": []}`` (replacing an entry of that
    name, like nvidia-ctk's ``AddRuntime``), ``default-runtime`` when ``set_default`` (an existing
    default is left alone otherwise), ``features.cdi = true`` when ``enable_cdi``; every other key
    is kept. Returns (new_text, changed); when nothing changes ``new_text`` is ``existing_text``
    untouched. Raises DaemonJsonError on text it cannot parse or a shape it cannot merge.
    """
    if not runtime_path or not runtime_name:
        raise DaemonJsonError("runtime_path and runtime_name must be non-empty")
    config = parse_daemon_json(existing_text)
    merged = json.loads(json.dumps(config))  # deep copy
    runtimes = _object_member(merged, "runtimes")
    runtimes[runtime_name] = {"path": runtime_path, "args": []}
    merged["runtimes"] = runtimes
    if set_default:
        merged["default-runtime"] = runtime_name
    if enable_cdi:
        features = _object_member(merged, "features")
        features["cdi"] = True
        merged["features"] = features
    if merged == config:  # only possible when the file already holds the runtime
        return existing_text, False
    return _go_json(merged), True
