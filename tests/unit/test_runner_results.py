"""The fleet report from ansible-runner artifacts: three real facts.yml jobs (tests/unit/data/runner/README.md),
one over the whole inventory and two over disjoint slices of it, against what report.yml wrote in the whole job;
and a check.yml-like job against what today's report.yml writes, rendered by Ansible's template engine from the
hostvars and the gpufleet_status record the same job leaves.

Where Ansible has the rule we copy (the bool filter, the facts namespace, the callback's failure message,
the 2.19 fact cache encoding, report.yml's results), Ansible's own code is the judge.
"""

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from gpufleet.controller import report, runner_results
from jinja2 import Environment, nodes

from tests.unit.test_exit_contract import _tasks  # every task of a play: blocks, rescues and always included

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "unit" / "data" / "runner"
WHOLE = DATA / "whole"
SLICE_A = DATA / "slice-a"
SLICE_B = DATA / "slice-b"
REPORT_YML = DATA / "report-yml"  # report.yml's per-host results of the whole job
HOSTS = ["brokenpy-08", "gone-07", "gpufleet-demo-01", "gpufleet-demo-03", "gpufleet-demo-05", "notready-09"]
# What each recorded host is (inventory.yml), and so its status in the report.
STATUS = {"brokenpy-08": "failed", "gone-07": "unreachable", "gpufleet-demo-01": "ok", "gpufleet-demo-03": "ok",
          "gpufleet-demo-05": "failed", "notready-09": "unreachable"}


@pytest.fixture(scope="module")
def inventory():
    return runner_results.load_inventory(DATA / "inventory.json")


# report-yml/ was written by report.yml and gpufleet_status as they were on 2026-12-02. Since then report.yml keeps
# the play and task a host dropped out in out of its reason (failed_in: "<play> / <task>"), the callback drops
# ansible-core 2.19's "Task failed: " before the cause, and report.yml writes the pre-check's record (check: null
# in a facts.yml job) and the provider's listing beside the GPU (listing_*: null, the recorded inventory has none).
# The recording is brought up to today's report.yml by those rules alone (record.py records it afresh with the demo
# fleet up).
_LISTING_KEYS = ("listing_disk_read_mb_s", "listing_net_down_mbit", "listing_net_up_mbit", "listing_disk_gb",
                 "listing_source")
_RECORDED_REASON = re.compile(r"^(?P<play>.+?) / (?P<task>.+?): (?P<reason>.*)$", re.S)


def _as_report_yml_writes_it_today(recorded):
    result = dict(recorded, failed_in=None, check=None, **dict.fromkeys(_LISTING_KEYS))
    dropped = _RECORDED_REASON.match(recorded["reason"] or "")  # a not-ready host's reason is the provider's
    if dropped and (recorded["failed"] or recorded["reachable"] is False):
        result["failed_in"] = "%s / %s" % (dropped["play"], dropped["task"])
        result["reason"] = _callback()._ANSIBLE_PREFIX.sub("", dropped["reason"])
    return result


@pytest.fixture(scope="module")
def report_yml_results():
    """report.yml's per-host results of the whole job, as today's report.yml writes them."""
    return {p.stem: _as_report_yml_writes_it_today(json.loads(p.read_text())) for p in REPORT_YML.glob("*.json")}


def _report_yml_folder(results, tmp_path):
    folder = tmp_path / "report-yml"
    folder.mkdir()
    for host, result in results.items():
        (folder / (host + ".json")).write_text(json.dumps(result))
    return folder


def _by_host(results):
    return {r["host"]: r for r in results}


def _summary(results, tmp_path, inventory):
    folder = tmp_path / ("hosts-%d" % len(list(tmp_path.iterdir())))
    runner_results.write_results(results, folder)
    return report.summarize_folder(folder, inventory_hosts=sorted(inventory))


def _view(summary):
    """Statuses, reasons and checklist statuses per host, and the fleet totals."""
    return {"hosts": {h["host"]: (h["status"], h["reasons"], {k: v["status"] for k, v in h["checklist"].items()})
                      for h in summary["hosts"]},
            "totals": summary["totals"]}


# --------------------------------------------------------------------------- one job = report.yml's results
def test_whole_job_gives_report_ymls_results(inventory, report_yml_results):
    results, warnings = runner_results.results_from_artifacts([WHOLE], inventory)
    assert warnings == []
    ours = _by_host(results)
    theirs = report_yml_results
    assert sorted(ours) == sorted(theirs) == HOSTS
    for host in HOSTS:
        # collected_at: report.yml writes the time of the report play, we the end of the job.
        mine = {k: v for k, v in ours[host].items() if k not in ("collected_at", "missing")}
        ref = {k: v for k, v in theirs[host].items() if k != "collected_at"}
        assert mine == ref, host
        assert ours[host]["collected_at"].startswith(theirs[host]["collected_at"][:16])  # same minute


