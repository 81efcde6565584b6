"""Rented GPU hosts as the providers list them: API responses in, inventory host records out.

The logic behind the inventory plugins ``vastai``, ``runpod`` and ``lambda_cloud``
(inventory_plugins/): fetch the provider's JSON (bounded retries, clear errors), parse each
instance into a host record (SSH endpoint resolved the way the provider's own client does it,
price, claimed GPUs, status) and judge its readiness. Plain Python (>= 3.8, stdlib only).

Sources of the field names and rules (each provider's own client or API spec):
  vast.ai   vast-ai/vast-cli ``vast.py`` (``_fetch_all_instances_v1``, ``ssh-url``), ``vastai/data/instance.py``,
            vast-cli issue #79 (proxy port + 1 for jupyter runtypes); dstackai/dstack
            ``core/backends/vastai/compute.py``; skypilot ``sky/provision/vast/instance.py``.
  RunPod    runpod/docs ``api-reference-v2/openapi.json`` (GET /v2/pods) and ``pods/configuration/use-ssh.mdx``
            (the ssh.runpod.io proxy carries an interactive shell only: no SCP/SFTP).
  Lambda    Lambda Cloud API 1.8.3 (https://docs.lambda.ai/api/cloud): GET /api/v1/instances, ubuntu@ip:22,
            ``{"error": {"code", "message", "suggestion"}}``, about 1 request per second.

Readiness: the provider says running AND there is an SSH endpoint that carries exec and file transfer.
Every other listed host is kept, in a state that says why it is not ready (``provisioning``, ``failed``,
``proxy_only``, ``stopped``), so a paid-for box nobody can reach is never silently dropped.

The API key is only ever put in the Authorization header: no message, record or exception carries it
(``scrub`` removes it from any provider text that is quoted).
"""

import ipaddress
import json
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from email.utils import parsedate_to_datetime
from http.client import HTTPException, IncompleteRead

READY = "ready"
STATES = ("ready", "provisioning", "failed", "proxy_only", "stopped")
NOT_READY_STATES = STATES[1:]

# name: label for messages, key variable, documented list URL, where a key is made, host name prefix, group.
PROVIDERS = {
    "vastai": {
        "label": "vast.ai", "env": "VAST_API_KEY", "url": "https://console.vast.ai/api/v1/instances/",
        "keys": "https://cloud.vast.ai/manage-keys/", "prefix": "vast", "group": "vastai",
    },
    "runpod": {
        "label": "RunPod", "env": "RUNPOD_API_KEY", "url": "https://api.runpod.io/v2/pods",
        "keys": "https://www.runpod.io/console/user/settings", "prefix": "runpod", "group": "runpod",
    },
    "lambda": {
        "label": "Lambda Cloud", "env": "LAMBDA_API_KEY", "url": "https://cloud.lambda.ai/api/v1/instances",
        "keys": "https://cloud.lambda.ai/api-keys", "prefix": "lambda", "group": "lambda",
    },
}
# Statuses left out unless asked for: the box is gone and no longer billed.
GONE_STATUSES = {"vastai": (), "runpod": ("terminated",), "lambda": ("terminated",)}

RETRY_STATUSES = (429, 500, 502, 503, 504)
MAX_PAGES = 1000
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_PRIVATE_NETS = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                   "100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/10")]


class ProviderError(Exception):
    """A provider could not be listed; the message names the provider and what to do."""


class ProviderDataError(ProviderError):
    """The provider answered, but not with the documented shape."""


def label(provider):
    return PROVIDERS[provider]["label"]


def scrub(text, secret):
    """text with every occurrence of the secret (and of its Bearer header) replaced by ***."""
    text = str(text)
    if secret:
        text = text.replace(str(secret), "***")
    return text


# ----------------------------------------------------------------------------------------------- HTTP

def retry_after_seconds(value, now=None):
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None when absent/unreadable."""
    if value is None:
        return None
    value = str(value).strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def backoff_seconds(attempt, retry_after=None, base=1.0, cap=60.0):
    """Wait before retry number attempt (0-based): Retry-After when the provider gave one, else
    base * 2**attempt; never more than cap."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), cap)
    return min(base * (2 ** attempt), cap)


