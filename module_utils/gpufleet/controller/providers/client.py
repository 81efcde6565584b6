# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The providers' shared client: HTTP with bounded retries and rate limits (Retry-After), clear errors that
never carry the API key, the providers' table, type checks on the answers and the common host record that
vastai.py, runpod.py and lambda_cloud.py fill in. Plain Python (>= 3.8, stdlib only).
"""

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
