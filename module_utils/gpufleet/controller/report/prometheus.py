"""gpufleet.prom: the one Prometheus writer (node_exporter textfile collector; schema in docs/metrics.md)."""

import datetime
import json
from pathlib import Path

from ..judgement import door as _door
from ._common import _INF, STATUSES, _num, _text
from .summary import _DRIFT_FIELDS, _as_summary

# One metric schema (docs/metrics.md): per-GPU series (labels gpu, uuid, name) belong to each host's
# exporter (gpufleet_gpu_*, roles/gpu_monitoring); this file holds fleet- and host-level series only,
# under names the exporter never writes (gpufleet_host_*, gpufleet_fleet_*, gpufleet_report_*), so one
# Prometheus holds one label set per name. Host-level series keep the file small: about 0.9 KiB per
# host, under 10 MiB at 10,000 hosts (scripts/bench-report prints it).
# The schema is data, metrics.json beside this file, read once: {name: (type, labels, help)} in the file's
# order, which is the order the metrics are written in; labels are the whole label set of every sample of
# that name.
SCHEMA = Path(__file__).with_name("metrics.json")
PROMETHEUS_METRICS = {m["name"]: (m["type"], tuple(m["labels"]), m["help"])
                      for m in json.loads(SCHEMA.read_text(encoding="utf-8"))["metrics"]}
_SEVERITIES = ("critical", "warning", "info", "unknown")


def prom_escape(value):
    """A label value escaped per the Prometheus text exposition format."""
    text = value if isinstance(value, str) else _text(value)
    if "\\" in text or '"' in text or "\n" in text:
        return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return text


def _prom_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _pv(value):
    """The sample text of ``value``, or None for no sample (null, NaN, infinite, text)."""
    if value is None:
        return None
    t = type(value)
    if t is int:
        return str(value)
    if t is float:
        return repr(value) if -_INF < value < _INF else None
    if t is bool:
        return "1" if value else "0"
    value = _num(value)
    return None if value is None else _prom_value(value)


def _timestamp(iso):
    try:
        return datetime.datetime.fromisoformat(str(iso)).timestamp()
    except (TypeError, ValueError):
        return None


def _drifting(s):
    return {(d["host"], d["field"]) for d in s["totals"].get("drift") or ()}


def _host_gate(h):
    """[(test, lowest fraction_of_peak or None, passed: True/False/None)] over the host's GPUs, by test."""
    tests = {}
    for g in h["gpus"]:
        for e in g["gate"]:
            low, passed = tests.get(e["test"], (None, None))
            frac = _num(e["fraction_of_peak"])
            if frac is not None and -_INF < frac < _INF and (low is None or frac < low):
                low = frac
            if e["passed"] is not None:
                passed = bool(e["passed"]) if passed is None else passed and bool(e["passed"])
            tests[e["test"]] = (low, passed)
    return [(test, low, passed) for test, (low, passed) in tests.items()]


# The status label of each status, made once.
_STATUS_LABELS = [(st, ',status="%s"' % st) for st in STATUSES]


def _prom_samples(s):
    """Every sample as (metric, [line]), in the schema's order. A host name seen before (two result
    files for one host) is written once, the first one wins, so no series repeats. Each label value
    is escaped once per host, not once per sample."""
    out = {name: [] for name in PROMETHEUS_METRICS}
    t = s["totals"]
    drifting = _drifting(s)
    drift_fields = [field for field, _unused, usual in _DRIFT_FIELDS if t.get(usual) is not None]
    hosts_seen = set()
    for h in s["hosts"]:
        hl = 'host="%s"' % prom_escape(h["host"])
        if hl in hosts_seen:
            continue
        hosts_seen.add(hl)
        _host_samples(out, h, hl, drifting, drift_fields)
    _fleet_samples(out, t, s["generated_at"])
    yield from out.items()


def _host_samples(out, h, hl, drifting, drift_fields):
    """One host's samples (gpufleet_host_*) appended to ``out``; ``hl``: its host label, escaped."""
    out["gpufleet_host_up"].append("gpufleet_host_up{%s} %d" % (
        hl, 1 if h["status"] != "unreachable" and h["reachable"] is not False else 0))
    # The current status only: one line per host, not one per status (the file's size at
    # 10,000 hosts); count by (status) or {status="failed"} read it.
    for st, sl in _STATUS_LABELS:
        if h["status"] == st:
            out["gpufleet_host_status"].append("gpufleet_host_status{%s%s} 1" % (hl, sl))
    out["gpufleet_host_simulated"].append("gpufleet_host_simulated{%s} %d" % (hl, 1 if h["simulated"] else 0))

    def put(name, value, extra=""):
        v = _pv(value)
        if v is not None:
            out[name].append("%s{%s%s} %s" % (name, hl, extra, v))

    put("gpufleet_host_gpus", h["gpu_count"])
    if h["gpus"]:
        put("gpufleet_host_gpus_lost", sum(1 for g in h["gpus"] if g["lost"]))
    models = {}
    for model, n in h["gpu_models"].items():
        models.setdefault(prom_escape(model), n)
    for model in sorted(models):
        put("gpufleet_host_gpus_by_model", models[model], ',name="%s"' % model)
    put("gpufleet_host_price_per_hour_dollars", h["price_per_hour"])
    put("gpufleet_host_peak_bf16_tflops", h["peak_bf16_tflops"])
    if h["gpus"] or h["findings"]:
        # critical and warning always (0 included); info and unknown only when there are some.
        found = [f.get("severity") for f in h["findings"]]
        for sev in _SEVERITIES:
            n = found.count(sev)
            if n or sev in ("critical", "warning"):
                put("gpufleet_host_health_findings", n, ',severity="%s"' % sev)
    if h["gpus"]:
        for field in drift_fields:
            put("gpufleet_host_version_drift", 1 if (h["host"], field) in drifting else 0, ',field="%s"' % field)
    for test, low, passed in _host_gate(h):
        tl = ',test="%s"' % prom_escape(test)
        put("gpufleet_host_gate_fraction_of_expected", low, tl)
        put("gpufleet_host_gate_passed", passed, tl)
    if h.get("box"):
        _box_samples(put, h)