def test_whole_job_report_equals_report_ymls_report(inventory, report_yml_results, tmp_path):
    results, _ = runner_results.results_from_artifacts([WHOLE], inventory)
    ours = _summary(results, tmp_path, inventory)
    ref = report.summarize_folder(_report_yml_folder(report_yml_results, tmp_path), inventory_hosts=sorted(inventory))
    assert _view(ours) == _view(ref)
    assert {h["host"]: h["status"] for h in ours["hosts"]} == STATUS


def test_dropped_hosts_keep_the_callbacks_reason(inventory):
    results = _by_host(runner_results.results_from_artifacts([WHOLE], inventory)[0])
    gone, broken, waiting = results["gone-07"], results["brokenpy-08"], results["notready-09"]
    assert (gone["reachable"], gone["failed"]) == (False, False)
    # The cause as the callback keeps it (SSH's reason, without ansible-core's "Task failed: "), where it happened
    # beside it (the report's evidence, not the line).
    assert gone["reason"].startswith("Failed to connect to the host via ssh: ")
    assert "Connection refused" in gone["reason"]
    assert gone["failed_in"] == broken["failed_in"] == "Gather GPU facts / Gathering Facts"
    assert (broken["reachable"], broken["failed"]) == (True, True)
    assert broken["reason"] == "The following modules failed to execute: ansible.legacy.setup."
    assert results["gpufleet-demo-01"]["failed_in"] is None and results["gpufleet-demo-01"]["check"] is None
    # Not ready at the provider: in no play, named with the inventory's reason and the provider's fields.
    assert (waiting["reachable"], waiting["reason"]) == (False, "vast.ai: status loading (image still downloading)")
    assert (waiting["provider"], waiting["provider_id"], waiting["provider_readiness"], waiting["price_per_hour"]) == \
        ("vastai", "4243", "provisioning", 1.25)


def test_only_the_reports_inventory_variables_are_taken(inventory):
    """The inventory JSON has ansible_* connection settings (a key file's path): none reaches a result."""
    assert "ansible_ssh_private_key_file" in json.loads((DATA / "inventory.json").read_text())["_meta"]["hostvars"][
        "gpufleet-demo-01"]
    results, _ = runner_results.results_from_artifacts([WHOLE], inventory)
    text = json.dumps(results)
    assert "id_ed25519" not in text and "ansible_port" not in text
    demo05 = _by_host(results)["gpufleet-demo-05"]
    # Text values as inventories often give them, read as report.yml's filters read them.
    assert (demo05["simulated"], demo05["expected_gpu_count"], demo05["price_per_hour"]) == (True, "4", "5.16")


# --------------------------------------------------------------------------- one list of what a result carries
REPORT_PLAYBOOK = ROOT / "playbooks" / "report.yml"
RESULTS_TASK = "Write the hosts' results"


def _results_template():
    """The template of report.yml's task that writes the hosts' results (one JSON object per host)."""
    plays = DataLoader().load_from_file(str(REPORT_PLAYBOOK), trusted_as_template=True)
    (task,) = [t for play in plays for t in _tasks(play.get("tasks")) if t.get("name", "").startswith(RESULTS_TASK)]
    return task["ansible.builtin.copy"]["content"]


def _reads(node, name):
    """The attributes of the template variable ``name`` an expression reads (``name.x``, ``name['x']``)."""
    found = set()
    for n in [node, *node.find_all((nodes.Getattr, nodes.Getitem))]:
        if isinstance(n, nodes.Getattr) and isinstance(n.node, nodes.Name) and n.node.name == name:
            found.add(n.attr)
        elif isinstance(n, nodes.Getitem) and isinstance(n.node, nodes.Name) and n.node.name == name \
                and isinstance(n.arg, nodes.Const):
            found.add(n.arg.value)
    return found


def _filters(node):
    return {n.name for n in [node, *node.find_all(nodes.Filter)] if isinstance(n, nodes.Filter)}


