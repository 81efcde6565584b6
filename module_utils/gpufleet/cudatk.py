"""CUDA toolkit layout on one host: installed toolkits, /usr/local/cuda, ldconfig, LD_LIBRARY_PATH.

Plain functions over plain data, behind the ``cuda_toolkits`` facts module. Host files are read
through a ``HostFS`` (``root`` is a path prefix, so tests point it at a temporary tree that holds
real files and real symlinks); commands run only through an injected ``run(argv) -> (rc, out, err)``.

Sources (../../../shared/reference/cuda-failures-and-compat.md):
  * section 2.3: a global LD_LIBRARY_PATH holding a system CUDA lib dir puts the toolkit's
    libcudart/libnvJitLink ahead of pip's nvidia-* libraries ("undefined symbol:
    __nvJitLinkAddData_12_1", pytorch #111469, #134929, #131312, #152783); /usr/local/cuda pointing
    at the wrong toolkit (rusty1s/pytorch_scatter #86); validate before mutating and check the
    system loader (``ldconfig -p``), vast-ai/base-image.
  * section 3.2: backward compatibility (rule 1: a newer driver runs older CUDA) and minor-version
    compatibility (rule 2: CUDA 11+, an application built with any X.y toolkit runs on a driver of
    the same major "with limited feature-set"; PTX JIT of newer code fails on the older driver).
"""

import json
import os
import re
from collections import deque
from fnmatch import fnmatch

from .hostctx import GPUFLEET_VENV

SCHEMA = 1

CUDA_LINK = "/usr/local/cuda"
LOCAL_PARENT = "/usr/local"
DEBIAN_ROOT = "/usr/lib/cuda"
DEBIAN_LIB_GLOB = "/usr/lib/*-linux-gnu"
DEBIAN_NVCC = "/usr/bin/nvcc"
ALTERNATIVES_DIR = "/etc/alternatives"
DPKG_ALTERNATIVES_DIR = "/var/lib/dpkg/alternatives"
LD_SO_CONF = "/etc/ld.so.conf"
LD_SO_CONF_DIR = "/etc/ld.so.conf.d"
ETC_ENVIRONMENT = "/etc/environment"
# Shell start-up files that commonly carry a global LD_LIBRARY_PATH on rented hosts.
SHELL_FILES = ("/etc/profile", "/etc/bash.bashrc", "/root/.bashrc", "/root/.profile")
PROFILE_D_GLOB = "/etc/profile.d/*.sh"
DEFAULT_SITE_PACKAGES_GLOBS = (GPUFLEET_VENV + "/lib/python3*/site-packages",)
# Directories the loader searches after the ld.so.conf ones (glibc trusted dirs, multiarch first).
TRUSTED_LIB_DIRS = ("/lib/*-linux-gnu", "/usr/lib/*-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")

_LOCAL_DIR_RE = re.compile(r"^cuda-(\d+)\.(\d+)$")
_VERSION_TXT_RE = re.compile(r"CUDA Version\s+(\d+(?:\.\d+)+)")
_NVCC_RE = re.compile(r"Cuda compilation tools, release (\d+)\.(\d+), V(\d+(?:\.\d+)+)")
_LIBCUDART_RE = re.compile(r"^libcudart\.so\.(\d+(?:\.\d+)*)$")
_METADATA_VERSION_RE = re.compile(r"^Version:\s*(\S+)\s*$", re.M)
_LDCONFIG_P_RE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s*=>\s*(\S.*?)\s*$")
_LDCONFIG_LINK_RE = re.compile(r"^\s*(\S+)\s+->\s+(\S+)\s*$")
_LLP_ASSIGN_RE = re.compile(r"^\s*(?:export\s+|declare\s+-x\s+)?LD_LIBRARY_PATH=(.*)$")
_PATH_ASSIGN_RE = re.compile(r"^\s*(?:export\s+|declare\s+-x\s+)?PATH=(.*)$")
_PATH_APPEND_RE = re.compile(r"\$\{PATH:\+:?\$\{?PATH\}?\}")
_INHERITED_RE = re.compile(r"^\$\{?LD_LIBRARY_PATH(?::[+-][^}]*)?\}?$")
_APPEND_INHERITED_RE = re.compile(r"\$\{LD_LIBRARY_PATH:\+:?\$\{?LD_LIBRARY_PATH\}?\}")
_CUDA_WORD_RE = re.compile(r"cuda", re.I)
_PIP_NVIDIA_RE = re.compile(r"/(?:site|dist)-packages/nvidia/")

PROBLEM_CODES = (
    "cuda_link_wrong_target", "cuda_link_missing", "cuda_link_dangling", "cuda_link_not_a_link",
    "ld_library_path_shadowing", "ldconfig_cuda_entries_multiple", "libcudart_unresolved",
    "pinned_not_installed",
)


