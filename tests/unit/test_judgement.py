"""One judgement per host (module_utils/gpufleet/controller/judgement/judge.py): the precedence table, the worst
action, the
one-breath verdict, and the report built on it."""

import json
import pathlib

import pytest
from gpufleet.controller import report
from gpufleet.controller.judgement import briefs
from gpufleet.controller.judgement import judge as j

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "report"


def _f(code, severity="critical", action=None, status=None, source="doctor", text=None):
    return j.finding(source, code, severity, text or code, action=action, status=status)


# ---------------------------------------------------------------------------------------- the precedence table
PAIRS = [(specific, generic) for specific, generics, _why in j.OUTRANKS for generic in generics]


@pytest.mark.parametrize(("specific", "generic"), PAIRS, ids=["%s>%s" % p for p in PAIRS])
def test_each_specific_finding_outranks_the_generic_symptom_it_explains(specific, generic):
    """Whatever order they come in and whatever the generic one calls for, the specific finding decides."""
    for order in (0, 1):
        pair = [_f(specific, action=j.ACTION_RESTART, text="specific"),
                _f(generic, action=j.ACTION_RETURN, status="no-gpu", text="generic")]
        findings = pair if order == 0 else pair[::-1]
        got = j.decide(findings)
        assert got["action"] == j.ACTION_RESTART and got["status"] == "failed"
        assert got["verdict"] == "restart the container: specific"
        (gen,) = [f for f in got["findings"] if f["code"] == generic]
        assert gen["outranked_by"] == specific and got["findings"][-1] is gen  # kept, last, with its evidence
        # alone, the generic finding decides as it says
        assert j.decide([_f(generic, action=j.ACTION_RETURN, status="no-gpu")])["action"] == j.ACTION_RETURN


def test_the_lost_gpu_container_says_restart_and_makes_no_driver_claim():
    """The user's case: NVML "Unknown Error" in a container that had its GPUs; the facts read "driver not
    loaded", the doctor finds container_lost_gpus."""
    facts = j.finding("facts", "no_gpu", "critical", "no GPU: driver_not_loaded: the NVIDIA kernel driver is not "
                      "loaded", status="no-gpu", action=j.ACTION_RETURN)
    doctor = j.finding("doctor", "container_lost_gpus", "critical", briefs.brief(
        "container_lost_gpus", {"open_denied": {"/dev/nvidia0": "EPERM", "/dev/nvidiactl": "EPERM"},
                                "nvml_error": "Unknown Error"}, "m"), action=j.ACTION_RESTART)
    got = j.decide([facts, doctor])
    assert got["action"] == j.ACTION_RESTART and got["status"] == "failed"
    assert got["verdict"].startswith("restart the container: the container lost its GPUs: 2 GPU node(s) refuse")
    assert "driver" not in got["verdict"] and "(+" not in got["verdict"]


def test_no_finding_outranks_itself_and_every_code_in_the_table_is_known():
    from gpufleet.controller.judgement import history
    from gpufleet.host.doctor import rules as doctor_rules

    doctor_codes = {r["code"] for r in doctor_rules.RULES} | {history.CODE_FLAGGED_BEFORE}
    facts_codes = {"no_gpu", "no_gpus", "gpu_stack_broken", "gpu_facts_unavailable", "gpu_count_low", "xid_79",
                   "gpu_lost", "ecc_uncorrectable_volatile", "ecc_uncorrectable_aggregate", "row_remap_failure",
                   "gpu_reset_required", "check_timed_out", "check_step_failed", "playbook_failed"}
    for specific, generics, why in j.OUTRANKS:
        assert specific not in generics and why
        assert specific in doctor_codes | facts_codes, specific
        unknown = set(generics) - doctor_codes - facts_codes
        assert not unknown, (specific, unknown)


