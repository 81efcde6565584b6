"""Verdicts that hold on boxes the demo never made (issue: a verdict that holds on every box).

Each test names the mistake it catches: a pending GPU repair called "fix here", "reboot" inside a container, an
exit status that disagrees with docs/check.md, a hang reported as a failed conditional, an unreachable host's SSH
reason cut off by play and task names, a throttled GPU without its temperature and clocks, a history flag from a
less-informed run outvoting the present diagnosis.
"""

import importlib.util
import json
import pathlib
import re
import subprocess
import sys

import pytest
from gpufleet.controller import report
from gpufleet.controller.judgement import history
from gpufleet.controller.judgement import judge as j
from gpufleet.host.doctor import rules as doctor_rules
from gpufleet.host.gpu import facts as gpufacts

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOW = "2026-12-05T10:00:00+00:00"


def _gpu(**more):
    g = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
         "memory_total_mib": 81559}
    g.update(more)
    return g


def _result(name="box", in_container=None, health=None, doctor=None, gpus=None, **more):
    gpus = [_gpu()] if gpus is None else gpus
    facts = {"source": "nvml", "gpu_count": len(gpus), "gpus": gpus, "driver_version": "550.54.15"}
    if health is not None:
        facts["health"] = health
    if in_container is not None:
        facts["host"] = {"container": in_container}
    r = {"host": name, "reachable": True, "failed": False, "gpu": facts, "expected_gpu_count": len(gpus)}
    if doctor is not None:
        r["doctor"] = doctor
    r.update(more)
    return r


def _host(results, **kw):
    return {h["host"]: h for h in report.summarize(results, now=NOW, **kw)["hosts"]}