def _provider_message(provider, body):
    """The provider's own error text from an error body (Lambda: error.message + suggestion), short."""
    try:
        data = json.loads(body.decode("utf-8", "replace")) if body else None
    except ValueError:
        data = None
    parts = []
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            parts += [str(err[k]) for k in ("message", "suggestion") if err.get(k)]
        elif isinstance(err, str):
            parts.append(err)
        for key in ("msg", "message", "detail"):
            if isinstance(data.get(key), str):
                parts.append(data[key])
        if isinstance(data.get("errors"), list):
            parts += [str(e.get("message")) for e in data["errors"] if isinstance(e, dict) and e.get("message")]
    text = " ".join(parts).strip()
    return text[:300]


def shown_url(url):
    """url without its query (vast's paging parameters make messages unreadable)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _http_error_message(provider, status, url, detail, cfg):
    name = label(provider)
    url = shown_url(url)
    said = (" The provider said: %s." % detail.rstrip(". ")) if detail else ""
    if status in (401, 403):
        return ("%s refused the API key (HTTP %d from %s).%s Set %s (or api_key in the inventory config, vaulted) "
                "to a valid key with read access to your instances: %s"
                % (name, status, url, said, cfg["env"], cfg["keys"]))
    if status == 404:
        return ("%s: %s answered HTTP 404 (not found).%s Check api_url in the inventory config (default %s)."
                % (name, url, said, cfg["url"]))
    if status == 429:
        return ("%s kept answering HTTP 429 (rate limited) at %s.%s Wait a minute and run again, or raise retries "
                "in the inventory config." % (name, url, said))
    if status >= 500:
        return ("%s: the API failed with HTTP %d at %s.%s This is on the provider's side: run again later, "
                "check its status page, or raise retries in the inventory config." % (name, status, url, said))
    return ("%s: %s answered HTTP %d.%s Check api_url and the options in the inventory config."
            % (name, url, status, said))


def fetch_json(provider, url, api_key, timeout=30, retries=3, max_wait=60.0, opener=None, sleep=time.sleep,
               method="GET", body=None):
    """GET url (or method, with body as JSON) with the provider's Bearer key; the parsed JSON answer ({} when
    the answer is empty, as a DELETE's may be). Retries 429/5xx/timeouts up to retries times (honouring
    Retry-After, capped at max_wait); raises ProviderError otherwise."""
    cfg = PROVIDERS[provider]
    name = cfg["label"]
    where = shown_url(url)
    if not api_key:
        raise ProviderError("%s: no API key. Set %s in the environment or api_key in the inventory config "
                            "(vaulted); make one at %s" % (name, cfg["env"], cfg["keys"]))
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" and not (parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")):
        raise ProviderError("%s: api_url %s must be https:// (http:// only for a test server on 127.0.0.1): the API "
                            "key would travel in clear text. Nothing was asked." % (name, where))
    # What urllib's module-level urlopen does: verifies certificates (PEP 476), honours the *_proxy variables.
    # Not Ansible's open_url: this file is plain Python, also run by scripts and tests without Ansible.
    opener = opener or urllib.request.build_opener().open
    headers = {"Authorization": "Bearer %s" % api_key, "Accept": "application/json", "User-Agent": "gpufleet-inventory"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310 - scheme checked above
    attempt = 0
    while True:
        wait_hint = None
        try:
            with opener(request, timeout=timeout) as response:
                answer = response.read()
            break
        except urllib.error.HTTPError as exc:
            status = exc.code
            try:
                detail = scrub(_provider_message(provider, exc.read()), api_key)
            except Exception:  # noqa: BLE001 - the error body is a courtesy
                detail = ""
            if status not in RETRY_STATUSES or attempt >= retries:
                raise ProviderError(_http_error_message(provider, status, url, detail, cfg)) from None
            wait_hint = retry_after_seconds(exc.headers.get("Retry-After") if exc.headers else None)
        except IncompleteRead as exc:
            raise ProviderDataError(
                "%s: the answer from %s was cut short (%d bytes read). Run again; if it persists, check api_url "
                "and any proxy between here and the provider." % (name, where, len(exc.partial or b""))) from None
        except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if attempt >= retries:
                raise ProviderError("%s: could not reach %s (%s) after %d attempt(s). Check the network, any "
                                    "HTTPS proxy, api_url, or raise timeout (%ss) / retries in the inventory config."
                                    % (name, where, scrub(reason, api_key), attempt + 1, timeout)) from None
        sleep(backoff_seconds(attempt, wait_hint, cap=max_wait))
        attempt += 1
    if method != "GET" and not answer.strip():
        return {}
    return parse_json(provider, url, answer)


def parse_json(provider, url, body):
    name = label(provider)
    try:
        return json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ProviderDataError(
            "%s: the answer from %s is not valid JSON (%d bytes; malformed or truncated). Run again; if it persists, "
            "check that api_url points at the provider's API (default %s) and not at a login page or proxy."
            % (name, shown_url(url), len(body), PROVIDERS[provider]["url"])) from None


# ---------------------------------------------------------------------------------------- type checks

def _type_name(types):
    names = {str: "text", int: "an integer", float: "a number", dict: "an object", list: "a list", bool: "true/false"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _get(provider, obj, key, types, where, required=False):
    """obj[key] checked against types (None allowed unless required). bool is not a number."""
    value = obj.get(key)
    if value is None:
        if required:
            raise ProviderDataError("%s: %s has no '%s'. The API answer does not have the documented shape; check "
                                    "api_url (default %s)." % (label(provider), where, key, PROVIDERS[provider]["url"]))
        return None
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, tuple(types)):
        raise ProviderDataError(
            "%s: %s field '%s' is %s (%.60r), expected %s. The API answer does not have the documented shape: "
            "check api_url (default %s); if it is right, the provider changed its API and this plugin needs an update."
            % (label(provider), where, key, type(value).__name__, value, _type_name(types), PROVIDERS[provider]["url"]))
    return value


def _number(provider, obj, key, where):
    return _get(provider, obj, key, (int, float), where)


def _port(provider, value, where, key):
    """A TCP port from an int or a digit string (vast's HostPort is a string)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ProviderDataError("%s: %s field '%s' is %.60r, expected a TCP port. Check api_url (default %s)."
                                % (label(provider), where, key, value, PROVIDERS[provider]["url"]))
    return value