def test_report_yml_writes_the_tables_keys_from_the_tables_sources():
    """report.yml's results dict and RESULT_FIELDS are one list: the same keys in the same order, each read from
    the same fact or inventory variable. A key added to one and not the other fails here."""
    tree = Environment(autoescape=True).parse(_results_template())  # parsed only, never rendered here
    (result,) = [d for d in tree.find_all(nodes.Dict)
                 if any(isinstance(p.key, nodes.Const) and p.key.value == "host" for p in d.items)]
    written = [(p.key.value, p.value) for p in result.items]
    assert [k for k, _v in written] == [k for k, _s, _n in runner_results.RESULT_FIELDS]
    # __facts is the host's ansible_facts, __hv its hostvars
    sets = {a.target.name: a.node for a in tree.find_all(nodes.Assign) if isinstance(a.target, nodes.Name)}
    assert _reads(sets["__facts"], "__hv") == {"ansible_facts"} and _reads(sets["__hv"], "hostvars") == set()
    assert isinstance(sets["__hv"], nodes.Getitem) and sets["__hv"].node.name == "hostvars"
    for (key, value), (_key, source, name) in zip(written, runner_results.RESULT_FIELDS):
        facts, hv = _reads(value, "__facts"), _reads(value, "__hv")
        if source == runner_results.FACT:
            assert (facts, hv) == ({name}, set()), key
        elif source in (runner_results.INVENTORY, runner_results.FLAG):
            assert (facts, hv) == (set(), {name}), key
            assert ("bool" in _filters(value)) is (source == runner_results.FLAG), key
        else:
            assert facts == set() and hv <= set(runner_results.READINESS_VARS), (key, hv)
    # every host variable the template reads is one the artifacts' inventory side keeps
    assert _reads(tree, "__hv") - {"ansible_facts"} == set(runner_results.INVENTORY_VARS)


def test_a_result_has_the_tables_keys_whatever_the_host_did():
    keys = [k for k, _s, _n in runner_results.RESULT_FIELDS]
    dropped = {"state": "failed", "play": "P", "task": "T", "reason": "boom"}
    for seen in (None, {"facts": {}, "dropped": None}, {"facts": {"gpu_check": {}}, "dropped": dropped}):
        for hostvars in (None, {"gpufleet_ready": False}):
            result = runner_results.host_result("h", seen, hostvars)
            assert [k for k in result if k != "missing"] == keys, (seen, hostvars)
    # Where only the job's recap says a host failed, no play or task is known: none is made up.
    recap_only = {"state": "failed", "play": None, "task": None, "reason": "failed (no event recorded)"}
    result = runner_results.host_result("h", {"facts": {}, "dropped": recap_only})
    assert (result["failed"], result["failed_in"], result["reason"]) == (True, None, "failed (no event recorded)")


# --------------------------------------------------------------------------- a check.yml job = today's report.yml
CHECK_PLAY = "Check each box (connect, environment, performance probe)"
CONNECT = "Connect | Log in and run a trivial module"
READ_GPUS = "Environment | Read the GPUs (NVML through the image's nvidia-ml-py, else nvidia-smi)"
DOCTOR = "Environment | Ask the doctor (torch, the GPUs against what was rented, the renter's checks)"
GATE = "Probe | Run the gate's quick tier (and an all-reduce on two or more GPUs) with the image's torch"
KEEP_RECORD = "Keep the check's outcome in the facts (the fleet report reads them)"
EXIT_TASK = "Fail the run when a box is to be given back, restarted, rebooted or checked again"
SSH = "Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 2299: Connection refused"
NVML = "NVML Shared Library Not Found"


def _check_record(failed_step=None, error=None, steps=None, probe_run=False):
    """playbooks/check.yml's gpu_check record (its "Keep the check's outcome" task)."""
    env = {"python": "/venv/main/bin/python3", "kind": "login_shell", "version": "3.11.9", "torch": "2.5.1+cu121",
           "nvml": True, "where": "/venv/main"}
    return {"deadline_s": 60, "steps": steps or {"connect": 0.4}, "total_s": 4.2,
            "torch_python": env["python"], "pythons_tried": [env["python"]], "environments": [env],
            "judged": dict(env, why="the login shell's python", reason="the login shell's python", named=False),
            "failed_step": failed_step, "timed_out": False, "hung": None, "error": error,
            "probes": {"find_python": "ran", "gpu_facts": "failed" if failed_step else "ran",
                       "gpu_doctor": "not reached" if failed_step else "ran",
                       "gate": "ran" if probe_run else "not reached"},
            "probe_run": probe_run}


