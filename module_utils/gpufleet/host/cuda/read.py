# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading a host's CUDA layout: ``HostFS``, a read-only view of the host's files under a root (a path prefix, so
tests point it at a temporary tree of real files and symlinks), the parsers of the text formats (version.json, nvcc,
ldconfig, dpkg alternatives, shell LD_LIBRARY_PATH lines) and ``_run``, which calls the injected ``run(argv) -> (rc,
out, err)`` (the only way commands run) without letting a broken runner raise. Plain functions over plain data,
behind the ``cuda_toolkits`` facts module.
"""

import json
import os
import re
from collections import deque
from fnmatch import fnmatch

from .toolkit import version_key

_VERSION_TXT_RE = re.compile(r"CUDA Version\s+(\d+(?:\.\d+)+)")
_NVCC_RE = re.compile(r"Cuda compilation tools, release (\d+)\.(\d+), V(\d+(?:\.\d+)+)")
_LIBCUDART_RE = re.compile(r"^libcudart\.so\.(\d+(?:\.\d+)*)$")
_LDCONFIG_P_RE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s*=>\s*(\S.*?)\s*$")
_LDCONFIG_LINK_RE = re.compile(r"^\s*(\S+)\s+->\s+(\S+)\s*$")
_LLP_ASSIGN_RE = re.compile(r"^\s*(?:export\s+|declare\s+-x\s+)?LD_LIBRARY_PATH=(.*)$")


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
