"""The collection gpufleet.fleet against the demo fleet: installed from its tarball into an empty collections path,
used only by its FQCNs, with an Ansible that knows nothing of the checkout (no ansible.cfg, no library/ or roles/).

Needs the demo fleet (make demo; make e2e runs this suite after it). Read-only on the hosts: a facts module, a role
that the demo's site.yml already converged (so it must change nothing), and playbooks/facts.yml as
`ansible-playbook gpufleet.fleet.facts` without its report.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.collection import ansible_env  # noqa: E402 - after the line above

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
INVENTORY = ROOT / "inventories" / "demo" / "hosts.yml"


def _env(collections):
    return ansible_env(collections, ANSIBLE_INJECT_FACT_VARS="False")


@pytest.fixture(scope="module")
def collections(demo_hosts, tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    build = subprocess.run([sys.executable, str(ROOT / "scripts" / "build-collection"), "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    path = tmp_path_factory.mktemp("collections")
    argv = [str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "--force", "-p", str(path),
            build.stdout.strip().splitlines()[-1]]
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(path), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return path


def _play(collections, workdir, *argv, timeout=900):
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(INVENTORY), *argv], capture_output=True, text=True,
                          env=_env(collections), cwd=workdir, timeout=timeout)


def test_modules_roles_and_filters_by_fqcn_on_a_container_host(demo_hosts, collections, tmp_path):
    host = sorted(demo_hosts)[0]
    play = [{"name": "gpufleet.fleet by its FQCNs only", "hosts": host, "gather_facts": True,
             "gather_subset": ["min"],
             "tasks": [
                 {"name": "GPU facts", "gpufleet.fleet.gpu_facts": {"readiness": False}},
                 {"name": "The shared role, already converged by site.yml",
                  "ansible.builtin.include_role": {"name": "gpufleet.fleet.gpufleet_common"}},
                 {"name": "A role filter by its collection name", "ansible.builtin.set_fact": {
                     "__pip_env": "{{ '/srv/wheels' | gpufleet.fleet.gpufleet_pip_env }}"}},
                 {"name": "Facts and filter answered", "ansible.builtin.assert": {"that": [
                     "ansible_facts['gpu']['schema'] == 1",
                     "ansible_facts['gpu']['host']['container'] | bool",
                     "__pip_env['PIP_FIND_LINKS'] == '/srv/wheels'"]}},
             ]}]
    (tmp_path / "fqcn.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    res = _play(collections, tmp_path, "fqcn.yml")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    recap = re.search(r"^%s\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=0\s+failed=0" % re.escape(host), res.stdout,
                      re.M)
    assert recap and recap.group(2) == "0", res.stdout[-3000:]


def test_the_facts_playbook_by_fqcn(demo_hosts, collections, tmp_path):
    """`ansible-playbook gpufleet.fleet.facts`: the collection's own playbook, its short module names resolved in
    the collection; every demo host answers (its report is not written: report.yml renders with scripts/)."""
    res = _play(collections, tmp_path, "gpufleet.fleet.facts", "-e", "gpufleet_report_enabled=false")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    for host in demo_hosts:
        assert re.search(r"^%s\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0" % re.escape(host), res.stdout,
                         re.M), (host, res.stdout[-3000:])
