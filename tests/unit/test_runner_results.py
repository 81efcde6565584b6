"""The fleet report from ansible-runner artifacts: three real facts.yml jobs (tests/unit/data/runner/README.md),
one over the whole inventory and two over disjoint slices of it, against what report.yml wrote in the whole job.

Where Ansible has the rule we copy (the bool filter, the facts namespace, the callback's failure message,
the 2.19 fact cache encoding), Ansible's own code is the judge.
"""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from gpufleet import report, runner_results

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
def test_whole_job_gives_report_ymls_results(inventory):
    results, warnings = runner_results.results_from_artifacts([WHOLE], inventory)
    assert warnings == []
    ours = _by_host(results)
    theirs = {p.stem: json.loads(p.read_text()) for p in REPORT_YML.glob("*.json")}
    assert sorted(ours) == sorted(theirs) == HOSTS
    for host in HOSTS:
        # collected_at: report.yml writes the time of the report play, we the end of the job.
        mine = {k: v for k, v in ours[host].items() if k not in ("collected_at", "missing")}
        ref = {k: v for k, v in theirs[host].items() if k != "collected_at"}
        assert mine == ref, host
        assert ours[host]["collected_at"].startswith(theirs[host]["collected_at"][:16])  # same minute


def test_whole_job_report_equals_report_ymls_report(inventory, tmp_path):
    results, _ = runner_results.results_from_artifacts([WHOLE], inventory)
    ours = _summary(results, tmp_path, inventory)
    ref = report.summarize_folder(REPORT_YML, inventory_hosts=sorted(inventory))
    assert _view(ours) == _view(ref)
    assert {h["host"]: h["status"] for h in ours["hosts"]} == STATUS


def test_dropped_hosts_keep_the_callbacks_reason(inventory):
    results = _by_host(runner_results.results_from_artifacts([WHOLE], inventory)[0])
    gone, broken, waiting = results["gone-07"], results["brokenpy-08"], results["notready-09"]
    assert (gone["reachable"], gone["failed"]) == (False, False)
    assert gone["reason"].startswith("Gather GPU facts / Gathering Facts: ") and "Connection refused" in gone["reason"]
    assert (broken["reachable"], broken["failed"]) == (True, True)
    assert broken["reason"].startswith("Gather GPU facts / Gathering Facts: ")
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
])
def test_failure_message_is_the_callbacks(res):
    callback = _callback()
    assert runner_results.MAX_MESSAGE == callback.MAX_MESSAGE
    assert runner_results.failure_message(res) == callback._message(_Result(res))
