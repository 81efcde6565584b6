"""Fleet report: the sample fleet in tests/fixtures/report/ rendered in every format."""

import base64
import copy
import csv
import datetime
import gc
import hashlib
import html
import io
import json
import math
import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet.controller import report

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "report"
CLI = ROOT / "scripts" / "fleet-report"
NOW = datetime.datetime(2025, 6, 3, 9, 30, tzinfo=datetime.timezone.utc)

INVENTORY = ["gpu-h100-01", "gpu-a100-02", "gpu-4090-03", "gpu-nodriver-04", "gpu-unreach-05", "gpu-l40s-06",
             "demo-sim-07", "gpu-never-08", "cpu-box-09"]
EXPECTED_STATUS = {
    "gpu-h100-01": "ok",
    "gpu-a100-02": "failed",  # GPU 2 uncorrectable ECC + failed row remap, GPU 3 lost (Xid 79)
    "gpu-4090-03": "degraded",  # PCIe x4 riser, gate h2d bandwidth failed
    "gpu-nodriver-04": "no-gpu",  # nvmlInit: Driver Not Loaded
    "gpu-unreach-05": "unreachable",  # ssh timed out
    "gpu-l40s-06": "failed",  # playbook failed: disk full
    "demo-sim-07": "ok",  # fake NVML, labelled simulated
    "gpu-never-08": "unreachable",  # no result file at all
    "cpu-box-09": "ok",  # a CPU host by intent (expected_gpu_count 0): no GPU stack, CPU torch
}
# What a user must find in every format, per bad host.
MUST_SHOW = {
    "gpu-unreach-05": "Connection timed out",
    "gpu-never-08": "no result (host not reached)",
    "gpu-l40s-06": "No space left on device",
    "gpu-nodriver-04": "Driver Not Loaded",
    "gpu-a100-02": "is lost",
}


@pytest.fixture(scope="module")
def results():
    return report.load_results(FIXTURES, inventory_hosts=INVENTORY)


@pytest.fixture(scope="module")
def summary(results):
    return report.summarize(results, now=NOW)


def by_host(summary):
    return {h["host"]: h for h in summary["hosts"]}


# --------------------------------------------------------------------------- Prometheus validator
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_SAMPLE = re.compile(r"^(%s)(?:\{((?:%s)(?:,%s)*)?\})? (\S+)$" % (_NAME, _LABEL, _LABEL))
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def _unescape(value):
    return re.sub(r'\\([\\"n])', lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse_prometheus(text):
    """Validate node_exporter textfile syntax; return {(name, frozenset(labels)): value}."""
    assert text.endswith("\n")
    series = {}
    help_seen, type_seen, finished = set(), {}, set()
    current = None
    for line in text.splitlines():
        assert line.strip(), "blank line in textfile"
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert name not in help_seen, "second HELP for %s" % name
            help_seen.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("gauge", "counter", "untyped", "histogram", "summary")
            assert name not in type_seen, "second TYPE for %s" % name
            assert name in help_seen, "TYPE before HELP for %s" % name
            type_seen[name] = kind
            continue
        assert not line.startswith("#"), line
        m = _SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        assert name in help_seen and name in type_seen, "%s has samples before HELP/TYPE" % name
        if name != current:
            assert name not in finished, "samples of %s are not grouped" % name
            if current:
                finished.add(current)
            current = name
        float(value)  # raises on a bad value
        pairs = [(k, _unescape(v)) for k, v in _LABEL_RE.findall(labels)]
        assert len({k for k, _ in pairs}) == len(pairs), "repeated label name in %r" % line
        key = (name, frozenset(pairs))
        assert key not in series, "duplicate series %r" % line
        series[key] = float(value)
    return series


def value(series, name, **labels):
    return series[(name, frozenset((k, str(v)) for k, v in labels.items()))]


# --------------------------------------------------------------------------- loading
def test_load_results_lists_inventory_hosts_without_a_file_as_unreachable(results):
    hosts = [r["host"] for r in results]
    assert hosts == sorted(INVENTORY)
    never = next(r for r in results if r["host"] == "gpu-never-08")
    assert never["reachable"] is False
    assert never["reason"] == "no result (host not reached)"


def test_load_results_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(report.ReportInputError, match="does not exist"):
        report.load_results(tmp_path / "nope")


def test_load_results_survives_broken_files_and_flags_hosts_outside_inventory(tmp_path):
    (tmp_path / "broken.json").write_text('{"host": "broken", "reachable": tr')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "stale.json").write_text('{"host": "stale", "reachable": true, "gpu": null}')
    (tmp_path / ".hidden.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a result")
    results = report.load_results(tmp_path, inventory_hosts="broken,list")
    assert [r["host"] for r in results] == ["broken", "list", "stale"]
    s = report.summarize(results, now=NOW)
    hosts = by_host(s)
    assert hosts["broken"]["status"] == "unknown"
    assert "result file unreadable" in hosts["broken"]["reasons"][0]
    assert "expected a JSON object" in hosts["list"]["reasons"][0]
    assert any("stale" in w and "not in the given inventory" in w for w in s["warnings"])


# --------------------------------------------------------------------------- summary
def test_every_host_gets_the_status_a_user_expects(summary):
    assert {h: e["status"] for h, e in by_host(summary).items()} == EXPECTED_STATUS


def test_fleet_totals(summary):
    t = summary["totals"]
    assert t["hosts"] == 9
    assert t["hosts_by_status"] == {"ok": 3, "degraded": 1, "failed": 2, "unreachable": 2, "no-gpu": 1,
                                    "unknown": 0}
    assert t["gpus"] == 8 + 4 + 1 + 2 + 1
    assert t["gpus_by_model"]["NVIDIA H100 80GB HBM3"] == 8
    assert t["gpus_by_model"]["NVIDIA A100 80GB PCIe"] == 4
    # usable: GPUs on ok/degraded hosts, none lost: 8 H100 + 1 RTX 4090 + 1 H200
    assert t["gpus_usable"] == 10
    assert t["simulated_hosts"] == 1
    mib = 8 * 81559 + 3 * 81920 + 24564 + 2 * 46068 + 143771  # the lost A100 reports no memory
    assert t["gpu_memory_total_gib"] == round(mib / 1024.0, 1)
    # dense BF16 peaks from the spec rows: H100 SXM 989, A100 312 (lost one excluded), 4090 165.2, L40S 362, H200 989
    assert t["peak_bf16_tflops"] == pytest.approx(8 * 989 + 3 * 312 + 165.2 + 2 * 362.05 + 989, abs=0.2)
    assert t["price_per_hour"] == pytest.approx(23.92 + 7.16 + 0.39 + 1.10 + 0.42 + 1.72 + 0.10)
    assert t["priced_hosts"] == 7
    peak_priced = 8 * 989 + 3 * 312 + 165.2 + 2 * 362.05
    assert t["usd_per_peak_tflop_hour"] == pytest.approx((23.92 + 7.16 + 0.39 + 1.72) / peak_priced, rel=1e-3)
    h100_measured = sum(742.5 - 3.1 * i for i in range(8))
    assert t["measured_tflops"] == pytest.approx(h100_measured + 148.7, abs=0.1)
    assert t["usd_per_measured_tflop_hour"] == pytest.approx((23.92 + 0.39) / (h100_measured + 148.7), rel=1e-3)