# ---------------------------------------------------------------------------------------- actions and statuses
@pytest.mark.parametrize(("actions", "want"), [
    ((j.ACTION_FIX, j.ACTION_RETURN), j.ACTION_RETURN),
    ((j.ACTION_FIX, j.ACTION_RESTART), j.ACTION_RESTART),
    ((j.ACTION_REBOOT, j.ACTION_RESTART), j.ACTION_RESTART),
    ((j.ACTION_FIX, j.ACTION_REBOOT), j.ACTION_REBOOT),
    ((None, j.ACTION_FIX), j.ACTION_FIX),
    ((None, None), j.ACTION_FIX),  # a failed host whose findings call for nothing: gpufleet's remediate play
])
def test_the_worst_action_wins(actions, want):
    got = j.decide([_f("a", action=actions[0]), _f("b", severity="warning", action=actions[1])])
    assert got["action"] == want


def test_info_findings_call_for_nothing_and_an_ok_host_is_kept_with_its_notes():
    got = j.decide([_f("driver_version_drift", "info", text="driver 550 differs from the fleet's usual 535")])
    assert (got["status"], got["action"]) == ("ok", None)
    assert got["verdict"] == "keep (note: driver 550 differs from the fleet's usual 535)"
    assert j.decide([])["verdict"] == "keep"


def test_statuses_worst_first_and_the_listing_returns_a_host_that_cannot_be_judged():
    assert j.decide([_f("x", "warning"), _f("y", "unknown")])["status"] == "degraded"
    assert j.decide([_f("u", status="unreachable"), _f("y", "error")])["status"] == "unreachable"
    lost = [_f("unreachable", status="unreachable")]
    assert j.decide(lost)["action"] == j.ACTION_CHECK
    assert j.decide(lost, listing_failed=True)["action"] == j.ACTION_RETURN
    # a host whose own evidence says nothing either way (status unknown) is returned when the listing calls it failed
    unknown = [_f("no_result", "unknown")]
    assert (j.decide(unknown)["status"], j.decide(unknown)["action"]) == ("unknown", j.ACTION_CHECK)
    assert j.decide(unknown, listing_failed=True)["action"] == j.ACTION_RETURN
    # one that can be judged keeps its own action: the listing decides only where the evidence cannot
    failed = [_f("ecc", "critical", action=j.ACTION_FIX)]
    assert j.decide(failed, listing_failed=True)["action"] == j.ACTION_FIX


# ---------------------------------------------------------------------------------------- the verdict
def test_the_verdict_gives_the_evidence_for_its_action_first_then_counts_the_rest():
    got = j.decide([_f("cpu_only_wheel", action=j.ACTION_FIX, text="torch 2.5.1+cpu is a CPU-only build"),
                    _f("gpu_used_by_another_tenant", "warning", action=j.ACTION_RETURN,
                       text="GPU 0 holds 30.0 GiB with no process of this host, seen twice 5 s apart")])
    assert got["verdict"] == ("return to provider: GPU 0 holds 30.0 GiB with no process of this host, seen twice "
                              "5 s apart (+1 more)")


def test_a_long_verdict_is_cut_to_one_breath_and_keeps_its_count():
    got = j.decide([_f("a", text="x" * 400), _f("b", text="y"), _f("c", text="z")])
    assert len(got["verdict"]) == j.VERDICT_MAX and got["verdict"].endswith("... (+2 more)")
    notes = j.decide([_f("d", "info", text="n" * 400)])
    assert len(notes["verdict"]) <= j.VERDICT_MAX and notes["verdict"].endswith("...)")


