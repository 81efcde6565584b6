"""The doctor's findings and the remediate role's outcome in the fleet report."""

import json
import pathlib

import pytest
from gpufleet import report

SCHEMA_FILE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "schema" / "fleet.schema.json"


GPU = {"schema": 1, "source": "nvml", "error": None, "driver_version": "550.90.07", "gpu_count": 1,
       "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}],
       "health": {"status": "ok", "findings": []}}


def _result(host, doctor):
    return {"host": host, "reachable": True, "failed": False, "reason": None, "provider": None, "price_per_hour": None,
            "gpu": GPU, "gate": None, "doctor": doctor, "collected_at": None}


DOCTOR_FIXED = {
    "status": "unknown", "cuda_usable": None, "findings": [],
    "remediation": {"state": "fixed", "fixed": ["cuda_link_wrong_target", "ld_library_path_shadowing"],
                    "still_broken": [], "needs_provider": [], "needs_reboot": [], "planned": []}}
DOCTOR_PROVIDER = {
    "status": "broken", "cuda_usable": False,
    "findings": [{"code": "xid_79_fallen_off_bus", "severity": "critical", "remedy_class": "provider",
                  "meaning": "A GPU has fallen off the PCIe bus (Xid 79)", "remedy": "Needs a host reboot at least",
                  "evidence": {"xid_counts": {"79": 1}}}],
    "remediation": {"state": "needs_provider", "fixed": [], "still_broken": [],
                    "needs_provider": [{"code": "xid_79_fallen_off_bus", "meaning": "m", "remedy": "r"}],
                    "needs_reboot": [], "planned": []}}


@pytest.fixture(scope="module")
def summary():
    return report.summarize([_result("fixed-host", DOCTOR_FIXED), _result("bad-host", DOCTOR_PROVIDER)])


def test_provider_findings_fail_the_host_and_send_it_back(summary):
    bad = next(h for h in summary["hosts"] if h["host"] == "bad-host")
    assert bad["status"] == "failed" and bad["action"] == report.ACTION_RETURN
    assert any("fallen off the PCIe bus" in r for r in bad["reasons"])
    assert "evidence" not in bad["doctor"]["findings"][0]  # the raw evidence stays in the fact cache


def test_remediation_outcome_is_in_every_format(summary, tmp_path):
    report.write_all(summary, tmp_path)
    md = (tmp_path / report.OUTPUT_FILES["markdown"]).read_text()
    html = (tmp_path / report.OUTPUT_FILES["html"]).read_text()
    data = json.loads((tmp_path / report.OUTPUT_FILES["json"]).read_text())
    assert "## Remediation" in md and "cuda_link_wrong_target, ld_library_path_shadowing" in md
    assert "<h2>Remediation</h2>" in html and "needs_provider" in html
    fixed = next(h for h in data["hosts"] if h["host"] == "fixed-host")
    assert fixed["doctor"]["remediation"]["state"] == "fixed"


def test_fleet_json_with_remediation_validates(summary, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    report.write_all(summary, tmp_path)
    data = json.loads((tmp_path / report.OUTPUT_FILES["json"]).read_text())
    schema = json.loads(SCHEMA_FILE.read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(data)) == []


def test_a_cpu_host_by_intent_is_ok_not_no_gpu():
    # No "health" in the facts: the report computes it with facts.health, as gpu_facts does (failed,
    # gpu_stack_broken); on a CPU host by intent that is no fault and no reason.
    facts = {"schema": 1, "source": "none", "error": "no NVIDIA device node, kernel driver or tools on this host",
             "error_code": "no_gpu_stack", "gpu_count": 0, "gpus": []}
    cpu = dict(_result("cpu-host", {"status": "healthy", "cuda_usable": False, "findings": []}), gpu=facts)
    unsaid = dict(cpu, host="unsaid-host")
    cpu["expected_gpu_count"] = 0
    s = report.summarize([cpu, unsaid])
    by = {h["host"]: h for h in s["hosts"]}
    assert by["cpu-host"]["status"] == "ok" and by["cpu-host"]["action"] is None
    assert by["cpu-host"]["reasons"] == [] and {f["severity"] for f in by["cpu-host"]["findings"]} == {"info"}
    assert by["unsaid-host"]["status"] == "no-gpu"
    assert by["unsaid-host"]["reasons"] == ["no GPU: no_gpu_stack: no NVIDIA device node, kernel driver or tools on "
                                            "this host"]


def test_cpu_mode_gate_results_are_shown_without_a_gpu_row(tmp_path):
    facts = {"schema": 1, "source": "none", "error": "no NVIDIA device node", "error_code": "no_gpu_stack",
             "gpu_count": 0, "gpus": [], "health": {"status": "ok", "findings": []}}
    gate = [{"index": 0, "device": "cpu", "test": "bf16_gemm", "measured": 0.21, "expected": 0.01, "unit": "TFLOPS",
             "fraction_of_peak": None, "passed": True, "why": "0.21 >= 0.01 TFLOPS (cpu mode)"}]
    r = dict(_result("cpu-host", None), gpu=facts, gate=gate, expected_gpu_count=0)
    s = report.summarize([r])
    assert s["hosts"][0]["gate_other"][0]["device"] == "cpu" and s["hosts"][0]["status"] == "ok"
    report.write_all(s, tmp_path)
    md = (tmp_path / report.OUTPUT_FILES["markdown"]).read_text()
    assert "## Benchmark gate results not tied to a GPU (cpu mode)" in md and "bf16_gemm" in md
    assert "bf16_gemm" in (tmp_path / report.OUTPUT_FILES["html"]).read_text()
