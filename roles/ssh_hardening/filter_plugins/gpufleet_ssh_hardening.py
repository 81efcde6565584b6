# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the ssh_hardening role: thin wrappers around module_utils/gpufleet/controller/checklist/sshcrypto.py,
run on the controller.

  wanted | gpufleet_ssh_crypto(supported, profile, strict_kex, release)
      -> {kex, cipher, mac, problems}: the algorithms to offer on this host, and why the role must stop (if it must)
  ssh_v_output | gpufleet_openssh_release -> '8.4' (from 'OpenSSH_8.4p1 Debian-5+deb11u3, ...')
"""
import sys
from pathlib import Path

from ansible.errors import AnsibleFilterError

if "ansible_collections" in Path(__file__).resolve().parts:  # installed as the collection gpufleet.fleet
    from ansible_collections.gpufleet.fleet.plugins.module_utils.gpufleet.controller.checklist import sshcrypto
else:  # the checkout: controller plugins do not see ansible.cfg's module_utils path, so it is read from the top
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "module_utils"))
    from gpufleet.controller.checklist import sshcrypto


def crypto(wanted, supported, profile="compatible", strict_kex=True, release=""):
    try:
        return sshcrypto.select(dict(wanted), dict(supported), profile, bool(strict_kex), str(release))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def openssh_release(text):
    return sshcrypto.openssh_release(str(text))


class FilterModule:
    def filters(self):
        return {
            "gpufleet_ssh_crypto": crypto,
            "gpufleet_openssh_release": openssh_release,
        }