def _list_of(provider, data, key, url):
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        got = type(data).__name__ if not isinstance(data, dict) else "an object without a '%s' list" % key
        raise ProviderDataError(
            "%s: the answer from %s is %s, expected {\"%s\": [...]}. Check api_url (default %s)."
            % (label(provider), shown_url(url), got, key, PROVIDERS[provider]["url"]))
    for i, item in enumerate(data[key]):
        if not isinstance(item, dict):
            raise ProviderDataError(
                "%s: item %d of '%s' from %s is %s, expected an object. Check api_url (default %s)."
                % (label(provider), i, key, shown_url(url), type(item).__name__, PROVIDERS[provider]["url"]))
    return data[key]


def safe_name(text):
    """A host name usable as an inventory name and a fact-cache key: no '/', no spaces."""
    return _SAFE_NAME.sub("-", str(text)).strip("-.") or "unnamed"


def _record(provider, ident, **fields):
    rec = {"provider": provider, "id": str(ident), "name": "%s-%s" % (PROVIDERS[provider]["prefix"], safe_name(ident)),
           "machine_id": None, "label": None, "status": None, "status_message": None, "state": "provisioning",
           "reason": "", "ssh": None, "route": None, "proxy": None, "price_per_hour": None, "gpu_count": None,
           "gpu_model": None, "region": None, "extra": {}}
    rec.update(fields)
    return rec


# -------------------------------------------------------------------------------------------- vast.ai

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
               "image_runtype": _get(p, inst, "image_runtype", (str,), where)})


# --------------------------------------------------------------------------------------------- RunPod

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
    return _record(
        p, ident, machine_id=None if mid is None else str(mid), label=_get(p, pod, "name", (str,), where),
        status=status, status_message=_get(p, pod, "lastStatusChange", (str,), where), state=state, reason=reason,
        ssh=ssh, route=route, proxy=proxy, price_per_hour=price, gpu_count=count, gpu_model=model,
        region=_get(p, pod, "dataCenterId", (str,), where),
        extra={"cloud": _get(p, pod, "cloud", (str,), where),
               "cuda_version": _get(p, pod, "cudaVersion", (str,), where)})