@pytest.mark.parametrize(("code", "evidence", "want"), [
    ("gpu_used_by_another_tenant", {"gpus": [{"gpu": 0, "memory_used_mib": [30720, 30800]}], "looks": 2,
                                    "interval_s": 5},
     "GPU 0 holds 30.0 GiB with no process of this host, seen twice 5 s apart"),
    ("gpu_partitioned", {"gpus": [{"gpu": 1, "kind": "memory_share", "memory_total_mib": 40960,
                                   "spec_memory_gib": 80, "fraction": 0.5}]}, "GPU 1 has 40.0 GiB of 80 GiB (50%)"),
    ("provider_claim_mismatch", {"mismatches": [{"what": "gpu_model", "claimed": "H100 SXM",
                                                 "found": ["NVIDIA A100-SXM4-80GB"]}]},
     "listing says gpu model H100 SXM, host has NVIDIA A100-SXM4-80GB"),
    ("fewer_gpus_than_rented", {"expected_gpu_count": 8, "gpu_count": 7}, "7 GPU(s) visible, 8 rented"),
    ("cpu_only_wheel", {"torch_version": "2.5.1+cpu"}, "torch 2.5.1+cpu is a CPU-only build"),
    ("nvidia_uvm_not_loaded", {"in_container": True, "missing": ["/dev/nvidia-uvm"],
                               "device_nodes": ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]},
     "no /dev/nvidia-uvm beside 2 GPU node(s) in this container: CUDA cannot start"),
    ("nvidia_uvm_not_loaded", {"modules": ["nvidia", "nvidia_modeset"]},
     "nvidia_uvm is not loaded (nvidia, nvidia_modeset loaded): CUDA cannot start"),
    ("no_such_code", {}, "The first sentence"),
    ("gpu_partitioned", {"gpus": "odd"}, "The first sentence"),  # odd evidence: the meaning
])
def test_the_evidence_in_numbers(code, evidence, want):
    assert briefs.brief(code, evidence, "The first sentence. The second.") == want


def test_every_fixture_hosts_verdict_is_one_line_of_at_most_160_characters_that_starts_with_its_action():
    hosts = report.summarize(report.load_results(FIXTURES), now="2026-12-01T00:00:00+00:00")["hosts"]
    assert len(hosts) >= 8
    for h in hosts:
        v = h["verdict"]
        assert len(v) <= j.VERDICT_MAX and "\n" not in v, (h["host"], v)
        assert v.startswith(h["action"] + ": ") if h["action"] else v.startswith(j.KEEP), (h["host"], v)
        # the first fault the verdict quotes is the evidence for the action
        if h["action"] and h["action"] != j.ACTION_CHECK:
            first = next(f for f in h["judgement"] if f["outranked_by"] is None)
            assert first["text"][:40] in v, (h["host"], v)
            assert first["action"] in (h["action"], None), (h["host"], first)


def test_fleet_json_carries_each_findings_evidence_and_the_what_to_do_groups(tmp_path):
    s = report.summarize(report.load_results(FIXTURES), now="2026-12-01T00:00:00+00:00")
    report.write_all(s, tmp_path)
    data = json.loads((tmp_path / report.OUTPUT_FILES["json"]).read_text())
    a100 = next(h for h in data["hosts"] if h["host"] == "gpu-a100-02")
    ecc = next(f for f in a100["judgement"] if f["code"] == "ecc_uncorrectable_volatile")
    assert ecc["source"] == "health" and ecc["evidence"] and ecc["action"] == j.ACTION_RETURN
    assert [g["action"] for g in data["what_to_do"]][0] == j.ACTION_RETURN
    page = (tmp_path / report.OUTPUT_FILES["html"]).read_text()
    assert 'id="what-to-do"' in page and "playbooks/return.yml" in page
    assert "## What to do" in (tmp_path / report.OUTPUT_FILES["markdown"]).read_text()


def test_a_big_group_reads_its_hosts_from_a_file():
    hosts = [{"host": "h%03d" % i, "action": j.ACTION_FIX, "judgement": []} for i in range(j.COMMAND_HOSTS + 1)]
    (group,) = j.what_to_do(hosts)
    assert "--limit @fix-hosts.txt" in group["command"] and len(group["hosts"]) == j.COMMAND_HOSTS + 1


