"""Record the jobs of this folder again (README.md): run with the demo fleet up (make demo), from the checkout:

    .venv/bin/python tests/unit/data/runner/record.py

Runs playbooks/facts.yml three times through ansible_runner.run() (whole, slice-a, slice-b) in a temporary
folder and copies what the unit tests read into this folder, leaving out stdout, stderr and command (the
job's whole environment).
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import ansible_runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
BIN = ROOT / ".venv" / "bin"
JOBS = {"whole": None, "slice-a": "gpufleet-demo-01,gpufleet-demo-03,gone-07",
        "slice-b": "gpufleet-demo-05,brokenpy-08"}
KEPT = ("job_events", "fact_cache", "status", "rc")


def main():
    work = Path(tempfile.mkdtemp(prefix="runner-record-"))
    for ident, limit in JOBS.items():
        data_dir = work / ident
        data_dir.mkdir()
        job = ansible_runner.run(
            private_data_dir=str(data_dir), project_dir=str(ROOT), playbook="playbooks/facts.yml",
            inventory=str(HERE / "inventory.yml"), ident=ident, limit=limit, quiet=True,
            envvars={"PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
                     "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
                     "ANSIBLE_CALLBACK_PLUGINS": str(ROOT / "callback_plugins"),
                     "GPUFLEET_STATUS_FILE": str(data_dir / "run-status.json")},
            extravars={"gpufleet_report_dir": str(data_dir / "reports")})
        print(ident, job.status, job.rc)
        dest = HERE / ident / "artifacts" / ident
        shutil.rmtree(HERE / ident, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in KEPT:
            src = data_dir / "artifacts" / ident / name
            (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    shutil.rmtree(HERE / "report-yml", ignore_errors=True)
    shutil.copytree(work / "whole" / "reports" / "latest" / "hosts", HERE / "report-yml")
    listed = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(HERE / "inventory.yml"), "--list"],
                            check=True, capture_output=True, text=True)
    (HERE / "inventory.json").write_text(json.dumps(json.loads(listed.stdout), indent=4, sort_keys=True) + "\n")
    for path in HERE.rglob("*"):  # runner writes 0600
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
