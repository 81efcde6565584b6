# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Inventory plugin lambda_cloud: the instances of a Lambda Cloud account as Ansible hosts.

Thin: options, HTTP through the package module_utils/gpufleet/controller/providers/ (retries and errors in client.py),
the host records it parses, and Constructable/Cacheable. The logic and its sources are in providers/lambda_cloud.py.
"""
# ruff: noqa: E402 - Ansible reads a plugin's DOCUMENTATION before its imports (ansible-test validate-modules)

DOCUMENTATION = r"""
name: lambda_cloud
short_description: Lambda Cloud instances as rented GPU hosts
description:
  - Lists the instances of a Lambda Cloud account (C(GET /api/v1/instances)) and adds each one as a host named
    C(lambda-<name>) when the instance's name is set and unique in the account, else C(lambda-<instance id>).
    Characters other than letters, digits, C(_), C(.) and C(-) become C(-).
  - SSH is C(ubuntu@ip:22).
  - Instances that are C(active) with an IP go into C(gpufleet_ready) and C(lambda). All others go into
    C(gpufleet_provisioning) (C(booting)), C(gpufleet_failed) (C(unhealthy)) or C(gpufleet_stopped) (C(terminating)),
    each a child of C(gpufleet_not_ready).
  - Host variables include C(gpufleet_provider), C(gpufleet_provider_id), C(gpufleet_price_per_hour)
    (C(price_cents_per_hour) / 100), C(gpufleet_expected_gpu_count), C(gpufleet_claimed_gpu_model) (C(gpu_description)),
    C(gpufleet_provider_region), C(gpufleet_provider_status), C(gpufleet_readiness), C(gpufleet_ready)
    and, on hosts that are not ready, C(gpufleet_not_ready_reason) (one line for the fleet report).
  - Lambda allows about one request per second; the list is one request, retried after HTTP 429 as the
    C(Retry-After) header says.
  - The API key is sent only in the Authorization header. It never appears in output, errors, host variables
    or the inventory cache (the cache holds the parsed host records only, no Jupyter token).
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
    choices: [lambda_cloud, gpufleet.fleet.lambda_cloud]
  api_key:
    description:
      - Lambda Cloud API key (U(https://cloud.lambda.ai/api-keys)).
      - Prefer the environment variable, or a vaulted value in the config file. Templates such as
        C({{ lookup('env', 'MY_KEY') }}) are evaluated.
    type: str
    env:
      - name: LAMBDA_API_KEY
  api_url:
    description: The instances list endpoint (older host U(https://cloud.lambdalabs.com/api/v1/instances)); change it
      only for a mirror or a test server.
    type: str
    default: https://cloud.lambda.ai/api/v1/instances
  statuses:
    description:
      - Instance C(status) values to include (case-insensitive).
      - Empty includes every status except C(terminated).
    type: list
    elements: str
    default: []
  name_regex:
    description: Include only instances whose C(name) matches this regular expression (Python C(re.search)).
    type: str
"""

EXAMPLES = r"""
# inventories/lambda_cloud.yml; export LAMBDA_API_KEY first, then:
#   ansible-inventory -i inventories/lambda_cloud.yml --graph
#   ansible-playbook site.yml -i inventories/lambda_cloud.yml
plugin: lambda_cloud
keyed_groups:
  - key: gpufleet_provider_region
    prefix: region
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

    NAME = "lambda_cloud"
    PROVIDER = "lambda"
    FILE_SUFFIXES = ("lambda_cloud.yml", "lambda_cloud.yaml", "lambda.yml", "lambda.yaml")
    ERROR = AnsibleParserError