def _check_job():
    """The events of a check.yml run (as ansible-runner records them) over three hosts: box-keep checked to its end,
    box-broken whose GPU facts failed in step 2 (rescued, its record kept), box-gone unreachable; then the report
    play and the exit status play on the controller, failed there (a box to give back)."""
    gpu = runner_results.read_fact_cache(WHOLE / "artifacts" / "whole")["gpufleet-demo-01"]["gpu"]  # real facts
    doctor = {"status": "healthy", "cuda_usable": True, "findings": [], "evidence": {"torch": {"importable": True}}}
    gate = [{"test": "bf16_gemm", "device": "cpu", "passed": True, "value": 1.0, "unit": "TFLOP/s"}]
    counter = iter(range(1, 1000))
    events = []

    def ev(kind, play=None, host=None, task=None, res=None):
        n = next(counter)
        data = {k: v for k, v in (("play", play), ("host", host), ("task", task), ("res", res)) if v is not None}
        events.append({"counter": n, "event": kind, "created": "2026-12-07T10:00:%02d.000000+00:00" % n,
                       "event_data": data})

    ev("playbook_on_start")
    ev("playbook_on_play_start", play=CHECK_PLAY)
    for host in ("box-keep", "box-broken", "box-gone"):
        ev("runner_on_ok", CHECK_PLAY, host, "Start this host's clock", {"ansible_facts": {"__check_t0": 1.0}})
    ev("runner_on_ok", CHECK_PLAY, "box-keep", CONNECT, {"ping": "pong"})
    ev("runner_on_ok", CHECK_PLAY, "box-broken", CONNECT, {"ping": "pong"})
    ev("runner_on_unreachable", CHECK_PLAY, "box-gone", CONNECT, {"unreachable": True, "msg": "Task failed: " + SSH})
    ev("runner_on_ok", CHECK_PLAY, "box-keep", READ_GPUS, {"ansible_facts": {"gpu": gpu}})
    ev("runner_on_failed", CHECK_PLAY, "box-broken", READ_GPUS,
       {"failed": True, "msg": "Task failed: Module failed: " + NVML})
    ev("runner_on_ok", CHECK_PLAY, "box-keep", DOCTOR, {"ansible_facts": {"gpu_doctor": doctor}})
    ev("runner_on_ok", CHECK_PLAY, "box-keep", GATE, {"ansible_facts": {"gpu_gate": gate}})
    ev("runner_on_ok", CHECK_PLAY, "box-keep", KEEP_RECORD, {"ansible_facts": {"gpu_check": _check_record(
        steps={"connect": 0.4, "environment": 3.1, "probe": 9.0}, probe_run=True)}, "_ansible_fact_cacheable": True})
    ev("runner_on_ok", CHECK_PLAY, "box-broken", KEEP_RECORD, {"ansible_facts": {"gpu_check": _check_record(
        failed_step=2, error="Module failed: " + NVML)}, "_ansible_fact_cacheable": True})
    ev("playbook_on_play_start", play="Write the fleet report")
    ev("runner_on_ok", "Write the fleet report", "localhost", "Fix the run folder's name once",
       {"ansible_facts": {"__report_dir": "reports/20261207T100000Z"}})
    ev("playbook_on_play_start", play="End with an exit status scripts can use")
    ev("runner_on_failed", "End with an exit status scripts can use", "localhost", EXIT_TASK,
       {"failed": True, "msg": "3 host(s): 1 keep, 0 fix here, 2 to give back, restart, reboot or check again"})
    ev("playbook_on_stats", res=None)
    events[-1]["event_data"].update(ok={"box-keep": 8, "box-broken": 4, "localhost": 9}, dark={"box-gone": 1},
                                    failures={"localhost": 1}, rescued={"box-broken": 1}, skipped={},
                                    processed={"box-keep": 1, "box-broken": 1, "box-gone": 1, "localhost": 1})
    return events


CHECK_INVENTORY = {
    "box-keep": {"gpufleet_provider": "vastai", "gpufleet_provider_id": "4242", "gpufleet_readiness": "running",
                 "gpufleet_price_per_hour": "1.25", "gpufleet_simulated": "yes", "gpufleet_expected_gpu_count": 1},
    "box-broken": {"gpufleet_provider": "runpod", "gpufleet_provider_machine_id": "m-7"},
    "box-gone": {},
    "box-waiting": {"gpufleet_ready": False, "gpufleet_not_ready_reason": "vast.ai: status loading"},  # not checked
}


class _Named:
    def __init__(self, name, **attrs):
        self._name = name
        self.__dict__.update(attrs)

    def get_name(self):
        return self._name


