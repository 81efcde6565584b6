#!/usr/bin/python
# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module provider_return: give rented boxes back to their provider (vast.ai, RunPod, Lambda Cloud)."""

DOCUMENTATION = r"""
---
module: provider_return
short_description: Give rented GPU boxes back to their provider through its API (destroy / terminate)
description:
  - Builds the provider's own API calls that give the listed boxes back - vast.ai destroy
    (C(DELETE /api/v0/instances/{id}/)), RunPod terminate (C(DELETE /v1/pods/{id}), REST v1), Lambda Cloud terminate
    (C(POST /api/v1/instance-operations/terminate), one call for all) - and returns them as C(planned).
  - Sends them only with I(confirm=true) and not in check mode. Each call is retried on HTTP 429, 5xx and
    timeouts, as the inventory plugins do; the first call that fails stops the run, and C(returned) lists what
    was given back before it.
  - Runs on the controller (C(delegate_to=localhost)); the key is sent only in the C(Authorization) header and is
    never returned or logged.
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  provider:
    description: The provider, as the inventory plugins name it in C(gpufleet_provider).
    type: str
    required: true
    choices: [vastai, runpod, lambda]
  api_url:
    description:
      - The list endpoint the inventory used (C(gpufleet_provider_api_url)); the return calls go to the same host.
        Empty uses the provider's documented endpoint.
    type: str
    default: ""
  api_key:
    description:
      - The provider's API key (the plugin's variable - C(VAST_API_KEY), C(RUNPOD_API_KEY), C(LAMBDA_API_KEY)).
        Needed only to send the calls.
    type: str
    default: ""
  boxes:
    description: The boxes to give back, each C(host) (inventory name) and C(id) (C(gpufleet_provider_id)).
    type: list
    elements: dict
    required: true
  confirm:
    description: Send the calls. False (the default) only returns the plan.
    type: bool
    default: false
  timeout:
    description: Seconds for one HTTP answer.
    type: int
    default: 30
  retries:
    description: Retries of one call after HTTP 429, 5xx or a timeout.
    type: int
    default: 3
notes:
  - Supports check mode; nothing is sent, the plan is returned.
seealso:
  - name: playbooks/return.yml
    description: Gives back the hosts the last fleet report marks "return to provider".
    link: https://github.com/gpufleet/gpufleet/blob/main/docs/inventories.md
extends_documentation_fragment:
  - gpufleet_attributes
attributes:
  check_mode:
    support: full
    details:
      - Nothing is sent; the calls it would make are returned as C(planned).
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Give back two vast.ai instances
  provider_return:
    provider: vastai
    api_key: "{{ lookup('ansible.builtin.env', 'VAST_API_KEY') }}"
    boxes:
      - {host: vast-1001, id: "1001"}
      - {host: vast-1005, id: "1005"}
    confirm: true
  delegate_to: localhost
"""

RETURN = r"""
planned:
  description: The calls that give the boxes back, one per box (Lambda Cloud - one for all).
  returned: always
  type: list
  elements: dict
  sample: [{"hosts": ["vast-1005"], "method": "DELETE", "url": "https://console.vast.ai/api/v0/instances/1005/"}]
returned:
  description: Inventory names of the boxes given back in this run (empty unless I(confirm) and not check mode).
  returned: always
  type: list
  elements: str
"""


from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpufleet.controller import providers


def plan(provider, api_url, boxes):
    """[(hosts, method, url, body)] for boxes [{host, id}], in the order given."""
    ids = [str(b["id"]) for b in boxes]
    hosts_by_id = {}
    for b in boxes:
        hosts_by_id.setdefault(str(b["id"]), []).append(str(b["host"]))
    calls = []
    for method, url, body, given_back in providers.return_requests(provider, api_url, ids):
        calls.append(([h for i in given_back for h in hosts_by_id[i]], method, url, body))
    return calls


def run_module():
    module = AnsibleModule(
        argument_spec={
            "provider": {"type": "str", "required": True, "choices": ["vastai", "runpod", "lambda"]},
            "api_url": {"type": "str", "default": ""},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "boxes": {"type": "list", "elements": "dict", "required": True},
            "confirm": {"type": "bool", "default": False},
            "timeout": {"type": "int", "default": 30},
            "retries": {"type": "int", "default": 3},
        },
        supports_check_mode=True,
    )
    p = module.params
    for i, box in enumerate(p["boxes"]):
        if not box.get("host") or box.get("id") in (None, ""):
            module.fail_json(msg="boxes[%d] needs host and id (gpufleet_provider_id), got %r" % (i, sorted(box)))
    try:
        calls = plan(p["provider"], p["api_url"], p["boxes"])
    except providers.ProviderError as exc:
        module.fail_json(msg=providers.scrub(exc, p["api_key"]), planned=[], returned=[])
    planned = [{"hosts": hosts, "method": method, "url": url} for hosts, method, url, _unused in calls]
    if not p["confirm"] or module.check_mode:
        module.exit_json(changed=False, planned=planned, returned=[])
    returned = []
    for hosts, method, url, body in calls:
        try:
            providers.fetch_json(p["provider"], url, p["api_key"], timeout=p["timeout"], retries=p["retries"],
                                 method=method, body=body)
        except providers.ProviderError as exc:
            module.fail_json(msg="%s (%s %s for %s). Given back before it: %s" % (
                providers.scrub(exc, p["api_key"]), method, providers.shown_url(url), ", ".join(hosts),
                ", ".join(returned) or "none"), planned=planned, returned=returned, changed=bool(returned))
        returned.extend(hosts)
    module.exit_json(changed=bool(returned), planned=planned, returned=returned)


def main():
    run_module()


if __name__ == "__main__":
    main()
