#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module torch_variant: pick the torch wheel for a host and check an install request or an install."""

DOCUMENTATION = r"""
---
module: torch_variant
short_description: Pick the torch wheel (version and CUDA variant) for a host, refuse unsafe requests, check an install
description:
  - Solves which torch wheel fits the host from the compatibility matrix of C(gpufleet.host.pytorch.compat)
    (driver floors, kernel coverage per compute capability, Python ranges), for C(variant=auto) or a requested
    variant, and says why.
  - Refuses an install request that is not safe or cannot work, before anything is installed - a requirement that is
    not an exact C(name==X.Y.Z[+local]) pin, C(--extra-index-url) anywhere (also in the host's C(PIP_EXTRA_INDEX_URL)),
    C(--trusted-host), an index URL that is not https, a local label that contradicts the variant, a Python the
    wheels do not exist for, a variant the release was not built for, and, when I(wheelhouse_files) is given, a
    pinned package the wheelhouse holds no wheel of.
  - With I(installed), checks what the venv's Python reports (C(torch.__version__), C(torch.version.cuda)) against
    the selection and fails, naming both, on a mismatch.
  - Returns C(ansible_facts.torch_selection). Changes nothing on the host.
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  torch_version:
    description: Exact torch release C(X.Y.Z), optionally with its local label (C(2.5.1+cu121)).
    type: str
    required: true
  variant:
    description:
      - C(auto) picks the variant from I(driver_version) and I(compute_capabilities) (C(cpu) when the host has no GPU);
        C(cpu) or C(cuXYZ) asks for that build.
      - C(auto) takes the first build of I(torch_version) that runs every GPU on this driver, in this order - stable
        before experimental; the driver's own CUDA major run natively (cu121 first, then the newest); that major under
        minor-version compatibility (oldest CUDA first); older CUDA majors. A build whose architecture list lacks a
        GPU is never taken. When no build of the release runs the GPUs on this driver, the module fails and names the
        newest release and variant that would.
      - A requested CUDA variant is checked against the driver and GPUs when the host reports GPUs; when it reports
        none, only the release, the Python and the published variants are checked, with a warning. When the driver
        or a GPU cannot run it, the refusal names the build C(auto) picks of the same release, or, when there is
        none, the newest release and variant that would run.
    type: str
    default: auto
  python_version:
    description: Python C(major.minor) the venv is built with; empty skips the Python check.
    type: str
    default: ""
  driver_version:
    description:
      - NVIDIA driver version (C(ansible_facts.gpu.driver_version) from M(gpufleet.fleet.gpu_facts)); empty when none.
    type: str
    default: ""
  compute_capabilities:
    description: Compute capability of each GPU (C(8.0), C(9.0)); empty when the host has no GPU.
    type: list
    elements: str
    default: []
  driver_policy:
    description: C(minor) uses CUDA's minor-version-compatibility driver floors, C(strict) the toolkit drivers.
    type: str
    choices: [minor, strict]
    default: minor
  packages:
    description: The other exact pins installed with torch (torchvision, torchaudio, nvidia-ml-py).
    type: list
    elements: str
    default: []
  index_url:
    description: Index URL the request uses instead of the variant's own PyTorch index; empty uses the variant's index.
    type: str
    default: ""
  wheelhouse_files:
    description:
      - File names of the wheelhouse the host installs from with C(--no-index); every pin must have a wheel there.
      - With C(variant=auto), the builds the wheelhouse holds are tried first among those that fit the host.
      - PyPI's unlabelled torch wheel (C(torch-2.14.1-...whl)) counts as the build PyPI makes of that release on
        Linux x86_64 (C(cu130) for 2.14); torch is then pinned without the label, and the install is checked by
        C(torch.__version__) and C(torch.version.cuda).
      - Omit when the host installs from an index.
      - With I(python_version), the torch wheels of the selected release must include one for that Python (C(cp311)
        for 3.11); else the request is refused naming the Python and the C(pip download) command that adds it.
    type: list
    elements: str
  wheelhouse:
    description: The wheelhouse folder on the controller, named in the refusals (where the missing wheel goes).
    type: str
    default: ""
  installed:
    description:
      - What the venv's Python reports after install, C(version) (C(torch.__version__)) and C(cuda)
        (C(torch.version.cuda), null for a CPU build). When given, the module fails unless it matches the selection.
    type: dict
notes:
  - Supports check mode; the module never changes anything. It reads the host's C(PIP_EXTRA_INDEX_URL),
    C(PIP_TRUSTED_HOST) and C(PIP_INDEX_URL) environment variables to refuse sources pip would otherwise add.
seealso:
  - module: gpufleet.fleet.gpu_facts
extends_documentation_fragment:
  - gpufleet_attributes
  - gpufleet_attributes.facts
  - gpufleet_attributes.read_only
  - gpufleet_attributes.facts_module
"""

