"""monitoring/ and the one metric schema (docs/metrics.md).

- The alert rules pass ``promtool check rules`` and their unit tests ``promtool test rules``; every
  alert has a case that fires on a faulty host and, in the same case, a healthy host it must stay
  silent on (promtool compares the whole list of alerts, so an extra one fails too).
- The schema table in docs/metrics.md is compared with the code (the exporter's METRICS, the
  report's PROMETHEUS_METRICS), with what the exporter writes over every fake NVML profile and what
  the report writes for the sample fleet, and with every metric and label the rules and the
  dashboard's queries use. The dashboard's queries are also parsed by Prometheus's own parser
  (``promtool check rules`` on a copy as recording rules).
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gpufleet.controller import report

from tests import fakenvml

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "monitoring"
RULES = MONITORING / "rules" / "gpufleet-gpu.rules.yml"
RULE_TESTS = MONITORING / "tests" / "gpufleet-gpu.rules.test.yml"
DASHBOARD = MONITORING / "dashboards" / "gpufleet-gpus.json"
SCHEMA_DOC = ROOT / "docs" / "metrics.md"
EXPORTER = ROOT / "roles" / "gpu_monitoring" / "files" / "gpufleet_gpu_exporter.py"
REPORT_FIXTURES = ROOT / "tests" / "fixtures" / "report"
# The fleet with the pre-check's storage and network evidence (issue 51): the gpufleet_host_box_* series come from it.
BOX_FIXTURES = ROOT / "tests" / "fixtures" / "report-box"
REPORT_INVENTORY = ["gpu-h100-01", "gpu-a100-02", "gpu-4090-03", "gpu-nodriver-04", "gpu-unreach-05",
                    "gpu-l40s-06", "demo-sim-07", "gpu-never-08", "cpu-box-09"]
XID_LOG = ROOT / "tests" / "fixtures" / "kernel_logs" / "gpud_xid48-63-94_peermem_dmesg-iso.log"
_VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = _VENV_PYTHON if _VENV_PYTHON.exists() else Path(sys.executable)
PROMTOOL = shutil.which("promtool")
# Labels Prometheus adds at scrape time (and those a dashboard may use on any series).
TARGET_LABELS = {"instance", "job"}
HEALTHY = "good:9410"

needs_promtool = pytest.mark.skipif(
    not PROMTOOL, reason="promtool is not installed (apt-get install prometheus; CI's .ci/run installs it)")


# --------------------------------------------------------------------------- the schema table
def schema():
    """{name: (type, labels tuple, source)} from the table between the markers in docs/metrics.md."""
    text = SCHEMA_DOC.read_text(encoding="utf-8")
    body = text.split("<!-- BEGIN METRICS -->", 1)[1].split("<!-- END METRICS -->", 1)[0]
    rows = {}
    for line in body.strip().splitlines()[2:]:  # after the header and its rule
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) >= 5, "a schema row needs name | type | labels | source | meaning: %r" % line
        name = cells[0].strip("`")
        labels = tuple(x.strip().strip("`") for x in cells[2].split(",") if x.strip())
        assert name not in rows, "%s appears twice in docs/metrics.md" % name
        assert cells[1] in ("gauge", "counter"), line
        assert cells[3] in ("exporter", "report"), line
        assert cells[4], "%s has no meaning in docs/metrics.md" % name
        rows[name] = (cells[1], labels, cells[3])
    assert rows, "no schema rows found in docs/metrics.md"
    return rows


def _load_exporter():
    spec = importlib.util.spec_from_file_location("gpufleet_gpu_exporter_for_schema", EXPORTER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$")


def exposition(text):
    """{name: (type, set of label-name tuples)} of a Prometheus text exposition."""
    types, labelsets = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            m = _SAMPLE.match(line)
            assert m, "not a sample line: %r" % line
            labelsets.setdefault(m.group(1), set()).add(tuple(sorted(k for k, _ in _LABEL.findall(m.group(2) or ""))))
    return {name: (types.get(name), sets) for name, sets in labelsets.items()}


def test_schema_table_is_the_code_schema():
    rows = schema()
    exporter = _load_exporter()
    documented = {n: (t, set(labels)) for n, (t, labels, src) in rows.items() if src == "exporter"}
    coded = {exporter.PREFIX + n: (t, set(labels)) for n, (t, labels, _) in exporter.METRICS.items()}
    assert documented == coded
    documented = {n: (t, set(labels)) for n, (t, labels, src) in rows.items() if src == "report"}
    coded = {n: (t, set(labels)) for n, (t, labels, _) in report.PROMETHEUS_METRICS.items()}
    assert documented == coded


def test_one_name_one_owner():
    # per-GPU series are the exporter's, under its own prefix; the report never writes one
    for name, (kind, labels, source) in schema().items():
        assert name.startswith("gpufleet_gpu_") == (source == "exporter"), name
        if source == "report":
            assert not {"gpu", "uuid"} & set(labels), "%s: the report's file holds no per-GPU series" % name
        assert name.endswith("_total") == (kind == "counter"), name


@pytest.fixture(scope="module")
def libdir(tmp_path_factory):
    if not (os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")):
        pytest.skip("needs a C compiler for the fake NVML library")
    d = tmp_path_factory.mktemp("fakenvml-schema")
    fakenvml.build(d)
    return d


def test_exporter_writes_exactly_the_documented_schema(libdir, tmp_path):
    """Every profile (plus a pre-Ampere one with retired pages, made here), with Xid lines and a rented
    count: each name and label set is in the table, and every exporter row shows up somewhere."""
    retired = fakenvml.load_profile("h200-1x")
    retired.update(name="retired-pages-test", description="h200-1x with retired pages pending (made by a test)")
    retired["gpus"][0]["retired_pages"] = {"single_bit_ecc": ["0x1a2b000"], "double_bit_ecc": [], "pending": True}
    assert fakenvml.validate_profile(retired) == []
    (tmp_path / "retired.json").write_text(json.dumps(retired))
    profiles = fakenvml.list_profiles() + [str(tmp_path / "retired.json")]
    procs = [subprocess.Popen([str(PYTHON), str(EXPORTER), "--once", "--stdout", "--kernel-log", str(XID_LOG),
                               "--expected-gpus", "8"],
                              env={**os.environ, **fakenvml.env_for(p, libdir)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for p in profiles]  # side by side: one interpreter start each, not one after the other
    rows = schema()
    seen = set()
    for profile, proc in zip(profiles, procs):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "Traceback" not in err, (profile, err)
        for name, (kind, labelsets) in exposition(out).items():
            assert name in rows, "%s (profile %s) is not in docs/metrics.md" % (name, profile)
            assert kind == rows[name][0], name
            assert labelsets == {tuple(sorted(rows[name][1]))}, (profile, name, labelsets)
            seen.add(name)
    assert seen == {n for n, row in rows.items() if row[2] == "exporter"}


def test_report_writes_exactly_the_documented_schema():
    s = report.summarize(report.load_results(REPORT_FIXTURES, inventory_hosts=REPORT_INVENTORY))
    rows = schema()
    written = exposition(report.to_prometheus(s))
    plain = set(written)
    box = exposition(report.to_prometheus(report.summarize(report.load_results(BOX_FIXTURES))))
    assert not {n for n in plain if n.startswith("gpufleet_host_box_")}  # no evidence, no series
    for name, (kind, labelsets) in box.items():
        if name in written:
            written[name] = (kind, written[name][1] | labelsets)
        else:
            written[name] = (kind, labelsets)
    for name, (kind, labelsets) in written.items():
        assert name in rows and rows[name][2] == "report", name
        assert kind == rows[name][0], name
        assert labelsets == {tuple(sorted(rows[name][1]))}, (name, labelsets)
    assert set(written) == {n for n, row in rows.items() if row[2] == "report"}


# --------------------------------------------------------------------------- rules and dashboard vs schema
def _rules():
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def _dashboard_exprs():
    dash = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p["targets"]]


_NAME_USE = re.compile(r"\b(gpufleet_[a-z0-9_]+)\b(?:\s*\{([^}]*)\})?")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


def schema_problems(where, expr, rows, legend=""):
    """Metric names not in the schema, label names no metric of the expression has."""
    problems = []
    uses = _NAME_USE.findall(expr)
    if not uses:
        problems.append("%s: no gpufleet metric in %r" % (where, expr))
    known = set(TARGET_LABELS)
    for name, _ in uses:
        if name not in rows:
            problems.append("%s: %s is not in docs/metrics.md" % (where, name))
        else:
            known |= set(rows[name][1])
    for name, matchers in uses:
        if name in rows:
            for label in _MATCHER.findall(matchers):
                if label not in set(rows[name][1]) | TARGET_LABELS:
                    problems.append("%s: %s has no label %s" % (where, name, label))
    for group in _GROUPING.findall(expr):
        for label in (x.strip() for x in group.split(",") if x.strip()):
            if label not in known:
                problems.append("%s: no metric of %r has label %s" % (where, expr, label))
    for label in _LEGEND.findall(legend):
        if label not in known:
            problems.append("%s: legend label %s is on none of its metrics" % (where, label))
    return problems


def test_rules_and_dashboard_use_only_documented_metrics_and_labels():
    rows = schema()
    problems = []
    for rule in _rules():
        text = " ".join(str(v) for v in rule.get("annotations", {}).values())
        problems += schema_problems(rule["alert"], rule["expr"], rows,
                                    legend=re.sub(r"\$labels\.(\w+)", r"{{\1}}", text))
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for t in panel["targets"]:
            problems += schema_problems(panel["title"], t["expr"], rows, legend=t.get("legendFormat", ""))
    assert not problems, "\n".join(problems)


def test_schema_check_catches_a_wrong_name_and_a_wrong_label():
    rows = schema()
    assert schema_problems("x", "gpufleet_gpu_temperature_celsius > 85", rows) == []
    assert schema_problems("x", "gpufleet_gpu_temp_celsius > 85", rows)  # renamed metric
    assert schema_problems("x", 'gpufleet_gpu_temperature_celsius{host="a"} > 85', rows)  # report's label
    assert schema_problems("x", "sum by (reason) (gpufleet_gpu_temperature_celsius)", rows)
    assert schema_problems("x", "gpufleet_gpu_up", rows, legend="{{gpu}}")


def test_dashboard_has_one_panel_per_question_on_a_chosen_prometheus():
    dash = json.loads(DASHBOARD.read_text())
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    assert len({p["title"] for p in panels}) == len(panels)
    for p in panels:
        assert "?" in p["title"] and p["description"], p["title"]
        assert p["targets"], p["title"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
    cells = set()
    for p in panels:  # no two panels on one grid cell
        g = p["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine and g["x"] + g["w"] <= 24, p["title"]
        cells |= mine
    names = [v["name"] for v in dash["templating"]["list"]]
    assert names == ["datasource", "instance"]


@needs_promtool
def test_dashboard_queries_parse_in_prometheus(tmp_path):
    """promtool parses each query as a recording rule, with Grafana's variables filled in."""
    rules = [{"record": "gpufleet_dashboard_check_%d" % i,
              "expr": expr.replace("$instance", ".*").replace("$__rate_interval", "5m")}
             for i, (_, expr) in enumerate(_dashboard_exprs())]
    path = tmp_path / "dashboard-queries.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: %d rules found" % len(rules) in proc.stdout


