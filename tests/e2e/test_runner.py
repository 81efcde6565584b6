"""playbooks/facts.yml on the demo fleet through ansible-runner, as AWX runs a job, and the report built from
what the job left behind: its artifacts (events, fact cache), read by scripts/fleet-report --runner-artifacts.

Three ways of running the same job must give the same report as report.yml's own at the end of the play:
ansible_runner.run() in this process; `ansible-runner transmit | worker | process` (AWX's remote path through
receptor, here as three processes joined by pipes); and two runs over disjoint halves of the fleet (AWX job
slicing), at the same time, whose artifacts are merged into one report. The judge is report.yml's fleet.json
of the first run and the hosts' statuses, checklist statuses and fleet totals in it.
"""

import json
import os
import subprocess
import sys

import ansible_runner
import pytest
import yaml
from demolib import ROOT, root_disk_moved, statuses
from gpufleet.controller import runner_results

BIN = ROOT / ".venv" / "bin"
INVENTORY = ROOT / "inventories" / "demo"
PLAYBOOK = "playbooks/facts.yml"
TIMEOUT = 900


def _job_env(data_dir):
    """What the job needs that AWX would put in its environment.

    ANSIBLE_CONFIG: the project's settings (paths into the checkout). ANSIBLE_CALLBACK_PLUGINS: runner sets this
    variable to its own callback folder, which hides ansible.cfg's callback_plugins, so gpufleet_status (the
    dropped hosts' reasons for report.yml) would not load (ansible/ansible-runner issue #601); runner adds its
    folder to a value given here. GPUFLEET_STATUS_FILE: this job's own, not the checkout's shared one. PATH: runner
    starts `ansible-playbook` by name (an EE has it on PATH; here it is in the venv).
    """
    return {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_CALLBACK_PLUGINS": str(ROOT / "callback_plugins"),
            "GPUFLEET_STATUS_FILE": str(data_dir / "run-status.json"),
            "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}


def _extravars(data_dir):
    return {"gpufleet_report_dir": str(data_dir / "reports")}


def _same_report(built, reference):
    """What must agree between two reports of the same fleet: per host its status, reasons and checklist
    statuses; the fleet totals (counts, GPUs, prices, drift, checklist counts). The runs behind the two may be
    different jobs: a host whose / crossed the free-disk threshold between them is compared without its image
    item (demolib.root_disk_moved)."""
    hosts = [{h["host"]: h for h in fleet["hosts"]} for fleet in (built, reference)]
    moved = root_disk_moved(*hosts)
    views = []
    for fleet, by_name in zip((built, reference), hosts):
        totals = dict(fleet["totals"])
        if moved:
            totals["checklist"] = {k: v for k, v in totals["checklist"].items() if k != "image"}
        views.append({"hosts": statuses(by_name, moved), "reasons": {n: h["reasons"] for n, h in by_name.items()},
                      "totals": totals})
    assert views[0] == views[1]


def _report_from(artifacts, inventory_json, out):
    # --history: report.yml passes one (here the job's fresh <gpufleet_report_dir>/history.json); a fresh one
    # of its own gives the same history checklist item ("first seen in this run").
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "fleet-report"), "--out", str(out),
                          "--history", str(out.with_name(out.name + "-history.json")),
                          "--inventory-json", str(inventory_json), "--runner-artifacts", *map(str, artifacts)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads((out / "fleet.json").read_text()), res.stderr


def _check_run(status, rc, data_dir):
    assert (status, rc) == ("successful", 0), "%s rc=%s; see %s/artifacts/*/stdout" % (status, rc, data_dir)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, demo_hosts):
    """facts.yml as one job, and as two sliced jobs at the same time; the inventory as AWX holds it."""
    base = tmp_path_factory.mktemp("runner")
    inventory_json = base / "inventory.json"
    listed = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(INVENTORY), "--list"], capture_output=True,
                            text=True, timeout=120, env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")))
    assert listed.returncode == 0, listed.stderr
    inventory_json.write_text(listed.stdout)

    def start(name, limit=None):
        data_dir = base / name
        data_dir.mkdir()
        thread, runner = ansible_runner.run_async(
            private_data_dir=str(data_dir), project_dir=str(ROOT), playbook=PLAYBOOK, inventory=str(INVENTORY),
            ident=name, limit=limit, envvars=_job_env(data_dir), extravars=_extravars(data_dir), quiet=True,
            timeout=TIMEOUT)
        return data_dir, thread, runner

    names = sorted(demo_hosts)
    half = (len(names) + 1) // 2
    slices = [names[:half], names[half:]]
    started = {"whole": start("whole")}
    started["slice-1"] = start("slice-1", ",".join(slices[0]))
    started["slice-2"] = start("slice-2", ",".join(slices[1]))
    done = {}
    for name, (data_dir, thread, runner) in started.items():
        thread.join(TIMEOUT + 60)
        _check_run(runner.status, runner.rc, data_dir)
        done[name] = {"dir": data_dir, "runner": runner}
    return {"base": base, "inventory_json": inventory_json, "slices": slices, **done}


