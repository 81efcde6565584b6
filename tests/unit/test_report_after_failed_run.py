"""A report after every run (callback_plugins/gpufleet_status.py), with the real ansible-playbook.

Two inventory hosts on closed 127.0.0.1 ports, whose fact cache still holds an earlier pre-check's GPU facts
(a healthy H100 box from tests/fixtures/report). site.yml: both hosts are unreachable at the first play, so
Ansible ends the playbook before its report play; the callback writes the report anyway, naming both with
SSH's reason. Then playbooks/report.yml alone: the hosts stay unreachable, marked with the run they dropped
out of, and the pre-check's facts do not make them "keep".
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HOSTS = ("rented-a", "rented-b")
MARKER = "gpufleet-test-extra-var-s3cret"  # an extra var that must not reach the run's output
FALLBACK_LINE = "gpufleet_status: the run ended before its report play"

SEED = """\
- name: An earlier pre-check's facts, into the fact cache (set_fact connects to no host)
  hosts: all
  gather_facts: false
  vars_files: [precheck.json]
  tasks:
    - name: Cache the GPU facts
      ansible.builtin.set_fact:
        gpu: "{{ precheck_gpu }}"
        cacheable: true
"""


def _closed_ports(count):
    """Ports nothing listens on: bound by the kernel's choice, then closed again."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _playbook(work, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "GPUFLEET_"))}
    env.update(PATH="%s:%s" % (BIN, env.get("PATH", "")), ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(work / "facts"), GPUFLEET_STATUS_FILE=str(work / "status.json"),
               ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), "-i", str(work / "hosts.yml"), *args,
            "-e", "gpufleet_report_dir=%s" % (work / "reports"), "-e", "gpufleet_history_enabled=false",
            "-e", "gpufleet_test_token=%s" % MARKER]
    return subprocess.run(argv, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120)


def _report(work):
    fleet = json.loads((work / "reports" / "latest" / "fleet.json").read_text())
    return {h["host"]: h for h in fleet["hosts"]}


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("failed-run")
    ports = _closed_ports(len(HOSTS))
    (work / "hosts.yml").write_text(json.dumps({"all": {"hosts": {
        h: {"ansible_host": "127.0.0.1", "ansible_port": p, "ansible_user": "renter"} for h, p in zip(HOSTS, ports)}}}))
    gpu = json.loads((ROOT / "tests" / "fixtures" / "report" / "gpu-h100-01.json").read_text())["gpu"]
    (work / "precheck.json").write_text(json.dumps({"precheck_gpu": gpu}))
    (work / "seed.yml").write_text(SEED)
    seed = _playbook(work, str(work / "seed.yml"))
    assert seed.returncode == 0, seed.stdout + seed.stderr
    site = _playbook(work, str(ROOT / "site.yml"))
    return work, ports, site


def test_site_writes_the_report_when_every_host_is_unreachable(failed_run):
    work, ports, site = failed_run
    assert site.returncode != 0  # Ansible's own status (4: unreachable hosts), unchanged
    assert (work / "reports" / "latest" / "fleet.json").exists(), site.stdout + site.stderr
    hosts = _report(work)
    assert set(hosts) == set(HOSTS)
    for host, port in zip(HOSTS, ports):
        h = hosts[host]
        assert h["status"] == "unreachable", h["verdict"]
        assert h["verdict"].startswith("check access / rerun: ")
        assert "port %d: Connection refused" % port in h["verdict"]
        (finding,) = [f for f in h["judgement"] if f["code"] == "unreachable"]
        assert finding["evidence"]["failed_in"] == "Gather GPU facts / Gathering Facts"
        assert "in the run started" not in finding["reason"]  # this run's own report
    # one line says who wrote the report; the command line (extra vars) is not shown
    # on stderr: stdout stays the stdout callback's own (molecule's bad-input runs parse a JSON callback's output)
    assert site.stderr.count(FALLBACK_LINE) == 1 and FALLBACK_LINE not in site.stdout, site.stderr
    assert "2 host(s) failed or unreachable" in site.stderr
    assert MARKER not in site.stdout + site.stderr
    # the status file is still the failed run's (the report's own run kept it)
    status = json.loads((work / "status.json").read_text())
    assert set(status["hosts"]) == set(HOSTS) and "hosts_from_run" not in status


def test_report_alone_keeps_the_failed_runs_hosts_failed(failed_run):
    work, ports, _site = failed_run
    started = json.loads((work / "status.json").read_text())["started_at"]
    alone = _playbook(work, str(ROOT / "playbooks" / "report.yml"))
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert FALLBACK_LINE not in alone.stdout + alone.stderr  # its report play ran
    hosts = _report(work)
    assert set(hosts) == set(HOSTS)
    for host, port in zip(HOSTS, ports):
        h = hosts[host]
        # the fact cache still has the pre-check's healthy H100 facts: they must not make the host "keep"
        assert h["status"] == "unreachable", h["verdict"]
        (finding,) = [f for f in h["judgement"] if f["code"] == "unreachable"]
        assert finding["reason"] == ("Failed to connect to the host via ssh: ssh: connect to host "
                                     "127.0.0.1 port %d: Connection refused (in the run started %s)" % (port, started))
    status = json.loads((work / "status.json").read_text())
    assert status["hosts_from_run"] == started
    assert all(e["run_started_at"] == started for e in status["hosts"].values())
    # a second report alone says the same, marked once
    again = _playbook(work, str(ROOT / "playbooks" / "report.yml"))
    assert again.returncode == 0, again.stdout + again.stderr
    status = json.loads((work / "status.json").read_text())
    assert all(e["reason"].count("in the run started") == 1 for e in status["hosts"].values())
    assert {h["status"] for h in _report(work).values()} == {"unreachable"}
