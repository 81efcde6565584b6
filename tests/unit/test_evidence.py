"""Evidence that cannot be judged is unknown, never "keep" (module_utils/gpufleet/controller/judgement/evidence.py,
judgement/findings.py).

Each case is a recorded host (tests/fixtures/report-demo: 04 is a healthy 8x H100 box, keep; tests/fixtures/report:
gpu-4090-03 fails its host-to-device gate) with one piece of its evidence made unreadable or self-contradictory, as
a truncated fact cache, a hand-edited file or an older writer leaves it. The report must say what it could not read.
"""

import copy
import datetime
import json
from pathlib import Path

import pytest
from gpufleet.controller import report
from gpufleet.controller.judgement import evidence
from gpufleet.controller.judgement import judge as judgement

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NOW = datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.timezone.utc)
H100 = json.loads((FIXTURES / "report-demo" / "hosts" / "gpufleet-demo-04.json").read_text())
RTX4090 = json.loads((FIXTURES / "report" / "gpu-4090-03.json").read_text())


def judged(result):
    (host,) = report.summarize([result], now=NOW)["hosts"]
    return host


def edited(result, edit):
    out = copy.deepcopy(result)
    edit(out)
    return out


def test_the_recorded_hosts_read_as_recorded():
    assert judged(H100)["verdict"] == judgement.KEEP
    assert evidence.problems(H100) == {} and evidence.problems(RTX4090) == {}


@pytest.mark.parametrize("edit, said", [
    (lambda r: r["gpu"]["gpus"].pop(), "GPU facts unreadable: gpus lists 7 of the 8 GPU(s) gpu_count gives"),
    (lambda r: r["gpu"]["health"].update(status="failed"),
     "GPU facts unreadable: health status is failed with no finding that says why"),
    (lambda r: r["gpu"]["health"].update(status="fine"), "health status is 'fine', not one of ok, degraded"),
    (lambda r: r["gpu"]["gpus"][3]["remapped_rows"].update(pending="yes"),
     "GPU 3: remapped_rows pending is 'yes', not true/false"),
    (lambda r: r["gpu"]["gpus"][1].update(temperature_c="91 C"), "GPU 1: temperature_c is '91 C', not a number"),
    (lambda r: r.update(reason="ssh: lost connection"), "the run's record unreadable: reason is given, but failed is"),
    (lambda r: r.update(gate=[{"index": 0, "test": "hbm_bandwidth", "passed": "maybe"}]),
     "gate results unreadable: entry 0: passed is 'maybe', not true/false"),
    (lambda r: r.update(check={"failed_step": "two"}),
     "pre-check record unreadable: failed_step is 'two', not a number"),
    (lambda r: r.update(doctor={"status": "failed", "findings": []}), "doctor: status failed with no finding"),
    (lambda r: r.update(doctor={"status": "degraded", "findings": "none"}), "findings is 'none', not a list"),
])
def test_unreadable_or_contradictory_evidence_is_checked_again_with_what_could_not_be_read(edit, said):
    host = judged(edited(H100, edit))
    assert host["status"] == "unknown", host["verdict"]
    assert host["action"] == judgement.ACTION_CHECK
    assert said in host["verdict"] + " ".join(host["reasons"]), (host["verdict"], host["reasons"])


def test_readable_evidence_beside_the_unreadable_still_counts():
    """A lost GPU next to a garbled ECC table: the lost GPU's return to provider stands, the garbled table is said."""
    def edit(r):
        r["gpu"].pop("health")
        r["gpu"]["gpus"][0]["ecc"] = "garbled"
        r["gpu"]["gpus"][5]["lost"] = True

    host = judged(edited(H100, edit))
    assert host["action"] == judgement.ACTION_RETURN, host["verdict"]
    assert any("GPU 5" in r and "lost" in r for r in host["reasons"]), host["reasons"]
    assert any("GPU 0: ecc is 'garbled', not a table" in r for r in host["reasons"]), host["reasons"]


def test_a_failed_gate_result_for_a_gpu_the_facts_do_not_list_still_fails_the_host():
    """The 4090's failed host-to-device test, with its GPU entry gone from the facts (and the count with it)."""
    def edit(r):
        r["gpu"]["gpus"] = []
        r["gpu"]["gpu_count"] = 0
        r["gpu"].pop("health", None)
        r["expected_gpu_count"] = None

    before, after = judged(RTX4090), judged(edited(RTX4090, edit))
    assert before["action"] == judgement.ACTION_RETURN
    assert after["action"] == judgement.ACTION_RETURN, after["verdict"]
    assert any("gate h2d_bandwidth failed" in r for r in after["reasons"]), after["reasons"]


def test_a_cpu_mode_gate_result_is_no_gpu_failure():
    cpu = json.loads((FIXTURES / "report-demo" / "hosts" / "gpufleet-demo-01.json").read_text())
    failed = edited(cpu, lambda r: r["gate"][0].update(passed=False))
    assert not [f for f in judged(failed)["judgement"] if f["code"] == "gate_failed"]


def test_problem_words():
    assert evidence.problems({"host": "x", "gpu": "garbled"}) == {
        "facts": ["the record is 'garbled', not a table"]}
    assert evidence.problems(["not", "a", "result"]) == {"run": ["the result is a list, not a table"]}
    many = ["p%d" % i for i in range(7)]
    assert evidence.summary(many) == "p0; p1; p2; p3 (+3 more)"
