#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module ctk_packages: installed NVIDIA Container Toolkit packages, checked against the floor."""

DOCUMENTATION = r"""
---
module: ctk_packages
short_description: Read the NVIDIA Container Toolkit package versions and check them against the security floor
description:
  - Asks C(dpkg-query) for the four packages of the NVIDIA Container Toolkit (C(nvidia-container-toolkit),
    C(nvidia-container-toolkit-base), C(libnvidia-container-tools), C(libnvidia-container1)) and checks them
    with C(gpufleet.host.cuda.ctk.check_versions) - all four present, all at one version, none below the floor (which
    names the CVEs fixed since), plus informational findings.
  - Returns C(ansible_facts.nvidia_container_toolkit). Changes nothing on the host and never fails because of
    what it finds; the caller decides (the C(nvidia_container_toolkit) role fails only when asked to).
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  floor:
    description:
      - Lowest acceptable toolkit version (Debian version syntax). Default, the project's policy floor
        C(gpufleet.host.cuda.ctk.FLOOR) (1.19.1; CVE-2026-24260, NVIDIA bulletin 5850, is fixed in 1.19.1 only).
    type: str
  warn:
    description:
      - Emit an Ansible warning for each finding of severity C(error) or C(warning).
    type: bool
    default: true
notes:
  - Supports check mode; the module never changes anything. It runs C(dpkg-query -W) only.
  - A package counts as installed when dpkg reports it installed (status C(ii)/C(hi)); one only unpacked or
    half-configured is listed under C(not_configured) and treated as missing.
seealso:
  - module: gpufleet.fleet.ctk_config
extends_documentation_fragment:
  - gpufleet_attributes
  - gpufleet_attributes.facts
  - gpufleet_attributes.read_only
  - gpufleet_attributes.facts_module
"""

EXAMPLES = r"""
- name: Read the installed toolkit packages
  ctk_packages:

- name: Stop when the toolkit is below the floor or mixed
  ansible.builtin.assert:
    that: not ansible_facts['nvidia_container_toolkit']['below_floor']
          and not ansible_facts['nvidia_container_toolkit']['version_mismatch']
    fail_msg: "{{ ansible_facts['nvidia_container_toolkit']['findings'] | map(attribute='message') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(nvidia_container_toolkit).
  returned: always
  type: dict
  contains:
    nvidia_container_toolkit:
      description: Toolkit package facts.
      returned: always
      type: dict
      contains:
        installed:
          description: Each of the four packages with its installed version, or null.
          type: dict
          sample:
            nvidia-container-toolkit: "1.20.0-1"
            nvidia-container-toolkit-base: "1.20.0-1"
            libnvidia-container-tools: "1.20.0-1"
            libnvidia-container1: "1.19.0-1"
        not_configured:
          description: Packages dpkg knows in another state (unpacked, half-configured, config-files), with that state.
          type: dict
          sample: {}
        version:
          description: The one version all installed packages share, or null when none is installed or they differ.
          type: str
          sample: "1.20.0-1"
        floor:
          description: The floor checked against.
          type: str
          sample: "1.19.1"
        findings:
          description: >-
            From gpufleet.host.cuda.ctk.check_versions - code (not_installed, missing_package, unparseable_version,
            version_mismatch, below_floor, below_preferred, unverified_cve), severity (error, warning, info),
            message, and packages / versions / cves where they apply.
          type: list
          elements: dict
        finding_codes:
          description: The distinct finding codes, sorted.
          type: list
          elements: str
        installed_any:
          description: At least one of the four packages is installed.
          type: bool
        below_floor:
          description: A package is installed below the floor.
          type: bool
        version_mismatch:
          description: The installed packages are not all at one version.
          type: bool
        ok:
          description: >-
            All four installed at one version at or above the floor (no finding of severity error or warning).
          type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpufleet.host.cuda import ctk
from ansible.module_utils.gpufleet.host.system import hostctx

_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"


def parse_dpkg_query(text):
    """dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' output -> (installed, not_configured).

    installed: {package: version} for packages dpkg has installed (status letter 'i'); not_configured:
    {package: status} for the others it lists (unpacked, half-configured, config-files only)."""
    installed, other = {}, {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or not parts[0]:
            continue
        name, version, status = parts[0].split(":", 1)[0], parts[1].strip(), parts[2].strip()
        if len(status) >= 2 and status[1] == "i" and version:
            installed[name] = version
        elif status[1:2] not in ("n", ""):  # 'n' (not-installed) is what dpkg lists for a forgotten package
            other[name] = status
    return installed, other


def summarize(installed, not_configured, floor):
    findings = ctk.check_versions(installed, floor=floor)
    codes = sorted({f["code"] for f in findings})
    versions = set(installed.values())
    version = None
    if len(versions) == 1:
        version = versions.pop()
    return {
        "installed": {p: installed.get(p) for p in ctk.PACKAGES},
        "not_configured": {p: s for p, s in not_configured.items() if p in ctk.PACKAGES},
        "version": version if "version_mismatch" not in codes else None,
        "floor": floor,
        "findings": findings,
        "finding_codes": codes,
        "installed_any": any(installed.get(p) for p in ctk.PACKAGES),
        "below_floor": "below_floor" in codes,
        "version_mismatch": "version_mismatch" in codes,
        "ok": not any(f["severity"] in ("error", "warning") for f in findings),
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            floor=dict(type="str"),
            warn=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    floor = module.params["floor"] or ctk.FLOOR
    try:
        ctk.parse_version(floor)
    except ctk.VersionError as exc:
        module.fail_json(msg="floor: %s" % exc)
    dpkg_query = module.get_bin_path("dpkg-query", required=True)
    # rc 1 only means some of the packages are unknown to dpkg; they are then simply not listed.
    rc, out, err = hostctx.command_runner(module.get_bin_path)([dpkg_query, "-W", "-f", _FORMAT] + list(ctk.PACKAGES))
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if rc not in (0, 1):
        module.fail_json(msg="dpkg-query failed (rc=%s): %s" % (rc, err.strip()), rc=rc, stderr=err)
    installed, not_configured = parse_dpkg_query(out)
    facts = summarize(installed, not_configured, floor)
    if module.params["warn"]:
        for finding in facts["findings"]:
            if finding["severity"] in ("error", "warning"):
                module.warn("nvidia container toolkit: %s" % finding["message"])
    module.exit_json(changed=False, ansible_facts={"nvidia_container_toolkit": facts})


if __name__ == "__main__":
    main()