# ---------------------------------------------------------------------------------------- the pre-check (check.yml)
def _checked(name, check, **more):
    r = {"host": name, "reachable": True, "failed": False,
         "gpu": {"source": "nvml", "gpu_count": 0, "gpus": [], "health": {"status": "ok", "findings": []}},
         "expected_gpu_count": 0, "check": check}
    r.update(more)
    return r


STEPS = {"connect": 0.4, "environment": 6.5, "probe": 21.0}


def test_a_step_past_the_deadline_is_a_finding_that_gives_the_box_back():
    hung = {"deadline_s": 60, "steps": {"connect": 0.5}, "failed_step": 2, "timed_out": True,
            "error": "Task failed: Timed out after 59 second(s).", "torch_python": None}
    # the rescued step is also recorded by the status callback as a failed task: the check's finding explains it
    s = report.summarize([_checked("hung", hung, failed=True, reason="check / probe: Timed out"),
                          _checked("fine", dict(deadline_s=60, steps=STEPS, torch_python="/usr/bin/python3"))])
    hosts = {h["host"]: h for h in s["hosts"]}
    assert hosts["hung"]["action"] == j.ACTION_RETURN and hosts["hung"]["status"] == "failed"
    assert hosts["hung"]["verdict"] == "return to provider: check timed out in step 2 (environment) after 60 s"
    assert hosts["fine"]["verdict"] == "keep" and hosts["fine"]["check"]["steps"] == STEPS
    lines, bad = j.check_lines(s)
    assert bad == ["hung"]
    assert lines[0].startswith("fine  keep  [connect 0.4 s, environment 6.1 s, probe 14.5 s]")
    assert lines[1].startswith("hung  return to provider: check timed out in step 2")
    assert lines[-1] == "2 host(s): 1 keep, 0 fix here, 1 to give back, restart, reboot or check again: hung"


def test_an_image_without_torch_is_said_and_judged_on_nvml_alone():
    s = report.summarize([_checked("bare", {"deadline_s": 60, "steps": {"connect": 0.3, "environment": 2.0},
                                            "torch_python": "", "pythons_tried": ["/usr/bin/python3"]})])
    (h,) = s["hosts"]
    assert h["verdict"] == "keep (note: no torch on this image: judged with NVML alone)"
    assert j.check_lines(s)[1] == []


def test_a_failed_step_that_is_no_timeout_asks_to_check_again():
    s = report.summarize([_checked("odd", {"deadline_s": 60, "steps": {"connect": 0.3}, "failed_step": "2",
                                           "timed_out": False, "error": "MODULE FAILURE"})])
    (h,) = s["hosts"]
    assert h["action"] == j.ACTION_CHECK and h["verdict"].startswith("check access / rerun: check failed in step 2")
    assert j.check_lines(s)[1] == ["odd"]


def test_check_verdicts_script_exit_status(tmp_path):
    import subprocess
    import sys

    script = HERE.parent.parent / "scripts" / "check-verdicts"
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report.summarize([_checked("fine", {"steps": STEPS})])))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(report.summarize([_checked("gone", None, reachable=False, reason="ssh: timed out")])))
    ok = subprocess.run([sys.executable, str(script), str(good)], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("fine  keep")
    no = subprocess.run([sys.executable, str(script), str(bad)], capture_output=True, text=True)
    assert no.returncode == 3 and "gone  check access / rerun: ssh: timed out" in no.stdout
    missing = subprocess.run([sys.executable, str(script), str(tmp_path / "none.json")], capture_output=True, text=True)
    assert missing.returncode == 2 and "cannot read" in missing.stderr


@pytest.mark.parametrize(("busbw", "passed"), [(200.0, False), (340.0, True)])
def test_the_all_reduce_below_its_topology_floor_gives_an_8x_h100_back(busbw, passed):
    """The pre-check's all-reduce on 8x H100 SXM against NCCL_BUSBW_FLOORS (329 GB/s, sourced): below it the
    gate fails and the box goes back with the figure; at it, kept."""
    from gpufleet.host.gate import rules as gate
    from gpufleet.host.gpu import specs

    spec = specs.lookup("NVIDIA H100 80GB HBM3", 81559)
    exp = gate.expectation("nccl_allreduce", spec, gpu_count=8)
    assert exp["expected"] == 329.0 and "NCCL_BUSBW_FLOORS" in exp["source"]
    entry = gate.verdict({"test": "nccl_allreduce", "measured": busbw, "expected": exp["expected"], "unit": "GB/s",
                          "index": None, "device": "cuda"})
    assert entry["passed"] is passed
    facts = {"source": "nvml", "gpu_count": 8, "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3",
                                                       "memory_total_mib": 81559} for i in range(8)],
             "health": {"status": "ok", "findings": []}}
    s = report.summarize([{"host": "h100x8", "reachable": True, "failed": False, "gpu": facts,
                           "gate": [dict(entry, index=0)]}])
    (h,) = s["hosts"]
    if passed:
        assert h["verdict"] == "keep"
    else:
        assert h["verdict"].startswith("return to provider: GPU 0: gate nccl_allreduce failed: 200 GB/s < expected 329")