@pytest.fixture(scope="module")
def playbook_report(jobs):
    """report.yml's fleet.json of the whole job: the reference the runner-built reports must equal."""
    return json.loads((jobs["whole"]["dir"] / "reports" / "latest" / "fleet.json").read_text())


def test_runner_run_gives_report_ymls_report(jobs, playbook_report, demo_hosts):
    runner = jobs["whole"]["runner"]
    assert set(runner.stats["processed"]) >= set(demo_hosts), runner.stats
    # The job's own fact cache holds every host's GPU facts: what AWX's fact storage keeps. (Read here with
    # runner_results: runner 2.4's get_fact_cache() does not know ansible-core 2.19's s1_<host> files.)
    cache = runner_results.read_fact_cache(jobs["whole"]["dir"] / "artifacts" / "whole")
    missing = [host for host in demo_hosts if "gpu" not in cache.get(host, {})]
    assert not missing, "no gpu facts in the job's fact cache for %s" % missing
    # gpufleet_status loaded under runner (it writes its file at the start of the run): report.yml knows why a
    # host dropped out, as under ansible-playbook.
    assert (jobs["whole"]["dir"] / "run-status.json").exists(), "gpufleet_status did not load under runner"
    # The reference is no degenerate report: facts.yml reached every demo host and read its GPU facts.
    assert {h["host"]: h["status"] not in ("unreachable", "unknown") for h in playbook_report["hosts"]} == \
        dict.fromkeys(demo_hosts, True)
    built, warnings = _report_from([jobs["whole"]["dir"]], jobs["inventory_json"], jobs["base"] / "report-run")
    assert not warnings, warnings
    assert sorted(h["host"] for h in built["hosts"]) == sorted(demo_hosts)
    _same_report(built, playbook_report)


def test_transmit_worker_process_gives_the_same_report(jobs, playbook_report, tmp_path):
    """AWX's remote path: the job streamed to a worker and its events and artifacts streamed back."""
    data_dir = tmp_path / "remote"
    (data_dir / "env").mkdir(parents=True)
    # transmit sends the private data dir: the job's settings go in as files there, as AWX writes them.
    (data_dir / "env" / "envvars").write_text(yaml.safe_dump(_job_env(data_dir)))
    (data_dir / "env" / "extravars").write_text(yaml.safe_dump(_extravars(data_dir)))
    runner = [str(BIN / "ansible-runner")]
    transmit = subprocess.Popen(runner + ["transmit", str(data_dir), "-p", PLAYBOOK, "--ident", "remote",
                                          "--project-dir", str(ROOT), "--inventory", str(INVENTORY)],
                                stdout=subprocess.PIPE)
    worker = subprocess.Popen(runner + ["worker"], stdin=transmit.stdout, stdout=subprocess.PIPE)
    transmit.stdout.close()  # the worker holds the read end now
    process = subprocess.Popen(runner + ["process", str(data_dir), "--ident", "remote"], stdin=worker.stdout,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    worker.stdout.close()
    out, _ = process.communicate(timeout=TIMEOUT)
    codes = (transmit.wait(60), worker.wait(60), process.returncode)
    job = data_dir / "artifacts" / "remote"
    status = (job / "status").read_text().strip() if (job / "status").exists() else None
    assert codes == (0, 0, 0) and status == "successful", "%s %s\n%s" % (codes, status, out.decode()[-3000:])
    assert list((job / "fact_cache").iterdir()), "the worker sent no fact cache back"
    built, warnings = _report_from([job], jobs["inventory_json"], tmp_path / "report-remote")
    assert not warnings, warnings
    _same_report(built, playbook_report)


def test_sliced_jobs_merge_into_the_whole_report(jobs, playbook_report):
    first, second = (jobs[n]["runner"] for n in ("slice-1", "slice-2"))
    ran = [set(first.stats["processed"]) - {"localhost"}, set(second.stats["processed"]) - {"localhost"}]
    assert ran == [set(s) for s in jobs["slices"]], "each slice ran only its own hosts"
    # Given as private data dirs, in the order the slices were started or not: the hosts are disjoint.
    folders = [jobs["slice-2"]["dir"], jobs["slice-1"]["dir"]]
    built, warnings = _report_from(folders, jobs["inventory_json"], jobs["base"] / "report-sliced")
    assert not warnings, warnings
    _same_report(built, playbook_report)
    # One slice alone: the other half is named as not reached, not guessed.
    part, _ = _report_from(folders[:1], jobs["inventory_json"], jobs["base"] / "report-one-slice")
    missing = {h["host"]: h["status"] for h in part["hosts"] if h["host"] in jobs["slices"][0]}
    assert missing == dict.fromkeys(jobs["slices"][0], "unreachable")
