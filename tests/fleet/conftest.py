"""Fixtures of the reliability suites: real SSH container hosts, isolated ansible runs.

These tests start containers and take minutes, so `pytest tests` (the fast inner loop) leaves them out
(deselected, and says so); they run when tests/fleet is named on the command line (`make fleet-tests`) or
with GPUFLEET_FLEET_TESTS=1. Asked for on a machine without Docker or the test image, the run fails
naming what is missing: it never reports the suite passed with its tests skipped.

Steps left to another suite: the re-run after the interrupted ones is playbooks/provision.yml, not all of site.yml;
a second run changing nothing is each role's molecule scenario's and, for all of site.yml (facts, doctor, gate,
report stages too), tests/e2e's.
"""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import fleetlib
import pytest

HERE = Path(__file__).resolve().parent



def _docker_ready():
    if not shutil.which("docker"):
        return "docker is not installed"
    image = os.environ.get("GPUFLEET_FT_IMAGE", "gpufleet/debian:12")
    res = subprocess.run(["docker", "image", "inspect", image], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        said = (res.stderr.strip().splitlines() or [""])[-1]
        return "%s is missing (scripts/test-images 12)%s" % (image, ": docker says %r" % said if said else "")
    return None


def pytest_collection_modifyitems(config, items):
    if not fleetlib.suite_runs(config, items, HERE, "GPUFLEET_FLEET_TESTS",
                               "fleet tests start containers: run them with make fleet-tests"):
        return
    why = _docker_ready()
    if why:
        raise pytest.UsageError("the fleet tests cannot run: %s. make fleet-tests builds the image and starts "
                                "Docker (scripts/test-images, scripts/lib.sh ensure_docker)" % why)


@pytest.fixture(scope="session")
def ft_workdir():
    """One folder per session for keys, inventories, run outputs, logs, fact caches and reports.
    Not under pytest's basetemp: other pytest sessions in the same checkout prune those while we run.
    Kept after the session for post-mortems (a few MB); GPUFLEET_FT_WORKDIR names another parent."""
    parent = os.environ.get("GPUFLEET_FT_WORKDIR") or None
    path = Path(tempfile.mkdtemp(prefix="gpufleet-ft-", dir=parent))
    print("\nfleet tests work in %s" % path)
    return path


SECRET = "ft-Pw-%s" % os.urandom(6).hex()
SECRET_MADE = time.time()


TRAINER = fleetlib.TRAINER
HEARTBEAT = fleetlib.HEARTBEAT


@pytest.fixture(scope="session")
def fleet_run(ft_workdir, request):
    """A fleet with one unreachable and one broken host, after one site.yml run with secrets set.

    Hosts (inventory order): pf-01 lacks the user 'trainer' that a supervisord program runs as
    (the provider image of the other hosts creates it), so the supervisord role fails there after
    its input checks, once supervisor is installed and configured, at 'program_item | Look up the
    program's user'; pf-02 is healthy; pf-gone points at a closed port. The run uses the
    defaults (serial 100%, max_fail_percentage 100). Every password a role takes is set to
    SECRET (the secret scan). The toolkit role skips these hosts (they are containers) as on rented
    container hosts; test_interrupted.py forces it."""
    import fleetlib as fl

    fleet = fl.Fleet(ft_workdir / "partial", "pf", base_port=fl.BASE_PORT)
    request.addfinalizer(fleet.remove)
    hosts = fleet.start(2)
    for host in hosts:
        fl.seed_gpu_host(host, fleet.workdir)
    for host in hosts[1:]:
        host.exec("useradd --system --no-create-home trainer")
    gone_port = fl.closed_port(fl.BASE_PORT + 9)
    group_vars = fl.role_vars(fleet.workdir, ctk=False)
    group_vars["supervisord_programs"] = [HEARTBEAT, TRAINER]
    group_vars.update(fl.secret_vars(SECRET))
    inventory = fleet.inventory(fleet.workdir / "hosts.json", group_vars=group_vars, extra_hosts={
        "gpufleet-ft-pf-gone": {"ansible_host": "127.0.0.1", "ansible_port": gone_port}})
    runner = fl.Runner(fleet.workdir / "run")
    with fl.ProcessWatcher([h.name for h in hosts]) as watcher:
        started = time.monotonic()
        rc, out, rec = runner.playbook("site.yml", inventory, args=["--diff"])
        seconds = time.monotonic() - started
    return {"fleet": fleet, "hosts": hosts, "inventory": inventory, "runner": runner, "rc": rc, "out": out,
            "recap": rec, "seconds": seconds, "processes": watcher.seen, "secret": SECRET, "secret_made": SECRET_MADE,
            "group_vars": group_vars}
