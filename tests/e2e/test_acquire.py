"""playbooks/acquire.yml end to end: want 2 good boxes from a provider stand-in that hands out containers.

The vast.ai stand-in (tests/doubles/provider_api.py) serves offers and rents them (``PUT /api/v0/asks/{id}/``, the
run's label on each instance); each rented offer answers SSH as a container of tests/doubles/rental_pool.py of a
given quality: the cheapest offer is a box whose GPUs are lost, the next is taken in between (404 no_such_ask), the
two after it are good. The real playbooks/check.yml judges each box over SSH (check_probe=false: the torch on the
boxes is the torch test double). Want 2: rents the lost box and a good one, gives the lost one back, rents a
replacement, ends with 2 good boxes, hosts.yml and the report; a second run rents nothing; a run with a budget of 2
rentals stops at the budget, keeps the good box and says so. No key is in any output or file.
"""

import json
import os
import subprocess
import sys

import demolib
import pytest
import yaml

sys.path.insert(0, str(demolib.ROOT))
from tests.doubles import provider_api, rental_pool  # noqa: E402

BIN = demolib.ROOT / ".venv" / "bin"
KEY = "gpufleet-acquire-e2e-KEY-5d1e9a"
BUILD = rental_pool.TORCH
# The offers: (id, machine, price, quality of the box it maps to, fault)
OFFERS = [(8101, 6101, 0.30, "lost_gpu", None), (8102, 6102, 0.31, "good", "taken"),
          (8103, 6103, 0.32, "good", None), (8104, 6104, 0.33, "good2", None)]


# A second market: a listing that claims driver 580 on a box whose driver is 575 (too old for the cu130 build), a box
# whose power limit was lowered (a figure below its floor), then the two good boxes.
OFFERS_HARD_SOFT = [(8201, 6201, 0.30, "old_driver", None), (8202, 6202, 0.31, "slow", None),
                    (8203, 6203, 0.32, "good", None), (8204, 6204, 0.33, "good2", None)]


def _offers(table=OFFERS):
    return {"offers": [provider_api._vast_offer(i, m, "RTX 5090", 1200, 32607, "580.95.05", 13.0, price, 0.99)
                       for i, m, price, _q, _f in table]}


@pytest.fixture(scope="module")
def pool():
    p = rental_pool.RentalPool(prefix="gpufleet-acq", base_port=2300)
    why = p.missing()
    if why:
        pytest.skip(why)
    boxes = p.start(["lost_gpu", "good", "good", "old_driver", "slow"])
    try:
        yield dict(zip(["lost_gpu", "good", "good2", "old_driver", "slow"], boxes))
    finally:
        p.stop()


@pytest.fixture
def api(pool):
    """A fresh vast.ai stand-in per test: its offers mapped to the pool's boxes, 8102 taken in between."""
    rentals = {str(i): {"port": pool[q]["port"]} for i, _m, _p, q, _f in OFFERS}
    faults = {str(i): f for i, _m, _p, _q, f in OFFERS if f}
    stand_in = provider_api.ProviderAPI("vastai", {"instances": [], "next_token": None}, key=KEY, offers=_offers(),
                                        rentals=rentals, faults=faults).start()
    yield stand_in
    stand_in.stop()


