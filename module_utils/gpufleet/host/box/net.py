# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The box's network as the renter's jobs meet it: name lookups, one download, optionally one upload (box_probe).

``resolve`` times ``getaddrinfo`` for each name in a worker thread abandoned at the cap (getaddrinfo takes no
timeout); ``download`` reads one HTTP(S) stream with urllib until a byte or a time cap; ``upload`` sends one body.
Proxies are the environment's (urllib's ProxyHandler). No figure is 0 for "could not tell": a failed transfer has an
error text and a null rate. URLs in the result carry no credentials and no query (``public_url``). MB is 10^6 bytes.
"""

import base64
import socket
import threading
import time
from urllib.error import HTTPError, URLError
from urllib.parse import unquote, urlsplit, urlunsplit
from urllib.request import HTTPRedirectHandler, Request, build_opener

MB = 1000000.0
CHUNK = 64 * 1024
USER_AGENT = "gpufleet-box-probe/1"
# A file the renter fetches anyway: torch 2.5.1's CUDA 12.4 wheel for CPython 3.11 on the PyTorch wheel index
# (about 900 MB, CloudFront), the wheel the torch role installs on such a box; only its first download_max_bytes are
# read. Listed in uv lock files with sha256 6b2966ed...; change it here when the index drops it.
DEFAULT_DOWNLOAD_URL = "https://download.pytorch.org/whl/cu124/torch-2.5.1%2Bcu124-cp311-cp311-linux_x86_64.whl"
DEFAULT_DNS_NAMES = ("huggingface.co", "download.pytorch.org", "pypi.org")


def public_url(url):
    """``url`` without user:password@, query and fragment: what may appear in a result."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = "[%s]" % host
    try:
        port = parts.port
    except ValueError:  # out of range or not a number: left out
        port = None
    if port:
        host += ":%d" % port
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def has_secret(url):
    """True when ``url`` carries what ``public_url`` takes out: user:password@ or a query (a signed URL)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return True
    return parts.username is not None or bool(parts.query) or public_url(url) != url.split("#", 1)[0]


def _request(url, headers, **kwargs):
    """A urllib Request for ``url``: user:password@ becomes a Basic Authorization header (urllib would take it for
    the host), the fragment is dropped, the query is kept (a presigned URL needs it)."""
    parts = urlsplit(url)
    headers = dict(headers, **{"User-Agent": USER_AGENT})
    if parts.username is not None:
        pair = "%s:%s" % (unquote(parts.username), unquote(parts.password or ""))
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    netloc = urlsplit(public_url(url)).netloc
    target = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    return Request(target, headers=headers, **kwargs)  # noqa: S310 - scheme checked (check_url) by the callers


def _origin(url):
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    scheme = (parts.scheme or "").lower()
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


class CredentialsStayHome(HTTPRedirectHandler):
    """urllib's redirects, but the URL's credentials (its Authorization header) go only to the URL's own scheme, host
    and port: urllib copies every header of the request to wherever a redirect points (a CDN, another host)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(new.full_url) != _origin(req.full_url):
            for name in ("Authorization", "Cookie"):
                new.remove_header(name)
        return new


def _opener():
    return build_opener(CredentialsStayHome)


def check_url(url):
    """None when ``url`` is an http(s) URL with a host, else why not (without echoing its secrets)."""
    try:
        parts = urlsplit(url)
        if parts.port is not None and not 0 < parts.port < 65536:  # .port itself raises ValueError on a bad port
            return "not a URL: port %s" % parts.port
    except ValueError as exc:
        return "not a URL: %s" % exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL with a host: %s" % public_url(url)
    return None