def _callback_status(events, tmp_path, monkeypatch):
    """The record gpufleet_status keeps of the same run (its file, report.yml's __report_status), the callback fed
    the run's plays and failures in order."""
    monkeypatch.setenv("GPUFLEET_STATUS_FILE", str(tmp_path / "run-status.json"))
    callback = _callback().CallbackModule()
    for event in events:
        data = event["event_data"]
        if event["event"] == "playbook_on_play_start":
            callback.v2_playbook_on_play_start(_Named(data["play"], _uuid=str(event["counter"])))
        elif event["event"] in ("runner_on_failed", "runner_on_unreachable"):
            result = _Named(None, _host=_Named(data["host"]), _task=_Named(data["task"], ignore_unreachable=False),
                            _result=data["res"])
            if event["event"] == "runner_on_failed":
                callback.v2_runner_on_failed(result)
            else:
                callback.v2_runner_on_unreachable(result)
    return json.loads((tmp_path / "run-status.json").read_text())


def _report_yml_results(events, inventory, status):
    """What report.yml's task writes for this run, rendered by Ansible's template engine: the hosts' variables as
    the run leaves them (inventory variables, and the facts its modules and set_fact returned as ansible_facts)."""
    facts = {host: {} for host in inventory}
    for event in events:
        res = event["event_data"].get("res") or {}
        if event["event"] == "runner_on_ok" and event["event_data"]["host"] in facts:
            facts[event["event_data"]["host"]].update(res.get("ansible_facts") or {})
    hostvars = {host: dict(hv, ansible_facts=facts[host]) for host, hv in inventory.items()}
    variables = {"__report_hosts": sorted(inventory), "__report_status": status, "hostvars": hostvars}
    text = Templar(loader=DataLoader(), variables=variables).template(_results_template())
    return {r["host"]: r for r in map(json.loads, text.splitlines()) if r}


def test_a_check_job_gives_what_report_yml_writes(tmp_path, monkeypatch):
    events = _check_job()
    status = _callback_status(events, tmp_path, monkeypatch)
    theirs = _report_yml_results(events, CHECK_INVENTORY, status)
    results, warnings = runner_results.build_results([runner_results.job_summary(events, name="check")],
                                                     CHECK_INVENTORY)
    assert warnings == []
    ours = _by_host(results)
    assert sorted(ours) == sorted(theirs) == sorted(CHECK_INVENTORY)  # never the controller
    for host in sorted(CHECK_INVENTORY):
        # collected_at: report.yml writes the time of the report play, the artifacts the end of the job.
        assert {k: v for k, v in ours[host].items() if k != "collected_at"} == \
            {k: v for k, v in theirs[host].items() if k != "collected_at"}, host
    # What the issue found missing: the pre-check's record and the step a host failed in, for every host that has one.
    keep, broken, gone = ours["box-keep"], ours["box-broken"], ours["box-gone"]
    assert keep["check"]["probe_run"] is True and (keep["failed"], keep["failed_in"], keep["reason"]) == (
        False, None, None)
    assert broken["check"]["failed_step"] == 2 and broken["failed"] is True
    assert (broken["failed_in"], broken["reason"]) == (CHECK_PLAY + " / " + READ_GPUS, NVML)
    assert (gone["reachable"], gone["failed_in"], gone["reason"], gone["check"]) == (
        False, CHECK_PLAY + " / " + CONNECT, SSH, None)
    # The exit status play's failure is the controller's: no box reads failed for it, and the run-status file
    # (fleet hosts only) does not record it.
    assert "localhost" not in status["hosts"]
    assert set(status["hosts"]) == {"box-broken", "box-gone"}


def test_a_check_job_reads_the_same_in_the_report(tmp_path, monkeypatch):
    """The two sets of results make the same report: statuses, reasons, checklists, verdicts and the pre-check's
    findings, the exit status included."""
    from gpufleet.controller.judgement import judge as judgement

    events = _check_job()
    theirs = _report_yml_results(events, CHECK_INVENTORY, _callback_status(events, tmp_path, monkeypatch))
    ours, _warnings = runner_results.build_results([runner_results.job_summary(events)], CHECK_INVENTORY)
    hosts = sorted(CHECK_INVENTORY)
    built = _summary(ours, tmp_path, CHECK_INVENTORY)
    folder = tmp_path / "report-yml"
    folder.mkdir()
    for host, result in theirs.items():
        (folder / (host + ".json")).write_text(json.dumps(result))
    ref = report.summarize_folder(folder, inventory_hosts=hosts)

    def verdicts(summary):
        return {h["host"]: (h["verdict"], h["action"], h["check"] is not None) for h in summary["hosts"]}

    assert _view(built) == _view(ref)
    assert verdicts(built) == verdicts(ref)
    assert judgement.check_exit_status(built) == judgement.check_exit_status(ref) == judgement.EXIT_GIVE_BACK
    by_host = {h["host"]: h for h in built["hosts"]}
    assert by_host["box-keep"]["check"] is not None and by_host["box-broken"]["check"] is not None
    (failed,) = [f for f in by_host["box-broken"]["judgement"] if f["code"] == "playbook_failed"]
    assert failed["evidence"]["failed_in"] == CHECK_PLAY + " / " + READ_GPUS


