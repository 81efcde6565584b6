"""A failure stays until a run clears it (callback_plugins/gpufleet_status.py), with the real ansible-playbook.

Two inventory hosts on the local connection whose fact cache holds a healthy H100 box's GPU facts (tests/fixtures/
report), and two small playbooks that end with the report play (playbooks/report.yml), as site.yml and check.yml
do: ``stage.yml`` fails on the hosts named in ``fail_hosts``; ``other.yml`` is the same play under another name.

- stage.yml fails on rented-a: its report says "fix here: playbook failed" for it, keep for rented-b;
- stage.yml limited to rented-b, then report.yml alone (a run limited to fleet hosts runs no report play): rented-a
  is still failed, marked with the run it failed in;
- other.yml on rented-a succeeds, then report.yml: still failed (another playbook clears nothing of stage.yml's);
- stage.yml on rented-a succeeds, then report.yml: keep again, and the status file holds no host.

tests/e2e/test_demo_failure_stays.py does the same with site.yml on demo hosts.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_report_after_failed_run import SEED  # a healthy box's GPU facts into the fact cache

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HOSTS = ("rented-a", "rented-b")
FAILED_TASK = "Fail where asked"


STAGE = """\
- name: A stage of the fleet's work
  hosts: all
  gather_facts: false
  tasks:
    - name: %s
      ansible.builtin.fail:
        msg: the stage failed on {{ inventory_hostname }}
      when: inventory_hostname in (fail_hosts | default([]))

- name: Report
  ansible.builtin.import_playbook: %s/playbooks/report.yml
""" % (FAILED_TASK, ROOT)


def _playbook(work, playbook, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "GPUFLEET_"))}
    env.update(PATH="%s:%s" % (BIN, env.get("PATH", "")), ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(work / "facts"), GPUFLEET_STATUS_FILE=str(work / "status.json"),
               ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), "-i", str(work / "hosts.yml"), str(playbook), *args,
            "-e", "gpufleet_report_dir=%s" % (work / "reports"), "-e", "gpufleet_history_enabled=false"]
    return subprocess.run(argv, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=180)


def _report(work):
    fleet = json.loads((work / "reports" / "latest" / "fleet.json").read_text())
    return {h["host"]: h for h in fleet["hosts"]}


def _failed_finding(host):
    return [f for f in host["judgement"] if f["code"] == "playbook_failed"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each step's (process, report by host), in order."""
    work = tmp_path_factory.mktemp("failure-stays")
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (work / "hosts.yml").write_text(json.dumps({"all": {"hosts": {h: local for h in HOSTS}}}))
    gpu = json.loads((ROOT / "tests" / "fixtures" / "report" / "gpu-h100-01.json").read_text())["gpu"]
    (work / "precheck.json").write_text(json.dumps({"precheck_gpu": gpu}))
    (work / "seed.yml").write_text(SEED)
    (work / "stage.yml").write_text(STAGE)
    (work / "other.yml").write_text(STAGE)
    seed = _playbook(work, work / "seed.yml")
    assert seed.returncode == 0, seed.stdout + seed.stderr
    steps = {}
    report_alone = str(ROOT / "playbooks" / "report.yml")
    for name, playbook, args in (
            ("fails", work / "stage.yml", ["-e", '{"fail_hosts": ["rented-a"]}']),
            # A run limited to fleet hosts leaves out localhost, so its report play does not run: report.yml after it.
            ("others", work / "stage.yml", ["--limit", "rented-b"]),
            ("others_report", report_alone, []),
            ("other_playbook", work / "other.yml", ["--limit", "rented-a"]),
            ("other_playbook_report", report_alone, []),
            ("cleared", work / "stage.yml", ["--limit", "rented-a"]),
            ("cleared_report", report_alone, [])):
        proc = _playbook(work, playbook, *args)
        assert proc.returncode == (2 if name == "fails" else 0), proc.stdout[-3000:] + proc.stderr[-2000:]
        steps[name] = (proc, _report(work), json.loads((work / "status.json").read_text()))
    return steps