def test_bad_hosts_name_each_broken_host_with_reason_and_action(summary):
    bad = {b["host"]: b for b in summary["bad_hosts"]}
    assert set(bad) == {h for h, st in EXPECTED_STATUS.items() if st != "ok"}
    assert [b["status"] for b in summary["bad_hosts"]] == ["failed", "failed", "no-gpu", "unreachable",
                                                          "unreachable", "degraded"]
    for host, text in MUST_SHOW.items():
        assert any(text in r for r in bad[host]["reasons"]), (host, bad[host]["reasons"])
    a100 = " ".join(bad["gpu-a100-02"]["reasons"])
    assert "GPU 2: 2 uncorrectable ECC" in a100 and "Xid 79" in a100
    assert bad["gpu-a100-02"]["action"] == report.ACTION_RETURN
    assert bad["gpu-nodriver-04"]["action"] == report.ACTION_RETURN
    assert bad["gpu-4090-03"]["action"] == report.ACTION_RETURN
    assert any("x4" in r for r in bad["gpu-4090-03"]["reasons"])
    assert any("gate h2d_bandwidth failed" in r for r in bad["gpu-4090-03"]["reasons"])
    assert bad["gpu-l40s-06"]["action"] == report.ACTION_FIX
    assert bad["gpu-unreach-05"]["action"] == report.ACTION_CHECK


def test_gate_failure_flags_an_otherwise_healthy_host(results):
    h100 = copy.deepcopy(next(r for r in results if r["host"] == "gpu-h100-01"))
    h100["gate"][0].update(measured=410.0, fraction_of_peak=0.41, passed=False, why="below 0.6 of peak")
    entry = report.summarize([h100], now=NOW)["hosts"][0]
    assert entry["status"] == "degraded"
    assert entry["reasons"] == ["GPU 0: gate matmul_bf16 failed (41% of peak): below 0.6 of peak"]


def test_doctor_findings_escalate_and_choose_the_action(results):
    l40s = copy.deepcopy(next(r for r in results if r["host"] == "gpu-l40s-06"))
    l40s.update(failed=False, reason=None, doctor={"status": "broken", "findings": [
        {"code": "cpu_only_wheel", "severity": "critical", "fixable": True,
         "message": "torch 2.3.1+cpu is a CPU-only wheel", "remedy": "install the cu121 wheel"}]})
    entry = report.summarize([l40s], now=NOW)["hosts"][0]
    assert entry["status"] == "failed"
    assert entry["action"] == report.ACTION_FIX
    assert "doctor: torch 2.3.1+cpu is a CPU-only wheel" in entry["reasons"]  # the remedy: in "what to do"
    (group,) = report.summarize([l40s], now=NOW)["what_to_do"]
    assert group["action"] == report.ACTION_FIX and group["items"][0]["remedy"] == "install the cu121 wheel"
    l40s["doctor"]["findings"][0].update(code="container_without_gpus", fixable=False)
    assert report.summarize([l40s], now=NOW)["hosts"][0]["action"] == report.ACTION_RETURN


# --------------------------------------------------------------------------- every format
RENDERERS = {
    "json": report.to_json,
    "csv": report.to_csv,
    "markdown": report.to_markdown,
    "html": report.to_html,
}


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_unreachable_and_failed_hosts_appear_with_reasons_in_every_format(summary, fmt):
    text = RENDERERS[fmt](summary)
    for host, reason in MUST_SHOW.items():
        assert host in text, (fmt, host)
        assert reason in text, (fmt, reason)
    for status in EXPECTED_STATUS.values():
        assert status in text


def test_prometheus_marks_bad_hosts(summary):
    series = parse_prometheus(report.to_prometheus(summary))
    for host, status in EXPECTED_STATUS.items():
        # one series per host, its current status (the file stays small at 10,000 hosts)
        assert value(series, "gpufleet_host_status", host=host, status=status) == 1
        assert [dict(k[1])["status"] for k in series if k[0] == "gpufleet_host_status" and ("host", host) in k[1]] \
            == [status]
    assert value(series, "gpufleet_host_up", host="gpu-unreach-05") == 0
    assert value(series, "gpufleet_host_up", host="gpu-never-08") == 0
    assert value(series, "gpufleet_host_up", host="gpu-h100-01") == 1


def test_renderers_accept_raw_results_as_well_as_a_summary(results):
    assert "gpu-never-08" in report.to_markdown(results)
    assert "gpu-never-08" in report.to_prometheus(results)


def test_csv_has_one_row_per_gpu_plus_hosts_without_gpus(summary):
    rows = list(csv.DictReader(io.StringIO(report.to_csv(summary))))
    assert tuple(rows[0].keys()) == report.CSV_COLUMNS
    assert len(rows) == 16 + 4  # 16 GPUs; no-driver, unreachable, never-reached and CPU hosts get one row each
    h100 = [r for r in rows if r["host"] == "gpu-h100-01"]
    assert [r["gpu_index"] for r in h100] == [str(i) for i in range(8)]
    assert {r["name"] for r in h100} == {"NVIDIA H100 80GB HBM3"}
    assert {r["driver_version"] for r in h100} == {"550.90.07"}
    a100 = {r["gpu_index"]: r for r in rows if r["host"] == "gpu-a100-02"}
    assert a100["2"]["ecc_volatile_uncorrected"] == "2"
    assert a100["3"]["lost"] == "true" and a100["3"]["memory_total_mib"] == ""
    (riser,) = [r for r in rows if r["host"] == "gpu-4090-03"]
    assert (riser["pcie_width_current"], riser["pcie_width_max"]) == ("4", "16")
    assert riser["gate_passed"] == "false"
    (never,) = [r for r in rows if r["host"] == "gpu-never-08"]
    assert never["gpu_index"] == "" and never["host_status"] == "unreachable"


def _without_sort_script(page):
    """The page minus its one allowed inline script (the sortable-table script)."""
    block = "<script>%s</script>" % report.SORT_SCRIPT
    assert page.count(block) == 1
    return page.replace(block, "")