# ------------------------------------------------------------------------- "fix here" only where remediate fixes
def _remediate_actions():
    path = ROOT / "roles" / "remediate" / "filter_plugins" / "remediate.py"
    spec = importlib.util.spec_from_file_location("remediate_filters", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ACTIONS


def test_the_fix_here_codes_are_what_remediate_fixes():
    assert frozenset(_remediate_actions()) == j.FIX_HERE_CODES


def _health_codes():
    """(code, severity) of every finding facts.health can write, read from its source (a new one is walked too)."""
    text = (ROOT / "module_utils" / "gpufleet" / "host" / "gpu" / "facts.py").read_text()
    found = set(re.findall(r'_finding\(\s*findings,\s*"([a-z0-9_]+)",\s*"([a-z]+)"', text))
    found |= {("xid_79", "critical"), ("xid_13", "warning"), ("xid_48", "critical")}
    assert len(found) >= 18, found  # the regex still reads the file
    return sorted(found)


def _doctor_cases():
    out = []
    for rule in doctor_rules.RULES:
        for in_container in (True, False):
            cls = rule["remedy_class"]
            if rule["remedy_class_of"]:
                cls = rule["remedy_class_of"]({"in_container": in_container})
            out.append((rule["code"], rule["severity"], cls, in_container))
    return out


@pytest.mark.parametrize(("code", "severity"), _health_codes())
@pytest.mark.parametrize("in_container", [True, False], ids=["container", "vm"])
def test_no_health_finding_calls_for_fix_here_without_a_remediate_fix(code, severity, in_container):
    health = {"status": "failed", "findings": [{"code": code, "severity": severity, "gpu_index": 0,
                                                "message": "%s seen" % code}]}
    h = _host([_result(in_container=in_container, health=health)])["box"]
    if h["action"] == j.ACTION_FIX:
        assert code in j.FIX_HERE_CODES, (code, h["verdict"])


@pytest.mark.parametrize(("code", "severity", "remedy_class", "in_container"), _doctor_cases(),
                         ids=["%s-%s" % (c[0], "container" if c[3] else "vm") for c in _doctor_cases()])
def test_no_doctor_finding_calls_for_fix_here_without_a_remediate_fix(code, severity, remedy_class, in_container):
    doctor = {"status": "broken", "cuda_usable": False, "findings": [
        {"code": code, "severity": severity, "remedy_class": remedy_class, "meaning": "%s seen." % code,
         "remedy": "do it", "fixable": remedy_class == "fixable"}]}
    h = _host([_result(in_container=in_container, doctor=doctor)])["box"]
    if h["action"] == j.ACTION_FIX:
        assert code in j.FIX_HERE_CODES, (code, h["verdict"])
    if in_container and h["action"] is not None:
        assert h["action"] != j.ACTION_REBOOT, (code, h["verdict"])  # nobody reboots a container's machine


@pytest.mark.parametrize("code", ["retired_pages_pending", "row_remap_pending", "gpu_reset_required"])
def test_a_pending_gpu_repair_is_a_reboot_on_a_vm_and_the_providers_in_a_container(code):
    health = {"status": "degraded", "findings": [{"code": code, "severity": "warning", "gpu_index": 0,
                                                  "message": "%s: the GPU needs a reset" % code}]}
    vm = _host([_result(in_container=False, health=health)])["box"]
    box = _host([_result(in_container=True, health=health)])["box"]
    assert vm["action"] == j.ACTION_REBOOT and vm["verdict"].startswith("reboot: GPU 0: %s" % code)
    assert box["action"] == j.ACTION_RETURN and box["verdict"].startswith("return to provider: GPU 0:")
    s = report.summarize([_result("vm", in_container=False, health=health)], now=NOW)
    assert j.check_exit_status(s) == j.EXIT_GIVE_BACK  # a reboot is more than keeping


def test_a_driver_library_mismatch_in_a_container_is_the_providers():
    def doctor(in_container):
        rule = next(r for r in doctor_rules.RULES if r["code"] == "driver_library_mismatch")
        cls = rule["remedy_class_of"]({"in_container": in_container})
        return {"status": "broken", "cuda_usable": False, "findings": [
            {"code": rule["code"], "severity": "critical", "remedy_class": cls, "meaning": rule["meaning"]}]}
    assert _host([_result(in_container=True, doctor=doctor(True))])["box"]["action"] == j.ACTION_RETURN
    assert _host([_result(in_container=False, doctor=doctor(False))])["box"]["action"] == j.ACTION_REBOOT


def test_a_setting_remediate_cannot_fix_is_a_note_not_fix_here():
    doctor = {"status": "degraded", "cuda_usable": True, "findings": [
        {"code": "cpu_quota_below_visible_cpus", "severity": "warning", "remedy_class": "fixable",
         "meaning": "The container may use far fewer CPUs than it sees.", "remedy": "set OMP_NUM_THREADS"}]}
    h = _host([_result(in_container=True, doctor=doctor)])["box"]
    assert h["action"] is None and h["verdict"].startswith("keep (note: The container may use far fewer CPUs")


# ------------------------------------------------------------------------- one exit-status contract
@pytest.mark.parametrize(("actions", "want"), [
    ((None,), 0), ((None, j.ACTION_FIX), 0), ((j.ACTION_FIX,), 0),
    ((None, j.ACTION_CHECK), 2), ((j.ACTION_REBOOT,), 2), ((j.ACTION_RESTART, None), 2), ((j.ACTION_RETURN,), 2),
])
def test_the_exit_status_is_0_for_keep_or_fix_here_and_2_otherwise(actions, want):
    summary = {"hosts": [{"host": "h%d" % i, "action": a, "status": "failed" if a else "ok", "verdict": a or "keep"}
                         for i, a in enumerate(actions)]}
    assert j.check_exit_status(summary) == want
    lines, bad = j.check_lines(summary)
    assert bool(bad) == bool(want)
    counted = re.search(r"(\d+) keep, (\d+) fix here, (\d+) to give back", lines[-1]).groups()
    assert sum(int(n) for n in counted) == len(actions)  # each host counted once


def test_a_failed_host_that_is_fixed_here_exits_0_and_is_not_counted_to_give_back():
    summary = {"hosts": [{"host": "a", "action": j.ACTION_FIX, "status": "failed", "verdict": "fix here: x"}]}
    lines, bad = j.check_lines(summary)
    assert bad == [] and j.check_exit_status(summary) == 0
    assert lines[-1] == "1 host(s): 0 keep, 1 fix here, 0 to give back, restart, reboot or check again"


def test_check_verdicts_exits_by_the_contract(tmp_path):
    for actions, rc in (((None, j.ACTION_FIX), 0), ((None, j.ACTION_CHECK), 3)):
        path = tmp_path / "fleet.json"
        path.write_text(json.dumps({"hosts": [{"host": "h%d" % i, "action": a, "status": "ok", "verdict": "v"}
                                              for i, a in enumerate(actions)]}))
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "check-verdicts"), str(path)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == rc, proc.stdout + proc.stderr


