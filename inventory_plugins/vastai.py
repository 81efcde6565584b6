# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Inventory plugin vastai: the instances of a vast.ai account as Ansible hosts.

Thin: options, HTTP through the package module_utils/gpufleet/controller/providers/ (paging in vastai.py, retries and
errors in client.py), the host records it parses, and Constructable/Cacheable. The logic and its sources are
in providers/vastai.py.
"""
# ruff: noqa: E402 - Ansible reads a plugin's DOCUMENTATION before its imports (ansible-test validate-modules)

DOCUMENTATION = r"""
name: vastai
short_description: vast.ai instances as rented GPU hosts
description:
  - Lists the instances of a vast.ai account (v1 API, all pages) and adds each one as a host named
    C(vast-<instance id>).
  - SSH is resolved as vast-cli C(ssh-url) does it. Direct C(public_ipaddr) (stripped) and
    C(ports["22/tcp"][0].HostPort) when the port is mapped, else the proxy C(ssh_host:ssh_port),
    plus 1 when C(image_runtype) contains C(jupyter). Login user C(root).
  - Hosts that are running with an SSH endpoint go into C(gpufleet_ready) and C(vastai). All other hosts
    go into C(gpufleet_provisioning), C(gpufleet_failed) or C(gpufleet_stopped), each a child of
    C(gpufleet_not_ready), with the provider's status text and message as host variables.
  - Host variables include C(gpufleet_provider), C(gpufleet_provider_id), C(gpufleet_provider_machine_id),
    C(gpufleet_price_per_hour), C(gpufleet_expected_gpu_count), C(gpufleet_claimed_gpu_model),
    C(gpufleet_provider_status), C(gpufleet_provider_status_message), C(gpufleet_readiness), C(gpufleet_ready)
    and, on hosts that are not ready, C(gpufleet_not_ready_reason) (one line for the fleet report).
  - The API key is sent only in the Authorization header. It never appears in output, errors, host variables
    or the inventory cache (the cache holds the parsed host records only).
  - An account with no instances gives an empty inventory and a warning, not an error.
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
    choices: [vastai, gpufleet.fleet.vastai]
  api_key:
    description:
      - vast.ai API key (U(https://cloud.vast.ai/manage-keys/)); read-only access to instances is enough.
      - Prefer the environment variable, or a vaulted value in the config file. Templates such as
        C({{ lookup('env', 'MY_KEY') }}) are evaluated.
    type: str
    env:
      - name: VAST_API_KEY
  api_url:
    description: The instances list endpoint; change it only for a mirror or a test server.
    type: str
    default: https://console.vast.ai/api/v1/instances/
  statuses:
    description:
      - C(actual_status) values to include (case-insensitive; C(null) is an instance still being created).
      - Empty includes every status.
    type: list
    elements: str
    default: []
  name_regex:
    description: Include only instances whose C(label) matches this regular expression (Python C(re.search)).
    type: str
  page_size:
    description: Instances per page (the API's C(limit)).
    type: int
    default: 25
"""

EXAMPLES = r"""
# inventories/vastai.yml; export VAST_API_KEY first, then:
#   ansible-inventory -i inventories/vastai.yml --graph
#   ansible-playbook site.yml -i inventories/vastai.yml
plugin: vastai
statuses: [running, loading, created, "null", exited, unknown, offline]
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

    NAME = "vastai"
    PROVIDER = "vastai"
    FILE_SUFFIXES = ("vastai.yml", "vastai.yaml")
    ERROR = AnsibleParserError