class CudaTkError(Exception):
    """A request about CUDA toolkits that cannot be met (for example a pinned version not installed)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class HostFS:
    """Read-only view of a host's files under ``root``; all paths given and returned are host paths.

    Symlinks are followed inside ``root`` (an absolute link target such as ``/etc/alternatives/cuda``
    means ``<root>/etc/alternatives/cuda``), the way a chroot sees them. Nothing here writes.
    """

    MAX_LINKS = 40

    def __init__(self, root="/"):
        self.root = os.path.abspath(root or "/")

    def host_to_os(self, path):
        """Where host path ``path`` lies on this machine (no symlink is followed)."""
        path = "/" + path.lstrip("/")
        if self.root == "/":
            return path
        return self.root + path if path != "/" else self.root

    def readlink(self, path):
        """Raw target of the symlink at ``path`` (its last component), or None."""
        try:
            return os.readlink(self.host_to_os(path))
        except OSError:
            return None

    def realpath(self, path):
        """Host path with every symlink resolved inside root; None on a symlink loop.

        Like ``os.path.realpath`` (non-strict): missing trailing components are kept as they are.
        """
        parts = deque(p for p in path.split("/") if p)
        resolved = "/"
        hops = 0
        while parts:
            name = parts.popleft()
            if name == ".":
                continue
            if name == "..":
                resolved = os.path.dirname(resolved)
                continue
            candidate = os.path.join(resolved, name)
            target = self.readlink(candidate)
            if target is None:
                resolved = candidate
                continue
            hops += 1
            if hops > self.MAX_LINKS:
                return None
            if target.startswith("/"):
                resolved = "/"
            parts.extendleft(reversed([p for p in target.split("/") if p]))
        return resolved

    def link_chain(self, path):
        """Hops from ``path`` through symlinks: [path, target1, ...] (absolute host paths)."""
        chain = [path]
        current = path
        for _unused in range(self.MAX_LINKS):
            parent = self.realpath(os.path.dirname(current)) or "/"
            here = os.path.join(parent, os.path.basename(current))
            target = self.readlink(here)
            if target is None:
                break
            current = os.path.normpath(target if target.startswith("/") else os.path.join(parent, target))
            chain.append(current)
        return chain

    def _os_resolved(self, path):
        real = self.realpath(path)
        return None if real is None else self.host_to_os(real)

    def exists(self, path):
        real = self._os_resolved(path)
        return real is not None and os.path.exists(real)

    def lexists(self, path):
        parent = self.realpath(os.path.dirname(path) or "/")
        return parent is not None and os.path.lexists(self.host_to_os(os.path.join(parent, os.path.basename(path))))

    def is_link(self, path):
        parent = self.realpath(os.path.dirname(path) or "/")
        return parent is not None and os.path.islink(self.host_to_os(os.path.join(parent, os.path.basename(path))))

    def is_dir(self, path):
        real = self._os_resolved(path)
        return real is not None and os.path.isdir(real)

    def is_file(self, path):
        real = self._os_resolved(path)
        return real is not None and os.path.isfile(real)

    def listdir(self, path):
        real = self._os_resolved(path)
        try:
            return sorted(os.listdir(real)) if real else []
        except OSError:
            return []

    def read_text(self, path, limit=1 << 20):
        real = self._os_resolved(path)
        if real is None:
            return None
        try:
            with open(real, "rb") as fh:
                return fh.read(limit).decode("utf-8", "replace")
        except OSError:
            return None

    def glob(self, pattern):
        """Host paths matching ``pattern`` (shell wildcards per component), sorted."""
        results = ["/"]
        for part in [p for p in pattern.split("/") if p]:
            nxt = []
            for base in results:
                if any(c in part for c in "*?["):
                    nxt.extend(os.path.join(base, n) for n in self.listdir(base) if fnmatch(n, part))
                elif self.lexists(os.path.join(base, part)):
                    nxt.append(os.path.join(base, part))
            results = nxt
        return sorted(results)


# ---------------------------------------------------------------- parsers (text in, data out)

def major_minor(version):
    """'12.4.127' -> '12.4'; '12' -> None; None -> None."""
    if not version:
        return None
    parts = str(version).split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return "%d.%d" % (int(parts[0]), int(parts[1]))


def version_key(version):
    """Sortable tuple of the numeric components of a version ('12.4' -> (12, 4))."""
    out = []
    for part in str(version or "").split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def parse_version_json(text):
    """The toolkit version from a CUDA ``version.json`` ("cuda": {"version": ...}), or None."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None
    cuda = data.get("cuda") if isinstance(data, dict) else None
    version = cuda.get("version") if isinstance(cuda, dict) else None
    return str(version) if version and version_key(version) else None


def parse_version_txt(text):
    """'CUDA Version 10.2.89' (version.txt of toolkits before 11.1 and of Debian's) -> '10.2.89'."""
    m = _VERSION_TXT_RE.search(text or "")
    return m.group(1) if m else None


def parse_nvcc_version(text):
    """``nvcc --version`` output -> {'release': '12.4', 'version': '12.4.131'}, or None."""
    m = _NVCC_RE.search(text or "")
    if not m:
        return None
    return {"release": "%s.%s" % (m.group(1), m.group(2)), "version": m.group(3)}


def libcudart_version(name):
    """Version in a libcudart file name: 'libcudart.so.11.8.89' -> '11.8.89'.

    A soname alone carries only the major: libcudart.so.12 -> '12' and, for CUDA 11, whose soname
    is libcudart.so.11.0 whatever the minor, 'libcudart.so.11.0' -> '11' (not 11.0).
    """
    m = _LIBCUDART_RE.match(os.path.basename(name or ""))
    if not m:
        return None
    parts = m.group(1).split(".")
    if len(parts) >= 3:
        return m.group(1)
    return parts[0]


