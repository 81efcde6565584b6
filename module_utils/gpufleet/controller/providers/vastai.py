# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vast.ai: the v1 instance list over all pages, and one instance as a host record (SSH resolved as vast-cli's
``ssh-url`` does it).

Sources: vast-ai/vast-cli ``vast.py`` (``_fetch_all_instances_v1``, ``ssh-url``), ``vastai/data/instance.py``,
vast-cli issue #79 (proxy port + 1 for jupyter runtypes); dstackai/dstack ``core/backends/vastai/compute.py``;
skypilot ``sky/provision/vast/instance.py``.
"""

import json
import urllib.parse

from .client import MAX_PAGES, PROVIDERS, READY, ProviderDataError, _get, _list_of, _number, _port, _record, shown_url

VAST_PAGE_ORDER = json.dumps([{"col": "id", "dir": "asc"}], separators=(",", ":"))


def vast_page_url(base_url, limit=25, after_token=None):
    """The v1 list URL of one page (vast-cli _fetch_all_instances_v1: limit, order_by, after_token)."""
    query = {"limit": str(limit), "order_by": VAST_PAGE_ORDER}
    if after_token is not None:
        query["after_token"] = str(after_token)
    sep = "&" if "?" in base_url else "?"
    return base_url + sep + urllib.parse.urlencode(query)


def vast_page(data, url):
    """(instances, next_token) of one v1 page."""
    instances = _list_of("vastai", data, "instances", url)
    token = data.get("next_token")
    if token is not None and not isinstance(token, (str, int)):
        raise ProviderDataError(
            "vast.ai: 'next_token' from %s is %s, expected text or null. Check api_url (default %s)."
            % (shown_url(url), type(token).__name__, PROVIDERS["vastai"]["url"]))
    return instances, (None if token in (None, "") else token)


def vast_fetch_all(get_json, base_url, limit=25):
    """Every instance over all pages; get_json(url) returns one parsed page."""
    instances, token, seen = [], None, set()
    for _unused in range(MAX_PAGES):
        url = vast_page_url(base_url, limit, token)
        page, token = vast_page(get_json(url), url)
        instances += page
        if token is None:
            return instances
        if token in seen:
            raise ProviderDataError("vast.ai: the API returned the same next_token twice (%r); stopping rather than "
                                    "looping. Run again later." % (token,))
        seen.add(token)
    raise ProviderDataError("vast.ai: more than %d pages of instances; stopping. Set select/page options or report "
                            "this." % MAX_PAGES)


def vast_ssh(inst, where="instance"):
    """(endpoint, route) for a vast instance: direct public_ipaddr + ports['22/tcp'][0].HostPort, else the proxy
    ssh_host:ssh_port (+1 when image_runtype contains 'jupyter', vast-cli issue #79); (None, None) when neither."""
    p = "vastai"
    ip = _get(p, inst, "public_ipaddr", (str,), where)
    ports = _get(p, inst, "ports", (dict,), where) or {}
    mapping = ports.get("22/tcp")
    if mapping is not None and not isinstance(mapping, list):
        raise ProviderDataError("vast.ai: %s field 'ports[\"22/tcp\"]' is %s, expected a list. Check api_url."
                                % (where, type(mapping).__name__))
    host_port = None
    if mapping:
        first = mapping[0]
        if not isinstance(first, dict):
            raise ProviderDataError("vast.ai: %s field 'ports[\"22/tcp\"][0]' is %s, expected an object. Check api_url."
                                    % (where, type(first).__name__))
        host_port = _port(p, first.get("HostPort"), where, 'ports["22/tcp"][0].HostPort')
    ip = ip.strip() if ip else ""
    if ip and host_port:
        return {"host": ip, "port": host_port, "user": "root"}, "direct"
    ssh_host = _get(p, inst, "ssh_host", (str,), where)
    ssh_port = _port(p, inst.get("ssh_port"), where, "ssh_port")
    if ssh_host and ssh_host.strip() and ssh_port:
        runtype = _get(p, inst, "image_runtype", (str,), where) or ""
        port = ssh_port + 1 if "jupyter" in runtype else ssh_port
        return {"host": ssh_host.strip(), "port": port, "user": "root"}, "proxy"
    return None, None


# vast.ai's inet_down / inet_up are Mibit/s (the host daemon converts Ookla's bytes/s as x8/2^20; the CLI says "Mb/s"):
# x 1.048576 gives Mbit/s (10^6 bit/s), the unit of gpufleet_listing_net_*. disk_bw is MB/s (a random 32 KiB read,
# 16 jobs at queue depth 64, on the host's docker disk), disk_space GB. Source: shared/reference/renter-disk-network.md
# section 1 (vast-cli offers.py l.85-108; the host daemon's script).
MIBIT_TO_MBIT = 1.048576


def vast_listing(inst, where):
    """The gpufleet_listing_* variables of one instance (what vast.ai lists beside the GPU, self-reported by the
    host): a field that is absent, null or not above 0 sets nothing."""
    p = "vastai"
    fields = (("disk_bw", "gpufleet_listing_disk_read_mb_s", 1.0), ("inet_down", "gpufleet_listing_net_down_mbit",
              MIBIT_TO_MBIT), ("inet_up", "gpufleet_listing_net_up_mbit", MIBIT_TO_MBIT),
              ("disk_space", "gpufleet_listing_disk_gb", 1.0))
    out, said = {}, []
    for key, var, factor in fields:
        value = _number(p, inst, key, where)
        if value is not None and value > 0:
            out[var] = round(value * factor, 1)
            said.append(key)
    if out:
        out["gpufleet_listing_source"] = "vast.ai %s" % "/".join(said)
    return out


def vast_record(inst):
    p = "vastai"
    ident = _get(p, inst, "id", (int, str), "an instance", required=True)
    where = "instance %s" % ident
    status = _get(p, inst, "actual_status", (str,), where)
    msg = _get(p, inst, "status_msg", (str,), where)
    msg = msg.strip() if msg else None
    ssh, route = vast_ssh(inst, where)
    s = (status or "").lower()
    if s == "running":
        state, reason = (READY, "running, SSH via the %s endpoint" % route) if ssh else (
            "provisioning", "running, but vast.ai has not assigned an SSH port yet")
    elif s in ("created", "loading") and msg and "oci runtime create failed" in msg.lower():
        state, reason = "failed", "the container could not start (OCI runtime create failed)"
    elif s in ("", "created", "loading", "rebooting", "scheduling"):
        state, reason = "provisioning", "%s: not running yet" % (status or "no status yet")
    elif s in ("stopped", "frozen"):
        state, reason = "stopped", "%s: start it again or destroy it (storage is still billed)" % status
    elif s in ("exited", "unknown", "offline"):
        state, reason = "failed", ("%s: vast.ai never brings such an instance back to running; destroy it "
                                   "(it stops billing) and rent another machine" % status)
    else:
        state, reason = "provisioning", "status %r not known to gpufleet" % status
    gpu_model = _get(p, inst, "gpu_name", (str,), where)
    machine = _get(p, inst, "machine_id", (int, str), where)
    return _record(
        p, ident, machine_id=None if machine is None else str(machine), label=_get(p, inst, "label", (str,), where),
        status=status, status_message=msg, state=state, reason=reason, ssh=ssh,
        route=route, price_per_hour=_number(p, inst, "dph_total", where),
        gpu_count=_get(p, inst, "num_gpus", (int,), where), gpu_model=gpu_model,
        extra={"driver_version": _get(p, inst, "driver_version", (str,), where),
               "cuda_max_good": _number(p, inst, "cuda_max_good", where),
               "image_runtype": _get(p, inst, "image_runtype", (str,), where)},
        listing=vast_listing(inst, where))