def test_html_is_one_self_contained_page(summary):
    # Contract change: the page now carries exactly one inline script (table sorting), allowed
    # by its hash in the CSP; nothing loads from outside and no other script may run.
    page = report.to_html(summary)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    lowered = page.lower()
    assert lowered.count("<script") == 1
    for forbidden in ("http://", "https://", "<link", "src=", "@import", "url("):
        assert forbidden not in lowered, forbidden
    assert "<script" not in _without_sort_script(page).lower()
    assert "<style>" in page
    assert "Hosts to return / fix (6)" in page
    assert 'class="st st-failed"' in page and 'class="st st-no-gpu"' in page
    assert "gate: matmul_bf16" in page  # gate columns appear when gate data exists
    assert ">None<" not in page and "None" not in report.to_markdown(summary)  # a missing value is an empty cell


def test_html_without_gate_data_has_no_gate_columns(results):
    no_gate = [r for r in results if not r.get("gate")]
    s = report.summarize(no_gate, now=NOW)
    assert "gate:" not in report.to_html(s)
    assert s["totals"]["measured_tflops"] is None
    assert s["totals"]["usd_per_measured_tflop_hour"] is None


def test_simulated_hosts_are_labelled_everywhere(summary):
    assert by_host(summary)["demo-sim-07"]["simulated"] is True
    assert by_host(summary)["gpu-h100-01"]["simulated"] is False
    assert 'demo-sim-07<span class="sim">simulated</span>' in report.to_html(summary)
    assert "demo-sim-07 (simulated)" in report.to_markdown(summary)
    rows = list(csv.DictReader(io.StringIO(report.to_csv(summary))))
    assert {r["simulated"] for r in rows if r["host"] == "demo-sim-07"} == {"true"}
    series = parse_prometheus(report.to_prometheus(summary))
    assert value(series, "gpufleet_host_simulated", host="demo-sim-07") == 1
    assert value(series, "gpufleet_host_simulated", host="gpu-h100-01") == 0
    assert "1 simulated" in report.one_line(summary)


def test_prometheus_textfile_holds_fleet_and_host_level_series_only(summary):
    # One schema (docs/metrics.md): per-GPU series are the host exporter's (gpufleet_gpu_*, labels
    # gpu/uuid/name); the report's file holds host- and fleet-level series under other names.
    series = parse_prometheus(report.to_prometheus(summary))
    names = {name for name, _ in series}
    assert not [n for n in names if n.startswith("gpufleet_gpu_")]
    assert names <= set(report.PROMETHEUS_METRICS)
    for name, labels in series:
        assert {k for k, _ in labels} == set(report.PROMETHEUS_METRICS[name][1]), name
    assert value(series, "gpufleet_host_gpus", host="gpu-a100-02") == 4
    assert value(series, "gpufleet_host_gpus_lost", host="gpu-a100-02") == 1
    assert value(series, "gpufleet_host_gpus_lost", host="gpu-h100-01") == 0
    h100 = "NVIDIA H100 80GB HBM3"  # a label called name: not through value()'s keywords
    assert series[("gpufleet_host_gpus_by_model", frozenset({("host", "gpu-h100-01"), ("name", h100)}))] == 8
    # GPU 3 lost (Xid 79) and GPU 2's ECC / row remap: GPU findings count on the host now
    assert value(series, "gpufleet_host_health_findings", host="gpu-a100-02", severity="critical") >= 2
    # the 4090 on a x4 riser: its one GPU is the weakest, at a quarter of the expected h2d bandwidth
    assert value(series, "gpufleet_host_gate_fraction_of_expected", host="gpu-4090-03",
                 test="h2d_bandwidth") == pytest.approx(0.252)
    assert value(series, "gpufleet_host_gate_passed", host="gpu-4090-03", test="h2d_bandwidth") == 0
    assert value(series, "gpufleet_host_gate_passed", host="gpu-4090-03", test="matmul_bf16") == 1
    t = summary["totals"]
    assert series[("gpufleet_fleet_gpus", frozenset({("name", h100)}))] == t["gpus_by_model"][h100]
    assert value(series, "gpufleet_fleet_gpus_usable") == t["gpus_usable"]
    assert value(series, "gpufleet_fleet_hosts", status="unreachable") == 2


def test_host_gate_takes_the_weakest_gpu_and_fails_when_one_gpu_fails():
    h = {"gpus": [{"gate": [{"test": "matmul_bf16", "fraction_of_peak": 0.91, "passed": True},
                            {"test": "h2d", "fraction_of_peak": None, "passed": None}]},
                  {"gate": [{"test": "matmul_bf16", "fraction_of_peak": 0.62, "passed": False}]},
                  {"gate": [{"test": "matmul_bf16", "fraction_of_peak": 0.95, "passed": True}]}]}
    assert sorted(report._host_gate(h)) == [("h2d", None, None), ("matmul_bf16", 0.62, False)]


def test_json_round_trips_with_totals_and_raw_results(summary, results):
    # Contract change: the raw results are only embedded on request (include_results=True).
    data = json.loads(report.to_json(summary))
    assert data["totals"]["gpus"] == 16
    assert data["generated_at"] == "2025-06-03T09:30:00+00:00"
    assert "results" not in data
    full = json.loads(report.to_json(report.summarize(results, now=NOW, include_results=True)))
    assert {r["host"] for r in full["results"]} == set(INVENTORY)
    assert {k: v for k, v in full.items() if k != "results"} == data


def test_json_keys_are_sorted_and_each_host_is_one_line(summary):
    text = report.to_json(summary)
    hosts = text.split('"hosts": [\n', 1)[1].split("\n  ]", 1)[0].split(",\n")
    assert len(hosts) == len(INVENTORY)
    for line in hosts:
        line = line.strip()
        assert json.dumps(json.loads(line), sort_keys=True) == line


# --------------------------------------------------------------------------- hostile and partial input
EVIL = '<script>alert("x")</script>'


def _evil_results():
    gpu = {"index": 0, "name": EVIL, "uuid": 'GPU-"quoted"\\back', "pci_bus_id": None, "memory_total_mib": 1024,
           "throttle_reasons": ["<b>hw_slowdown</b>"], "spec": None}
    facts = {"schema": 1, "source": "nvml", "error": None, "error_code": None, "driver_version": "550\n.90",
             "gpu_count": 1, "gpus": [gpu], "health": {"status": "degraded", "findings": [
                 {"code": "x", "severity": "warning", "gpu_index": 0, "message": "bad " + EVIL}]}}
    return [
        {"host": 'evil"host\nname', "reachable": True, "failed": False, "provider": "=HYPERLINK(\"x\")",
         "price_per_hour": 1.0, "gpu": facts, "gate": [{"index": 0, "test": EVIL, "fraction_of_peak": 0.5,
                                                         "passed": False, "why": EVIL}]},
        {"host": "evil-down", "reachable": False, "reason": "ssh said " + EVIL, "gpu": None},
    ]