def parse_ldconfig_p(text):
    """``ldconfig -p`` (or ``ldconfig -p | grep ...``) -> [{soname, arch, path}] in cache order."""
    entries = []
    for line in (text or "").splitlines():
        m = _LDCONFIG_P_RE.match(line)
        if m and not line.lstrip().startswith("ldconfig"):
            entries.append({"soname": m.group(1), "arch": m.group(2), "path": m.group(3)})
    return entries


def parse_ldconfig_links(text):
    """``ldconfig -v``-style 'soname -> file' lines -> {soname: file}."""
    links = {}
    for line in (text or "").splitlines():
        m = _LDCONFIG_LINK_RE.match(line)
        if m:
            links[m.group(1)] = m.group(2)
    return links


def parse_dpkg_alternatives(text):
    """/var/lib/dpkg/alternatives/NAME -> {mode, link, slaves, alternatives: [{path, priority}]}."""
    lines = (text or "").split("\n")
    if len(lines) < 2 or not lines[0].strip():
        return None
    mode, link = lines[0].strip(), lines[1].strip()
    i = 2
    slaves = []
    while i + 1 < len(lines) and lines[i].strip():
        slaves.append({"name": lines[i].strip(), "link": lines[i + 1].strip()})
        i += 2
    i += 1  # the blank line closing the slave list
    alternatives = []
    while i + 1 < len(lines) and lines[i].strip():
        path, priority = lines[i].strip(), lines[i + 1].strip()
        try:
            prio = int(priority)
        except ValueError:
            prio = None
        alternatives.append({"path": path, "priority": prio})
        i += 2 + len(slaves)
    return {"mode": mode, "link": link, "slaves": slaves, "alternatives": alternatives}


def _strip_comment(line):
    return line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""


def _unquote(value):
    value = value.strip().rstrip(";").strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    m = re.match(r"^([\"'])(.*?)\1", value)  # quoted value followed by something else
    if m:
        return m.group(2)
    return value.split()[0] if value.split() else ""


def parse_ld_library_path_assignments(text, assign_re=_LLP_ASSIGN_RE):
    """Lines assigning LD_LIBRARY_PATH (shell or pam_env syntax) -> [(line_number, value)]."""
    found = []
    for number, line in enumerate((text or "").splitlines(), 1):
        stripped = _strip_comment(line) if "#" in line else line.strip()
        m = assign_re.match(stripped)
        if m:
            found.append((number, _unquote(m.group(1))))
    return found


# ---------------------------------------------------------------- probes (HostFS in, data out)

def _find_libcudart(fs, lib_dirs):
    """(path of the libcudart soname link or file, its real file) found first in ``lib_dirs``."""
    for d in lib_dirs:
        names = [n for n in fs.listdir(d) if _LIBCUDART_RE.match(n)]
        if not names:
            continue
        # the soname (libcudart.so.12, libcudart.so.11.0) has the fewest components
        names.sort(key=lambda n: (len(n.split(".")), n))
        path = os.path.join(d, names[0])
        return path, fs.realpath(path)
    return None, None


def _local_lib_dirs(fs, root):
    return [os.path.join(root, "lib64")] + fs.glob(os.path.join(root, "targets", "*", "lib")) + \
        [os.path.join(root, "lib")]


def _toolkit(kind, version, source, root, libcudart, libcudart_real, nvcc, **extra):
    tk = {
        "kind": kind, "version": version, "major_minor": major_minor(version),
        "major": (version_key(version) or (None,))[0], "root": root, "libcudart": libcudart,
        "libcudart_real": libcudart_real, "nvcc": nvcc, "source_of_version": source,
    }
    tk.update(extra)
    return tk


def _local_toolkit(fs, root, name_version):
    version, source = None, None
    text = fs.read_text(os.path.join(root, "version.json"))
    if text is not None:
        version = parse_version_json(text)
        source = "version.json" if version else None
    if version is None:
        version = parse_version_txt(fs.read_text(os.path.join(root, "version.txt")))
        source = "version.txt" if version else None
    if version is None and name_version:
        version, source = name_version, "dir_name"
    lib, lib_real = _find_libcudart(fs, _local_lib_dirs(fs, root))
    if version is None and lib_real:
        version = libcudart_version(lib_real)
        source = "libcudart" if version else None
    nvcc = os.path.join(root, "bin", "nvcc")
    return _toolkit("local", version, source, root, lib, lib_real, nvcc if fs.exists(nvcc) else None)


def find_local_toolkits(fs):
    """Every real /usr/local/cuda-X.Y directory (links such as cuda-12 -> alternatives are aliases)."""
    found = []
    for name in fs.listdir(LOCAL_PARENT):
        m = _LOCAL_DIR_RE.match(name)
        path = os.path.join(LOCAL_PARENT, name)
        if not m or fs.is_link(path) or not fs.is_dir(path):
            continue
        found.append(_local_toolkit(fs, path, "%s.%s" % (m.group(1), m.group(2))))
    # a real directory (not a link) at /usr/local/cuda is a toolkit too
    if fs.is_dir(CUDA_LINK) and not fs.is_link(CUDA_LINK):
        tk = _local_toolkit(fs, CUDA_LINK, None)
        if tk["version"] or tk["libcudart"] or tk["nvcc"]:
            found.append(tk)
    return found


