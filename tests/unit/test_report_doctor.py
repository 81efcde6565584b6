"""The doctor's findings and the remediate role's outcome in the fleet report."""

import json
import pathlib

import pytest
from gpufleet.controller import report

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
    assert bad["doctor"]["findings"][0]["evidence"] == {"xid_counts": {"79": 1}}  # fleet.json keeps the evidence
    (xid,) = [f for f in bad["judgement"] if f["code"] == "xid_79_fallen_off_bus"]
    assert xid["evidence"] == {"xid_counts": {"79": 1}} and xid["action"] == report.ACTION_RETURN


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


# --------------------------------------------------------------------------- the verdict
DOCTOR_FIXABLE = {
    "status": "broken", "cuda_usable": False,
    "findings": [
        {"code": "ld_library_path_shadowing", "severity": "warning", "remedy_class": "fixable", "fixable": True,
         "meaning": "LD_LIBRARY_PATH puts an old libcudart first", "remedy": "drop the stale LD_LIBRARY_PATH entry"},
        {"code": "nvidia_uvm_not_loaded", "severity": "critical", "remedy_class": "fixable", "fixable": True,
         "meaning": "nvidia_uvm is not loaded", "remedy": "load nvidia_uvm with nvidia-modprobe -u -c=0"}]}
DOCTOR_RESTART = {
    "status": "broken", "cuda_usable": True,
    "findings": [{"code": "pids_max_low", "severity": "warning", "remedy_class": "restart_container",
                  "meaning": "the container's pids.max is 512", "remedy": "restart it with a higher --pids-limit"}]}
DOCTOR_REBOOT = {
    "status": "broken", "cuda_usable": False,
    "findings": [{"code": "driver_library_mismatch", "severity": "critical", "remedy_class": "reboot",
                  "meaning": "the loaded kernel module and the user-space driver differ", "remedy": "reboot"}]}


def test_the_verdict_says_what_to_do_and_why_worst_first():
    s = report.summarize([_result("fix-host", DOCTOR_FIXABLE), _result("restart-host", DOCTOR_RESTART),
                          _result("reboot-host", DOCTOR_REBOOT), _result("bad-host", DOCTOR_PROVIDER),
                          _result("good-host", None)])
    v = {h["host"]: h["verdict"] for h in s["hosts"]}
    assert v["good-host"] == "keep"
    # the action and the worst evidence (the critical finding before the warning), the rest counted
    assert v["fix-host"] == "fix here: nvidia_uvm is not loaded (+1 more)"
    assert v["restart-host"] == "restart the container: the container's pids.max is 512"
    assert v["reboot-host"] == "reboot: the loaded kernel module and the user-space driver differ"
    assert v["bad-host"] == "return to provider: Xid 79 (GPU fell off the bus): 79 x1"
    # the remedies and the commands are in the "what to do" section, grouped by action, worst first
    todo = {g["action"]: g for g in s["what_to_do"]}
    assert [g["action"] for g in s["what_to_do"]] == [report.ACTION_RETURN, report.ACTION_RESTART,
                                                      report.ACTION_REBOOT, report.ACTION_FIX]
    fix = todo[report.ACTION_FIX]
    assert fix["hosts"] == ["fix-host"] and fix["command"].startswith("ansible-playbook playbooks/remediate.yml")
    assert "--limit fix-host" in fix["command"]
    assert {i["code"]: i["remedy"] for i in fix["items"]} == {
        "nvidia_uvm_not_loaded": "load nvidia_uvm with nvidia-modprobe -u -c=0",
        "ld_library_path_shadowing": "drop the stale LD_LIBRARY_PATH entry"}
    assert todo[report.ACTION_RETURN]["command"].startswith("ansible-playbook playbooks/return.yml")
    assert {b["host"]: b["verdict"] for b in s["bad_hosts"]} == {h: v[h] for h in v if h != "good-host"}
    assert all("\n" not in x for x in v.values())


