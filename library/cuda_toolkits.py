#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module cuda_toolkits: installed CUDA toolkits and the state of /usr/local/cuda, ldconfig, LD_LIBRARY_PATH."""

DOCUMENTATION = r"""
---
module: cuda_toolkits
short_description: Find installed CUDA toolkits and what /usr/local/cuda, ldconfig and LD_LIBRARY_PATH point at
description:
  - Lists every CUDA toolkit or runtime on the host - C(/usr/local/cuda-X.Y) directories, Debian's packaged
    toolkit (C(/usr/lib/cuda), C(libcudart.so.*) in the multiarch library dir, C(/usr/bin/nvcc)) and the
    C(libcudart) of pip's C(nvidia-cuda-runtime-cu11)/C(-cu12) wheels in the given site-packages dirs.
  - Reports where C(/usr/local/cuda) points (through C(/etc/alternatives) when update-alternatives manages it,
    read from files, no command is run), the CUDA/NVIDIA entries of C(/etc/ld.so.conf.d), which
    C(libcudart.so.*) sonames the system loader resolves (C(ldconfig -p)), and every C(LD_LIBRARY_PATH) entry set in
    the environment, C(/etc/environment), C(/etc/profile.d/*.sh) and shell start-up files.
  - Picks the toolkit C(/usr/local/cuda) should point at (C(chosen)) and lists C(problems) for the
    C(cuda_links) role to repair. Returns C(ansible_facts.cuda_toolkits). Changes nothing on the host.
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  pinned_version:
    description:
      - CUDA major.minor (C(12.4)) that C(/usr/local/cuda) must point at.
      - When it is not installed the facts carry a C(pinned_not_installed) problem and C(chosen) is null;
        the module itself does not fail.
    type: str
  driver_cuda_version:
    description:
      - Highest CUDA version the driver supports, for example C(ansible_facts.gpu.cuda_driver_version)
        from M(gpufleet.fleet.gpu_facts). Used to choose among toolkits when nothing is pinned.
      - Empty, the module asks the driver itself, the way M(gpufleet.fleet.gpu_facts) and
        M(gpufleet.fleet.gpu_doctor) do (NVML, else
        C(nvidia-smi -q -x)), so the doctor and the repair choose the same toolkit from the same evidence
        whichever entry point runs them. C(driver_cuda_version_source) in the facts says where the
        version came from (C(given), C(nvml), C(nvidia-smi)), null when no driver answered.
    type: str
  site_packages:
    description:
      - Python site-packages dirs searched for pip's C(nvidia/cuda_runtime/lib/libcudart.so.*); shell
        wildcards are allowed.
      - Default, the site dirs of the Python running this module plus C(/opt/gpufleet/venv/lib/python3*/site-packages).
    type: list
    elements: path
  root:
    description:
      - Prefix under which every host path is read (symlinks are followed inside it, as in a chroot).
        For tests and for inspecting a mounted image; C(/) on a real host.
    type: path
    default: /
  run_ldconfig:
    description:
      - Run C(ldconfig -p) to see which C(libcudart) sonames the loader resolves. Only when I(root=/);
        otherwise, or when this is false, the CUDA dirs of C(ld.so.conf) and the system library dirs are
        scanned instead (C(ldconfig.cache.source) says which was used).
    type: bool
    default: true
notes:
  - Supports check mode; the module never changes anything. With I(root=/) it may run C(ldconfig -p) and,
    for a Debian toolkit whose version no file states, C(nvcc --version).
  - The choice follows CUDA's compatibility rules (backward compatibility, then minor-version compatibility
    within a major); see the C(chosen.reasons).
seealso:
  - module: gpufleet.fleet.gpu_facts
extends_documentation_fragment:
  - gpufleet_attributes
  - gpufleet_attributes.facts
  - gpufleet_attributes.read_only
  - gpufleet_attributes.facts_module
"""

