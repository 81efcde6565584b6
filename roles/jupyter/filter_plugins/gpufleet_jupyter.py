# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the jupyter role: thin wrappers around module_utils/gpufleet/host/system/jupyter.py, run on the
controller.

  settings | gpufleet_jupyter_problems               -> list of reasons to refuse the role's variables
  password | gpufleet_jupyter_hash(current_config)   -> argon2 hash (the current one when it still matches)
  settings | gpufleet_jupyter_config(hashed_password) -> the jupyter_server_config dict (refuses an unsafe one)
"""
import sys
from pathlib import Path

from ansible.errors import AnsibleFilterError

if "ansible_collections" in Path(__file__).resolve().parts:  # installed as the collection gpufleet.fleet
    from ansible_collections.gpufleet.fleet.plugins.module_utils.gpufleet.host.system import jupyter
else:  # the checkout: controller plugins do not see ansible.cfg's module_utils path, so it is read from the top
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "module_utils"))
    from gpufleet.host.system import jupyter


def problems(settings):
    return jupyter.input_problems(dict(settings))


def password_hash(password, current_config=""):
    try:
        return jupyter.hash_password(password, jupyter.current_hash(current_config))
    except jupyter.JupyterInputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def server_config(settings, hashed_password):
    config = jupyter.server_config(dict(settings), hashed_password)
    found = jupyter.config_problems(config)
    if found:
        raise AnsibleFilterError("refusing to write an unsafe Jupyter config: %s" % "; ".join(found))
    return config


class FilterModule:
    def filters(self):
        return {
            "gpufleet_jupyter_problems": problems,
            "gpufleet_jupyter_hash": password_hash,
            "gpufleet_jupyter_config": server_config,
        }