def _play(api, tmp, *extra):
    env = {k: v for k, v in os.environ.items()
           if "proxy" not in k.lower() and not k.startswith("ANSIBLE_") and k not in provider_api.ENV_KEYS.values()}
    env.update(ANSIBLE_CONFIG=str(demolib.ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", VAST_API_KEY=KEY,
               PATH="%s:%s" % (BIN, env.get("PATH", "")))
    argv = [str(BIN / "ansible-playbook"), "playbooks/acquire.yml", "-e", "gpufleet_report_dir=%s" % tmp,
            "-e", "acquire_torch=%s" % BUILD, "-e", "acquire_providers=vastai",
            "-e", "offers_vastai_api_url=%s" % api.offers_url, "-e", "acquire_vastai_api_url=%s" % api.api_url,
            "-e", "acquire_ssh_key=%s" % rental_pool.KEY, "-e", "acquire_ssh_user=root",
            "-e", "acquire_check_probe=false", "-e", "acquire_check_deadline_s=40", "-e", "acquire_recheck_wait_s=1",
            "-e", "acquire_check_box=false"]
    proc = subprocess.run(argv + list(extra), cwd=str(demolib.ROOT), env=env, capture_output=True, text=True,
                          timeout=300)
    assert KEY not in proc.stdout + proc.stderr
    for root, _dirs, files in os.walk(str(tmp)):
        for name in files:
            if name.endswith((".json", ".md", ".yml", ".log")):
                with open(os.path.join(root, name), errors="replace") as f:
                    assert KEY not in f.read(), os.path.join(root, name)
    return proc


CONFIRM = ["-e", "gpufleet_acquire_confirm=yes", "-e", "acquire_max_price_per_hour=2.00",
           "-e", "acquire_deadline_s=240"]


def test_plan_rents_nothing_and_confirm_needs_a_budget(api, tmp_path):
    proc = _play(api, tmp_path, "-e", "acquire_want=2")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "would rent vast.ai offer 8101" in proc.stdout and "would rent vast.ai offer 8102" in proc.stdout
    refused = _play(api, tmp_path, "-e", "acquire_want=2", "-e", "gpufleet_acquire_confirm=yes")
    assert refused.returncode != 0 and "max_rentals is not set" in refused.stdout
    assert not [c for c in api.calls if c["method"] in ("PUT", "DELETE")]


def test_want_two_replaces_the_bad_box_and_a_rerun_rents_nothing(api, tmp_path, pool):
    proc = _play(api, tmp_path, "-e", "acquire_want=2", "-e", "gpufleet_acquire_id=e2e", "-e",
                 "acquire_max_rentals=4", *CONFIRM)
    assert proc.returncode == 0, proc.stdout[-4000:]
    out = proc.stdout
    assert "was taken in between" in out and "gave back vast.ai 3001 (machine 6101): hard failure" in out
    assert "rented vast.ai offer 8104" in out and "reached: 2 good box(es) of 2 wanted" in out
    run = tmp_path / "acquire-e2e"
    report = json.loads((run / "acquire.json").read_text())
    status = {r["offer"]: r["status"] for r in report["rentals"]}
    assert status == {"8101": "returned", "8103": "kept", "8104": "kept"}, status
    assert report["good"] == 2 and "6101" in report["excluded_machines"]
    assert "| returned: hard failure" in (run / "acquire.md").read_text()
    inv = yaml.safe_load((run / "hosts.yml").read_text())
    hosts = inv["acquired"]["hosts"]
    assert sorted(hosts) == ["vast-3002", "vast-3003"]
    assert {h["ansible_port"] for h in hosts.values()} == {pool["good"]["port"], pool["good2"]["port"]}
    listed = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(run / "hosts.yml"), "--list"],
                            capture_output=True, text=True, cwd=str(demolib.ROOT), check=True)
    assert "vast-3002" in listed.stdout
    puts = [c for c in api.calls if c["method"] == "PUT"]
    assert all(c["body"]["label"] == "gpufleet-acquire-e2e" for c in puts)
    again = _play(api, tmp_path, "-e", "acquire_want=2", "-e", "gpufleet_acquire_id=e2e", "-e",
                  "acquire_max_rentals=4", *CONFIRM)
    assert again.returncode == 0, again.stdout[-3000:]
    assert len([c for c in api.calls if c["method"] == "PUT"]) == len(puts)
    assert "reached: 2 good box(es) of 2 wanted" in again.stdout
    report = json.loads((run / "acquire.json").read_text())
    assert {r["offer"]: r["status"] for r in report["rentals"]} == {"8101": "returned", "8103": "kept", "8104": "kept"}


def test_budget_of_two_rentals_stops_and_keeps_the_good_one(api, tmp_path):
    proc = _play(api, tmp_path, "-e", "acquire_want=2", "-e", "gpufleet_acquire_id=budget", "-e",
                 "acquire_max_rentals=2", *CONFIRM)
    assert proc.returncode != 0
    assert "budget: max_rentals 2 reached with 1 good box(es) of 2" in proc.stdout, proc.stdout[-4000:]
    run = tmp_path / "acquire-budget"
    hosts = yaml.safe_load((run / "hosts.yml").read_text())["acquired"]["hosts"]
    assert list(hosts) == ["vast-3002"]
    assert json.loads((run / "acquire.json").read_text())["stopped"].startswith("budget: max_rentals 2")


def test_a_driver_too_old_goes_back_at_once_and_a_slow_box_after_a_second_look(pool, tmp_path):
    rentals = {str(i): {"port": pool[q]["port"]} for i, _m, _p, q, _f in OFFERS_HARD_SOFT}
    api = provider_api.ProviderAPI("vastai", {"instances": [], "next_token": None}, key=KEY,
                                   offers=_offers(OFFERS_HARD_SOFT), rentals=rentals).start()
    try:
        proc = _play(api, tmp_path, "-e", "acquire_want=2", "-e", "gpufleet_acquire_id=hardsoft", "-e",
                     "acquire_max_rentals=4", *CONFIRM)
    finally:
        api.stop()
    assert proc.returncode == 0, proc.stdout[-4000:]
    report = json.loads((tmp_path / "acquire-hardsoft" / "acquire.json").read_text())
    by_offer = {r["offer"]: r for r in report["rentals"]}
    old, slow = by_offer["8201"], by_offer["8202"]
    assert old["status"] == "returned" and len(old["checks"]) == 1
    assert old["returned_because"].startswith("hard failure: driver 575.57.08 cannot run torch 2.9.1+cu130")
    assert slow["status"] == "returned" and len(slow["checks"]) == 2
    assert slow["returned_because"].startswith("failed twice") and "power limit" in slow["returned_because"]
    assert by_offer["8203"]["status"] == by_offer["8204"]["status"] == "kept"
    assert "soft failure on vast-3002: a second look" in proc.stdout