# ------------------------------------------------------------------------- lines that keep their evidence
SSH = ("Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 2299: Connection refused")


def test_an_unreachable_hosts_line_starts_with_sshs_reason():
    r = {"host": "gone", "reachable": False, "failed": False, "reason": SSH,
         "failed_in": "Check each box (connect, environment, performance probe, storage and network) / Connect | "
                      "Log in and run a trivial module"}
    h = _host([r])["gone"]
    assert h["action"] == j.ACTION_CHECK and h["status"] == "unreachable"
    assert h["verdict"] == "check access / rerun: " + SSH
    assert "Connect |" not in h["verdict"] and "port 2299: Connection refused" in h["verdict"][:j.VERDICT_MAX]
    assert h["judgement"][0]["evidence"]["failed_in"].endswith("trivial module")


def test_report_yml_keeps_play_and_task_out_of_the_reason():
    text = (ROOT / "playbooks" / "report.yml").read_text()
    line = next(x for x in text.splitlines() if "'reason':" in x)
    assert "__dropped.reason" in line and "__dropped.task" not in line and "__dropped.play" not in line


def test_a_thermally_throttled_gpu_quotes_its_temperature_and_clock():
    gpu = _gpu(throttle_reasons=["hw_thermal_slowdown", "sw_thermal_slowdown"], temperature_c=89,
               clocks={"sm_mhz": 1100, "sm_max_mhz": 2520})
    found = gpufacts.health({"gpu_count": 1, "gpus": [gpu]})["findings"]
    (f,) = [f for f in found if f["code"] == "clocks_throttled_hw"]
    assert f["message"].startswith("clock slowdown active (89 C, SM 1100 of 2520 MHz): hw_thermal_slowdown")
    h = _host([_result(gpus=[gpu])])["box"]
    assert "89 C, SM 1100 of 2520 MHz" in h["verdict"][:j.VERDICT_MAX]


# ------------------------------------------------------------------------- a hang is a finding, in its step
def test_a_hung_torch_import_reads_as_a_timeout_in_step_2_with_what_hung():
    check = {"deadline_s": 60, "steps": {"connect": 0.6}, "failed_step": 2, "timed_out": True,
             "hung": "`import torch` did not return in 43 s (/opt/conda/bin/python)",
             "error": "`import torch` did not return in 43 s (/opt/conda/bin/python)", "torch_python": None,
             "probes": {"find_python": "ran", "gpu_facts": "ran", "gpu_doctor": "ran", "gate": "not reached"},
             "probe_run": False}
    h = _host([_result("hung", check=check)])["hung"]
    assert h["action"] == j.ACTION_RETURN
    assert h["verdict"] == ("return to provider: check timed out in step 2 (environment): `import torch` did not "
                            "return in 43 s (/opt/conda/bin/python)")
    assert h["check"]["probe_run"] is False


# ------------------------------------------------------------------------- history informs, never overrides
LOST = {"source": "nvml", "gpu_count": 0, "gpus": [], "error": "NVML: Unknown Error", "error_code": "gpu_lost",
        "host": {"container": True}}
