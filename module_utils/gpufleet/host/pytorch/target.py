# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which Python environment the torch role and the doctor act on (``torch_target``), and what may be done to it.

Pure functions; the module ``library/torch_target.py`` probes the host and calls them:

* ``choose``: ``auto`` takes the environment ``scripts/find-python`` judged (the renter's: the login shell's
  Python, a conda env, a provider venv, the system Python) when it has torch, else gpufleet's venv; ``gpufleet``
  takes gpufleet's venv always.
* ``classify``: venv, conda or system, and whether pip may change it unasked (PEP 668's EXTERNALLY-MANAGED marker on
  a system Python; a conda environment, whose packages conda owns).
* ``judge``: can the torch build in it run this host's GPUs on this driver (the solver's arch lists and driver
  floors, ``torchcompat``)? True, False, or None when it cannot tell (no torch, no GPU, a build the table lacks).
* ``rollback_plan``: what restores a saved ``pip freeze``.
* ``pip_command``: the pip command that installs into that interpreter.
"""

import os
import re

from . import compat as tc
from . import parse as torchparse
from . import table as torchtable

MODES = ("auto", "gpufleet")
# Where a system Python's pip command lands when pip was installed with pip (get-pip.py, as RunPod's images do:
# /usr/local/bin/pip for /usr/bin/python3), not beside the interpreter.
PIP_DIRS = ("/usr/local/bin", "/usr/bin", "/bin")
# One file per environment, under the role's state folder: never overwritten once written (the state before
# gpufleet first changed that environment).
FREEZE_DIR = "torch/freeze"

# Run by the target's own interpreter (module.run_command): where it lives, what kind it is, and its torch build,
# read from torch/version.py without importing torch (an import can hang on a broken GPU and takes seconds).
PROBE = r"""
import importlib.util, json, os, re, sys, sysconfig
sys.path = [p for p in sys.path if p not in ("", os.getcwd())]
def spec(name):
    try:
        s = importlib.util.find_spec(name)
    except Exception:
        return None
    return s if s is not None and getattr(s, "has_location", False) else None
out = {"prefix": sys.prefix, "base_prefix": getattr(sys, "base_prefix", sys.prefix), "executable": sys.executable,
       "version": "%d.%d.%d" % sys.version_info[:3], "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
       "externally_managed": os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")),
       "pip": spec("pip") is not None, "torch": None, "torch_cuda": None}
t = spec("torch")
if t is not None:
    for d in list(t.submodule_search_locations or []):
        try:
            with open(os.path.join(d, "version.py")) as f:
                text = f.read()
        except (OSError, ValueError):
            continue
        m = re.search(r"^__version__\s*(?::\s*str\s*)?=\s*['\"]([^'\"]+)", text, re.M)
        c = re.search(r"^cuda\s*(?::\s*[^=]+)?=\s*(?:['\"]([^'\"]*)['\"]|None)", text, re.M)
        if m:
            out["torch"] = m.group(1)
            out["torch_cuda"] = c.group(1) if c and c.group(1) else None
            break
    if out["torch"] is None:
        try:
            from importlib.metadata import version
            out["torch"] = version("torch")
        except Exception:
            out["torch"] = "unknown"
