"""The GPU history across two demo runs (module_utils/gpufleet/controller/judgement/history.py, docs/history.md).

playbooks/facts.yml runs twice on demo hosts 04 (8x H100, healthy) and 05 (4x A100, to be returned) from a
temporary inventory and report folder, as a renter would run it a day apart:

- between the runs GPU 0 of host 04 gets another UUID in the fake NVML profile the host loads
  (/etc/gpufleet-fake-nvml/profile.json, put back in a finally block): the second report must flag the swap,
  naming the UUID that left and the one that came;
- host 05 carries a provider machine id (gpufleet_provider_machine_id, as the vast.ai plugin sets it; the demo
  inventory has none) and comes back in the second run under a new inventory name, as a box returned and rented
  again: the second report must flag it as returned before and say "return to provider".

The judge is the report the playbooks write; the changes are made on the hosts over SSH, never in the code under
test. About a minute: two facts.yml runs on two hosts.
"""

import json

import demolib
import pytest

PROFILE = "/etc/gpufleet-fake-nvml/profile.json"
SAVED = PROFILE + ".gpufleet-e2e-history"
NEW_UUID = "GPU-e2e0b5a1-7c3d-4e2f-9a8b-1c2d3e4f5a6b"
MACHINE = "demo-m05"
AGAIN = "gpufleet-demo-05-again"


def _short(name):
    return name.rsplit("-", 1)[-1]


@pytest.fixture(scope="module")
def pair(demo_hosts):
    found = {_short(n): h for n, h in demo_hosts.items()}
    missing = [k for k in ("04", "05") if k not in found]
    assert not missing, "the demo fleet lacks hosts %s: make demo starts five" % missing
    return found["04"], found["05"]


def _facts(inventory, reports, tmp):
    proc = demolib.playbook(inventory, "playbooks/facts.yml", tmp, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    data, _ = demolib.load_report(reports / "latest")
    return {h["host"]: h for h in data["hosts"]}


@pytest.fixture(scope="module")
def two_runs(pair, tmp_path_factory):
    h04, h05 = pair
    tmp = tmp_path_factory.mktemp("history")
    reports = tmp / "reports"
    with_machine = dict(h05.vars, gpufleet_provider_machine_id=MACHINE)
    first = _facts(demolib.temp_inventory(tmp / "inv1", {h04.name: h04.vars, h05.name: with_machine}), reports, tmp)
    old_uuid = next(g["uuid"] for g in first[h04.name]["gpus"] if g["index"] == 0)
    h04.run("cp -p %s %s" % (PROFILE, SAVED))
    try:
        h04.run("sed -i 's/%s/%s/' %s" % (old_uuid, NEW_UUID, PROFILE))
        second = _facts(demolib.temp_inventory(tmp / "inv2", {h04.name: h04.vars, AGAIN: with_machine}), reports, tmp)
    finally:
        h04.run("mv -f %s %s" % (SAVED, PROFILE))
    return {"first": first, "second": second, "old_uuid": old_uuid, "h04": h04.name, "h05": h05.name,
            "history": json.loads((reports / "history.json").read_text())}


def test_the_first_run_starts_the_history(two_runs):
    first, h05 = two_runs["first"], two_runs["h05"]
    assert first[h05]["action"] == "return to provider", first[h05]["reasons"]
    assert all(h["history"] == [] for h in first.values())
    assert first[h05]["checklist"]["history"]["status"] == "fail"  # to be returned: goes on the list
    assert first[two_runs["h04"]]["checklist"]["history"]["status"] == "ok"


def test_the_second_report_flags_the_swapped_gpu(two_runs):
    host = two_runs["second"][two_runs["h04"]]
    swaps = [f for f in host["history"] if f["code"] == "gpu_swapped"]
    assert len(swaps) == 1, host["history"]
    assert swaps[0]["left"] == [two_runs["old_uuid"]] and swaps[0]["came"] == [NEW_UUID]
    assert any(r.startswith("history: GPU swapped") and NEW_UUID in r for r in host["reasons"])
    assert host["checklist"]["history"]["status"] == "warn"


def test_the_second_report_flags_the_box_returned_before(two_runs):
    host = two_runs["second"][AGAIN]
    bad = [f for f in host["history"] if f["code"] == "known_bad"]
    assert len(bad) == 1, host["history"]
    assert "machine::%s" % MACHINE in bad[0]["matched"] and bad[0]["was_host"] == two_runs["h05"]
    assert bad[0]["message"].startswith("returned before: machine %s" % MACHINE)
    assert host["action"] == "return to provider" and host["checklist"]["history"]["status"] == "fail"
    recorded = two_runs["history"]
    assert {two_runs["h04"], two_runs["h05"], AGAIN} <= set(recorded["hosts"])
    assert recorded["gpus"][NEW_UUID]["seen_on"][0]["host"] == two_runs["h04"]
