"""Secret scan: after a full site.yml run with every role password set (tests/fleet/conftest.py
fleet_run: the supervisord inet server password, and jupyter_password once the jupyter role is in
playbooks/provision.yml), the password appears in no log, report, fact cache, process list or
world-readable file on the hosts. The run is made with --diff, as people do."""

import os
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
    leaked = [p for p in fleet_run["processes"] if secret in p]
    assert leaked == [], "the password was on a command line during the run: %s" % leaked
    for host in fleet_run["hosts"][1:]:
        logs = host.exec("grep -rlF -- %s /var/log /tmp /root/.ansible 2>/dev/null || true" % secret).stdout.split()
        assert logs == [], "the password is in a log on %s: %s" % (host.name, logs)
        # one pass over the whole file system: no file holds the plain password, world-readable or not
        anywhere = host.exec("grep -rlF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -- %s / "
                             "2>/dev/null || true" % secret, timeout=600).stdout.split()
        assert anywhere == [], "the plain password is in files on %s: %s" % (host.name, anywhere)
