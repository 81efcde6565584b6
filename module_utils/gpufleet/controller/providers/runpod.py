# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""RunPod: one pod of ``GET /v2/pods`` as a host record; SSH is ssh.direct (or a public runtime port for 22), the
ssh.runpod.io proxy is kept apart (proxy_only).

Sources: runpod/docs ``api-reference-v2/openapi.json`` (GET /v2/pods) and ``pods/configuration/use-ssh.mdx`` (the
ssh.runpod.io proxy carries an interactive shell only: no SCP/SFTP).
"""

import ipaddress

from .client import PROVIDERS, READY, ProviderDataError, _get, _number, _port, _record

_PRIVATE_NETS = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                   "100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/10")]


def _is_private(ip):
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return any(addr in net for net in _PRIVATE_NETS) or addr.is_loopback


def _runpod_endpoint(obj, where, key):
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise ProviderDataError("RunPod: %s field '%s' is %s, expected an object or null. Check api_url (default %s)."
                                % (where, key, type(obj).__name__, PROVIDERS["runpod"]["url"]))
    host = _get("runpod", obj, "host", (str,), where)
    port = _port("runpod", obj.get("port"), where, key + ".port")
    if not host or not host.strip():
        return None
    return {"host": host.strip(), "port": port or 22, "user": _get("runpod", obj, "username", (str,), where) or "root",
            "command": _get("runpod", obj, "command", (str,), where)}


def runpod_ssh(pod, where="pod"):
    """(endpoint, route, proxy) for a RunPod pod: ssh.direct, else runtime.ports' public tcp entry for private
    port 22; the ssh.runpod.io proxy is returned apart (shell only: no SFTP/SCP, so Ansible cannot use it)."""
    ssh = _get("runpod", pod, "ssh", (dict,), where) or {}
    direct = _runpod_endpoint(ssh.get("direct"), where, "ssh.direct")
    proxy = _runpod_endpoint(ssh.get("proxy"), where, "ssh.proxy")
    if direct:
        direct.pop("command", None)
        return direct, "direct", proxy
    runtime = _get("runpod", pod, "runtime", (dict,), where) or {}
    for entry in _get("runpod", runtime, "ports", (list,), where) or []:
        if not isinstance(entry, dict):
            raise ProviderDataError("RunPod: %s field 'runtime.ports' holds %s, expected objects. Check api_url."
                                    % (where, type(entry).__name__))
        private = entry.get("private", entry.get("privatePort"))
        public = entry.get("public", entry.get("publicPort"))
        ip = entry.get("ip")
        if private in (22, "22") and str(entry.get("type", "tcp")).lower() == "tcp" and ip and public and \
                entry.get("isIpPublic", True) is not False and not _is_private(str(ip)):
            return {"host": str(ip).strip(), "port": _port("runpod", public, where, "runtime.ports.public"),
                    "user": "root"}, "direct", proxy
    return None, None, proxy


def runpod_record(pod):
    p = "runpod"
    ident = _get(p, pod, "id", (str, int), "a pod", required=True)
    where = "pod %s" % ident
    status = _get(p, pod, "status", (str,), where) or _get(p, pod, "desiredStatus", (str,), where)
    ssh, route, proxy = runpod_ssh(pod, where)
    s = (status or "").upper()
    if s == "RUNNING":
        if ssh:
            state, reason = READY, "RUNNING, SSH via ssh.direct"
        elif proxy:
            state, reason = "proxy_only", ("RUNNING, but only the ssh.runpod.io proxy is offered: it carries an "
                                           "interactive shell only (no SFTP/SCP), which Ansible cannot use. Expose "
                                           "22/tcp on a public IP (ssh.direct) for this pod")
        else:
            state, reason = "provisioning", "RUNNING, but no SSH endpoint yet (runtime and ports are still empty)"
    elif s in ("PROVISIONING", "STARTING", "CREATED", ""):
        state, reason = "provisioning", "%s: not running yet" % (status or "no status yet")
    elif s in ("EXITED", "TERMINATED"):
        state, reason = "stopped", "%s: the pod is not running" % status
    elif s == "ERROR":
        state, reason = "failed", "ERROR: the pod failed; terminate it and rent another"
    else:
        state, reason = "provisioning", "status %r not known to gpufleet" % status
    gpu = _get(p, pod, "gpu", (dict,), where) or {}
    machine = _get(p, pod, "machine", (dict,), where) or {}
    model = (_get(p, gpu, "displayName", (str,), where) or _get(p, machine, "gpuDisplayName", (str,), where)
             or _get(p, gpu, "id", (str,), where))
    count = _get(p, gpu, "count", (int,), where)
    if count is None:
        count = _get(p, pod, "gpuCount", (int,), where)
    price = _number(p, pod, "cost", where)
    if price is None:
        price = _number(p, pod, "costPerHr", where)
    mid = _get(p, pod, "machineId", (str, int), where)
    listing = runpod_listing(machine, where)
    return _record(
        p, ident, machine_id=None if mid is None else str(mid), label=_get(p, pod, "name", (str,), where),
        status=status, status_message=_get(p, pod, "lastStatusChange", (str,), where), state=state, reason=reason,
        ssh=ssh, route=route, proxy=proxy, price_per_hour=price, gpu_count=count, gpu_model=model,
        region=_get(p, pod, "dataCenterId", (str,), where),
        extra={"cloud": _get(p, pod, "cloud", (str,), where),
               "cuda_version": _get(p, pod, "cudaVersion", (str,), where)},
        listing=listing)


def runpod_listing(machine, where):
    """The gpufleet_listing_* variables of one pod's machine (what RunPod lists beside the GPU; how RunPod measures
    it is not published): diskThroughputMBps (MB/s), maxDownloadSpeedMbps and maxUploadSpeedMbps (Mbit/s), units as
    runpod/docs api-reference/openapi.json names them. A field that is absent, null or not above 0 sets nothing."""
    p = "runpod"
    fields = (("diskThroughputMBps", "gpufleet_listing_disk_read_mb_s"),
              ("maxDownloadSpeedMbps", "gpufleet_listing_net_down_mbit"),
              ("maxUploadSpeedMbps", "gpufleet_listing_net_up_mbit"))
    out, said = {}, []
    for key, var in fields:
        value = _number(p, machine, key, where)
        if value is not None and value > 0:
            out[var] = value
            said.append("machine.%s" % key)
    if out:
        out["gpufleet_listing_source"] = "RunPod %s" % "/".join(said)
    return out