_MB = 1e6
# Which finding says a figure is far below its listing (judgement BOX_RETURN_CODES), by the kind label.
_BELOW = (("disk_read", "box_disk_below_listing"), ("download", "box_download_below_listing"),
          ("upload", "box_upload_below_listing"))


def _bps(mb_s):
    return None if _num(mb_s) is None else round(mb_s * _MB)


def _box_samples(put, h):
    """The storage and network samples of a host with that evidence (the row's ``box``)."""
    box = h["box"]
    disk = box.get("disk") or {}
    if disk.get("rand_read_mb_s") is not None:
        put("gpufleet_host_box_disk_read_bytes_per_second", _bps(disk["rand_read_mb_s"]),
            ',kind="random_%sk"' % prom_escape(disk.get("rand_block_kib") or "unknown"))
    put("gpufleet_host_box_disk_read_bytes_per_second", _bps(disk.get("read_mb_s")), ',kind="sequential"')
    put("gpufleet_host_box_disk_write_bytes_per_second", _bps(disk.get("write_mb_s")))
    put("gpufleet_host_box_download_bytes_per_second", _bps((box.get("download") or {}).get("mb_s")))
    put("gpufleet_host_box_upload_bytes_per_second", _bps((box.get("upload") or {}).get("mb_s")))
    listing = box.get("listing") or {}
    put("gpufleet_host_box_listing_bytes_per_second", _bps(listing.get("disk_read_mb_s")), ',kind="disk_read"')
    for kind, key in (("download", "net_down_mbit"), ("upload", "net_up_mbit")):
        mbit = _num(listing.get(key))
        put("gpufleet_host_box_listing_bytes_per_second", None if mbit is None else round(mbit * _MB / 8),
            ',kind="%s"' % kind)
    put("gpufleet_host_box_free_bytes", box.get("free_bytes"))
    put("gpufleet_host_box_small_files_seconds", (box.get("torch_files") or {}).get("total_s"))
    seen = set()
    for e in box.get("dns") or ():
        name = prom_escape(e.get("name"))
        if e.get("ok") is not False and _num(e.get("ms")) is not None and name not in seen:
            seen.add(name)
            put("gpufleet_host_box_dns_lookup_seconds", e["ms"] / 1000.0, ',name="%s"' % name)
    # 1 or 0 only where the judgement held a measured figure against a claim: no listing, no figure (a failed
    # transfer, no upload) or one not held against it (a network filesystem, a transfer too short) has no sample,
    # never a 0 that reads as fine.
    codes = {f.get("code") for f in h.get("judgement") or () if not f.get("outranked_by")}
    held = _door.box_text.held_against_listing(box)
    for kind, code in _BELOW:
        if kind in held:
            put("gpufleet_host_box_below_listing", 1 if code in codes else 0, ',kind="%s"' % kind)


def _fleet_samples(out, t, generated_at):
    """The fleet's samples (gpufleet_fleet_*, gpufleet_report_*) from its totals, appended to ``out``."""
    def fleet(name, value, labels=""):
        v = _pv(value)
        if v is not None:
            out[name].append("%s{%s} %s" % (name, labels, v))

    for st in STATUSES:
        fleet("gpufleet_fleet_hosts", t["hosts_by_status"].get(st, 0), 'status="%s"' % st)
    models = {}
    for model, n in (t.get("gpus_by_model") or {}).items():
        models.setdefault(prom_escape(model), n)
    for model in sorted(models):
        fleet("gpufleet_fleet_gpus", models[model], 'name="%s"' % model)
    fleet("gpufleet_fleet_gpus_usable", t.get("gpus_usable"))
    if t.get("priced_hosts"):
        fleet("gpufleet_fleet_price_per_hour_dollars", t.get("price_per_hour"))
    fleet("gpufleet_fleet_dollars_per_peak_tflop_hour", t.get("usd_per_peak_tflop_hour"))
    fleet("gpufleet_fleet_dollars_per_measured_tflop_hour", t.get("usd_per_measured_tflop_hour"))
    fleet("gpufleet_report_timestamp_seconds", _timestamp(generated_at))


_PROM_LINES_PER_CHUNK = 8192


def iter_prometheus(data):
    """``to_prometheus`` in chunks."""
    s = _as_summary(data)
    for name, lines in _prom_samples(s):
        if not lines:
            continue
        kind, _unused, help_text = PROMETHEUS_METRICS[name]
        yield "# HELP %s %s\n# TYPE %s %s\n" % (name, help_text, name, kind)
        for start in range(0, len(lines), _PROM_LINES_PER_CHUNK):
            yield "\n".join(lines[start:start + _PROM_LINES_PER_CHUNK]) + "\n"


def to_prometheus(data):
    """node_exporter textfile-collector text: HELP/TYPE per metric, then its samples; no duplicates."""
    return "".join(iter_prometheus(data))