def bounded(fn, timeout):
    """Run ``fn()`` in a daemon thread and wait at most ``timeout`` s: (finished, result, exception). A thread still
    running is abandoned; it ends with the module's process."""
    box = {}

    def work():
        try:
            box["result"] = fn()
        except BaseException as exc:  # handed back, not raised in the thread
            box["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive(), box.get("result"), box.get("error")


def resolve(names, timeout=3.0, getaddrinfo=socket.getaddrinfo, clock=time.monotonic):
    """[{name, ms, ok, error}] for each name, looked up at the same time, each abandoned at ``timeout`` s."""
    results = [None] * len(names)

    def one(i, name):
        start = clock()
        finished, addrs, exc = bounded(lambda: getaddrinfo(name, 443, 0, socket.SOCK_STREAM), timeout)
        ms = round((clock() - start) * 1000, 1)
        if not finished:
            results[i] = {"name": name, "ms": None, "ok": False,
                          "error": "no answer in %s s (getaddrinfo abandoned)" % timeout}
        elif exc is not None:
            results[i] = {"name": name, "ms": ms, "ok": False, "error": str(exc)}
        else:
            results[i] = {"name": name, "ms": ms, "ok": bool(addrs), "error": None if addrs else "no address"}

    threads = [threading.Thread(target=one, args=(i, n), daemon=True) for i, n in enumerate(names)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 1)
    return [r or {"name": n, "ms": None, "ok": False, "error": "lookup did not finish"} for r, n in zip(results, names)]


def error_text(exc, url):
    """An error's text with the URL's secrets taken out."""
    if isinstance(exc, HTTPError):
        text = "HTTP %s %s" % (exc.code, exc.reason)
    elif isinstance(exc, URLError):
        text = "no connection: %s" % (exc.reason,)
    elif isinstance(exc, (socket.timeout, TimeoutError)):
        text = "timed out"
    else:
        text = "%s: %s" % (type(exc).__name__, exc)
    parts = urlsplit(url)
    for secret in (url, parts.query, parts.password, parts.username):
        if secret:
            text = text.replace(secret, "***")
    return text[:300]


class _Transfer:
    """What one transfer has done so far, readable while its thread still runs."""

    def __init__(self, clock):
        self.clock = clock
        self.bytes = 0
        self.first = self.last = None  # when the body began, when its last byte came
        self.status = None

    def count(self, n):
        now = self.clock()
        if self.first is None:
            self.first = now
        self.bytes += n
        self.last = now


def _record(url, kind, transfer, start, finished, exc, clock):
    """The download/upload record from a transfer (finished or abandoned at its cap)."""
    end = transfer.last if finished and transfer.last is not None else clock()
    body_s = end - transfer.first if transfer.first is not None else None
    parts = urlsplit(url)
    out = {"url": public_url(url), "host": parts.hostname, "bytes": transfer.bytes, "seconds": None, "mb_s": None,
           "start_s": round(transfer.first - start, 3) if transfer.first is not None else None,
           "streams": 1, "status": transfer.status, "error": None, "stopped_by": None}
    if body_s is not None:
        out["seconds"] = round(body_s, 3)
        if transfer.bytes and body_s > 0:
            out["mb_s"] = round(transfer.bytes / body_s / MB, 2)
    if exc is not None and not transfer.bytes and isinstance(exc, (socket.timeout, TimeoutError)):
        out["error"] = "no data in the %s's time" % kind  # the socket's own timeout came first: the same stall
        out["mb_s"] = None
    elif exc is not None:
        out["error"] = error_text(exc, url)
        out["status"] = getattr(exc, "code", None) or out["status"]
        out["mb_s"] = None
    elif not finished:
        out["stopped_by"] = "time"
        if not transfer.bytes:
            out["error"] = "no data in the %s's time" % kind
    return out


def _transfer(url, kind, max_s, clock, body):
    """Run ``body(transfer, stop)`` (it returns why it ended: bytes, end) in a thread abandoned at ``max_s`` s, after
    the URL's check; the record of what it did."""
    transfer = _Transfer(clock)
    start = clock()
    bad = check_url(url)
    if bad:
        return _record(url, kind, transfer, start, True, ValueError(bad), clock)
    stop = [False]
    finished, ended, exc = bounded(lambda: body(transfer, stop), max_s)
    stop[0] = True  # an abandoned body stops at its next block
    out = _record(url, kind, transfer, start, finished, exc, clock)
    if finished and exc is None:
        out["stopped_by"] = ended
    return out


def download(url, max_bytes=50 * MB, max_s=5.0, opener=None, clock=time.monotonic):
    """Read one stream of ``url`` until ``max_bytes`` or ``max_s`` s (connection included); the rate is the body's
    bytes over the body's seconds, from the response headers to its last byte."""

    def body(transfer, stop):
        req = _request(url, {"Accept-Encoding": "identity"})
        resp = (opener or _opener()).open(req, timeout=max_s)
        try:
            transfer.status = resp.status
            transfer.first = clock()  # the headers are in: the body's clock starts
            while transfer.bytes < max_bytes and not stop[0]:
                data = resp.read(int(min(CHUNK, max_bytes - transfer.bytes)))
                if not data:
                    return "end"
                transfer.count(len(data))
            return "bytes"
        finally:
            resp.close()

    return _transfer(url, "download", max_s, clock, body)


class _Body:
    """An upload body of ``size`` bytes that counts what the connection took from it."""

    def __init__(self, size, transfer, stop):
        self.left, self.transfer, self.stop = int(size), transfer, stop
        self.block = b"\xa5" * CHUNK

    def read(self, n=-1):
        if self.stop[0] or self.left <= 0:
            return b""
        n = CHUNK if n is None or n < 0 else min(n, CHUNK)
        n = min(n, self.left)
        self.left -= n
        self.transfer.count(n)
        return self.block[:n]


def upload(url, max_bytes=50 * MB, max_s=5.0, method="POST", opener=None, clock=time.monotonic):
    """Send one body of ``max_bytes`` to ``url`` (``method``), abandoned at ``max_s`` s; the rate counts the bytes the
    connection took, from the first to the answer (or the cap)."""

    def body(transfer, stop):
        req = _request(url, {"Content-Type": "application/octet-stream", "Content-Length": str(int(max_bytes))},
                       data=_Body(max_bytes, transfer, stop), method=method)
        resp = (opener or _opener()).open(req, timeout=max_s)
        try:
            transfer.status = resp.status
            transfer.last = clock()
            resp.read(CHUNK)
        finally:
            resp.close()
        return "bytes"

    return _transfer(url, "upload", max_s, clock, body)