def _is_failed_here(host, marked):
    assert host["status"] == "failed" and host["action"] == "fix here", host["verdict"]
    (finding,) = _failed_finding(host)
    assert "the stage failed on rented-a" in finding["reason"]
    assert finding["evidence"]["failed_in"] == "A stage of the fleet's work / %s" % FAILED_TASK
    assert ("(in the run started " in finding["reason"]) is marked, finding["reason"]


def test_the_failed_run_reports_its_failure(runs):
    _proc, hosts, _status = runs["fails"]
    _is_failed_here(hosts["rented-a"], marked=False)
    assert hosts["rented-b"]["verdict"] == "keep", hosts["rented-b"]["verdict"]


@pytest.mark.parametrize("step", ["others_report", "other_playbook_report"])
def test_the_failure_stays_in_later_reports_until_the_same_playbook_succeeds_on_the_host(runs, step):
    _proc, hosts, status = runs[step]
    _is_failed_here(hosts["rented-a"], marked=True)
    assert hosts["rented-b"]["verdict"] == "keep"
    started = runs["fails"][2]["started_at"]
    assert status["hosts"]["rented-a"]["run_started_at"] == started
    assert status["hosts"]["rented-a"]["reason"].count("(in the run started") == 1


def test_a_run_of_the_same_playbook_that_succeeds_on_the_host_clears_it(runs):
    _proc, hosts, status = runs["cleared_report"]
    assert runs["other_playbook"][2]["hosts"]["rented-a"]["playbook"] == "stage.yml"
    assert runs["cleared"][2]["hosts"] == {}
    assert {h: hosts[h]["verdict"] for h in HOSTS} == {h: "keep" for h in HOSTS}
    assert status["hosts"] == {}


def test_check_yml_refuses_bad_input_on_the_controller_and_marks_no_box(tmp_path):
    """check.yml with check_deadline_s=abc: exit status 2, the message names the value and ends "Nothing was
    changed.", the PLAY RECAP fails localhost only, no box is in the run-status file and no report is written (nothing
    was checked); an earlier run's failure stays as it was."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {h: local for h in HOSTS}}}))
    earlier = {"started_at": "2026-12-01T00:00:00+00:00", "hosts": {"rented-b": {
        "state": "failed", "play": "P", "task": "T", "reason": "earlier", "playbook": "check.yml"}}}
    (tmp_path / "status.json").write_text(json.dumps(earlier))
    proc = _playbook(tmp_path, ROOT / "playbooks" / "check.yml", "-e", "check_deadline_s=abc")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "check_deadline_s must be a whole number of seconds, at least 10 (got abc)" in " ".join(out.split())
    assert "Nothing was changed." in out
    recap = {line.split()[0]: line for line in out.split("PLAY RECAP")[-1].splitlines() if ": ok=" in line}
    assert set(recap) == {"localhost"} and "failed=1" in recap["localhost"], recap
    status = json.loads((tmp_path / "status.json").read_text())
    assert set(status["hosts"]) == {"rented-b"} and status["hosts"]["rented-b"]["reason"].startswith("earlier (in ")
    assert not (tmp_path / "reports").exists()


def test_a_failed_fact_gathering_is_recorded_with_its_cause():
    """ansible-core 2.20+ on a host with Python 3.8 (Ubuntu 20.04) fails fact gathering with "The following modules
    failed to execute: ansible.legacy.setup."; the record (and so the report's line) carries the module's own cause."""
    import importlib.util
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("gpufleet_status_cb",
                                                  ROOT / "callback_plugins" / "gpufleet_status.py")
    cb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cb)
    cause = "Ansible requires Python 3.9 or newer on the target. Current version: 3.8.10"
    result = SimpleNamespace(_result={"msg": "The following modules failed to execute: ansible.legacy.setup.",
                                      "failed_modules": {"ansible.legacy.setup": {"failed": True, "msg": cause}}})
    assert cb._message(result) == "The following modules failed to execute: ansible.legacy.setup. " + cause
    assert cb._message(SimpleNamespace(_result={"msg": "plain"})) == "plain"
