# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Host records of any provider: parse one answer (by provider), select by status and name, the inventory
variables and groups of a record, and how to give a box back (the report's words, the API calls that
playbooks/return.yml sends through library/provider_return.py).
"""

import re
import urllib.parse

from .client import GONE_STATUSES, PROVIDERS, READY, ProviderError, _list_of, label, shown_url
from .lambda_cloud import lambda_names, lambda_record
from .runpod import runpod_record
from .vastai import vast_page, vast_record


def parse(provider, data, url=""):
    """Host records from one parsed answer (vast: a list of instances already gathered over pages)."""
    if provider == "vastai":
        items = data if isinstance(data, list) else vast_page(data, url)[0]
        return [vast_record(i) for i in items]
    if provider == "runpod":
        items = data if isinstance(data, list) else _list_of("runpod", data, "pods", url)
        return [runpod_record(i) for i in items]
    if provider == "lambda":
        items = _list_of("lambda", data, "data", url)
        return lambda_names([lambda_record(i) for i in items])
    raise ValueError("unknown provider %r" % provider)


def select(records, statuses=None, name_regex=None):
    """The records whose status is in statuses (case-insensitive; a missing status is 'null'; empty: every
    status except the provider's terminated ones) and whose label matches name_regex (re.search)."""
    wanted = {str(s).lower() for s in (statuses or [])}
    pattern = re.compile(name_regex) if name_regex else None
    out = []
    for rec in records:
        status = (rec["status"] or "null").lower()
        if wanted:
            if status not in wanted:
                continue
        elif status in GONE_STATUSES[rec["provider"]]:
            continue
        if pattern and not pattern.search(rec["label"] or ""):
            continue
        out.append(rec)
    return out


def host_vars(rec):
    """The inventory variables of one host record (connection vars only with an endpoint Ansible can use)."""
    hv = {
        "gpufleet_provider": rec["provider"],
        "gpufleet_provider_id": rec["id"],
        "gpufleet_provider_label": rec["label"],
        "gpufleet_provider_status": rec["status"],
        "gpufleet_provider_status_message": rec["status_message"] or rec["reason"],
        "gpufleet_readiness": rec["state"],
        "gpufleet_readiness_reason": rec["reason"],
        "gpufleet_ready": rec["state"] == READY,
        "gpufleet_claimed_gpu_model": rec["gpu_model"],
    }
    if rec["state"] != READY:  # one line for the fleet report: who, what state, why, in the provider's words
        said = rec["status_message"]
        hv["gpufleet_not_ready_reason"] = "%s %s: %s%s" % (
            label(rec["provider"]), rec["state"], rec["reason"],
            "; %s says: %s" % (label(rec["provider"]), said) if said and said != rec["reason"] else "")
    if rec["machine_id"] is not None:
        hv["gpufleet_provider_machine_id"] = rec["machine_id"]
    if rec["price_per_hour"] is not None:
        hv["gpufleet_price_per_hour"] = rec["price_per_hour"]
    if rec["gpu_count"] is not None:
        hv["gpufleet_expected_gpu_count"] = rec["gpu_count"]
    if rec["region"]:
        hv["gpufleet_provider_region"] = rec["region"]
    for key, value in sorted(rec["extra"].items()):
        if value is not None:
            hv["gpufleet_provider_%s" % key] = value
    if rec["ssh"]:
        hv.update(ansible_host=rec["ssh"]["host"], ansible_port=rec["ssh"]["port"], ansible_user=rec["ssh"]["user"],
                  gpufleet_ssh_route=rec.get("route"))
    if rec.get("proxy"):
        hv["gpufleet_ssh_proxy"] = "%s@%s:%s" % (rec["proxy"]["user"], rec["proxy"]["host"], rec["proxy"]["port"])
    return hv


def groups_of(rec, ready_group="gpufleet_ready"):
    """Groups of one host: ready hosts in ready_group and the provider's group; the others in gpufleet_<state>
    (a child of gpufleet_not_ready)."""
    if rec["state"] == READY:
        return [ready_group, PROVIDERS[rec["provider"]]["group"]]
    return ["gpufleet_%s" % rec["state"]]


# ------------------------------------------------------------------------------ returning a bad box

def return_action(provider, ident, machine_id=None):
    """What the provider offers for a box to give back, in words for the report (None: not a provider host)."""
    if provider == "vastai":
        text = ("vast.ai: destroy instance %s (stops billing; a reboot or recycle from the console may clear a "
                "soft fault)" % ident)
        return text + ("; leave machine_id %s out of later searches" % machine_id if machine_id else "")
    if provider == "runpod":
        return "RunPod: terminate pod %s (stops billing)" % ident
    if provider == "lambda":
        return "Lambda Cloud: terminate instance %s (stops billing)" % ident
    return None


def _api_base(provider, api_url, suffix):
    """api_url (the list endpoint) up to the documented path suffix: scheme, host and any prefix a mirror or a
    test server puts before it."""
    parts = urllib.parse.urlsplit(api_url or PROVIDERS[provider]["url"])
    path = parts.path.rstrip("/")
    if not path.endswith(suffix):
        raise ProviderError("%s: cannot tell where to send the return call from api_url %s (it should end in %s, "
                            "as the documented %s does)." % (
                                label(provider), shown_url(api_url), suffix, PROVIDERS[provider]["url"]))
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path[: -len(suffix)], "", ""))


def return_requests(provider, api_url, idents):
    """The API calls that give idents back, [(method, url, json body or None, [the idents it gives back])], sent
    where the inventory listed them (api_url): vast.ai destroy ``DELETE /api/v0/instances/{id}/``; RunPod terminate
    ``DELETE /v1/pods/{id}`` (REST v1: https://rest.runpod.io for the default api_url, else api_url's own host);
    Lambda Cloud terminate
    ``POST /api/v1/instance-operations/terminate {"instance_ids": [...]}``, one call for all."""
    idents = [str(i) for i in idents]
    if not idents:
        return []
    if provider == "vastai":
        base = _api_base(provider, api_url, "/api/v1/instances")
        return [("DELETE", "%s/api/v0/instances/%s/" % (base, urllib.parse.quote(i, safe="")), None, [i])
                for i in idents]
    if provider == "runpod":
        if (api_url or PROVIDERS[provider]["url"]).rstrip("/") == PROVIDERS[provider]["url"]:
            base = "https://rest.runpod.io"
        else:
            base = _api_base(provider, api_url, "/v2/pods")
        return [("DELETE", "%s/v1/pods/%s" % (base, urllib.parse.quote(i, safe="")), None, [i]) for i in idents]
    if provider == "lambda":
        base = _api_base(provider, api_url, "/api/v1/instances")
        return [("POST", base + "/api/v1/instance-operations/terminate", {"instance_ids": idents}, idents)]
    raise ProviderError("unknown provider %r (known: %s)" % (provider, ", ".join(sorted(PROVIDERS))))