def test_the_verdict_names_three_reasons_then_counts_and_ends_with_the_return_action():
    from tests.unit.test_report import FIXTURES, INVENTORY, NOW

    s = report.summarize(report.load_results(FIXTURES, inventory_hosts=INVENTORY), now=NOW)
    v = {h["host"]: h["verdict"] for h in s["hosts"]}
    assert v["gpu-h100-01"] == v["cpu-box-09"] == "keep"
    # the gate failure (error) comes before the PCIe width warning, though said after it; the reasons are in
    # the verdict's order too
    riser = next(h for h in s["hosts"] if h["host"] == "gpu-4090-03")
    assert riser["reasons"][0].startswith("GPU 0: gate h2d_bandwidth failed")
    assert riser["reasons"][1].startswith("GPU 0: PCIe link x4")
    assert v["gpu-4090-03"].startswith("return to provider: GPU 0: gate h2d_bandwidth failed (25% of peak)")
    a100 = next(h for h in s["hosts"] if h["host"] == "gpu-a100-02")
    faults = [f for f in a100["judgement"] if f["outranked_by"] is None and f["severity"] != "info"]
    assert v["gpu-a100-02"].endswith("(+%d more)" % (len(faults) - 1))  # the drift lines are info
    assert v["gpu-never-08"] == "check access / rerun: no result (host not reached)"
    assert all(len(x) <= report.VERDICT_MAX for x in v.values())
    # a provider's box: the provider's return action is in the "what to do" section, not the verdict
    box = dict(_result("vast-box", DOCTOR_PROVIDER), provider="vastai", provider_id="1234")
    s = report.summarize([box])
    (h,) = s["hosts"]
    assert h["return_action"] and h["return_action"] not in h["verdict"]
    assert s["what_to_do"][0]["return_actions"] == [h["return_action"]]


def test_the_verdict_is_in_the_host_tables_and_the_csv(summary):
    md = report.to_markdown(summary)
    assert "| facts read at | reasons | verdict |" in md
    assert "| return to provider: Xid 79 (GPU fell off the bus): 79 x1 |" in md
    page = report.to_html(summary)
    assert '<th>reasons</th><th>verdict</th>' in page
    assert '<td class="verdict">return to provider: Xid 79 (GPU fell off the bus): 79 x1</td>' in page
    csv_text = report.to_csv(summary)
    n = len(report.CHECK_ITEMS)  # one check_<item> column per checklist item follows the verdict
    assert csv_text.splitlines()[0].split(",")[-n - 2:-n] == ["host_reasons", "verdict"]
    assert "return to provider: Xid 79 (GPU fell off the bus): 79 x1" in csv_text


DOCTOR_LOST = {
    "status": "broken", "cuda_usable": False,
    "findings": [{"code": "container_lost_gpus", "severity": "critical", "remedy_class": "restart_container",
                  "meaning": "The container lost access to its GPUs", "remedy": "Restart the container"}],
    "remediation": None}


@pytest.mark.parametrize("doctor, status, action", [
    (DOCTOR_LOST, "failed", report.ACTION_RESTART),  # a doctor-only run (remediate.yml) still tells what to do
    (DOCTOR_PROVIDER, "failed", report.ACTION_RETURN),
    ({"status": "ok", "cuda_usable": True, "findings": [], "remediation": None}, "unknown", report.ACTION_CHECK),
])
def test_the_doctors_findings_settle_a_host_read_without_gpu_facts(doctor, status, action):
    result = dict(_result("doctor-only", doctor), gpu=None)
    host = report.summarize([result])["hosts"][0]
    assert (host["status"], host["action"]) == (status, action)
    assert host["verdict"].startswith(action)
    assert "no GPU facts in the result" in host["reasons"]  # what was not read stays said


def test_the_verdict_gives_the_evidence_for_its_action_first():
    """A CPU torch (fix here) and another tenant (provider) on one host, both critical: the verdict says
    "return to provider" and names the tenant first, not the torch build that gpufleet could fix."""
    doctor = {"status": "broken", "cuda_usable": False, "remediation": None, "findings": [
        {"code": "cpu_only_wheel", "severity": "critical", "remedy_class": "fixable",
         "meaning": "The installed torch is a CPU-only build", "remedy": "Reinstall torch"},
        {"code": "gpu_used_by_another_tenant", "severity": "critical", "remedy_class": "provider",
         "meaning": "Someone else is on this GPU", "remedy": "Ask the provider to clear the GPU"}]}
    host = report.summarize([_result("shared-box", doctor)])["hosts"][0]
    assert host["action"] == report.ACTION_RETURN
    assert host["verdict"] == "return to provider: Someone else is on this GPU (+1 more)"
    assert host["reasons"][0].startswith("doctor: Someone else")  # the reasons in the verdict's order
