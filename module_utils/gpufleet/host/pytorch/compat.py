# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torch build chooser: ``solve`` picks the torch wheel for a host (``auto`` or a requested variant), or
refuses with the reason; ``rank_variants`` is the order ``auto`` tries, ``newest_runnable`` what would run.
The data is ``torchtable``'s, kernel coverage ``torcharch``'s, the parsers ``torchparse``'s.

* ``auto`` ranks the builds of a release that run every GPU on the host's driver (see ``rank_variants``):
  stable before experimental; then builds of the driver's own CUDA major that it runs natively (its
  toolkit driver is met), in DEFAULT_PREFER's order (cu121 first: the house pin; then the newest);
  then builds of that major under minor-version compatibility, oldest CUDA first; then older majors.
  That is the field's map (vast-ai/base-image ``.github/workflows/promote-pytorch.yml``: driver CUDA
  12.1-12.6 -> cu126, 12.8-12.9 -> cu128, 13.0-13.1 -> cu130), with the GPU's kernels always checked.
"""

from .arch import arch_name, coverage, first_covering, gpu_driver_floor
from .parse import (
    CompatError,
    InvalidInput,
    cuda_of,
    index_url,
    parse_cc,
    parse_driver,
    parse_python,
    parse_torch_version,
)
from .table import CUDA_VARIANTS, DEFAULT_PREFER, RELEASES, release, wheel, wheels_for

DEFAULT_TORCH = "2.5.1"
DRIVER_POLICIES = ("minor", "strict")


class NoCompatibleWheel(CompatError):
    """No torch wheel fits the host or the request; the message says why and what to do."""


def _cc_text(cc):
    return "%d.%d" % cc


def _vtext(t):
    return ".".join(str(p) for p in t)


def _pytext(t):
    return "%d.%d" % t


def _python_support(rel, py):
    """"stable", "experimental" or None."""
    lo, hi = parse_python(rel["python_min"]), parse_python(rel["python_max"])
    if lo <= py <= hi:
        return "stable"
    if _pytext(py) in rel["python_experimental"]:
        return "experimental"
    return None


def _python_range(rel):
    text = "cp%s-cp%s" % (rel["python_min"].replace(".", ""), rel["python_max"].replace(".", ""))
    if rel["python_experimental"]:
        text += "; %s experimental" % ", ".join("cp" + p.replace(".", "") for p in rel["python_experimental"])
    return text


def _floor(cuda_row, policy):
    if policy == "strict" and cuda_row["strict_driver"]:
        return cuda_row["strict_driver"], "the CUDA %s toolkit driver" % cuda_row["cuda"]
    return cuda_row["minor_floor"], "CUDA %s.x minor-version compatibility" % cuda_row["cuda"].split(".")[0]


def _describe_ccs(ccs):
    names = sorted({arch_name(c) for c in ccs if arch_name(c)})
    text = ", ".join(_cc_text(c) for c in ccs)
    word = "capability" if len(ccs) == 1 else "capabilities"
    return "GPU compute %s %s%s" % (word, text, " (%s)" % "/".join(names) if names else "")


# ---- evaluation of one (release, variant) -------------------------------------------------------
def _evaluate(rel, w, version, driver, ccs, py, policy, driver_text=None, pinned=False):
    """Return (problems, warnings, reasons) for wheel row ``w`` of release ``rel`` on this host."""
    problems, warnings, reasons = [], [], []
    dtext = driver_text or (_vtext(driver) if driver else None)
    variant = w["variant"]
    label = "%s+%s" % (version, variant)
    if py is not None:
        support = _python_support(rel, py)
        if support is None:
            problems.append(("python", "torch %s has no wheels for Python %s (%s)"
                             % (version, _pytext(py), _python_range(rel))))
        elif support == "experimental":
            warnings.append("Python %s is experimental for torch %s (RELEASE.md)" % (_pytext(py), rel["series"]))
        else:
            reasons.append("Python %s is in torch %s's wheel range (%s)." % (
                _pytext(py), rel["series"], _python_range(rel)))
    if w["status"] == "experimental":
        warnings.append("%s is marked experimental for torch %s in RELEASE.md (the wheels are published)"
                        % (variant, rel["series"]))
    if variant == "cpu":
        return problems, warnings, reasons
    cuda_row = CUDA_VARIANTS[variant]
    floor, why = _floor(cuda_row, policy)
    if driver is None:
        problems.append(("driver", "no NVIDIA driver version is known for this host, and %s needs driver >= %s"
                         % (variant, floor), floor))
    elif driver < parse_driver(floor):
        problems.append(("driver", "driver %s is older than %s, the minimum for %s (%s): update the driver or "
                         "rent another host" % (dtext, floor, variant, why), floor))
    else:
        reasons.append("Driver %s runs %s wheels: it is at least %s (%s)." % (dtext, variant, floor, why))
        strict = cuda_row["strict_driver"]
        if policy == "minor" and strict and driver < parse_driver(strict):
            warnings.append("driver %s is below %s, the toolkit driver for CUDA %s: %s runs under CUDA minor-version "
                            "compatibility with a limited feature set; PTX JIT of newer code and torch.compile "
                            "(Triton) may fail, so prefer a driver >= %s"
                            % (dtext, strict, cuda_row["cuda"], label, strict))
        elif strict is None:
            warnings.append("the toolkit driver for CUDA %s is not in the table: only the %s floor %s was "
                            "checked" % (cuda_row["cuda"], why, floor))
    uncovered, unknown = [], False
    for cc in ccs:
        cov = coverage(w, cc)
        if cov is None:
            uncovered.append(cc)
        elif cov[0] == "unknown":
            unknown = True
        elif cov[0] == "ptx":
            strict = cuda_row["strict_driver"]
            if driver is not None and strict and driver < parse_driver(strict):
                problems.append(("arch", "GPU compute capability %s runs %s only through PTX JIT (%s), which needs "
                                 "driver >= %s (\"the provided PTX was compiled with an unsupported toolchain\")"
                                 % (_cc_text(cc), label, cov[1], strict)))
            else:
                warnings.append("GPU compute capability %s runs %s through PTX JIT (%s): the first launch of each "
                                "kernel compiles it" % (_cc_text(cc), label, cov[1]))
        else:
            exact = cov[1] == "sm_%d%d" % cc
            reasons.append("%s wheels carry kernels for compute capability %s (%s%s)." % (
                label, _cc_text(cc), cov[1], "" if exact else ", binary-compatible within %d.x" % cc[0]))
    if uncovered:
        hint = first_covering(ccs)
        msg = "%s %s no kernels in torch %s" % (
            _describe_ccs(uncovered), "has" if len(uncovered) == 1 else "have", label)
        if hint:
            msg += ": use torch >= %s with %s" % hint
        problems.append(("arch", msg))
    if unknown:
        # A row without its arch list covers no GPU: installing it would be a guess.
        problems.append(("arch", "torch %s has no architecture list in the table, so it is treated as covering no "
                         "GPU: add the list from its source (RELEASE.md's CUDA support matrix) first" % label))
    return problems, warnings, reasons


# ---- the solver ---------------------------------------------------------------------------------
def _candidate_series(pinned):
    if pinned:
        return [pinned]
    default = parse_torch_version(DEFAULT_TORCH)["series"]
    order = [r["series"] for r in RELEASES]
    i = order.index(default)
    return order[i:] + list(reversed(order[:i]))


def _cuda_tuple(variant):
    return tuple(int(p) for p in CUDA_VARIANTS[variant]["cuda"].split("."))


def driver_cuda(driver):
    """What a driver runs, from the table: {"major": CUDA major under minor-version compatibility,
    "native": newest CUDA version (tuple) whose toolkit driver it meets}; None values when below every floor."""
    drv = parse_driver(driver) if not isinstance(driver, tuple) else driver
    majors = [_cuda_tuple(v)[0] for v, row in CUDA_VARIANTS.items() if drv >= parse_driver(row["minor_floor"])]
    native = [_cuda_tuple(v) for v, row in CUDA_VARIANTS.items()
              if row["strict_driver"] and drv >= parse_driver(row["strict_driver"])]
    return {"major": max(majors) if majors else None, "native": max(native) if native else None}


def _tier(variant, driver):
    """0: the driver's CUDA major, run natively; 1: that major, minor-version compatibility; 2: an older
    major; 3: a newer major (the driver cannot run it)."""
    if driver is None:
        return 0
    dc = driver_cuda(driver)
    major = _cuda_tuple(variant)[0]
    if dc["major"] is None or major > dc["major"]:
        return 3
    if major < dc["major"]:
        return 2
    strict = CUDA_VARIANTS[variant]["strict_driver"]
    return 0 if strict and driver >= parse_driver(strict) else 1


def _why_variant(series, variant, driver, driver_text):
    """One sentence: why ``auto`` took ``variant`` among the builds of ``series`` that run here."""
    cuda = CUDA_VARIANTS[variant]["cuda"]
    tier = _tier(variant, driver)
    if tier == 0:
        why = "driver %s runs its CUDA %s natively" % (driver_text, cuda)
    elif tier == 1:
        why = ("driver %s runs no CUDA %s build of torch %s natively, and %s is the oldest CUDA it runs through "
               "minor-version compatibility" % (driver_text, cuda.split(".")[0], series, cuda))
    else:
        why = ("no build of torch %s for the driver's own CUDA major runs every GPU here, and driver %s runs CUDA %s"
               % (series, driver_text, cuda))
    return "Of torch %s's builds that run here, %s is preferred: %s." % (series, variant, why)


def rank_variants(series, driver=None):
    """The CUDA builds of ``series``, in the order ``auto`` tries them on ``driver`` (a tuple or None).

    Stable before experimental; then the driver's own CUDA major run natively (DEFAULT_PREFER order:
    cu121, then the newest), then that major under minor-version compatibility (oldest CUDA first), then
    older majors (DEFAULT_PREFER order). The field's map (vast-ai/base-image promote-pytorch.yml: driver
    CUDA 12.1-12.6 -> cu126, 12.8-12.9 -> cu128, 13.0-13.1 -> cu130) is this order on current releases.
    """
    order = list(DEFAULT_PREFER)

    def key(w):
        v = w["variant"]
        tier = _tier(v, driver)
        within = _cuda_tuple(v) if tier == 1 else (order.index(v) if v in order else len(order),)
        return (w["status"] == "experimental", tier, within, v)

    return [w["variant"] for w in sorted((w for w in wheels_for(series) if w["variant"] in CUDA_VARIANTS), key=key)]


def _ordered_variants(series, requested, prefer, driver=None):
    if requested != "auto":
        return [requested]
    ranked = rank_variants(series, driver)
    first = [v for v in (prefer or ()) if v in ranked]
    return first + [v for v in ranked if v not in first]


def newest_runnable(driver_version, compute_capabilities, python_version=None, driver_policy="minor"):
    """The newest (release, variant) in the table that runs every GPU on this driver (and Python, when
    given), as {"torch_version", "variant", "requirement", "index_url"}; None when no build does."""
    driver = parse_driver(driver_version)
    ccs = [parse_cc(c) for c in compute_capabilities or []]
    py = parse_python(python_version) if python_version not in (None, "") else None
    if any(_gpu_too_new(driver, cc) for cc in ccs):
        return None
    for rel in reversed(RELEASES):
        for variant in rank_variants(rel["series"], driver):
            problems, _unused, _unused = _evaluate(rel, wheel(rel["series"], variant), rel["patch"], driver, ccs, py,
                                                   driver_policy)
            if not problems:
                return {"torch_version": rel["patch"], "variant": variant,
                        "requirement": "torch==%s+%s" % (rel["patch"], variant), "index_url": index_url(variant)}
    return None


def _gpu_too_new(driver, cc):
    row = gpu_driver_floor(cc)
    return row if row and driver < parse_driver(row["driver"]) else None


def solve(driver_version, compute_capabilities, torch_version=None, python_version=None, requested_variant="auto",
          prefer=(), driver_policy="minor"):
    """Pick the torch wheel for a host, or raise NoCompatibleWheel saying why.

    ``driver_version``: the NVIDIA driver ("535.129.03") or None; ``compute_capabilities``: one per
    GPU ("8.0", (9, 0), ...), empty when the host has none; ``torch_version``: a pin ("2.5.1",
    "2.5", "2.5.1+cu121") or None for the house default; ``requested_variant``: "auto", "cpu" or
    "cuXYZ"; ``prefer``: CUDA variants to try first within a release, in this order (a wheelhouse's
    builds); the others follow in ``rank_variants`` order. With ``auto`` the pick is the first build in
    that order that runs every GPU on this driver; when none of the release's builds does, the refusal
    names the newest build in the table that would (``newest_runnable``).
    """
    if driver_policy not in DRIVER_POLICIES:
        raise InvalidInput("driver_policy must be one of %s" % ", ".join(DRIVER_POLICIES))
    requested = (requested_variant or "auto").strip().lower()
    driver = parse_driver(driver_version) if driver_version not in (None, "") else None
    driver_text = str(driver_version).strip() if driver is not None else None
    ccs = [parse_cc(c) for c in (compute_capabilities or [])]
    py = parse_python(python_version) if python_version not in (None, "") else None

    pinned_series, pinned_release = None, None
    if torch_version not in (None, ""):
        pin = parse_torch_version(torch_version)
        if pin["local"]:
            if requested == "auto":
                requested = pin["local"]
            elif requested != pin["local"]:
                raise NoCompatibleWheel("torch pin %s carries the label +%s, which contradicts the requested variant "
                                        "%s" % (torch_version, pin["local"], requested))
        if release(pin["series"]) is None:
            raise NoCompatibleWheel("torch %s is not in the compatibility table (%s to %s): add its row to "
                                    "gpufleet/host/pytorch/table.py first" % (
                                        pin["release"], RELEASES[0]["series"], RELEASES[-1]["series"]))
        pinned_series = pin["series"]
        pinned_release = pin["release"] + pin["pre"] if len(pin["release"].split(".")) > 2 else None

    if requested != "auto" and requested != "cpu" and requested not in CUDA_VARIANTS:
        raise NoCompatibleWheel("variant %r is not one this matrix knows (cpu, %s)"
                                % (requested, ", ".join(sorted(CUDA_VARIANTS))))

    want_cpu = requested == "cpu" or (requested == "auto" and not ccs)
    if requested not in ("auto", "cpu") and not ccs:
        raise NoCompatibleWheel("%s was requested but the host reports no NVIDIA GPU: request variant cpu, or fix the "
                                "driver / GPU visibility first" % requested)
    if not want_cpu and driver is None:
        raise NoCompatibleWheel("the host reports GPUs (compute capability %s) but no NVIDIA driver version: "
                                "install or repair the driver first, or request variant cpu"
                                % ", ".join(_cc_text(c) for c in ccs))
    if not want_cpu:
        for cc in ccs:
            row = _gpu_too_new(driver, cc)
            if row:
                raise NoCompatibleWheel(
                    "GPU compute capability %s (%s) needs driver >= %s (CUDA %s, the first CUDA release with its "
                    "kernels); driver %s cannot run it with any torch build: update the driver to >= %s"
                    % (_cc_text(cc), row["name"], row["driver"], row["cuda"], driver_text, row["driver"]))

    failures = []
    for series in _candidate_series(pinned_series):
        rel = release(series)
        version = pinned_release or rel["patch"]
        variants = ["cpu"] if want_cpu else _ordered_variants(series, requested, prefer, driver)
        for variant in variants:
            w = wheel(series, variant)
            if w is None:
                published = [x["variant"] for x in wheels_for(series)]
                last = [r["series"] for r in RELEASES if wheel(r["series"], variant)]
                msg = "torch %s has no %s wheels (published: %s)" % (series, variant, ", ".join(published))
                if last:
                    msg += "; %s wheels exist for torch %s to %s" % (variant, last[0], last[-1])
                failures.append((series, variant, [("missing", msg)]))
                continue
            problems, warnings, reasons = _evaluate(rel, w, version, driver, ccs if not want_cpu else [], py,
                                                    driver_policy, driver_text, bool(pinned_series))
            if problems:
                failures.append((series, variant, problems))
                continue
            if requested == "auto" and not want_cpu:
                reasons = [_why_variant(series, variant, driver, driver_text)] + reasons
            return _result(rel, version, variant, reasons, warnings, failures, pinned_series, requested,
                           driver_policy, pinned_release is not None)
    message = _failure_message(failures, py)
    if not want_cpu and any(p[0] in ("arch", "driver") for _unused, _unused, probs in failures for p in probs):
        if requested != "auto":
            # A pinned variant the GPUs or the driver cannot run: say what variant auto takes of the same release.
            try:
                auto = solve(driver_text, ccs, torch_version=pinned_release or pinned_series,
                             python_version=python_version, driver_policy=driver_policy)
            except CompatError:
                auto = None
            if auto:
                raise NoCompatibleWheel("%s; variant auto picks torch %s here (%s from %s)" % (
                    message, auto["local_version"], auto["requirement"], auto["index_url"]))
            message += "; variant auto has no torch %s build for it either" % (pinned_release or pinned_series
                                                                               or DEFAULT_TORCH)
        newest = newest_runnable(driver_text, ccs, python_version=python_version, driver_policy=driver_policy)
        if newest:
            message += ("; the newest build in the table that runs %s on driver %s%s is torch %s+%s (%s from %s)"
                        % (_describe_ccs(ccs), driver_text, " with Python %s" % _pytext(py) if py else "",
                           newest["torch_version"], newest["variant"], newest["requirement"], newest["index_url"]))
        else:
            message += "; no build in the table runs %s on driver %s" % (_describe_ccs(ccs), driver_text)
    raise NoCompatibleWheel(message)


def _result(rel, version, variant, reasons, warnings, failures, pinned_series, requested, policy, pinned_full):
    lead = []
    if variant == "cpu":
        lead.append("Variant cpu was requested." if requested == "cpu" else
                    "The host reports no NVIDIA GPU, so the CPU build is installed.")
    elif requested not in ("auto", "cpu"):
        lead.append("Variant %s was requested." % variant)
    if pinned_series and pinned_full:
        lead.append("torch %s is pinned." % version)
    elif pinned_series:
        lead.append("torch %s is pinned; %s is its release in the table." % (pinned_series, version))
    elif version == DEFAULT_TORCH:
        lead.append("torch %s is the house default (the last release with cu121 wheels)." % version)
    else:
        first = failures[0] if failures else None
        why = first[2][0][1] if first else "it does not fit this host"
        lead.append("The default torch %s does not fit this host (%s); torch %s is the first release that does."
                    % (DEFAULT_TORCH, why, version))
    cuda_row = CUDA_VARIANTS.get(variant)
    return {
        "torch_version": version,
        "variant": variant,
        "index_url": index_url(variant),
        "local_version": "%s+%s" % (version, variant),
        "requirement": "torch==%s+%s" % (version, variant),
        "cuda_version": cuda_of(variant),
        "driver_floor": _floor(cuda_row, policy)[0] if cuda_row else None,
        "driver_policy": policy,
        "reasons": lead + reasons,
        "warnings": warnings,
    }


def _failure_message(failures, py):
    """The most useful reason among the wheels tried (none of which fit)."""
    if not failures:
        return "no torch wheel fits this host"

    def has(kind, probs):
        return any(p[0] == kind for p in probs)

    def only(kind, probs):
        return all(p[0] == kind for p in probs)

    if all(has("python", probs) for _unused, _unused, probs in failures):
        series = {s for s, _unused, _unused in failures}
        if len(series) == 1:
            return next(p[1] for p in failures[0][2] if p[0] == "python")
        return "no torch release in the table has wheels for Python %s" % _pytext(py)
    rest = [f for f in failures if not has("python", f[2])]
    if all(only("missing", probs) for _unused, _unused, probs in rest):
        return rest[0][2][0][1]
    rest = [f for f in rest if not only("missing", f[2])]
    driver_probs = [p for _unused, _unused, probs in rest for p in probs if p[0] == "driver"]
    for _unused, _unused, probs in rest:
        if only("arch", probs):
            if driver_probs:  # the other builds need a newer driver: say both
                return probs[0][1] + "; " + min(driver_probs, key=lambda p: parse_driver(p[2]))[1]
            return probs[0][1]
    if all(has("driver", probs) for _unused, _unused, probs in rest):
        return min(driver_probs, key=lambda p: parse_driver(p[2]))[1]
    return "no torch wheel fits this host: " + "; ".join(p[1] for p in rest[0][2])