# -------------------------------------------------------------------------------------- Lambda Cloud

def lambda_record(inst):
    p = "lambda"
    ident = _get(p, inst, "id", (str,), "an instance", required=True)
    where = "instance %s" % ident
    status = _get(p, inst, "status", (str,), where)
    ip = _get(p, inst, "ip", (str,), where)
    ip = ip.strip() if ip else ""
    ssh = {"host": ip, "port": 22, "user": "ubuntu"} if ip else None
    s = (status or "").lower()
    if s == "active":
        state, reason = (READY, "active, SSH as ubuntu on port 22") if ssh else (
            "provisioning", "active, but Lambda has not assigned an IP yet")
    elif s in ("booting", ""):
        state, reason = "provisioning", "%s: not active yet" % (status or "no status yet")
    elif s == "unhealthy":
        state, reason = "failed", ("unhealthy: Lambda reports the instance as unhealthy; restart it from the console "
                                   "or terminate it and launch another")
    elif s in ("terminating", "terminated"):
        state, reason = "stopped", "%s: the instance is going away" % status
    else:
        state, reason = "provisioning", "status %r not known to gpufleet" % status
    itype = _get(p, inst, "instance_type", (dict,), where) or {}
    specs = _get(p, itype, "specs", (dict,), where) or {}
    cents = _number(p, itype, "price_cents_per_hour", where)
    region = _get(p, inst, "region", (dict,), where) or {}
    return _record(
        p, ident, label=_get(p, inst, "name", (str,), where), status=status, status_message=None, state=state,
        reason=reason, ssh=ssh, route="direct" if ssh else None,
        price_per_hour=None if cents is None else round(cents / 100.0, 4),
        gpu_count=_get(p, specs, "gpus", (int,), where),
        gpu_model=_get(p, itype, "gpu_description", (str,), where) or _get(p, itype, "description", (str,), where),
        region=_get(p, region, "name", (str,), where),
        extra={"instance_type": _get(p, itype, "name", (str,), where),
               "hostname": _get(p, inst, "hostname", (str,), where)})


def lambda_names(records):
    """Lambda hosts are named lambda-<name> when the name is set and unique in the fleet, else lambda-<id>."""
    counts = {}
    for rec in records:
        if rec["label"]:
            key = safe_name(rec["label"])
            counts[key] = counts.get(key, 0) + 1
    for rec in records:
        if rec["label"] and counts[safe_name(rec["label"])] == 1:
            rec["name"] = "lambda-%s" % safe_name(rec["label"])
    return records


# ----------------------------------------------------------------------------------------- the fleet

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


# ----------------------------------------------------------------------------- the inventory plugins

# Errors of this process by inventory source: Ansible's 'auto' plugin and the plugin itself both try a
# config file, one right after the other, so a failing provider would be asked twice (and its retries
# waited twice). source identifies one parse of one file (the plugin passes its path and the inventory
# object); an error is reused for that parse only, and for at most FAILED_TTL seconds (a later
# meta: refresh_inventory asks again).
_FAILED = {}
FAILED_TTL = 30.0


def list_hosts(provider, api_url, api_key, timeout=30, retries=3, max_wait=60.0, page_size=25, source=None,
               clock=time.monotonic):
    """Every host record of the account (unfiltered); raises ProviderError with the key scrubbed."""
    memo = (provider, source, api_url)
    if source is not None and memo in _FAILED:
        message, when = _FAILED[memo]
        if clock() - when <= FAILED_TTL:
            raise ProviderError(message)
        del _FAILED[memo]

    def get_json(url):
        return fetch_json(provider, url, api_key, timeout=timeout, retries=retries, max_wait=max_wait)

    try:
        if provider == "vastai":
            return parse(provider, vast_fetch_all(get_json, api_url, page_size), api_url)
        return parse(provider, get_json(api_url), api_url)
    except ProviderError as exc:
        message = scrub(exc, api_key)
    except Exception as exc:  # noqa: BLE001 - never let a message carry the key
        message = scrub("%s: unexpected error while listing hosts: %s: %s" % (label(provider), type(exc).__name__, exc),
                        api_key)
    if source is not None:
        _FAILED[memo] = (message, clock())
    raise ProviderError(message)


