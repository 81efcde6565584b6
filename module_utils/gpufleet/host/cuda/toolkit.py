# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""CUDA toolkit layout on one host: where toolkits and the loader's settings live (the well-known paths), and the
choice of the toolkit /usr/local/cuda should point at (``choose_target``, also called by the doctor's decision).
Finding the toolkits is ``find``'s, probing links and the loader ``links``', the whole report ``layout``'s.

Sources (../../../shared/reference/cuda-failures-and-compat.md):
  * section 2.3: a global LD_LIBRARY_PATH holding a system CUDA lib dir puts the toolkit's libcudart/libnvJitLink
    ahead of pip's nvidia-* libraries ("undefined symbol: __nvJitLinkAddData_12_1", pytorch #111469, #134929,
    #131312, #152783); /usr/local/cuda pointing at the wrong toolkit (rusty1s/pytorch_scatter #86); validate before
    mutating and check the system loader (``ldconfig -p``), vast-ai/base-image.
  * section 3.2: backward compatibility (rule 1: a newer driver runs older CUDA) and minor-version compatibility
    (rule 2, CUDA 11+: a driver runs an X.y build of its own major "with limited feature-set", see ``choose_target``).
"""

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
# Directories the loader searches after the ld.so.conf ones (glibc trusted dirs, multiarch first).
TRUSTED_LIB_DIRS = ("/lib/*-linux-gnu", "/usr/lib/*-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")


class CudaTkError(Exception):
    """A request about CUDA toolkits that cannot be met (for example a pinned version not installed)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


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


# ---------------------------------------------------------------- decision

def _prefer(tk):
    """Sort key: major.minor, then a local toolkit over Debian's, then the full version."""
    return (version_key(tk["major_minor"]), 1 if tk["kind"] == "local" else 0, tk["root"] != CUDA_LINK,
            version_key(tk["version"]))


def choose_target(toolkits, pinned=None, driver_cuda=None):
    """The toolkit /usr/local/cuda should point at, with the reasons.

    Candidates are local (/usr/local/cuda-X.Y) and Debian (/usr/lib/cuda) toolkits with a known major.minor; pip
    runtimes and Debian's bare libcudart packages are not toolkits. Order (reference section 3.2):
      1. ``pinned`` X.Y if installed; raises CudaTkError('pinned_not_installed') if not;
      2. the highest toolkit with major.minor <= the driver's CUDA version (rule 1, backward compat);
      3. the highest toolkit of the driver's major (rule 2, minor-version compatibility, CUDA 11+: runs "with
         limited feature-set"; PTX JIT of newer code fails on the older driver);
      4. the highest toolkit (no driver version given, or none compatible: a newer major needs forward
         compatibility, rule 3, data-centre GPUs only).
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
