"""Reading the per-host result files: one folder of ``<inventory_hostname>.json``, or a bundle."""

import json
import os

from ..parallel import gc_paused as _gc_paused
from ._common import NOT_REACHED, ReportInputError


def _placeholder(host, reason, **extra):
    result = {
        "host": host, "reachable": False, "failed": False, "reason": reason, "provider": None,
        "price_per_hour": None, "gpu": None, "gate": None, "doctor": None, "collected_at": None,
    }
    result.update(extra)
    return result


def _list_folder(folder):
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ReportInputError("results folder %r does not exist or is not a folder" % folder)
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise ReportInputError("cannot list results folder %r: %s" % (folder, exc)) from exc
    return folder, [n for n in names if n.endswith(".json") and not n.startswith(".")]


def _load_file(folder, name):
    """One result file as a dict (``host`` defaulted to the file's stem, ``_file`` added), a
    placeholder with ``load_error`` when it cannot be read, or None when it is not a plain file."""
    stem = name[:-len(".json")]
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        try:
            data = json.loads(raw)
        except UnicodeDecodeError:  # not UTF-8: read it with replacement characters, as before
            data = json.loads(raw.decode("utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        return _placeholder(stem, None, reachable=None, load_error="%s: %s" % (name, exc))
    if not isinstance(data, dict):
        return _placeholder(stem, None, reachable=None,
                            load_error="%s: expected a JSON object, got %s" % (name, type(data).__name__))
    if not isinstance(data.get("host"), str) or not data["host"]:
        data["host"] = stem
    data["_file"] = name
    return data


def _inventory_list(inventory_hosts):
    if inventory_hosts is None:
        return None
    if isinstance(inventory_hosts, str):
        inventory_hosts = inventory_hosts.split(",")
    return [str(h).strip() for h in inventory_hosts]


def _iter_files(folder, names, wanted, known):
    """Results of the files ``names``; their stems and host names are added to ``known``."""
    for name in names:
        result = _load_file(folder, name)
        if result is None:
            continue
        stem = name[:-len(".json")]
        known.add(stem)
        known.add(result.get("host"))
        if wanted is not None and stem not in wanted and result.get("host") not in wanted:
            result["not_in_inventory"] = True
        yield result


def _iter_missing(inventory, known):
    """Placeholders for the inventory hosts that left no result file."""
    for host in inventory or ():
        if host and host not in known:
            known.add(host)
            yield _placeholder(host, NOT_REACHED, missing=True)


def iter_results(folder, inventory_hosts=None):
    """Yield the results of ``load_results`` one at a time, in file-name order, then the
    placeholders for inventory hosts without a file; the caller may drop each after use."""
    folder, names = _list_folder(folder)
    inventory = _inventory_list(inventory_hosts)
    wanted = None if inventory is None else set(inventory)
    known = set()
    yield from _iter_files(folder, names, wanted, known)
    yield from _iter_missing(inventory, known)


def load_results(folder, inventory_hosts=None):
    """Read every ``*.json`` result file in ``folder``; add a placeholder for each inventory host without one.

    ``inventory_hosts``: None, a list of host names, or a comma-separated string. Returns a list of
    result dicts sorted by host name. A file that is not valid JSON (or not an object) becomes a
    result with ``load_error`` set, never an exception. Raises ``ReportInputError`` when ``folder``
    is missing or not a readable folder.
    """
    with _gc_paused():
        results = list(iter_results(folder, inventory_hosts))
    results.sort(key=lambda r: str(r.get("host")))
    return results


def split_bundle(path, folder):
    """Write each line of ``path`` (one JSON result object with its ``host``) to ``folder/<host>.json``.

    Returns the host names written. Raises ``ReportInputError`` on a line that is not a JSON object
    with a plain host name (no path separator), before any file is written.
    """
    entries = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                result = json.loads(line)
            except ValueError as exc:
                raise ReportInputError("%s line %d is not JSON: %s" % (path, number, exc)) from None
            host = result.get("host") if isinstance(result, dict) else None
            if not isinstance(host, str) or not host or "/" in host or host in (".", ".."):
                raise ReportInputError("%s line %d has no usable 'host' (a plain inventory name)" % (path, number))
            entries.append((host, line.strip()))
    os.makedirs(folder, exist_ok=True)
    for host, text in entries:
        with open(os.path.join(folder, host + ".json"), "w", encoding="utf-8") as out:
            out.write(text + "\n")
    return [host for host, _unused in entries]


def read_hosts_file(path):
    """Inventory host names from a text file: one per line; blank lines and ``#`` comments skipped."""
    with open(path, encoding="utf-8") as fh:
        return [line.strip() for line in fh if line.strip() and not line.lstrip().startswith("#")]