def find_debian_toolkit(fs, run=None):
    """Debian/Ubuntu's packaged toolkit (nvidia-cuda-toolkit, libcudartNN), or None."""
    lib, lib_real = None, None
    for d in fs.glob(DEBIAN_LIB_GLOB):
        cand, cand_real = _find_libcudart(fs, [d])
        # a link that someone pointed into /usr/local/cuda* is not Debian's library
        if cand and not (cand_real or "").startswith(LOCAL_PARENT + "/cuda"):
            lib, lib_real = cand, cand_real
            break
    has_root = fs.is_dir(DEBIAN_ROOT)
    if not lib and not has_root:
        return None
    nvcc = None
    for cand in (DEBIAN_NVCC, os.path.join(DEBIAN_ROOT, "bin", "nvcc")):
        if fs.exists(cand) and not (fs.realpath(cand) or "").startswith(LOCAL_PARENT + "/cuda"):
            nvcc = cand
            break
    version = parse_version_txt(fs.read_text(os.path.join(DEBIAN_ROOT, "version.txt")))
    source = "version.txt" if version else None
    if version is None and lib_real:
        v = libcudart_version(lib_real)
        if v and len(v.split(".")) >= 3:
            version, source = v, "libcudart"
    if version is None and nvcc and run is not None:
        res = _run(run, [fs.host_to_os(nvcc), "--version"])
        parsed = parse_nvcc_version(res[1]) if res and res[0] == 0 else None
        if parsed:
            version, source = parsed["version"], "nvcc --version"
    if version is None and lib:
        version, source = libcudart_version(lib), "libcudart soname (major only)"
    root = DEBIAN_ROOT if has_root else os.path.dirname(lib)
    return _toolkit("debian", version, source, root, lib, lib_real, nvcc)


def _metadata_version(fs, dist_info):
    m = _METADATA_VERSION_RE.search(fs.read_text(os.path.join(dist_info, "METADATA")) or "")
    if m:
        return m.group(1), "METADATA"
    tail = os.path.basename(dist_info)[: -len(".dist-info")]
    if "-" in tail:
        return tail.rsplit("-", 1)[1], "dist-info name"
    return None, None


def find_pip_runtimes(fs, site_packages):
    """CUDA runtimes from pip's nvidia-cuda-runtime-cuNN wheels in the given site-packages dirs."""
    found = []
    seen = set()
    for pattern in site_packages or ():
        for site in fs.glob(pattern) if any(c in pattern for c in "*?[") else [pattern]:
            real_site = fs.realpath(site)
            if not real_site or real_site in seen or not fs.is_dir(site):
                continue
            seen.add(real_site)
            dists = {}
            for dist in fs.glob(os.path.join(site, "nvidia_cuda_runtime*.dist-info")):
                version, source = _metadata_version(fs, dist)
                if version:
                    dists[version_key(version)[:1]] = (version, source, dist)
            lib_dirs = [os.path.join(site, "nvidia", "cuda_runtime", "lib")] + fs.glob(
                os.path.join(site, "nvidia", "cu[0-9]*", "lib"))
            for d in lib_dirs:
                lib, lib_real = _find_libcudart(fs, [d])
                if not lib:
                    continue
                soname_major = version_key(libcudart_version(lib))[:1]
                version, source, dist = dists.get(soname_major, (None, None, None))
                if version is None:
                    version, source = libcudart_version(lib_real or lib), "libcudart soname (major only)"
                nvcc = os.path.join(site, "nvidia", "cuda_nvcc", "bin", "nvcc")
                found.append(_toolkit("pip", version, source, os.path.dirname(d), lib, lib_real,
                                      nvcc if fs.exists(nvcc) else None, site_packages=site,
                                      dist_info=dist))
    return found


def find_toolkits(fs, site_packages=(), run=None):
    toolkits = find_local_toolkits(fs)
    deb = find_debian_toolkit(fs, run=run)
    if deb:
        toolkits.append(deb)
    toolkits.extend(find_pip_runtimes(fs, site_packages))
    return toolkits


def toolkit_for_path(fs, toolkits, path):
    """The local/debian toolkit whose root holds ``path`` (after resolving links), or None."""
    real = fs.realpath(path) if path else None
    if not real:
        return None
    best = None
    for tk in toolkits:
        if tk["kind"] == "pip":
            continue
        roots = {fs.realpath(tk["root"])}
        if tk["libcudart"]:
            roots.add(fs.realpath(os.path.dirname(tk["libcudart"])))
        for r in roots:
            if r and (real == r or real.startswith(r.rstrip("/") + "/")) and (
                    best is None or len(r) > best[0]):
                best = (len(r), tk)
    return best[1] if best else None