def test_host_provided_text_is_escaped_in_every_format():
    s = report.summarize(_evil_results(), now=NOW)
    page = report.to_html(s)
    assert "<script" not in _without_sort_script(page).lower()
    escaped = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"  # Jinja2's autoescape (markupsafe)
    assert escaped in page
    # in the pictures too: the gate lane's model name and the mark's title, the grid's host label
    svg = "".join(re.findall(r"<svg.*?</svg>", page, re.DOTALL))
    assert escaped in svg and "evil&#34;host" in svg
    assert "<b>" not in page
    md = report.to_markdown(s)
    assert "<script" not in md
    rows = list(csv.DictReader(io.StringIO(report.to_csv(s))))
    assert rows[0]["provider"] == "'=HYPERLINK(\"x\")"  # kept as text, not run as a formula
    assert rows[0]["host"] == 'evil"host name'
    series = parse_prometheus(report.to_prometheus(s))
    models = [dict(labels) for name, labels in series if name == "gpufleet_host_gpus_by_model"]
    assert models == [{"host": 'evil"host\nname', "name": EVIL}]
    json.loads(report.to_json(s))


PARTIAL = [
    {},
    {"host": None},
    {"host": "only-name"},
    {"host": "nulls", "reachable": None, "failed": None, "reason": None, "provider": None, "price_per_hour": None,
     "gpu": None, "gate": None, "doctor": None, "collected_at": None},
    {"host": "weird-types", "reachable": True, "price_per_hour": "cheap", "gpu": {"gpus": "not a list",
                                                                                 "gpu_count": "8"}},
    {"host": "nan-price", "reachable": True, "price_per_hour": float("nan"), "gpu": {"gpu_count": 0}},
    {"host": "empty-gpus", "reachable": True, "gpu": {"schema": 1, "gpus": [None, {}, {"index": 1, "pcie": None,
                                                                                     "ecc": None, "clocks": 5}],
                                                      "health": "not a dict", "xid": None, "host": None}},
    {"host": "all-null-gpu", "reachable": True, "gpu": {
        "schema": 1, "source": None, "error": None, "error_code": None, "driver_version": None,
        "cuda_driver_version": None, "nvml_version": None, "gpu_count": None, "host": None, "xid": None,
        "health": {"status": None, "findings": None}, "duration_s": None,
        "gpus": [{"index": None, "uuid": None, "name": None, "serial": None, "pci_bus_id": None,
                  "memory_total_mib": None, "memory_used_mib": None, "compute_capability": None, "pcie": {},
                  "clocks": {}, "temperature_c": None, "power_draw_w": None, "power_limit_w": None,
                  "throttle_reasons": None, "persistence_mode": None, "mig_mode": None, "ecc": {},
                  "retired_pages": None, "remapped_rows": None, "nvlink": None, "spec": None}]}},
    {"host": "bad-gate-doctor", "reachable": True, "gpu": {"gpu_count": 1, "gpus": [{"index": 0, "name": "NVIDIA L4"}]},
     "gate": [{"index": 0}, None, {"index": 0, "test": "matmul_bf16", "measured": "fast", "unit": None}],
     "doctor": {"status": None, "findings": [None, {"severity": "critical"}]}},
]


def test_partial_and_malformed_data_does_not_crash(tmp_path):
    s = report.summarize(PARTIAL, now=NOW)
    assert len(s["hosts"]) == len(PARTIAL)
    assert all(h["status"] in report.STATUSES for h in s["hosts"])
    hosts = by_host(s)
    assert hosts["nulls"]["status"] == "unknown"
    assert hosts["bad-gate-doctor"]["status"] == "failed"  # the doctor's critical finding
    assert math.isfinite(s["totals"]["price_per_hour"])
    for render in (report.to_json, report.to_csv, report.to_markdown, report.to_html):
        assert render(s)
    parse_prometheus(report.to_prometheus(s))
    json.loads(report.to_json(s))
    report.write_all(PARTIAL, tmp_path)
    assert report.one_line([])  # an empty fleet still summarises


# --------------------------------------------------------------------------- files and CLI
def test_write_all_writes_five_files_atomically(results, tmp_path):
    out = tmp_path / "out"
    paths = report.write_all(results, out, now=NOW)
    assert set(paths) == {"html", "json", "csv", "markdown", "prometheus"}
    assert sorted(os.listdir(out)) == ["fleet.csv", "fleet.html", "fleet.json", "fleet.md", "gpufleet.prom"]
    assert paths["prometheus"] == str(out / "gpufleet.prom")
    parse_prometheus(Path(paths["prometheus"]).read_text())
    assert oct(os.stat(paths["html"]).st_mode & 0o777) == oct(0o644)
    # a second run replaces the files and leaves no temporary files behind
    report.write_all(results[:1], out, now=NOW)
    assert sorted(os.listdir(out)) == ["fleet.csv", "fleet.html", "fleet.json", "fleet.md", "gpufleet.prom"]
    assert json.loads(Path(paths["json"]).read_text())["totals"]["hosts"] == 1


def _cli(*args):
    return subprocess.run([sys.executable, str(CLI), *args], capture_output=True, text=True, timeout=60, check=False)


def test_cli_writes_the_report_and_exits_0_with_bad_hosts(tmp_path):
    proc = _cli(str(FIXTURES), "--out", str(tmp_path), "--hosts", ",".join(INVENTORY))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:5] == [str(tmp_path / n) for n in ("fleet.html", "fleet.json", "fleet.csv", "fleet.md",
                                                     "gpufleet.prom")]
    assert lines[5].startswith("9 host(s): 3 ok, 1 degraded, 2 failed, 2 unreachable, 1 no-gpu; 16 GPU(s)")
    assert "gpu-never-08" in (tmp_path / "fleet.html").read_text()


