"""Secret scan: after a full site.yml run with every role password set (tests/fleet/conftest.py
fleet_run: the supervisord inet server password, and jupyter_password once the jupyter role is in
playbooks/provision.yml), the password appears in no log, report, fact cache, process list or
world-readable file on the hosts. The run is made with --diff, as people do."""

import os
import time
from pathlib import Path

import fleetlib as fl


def _files_with(folder, secret, since=None):
    """Files under folder that hold secret; with since (a time.time()), only those whose inode changed
    from then on: the secret is made when the session starts (conftest.SECRET), so an older file cannot
    hold it, and the checkout's .cache (a GB of venvs) is not read through."""
    hits = []
    # os.walk, not Path.rglob: another lane may remove a folder under .cache while this walks it (walk skips it)
    for top, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(top, name)
            try:
                if not path.is_file() or path.is_symlink() or (since is not None and path.stat().st_ctime < since):
                    continue
                if secret.encode() in path.read_bytes():
                    hits.append(str(path))
            except OSError:
                continue
    return hits


def _grep_host(host, secret, paths, timeout=120):
    """Files under ``paths`` on ``host`` that hold ``secret``, by one grep that must also find a canary planted in
    /tmp for the scan: a grep that is missing, fails, or looks in the wrong place finds nothing, and without the
    canary that would read as "no leak". grep's own status is 0 (found) or 2 (found, and some file unreadable)."""
    canary = "ft-canary-%s" % os.urandom(6).hex()
    planted = "/tmp/gpufleet-scan-%s" % canary  # noqa: S108 (a path inside the container host)
    host.exec("printf '%%s\\n' %s > %s" % (canary, planted))
    try:
        res = host.exec("grep -rlF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e %s -e %s -- %s "
                        "2>/dev/null" % (secret, canary, " ".join(paths)), check=False, timeout=timeout)
    finally:
        host.exec("rm -f %s" % planted, check=False)
    found = res.stdout.split()
    assert res.returncode in (0, 2) and planted in found, "the scan of %s on %s did not find its canary %s " \
        "(grep status %d): it would not find the password either" % (" ".join(paths), host.name, planted,
                                                                     res.returncode)
    return [f for f in found if f != planted]


def test_the_scan_finds_a_planted_secret(tmp_path):
    # the controller side's scan on a folder of its own: no containers needed
    secret = "ft-Pw-%s" % os.urandom(6).hex()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "run.log").write_bytes(b"... password=" + secret.encode() + b" ...\n")
    (tmp_path / "clean.txt").write_text("nothing here\n")
    (tmp_path / "link").symlink_to(tmp_path / "sub" / "run.log")
    assert _files_with(tmp_path, secret) == [str(tmp_path / "sub" / "run.log")]
    assert _files_with(tmp_path, secret, since=time.time() - 60) == [str(tmp_path / "sub" / "run.log")]
    assert _files_with(tmp_path, secret, since=time.time() + 3600) == []  # made before the session: not read
    assert _files_with(tmp_path, "ft-Pw-" + "0" * 12) == []


def test_the_run_used_the_secret(fleet_run):
    # the scan below is only worth something if the secret really went to the hosts
    assert fleet_run["group_vars"]["supervisord_inet_http_server_password"] == fleet_run["secret"]
    host = fleet_run["hosts"][1]
    conf = host.exec("grep -c '^password *= *{SHA}' /etc/gpufleet/supervisor/supervisord.conf", check=False)
    assert conf.stdout.strip() == "1", "the inet server password is not configured (hashed) on %s" % host.name


def test_secret_not_in_controller_outputs(fleet_run):
    secret, runner = fleet_run["secret"], fleet_run["runner"]
    assert secret not in fleet_run["out"], "the password is in ansible-playbook's output"
    # run outputs, ANSIBLE_LOG_PATH, run-status file, fact cache, reports: all under the runner's folder
    assert _files_with(runner.workdir, secret) == []
    assert _files_with(fl.ROOT / ".cache", secret, since=fleet_run["secret_made"] - 1) == []


def test_secret_not_in_host_processes_logs_or_readable_files(fleet_run):
    secret = fleet_run["secret"]
    # the watcher saw the run's module processes at all (Ansible's python on the hosts), so an empty list of leaks
    # means something
    assert any("python" in p for p in fleet_run["processes"]), sorted(fleet_run["processes"])[:20]
    leaked = [p for p in fleet_run["processes"] if secret in p]
    assert leaked == [], "the password was on a command line during the run: %s" % leaked
    for host in fleet_run["hosts"][1:]:
        logs = _grep_host(host, secret, ["/var/log", "/tmp", "/root/.ansible"])  # noqa: S108 (on the host)
        assert logs == [], "the password is in a log on %s: %s" % (host.name, logs)
        # one pass over the whole file system: no file holds the plain password, world-readable or not
        anywhere = _grep_host(host, secret, ["/"], timeout=600)
        assert anywhere == [], "the plain password is in files on %s: %s" % (host.name, anywhere)
