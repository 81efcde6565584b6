# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Inventory plugin runpod: the pods of a RunPod account as Ansible hosts.

Thin: options, HTTP through the package module_utils/gpufleet/controller/providers/ (retries and errors in client.py),
the host records it parses, and Constructable/Cacheable. The logic and its sources are in providers/runpod.py.
"""
# ruff: noqa: E402 - Ansible reads a plugin's DOCUMENTATION before its imports (ansible-test validate-modules)

DOCUMENTATION = r"""
name: runpod
short_description: RunPod pods as rented GPU hosts
description:
  - Lists the pods of a RunPod account (REST v2 C(GET /v2/pods)) and adds each one as a host named C(runpod-<pod id>).
  - SSH is C(ssh.direct) only (or the C(runtime.ports) entry for private port 22 on a public IP). The
    C(ssh.runpod.io) proxy carries an interactive shell only, with no SFTP or SCP, so Ansible cannot use it.
    A running pod with only the proxy goes into C(gpufleet_proxy_only), with the proxy login as C(gpufleet_ssh_proxy).
  - Pods that are C(RUNNING) with a direct SSH endpoint go into C(gpufleet_ready) and C(runpod). All other pods
    go into C(gpufleet_provisioning) (a RUNNING pod whose runtime is still null, for example), C(gpufleet_failed),
    C(gpufleet_proxy_only) or C(gpufleet_stopped), each a child of C(gpufleet_not_ready).
  - Host variables include C(gpufleet_provider), C(gpufleet_provider_id), C(gpufleet_provider_machine_id) (when the
    API gives one), C(gpufleet_price_per_hour) (C(cost)), C(gpufleet_expected_gpu_count), C(gpufleet_claimed_gpu_model),
    C(gpufleet_provider_status), C(gpufleet_readiness), C(gpufleet_ready)
    and, on hosts that are not ready, C(gpufleet_not_ready_reason) (one line for the fleet report).
  - The API key is sent only in the Authorization header. It never appears in output, errors, host variables
    or the inventory cache (the cache holds the parsed host records only).
  - An account with no pods gives an empty inventory and a warning, not an error.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - ansible.builtin.constructed
  - ansible.builtin.inventory_cache
  - gpufleet_provider
options:
  plugin:
    description: The name of this plugin; the config file must name it.
    required: true
    type: str
    choices: [runpod, gpufleet.fleet.runpod]
  api_key:
    description:
      - RunPod API key (U(https://www.runpod.io/console/user/settings)); read access to pods is enough.
      - Prefer the environment variable, or a vaulted value in the config file. Templates such as
        C({{ lookup('env', 'MY_KEY') }}) are evaluated.
    type: str
    env:
      - name: RUNPOD_API_KEY
  api_url:
    description: The pods list endpoint; change it only for a mirror or a test server.
    type: str
    default: https://api.runpod.io/v2/pods
  statuses:
    description:
      - Pod C(status) values to include (case-insensitive).
      - Empty includes every status except C(TERMINATED).
    type: list
    elements: str
    default: []
  name_regex:
    description: Include only pods whose C(name) matches this regular expression (Python C(re.search)).
    type: str
"""

EXAMPLES = r"""
# inventories/runpod.yml; export RUNPOD_API_KEY first, then:
#   ansible-inventory -i inventories/runpod.yml --graph
#   ansible-playbook site.yml -i inventories/runpod.yml
plugin: runpod
name_regex: ^train
keyed_groups:
  - key: gpufleet_claimed_gpu_model
    prefix: gpu
compose:
  gpufleet_skip: not gpufleet_ready
"""

import sys
from pathlib import Path

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

if "ansible_collections" in Path(__file__).resolve().parts:  # installed as the collection gpufleet.fleet
    from ansible_collections.gpufleet.fleet.plugins.module_utils.gpufleet.controller import providers
else:  # the checkout: controller plugins do not see ansible.cfg's module_utils path, so it is read from beside
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
    from gpufleet.controller import providers


class InventoryModule(providers.InventoryMixin, BaseInventoryPlugin, Constructable, Cacheable):
    """Options, paging, retries, errors, cache and groups: providers.InventoryMixin, the same for the three."""

    NAME = "runpod"
    PROVIDER = "runpod"
    FILE_SUFFIXES = ("runpod.yml", "runpod.yaml")
    ERROR = AnsibleParserError
