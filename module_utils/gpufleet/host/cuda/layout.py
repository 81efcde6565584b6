# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The CUDA toolkit layout report behind the ``cuda_toolkits`` facts module: ``collect`` finds the toolkits,
probes the link, the loader and LD_LIBRARY_PATH, chooses the target and judges the problems (``find_problems``)
and whether the layout is already right (``layout_right``). Never raises for host state.
"""

import os

from .find import find_toolkits
from .links import (
    _CUDA_WORD_RE,
    probe_alternatives,
    probe_cuda_symlink,
    probe_ld_library_path,
    probe_ldconfig,
    probe_path_settings,
)
from .toolkit import CUDA_LINK, CudaTkError, choose_target

SCHEMA = 1


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
