# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Finding the CUDA toolkits on a host: /usr/local/cuda-X.Y directories, Debian's packaged toolkit and pip's
nvidia-cuda-runtime wheels, each as a toolkit record (version and where it was read, libcudart, nvcc), and which
toolkit holds a given path.
"""

import os
import re

from ..system.hostctx import GPUFLEET_VENV
from .read import _LIBCUDART_RE, _run, libcudart_version, parse_nvcc_version, parse_version_json, parse_version_txt
from .toolkit import CUDA_LINK, DEBIAN_LIB_GLOB, DEBIAN_NVCC, DEBIAN_ROOT, LOCAL_PARENT, major_minor, version_key

DEFAULT_SITE_PACKAGES_GLOBS = (GPUFLEET_VENV + "/lib/python3*/site-packages",)
_LOCAL_DIR_RE = re.compile(r"^cuda-(\d+)\.(\d+)$")
_METADATA_VERSION_RE = re.compile(r"^Version:\s*(\S+)\s*$", re.M)


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


def default_site_packages(own_site_dirs=()):
    """The module's own interpreter's site dirs plus gpufleet's venv (glob patterns allowed)."""
    out = []
    for d in list(own_site_dirs) + list(DEFAULT_SITE_PACKAGES_GLOBS):
        if d and d not in out:
            out.append(d)
    return out