def populate(plugin, provider, records, statuses=None, name_regex=None, ready_group="gpufleet_ready", api_url=None):
    """Add the selected records to plugin.inventory (an Ansible inventory plugin with Constructable): groups,
    host variables, then compose/groups/keyed_groups; returns the warnings to show. api_url, when given, is kept
    as gpufleet_provider_api_url (playbooks/return.yml sends its calls there)."""
    name = label(provider)
    try:
        chosen = select(records, statuses, name_regex)
    except re.error as exc:
        raise ProviderError("%s: name_regex %r is not a valid regular expression: %s"
                            % (name, name_regex, exc)) from None
    inventory = plugin.inventory
    for group in (ready_group, PROVIDERS[provider]["group"], "gpufleet_not_ready"):
        inventory.add_group(group)
    for state in NOT_READY_STATES:
        inventory.add_group("gpufleet_%s" % state)
        inventory.add_child("gpufleet_not_ready", "gpufleet_%s" % state)
    strict = plugin.get_option("strict")
    for rec in chosen:
        host = rec["name"]
        inventory.add_host(host)
        for group in groups_of(rec, ready_group):
            inventory.add_host(host, group=group)
        for var, value in host_vars(rec).items():
            inventory.set_variable(host, var, value)
        if api_url:
            inventory.set_variable(host, "gpufleet_provider_api_url", shown_url(api_url))
        hostvars = inventory.get_host(host).get_vars()
        plugin._set_composite_vars(plugin.get_option("compose"), hostvars, host, strict=strict)
        plugin._add_host_to_composed_groups(plugin.get_option("groups"), hostvars, host, strict=strict)
        plugin._add_host_to_keyed_groups(plugin.get_option("keyed_groups"), hostvars, host, strict=strict)
    warnings = []
    if not records:
        warnings.append("%s: the account has no instances; the inventory is empty." % name)
    elif not chosen:
        warnings.append("%s: %d instance(s) listed, none matches statuses/name_regex; the inventory is empty."
                        % (name, len(records)))
    not_ready = [r for r in chosen if r["state"] != READY]
    if not_ready:
        warnings.append("%s: %d host(s) not ready, kept out of %s (group gpufleet_not_ready): %s" % (
            name, len(not_ready), ready_group,
            "; ".join("%s %s: %s" % (r["name"], r["state"], r["reason"]) for r in not_ready[:10])
            + (" ..." if len(not_ready) > 10 else "")))
    return warnings


class InventoryMixin:
    """parse() and verify_file() of the three inventory plugins (vastai, runpod, lambda_cloud), before Ansible's
    BaseInventoryPlugin, Constructable and Cacheable in the plugin's bases. The plugin class names NAME, PROVIDER,
    FILE_SUFFIXES and ERROR (AnsibleParserError: this module imports nothing of Ansible's)."""

    NAME = PROVIDER = ERROR = None
    FILE_SUFFIXES = ()

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(tuple(self.FILE_SUFFIXES))

    def _api_key(self):
        key = self.get_option("api_key")
        if key is not None and self.templar.is_template(key):
            key = self.templar.template(key)
        return str(key).strip() if key else ""

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        cache_key = self.get_cache_key(path)
        use_cache = self.get_option("cache") and cache
        update_cache = self.get_option("cache") and not cache
        records = None
        if use_cache:
            try:
                records = self._cache[cache_key]
            except KeyError:
                update_cache = True
        try:
            if records is None:
                records = list_hosts(
                    self.PROVIDER, self.get_option("api_url"), self._api_key(), timeout=self.get_option("timeout"),
                    retries=self.get_option("retries"), max_wait=float(self.get_option("retry_max_wait")),
                    page_size=self.get_option("page_size") if "page_size" in self._options else 25,
                    source=(path, id(getattr(inventory, "__wrapped__", inventory))))  # one parse of this file
            if update_cache:  # host records only: no API key, no tokens, no raw answer
                self._cache[cache_key] = records
            warnings = populate(self, self.PROVIDER, records, self.get_option("statuses"),
                                self.get_option("name_regex"), self.get_option("ready_group"),
                                api_url=self.get_option("api_url"))
        except ProviderError as exc:
            raise self.ERROR(str(exc)) from None
        for warning in warnings:
            self.display.warning(warning)
