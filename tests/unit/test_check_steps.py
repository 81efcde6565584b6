"""The pre-check's steps are one list, judgement.CHECK_STEPS (issue 38): playbooks/check.yml records each step's end
under that name, in that order, and numbers the step it is in (``__check_step``: a failed step is recorded by its
number) to match; the report's findings name a failed step from the same list. A new step is check.yml's tasks and
one entry in the list: this test fails when the two disagree."""

import re
from pathlib import Path

import yaml
from gpufleet.controller.judgement import findings
from gpufleet.controller.judgement import judge as judgement

from tests.unit.test_exit_contract import _tasks  # every task of a play: blocks, rescues and always included

ROOT = Path(__file__).resolve().parents[2]


def recorded_steps():
    """(name, the __check_step set after it) for each task of check.yml that notes a step's time."""
    out = []
    for play in yaml.safe_load((ROOT / "playbooks" / "check.yml").read_text()):
        for task in _tasks(play.get("tasks")):
            facts = task.get("ansible.builtin.set_fact") or {}
            times = str(facts.get("__check_times", ""))
            for name in re.findall(r"combine\(\{'(\w+)':", times):
                out.append((name, facts.get("__check_step")))
    return out


def test_check_yml_records_the_steps_of_the_list_in_order():
    steps = recorded_steps()
    assert [name for name, _next in steps] == list(judgement.CHECK_STEPS), steps
    # after step k's time is noted, check.yml is in step k + 1 (the last one sets none)
    assert [nxt for _name, nxt in steps] == list(range(2, len(steps) + 1)) + [None], steps


def test_the_report_names_a_failed_step_from_the_list():
    assert sorted(findings.CHECK_STEPS.items()) == list(enumerate(judgement.CHECK_STEPS, 1))
    lines, _bad = judgement.check_lines({"hosts": [{"host": "h", "verdict": "keep", "action": None,
                                                    "check": {"steps": {"connect": 1.0, "environment": 3.5,
                                                                        "probe": 9.0}}}]})
    assert "[connect 1.0 s, environment 2.5 s, probe 5.5 s]" in lines[0], lines