# --------------------------------------------------------------------------- promtool on the rules
@needs_promtool
def test_promtool_checks_the_rules():
    proc = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: %d rules found" % len(_rules()) in proc.stdout


@needs_promtool
def test_promtool_unit_tests_of_the_rules_pass():
    proc = subprocess.run([PROMTOOL, "test", "rules", str(RULE_TESTS)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=RULE_TESTS.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_fires_on_a_fault_and_stays_silent_on_a_healthy_host():
    tests = yaml.safe_load(RULE_TESTS.read_text())
    assert tests["rule_files"] == ["../rules/gpufleet-gpu.rules.yml"]
    fires, healthy_cases = {}, {}
    for case in tests["tests"]:
        series = " ".join(s["series"] for s in case["input_series"])
        for check in case.get("alert_rule_test", []):
            name = check["alertname"]
            for alert in check.get("exp_alerts") or []:
                assert alert["exp_labels"]["instance"] != HEALTHY, (case["name"], name)
                assert alert["exp_labels"]["severity"] in ("critical", "warning"), (case["name"], name)
                fires.setdefault(name, []).append(case["name"])
            if check.get("exp_alerts"):
                healthy_cases.setdefault(name, []).append('instance="%s"' % HEALTHY in series.replace(" ", ""))
    alerts = [r["alert"] for r in _rules()]
    assert len(set(alerts)) == len(alerts)
    assert sorted(fires) == sorted(alerts), "alerts without a firing test: %s" % (set(alerts) - set(fires))
    for name, has_healthy in healthy_cases.items():
        assert all(has_healthy), "%s: a firing case without a healthy host (%s) beside it" % (name, HEALTHY)


def test_shipped_rules_keep_sensible_for_durations():
    # the live test rewrites `for` in its own copy only; the shipped rules wait out spikes
    durations = {r["alert"]: r.get("for", "0s") for r in _rules()}
    for name in ("GpufleetGpuThermalThrottling", "GpufleetGpuPowerThrottling", "GpufleetGpuPcieWidthBelowMax"):
        assert durations[name] == "10m", name
    assert durations["GpufleetGpuTemperatureHigh"] == "5m"
    for rule in _rules():
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]