EXAMPLES = r"""
- name: Pick the torch wheel for this host from its GPU facts
  torch_variant:
    torch_version: "2.5.1"
    variant: auto
    python_version: "{{ '%s.%s' | format(ansible_facts.python.version.major, ansible_facts.python.version.minor) }}"
    driver_version: "{{ ansible_facts['gpu']['driver_version'] | default('', true) }}"
    compute_capabilities: "{{ ansible_facts['gpu']['gpus'] | map(attribute='compute_capability') | select | list }}"
    packages: [torchvision==0.20.1, torchaudio==2.5.1]

- name: Show why
  ansible.builtin.debug:
    msg: "{{ ansible_facts['torch_selection']['reasons'] + ansible_facts['torch_selection']['warnings'] }}"

- name: Check the installed torch is the build that was asked for
  torch_variant:
    torch_version: "2.5.1"
    variant: cu121
    installed: {version: "2.5.1+cu121", cuda: "12.1"}
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(torch_selection).
  returned: always
  type: dict
  contains:
    torch_selection:
      description: The wheel picked for this host and why.
      returned: always
      type: dict
      contains:
        torch_version:
          description: torch release installed.
          type: str
          sample: "2.5.1"
        variant:
          description: Local label of the build (C(cpu), C(cu121) ...).
          type: str
          sample: cu121
        requirement:
          description: The exact torch pin.
          type: str
          sample: "torch==2.5.1+cu121"
        local_version:
          description: What C(torch.__version__) must read after install.
          type: str
          sample: "2.5.1+cu121"
        cuda_version:
          description: What C(torch.version.cuda) must read after install (null for cpu).
          type: str
          sample: "12.1"
        index_url:
          description: The only index pip may use (I(index_url) or the variant's PyTorch index).
          type: str
          sample: https://download.pytorch.org/whl/cu121
        requirements:
          description: Every pin of the request, torch first.
          type: list
          elements: str
        driver_floor:
          description: Lowest driver that runs the variant under I(driver_policy); null for cpu.
          type: str
        driver_policy:
          description: The driver_policy option.
          type: str
        python_version:
          description: The python_version option.
          type: str
        reasons:
          description: Why this wheel, one sentence each.
          type: list
          elements: str
        warnings:
          description: What may still go wrong with it.
          type: list
          elements: str
        installed:
          description: With I(installed) only - version, cuda, ok and message of the check.
          type: dict
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpufleet.host.pytorch import check as torchcheck
from ansible.module_utils.gpufleet.host.pytorch import compat as tc
from ansible.module_utils.gpufleet.host.pytorch import parse as torchparse
from ansible.module_utils.gpufleet.host.pytorch import table as torchtable

_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-.*\.whl$", re.IGNORECASE)


def _canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _pin(req):
    """"torchvision==0.20.1" -> ("torchvision", "0.20.1"); None when not a plain exact pin."""
    m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;#]+)\s*$", req)
    return (_canon(m.group(1)), m.group(2)) if m else None


def _wheel_versions(files):
    """{canonical package name: [version from each wheel file name]} of a wheelhouse's files."""
    have = {}
    for f in files or []:
        m = _WHEEL_NAME.match(os.path.basename(f))
        if m:
            have.setdefault(_canon(m.group("name")), []).append(m.group("version"))
    return have