def probe_cuda_symlink(fs, toolkits):
    exists = fs.exists(CUDA_LINK)
    is_link = fs.is_link(CUDA_LINK)
    info = {
        "path": CUDA_LINK, "exists": exists, "lexists": fs.lexists(CUDA_LINK), "is_link": is_link,
        "target": fs.readlink(CUDA_LINK) if is_link else None,
        "chain": fs.link_chain(CUDA_LINK) if is_link else [CUDA_LINK],
        "resolved": fs.realpath(CUDA_LINK) if exists else None,
        "dangling": bool(is_link and not exists),
        "version": None, "toolkit_root": None,
    }
    info["via_alternatives"] = any(p.startswith(ALTERNATIVES_DIR + "/") for p in info["chain"][1:])
    if exists:
        tk = toolkit_for_path(fs, toolkits, CUDA_LINK) if is_link else None
        if tk is None and not is_link:
            tk = next((t for t in toolkits if t["root"] == CUDA_LINK), None)
        if tk:
            info["version"], info["toolkit_root"] = tk["version"], tk["root"]
        elif fs.is_dir(CUDA_LINK):  # points somewhere that is not /usr/local/cuda-X.Y (e.g. /opt/cuda)
            info["version"] = _local_toolkit(fs, info["resolved"], None)["version"]
    return info


def probe_alternatives(fs, names=None):
    """update-alternatives state for ``cuda`` and ``cuda-N`` read from files (no command runs)."""
    names = set(names or ())
    for d in (ALTERNATIVES_DIR, DPKG_ALTERNATIVES_DIR):
        names.update(n for n in fs.listdir(d) if n == "cuda" or re.match(r"^cuda-\d+(\.\d+)?$", n))
    out = {}
    for name in sorted(names):
        link = os.path.join(ALTERNATIVES_DIR, name)
        db = parse_dpkg_alternatives(fs.read_text(os.path.join(DPKG_ALTERNATIVES_DIR, name)))
        out[name] = {
            "link": link, "link_exists": fs.lexists(link), "target": fs.readlink(link),
            "resolved": fs.realpath(link) if fs.exists(link) else None,
            "mode": db["mode"] if db else None, "master": db["link"] if db else None,
            "alternatives": db["alternatives"] if db else [],
        }
    return out


def _is_cuda_dir_text(path):
    return bool(_CUDA_WORD_RE.search(path or "")) or "nvidia" in (path or "").lower()


def read_ld_so_conf(fs, toolkits):
    """ld.so.conf and ld.so.conf.d files whose lines name CUDA or NVIDIA library directories.

    Only ``*.conf`` files in ld.so.conf.d are read by ldconfig (``include /etc/ld.so.conf.d/*.conf``);
    others are listed with ``active: false``.
    """
    files = []
    candidates = [(LD_SO_CONF, True)] + [
        (os.path.join(LD_SO_CONF_DIR, n), n.endswith(".conf")) for n in fs.listdir(LD_SO_CONF_DIR)]
    for path, active in candidates:
        text = fs.read_text(path)
        if text is None:
            continue
        lines = []
        for line in text.splitlines():
            entry = _strip_comment(line)
            if not entry or entry.startswith("include") or not _is_cuda_dir_text(entry):
                continue
            tk = toolkit_for_path(fs, toolkits, entry)
            lines.append({"dir": entry, "resolved": fs.realpath(entry), "exists": fs.is_dir(entry),
                          "toolkit_root": tk["root"] if tk else None,
                          "toolkit_version": tk["version"] if tk else None,
                          "compat": "/compat" in entry})
        if lines:
            files.append({"file": path, "active": active, "lines": [x["dir"] for x in lines], "entries": lines})
    return files


def _libcudart_map(entries):
    out = {}
    for e in entries:
        if _LIBCUDART_RE.match(e["soname"]):
            out.setdefault(e["soname"], []).append(e["path"])
    return out


def scan_ld_so_conf_libcudart(fs, conf_files):
    """Which libcudart sonames the configured dirs provide, in ldconfig's search order (approximate:
    CUDA entries of the ld.so.conf files, then the trusted system dirs)."""
    dirs = []
    for f in conf_files:
        if f["active"]:
            dirs.extend(e["dir"] for e in f["entries"] if not e["compat"])
    for pattern in TRUSTED_LIB_DIRS:
        dirs.extend(fs.glob(pattern) if "*" in pattern else [pattern])
    entries = []
    seen = set()
    for d in dirs:
        real = fs.realpath(d)
        if not real or real in seen:
            continue
        seen.add(real)
        for name in fs.listdir(d):
            if _LIBCUDART_RE.match(name) and len(name.split(".")) <= 4:  # sonames, not libcudart.so.X.Y.Z
                entries.append({"soname": name, "arch": None, "path": os.path.join(d, name)})
    return entries


def probe_ldconfig(fs, toolkits, run=None):
    conf_files = read_ld_so_conf(fs, toolkits)
    cache = {"source": None, "error": None, "libs": 0, "libcudart": {}}
    if run is not None:
        res = _run(run, ["ldconfig", "-p"])
        if res is None:
            cache["error"] = "ldconfig not found"
        elif res[0] != 0:
            cache["error"] = "ldconfig -p: rc=%s %s" % (res[0], (res[2] or "").strip()[:200])
        else:
            entries = parse_ldconfig_p(res[1])
            cache.update(source="ldconfig -p", libs=len(entries), libcudart=_libcudart_map(entries))
    if cache["source"] is None:
        entries = scan_ld_so_conf_libcudart(fs, conf_files)
        cache.update(source="ld.so.conf scan", libs=len(entries), libcudart=_libcudart_map(entries))
    resolves = []
    for soname, paths in sorted(cache["libcudart"].items()):
        for i, path in enumerate(paths):
            tk = toolkit_for_path(fs, toolkits, path)
            resolves.append({"soname": soname, "path": path, "first": i == 0,
                             "resolved": fs.realpath(path),
                             "toolkit_root": tk["root"] if tk else None,
                             "toolkit_version": tk["version"] if tk else None})
    return {"conf_files": conf_files, "cache": cache, "libcudart": resolves}


