"""The pre-check's exit status, end to end (issue 37): judgement.check_exit_status decides, scripts/check-verdicts
turns it into 3 (or 2 for a report it cannot read), and playbooks/check.yml's last play, "End with an exit status
scripts can use", fails the run on 3 only, so ansible-playbook exits 2 for a fleet with a box to give back, restart,
reboot or check again, and 0 otherwise (docs/check.md).

The rule is read from the files as they are: the last play's condition is evaluated by Ansible's template engine for
every status check-verdicts can give, and the play itself runs under ansible-playbook after a check play over two
boxes, one of them unreachable: the run exits 0 or 2, never Ansible's 4, and its recap marks only the controller
failed, never a box. Flipping the rule in either file fails a test here (make mutation's exit_rule target does
exactly that, docs/testing.md).
"""

import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from gpufleet.controller.judgement import judge as j

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK_YML = ROOT / "playbooks" / "check.yml"
LAST_PLAY = "- name: End with an exit status scripts can use\n"
LINES = ["h0  keep", "h1  check access / rerun: ssh: timed out",
         "2 host(s): 1 keep, 0 fix here, 1 to give back, restart, reboot or check again"]


def _plays():
    return DataLoader().load_from_file(str(CHECK_YML), trusted_as_template=True)


def _tasks(items):
    for task in items or ():
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _fail_task():
    last = _plays()[-1]
    assert last["name"] == LAST_PLAY[8:].strip(), "check.yml's last play is no longer the exit status play"
    (fail,) = [t for t in last["tasks"] if "ansible.builtin.fail" in t]
    return last, fail


def _templar(rc):
    variables = {"hostvars": {"localhost": {"__check_verdicts": {"rc": rc, "stdout_lines": LINES}}},
                 "__check_verdicts": {"rc": rc, "stdout_lines": LINES}}
    return Templar(loader=DataLoader(), variables=variables)


@pytest.mark.parametrize(("rc", "fails"), [(0, False), (3, True)])
def test_the_last_play_fails_the_run_exactly_when_check_verdicts_says_3(rc, fails):
    last, fail = _fail_task()
    assert last["tasks"][0].get("ansible.builtin.meta") == "clear_host_errors"  # Ansible's own 4 never leaks
    assert fail.get("delegate_to") == "localhost" and fail.get("run_once") is True
    # run_once runs, and counts a failure, on the play's first host: the controller, never a box
    assert last["hosts"].startswith("{{ 'localhost,' ~ ") and last.get("order", "inventory") == "inventory"
    assert _templar(rc).evaluate_conditional(fail["when"]) is fails
    if fails:  # the run's last word is check-verdicts' count line
        assert _templar(rc).template(fail["ansible.builtin.fail"]["msg"]) == LINES[-1]


@pytest.mark.parametrize(("rc", "report_play_fails"), [(0, False), (3, False), (2, True), (1, True)])
def test_check_verdicts_codes_other_than_0_and_3_fail_the_report_play(rc, report_play_fails):
    # 2 (the report cannot be read) and a crash must not pass as a verdict; 3 is a verdict, judged at the end
    (task,) = [t for play in _plays() for t in _tasks(play.get("tasks")) if t.get("register") == "__check_verdicts"]
    assert _templar(rc).evaluate_conditional(task["failed_when"]) is report_play_fails
    _last, fail = _fail_task()
    if rc == 2:
        assert _templar(rc).evaluate_conditional(fail["when"]) is False


def _summary(tmp_path, *actions):
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"hosts": [{"host": "h%d" % i, "action": a, "status": "failed" if a else "ok",
                                           "verdict": a or "keep"} for i, a in enumerate(actions)]}))
    return str(path)


def test_check_verdicts_maps_the_judgement_to_0_or_3_and_an_unreadable_report_to_2(tmp_path, load_script, capsys):
    script = load_script("check-verdicts")
    assert script.main([_summary(tmp_path, None, j.ACTION_FIX)]) == 0
    for action in (j.ACTION_CHECK, j.ACTION_REBOOT, j.ACTION_RESTART, j.ACTION_RETURN):
        assert script.main([_summary(tmp_path, None, action)]) == 3, action
    assert script.main([str(tmp_path / "missing.json")]) == 2
    (tmp_path / "bad.json").write_text("{not json")
    assert script.main([str(tmp_path / "bad.json")]) == 2
    assert script.main([]) == 2
    assert "cannot read" in capsys.readouterr().err


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recap(out):
    """{host: {"ok": n, "unreachable": n, "failed": n, ...}} from ansible-playbook's PLAY RECAP."""
    return {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
            for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", out.split("PLAY RECAP", 1)[-1], re.M)}


@pytest.mark.parametrize(("rc", "exit_status"), [(0, 0), (3, 2)])
def test_ansible_playbook_exits_by_the_last_play(tmp_path, rc, exit_status):
    """check.yml's last play as it is in the file, run by ansible-playbook after a check play over two boxes, one
    reached (box-keep) and one whose SSH port refuses (box-gone, Ansible's own exit status 4), and a play that
    leaves check-verdicts' result on the controller: the run exits 0 or 2 as check-verdicts said, and the recap
    marks only the controller failed, never a box (a box to keep read failed=1 there, issue "No failure reads as
    good")."""
    text = CHECK_YML.read_text()
    assert text.count(LAST_PLAY) == 1
    setup = ("- name: The check play (one box reached, one unreachable)\n  hosts: all\n  gather_facts: false\n"
             "  tasks:\n    - name: Log in\n      ansible.builtin.ping:\n\n"
             "- name: What the report play leaves behind\n  hosts: localhost\n  gather_facts: false\n  tasks:\n"
             "    - name: Set check-verdicts' result\n      ansible.builtin.set_fact:\n"
             "        __check_verdicts: %s\n\n" % json.dumps({"rc": rc, "stdout_lines": LINES}))
    play = tmp_path / "exit.yml"
    play.write_text(setup + text[text.index(LAST_PLAY):])
    (tmp_path / "hosts.ini").write_text(
        "[fleet]\nbox-keep ansible_connection=local ansible_python_interpreter=%s\n"
        "box-gone ansible_connection=ssh ansible_host=127.0.0.1 ansible_port=%d\n" % (sys.executable, _closed_port()))
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_HOME=str(tmp_path / "home"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_HOST_KEY_CHECKING="0")
    proc = subprocess.run([sys.executable, "-m", "ansible", "playbook", "-i", str(tmp_path / "hosts.ini"), str(play),
                           "-e", "ansible_python_interpreter=%s" % sys.executable],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == exit_status, out  # never Ansible's 4 for box-gone: the judgement counts it
    assert (LINES[-1] in proc.stdout) is (exit_status == 2)
    recap = _recap(proc.stdout)
    assert recap["box-gone"]["unreachable"] == 1, out  # the check play did meet an unreachable box
    assert {host: counts["failed"] for host, counts in recap.items()} == \
        {"box-keep": 0, "box-gone": 0, "localhost": int(exit_status == 2)}, out