def wheelhouse_problems(requirements, files):
    """Pins the wheelhouse holds no wheel of, as validate_request-style problems."""
    have = _wheel_versions(files)
    problems = []
    for req in requirements:
        pin = _pin(req)
        if pin is None:
            continue
        name, version = pin
        found = have.get(name, [])
        if any(v == version or ("+" not in version and v.split("+")[0] == version) for v in found):
            continue
        offers = ", ".join("%s %s" % (name, v) for v in sorted(found)) or "no %s wheel at all" % name
        problems.append({"code": "not_in_wheelhouse", "item": req,
                         "message": "the wheelhouse has no wheel for %s (asked: %s %s); it holds %s: add the asked "
                                    "wheel to the wheelhouse or ask for what it holds" % (req, name, version, offers)})
    return problems


_WHEEL_TAGS = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)"
                         r"-(?P<plat>[^-]+)\.whl$", re.IGNORECASE)


def wheelhouse_python_problems(requirement, files, python_version, wheelhouse="", index_url=""):
    """The torch wheel of ``requirement`` for ``python_version`` missing from a wheelhouse that holds it for others.

    A wheelhouse with no wheel of that release at all is ``wheelhouse_problems``' to report; here the release is
    there, built for other Pythons (``cp311`` only, asked 3.12): pip with --no-index would fail mid-install with
    "No matching distribution" and name no Python.
    """
    pin = _pin(requirement)
    if pin is None or not python_version:
        return []
    name, version = pin
    want = "cp" + "".join(python_version.split(".")[:2])
    tags = set()
    for f in files or []:
        m = _WHEEL_TAGS.match(os.path.basename(f))
        if not m or _canon(m.group("name")) != name:
            continue
        have = m.group("version")
        if have == version or ("+" not in version and have.split("+")[0] == version):
            tags.update(m.group("py").lower().split("."))
    if not tags or want in tags or "py3" in tags:
        return []
    held = ", ".join("Python %s.%s" % (t[2], t[3:]) if re.match(r"^cp3\d+$", t) else t for t in sorted(tags))
    where = wheelhouse or "the wheelhouse"
    command = ("pip download --only-binary=:all: --no-deps --python-version %s --platform manylinux_2_28_x86_64 -d %s "
               "'%s'%s" % (python_version, wheelhouse or "WHEELHOUSE", requirement,
                           " --index-url %s" % index_url if index_url else ""))
    return [{"code": "wheelhouse_python", "item": requirement,
             "message": "%s holds %s %s for %s only, none for Python %s (the Python torch is installed into): add "
                        "it on the controller with `%s` (scripts/wheelhouse fills .wheelhouse/torch for Python 3.11 "
                        "only), or empty torch_pip_wheelhouse to install from the index"
                        % (where, name, version, held, python_version, command)}]


def wheelhouse_variants(files, torch_version):
    """Variants of ``torch_version``'s release the wheelhouse holds wheels of, in DEFAULT_PREFER order.

    A labelled wheel (``torch-2.5.1+cu121-...``) is its label's variant. An unlabelled one
    (``torch-2.14.1-...``, PyPI's build) is the variant PyPI builds that release with on Linux x86_64
    (``pypi_default`` in the table), when the table knows it.
    """
    try:
        pin = torchparse.parse_torch_version(torch_version)
    except torchparse.InvalidInput:
        return []
    found = set()
    for version in _wheel_versions(files).get("torch", []):
        release, _unused, label = version.partition("+")
        if release != pin["release"] + pin["pre"]:
            continue
        if label:
            found.add(label.lower())
        else:
            rel = torchtable.release(pin["series"])
            if rel and rel["pypi_default"]:
                found.add(rel["pypi_default"])
    order = list(torchtable.DEFAULT_PREFER) + ["cpu"]
    return sorted(found, key=lambda v: (order.index(v) if v in order else len(order), v))


