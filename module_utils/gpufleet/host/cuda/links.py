# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Probing how a host's programs reach a CUDA toolkit: the /usr/local/cuda link and update-alternatives, the
loader's settings (ld.so.conf, ``ldconfig -p``: which libcudart comes first) and LD_LIBRARY_PATH and PATH
settings in /etc/environment and the shell start-up files; each entry tied to the toolkit it names.
"""

import os
import re

from .find import _local_toolkit, toolkit_for_path
from .read import (
    _LIBCUDART_RE,
    _run,
    _strip_comment,
    parse_dpkg_alternatives,
    parse_ld_library_path_assignments,
    parse_ldconfig_p,
)
from .toolkit import (
    ALTERNATIVES_DIR,
    CUDA_LINK,
    DPKG_ALTERNATIVES_DIR,
    ETC_ENVIRONMENT,
    LD_SO_CONF,
    LD_SO_CONF_DIR,
    PROFILE_D_GLOB,
    SHELL_FILES,
    TRUSTED_LIB_DIRS,
)

_PATH_ASSIGN_RE = re.compile(r"^\s*(?:export\s+|declare\s+-x\s+)?PATH=(.*)$")
_PATH_APPEND_RE = re.compile(r"\$\{PATH:\+:?\$\{?PATH\}?\}")
_INHERITED_RE = re.compile(r"^\$\{?LD_LIBRARY_PATH(?::[+-][^}]*)?\}?$")
_APPEND_INHERITED_RE = re.compile(r"\$\{LD_LIBRARY_PATH:\+:?\$\{?LD_LIBRARY_PATH\}?\}")
_CUDA_WORD_RE = re.compile(r"cuda", re.I)
_PIP_NVIDIA_RE = re.compile(r"/(?:site|dist)-packages/nvidia/")


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