# Issue 36: the torch a pre-check found with open advisories is a note under the host's line, never its verdict.
@pytest.mark.parametrize(("torch", "note"), [
    ("2.5.1+cu121", "note: torch 2.5.1+cu121: CVE-2025-32434 (fixed in 2.6.0), CVE-2026-24747 (fixed in 2.10.0): "
                    "torch.load of untrusted files; upgrade to >= 2.10.0; version from the pre-check's environment "
                    "/usr/bin/python3"),
    ("2.10.0+cu128", None),     # patched: no note
    (None, None),               # no torch on the image: nothing to note
])
def test_a_torch_advisory_is_a_note_under_the_line_not_the_verdict(torch, note):
    envs = [{"python": "/usr/bin/python3", "torch": torch}] if torch else []
    check = dict(deadline_s=60, steps=STEPS, torch_python="/usr/bin/python3" if torch else "", environments=envs)
    s = report.summarize([_checked("box", check)])
    (h,) = s["hosts"]
    assert h["action"] is None and h["status"] == "ok"
    assert h["verdict"] == "keep" if torch else h["verdict"].startswith("keep (note: no torch on this image")
    lines, bad = j.check_lines(s)
    assert bad == [] and j.check_exit_status(s) == j.EXIT_OK
    assert lines[0].startswith("box   keep")
    if note:
        assert lines[1] == "      " + note and len(lines) == 3
    else:
        assert len(lines) == 2


def test_a_finding_is_what_it_was_given_and_an_unknown_severity_reads_unknown():
    """finding()'s record, key by key: the reason when given (else the text), the evidence, the GPU, not an echo; a
    severity outside SEVERITIES (a host's garbled word) is "unknown", implies status unknown, and is checked again."""
    f = j.finding("doctor", "some_code", "critical", "GPU 1:  lost", reason="doctor: GPU 1 is lost", gpu_index=1,
                  evidence={"minor": 1}, meaning="what it means", remedy="what to do", action=j.ACTION_RETURN)
    assert f == {"source": "doctor", "code": "some_code", "severity": "critical", "status": "failed",
                 "action": j.ACTION_RETURN, "text": "GPU 1: lost", "reason": "doctor: GPU 1 is lost",
                 "meaning": "what it means", "remedy": "what to do", "gpu_index": 1, "evidence": {"minor": 1},
                 "echo": False, "outranked_by": None}
    plain = j.finding("facts", "x", "warning", "text")
    assert plain["reason"] == "text" and plain["evidence"] == {} and plain["echo"] is False
    odd = j.finding("doctor", "odd", "garbled", "a finding of no known severity")
    assert odd["severity"] == "unknown" and odd["status"] == "unknown"
    got = j.decide([odd])
    assert got["status"] == "unknown" and got["action"] == j.ACTION_CHECK
