"""fleet.json: the summary as JSON, one compact line per list element, laid out by hand for speed."""

import json
import math

from .summary import _as_summary


def _json_safe(value):
    """A copy with NaN/Infinity as null and non-text keys as text (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


_JSON_CHUNK = 256  # list elements per chunk written


def _json_encoder():
    # check_circular off: a cycle cannot come from JSON files, and it fails either way (RecursionError).
    encode = json.JSONEncoder(sort_keys=True, default=str, allow_nan=False, check_circular=False).encode

    def enc(value):
        try:
            return encode(value)
        except (TypeError, ValueError):  # NaN/Infinity or mixed non-text keys in host-provided values
            return json.dumps(_json_safe(value), sort_keys=True, default=str, allow_nan=False)
    return enc


def _json_block(value, enc, pad):
    """``value`` laid out like ``json.dumps(indent=2)`` at indent ``pad``, except that each element of
    a non-empty list is one compact line (the C encoder); yields chunks."""
    inner = pad + "  "
    if isinstance(value, dict) and value:
        try:
            keys = sorted(value)
        except TypeError:
            yield enc(value)
            return
        yield "{\n"
        for n, key in enumerate(keys):
            yield "%s%s: " % (inner, enc(str(key) if not isinstance(key, str) else key))
            yield from _json_block(value[key], enc, inner)
            yield ",\n" if n < len(keys) - 1 else "\n"
        yield pad + "}"
    elif isinstance(value, (list, tuple)) and value:
        yield "[\n"
        last = len(value)
        for start in range(0, last, _JSON_CHUNK):
            chunk = value[start:start + _JSON_CHUNK]
            end = "\n" if start + _JSON_CHUNK >= last else ",\n"
            yield ",\n".join(inner + enc(v) for v in chunk) + end
        yield pad + "]"
    else:
        yield enc(value)


def iter_json(data):
    """``to_json`` in chunks."""
    # json's C encoder only runs without ``indent``: indenting the whole report through the pure
    # Python encoder took ~70% of write_all on a large fleet. So the nesting is laid out by hand,
    # with one compact line per element of each list (one host, one bad host, one drift entry ...).
    summary = _as_summary(data)
    yield from _json_block(summary, _json_encoder(), "")
    yield "\n"


def to_json(data):
    """The summary as JSON text: one line per host. ``results`` (the raw result files) are in it
    only when the summary was made with ``include_results=True``."""
    return "".join(iter_json(data))