# --------------------------------------------------------------------------- slices
def test_two_slices_merge_into_the_whole_jobs_report(inventory, tmp_path):
    whole, _ = runner_results.results_from_artifacts([WHOLE], inventory)
    # A private data dir and an artifacts folder, later slice first: the order given does not matter.
    sliced, warnings = runner_results.results_from_artifacts([SLICE_B, SLICE_A / "artifacts"], inventory)
    assert warnings == []
    assert [r["host"] for r in sliced] == HOSTS
    assert _view(_summary(sliced, tmp_path, inventory)) == _view(_summary(whole, tmp_path, inventory))


def test_one_slice_alone_names_the_other_half_as_not_reached(inventory, tmp_path):
    results, _ = runner_results.results_from_artifacts([SLICE_A], inventory)
    by_host = _by_host(results)
    for host in ("gpufleet-demo-05", "brokenpy-08"):
        assert (by_host[host]["reachable"], by_host[host]["reason"], by_host[host]["missing"]) == \
            (False, report.NOT_REACHED, True)
        assert by_host[host]["price_per_hour"] == runner_results.inventory_hostvars(
            json.loads((DATA / "inventory.json").read_text()))[host].get("gpufleet_price_per_hour")
    summary = _summary(results, tmp_path, inventory)
    assert summary["totals"]["hosts_by_status"]["unreachable"] == 4  # gone, not ready, and the other slice's two


def test_a_host_in_two_jobs_keeps_the_later_jobs_result_with_a_warning(inventory):
    later = runner_results.read_job(SLICE_B / "artifacts" / "slice-b")
    first = runner_results.read_job(WHOLE / "artifacts" / "whole")
    assert first["started"] < later["started"]
    for order in ([first, later], [later, first]):
        results, warnings = runner_results.build_results(order, inventory)
        assert sorted(w.split()[1] for w in warnings) == ["brokenpy-08", "gpufleet-demo-05"], warnings
        assert all("later job's result is used (slice-b)" in w for w in warnings)
        demo05 = _by_host(results)["gpufleet-demo-05"]
        assert demo05["gpu"] == later["hosts"]["gpufleet-demo-05"]["facts"]["gpu"]
        assert demo05["gpu"]["collected_at"] != first["hosts"]["gpufleet-demo-05"]["facts"]["gpu"]["collected_at"]


def test_cli_builds_the_report_from_artifacts(load_script, tmp_path, capsys):
    cli = load_script("fleet-report")
    out = tmp_path / "report"
    rc = cli.main(["--out", str(out), "--inventory-json", str(DATA / "inventory.json"),
                   "--runner-artifacts", str(SLICE_A), str(SLICE_B)])
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert sorted(p.stem for p in (out / "hosts").glob("*.json")) == HOSTS
    data = json.loads((out / "fleet.json").read_text())
    assert {h["host"]: h["status"] for h in data["hosts"]} == STATUS
    assert data["warnings"] == []
    # Overlapping jobs: the CLI says which result it kept.
    rc = cli.main(["--out", str(tmp_path / "again"), "--runner-artifacts", str(WHOLE), str(SLICE_B)])
    assert rc == 0
    assert "warning: host gpufleet-demo-05 is in jobs whole and slice-b" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--runner-artifacts", "/nonexistent/job"], "no such folder"),
    (["--runner-artifacts", str(DATA / "report-yml")], "no job folder"),
    (["--runner-artifacts", str(WHOLE), "--inventory-json", str(DATA / "README.md")], "cannot read inventory"),
])
def test_cli_refuses_unusable_input(load_script, tmp_path, capsys, argv, message):
    cli = load_script("fleet-report")
    assert cli.main(["--out", str(tmp_path / "out")] + argv) == 2
    assert message in capsys.readouterr().err