EXAMPLES = r"""
- name: Gather CUDA toolkit facts
  cuda_toolkits:
    driver_cuda_version: "{{ ansible_facts['gpu']['cuda_driver_version'] }}"

- name: Require CUDA 12.4 behind /usr/local/cuda
  cuda_toolkits:
    pinned_version: "12.4"
    site_packages:
      - /opt/gpufleet/venv/lib/python3*/site-packages

- name: Stop when the pinned toolkit is missing
  ansible.builtin.assert:
    that: "'pinned_not_installed' not in ansible_facts['cuda_toolkits']['problem_codes']"
    fail_msg: "{{ ansible_facts['cuda_toolkits']['problems'] | map(attribute='message') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(cuda_toolkits).
  returned: always
  type: dict
  contains:
    cuda_toolkits:
      description: CUDA layout facts (schema 1).
      returned: always
      type: dict
      contains:
        schema:
          description: Version of this layout.
          type: int
          sample: 1
        root:
          description: The prefix the host was read under.
          type: str
          sample: /
        toolkits:
          description: >-
            Every toolkit or runtime found. Each has kind (local, debian, pip), version, major_minor, major, root,
            libcudart (soname link path, or null), libcudart_real (its resolved file), nvcc (path or null),
            source_of_version (version.json, version.txt, dir_name, libcudart, nvcc --version, METADATA,
            dist-info name, libcudart soname (major only)); pip ones also site_packages and dist_info.
          type: list
          elements: dict
          sample:
            - kind: local
              version: "12.4.1"
              major_minor: "12.4"
              major: 12
              root: /usr/local/cuda-12.4
              libcudart: /usr/local/cuda-12.4/lib64/libcudart.so.12
              libcudart_real: /usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127
              nvcc: /usr/local/cuda-12.4/bin/nvcc
              source_of_version: version.json
        cuda_symlink:
          description: >-
            /usr/local/cuda - path, exists (followed), lexists, is_link, target (raw), chain (every hop),
            resolved, dangling, via_alternatives, version and toolkit_root of the toolkit it reaches.
          type: dict
        alternatives:
          description: >-
            update-alternatives groups named cuda or cuda-N, read from /etc/alternatives and
            /var/lib/dpkg/alternatives - link, link_exists, target, resolved, mode (auto/manual), master,
            alternatives (path, priority).
          type: dict
        ldconfig:
          description: >-
            conf_files (file, active, lines, entries with dir, resolved, exists, toolkit_root, toolkit_version,
            compat) of ld.so.conf(.d) naming CUDA/NVIDIA dirs; cache (source, error, libs, libcudart - soname to
            paths); libcudart (soname, path, first, resolved, toolkit_root, toolkit_version).
          type: dict
        ld_library_path:
          description: >-
            entries (path, source - "environment" or "FILE:LINE", file, line, inherited, cuda, pip, libcudart,
            nvjitlink, toolkit_root, shadowing) and shadowing (true when a CUDA dir outside pip's nvidia
            packages is on LD_LIBRARY_PATH).
          type: dict
        path_stale:
          description: >-
            PATH entries of /etc/environment and the shell start-up files that name an installed toolkit other
            than the chosen one (path, file, line, toolkit_root).
          type: list
          elements: dict
        layout:
          description: >-
            Whether the layout already does what cuda_links would make it do, judged by effect (link_ok,
            loader_ok, right; null without a chosen toolkit). A layout that is right is left as it is.
          type: dict
        pinned_version:
          description: The pinned_version option.
          type: str
        driver_cuda_version:
          description: The driver's CUDA version the choice was made with (given, or read from the driver).
          type: str
        driver_cuda_version_source:
          description: C(given), C(nvml) or C(nvidia-smi); null when the version is unknown.
          type: str
        chosen:
          description: >-
            The toolkit /usr/local/cuda should point at - root, version, major_minor, kind, libcudart, rule
            (pinned, driver_compatible, minor_version_compat, highest) and reasons; null when none is installed
            or the pinned one is missing.
          type: dict
        problems:
          description: >-
            Findings with code (cuda_link_wrong_target, cuda_link_missing, cuda_link_dangling, cuda_link_not_a_link,
            ld_library_path_shadowing, ldconfig_cuda_entries_multiple, libcudart_unresolved, pinned_not_installed),
            severity (error, warning) and message, plus details.
          type: list
          elements: dict
        problem_codes:
          description: The distinct problem codes, sorted.
          type: list
          elements: str
"""

import os
import site

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpufleet.host.cuda import find as cudafind
from ansible.module_utils.gpufleet.host.cuda import layout as cudalayout
from ansible.module_utils.gpufleet.host.cuda import read as cudaread
from ansible.module_utils.gpufleet.host.gpu import facts as gpufacts
from ansible.module_utils.gpufleet.host.system import hostctx

try:
    import pynvml
except ImportError:  # facts fall back to nvidia-smi
    pynvml = None

NVIDIA_SMI_TIMEOUT = 20


def _own_site_dirs():
    dirs = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # old virtualenv's site.py
        pass
    if getattr(site, "ENABLE_USER_SITE", False):
        dirs.append(site.getusersitepackages())
    return dirs


def _command_runner(module):
    """The host side's command runner (hostctx.command_runner): C locale, binaries found as get_bin_path finds them."""
    return hostctx.command_runner(lambda name: module.get_bin_path(name, opt_dirs=["/sbin", "/usr/sbin"]))


def _nvidia_smi(module, timeout=NVIDIA_SMI_TIMEOUT):
    # a GPU off the bus can hang nvidia-smi for minutes: killed after ``timeout`` s (rc 124)
    return _command_runner(module)(["nvidia-smi", "-q", "-x"], timeout=timeout)


def driver_cuda_version(module):
    """(version, source) from the driver, read as gpu_facts reads it; (None, None) when none answers."""
    gpu = gpufacts.gpu_facts(pynvml, lambda: _nvidia_smi(module))
    version = gpu.get("cuda_driver_version")
    return (version, gpu.get("source")) if version else (None, None)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            pinned_version=dict(type="str"),
            driver_cuda_version=dict(type="str"),
            site_packages=dict(type="list", elements="path"),
            root=dict(type="path", default="/"),
            run_ldconfig=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    root = os.path.abspath(p["root"])
    site_packages = p["site_packages"]
    if site_packages is None:
        site_packages = cudafind.default_site_packages(_own_site_dirs())
    run = _command_runner(module)
    driver_cuda, driver_source = p["driver_cuda_version"] or None, "given"
    if not driver_cuda:
        driver_cuda, driver_source = driver_cuda_version(module)
    facts = cudalayout.collect(
        cudaread.HostFS(root),
        site_packages=site_packages,
        run=run if root == "/" else None,
        run_ldconfig=p["run_ldconfig"],
        environ_ld_library_path=os.environ.get("LD_LIBRARY_PATH"),
        pinned=p["pinned_version"] or None,
        driver_cuda=driver_cuda,
    )
    facts["driver_cuda_version_source"] = driver_source if driver_cuda else None
    module.exit_json(changed=False, ansible_facts={"cuda_toolkits": facts})


if __name__ == "__main__":
    main()