def unlabelled_pin(selection, files):
    """``torch==X.Y.Z`` when the wheelhouse holds only PyPI's unlabelled wheel of the selected build, else None.

    pip compares local labels: ``torch==2.14.1+cu130`` does not match ``torch-2.14.1-...whl``, though that
    wheel is the cu130 build (its ``torch.__version__`` reads ``2.14.1+cu130``).
    """
    version = selection["torch_version"]
    versions = _wheel_versions(files).get("torch", [])
    if selection["local_version"] in versions or version not in versions:
        return None
    rel = torchtable.release(torchparse.parse_torch_version(version)["series"])
    if rel and rel["pypi_default"] == selection["variant"]:
        return "torch==%s" % version
    return None


def _join(problems):
    out = []
    for x in problems:
        if x["message"] not in out:
            out.append(x["message"])
    return "; ".join(out)


def select(p):
    """Run the solver for the module's parameters; returns the selection dict (raises torchparse.CompatError)."""
    requested = (p["variant"] or "auto").strip().lower()
    ccs = p["compute_capabilities"] or []
    py = p["python_version"] or None
    driver = p["driver_version"] or None
    if requested in ("auto", "cpu") or ccs:
        held = wheelhouse_variants(p["wheelhouse_files"], p["torch_version"]) if requested == "auto" else []
        # Installing from a wheelhouse: of the builds that fit, take one it holds; the solver's own order after.
        prefer = tuple(v for v in held if v != "cpu")
        selection = tc.solve(driver, ccs, torch_version=p["torch_version"], python_version=py,
                             requested_variant=requested, driver_policy=p["driver_policy"], prefer=prefer)
        if prefer and selection["variant"] in prefer:
            selection["reasons"].append("The wheelhouse holds torch %s builds %s; of the builds that fit, %s is one "
                                        "of them." % (selection["torch_version"], ", ".join(held),
                                                      selection["variant"]))
        return selection
    # A CUDA variant asked for on a host that shows no GPU (an image build, a host whose driver is being
    # repaired): the release and the Python are checked through the cpu row, the variant against the table.
    pin = torchparse.parse_torch_version(p["torch_version"])
    if pin["local"] and pin["local"].lower() != requested:
        raise tc.NoCompatibleWheel("torch pin %s carries the label +%s, which contradicts the requested variant %s"
                                   % (p["torch_version"], pin["local"], requested))
    if requested not in torchtable.CUDA_VARIANTS:
        raise tc.NoCompatibleWheel("variant %r is not one this matrix knows (cpu, %s)"
                                   % (requested, ", ".join(sorted(torchtable.CUDA_VARIANTS))))
    base = tc.solve(None, [], torch_version=pin["release"] + pin["pre"], python_version=py,
                    requested_variant="cpu", driver_policy=p["driver_policy"])
    if torchtable.wheel(pin["series"], requested) is None:
        published = [w["variant"] for w in torchtable.wheels_for(pin["series"])]
        raise tc.NoCompatibleWheel("torch %s has no %s wheels (published: %s)"
                                   % (pin["series"], requested, ", ".join(published)))
    version = base["torch_version"]
    row = torchtable.CUDA_VARIANTS[requested]
    floor = row["strict_driver"] if p["driver_policy"] == "strict" and row["strict_driver"] else row["minor_floor"]
    base.update(variant=requested, index_url=torchparse.index_url(requested),
                local_version="%s+%s" % (version, requested),
                requirement="torch==%s+%s" % (version, requested), cuda_version=torchparse.cuda_of(requested),
                driver_floor=floor)
    base["reasons"] = ["Variant %s was requested." % requested] + [r for r in base["reasons"] if "cpu" not in r]
    base["warnings"] = base["warnings"] + [
        "the host reports no NVIDIA GPU: %s is installed as asked, but driver and kernel coverage were not checked "
        "(driver >= %s needed)" % (requested, floor)]
    return base


def check_installed(selection, installed):
    """(ok, message) for what the venv reports against the selection."""
    version = str(installed.get("version") or "")
    cuda = installed.get("cuda")
    ok, message = torchcheck.check_label(version, selection["variant"], cuda)
    try:
        release = torchparse.parse_torch_version(version)["release"]
    except torchparse.InvalidInput:
        release = None
    if ok and release != selection["torch_version"]:
        ok, message = False, "torch %s is installed, not %s" % (version, selection["torch_version"])
    prefix = "asked for torch %s (variant %s, torch.version.cuda=%s); the venv has torch %s " % (
        selection["local_version"], selection["variant"], selection["cuda_version"], version or "(none)")
    return ok, prefix + "(torch.version.cuda=%s): " % cuda + message