print(json.dumps(out))
"""


class TargetError(Exception):
    """The target cannot be decided or used (a message for fail_json)."""


def _env_of(found, python):
    for env in (found or {}).get("envs") or []:
        if env.get("python") == python:
            return env
    return {}


def choose(mode, found, venv, gpufleet_venv, decided=None):
    """The Python to act on, as {"python", "gpufleet", "found_kind", "why"}.

    ``found``: scripts/find-python's JSON (``envs``, ``judged``, ``login_shell``); ``venv``: the torch role's venv
    (torch_venv), the target in ``gpufleet`` mode and in ``auto`` mode when no renter environment has torch;
    ``gpufleet_venv``: the venv gpufleet itself makes (gpufleet_common_venv), never taken for the renter's;
    ``decided``: an earlier result of this run (provision's, handed to remediate): kept as it is.
    """
    if decided:
        missing = [k for k in ("python", "gpufleet") if k not in decided]
        if missing:
            raise TargetError("a decided torch target needs %s (got %r)" % (" and ".join(missing), decided))
        return {"python": decided["python"], "gpufleet": bool(decided["gpufleet"]),
                "found_kind": decided.get("found_kind") or "unknown", "why": decided.get("why") or "decided earlier"}
    if mode not in MODES:
        raise TargetError("torch_target must be one of %s (got %r)" % (", ".join(MODES), mode))
    own = venv.rstrip("/") + "/bin/python"
    if mode == "gpufleet":
        return {"python": own, "gpufleet": True, "found_kind": "gpufleet",
                "why": "torch_target is gpufleet: gpufleet's own venv %s" % venv}
    judged = ((found or {}).get("judged") or {}).get("python") or ""
    env = _env_of(found, judged)
    if not judged:
        return {"python": own, "gpufleet": True, "found_kind": "gpufleet",
                "why": "no Python on the host has torch (%s): gpufleet's venv %s"
                       % (((found or {}).get("judged") or {}).get("why") or "scripts/find-python found none", venv)}
    # gpufleet's own venv (find-python's kind gpufleet, or the login shell running it) is never the renter's; torch_venv
    # is not compared: the remediate role hands the torch role the doctor's interpreter as torch_venv.
    if env.get("kind") == "gpufleet" or judged.startswith(gpufleet_venv.rstrip("/") + "/bin/"):
        return {"python": own, "gpufleet": True, "found_kind": "gpufleet",
                "why": "the torch found first is gpufleet's own (%s): gpufleet's venv %s" % (judged, venv)}
    return {"python": judged, "gpufleet": False, "found_kind": env.get("kind") or "unknown",
            "why": "the renter's environment with torch: %s" % ((found.get("judged") or {}).get("why") or judged)}


def classify(probe):
    """{"kind": venv | conda | system, "managed": bool, "managed_why": str or None} of a probed interpreter."""
    prefix, base = probe.get("prefix") or "", probe.get("base_prefix") or ""
    if probe.get("conda"):
        return {"kind": "conda", "managed": True,
                "managed_why": "a conda environment (%s/conda-meta): conda owns its packages" % prefix}
    if prefix != base:
        return {"kind": "venv", "managed": False, "managed_why": None}
    if probe.get("externally_managed"):
        return {"kind": "system", "managed": True,
                "managed_why": "the system Python under PEP 668 (its EXTERNALLY-MANAGED marker): the distribution's "
                               "package manager owns it"}
    return {"kind": "system", "managed": False, "managed_why": None}


def variant_of(version, cuda):
    """The build's variant: its +label (``2.5.1+cu121`` -> cu121), else from torch.version.cuda (12.8 -> cu128),
    else None (an unlabelled build of unknown CUDA)."""
    _release, _sep, label = (version or "").partition("+")
    if label:
        return label.lower()
    m = re.match(r"^(\d+)\.(\d+)", cuda or "")
    return "cu%s%s" % (m.group(1), m.group(2)) if m else None


def judge(version, cuda, driver_version, compute_capabilities, driver_policy="minor"):
    """(runs, why): can torch ``version`` run every GPU on this driver? runs is None when it cannot tell."""
    if not version:
        return None, "no torch in this environment"
    if not compute_capabilities:
        return None, "the host shows no GPU: torch %s is not judged" % version
    if not driver_version:
        return None, "the host shows GPUs but no driver version: torch %s is not judged" % version
    variant = variant_of(version, cuda)
    if variant is None:
        return None, "torch %s carries no CUDA variant label and no torch.version.cuda: its build is unknown" % version
    if variant == "cpu":
        return False, "torch %s is the CPU build: it runs no kernel on the GPU" % version
    try:
        pin = torchparse.parse_torch_version(version.partition("+")[0])
    except torchparse.InvalidInput:
        return None, "torch %s is not a release the table can read" % version
    if torchtable.release(pin["series"]) is None or torchtable.wheel(pin["series"], variant) is None:
        return None, "torch %s (%s) is not in the compatibility table: not judged" % (version, variant)
    try:
        tc.solve(driver_version or None, compute_capabilities, torch_version="%s+%s" % (pin["release"], variant),
                 requested_variant=variant, driver_policy=driver_policy)
    except torchparse.CompatError as exc:
        return False, "torch %s cannot run here: %s" % (version, exc)
    gpus = ", ".join(str(c) for c in compute_capabilities)
    return True, "torch %s runs compute capability %s on driver %s" % (version, gpus, driver_version)


def freeze_file(state_dir, prefix):
    """Where the environment at ``prefix`` has its pip freeze saved: one file per environment."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", prefix).strip("-") or "root"
    return "%s/%s/%s.txt" % (state_dir.rstrip("/"), FREEZE_DIR, slug)


def _name(line):
    """The canonical project name of a freeze line (``name==v``, ``name @ url``, ``-e ...#egg=name``), else None."""
    if line.startswith("-e "):
        m = re.search(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    else:
        m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else None


def _pin_key(line):
    return _name(line), line.split("==", 1)[1].strip().lower() if "==" in line else None


def rollback_plan(saved_lines, current_lines):
    """What restores the saved freeze: {"install": saved pins that differ, "uninstall": names added since,
    "skipped": saved lines pip cannot reinstall as a pin (editable, URLs)}; all empty when nothing differs."""
    saved, skipped = {}, []
    for line in saved_lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-e ") or " @ " in line or "==" not in line:
            skipped.append(line)
            continue
        saved[_name(line)] = line
    current = {}
    for line in current_lines:
        line = line.strip()
        if line and not line.startswith("#") and _name(line):
            current[_name(line)] = line
    keep = set(saved) | {_name(x) for x in skipped}
    install = [line for name, line in sorted(saved.items())
               if name not in current or _pin_key(current[name]) != _pin_key(line)]
    uninstall = sorted(name for name in current if name not in keep)
    return {"install": install, "uninstall": uninstall, "skipped": skipped}


def pip_command(python, python_version, dirs=PIP_DIRS):
    """The pip command that installs into ``python``: ``pip``, ``pip3`` or ``pipX.Y`` beside the interpreter (a venv's
    or conda's bin/), else one in ``dirs`` whose ``#!`` line runs that same interpreter (pip's own scripts name the
    Python they were installed for). None when there is none."""
    names = ("pip", "pip3", "pip" + python_version) if python_version else ("pip", "pip3")
    bindir = os.path.dirname(python)
    for name in names:
        path = os.path.join(bindir, name)
        if os.access(path, os.X_OK):
            return path
    want = os.path.realpath(python)
    for folder in dirs:
        if folder == bindir:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if not os.access(path, os.X_OK):
                continue
            try:
                with open(path, "rb") as f:
                    first = f.readline(512).decode("utf-8", "replace").strip()
            except OSError:
                continue
            words = first[2:].split() if first.startswith("#!") else []
            if words and (words[0] == python or os.path.realpath(words[0]) == want):
                return path
    return None
