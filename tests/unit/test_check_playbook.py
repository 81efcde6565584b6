"""playbooks/check.yml's own expressions, evaluated by Ansible's template engine against what a host can leave
behind: a doctor result with nulls (a probe killed by its timeout), no doctor result at all, a gate that was
skipped or timed out. No conditional may fail on a null or a missing fact (a failed conditional named the wrong
step and hid a hang), and the variables a user passes with -e work as booleans."""

import pathlib

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOUND = '{"torch": "/opt/conda/bin/python", "nvml": "", "any": "/usr/bin/python3", "tried": []}'


def _plays():
    loader = DataLoader()
    return loader, loader.load_from_file(str(ROOT / "playbooks" / "check.yml"), trusted_as_template=True)


def _play(name="Check each box"):
    """The play of check.yml whose name starts with ``name``: the boxes' by default."""
    loader, plays = _plays()
    (play,) = [p for p in plays if p["name"].startswith(name)]
    return loader, play


def _block(play):
    (task,) = [t for t in play["tasks"] if "block" in t]
    return task


def _conditions(tasks):
    for task in tasks:
        when = task.get("when")
        for cond in (when if isinstance(when, list) else [when] if when else []):
            yield task["name"], cond


DOCTORS = {
    "doctor killed its torch probe": {"gpu_doctor": {"cuda_usable": None, "status": "unknown", "evidence": {
        "torch": {"importable": None, "is_available": None, "timed_out": True, "timeout_s": 43}}},
        "gpu": {"gpu_count": None}},
    "nulls everywhere": {"gpu_doctor": {"cuda_usable": None, "evidence": None}, "gpu": None},
    "no doctor result": {},
    "healthy": {"gpu_doctor": {"cuda_usable": True, "evidence": {"torch": {"importable": True}}},
                "gpu": {"gpu_count": 2}},
}


def _templar(facts, **more):
    loader, play = _play()
    variables = dict(play["vars"])
    variables.update(ansible_facts=facts, __check_python={"stdout": FOUND}, __check_t0=0, gate_device="cuda")
    variables.update(more)
    return Templar(loader=loader, variables=variables), play


@pytest.mark.parametrize("case", sorted(DOCTORS))
@pytest.mark.parametrize("probe", [True, "false", "yes"])
def test_no_condition_fails_on_a_null_or_missing_fact(case, probe):
    templar, play = _templar(DOCTORS[case], check_probe=probe)
    task = _block(play)
    results = {}
    for name, cond in _conditions(task["block"] + task["rescue"] + task["always"]):
        results[(name, cond)] = templar.evaluate_conditional(cond)
        assert isinstance(results[(name, cond)], bool), (name, cond)
    hang = [v for (name, _c), v in results.items() if "torch import that hung" in name]
    assert hang == [case == "doctor killed its torch probe"]
    gate = [v for (name, _c), v in results.items() if name.startswith("Probe | Run the gate")]
    assert all(isinstance(v, bool) for v in gate) and len(gate) == 3


def test_the_gate_runs_only_when_the_doctor_says_cuda_works():
    for facts, want in ((DOCTORS["healthy"], True), (DOCTORS["doctor killed its torch probe"], False),
                        (DOCTORS["no doctor result"], False)):
        templar, play = _templar(facts)
        gate = [c for n, c in _conditions(_block(play)["block"]) if n.startswith("Probe | Run the gate")]
        assert all(templar.evaluate_conditional(c) for c in gate) is want


@pytest.mark.parametrize(("value", "valid", "runs"), [
    (True, True, True), (False, True, False), ("false", True, False), ("False", True, False), ("no", True, False),
    ("true", True, True), ("yes", True, True), ("0", True, False), ("maybe", False, None),
])
def test_check_probe_from_yaml_or_the_command_line(value, valid, runs):
    """The input check (a play on the controller, before any box: it reads each box's values as ``__in``) takes
    check_probe as YAML or -e gives it; the boxes' play reads the same values as a boolean."""
    templar, _play_ = _templar({}, check_probe=value)
    loader, inputs = _play("Check the playbook's own inputs")
    assert inputs["hosts"] == "localhost"
    (assert_task,) = [t for t in inputs["tasks"] if "ansible.builtin.assert" in t]
    checks = Templar(loader=loader, variables={"__in": {"check_probe": value}})
    ok = all(checks.evaluate_conditional(c) for c in assert_task["ansible.builtin.assert"]["that"])
    assert ok is valid
    if valid:
        assert templar.evaluate_conditional(trust_as_template("__check_probe | bool")) is runs


def test_the_record_says_which_probes_ran():
    templar, _play_ = _templar({}, __check_facts_run={"changed": False},
                               __check_doctor_run={"failed": True, "timedout": {"frame": "x"}, "msg": "timed out"})
    states = templar.evaluate_conditional(trust_as_template(
        "__check_probe_states == 'find_python=ran,gpu_facts=ran,gpu_doctor=timed out,gate=not reached,"
        "box_probe=not reached'"))
    assert states is True
    templar, _play_ = _templar({}, __check_facts_run={}, __check_doctor_run={},
                               __check_gate={"skipped": True, "changed": False})
    assert templar.evaluate_conditional(trust_as_template("'gate=skipped' in __check_probe_states"))


def test_the_last_play_owns_the_exit_status_and_clears_ansibles_unreachable_code():
    plays = DataLoader().load_from_file(str(ROOT / "playbooks" / "check.yml"))
    last = plays[-1]
    # the controller first: the run_once failure that makes the exit status 2 counts on it, never on a box
    assert last["hosts"].startswith("{{ 'localhost,' ~ ") and "gpufleet_target | default('all')" in last["hosts"]
    assert last["tasks"][0].get("ansible.builtin.meta") == "clear_host_errors"
    assert "rc == 3" in last["tasks"][1]["when"]