def main():
    module = AnsibleModule(
        argument_spec=dict(
            torch_version=dict(type="str", required=True),
            variant=dict(type="str", default="auto"),
            python_version=dict(type="str", default=""),
            driver_version=dict(type="str", default=""),
            compute_capabilities=dict(type="list", elements="str", default=[]),
            driver_policy=dict(type="str", default="minor", choices=list(tc.DRIVER_POLICIES)),
            packages=dict(type="list", elements="str", default=[]),
            index_url=dict(type="str", default=""),
            wheelhouse_files=dict(type="list", elements="str"),
            wheelhouse=dict(type="str", default=""),
            installed=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    requested = (p["variant"] or "auto").strip().lower()
    torch_pin = "torch==%s" % p["torch_version"].strip()
    index_url = p["index_url"].strip().split()
    problems = torchcheck.validate_request([torch_pin] + p["packages"], index_url=index_url[0] if index_url else None,
                                           extra_args=index_url[1:],
                                           variant=None if requested == "auto" else requested)
    if len(index_url) > 1:
        problems.append({"code": "bad_index", "item": p["index_url"],
                         "message": "index URL %r must be one URL, without pip options" % p["index_url"]})
    if not problems and not re.match(r"^\d+\.\d+\.\d+", p["torch_version"].strip()):
        problems.append({"code": "unpinned", "item": torch_pin,
                         "message": "torch_version %r is not an exact release X.Y.Z[+label]" % p["torch_version"]})
    for var in ("PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        if os.environ.get(var):
            problems.append({"code": var.lower(), "item": var,
                             "message": "the host's environment sets %s=%s, which pip would add to this install: "
                                        "unset it (dependency confusion / no TLS check)" % (var, os.environ[var])})
    if problems:
        module.fail_json(msg="refused: " + _join(problems), problems=problems)

    try:
        selection = select(p)
    except torchparse.CompatError as exc:
        module.fail_json(msg="refused: %s" % exc, problems=[{"code": "no_compatible_wheel", "message": str(exc)}])

    if p["wheelhouse_files"] is not None:
        plain = unlabelled_pin(selection, p["wheelhouse_files"])
        if plain:
            selection["requirement"] = plain
            selection["reasons"].append(
                "The wheelhouse holds PyPI's unlabelled torch %s wheel, which is the %s build on Linux x86_64: it "
                "is pinned as %s, and the install is checked by torch.__version__ (%s) and torch.version.cuda (%s)."
                % (selection["torch_version"], selection["variant"], plain, selection["local_version"],
                   selection["cuda_version"]))
    requirements = [selection["requirement"]] + list(p["packages"])
    problems = torchcheck.validate_request(requirements, variant=selection["variant"])
    if p["wheelhouse_files"] is not None:
        problems += wheelhouse_problems(requirements, p["wheelhouse_files"])
        problems += wheelhouse_python_problems(selection["requirement"], p["wheelhouse_files"], p["python_version"],
                                               p["wheelhouse"], selection["index_url"])
    selection.update(requirements=requirements, python_version=p["python_version"] or None,
                     index_url=p["index_url"] or selection["index_url"])
    if problems:
        module.fail_json(msg="refused: " + _join(problems), problems=problems,
                         ansible_facts={"torch_selection": selection})

    if p["installed"] is not None:
        ok, message = check_installed(selection, p["installed"])
        selection["installed"] = dict(version=p["installed"].get("version"), cuda=p["installed"].get("cuda"),
                                      ok=ok, message=message)
        if not ok:
            module.fail_json(msg=message, ansible_facts={"torch_selection": selection})
    module.exit_json(changed=False, ansible_facts={"torch_selection": selection})


if __name__ == "__main__":
    main()