LOST_DOCTOR = {"status": "broken", "cuda_usable": False, "findings": [
    {"code": "container_lost_gpus", "severity": "critical", "remedy_class": "restart_container",
     "meaning": "This container had its GPUs and lost them.",
     "evidence": {"open_denied": {"/dev/nvidia0": "EPERM"}, "nvml_error": "Unknown Error"}}]}


def _lost(doctor=None):
    r = {"host": "lost", "reachable": True, "failed": False, "gpu": dict(LOST), "expected_gpu_count": 1,
         "provider": "vastai", "provider_id": 4242}
    if doctor is not None:
        r["doctor"] = doctor
    return r


def test_the_lost_gpu_container_is_restart_after_facts_then_remediate_then_report():
    # facts.yml: facts only, no doctor yet: "return to provider", and the history flags the box.
    first = report.summarize([_lost()], now="2026-12-05T09:00:00+00:00", history=history.empty())
    (h1,) = first["hosts"]
    assert h1["action"] == j.ACTION_RETURN
    hist = history.update(history.empty(), first, now="2026-12-05T09:00:00+00:00")
    (flag,) = hist["known_bad"].values()
    assert flag["evidence"] == "facts"
    # remediate.yml ran the doctor; report.yml: the doctor's present diagnosis decides, the flag is a note.
    second = report.summarize([_lost(LOST_DOCTOR)], now=NOW, history=hist)
    (h2,) = second["hosts"]
    assert h2["action"] == j.ACTION_RESTART, h2["verdict"]
    assert h2["verdict"].startswith("restart the container: the container lost its GPUs")
    (note,) = [f for f in h2["history"] if f["code"] == "known_bad"]
    assert note["action"] is None and "GPU facts only" in note["message"]


def test_a_flag_from_a_run_with_the_doctor_still_outranked_by_a_present_specific_diagnosis():
    flagged = report.summarize([_lost(LOST_DOCTOR)], now="2026-12-05T09:00:00+00:00", history=history.empty())
    hist = history.update(history.empty(), dict(flagged, hosts=[dict(flagged["hosts"][0], action=j.ACTION_RETURN)]),
                          now="2026-12-05T09:00:00+00:00")
    assert next(iter(hist["known_bad"].values()))["evidence"] == "doctor"
    (h,) = report.summarize([_lost(LOST_DOCTOR)], now=NOW, history=hist)["hosts"]
    assert h["action"] == j.ACTION_RESTART
    flag = next(f for f in h["judgement"] if f["code"] == history.CODE_FLAGGED_BEFORE)
    assert flag["outranked_by"] == "container_lost_gpus"


def test_a_flag_with_as_much_evidence_and_no_specific_diagnosis_still_returns_the_box():
    healthy_now = _result("kept", provider="vastai", provider_id=7, doctor={"status": "healthy", "findings": []})
    bad = dict(healthy_now, gate=[{"index": 0, "test": "bf16_gemm", "measured": 300, "expected": 989,
                                   "unit": "TFLOPS", "fraction_of_peak": 0.3, "passed": False}])
    first = report.summarize([bad], now="2026-12-05T09:00:00+00:00", history=history.empty())
    assert first["hosts"][0]["action"] == j.ACTION_RETURN
    hist = history.update(history.empty(), first, now="2026-12-05T09:00:00+00:00")
    (h,) = report.summarize([healthy_now], now=NOW, history=hist)["hosts"]
    assert h["action"] == j.ACTION_RETURN and "not given back" in h["verdict"]


def test_a_flag_from_a_history_without_evidence_levels_keeps_todays_rule():
    assert history._less_informed(None, "doctor") is False
    assert history._less_informed("facts", "doctor") is True
    assert history._less_informed("doctor", "doctor") is False
    assert history._less_informed("doctor", "facts") is False
