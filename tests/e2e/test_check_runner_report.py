"""The renter's pre-check (playbooks/check.yml) on the demo fleet through ansible-runner, as AWX runs a job, and the
report built from what the job left behind (scripts/fleet-report --runner-artifacts): it must say what report.yml
said at the end of the same run, host by host, the pre-check's record and the step a host failed in included (issue
"No failure reads as good"; tests/e2e/test_runner.py does the same for facts.yml).

One job, kept cheap on 2 cores: gpufleet_target limits it to four hosts that cover every kind of result a check
gives: demo host 04 (keep: its torch judged in /venv/main, no probe by its inventory), demo host 05 (return to
provider: a lost GPU and ECC errors), gpufleet-brokenpy (demo host 02's container with a Python that is not there:
step 1 fails, rescued, its record kept: failed, with a pre-check record) and gpufleet-gone (its SSH port refuses:
unreachable, no record). gpufleet_target, not runner's limit=: a limit would leave out the report play on the
controller (docs/check.md).
"""

import json
import os
import socket
import subprocess
import sys

import ansible_runner
import demolib
import pytest
import yaml
from demolib import ROOT

BIN = ROOT / ".venv" / "bin"
PLAYBOOK = "playbooks/check.yml"
TIMEOUT = 900
CHECK_PLAY = "Check each box (connect, environment, performance probe, storage and network)"
CONNECT = "Connect | Log in and run a trivial module"
BROKEN, GONE = "gpufleet-brokenpy", "gpufleet-gone"
# A deadline with room (the suite shares 2 cores with others), as tests/e2e/test_check.py gives it.
DEADLINE_S = 180


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job_env(data_dir):
    """As tests/e2e/test_runner.py gives a job (see there why): the project's ansible.cfg, gpufleet_status loaded
    beside runner's own callback, this job's own status file, the venv's ansible-playbook on PATH."""
    return {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_CALLBACK_PLUGINS": str(ROOT / "callback_plugins"),
            "GPUFLEET_STATUS_FILE": str(data_dir / "run-status.json"),
            "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}


def _host(demo_hosts, suffix):
    return next(h for name, h in demo_hosts.items() if name.endswith("-" + suffix))


@pytest.fixture(scope="module")
def job(demo_hosts, tmp_path_factory):
    """check.yml run once through ansible_runner.run() over the four hosts; the inventory of those hosts as AWX holds
    it (ansible-inventory --list); the fleet.json report.yml wrote in the run and the one built from the artifacts."""
    base = tmp_path_factory.mktemp("check-runner")
    keep, give_back, box = (_host(demo_hosts, s) for s in ("04", "05", "02"))
    ssh_args = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5"
    extra = base / "extra.yml"
    extra.write_text(yaml.safe_dump({"checked_here": {"hosts": {
        GONE: {"ansible_host": "127.0.0.1", "ansible_port": _closed_port(), "ansible_user": "root",
               "ansible_ssh_common_args": ssh_args},
        BROKEN: {"ansible_host": "127.0.0.1", "ansible_port": box.port, "ansible_user": "root",
                 "ansible_ssh_private_key_file": str(demolib.KEY), "ansible_ssh_common_args": ssh_args,
                 "ansible_python_interpreter": "/usr/bin/python3-not-here"},
    }}}))
    sources = [str(demolib.INVENTORY.parent), str(extra)]
    target = [keep.name, give_back.name, BROKEN, GONE]

    # The inventory's side of the targeted hosts, as AWX's inventory script gives it: report.yml's report covers
    # gpufleet_target's hosts, so the artifacts' report is given those hosts.
    listed = subprocess.run([str(BIN / "ansible-inventory"), *[a for s in sources for a in ("-i", s)], "--list"],
                            capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")))
    assert listed.returncode == 0, listed.stderr
    hostvars = json.loads(listed.stdout)["_meta"]["hostvars"]
    inventory_json = base / "inventory.json"
    inventory_json.write_text(json.dumps({"_meta": {"hostvars": {h: hostvars.get(h, {}) for h in target}},
                                          "ungrouped": {"hosts": target}}))

    data_dir = base / "job"
    data_dir.mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(data_dir), project_dir=str(ROOT), playbook=PLAYBOOK, inventory=sources, ident="check",
        envvars=_job_env(data_dir), quiet=True, timeout=TIMEOUT,
        extravars={"gpufleet_report_dir": str(data_dir / "reports"), "gpufleet_history_enabled": False,
                   "gpufleet_target": ",".join(target), "check_deadline_s": DEADLINE_S})

    out = base / "report-from-artifacts"
    built = subprocess.run([sys.executable, str(ROOT / "scripts" / "fleet-report"), "--out", str(out),
                            "--inventory-json", str(inventory_json), "--runner-artifacts", str(data_dir)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    reference = data_dir / "reports" / "latest"
    assert (reference / "fleet.json").exists(), "report.yml wrote no report; see %s/artifacts/check/stdout" % data_dir
    return {"runner": runner, "dir": data_dir, "target": target, "keep": keep.name, "give_back": give_back.name,
            "warnings": built.stderr, "reference": reference, "built": out,
            "fleets": [json.loads((folder / "fleet.json").read_text()) for folder in (out, reference)]}


def _results(folder):
    return {p.stem: json.loads(p.read_text()) for p in (folder / "hosts").glob("*.json")}


def test_the_check_job_fails_on_the_controller_not_on_a_box(job):
    """ansible-playbook's 2 for a box to give back, and the failure that makes it the controller's: the job's recap
    (AWX's host summaries) marks no box failed, the box to keep least of all."""
    runner = job["runner"]
    assert (runner.status, runner.rc) == ("failed", 2), "%s rc=%s; see %s/artifacts/check/stdout" % (
        runner.status, runner.rc, job["dir"])
    stats = runner.stats
    assert {h for h, n in stats["failures"].items() if n} == {"localhost"}, stats
    assert {h for h, n in stats["dark"].items() if n} == {GONE}, stats
    assert stats["rescued"].get(BROKEN), stats  # its step 1 failed inside the check's block
    assert set(stats["processed"]) == set(job["target"]) | {"localhost"}, stats


def test_the_artifacts_give_report_ymls_results(job):
    """Host by host, the result the artifacts give is the one report.yml wrote (but the time: report.yml writes the
    report play's, the artifacts the end of the job)."""
    assert not job["warnings"], job["warnings"]
    ours, theirs = _results(job["built"]), _results(job["reference"])
    assert sorted(ours) == sorted(theirs) == sorted(job["target"])
    for host in job["target"]:
        mine = {k: v for k, v in ours[host].items() if k not in ("collected_at", "missing")}
        ref = {k: v for k, v in theirs[host].items() if k != "collected_at"}
        assert mine == ref, host
    # Not a degenerate run: each host gave the result it is here for.
    keep, give_back, broken, gone = (ours[h] for h in (job["keep"], job["give_back"], BROKEN, GONE))
    assert keep["check"]["steps"] and keep["failed_in"] is None and keep["failed"] is False, keep
    assert give_back["check"]["steps"] and give_back["doctor"] and give_back["failed_in"] is None, give_back
    assert broken["failed"] is True and broken["check"]["failed_step"] == 1, broken
    assert broken["failed_in"] == gone["failed_in"] == CHECK_PLAY + " / " + CONNECT, (broken, gone)
    assert (gone["reachable"], gone["check"]) == (False, None) and "Connection refused" in gone["reason"], gone
    assert not gone["reason"].startswith("Task failed"), gone["reason"]  # the cause, as gpufleet_status keeps it


def _view(fleet):
    """What a renter reads of each host (status, verdict, action, reasons, checklist statuses, the judgement's codes,
    the pre-check's record, where it failed) and the fleet's totals and what to do."""
    hosts = {}
    for h in fleet["hosts"]:
        hosts[h["host"]] = {
            "status": h["status"], "verdict": h["verdict"], "action": h["action"], "reasons": h["reasons"],
            "checklist": {k: v["status"] for k, v in (h.get("checklist") or {}).items()},
            "judgement": [(f["code"], (f.get("evidence") or {}).get("failed_in")) for f in h.get("judgement") or ()],
            "check": h.get("check")}
    return {"hosts": hosts, "totals": fleet["totals"], "what_to_do": fleet["what_to_do"]}


def _verdict_lines(folder):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "check-verdicts"), str(folder / "fleet.json")],
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout.splitlines()


def test_the_artifacts_give_report_ymls_report(job):
    """The same report, so the same lines and exit status for the renter, whether AWX's artifacts or the playbook
    built it."""
    built, reference = job["fleets"]
    assert _view(built) == _view(reference)
    assert _verdict_lines(job["built"]) == _verdict_lines(job["reference"])
    assert _verdict_lines(job["built"])[0] == 3  # check-verdicts: a box to give back
    by_host = {h["host"]: h for h in built["hosts"]}
    assert by_host[job["keep"]]["verdict"] == "keep", by_host[job["keep"]]["verdict"]
    assert by_host[job["give_back"]]["action"] == "return to provider", by_host[job["give_back"]]["verdict"]
    assert by_host[BROKEN]["check"] is not None and by_host[GONE]["status"] == "unreachable"
    (failed,) = [f for f in by_host[BROKEN]["judgement"] if f["code"] == "playbook_failed"]
    assert failed["evidence"]["failed_in"] == CHECK_PLAY + " / " + CONNECT