def _ld_entries(value, origin, file=None, line=None):
    # "/x${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}" (NVIDIA's install guide) appends the inherited value
    value = _APPEND_INHERITED_RE.sub(":$LD_LIBRARY_PATH", value or "")
    out = []
    for raw in value.split(":"):
        raw = raw.strip()
        if not raw:
            continue
        out.append({"path": raw, "source": origin, "file": file, "line": line,
                    "inherited": bool(_INHERITED_RE.match(raw))})
    return out


def probe_ld_library_path(fs, toolkits, environ_value=None):
    """LD_LIBRARY_PATH entries from the environment given, /etc/environment and shell start-up files."""
    entries = _ld_entries(environ_value, "environment")
    files = [ETC_ENVIRONMENT] + list(SHELL_FILES) + fs.glob(PROFILE_D_GLOB)
    for path in files:
        for number, value in parse_ld_library_path_assignments(fs.read_text(path)):
            entries.extend(_ld_entries(value, "%s:%d" % (path, number), path, number))
    for e in entries:
        e.update(cuda=False, pip=False, libcudart=False, nvjitlink=False, toolkit_root=None, shadowing=False)
        if e["inherited"]:
            continue
        path = e["path"]
        e["pip"] = bool(_PIP_NVIDIA_RE.search(path))
        names = fs.listdir(path) if "$" not in path else []
        e["libcudart"] = any(_LIBCUDART_RE.match(n) for n in names)
        e["nvjitlink"] = any(n.startswith("libnvJitLink.so") for n in names)
        tk = toolkit_for_path(fs, toolkits, path) if "$" not in path else None
        e["toolkit_root"] = tk["root"] if tk else None
        e["cuda"] = bool(_CUDA_WORD_RE.search(path) or e["libcudart"] or e["nvjitlink"] or tk or e["pip"])
        e["shadowing"] = e["cuda"] and not e["pip"]
    return {"entries": entries, "shadowing": any(e["shadowing"] for e in entries)}


def probe_path_settings(fs, toolkits, chosen):
    """PATH entries of /etc/environment and the shell start-up files that name an installed toolkit other than
    the chosen one (``/usr/local/cuda-11.8/bin`` while /usr/local/cuda is 12.4): ``nvcc`` and the other tools on
    every login's PATH are then the wrong toolkit's. Entries through /usr/local/cuda follow the link: never stale."""
    if not chosen:
        return []
    others = sorted({t["root"].rstrip("/") for t in toolkits if t["kind"] == "local"
                     and t["root"] not in (chosen["root"], CUDA_LINK)})
    out = []
    if not others:
        return out
    for path in [ETC_ENVIRONMENT] + list(SHELL_FILES) + fs.glob(PROFILE_D_GLOB):
        for number, value in parse_ld_library_path_assignments(fs.read_text(path), _PATH_ASSIGN_RE):
            for raw in _PATH_APPEND_RE.sub(":$PATH", value).split(":"):
                d = raw.strip().rstrip("/")
                root = next((r for r in others if d == r or d.startswith(r + "/")), None)
                if root:
                    out.append({"path": raw.strip(), "file": path, "line": number, "toolkit_root": root})
    return out


# ---------------------------------------------------------------- decision

def _prefer(tk):
    """Sort key: major.minor, then a local toolkit over Debian's, then the full version."""
    return (version_key(tk["major_minor"]), 1 if tk["kind"] == "local" else 0, tk["root"] != CUDA_LINK,
            version_key(tk["version"]))


