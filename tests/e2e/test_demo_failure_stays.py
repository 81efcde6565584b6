"""A failure stays in every later report until a run clears it (callback_plugins/gpufleet_status.py), on demo hosts.

As a new user met it: site.yml refuses an Ubuntu 20.04 host before changing it (torch 2.13 needs Python 3.10; demo
host 02 runs 20.04's Python 3.8, and its torch is switched on here as a renter would leave it), then runs on the
other host alone, and report.yml alone is run for the fleet's report. Host 02 must not read "keep" there: its
failure stays, marked with the run it happened in. That a later run which succeeds on the host clears it is
tests/unit/test_failure_stays.py's (the same callback and report play with the real ansible-playbook; here it cost
two more runs, about 15 s).

Demo hosts 02 and 04 (both keep after make demo) from a temporary inventory, with this test's own fact cache (a copy
of the demo's, so the report has the hosts' GPU facts), run status and reports. site.yml runs with --tags torch: the
torch role's input check is what refuses 02; the rest of site.yml is make demo's and the second site.yml's business.
"""

import shutil

import demolib
import pytest

TAGS = ("--tags", "torch")


def _short(name):
    return name.rsplit("-", 1)[-1]


def _report(work):
    data, _ = demolib.load_report(work / "reports" / "latest")
    return {h["host"]: h for h in data["hosts"]}


@pytest.fixture(scope="module")
def runs(demo_hosts, tmp_path_factory):
    found = {_short(n): h for n, h in demo_hosts.items()}
    assert "02" in found and "04" in found, "the demo fleet lacks host 02 or 04: make demo starts five"
    h02, h04 = found["02"], found["04"]
    work = tmp_path_factory.mktemp("failure-stays")
    (work / "facts").mkdir()
    cached = [p for p in (demolib.ROOT / ".cache" / "facts").glob("*") if p.name.endswith((h02.name, h04.name))]
    for path in cached:
        shutil.copy(path, work / "facts" / path.name)
    assert len(cached) >= 2, "make demo left no cached facts for %s and %s" % (h02.name, h04.name)
    broken = demolib.temp_inventory(work / "inv-broken", {h02.name: dict(h02.vars, gpufleet_torch_enabled=True),
                                                          h04.name: h04.vars})
    steps = {}
    for name, inventory, playbook, args in (
            ("refused", broken, "site.yml", TAGS),
            ("others", broken, "site.yml", TAGS + ("--limit", h04.name)),
            ("report", broken, "playbooks/report.yml", ())):
        proc = demolib.playbook(inventory, playbook, work, *args)
        steps[name] = proc
        if name.startswith("report"):
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
            steps[name + "_hosts"] = _report(work)
    return {"steps": steps, "h02": h02.name, "h04": h04.name}


def test_site_refuses_the_2004_host_and_runs_on_the_other(runs):
    steps = runs["steps"]
    assert steps["refused"].returncode == 2, steps["refused"].stdout[-3000:]
    assert steps["others"].returncode == 0, steps["others"].stdout[-3000:]


def test_report_alone_after_a_run_on_other_hosts_keeps_the_failure(runs):
    hosts = runs["steps"]["report_hosts"]
    h02 = hosts[runs["h02"]]
    assert h02["action"] != "keep" and h02["action"] is not None, h02["verdict"]
    assert h02["verdict"].startswith("fix here: playbook failed: "), h02["verdict"]
    assert "(in the run started " in h02["verdict"] + " ".join(h02["reasons"]), h02["reasons"]
    (failed,) = [f for f in h02["judgement"] if f["code"] == "playbook_failed"]
    assert "torch" in (failed["evidence"]["failed_in"] or ""), failed
    assert hosts[runs["h04"]]["verdict"] == "keep", hosts[runs["h04"]]["verdict"]

