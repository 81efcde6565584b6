"""Partial failure: one host unreachable, one host whose role fails; the run finishes every other
host, the report names the two with their reason, and serial / max_fail_percentage behave as the
docs/variables.md documents (gpufleet_serial, gpufleet_max_fail_percentage)."""

import json

import fleetlib as fl
from fleetlib import HEARTBEAT, TRAINER


def _by_name(fleet_run):
    return {h.name: h for h in fleet_run["hosts"]}


def _has_program(host, name):
    return host.exec("test -f /etc/gpufleet/supervisor/conf.d/%s.conf" % name, check=False).returncode == 0


def test_run_finishes_every_other_host(fleet_run):
    rec, hosts = fleet_run["recap"], _by_name(fleet_run)
    assert fleet_run["rc"] != 0, "a run with a failed and an unreachable host must not exit 0"
    assert rec["gpufleet-ft-pf-01"]["failed"] == 1, rec
    assert rec["gpufleet-ft-pf-gone"]["unreachable"] == 1, rec
    for name in ("gpufleet-ft-pf-02",):
        assert rec[name]["failed"] == 0 and rec[name]["unreachable"] == 0, rec
        host = hosts[name]
        # every provisioning role's result, read back on the host
        status = host.exec("/usr/local/bin/supervisorctl status heartbeat", check=False).stdout
        assert "RUNNING" in status, status
        assert "RUNNING" in host.exec("/usr/local/bin/supervisorctl status trainer", check=False).stdout
        assert json.loads(host.read("/etc/docker/daemon.json")) == {"log-driver": "json-file",
                                                                    "data-root": "/var/lib/docker"}, \
            "the toolkit role must leave a container host's daemon.json alone"
        assert host.exec("readlink /usr/local/cuda").stdout.strip() == "/usr/local/cuda-12.4"
        conf = host.read("/etc/ld.so.conf.d/000-gpufleet-cuda.conf")
        assert "\n/usr/local/cuda-12.4/lib64\n" in conf, conf
        assert "/usr/local/cuda-12.4" in host.exec("ldconfig -p | grep libcudart.so.12").stdout
        for check in fl.extra_role_checks(host):
            assert check()


def test_report_names_the_two_with_their_reason(fleet_run):
    report = fleet_run["runner"].latest_report()
    by_host = {h["host"]: h for h in report["hosts"]}
    assert set(by_host) == {"gpufleet-ft-pf-01", "gpufleet-ft-pf-02", "gpufleet-ft-pf-gone"}
    broken, gone = by_host["gpufleet-ft-pf-01"], by_host["gpufleet-ft-pf-gone"]
    assert broken["status"] == "failed", broken
    # the cause in the line; the play and task it happened in are the finding's evidence (failed_in)
    assert any(r.startswith("playbook failed: ") and "could not be found" in r for r in broken["reasons"]), \
        broken["reasons"]
    (failed,) = [f for f in broken["judgement"] if f["code"] == "playbook_failed"]
    assert "supervisord : program_item | Look up the program's user" in failed["evidence"]["failed_in"], failed
    assert gone["status"] == "unreachable", gone
    assert any("Connection refused" in r for r in gone["reasons"]), gone["reasons"]
    assert by_host["gpufleet-ft-pf-02"]["status"] not in ("failed", "unreachable"), by_host["gpufleet-ft-pf-02"]
    bad = {b["host"]: b["action"] for b in report["bad_hosts"]}
    assert bad["gpufleet-ft-pf-01"] == "return to provider", bad
    assert bad["gpufleet-ft-pf-gone"] == "check access / rerun", bad


def _provision(fleet_run, program, **extra):
    # the new program before 'trainer', whose user lookup fails on pf-01
    programs = [HEARTBEAT, {"name": program, "command": "/bin/sleep infinity"}, TRAINER]
    ev = {"supervisord_programs": programs}
    ev.update(extra)
    # --tags supervisord: the batches are decided by the failure in the play's first role; the later roles of
    # the surviving hosts (converged by fleet_run already) would only add minutes.
    return fleet_run["runner"].playbook("playbooks/provision.yml", fleet_run["inventory"], extra_vars=ev,
                                        args=["--tags", "supervisord"])


def test_max_fail_percentage_zero_stops_later_batches(fleet_run):
    """serial 2 + max_fail_percentage 0: pf-01 fails in the first batch (pf-01, pf-02), so the second
    batch (pf-gone) never starts: Ansible never tries to reach it. Ansible stops the play right after the task that
    failed, so pf-02 keeps what was done before it (the new program, written before the failing lookup)."""
    hosts = _by_name(fleet_run)
    rc, out, rec = _provision(fleet_run, "batchcheck", gpufleet_serial=2, gpufleet_max_fail_percentage=0)
    assert rc != 0
    assert rec["gpufleet-ft-pf-01"]["failed"] == 1, rec
    assert _has_program(hosts["gpufleet-ft-pf-02"], "batchcheck"), "the first batch's healthy host is provisioned"
    assert "gpufleet-ft-pf-gone" not in rec, "the second batch must not start: %s" % rec

def test_failed_canary_ends_the_play(fleet_run):
    """serial [1, "50%"] (canary, then ramp, as the README suggests) with the default 100: the canary
    pf-01 fails, and since every host of that batch failed, Ansible ends the play: no other host is
    provisioned, whatever max_fail_percentage says."""
    hosts = _by_name(fleet_run)
    rc, out, rec = _provision(fleet_run, "canarycheck", gpufleet_serial=[1, "50%"])
    assert rc != 0
    assert rec["gpufleet-ft-pf-01"]["failed"] == 1, rec
    assert not _has_program(hosts["gpufleet-ft-pf-02"], "canarycheck"), "pf-02 was provisioned after the canary failed"
    assert "gpufleet-ft-pf-gone" not in rec, rec