def choose_target(toolkits, pinned=None, driver_cuda=None):
    """The toolkit /usr/local/cuda should point at, with the reasons.

    Candidates are local (/usr/local/cuda-X.Y) and Debian (/usr/lib/cuda) toolkits with a known
    major.minor; pip runtimes and Debian's bare libcudart packages are not toolkits. Order (reference section 3.2):
      1. ``pinned`` X.Y if installed; raises CudaTkError('pinned_not_installed') if not;
      2. the highest toolkit with major.minor <= the driver's CUDA version (rule 1, backward compat);
      3. the highest toolkit of the driver's major (rule 2, minor-version compatibility, CUDA 11+:
         runs "with limited feature-set"; PTX JIT of newer code fails on the older driver);
      4. the highest toolkit (no driver version given, or none compatible: a newer major needs
         forward compatibility, rule 3, data-centre GPUs only).
    Returns {root, version, major_minor, kind, rule, reasons} or None when there is no candidate.
    """
    # Debian's libcudartNN without nvidia-cuda-toolkit has no /usr/lib/cuda: a runtime, not a link target
    cands = [t for t in toolkits if t.get("major_minor") and (
        t["kind"] == "local" or (t["kind"] == "debian" and t["root"] == DEBIAN_ROOT))]
    reasons = []
    if pinned:
        want = major_minor(pinned) or str(pinned)
        hits = [t for t in cands if t["major_minor"] == want]
        if not hits:
            have = sorted({t["major_minor"] for t in cands}, key=version_key)
            raise CudaTkError("pinned_not_installed", "pinned CUDA %s is not installed (installed: %s)"
                              % (want, ", ".join(have) or "none"))
        best = max(hits, key=_prefer)
        reasons.append("pinned_version %s is installed at %s" % (want, best["root"]))
        return _choice(best, "pinned", reasons)
    if not cands:
        return None
    driver_key = version_key(major_minor(driver_cuda) or driver_cuda) if driver_cuda else ()
    if driver_key:
        ok = [t for t in cands if version_key(t["major_minor"]) <= driver_key]
        if ok:
            best = max(ok, key=_prefer)
            reasons.append("highest installed toolkit not newer than the driver's CUDA %s: %s "
                           "(backward compatibility, cuda-failures-and-compat.md section 3.2 rule 1)"
                           % (driver_cuda, best["major_minor"]))
            return _choice(best, "driver_compatible", reasons)
        same = [t for t in cands if version_key(t["major_minor"])[:1] == driver_key[:1]]
        if same:
            best = max(same, key=_prefer)
            reasons.append("no toolkit <= the driver's CUDA %s; %s has the same major and runs under "
                           "minor-version compatibility with a limited feature set; PTX JIT of its code fails "
                           "on this driver (cuda-failures-and-compat.md section 3.2 rule 2)"
                           % (driver_cuda, best["major_minor"]))
            return _choice(best, "minor_version_compat", reasons)
        reasons.append("no installed toolkit is usable with the driver's CUDA %s (a newer major needs "
                       "forward compatibility, data-centre GPUs only: cuda-failures-and-compat.md section 3.2 "
                       "rule 3); taking the highest" % driver_cuda)
    else:
        reasons.append("the driver's CUDA version is unknown (no driver answered, none given); taking the highest "
                       "installed toolkit")
    best = max(cands, key=_prefer)
    return _choice(best, "highest", reasons)


def _choice(tk, rule, reasons):
    return {"root": tk["root"], "version": tk["version"], "major_minor": tk["major_minor"], "kind": tk["kind"],
            "libcudart": tk["libcudart"], "rule": rule, "reasons": reasons}


def _problem(code, message, severity="warning", **details):
    p = {"code": code, "severity": severity, "message": message}
    p.update(details)
    return p


def find_problems(fs, toolkits, link, ldconfig, llp, chosen):
    problems = []
    if chosen:
        target = fs.realpath(chosen["root"])
        if not link["lexists"]:
            problems.append(_problem("cuda_link_missing", "%s does not exist; it should point at %s"
                                     % (CUDA_LINK, chosen["root"]), "error", expected=chosen["root"]))
        elif link["dangling"]:
            problems.append(_problem("cuda_link_dangling", "%s -> %s points at nothing; it should point at %s"
                                     % (CUDA_LINK, link["target"], chosen["root"]), "error",
                                     expected=chosen["root"], chain=link["chain"]))
        elif not link["is_link"]:
            problems.append(_problem("cuda_link_not_a_link", "%s is a real directory, not a link; it cannot be "
                                     "repointed without moving it" % CUDA_LINK, "warning", expected=chosen["root"]))
        elif link["resolved"] != target:
            problems.append(_problem("cuda_link_wrong_target", "%s resolves to %s (CUDA %s); it should point at %s "
                                     "(CUDA %s)" % (CUDA_LINK, link["resolved"], link["version"] or "unknown",
                                                    chosen["root"], chosen["version"]), "error",
                                     expected=chosen["root"], chain=link["chain"]))
    shadow = [e for e in llp["entries"] if e["shadowing"]]
    if shadow:
        problems.append(_problem(
            "ld_library_path_shadowing",
            "LD_LIBRARY_PATH puts CUDA library dirs ahead of pip's nvidia-* libraries (%s); pip torch then loads "
            "the toolkit's libcudart/libnvJitLink and fails with undefined symbol __nvJitLink* "
            "(cuda-failures-and-compat.md section 2.3)"
            % ", ".join("%s from %s" % (e["path"], e["source"]) for e in shadow),
            "error", entries=[{"path": e["path"], "source": e["source"]} for e in shadow]))
    active = [(f["file"], e) for f in ldconfig["conf_files"] if f["active"] for e in f["entries"] if not e["compat"]]
    roots = {}
    for file, e in active:
        key = e["toolkit_root"] or e["resolved"] or e["dir"]
        if _CUDA_WORD_RE.search(e["dir"]) and (e["toolkit_root"] or e["exists"]):
            roots.setdefault(key, []).append(file)
    if len(roots) > 1:
        # toolkits of one major share sonames (libcudart.so.12): only the first one found is used
        majors = {}
        for r in roots:
            tk = next((t for t in toolkits if t["root"] == r), None)
            majors.setdefault(tk["major"] if tk else None, []).append(r)
        clash = sorted(r for m, rs in majors.items() if m is not None and len(rs) > 1 for r in rs)
        problems.append(_problem(
            "ldconfig_cuda_entries_multiple",
            "ld.so.conf entries name %d different CUDA toolkits (%s)%s" % (len(roots), "; ".join(
                "%s in %s" % (k, ", ".join(sorted(set(v)))) for k, v in sorted(roots.items())),
                "; %s share sonames and the loader uses whichever it finds first" % ", ".join(clash)
                if clash else ""),
            "error" if clash else "warning", toolkits=sorted(roots), same_major=clash))
    system = [t for t in toolkits if t["kind"] in ("local", "debian")]
    if system and ldconfig["cache"]["source"]:
        have = ldconfig["cache"]["libcudart"]
        want = os.path.basename(chosen["libcudart"]) if chosen and chosen.get("libcudart") else None
        if not have:
            problems.append(_problem("libcudart_unresolved", "no libcudart.so.* is known to the system loader "
                                     "(%s); programs outside a venv will not find the CUDA runtime"
                                     % ldconfig["cache"]["source"], "error"))
        elif want and want not in have:
            problems.append(_problem("libcudart_unresolved", "%s (CUDA %s) is not known to the system loader "
                                     "(%s has: %s)" % (want, chosen["version"], ldconfig["cache"]["source"],
                                                       ", ".join(sorted(have))), "error", soname=want))
    return problems