def test_cli_wants_a_results_folder_without_artifacts(load_script, tmp_path):
    cli = load_script("fleet-report")
    with pytest.raises(SystemExit) as exc:
        cli.main(["--out", str(tmp_path)])
    assert exc.value.code == 2


def test_a_host_name_that_is_no_file_name_is_refused(tmp_path):
    with pytest.raises(runner_results.RunnerArtifactsError, match="cannot be a result file name"):
        runner_results.write_results([runner_results.host_result("../etc")], tmp_path)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- events and the fact cache
def test_events_alone_give_the_same_facts_as_the_cache():
    """Without fact storage (or with a cache written elsewhere) the runner_on_ok events carry the facts."""
    folder = WHOLE / "artifacts" / "whole"
    events = runner_results.read_events(folder)
    with_cache = runner_results.job_summary(events, runner_results.read_fact_cache(folder))
    without = runner_results.job_summary(events, {})
    for host in ("gpufleet-demo-01", "gpufleet-demo-03", "gpufleet-demo-05"):
        assert without["hosts"][host]["facts"]["gpu"] == with_cache["hosts"][host]["facts"]["gpu"]
    assert [e["counter"] for e in events] == sorted(e["counter"] for e in events)


def test_fact_cache_is_read_in_both_formats(tmp_path):
    """ansible-core 2.19's s1_<host> files (recorded) and the plain <host> files of earlier versions and of
    AWX's seeding; where both exist the 2.19 one (this job's) wins."""
    recorded = runner_results.read_fact_cache(WHOLE / "artifacts" / "whole")
    assert sorted(recorded) == ["gpufleet-demo-01", "gpufleet-demo-03", "gpufleet-demo-05"]
    job = tmp_path / "job"
    shutil.copytree(WHOLE / "artifacts" / "whole" / "fact_cache", job / "fact_cache")
    (job / "fact_cache" / "s1_gpufleet-demo-01").unlink()
    (job / "fact_cache" / "gpufleet-demo-01").write_text(json.dumps(recorded["gpufleet-demo-01"]))
    (job / "fact_cache" / "gpufleet-demo-03").write_text(json.dumps({"gpu": {"stale": True}}))
    # A name that sorts after its s1_ file: read second, still not the one kept.
    (job / "fact_cache" / "s1_zz-10").write_text(json.dumps({"__payload__": json.dumps({"gpu": {"fresh": True}})}))
    (job / "fact_cache" / "zz-10").write_text(json.dumps({"gpu": {"stale": True}}))
    assert runner_results.read_fact_cache(job) == dict(recorded, **{"zz-10": {"gpu": {"fresh": True}}})


def test_a_seeded_fact_cache_says_nothing_of_hosts_that_did_not_run():
    """AWX writes stored facts of the job's hosts into its cache before it starts: a host that ran no task
    in this job is not in it, whatever its cache file says."""
    folder = SLICE_A / "artifacts" / "slice-a"
    seeded = dict(runner_results.read_fact_cache(WHOLE / "artifacts" / "whole"))
    job = runner_results.job_summary(runner_results.read_events(folder), seeded)
    assert sorted(job["hosts"]) == ["gone-07", "gpufleet-demo-01", "gpufleet-demo-03"]


def test_fact_cache_decoding_matches_ansibles_encoder():
    from ansible._internal._datatag._tags import Origin, TrustedAsTemplate
    from ansible._internal._plugins._cache import PluginInterposer

    facts = {"gpu": {"driver_version": TrustedAsTemplate().tag("535.161.08"),
                     "gpus": [Origin(path="/x.yml", line_num=3).tag({"index": 0, "name": "A100"})]},
             "plain": [1, 2.5, None, True]}
    stored = PluginInterposer._encode(PluginInterposer, facts)
    host, got, wrapped = runner_results.cache_entry(PluginInterposer._get_key("h1"), stored)
    assert (host, wrapped) == ("h1", True)
    assert got == {"gpu": {"driver_version": "535.161.08", "gpus": [{"index": 0, "name": "A100"}]},
                   "plain": [1, 2.5, None, True]}