def test_cli_missing_folder_exits_2_with_a_clear_message(tmp_path):
    proc = _cli(str(tmp_path / "missing"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_cli_empty_folder_without_inventory_exits_2(tmp_path):
    proc = _cli(str(tmp_path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "no <host>.json result files" in proc.stderr


def test_cli_bundle_is_split_into_host_files_and_gives_the_same_report(tmp_path):
    bundle = tmp_path / "results.jsonl"
    lines = [(FIXTURES / n).read_text().strip() for n in sorted(os.listdir(FIXTURES)) if n.endswith(".json")]
    bundle.write_text("\n".join(json.dumps(json.loads(x)) for x in lines) + "\n\n")
    proc = _cli(str(tmp_path / "hosts"), "--bundle", str(bundle), "--out", str(tmp_path / "out"),
                "--hosts", ",".join(INVENTORY))
    assert proc.returncode == 0, proc.stderr
    direct = _cli(str(FIXTURES), "--out", str(tmp_path / "direct"), "--hosts", ",".join(INVENTORY))
    assert proc.stdout.splitlines()[5] == direct.stdout.splitlines()[5]
    assert sorted(os.listdir(tmp_path / "hosts")) == sorted(n for n in os.listdir(FIXTURES) if n.endswith(".json"))


@pytest.mark.parametrize("line", ['{"host": "../etc/passwd"}', '["not", "an", "object"]', '{"no_host": 1}', "{oops"])
def test_cli_bundle_with_a_bad_line_exits_2_before_writing(tmp_path, line):
    bundle = tmp_path / "results.jsonl"
    bundle.write_text('{"host": "good-01"}\n' + line + "\n")
    proc = _cli(str(tmp_path / "hosts"), "--bundle", str(bundle), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "--bundle" in proc.stderr and "line 2" in proc.stderr
    assert not (tmp_path / "hosts").exists() and not (tmp_path / "out").exists()


def test_playbook_values_as_text_and_expected_gpu_count(results):
    """Inventory vars may reach the result file as text; a host with fewer GPUs than rented is failed."""
    h100 = copy.deepcopy(next(r for r in results if r["host"] == "gpu-h100-01"))
    h100.update(price_per_hour="23.92", simulated="False", expected_gpu_count=8)
    entry = report.summarize([h100], now=NOW)["hosts"][0]
    assert (entry["status"], entry["price_per_hour"], entry["simulated"]) == ("ok", 23.92, False)
    h100["gpu"]["gpus"] = h100["gpu"]["gpus"][:7]
    h100["gpu"]["gpu_count"] = 7
    entry = report.summarize([h100], now=NOW)["hosts"][0]
    assert entry["status"] == "failed"
    assert entry["reasons"] == ["7 GPU(s) visible, 8 expected"]
    assert entry["action"] == report.ACTION_RETURN
    down = {"host": "h", "reachable": "False", "failed": "False", "reason": "ssh: timed out"}
    assert report.summarize([down], now=NOW)["hosts"][0]["status"] == "unreachable"


# --------------------------------------------------------------------------- version drift
def test_version_drift_is_flagged_as_info(summary):
    t = summary["totals"]
    assert (t["usual_driver_version"], t["usual_cuda_driver_version"]) == ("550.90.07", "12.4")
    assert [(d["host"], d["field"], d["version"], d["usual"]) for d in t["drift"]] == [
        ("gpu-4090-03", "driver_version", "550.54.15", "550.90.07"),
        ("gpu-a100-02", "cuda_driver_version", "12.2", "12.4"),
        ("gpu-a100-02", "driver_version", "535.161.08", "550.90.07"),
    ]
    assert {d["severity"] for d in t["drift"]} == {"info"}
    a100 = by_host(summary)["gpu-a100-02"]["reasons"]
    assert "driver 535.161.08 differs from the fleet's usual 550.90.07" in a100
    assert "CUDA 12.2 differs from the fleet's usual 12.4" in a100
    bad = {b["host"]: b for b in summary["bad_hosts"]}
    assert "driver 550.54.15 differs from the fleet's usual 550.90.07" in bad["gpu-4090-03"]["reasons"]
    # hosts without GPUs (no driver, unreachable) have no version to drift
    assert {d["host"] for d in t["drift"]} <= {h for h, e in by_host(summary).items() if e["gpus"]}


def test_version_drift_alone_leaves_an_ok_host_ok(results):
    h100 = next(r for r in results if r["host"] == "gpu-h100-01")
    fleet = []
    for i in range(3):
        r = copy.deepcopy(h100)
        r["host"] = "h%d" % i
        fleet.append(r)
    fleet[2]["gpu"]["driver_version"] = "535.161.08"
    s = report.summarize(fleet, now=NOW)
    odd = by_host(s)["h2"]
    assert odd["status"] == "ok" and odd["action"] is None
    assert odd["reasons"] == ["driver 535.161.08 differs from the fleet's usual 550.90.07"]
    assert s["bad_hosts"] == []
    assert [d["host"] for d in s["totals"]["drift"]] == ["h2"]
    assert by_host(s)["h0"]["reasons"] == []
    # a one-host fleet is its own usual: no drift
    assert report.summarize(fleet[2:], now=NOW)["totals"]["drift"] == []


def _h100_fleet(results, drivers):
    h100 = next(r for r in results if r["host"] == "gpu-h100-01")
    fleet = []
    for name, driver in drivers:
        r = copy.deepcopy(h100)
        r["host"] = name
        r["gpu"]["driver_version"] = driver
        fleet.append(r)
    return fleet


def test_version_drift_without_a_majority_is_one_fleet_line_and_no_host_reason(results):
    # Three GPU hosts on three drivers (the demo fleet): no host is "the odd one", so none is flagged.
    fleet = _h100_fleet(results, [("a", "535.161.08"), ("b", "550.90.07"), ("c", "570.124.06")])
    s = report.summarize(fleet, now=NOW)
    t = s["totals"]
    assert t["usual_driver_version"] is None and t["drift"] == []
    assert all(by_host(s)[h]["reasons"] == [] and by_host(s)[h]["status"] == "ok" for h in "abc")
    (split,) = t["version_split"]
    assert split["field"] == "driver_version" and split["severity"] == "info"
    assert split["reason"] == ("driver versions differ across the fleet: 535.161.08 on a; 550.90.07 on b; "
                               "570.124.06 on c (no majority)")
    assert [v["hosts"] for v in split["versions"]] == [1, 1, 1]
    assert t["usual_cuda_driver_version"] == "12.4"  # every host agrees on CUDA: no line for it
    md = report.to_markdown(s)
    assert "| versions differ | %s |" % split["reason"] in md and "usual driver / CUDA | no majority / 12.4" in md
    assert "## Version drift" not in md
    page = report.to_html(s)
    assert "<th>versions differ</th><td>%s</td>" % html.escape(split["reason"]) in page
    assert json.loads(report.to_json(s))["totals"]["version_split"][0]["reason"] == split["reason"]
    assert "driver versions differ (no majority)" in report.one_line(s)
    series = parse_prometheus(report.to_prometheus(s))
    assert not [k for k in series if k[0] == "gpufleet_host_version_drift" and ("field", "driver_version") in k[1]]


def test_version_drift_needs_more_than_half_of_the_hosts(results):
    # 2 of 4 is the largest group but no majority; 2 of 2 tie as before; 3 of 4 is one.
    two_of_four = _h100_fleet(results, [("a", "550.90.07"), ("b", "550.90.07"), ("c", "535.161.08"),
                                        ("d", "570.124.06")])
    s = report.summarize(two_of_four, now=NOW)
    assert s["totals"]["usual_driver_version"] is None and s["totals"]["drift"] == []
    assert "550.90.07 on a, b; 535.161.08 on c; 570.124.06 on d" in s["totals"]["version_split"][0]["reason"]
    tie = report.summarize(_h100_fleet(results, [("h0", "550.90.07"), ("h1", "535.161.08")]), now=NOW)
    assert tie["totals"]["drift"] == [] and len(tie["totals"]["version_split"]) == 1
    three_of_four = _h100_fleet(results, [("a", "550.90.07"), ("b", "550.90.07"), ("c", "550.90.07"),
                                          ("d", "535.161.08")])
    s = report.summarize(three_of_four, now=NOW)
    assert s["totals"]["version_split"] == []
    assert [(d["host"], d["usual"]) for d in s["totals"]["drift"]] == [("d", "550.90.07")]


def test_version_split_line_names_a_few_hosts_per_version(results):
    fleet = _h100_fleet(results, [("h%02d" % i, "550.90.07" if i % 2 else "535.161.08") for i in range(10)])
    (split,) = report.summarize(fleet, now=NOW)["totals"]["version_split"]
    assert split["reason"] == ("driver versions differ across the fleet: 535.161.08 on h00, h02, h04 and 2 more; "
                               "550.90.07 on h01, h03, h05 and 2 more (no majority)")


def test_version_drift_shows_in_every_format(summary):
    reason = "driver 535.161.08 differs from the fleet&#39;s usual 550.90.07"  # escaped by Jinja2's autoescape
    page = report.to_html(summary)
    assert "Version drift (3)" in page and reason in page
    md = report.to_markdown(summary)
    assert "## Version drift" in md and "| gpu-a100-02 | driver | 535.161.08 | 550.90.07 |" in md
    assert "usual driver / CUDA | 550.90.07 / 12.4" in md
    rows = list(csv.DictReader(io.StringIO(report.to_csv(summary))))
    assert all("driver 535.161.08 differs" in r["host_reasons"] for r in rows if r["host"] == "gpu-a100-02")
    series = parse_prometheus(report.to_prometheus(summary))
    assert value(series, "gpufleet_host_version_drift", host="gpu-a100-02", field="driver_version") == 1
    assert value(series, "gpufleet_host_version_drift", host="gpu-a100-02", field="cuda_driver_version") == 1
    assert value(series, "gpufleet_host_version_drift", host="gpu-4090-03", field="cuda_driver_version") == 0
    assert value(series, "gpufleet_host_version_drift", host="gpu-h100-01", field="driver_version") == 0
    assert ("gpufleet_host_version_drift", frozenset({("host", "gpu-unreach-05"), ("field", "driver_version")})) \
        not in series
    assert len(json.loads(report.to_json(summary))["totals"]["drift"]) == 3
    assert "3 version drift(s)" in report.one_line(summary)


# --------------------------------------------------------------------------- HTML sorting and size
def test_html_csp_allows_exactly_the_sort_script_by_hash(summary):
    page = report.to_html(summary)
    (csp,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    assert scripts == [report.SORT_SCRIPT]
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode("ascii")
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives == {"default-src": "'none'", "style-src": "'unsafe-inline'",
                          "script-src": "'sha256-%s'" % digest}
    assert report.script_hash() == "'sha256-%s'" % digest
    # the hosts table is sortable: a header row in <thead>, the hosts in <tbody>
    assert '<table class="sortable"><thead><tr><th>host</th><th>status</th>' in page


def test_html_caps_the_gpu_table_and_points_to_the_csv(summary, monkeypatch):
    monkeypatch.setattr(report.render_html, "HTML_GPU_ROWS", 5)
    page = report.to_html(summary)
    assert "<h2>GPUs (5 of 16)</h2>" in page
    assert "fleet.csv" in page and "has every GPU" in page
    gpu_table = page.split("<h2>GPUs (5 of 16)</h2>", 1)[1].split("</table>", 1)[0]
    # GPUs of hosts that are not ok come first: the failed A100 host's 4, then the degraded 4090
    hosts = re.findall(r"<tr><td>([^<]+)<", gpu_table)
    assert hosts == ["gpu-4090-03", "gpu-a100-02", "gpu-a100-02", "gpu-a100-02", "gpu-a100-02"]
    monkeypatch.setattr(report.render_html, "HTML_GPU_ROWS", 2000)
    assert "<h2>GPUs (16)</h2>" in report.to_html(summary)


# --------------------------------------------------------------------------- large-fleet paths
def test_summarize_folder_matches_summarize_of_load_results(summary, results):
    for workers in (1, 2):
        assert report.summarize_folder(FIXTURES, INVENTORY, now=NOW, workers=workers) == summary
        assert report.summarize(results, now=NOW, workers=workers) == summary
    full = report.summarize_folder(FIXTURES, INVENTORY, now=NOW, include_results=True)
    assert full["results"] == report.load_results(FIXTURES, INVENTORY)


def test_summarize_restores_the_gc_state(results):
    assert gc.isenabled()
    report.summarize(results, now=NOW)
    report.summarize_folder(FIXTURES, INVENTORY, now=NOW, workers=2)
    assert gc.isenabled()
    gc.disable()
    try:
        report.summarize(results, now=NOW)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_summary_does_not_hold_the_raw_results(results):
    s = report.summarize(copy.deepcopy(results), now=NOW)
    assert "results" not in s
    raw_ids = set()

    def walk(value):
        raw_ids.add(id(value))
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    fresh = copy.deepcopy(results)
    s = report.summarize(fresh, now=NOW)
    for r in fresh:
        for key in ("gpu", "gate"):
            if r.get(key) is not None:
                walk(r[key])
    for h in s["hosts"]:
        assert id(h["gpus"]) not in raw_ids
        for g in h["gpus"]:
            assert id(g) not in raw_ids


def test_prometheus_drops_duplicate_series(results):
    h100 = next(r for r in results if r["host"] == "gpu-h100-01")
    s = report.summarize([h100, copy.deepcopy(h100)], now=NOW)
    series = parse_prometheus(report.to_prometheus(s))  # asserts there are no duplicate series
    assert value(series, "gpufleet_host_up", host="gpu-h100-01") == 1


def test_write_all_in_two_workers_writes_the_same_files(results, tmp_path):
    one = report.write_all(results, tmp_path / "one", now=NOW, workers=1)
    two = report.write_all(results, tmp_path / "two", now=NOW, workers=2)
    for kind in report.OUTPUT_FILES:
        assert Path(one[kind]).read_bytes() == Path(two[kind]).read_bytes(), kind
    assert sorted(os.listdir(tmp_path / "two")) == sorted(report.OUTPUT_FILES.values())


def test_write_all_raises_when_a_worker_fails(results, tmp_path, monkeypatch):
    def broken(data):
        raise ValueError("renderer broke")
        yield ""  # pragma: no cover - makes it a generator

    monkeypatch.setitem(report._CHUNKED, "markdown", broken)
    with pytest.raises(report.ReportWriteError, match="fleet.md.*renderer broke"):
        report.write_all(results, tmp_path, now=NOW, workers=2)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert gc.isenabled()


def test_write_all_raises_a_worker_os_error_as_os_error(results, tmp_path, monkeypatch):
    def full(data):
        raise OSError(28, "No space left on device", "fleet.json")
        yield ""  # pragma: no cover - makes it a generator

    monkeypatch.setitem(report._CHUNKED, "json", full)
    with pytest.raises(OSError) as info:
        report.write_all(results, tmp_path, now=NOW, workers=2)
    assert (info.value.errno, info.value.strerror, info.value.filename) == (28, "No space left on device",
                                                                             "fleet.json")


def _report_in_pool_worker(outdir):
    results = report.load_results(FIXTURES, inventory_hosts=INVENTORY)
    summary = report.summarize(results, now=NOW, workers=2)
    return sorted(report.write_all(summary, outdir, workers=2)), summary["totals"]["hosts"]


def test_a_daemonic_worker_renders_in_one_process(tmp_path):
    # multiprocessing.Pool workers are daemonic and may not start children: no fork there.
    with multiprocessing.get_context("fork").Pool(1) as pool:
        kinds, hosts = pool.apply(_report_in_pool_worker, (str(tmp_path),))
    assert kinds == sorted(report.OUTPUT_FILES) and hosts == len(INVENTORY)
    assert sorted(os.listdir(tmp_path)) == sorted(report.OUTPUT_FILES.values())


def test_write_all_can_embed_the_raw_results(results, tmp_path):
    paths = report.write_all(results, tmp_path, now=NOW, include_results=True)
    data = json.loads(Path(paths["json"]).read_text())
    assert {r["host"] for r in data["results"]} == set(INVENTORY)


# --------------------------------------------------------------------------- CLI inventory options
def test_cli_hosts_file_names_the_inventory(tmp_path):
    hosts_file = tmp_path / "hosts.txt"
    hosts_file.write_text("# inventory\n" + "\n".join(INVENTORY) + "\n\n")
    proc = _cli(str(FIXTURES), "--out", str(tmp_path / "out"), "--hosts-file", str(hosts_file))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[5].startswith("9 host(s): 3 ok, 1 degraded, 2 failed, 2 unreachable, 1 no-gpu")
    fleet = json.loads((tmp_path / "out" / "fleet.json").read_text())
    assert {h["host"] for h in fleet["hosts"]} == set(INVENTORY)
    assert "results" not in fleet


def test_cli_hosts_file_takes_an_inventory_too_large_for_one_argument(tmp_path):
    names = INVENTORY + ["gpu-rented-host-%05d" % i for i in range(10000)]
    assert len(",".join(names).encode()) > 128 * 1024  # over Linux's MAX_ARG_STRLEN: --hosts would fail
    hosts_file = tmp_path / "hosts.txt"
    hosts_file.write_text("\n".join(names) + "\n")
    proc = _cli(str(FIXTURES), "--out", str(tmp_path / "out"), "--hosts-file", str(hosts_file),
                "--hosts", "gpu-extra-1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[5].startswith("10010 host(s): 3 ok, 1 degraded, 2 failed, 10003 unreachable")
    assert "gpu-rented-host-09999" in (tmp_path / "out" / "fleet.csv").read_text()


def test_cli_missing_hosts_file_exits_2(tmp_path):
    proc = _cli(str(FIXTURES), "--out", str(tmp_path / "out"), "--hosts-file", str(tmp_path / "nope.txt"))
    assert proc.returncode == 2
    assert "cannot read --hosts-file" in proc.stderr


def test_cli_include_results(tmp_path):
    proc = _cli(str(FIXTURES), "--out", str(tmp_path), "--hosts", ",".join(INVENTORY), "--include-results")
    assert proc.returncode == 0, proc.stderr
    assert {r["host"] for r in json.loads((tmp_path / "fleet.json").read_text())["results"]} == set(INVENTORY)


# --------------------------------------------------------------------------- CPU hosts by intent, ok hosts
# Reasons that say what is wrong with a host (the rest, version drift, are info lines).
FAILURE_REASON = re.compile(r"^(playbook failed|no GPU|GPU facts unavailable|doctor: |GPU \S+: gate |result file "
                            r"unreadable|report could not read)")


def test_cpu_host_by_intent_is_ok_with_no_gpu_stack_as_info(summary):
    cpu = by_host(summary)["cpu-box-09"]
    assert (cpu["status"], cpu["action"], cpu["reasons"]) == ("ok", None, [])
    stack = next(f for f in cpu["findings"] if f["code"] == "gpu_stack_broken")
    assert stack["severity"] == "info" and stack["error_code"] == "no_gpu_stack"
    assert stack["message"].startswith("as intended on a CPU host (expected_gpu_count 0): GPU stack broken")
    assert "cpu-box-09" not in {b["host"] for b in summary["bad_hosts"]}
    checks = cpu["checklist"]
    assert checks["torch_cuda"]["summary"] == "torch 2.13.0+cpu is a CPU build, as intended for a CPU host"
    assert {checks[k]["status"] for k in ("torch_cuda", "cudnn", "monitoring")} == {"ok"}
    series = parse_prometheus(report.to_prometheus(summary))
    assert value(series, "gpufleet_host_health_findings", host="cpu-box-09", severity="critical") == 0
    assert "GPU stack broken" not in report.to_markdown(summary).split("## Hosts\n", 1)[1].split("##", 1)[0]


@pytest.mark.parametrize(("code", "error"), [
    ("no_gpu_stack", "no NVIDIA device node, kernel driver or tools on this host"),
    ("driver_not_loaded", "nvmlInit failed: Driver Not Loaded; /proc/driver/nvidia/version is absent"),
    ("nvidia_smi_timeout", "nvidia-smi timed out"),
])
def test_cpu_host_by_intent_whatever_its_gpu_stack_says(results, code, error):
    cpu = copy.deepcopy(next(r for r in results if r["host"] == "cpu-box-09"))
    cpu["gpu"].update(error=error, error_code=code)
    del cpu["gpu"]["health"]  # computed by facts.health, as the module does
    unsaid = dict(copy.deepcopy(cpu), host="unsaid-10", expected_gpu_count=None)
    hosts = by_host(report.summarize([cpu, unsaid], now=NOW))
    assert (hosts["cpu-box-09"]["status"], hosts["cpu-box-09"]["reasons"]) == ("ok", [])
    # without the intent, a host that shows no GPU is what it was: no-gpu, or unknown when nothing is known
    assert hosts["unsaid-10"]["status"] in ("no-gpu", "unknown") and hosts["unsaid-10"]["reasons"]


def _mixed_fleet(results):
    """The sample fleet plus variations: CPU hosts with each kind of "no GPU" facts, a drifting GPU host,
    a gate failure, doctor findings."""
    fleet = copy.deepcopy(results)
    base = {r["host"]: r for r in fleet}
    for i, (code, error) in enumerate([("driver_not_loaded", "Driver Not Loaded"), ("no_devices", "no devices"),
                                       (None, None)]):
        r = copy.deepcopy(base["cpu-box-09"])
        r["host"] = "cpu-extra-%d" % i
        r["gpu"].update(error=error, error_code=code)
        del r["gpu"]["health"]
        fleet.append(r)
    r = copy.deepcopy(base["gpu-h100-01"])
    r.update(host="h100-old-driver")
    r["gpu"]["driver_version"] = "535.161.08"
    fleet.append(r)
    r = copy.deepcopy(base["gpu-h100-01"])
    r.update(host="h100-doctor", doctor={"status": "broken", "findings": [
        {"code": "torch_cpu_wheel", "severity": "critical", "message": "torch 2.3.1+cpu is a CPU-only wheel"}]})
    fleet.append(r)
    return fleet


def test_an_ok_host_never_lists_a_failure_as_its_reason(results):
    s = report.summarize(_mixed_fleet(results), now=NOW)
    ok = [h for h in s["hosts"] if h["status"] == "ok"]
    assert {"cpu-box-09", "cpu-extra-0", "cpu-extra-1", "cpu-extra-2", "gpu-h100-01", "h100-old-driver"} <= {
        h["host"] for h in ok}
    for h in ok:
        info = {d["reason"] for d in s["totals"]["drift"] if d["host"] == h["host"]}
        failures = {report._finding_text(f) for f in h["findings"] if f.get("severity") in report._REASON_SEVERITIES}
        for reason in h["reasons"]:
            assert reason in info, (h["host"], reason)  # the only reasons an ok host may have: info lines
            assert reason not in failures and not FAILURE_REASON.match(reason), (h["host"], reason)
        assert h["action"] is None
    assert by_host(s)["h100-old-driver"]["reasons"] == ["driver 535.161.08 differs from the fleet's usual 550.90.07"]
    assert by_host(s)["h100-doctor"]["status"] == "failed"  # the rule does not hide real faults


# --------------------------------------------------------------------------- when the facts were read
def test_each_host_says_when_its_facts_were_read(summary, tmp_path):
    hosts = by_host(summary)
    assert (hosts["cpu-box-09"]["facts_read_at"], hosts["cpu-box-09"]["facts_read_at_source"]) == (
        "2026-12-01T20:51:03Z", "gpu_facts")  # ansible_facts.gpu.collected_at
    # older results carry no time of their own: the record's, labelled as such
    assert (hosts["gpu-h100-01"]["facts_read_at"], hosts["gpu-h100-01"]["facts_read_at_source"]) == (
        "2025-06-03T09:14:07+00:00", "record")
    assert (hosts["gpu-never-08"]["facts_read_at"], hosts["gpu-never-08"]["facts_read_at_source"]) == (None, None)
    assert report.facts_time_text(hosts["cpu-box-09"]) == "2026-12-01T20:51:03Z"
    assert report.facts_time_text(hosts["gpu-h100-01"]) == "not reported; record written at 2025-06-03T09:14:07+00:00"
    assert report.facts_time_text(hosts["gpu-never-08"]) == "unknown"
    report.write_all(summary, tmp_path)
    md = (tmp_path / "fleet.md").read_text()
    assert "| driver / CUDA | facts read at | reasons |" in md
    assert "| ? / ? | 2026-12-01T20:51:03Z |" in md and "| unknown | no result (host not reached) |" in md
    page = (tmp_path / "fleet.html").read_text()
    assert "<th>facts read at</th>" in page
    assert "<td>not reported; record written at 2025-06-03T09:14:07+00:00</td>" in page
    data = json.loads((tmp_path / "fleet.json").read_text())
    assert next(h for h in data["hosts"] if h["host"] == "cpu-box-09")["facts_read_at"] == "2026-12-01T20:51:03Z"
    rows = {r["host"]: r for r in csv.DictReader(io.StringIO((tmp_path / "fleet.csv").read_text()))}
    assert (rows["cpu-box-09"]["facts_read_at"], rows["cpu-box-09"]["facts_read_at_source"]) == (
        "2026-12-01T20:51:03Z", "gpu_facts")
    assert (rows["gpu-never-08"]["facts_read_at"], rows["gpu-never-08"]["facts_read_at_source"]) == ("", "")


# --------------------------------------------------------------------------- --check runs
def test_a_check_run_report_says_it_is_a_plan(results, tmp_path):
    plain = report.summarize(results, now=NOW)
    assert plain["check_mode"] is False
    assert report.CHECK_MODE_BANNER not in report.to_html(plain) and "--check" not in report.to_markdown(plain)
    s = report.summarize(results, now=NOW, check_mode=True)
    report.write_all(s, tmp_path)
    banner = ("This report was written by a --check run: it shows what the run would do, the hosts were not "
              "changed.")
    page = (tmp_path / "fleet.html").read_text()
    assert '<h1>gpufleet fleet report</h1>\n<p class="banner" role="alert">%s</p>' % html.escape(banner) in page
    assert (tmp_path / "fleet.md").read_text().startswith("# gpufleet report\n\n> **%s**\n" % banner)
    assert json.loads((tmp_path / "fleet.json").read_text())["check_mode"] is True
    assert report.one_line(s).endswith("; --check run: a plan, the hosts were not changed")


def test_cli_check_mode(tmp_path):
    proc = _cli(str(FIXTURES), "--out", str(tmp_path / "check"), "--hosts", ",".join(INVENTORY), "--check-mode")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "check" / "fleet.json").read_text())["check_mode"] is True
    assert "written by a --check run" in (tmp_path / "check" / "fleet.md").read_text()
    assert "--check run" in proc.stdout.splitlines()[5]
    proc = _cli(str(FIXTURES), "--out", str(tmp_path / "real"), "--hosts", ",".join(INVENTORY))
    assert json.loads((tmp_path / "real" / "fleet.json").read_text())["check_mode"] is False
    assert "--check run" not in (tmp_path / "real" / "fleet.html").read_text()


def test_the_package_imports_and_writes_the_data_files_without_jinja2(tmp_path):
    # module_utils is imported by ansible-test's sanity import test without Jinja2: only the page and the Markdown
    # need it, imported when first rendered
    code = (
        "import sys; sys.modules['jinja2'] = None; sys.modules['markupsafe'] = None\n"
        "sys.path.insert(0, %r)\n"
        "from gpufleet.controller import report\n"
        "s = report.summarize(report.load_results(%r))\n"
        "assert report.to_json(s) and report.to_csv(s) and report.to_prometheus(s)\n"
        "try:\n"
        "    report.to_html(s)\n"
        "except report.ReportTemplateError as exc:\n"
        "    print('no page:', exc)\n"
    ) % (str(ROOT / "module_utils"), str(FIXTURES))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "no page: the HTML and Markdown reports need Jinja2" in proc.stdout