def layout_right(fs, chosen, link, ldconfig, problems):
    """Whether the layout already does what cuda_links would make it do, judged by effect, not by spelling.

    ``link_ok``: /usr/local/cuda resolves to the chosen toolkit (a link, an update-alternatives chain).
    ``loader_ok``: the system loader's first libcudart of the chosen soname lies in the chosen toolkit and
    ld.so.conf names one CUDA toolkit, in whatever file and spelling (NVIDIA's ``000_cuda.conf`` with
    /usr/local/cuda/targets/x86_64-linux/lib, a ``cuda.conf`` with /usr/local/cuda/lib64, the versioned dir).
    ``right``: both, and no LD_LIBRARY_PATH setting shadows pip's CUDA libraries. A layout that is right is
    left as it is: no file of gpufleet's own is written, no other file renamed.
    """
    if not chosen:
        return {"link_ok": None, "loader_ok": None, "right": None}
    link_ok = bool(link.get("exists")) and link.get("resolved") == fs.realpath(chosen["root"])
    codes = {p["code"] for p in problems}
    soname = os.path.basename(chosen["libcudart"]) if chosen.get("libcudart") else None
    first = [r for r in ldconfig["libcudart"] if r["soname"] == soname and r["first"]] if soname else []
    loader_ok = ("ldconfig_cuda_entries_multiple" not in codes and "libcudart_unresolved" not in codes
                 and (soname is None or (bool(first) and first[0]["toolkit_root"] == chosen["root"])))
    return {"link_ok": link_ok, "loader_ok": loader_ok,
            "right": link_ok and loader_ok and "ld_library_path_shadowing" not in codes}


def _run(run, argv):
    try:
        res = run(argv)
    except Exception as exc:  # a broken runner must not lose the other facts
        return 1, "", str(exc)
    if res is None:
        return None
    rc, out, err = res
    if isinstance(out, bytes):
        out = out.decode("utf-8", "replace")
    if isinstance(err, bytes):
        err = err.decode("utf-8", "replace")
    return rc, out, err


def default_site_packages(own_site_dirs=()):
    """The module's own interpreter's site dirs plus gpufleet's venv (glob patterns allowed)."""
    out = []
    for d in list(own_site_dirs) + list(DEFAULT_SITE_PACKAGES_GLOBS):
        if d and d not in out:
            out.append(d)
    return out


def collect(fs, site_packages=(), run=None, run_ldconfig=True, environ_ld_library_path=None,
            pinned=None, driver_cuda=None):
    """All CUDA layout facts for the host seen through ``fs``. Never raises for host state."""
    toolkits = find_toolkits(fs, site_packages, run=run)
    link = probe_cuda_symlink(fs, toolkits)
    alternatives = probe_alternatives(fs)
    ldconfig = probe_ldconfig(fs, toolkits, run=run if run_ldconfig else None)
    llp = probe_ld_library_path(fs, toolkits, environ_ld_library_path)
    chosen, problems = None, []
    try:
        chosen = choose_target(toolkits, pinned=pinned, driver_cuda=driver_cuda)
    except CudaTkError as exc:
        problems.append(_problem(exc.code, exc.message, "error", pinned=pinned))
    problems.extend(find_problems(fs, toolkits, link, ldconfig, llp, chosen))
    path_stale = probe_path_settings(fs, toolkits, chosen)
    if path_stale:
        problems.append(_problem(
            "path_names_other_toolkit", "PATH names another toolkit than /usr/local/cuda's (%s): nvcc and the CUDA "
            "tools of every login are CUDA %s's" % (", ".join("%s in %s" % (e["path"], e["file"]) for e in path_stale),
                                                    path_stale[0]["toolkit_root"].rsplit("-", 1)[-1]),
            "warning", entries=path_stale))
    return {
        "path_stale": path_stale,
        "layout": layout_right(fs, chosen, link, ldconfig, problems),
        "schema": SCHEMA, "root": fs.root, "toolkits": toolkits, "cuda_symlink": link,
        "alternatives": alternatives, "ldconfig": ldconfig, "ld_library_path": llp,
        "pinned_version": pinned, "driver_cuda_version": driver_cuda, "chosen": chosen,
        "problems": problems, "problem_codes": sorted({p["code"] for p in problems}),
    }