def test_unreachable_counts_only_when_the_recap_says_so():
    """ignore_unreachable and ignore_errors leave a host in the run: the recap is the judge."""
    def ev(counter, kind, **data):
        return {"counter": counter, "event": kind, "created": "2026-12-02T10:00:%02d+00:00" % counter,
                "event_data": dict(data, play="P")}

    events = [
        ev(1, "playbook_on_start"),
        ev(2, "runner_on_unreachable", host="a", task="probe", res={"msg": "timed out"}),
        ev(3, "runner_on_failed", host="b", task="check", ignore_errors=True, res={"msg": "ignored"}),
        ev(4, "runner_on_failed", host="a", task="later", role="r", res={"msg": "boom"}),
        ev(5, "runner_on_unreachable", host="c", task="t", res={"msg": "gone"}),
        ev(6, "playbook_on_stats", ok={"a": 1, "b": 2}, dark={"c": 1}, failures={"a": 1},
           artifact_data={"not_a_host": 1}),
    ]
    job = runner_results.job_summary(events)
    dropped = {h: (e["dropped"] or {}).get("reason") for h, e in job["hosts"].items()}
    assert dropped == {"a": "boom", "b": None, "c": "gone"}
    assert job["hosts"]["a"]["dropped"]["task"] == "r : later"
    assert job["complete"] and job["finished"].isoformat() == "2026-12-02T10:00:06+00:00"


def test_a_job_cut_off_before_its_recap_is_named(inventory):
    events = runner_results.read_events(SLICE_A / "artifacts" / "slice-a")
    cut = [e for e in events if e["event"] != "playbook_on_stats"]
    job = runner_results.job_summary(cut, name="cut")
    results, warnings = runner_results.build_results([job], inventory)
    assert warnings and "job cut has no final recap" in warnings[0]
    by_host = _by_host(results)
    assert by_host["gone-07"]["reachable"] is False and "Connection refused" in by_host["gone-07"]["reason"]
    assert by_host["gpufleet-demo-01"]["gpu"]


def test_job_folders_of_a_data_dir_an_artifacts_folder_and_a_job(tmp_path):
    assert runner_results.job_folders(WHOLE) == [str(WHOLE / "artifacts" / "whole")]
    assert runner_results.job_folders(WHOLE / "artifacts") == [str(WHOLE / "artifacts" / "whole")]
    assert runner_results.job_folders(WHOLE / "artifacts" / "whole") == [str(WHOLE / "artifacts" / "whole")]
    flat = tmp_path / "remote" / "artifacts"  # ansible-runner process without --ident
    shutil.copytree(SLICE_B / "artifacts" / "slice-b", flat)
    assert runner_results.job_folders(tmp_path / "remote") == [str(flat)]
    with pytest.raises(runner_results.RunnerArtifactsError, match="no job folder"):
        runner_results.job_folders(tmp_path / "remote" / "artifacts" / "fact_cache")


# --------------------------------------------------------------------------- Ansible's rules, Ansible as judge
@pytest.mark.parametrize("value", [True, False, "yes", "No", "ON", "off", "1", "0", "true", "FALSE", 1, 0, 2, 1.0,
                                   None, "maybe", "", [1]])
def test_bool_reads_as_ansibles_filter(value):
    from ansible.plugins.filter.core import to_bool

    assert runner_results.ansible_bool(value) is to_bool(value)


def test_facts_namespace_as_ansibles():
    from ansible.vars.clean import namespace_facts

    facts = json.loads(json.loads((WHOLE / "artifacts" / "whole" / "fact_cache" / "s1_gpufleet-demo-05")
                                  .read_text())["__payload__"])
    assert runner_results.namespace_facts(facts) == namespace_facts(facts)["ansible_facts"]
    assert "gpu" in runner_results.namespace_facts(facts) and "distribution" in runner_results.namespace_facts(facts)


def _callback():
    path = ROOT / "callback_plugins" / "gpufleet_status.py"
    spec = importlib.util.spec_from_file_location("gpufleet_status_callback", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Result:
    def __init__(self, res):
        self._result = res


@pytest.mark.parametrize("res", [
    {"msg": "  disk full  "},
    {"stderr": "E: dpkg was interrupted"},
    {"reason": "timed out"},
    {},
    {"msg": "One or more items failed", "results": [{"failed": True, "msg": "a"}, {"msg": "b"},
                                                    {"failed": True, "msg": "c"}]},
    {"results": [{"failed": True}]},
    {"msg": "x" * 2000},
    {"msg": "Task failed: Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 9: refused"},
    {"msg": "Task failed: Action failed: Module failed: NVML Shared Library Not Found"},
    {"msg": "Task failed: "},
    {"msg": "A Task failed: here"},
])
def test_failure_message_is_the_callbacks(res):
    callback = _callback()
    assert runner_results.MAX_MESSAGE == callback.MAX_MESSAGE
    assert runner_results.failure_message(res) == callback._message(_Result(res))
