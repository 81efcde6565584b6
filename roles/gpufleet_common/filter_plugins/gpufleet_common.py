# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the gpufleet_common role: what every role that pip-installs on a host shares, in one place.

  wheelhouse_dest | gpufleet_pip_env(index_url, isolated=False, require_hashes=False) -> pip's environment

The source policy of every gpufleet pip install: a wheelhouse pushed to the host (``wheelhouse_dest``, empty when
the role uses none) is the only source (--no-index); otherwise ``index_url`` when given; otherwise the host's own
pip configuration. Always wheels only, no version-check chatter. ``isolated`` also ignores the host's pip.conf
(torch: no configured extra index may add a second source); ``require_hashes`` turns on --require-hashes.
Each role's assert.yml checks its index URL (https) before anything changes. Sources go through pip's
environment, not extra_args: ansible.builtin.pip reports every run with extra_args as changed in check mode.
"""


def pip_env(wheelhouse_dest, index_url="", isolated=False, require_hashes=False):
    wheelhouse_dest = str(wheelhouse_dest or "")
    index_url = str(index_url or "")
    if wheelhouse_dest:
        env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": wheelhouse_dest}
    elif index_url:
        env = {"PIP_INDEX_URL": index_url}
    else:
        env = {}
    env.update({"PIP_ONLY_BINARY": ":all:", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if isolated:
        env["PIP_CONFIG_FILE"] = "/dev/null"
    if require_hashes:
        env["PIP_REQUIRE_HASHES"] = "1"
    return env


class FilterModule:
    def filters(self):
        return {"gpufleet_pip_env": pip_env}
