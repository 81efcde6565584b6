"""The demo fleet as the end-to-end suite sees it: its inventory, its hosts over SSH, its reports."""

import json
import os
import re
import subprocess
from pathlib import Path

import yaml
from gpufleet.controller.checklist.host import ROOT_FREE_MIN_GIB

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventories" / "demo" / "hosts.yml"
KEY = ROOT / ".demo" / "id_ed25519"
REPORTS = ROOT / "reports"


class DemoHost:
    """One demo host as its inventory describes it, reached over SSH like any rented host."""

    def __init__(self, name, hostvars):
        self.name = name
        self.vars = hostvars
        self.port = int(hostvars["ansible_port"])

    def ssh_argv(self, *extra):
        return ["ssh", "-i", str(KEY), "-p", str(self.port), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                "-o", "ControlMaster=no", "-o", "ControlPath=none", *extra, "root@127.0.0.1"]

    def run(self, command, check=True, timeout=60):
        """Run a shell command on the host over a fresh SSH connection (never Ansible's)."""
        res = subprocess.run(self.ssh_argv() + [command], capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError("%s: %r exited %d: %s" % (self.name, command, res.returncode, res.stderr))
        return res


def hosts():
    """{name: DemoHost} from the inventory scripts/demo-fleet wrote."""
    inv = yaml.safe_load(INVENTORY.read_text())
    found = {}
    for group in inv.values():
        for name, hv in (group.get("hosts") or {}).items():
            found[name] = DemoHost(name, hv or {})
    return found


def temp_inventory(folder, hosts):
    """An inventory of {name: hostvars} in ``folder`` with the demo's group vars (group_vars/all.yml beside it)."""
    demo = yaml.safe_load(INVENTORY.read_text())
    group_vars = dict(next(iter(demo.values())).get("vars") or {})
    folder.mkdir(parents=True)
    (folder / "group_vars").mkdir()
    (folder / "group_vars" / "all.yml").write_text((INVENTORY.parent / "group_vars" / "all.yml").read_text())
    # all.yml finds the wheelhouse from inventory_dir: none beside a temporary inventory (a play that installs from it
    # needs the demo's own inventory).
    (folder / "hosts.yml").write_text(yaml.safe_dump({"rented": {"hosts": hosts, "vars": group_vars}}))
    return folder


def playbook(inventory, playbook_path, work, *args, timeout=600):
    """ansible-playbook on ``inventory`` with this test's own fact cache and run status (under ``work``: the
    checkout's are shared with other runs) and reports under ``work``/reports."""
    bin_dir = ROOT / ".venv" / "bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(work / "facts"), GPUFLEET_STATUS_FILE=str(work / "status.json"),
               PATH="%s:%s" % (bin_dir, env.get("PATH", "")))
    argv = [str(bin_dir / "ansible-playbook"), "-i", str(inventory), str(playbook_path),
            "-e", "gpufleet_report_dir=%s" % (work / "reports"), *args]
    return subprocess.run(argv, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=timeout)


def load_report(folder=None):
    folder = Path(folder or (REPORTS / "latest"))
    return json.loads((folder / "fleet.json").read_text()), folder


def _root_free_side(entry):
    """Which side of the image item's free-disk threshold the host's / stood on (None: not read)."""
    summary = ((entry.get("checklist") or {}).get("image") or {}).get("summary") or ""
    found = re.search(r"(?:^|; )/ ([0-9.]+) GiB free", summary)
    return None if not found else float(found.group(1)) >= ROOT_FREE_MIN_GIB


def root_disk_moved(before, after):
    """Hosts ({name: report entry} twice) whose / crossed the image item's free-disk threshold between two reports.

    The demo hosts are containers on this machine's disk: their / has what the machine has free, and CI's other
    lane fills that disk while e2e runs. Such a host rightly reads differently in its image item between two runs;
    every other item and the host's status must still say the same (``statuses``).
    """
    return {h for h in before if h in after and _root_free_side(before[h]) != _root_free_side(after[h])}


def statuses(hosts, moved=()):
    """{name: (status, {item: status})}, leaving out the image item of the hosts in ``moved``."""
    return {h: (e["status"], {k: v["status"] for k, v in (e.get("checklist") or {}).items()
                              if not (k == "image" and h in moved)})
            for h, e in hosts.items()}
