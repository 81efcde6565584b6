"""playbooks/acquire.yml's loop (controller/providers/acquire.py, scripts/acquire) against the provider stand-in.

No container here: the stand-in's rented offers point at a port nobody needs to answer, and the pre-check is a
function that returns fleet.json host records. What is held: plan vs confirm, the budget refusal, the labels in
each provider's create shape, a re-run that rents nothing, an offer taken in between, a failed create that left an
instance (found by label, given back), nothing given back without the run's label, hard vs soft failures, and the
key in no output or file.
"""

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "module_utils"))
from gpufleet.controller.providers import ProviderError, acquire, offers  # noqa: E402
from gpufleet.controller.providers import fetch_json as provider_api_fetch  # noqa: E402

from tests.doubles import provider_api  # noqa: E402

KEY = "gpufleet-acquire-unit-KEY-93c1"
BUILD = "2.9.1+cu130"
REQ = {"torch": BUILD, "driver_floor": "580.65.06"}


def _vast_offers(n=5):
    return {"offers": [provider_api._vast_offer(8100 + i, 6100 + i, "RTX 5090", 1200, 32607, "580.95.05", 13.0,
                                                0.30 + i / 100.0, 0.99) for i in range(1, n + 1)]}


@pytest.fixture
def vast():
    def make(faults=None, answer=None, n=5):
        rentals = {str(8100 + i): {"port": 2390 + i} for i in range(1, n + 1)}
        api = provider_api.ProviderAPI("vastai", answer or {"instances": [], "next_token": None}, key=KEY,
                                       offers=_vast_offers(n), rentals=rentals, faults=faults).start()
        made.append(api)
        return api
    made = []
    yield make
    for api in made:
        api.stop()


def _ranked(api):
    req = offers.requirement(offers.build_of(BUILD))
    result = offers.search(req, offers.filters_of({}), {"vastai": {"url": api.offers_url, "key": KEY}})
    return acquire.kept_offers(result)


def _checker(verdicts, calls=None):
    """check(records) -> fleet.json hosts: verdicts {offer machine id: [host record per look]} (the last repeats)."""
    seen = {}

    def check(records):
        out = {}
        for rec in records:
            looks = verdicts.get(str(rec["machine_id"]), [{"action": None, "verdict": "keep"}])
            n = seen.get(rec["id"], 0)
            seen[rec["id"]] = n + 1
            out["vast-%s" % rec["id"]] = dict(looks[min(n, len(looks) - 1)], driver_version="580.95.05")
        if calls is not None:
            calls.append(sorted(out))
        return out
    return check


def _request(want=2, **budget):
    b = {"max_rentals": 4, "max_price_per_hour": 5.0, "deadline_s": 60}
    b.update(budget)
    return {"id": "unit", "want": want, "budget": b, "requirement": REQ, "ssh_wait_s": 5, "recheck_wait_s": 0,
            "ssh_probe": None}


def _run(api, check, confirm=True, previous=None, **kw):
    client = acquire.Provider("vastai", api.api_url, KEY, retries=0)
    return acquire.run(_request(**kw), {"vastai": client}, _ranked(api), check, confirm=confirm, previous=previous,
                       sleep=lambda s: None, log=lambda t: None)


def _writes(api):
    return [c for c in api.calls if c["method"] in ("PUT", "DELETE", "POST") and "bundles" not in c["path"]]


HARD = {"action": "return to provider", "verdict": "return to provider: container started without GPUs",
        "judgement": [{"code": "container_without_gpus", "source": "doctor", "action": "return to provider"}]}
TENANT = {"action": "return to provider", "verdict": "return to provider: GPU 0 runs 3 process(es) not of this host",
          "judgement": [{"code": "gpu_used_by_another_tenant", "source": "doctor", "action": "return to provider"}]}
SOFT = {"action": "return to provider", "verdict": "return to provider: bf16 GEMM 40% below its floor",
        "judgement": [{"code": "gate_bf16_gemm_below_floor", "source": "gate", "action": "return to provider"}]}
KEEP = {"action": None, "verdict": "keep"}


def test_plan_rents_nothing(vast):
    api = vast()
    report = _run(api, _checker({}), confirm=False)
    assert [p["offer"] for p in report["plan"]] == ["8101", "8102"]
    assert report["plan_price_per_hour"] == pytest.approx(0.63)
    assert not _writes(api) and report["stopped"].startswith("plan only")


def test_a_confirmed_run_needs_the_whole_budget():
    assert acquire.budget_problems({}, False) == []
    problems = acquire.budget_problems({"max_rentals": 3}, True)
    assert len(problems) == 2 and "max_price_per_hour" in problems[0] and "deadline_s" in problems[1]
    assert acquire.budget_problems({"max_rentals": 0, "max_price_per_hour": "x", "deadline_s": 9}, True)


def test_the_script_refuses_a_confirmed_run_without_budget_before_any_call(vast):
    api = vast()
    env = dict(os.environ, VAST_API_KEY=KEY)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "acquire"), "--torch", BUILD, "--want", "2",
                           "--providers", "vastai", "--vastai-url", api.offers_url, "--vastai-api-url", api.api_url,
                           "--confirm", "--max-rentals", "2"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "max_price_per_hour is not set" in proc.stderr
    assert api.calls == [] and KEY not in proc.stdout + proc.stderr


def test_labels_in_each_providers_create_shape():
    vast = acquire.create_request("vastai", "http://127.0.0.1:1/api/v1/instances/", {"id": "7001"}, "L", "i", {})
    assert vast[:2] == ("PUT", "http://127.0.0.1:1/api/v0/asks/7001/") and vast[2]["label"] == "L"
    assert vast[2]["cancel_unavail"] is True and vast[2]["env"] == {acquire.ENV_NAME: "i"}
    pod = acquire.create_request("runpod", "https://api.runpod.io/v2/pods", {"id": "NVIDIA H200/SECURE",
                                                                             "gpu_count": 1}, "L", "i", {})
    assert pod[:2] == ("POST", "https://rest.runpod.io/v1/pods")
    assert pod[2]["name"] == "L" and pod[2]["env"] == {acquire.ENV_NAME: "i"}
    assert pod[2]["gpuTypeIds"] == ["NVIDIA H200"]
    lam = acquire.create_request("lambda", "https://cloud.lambda.ai/api/v1/instances", {
        "id": "gpu_1x_h100_sxm5", "location": "us-east-1"}, "L", "i", {"lambda_ssh_key_name": "k"})
    assert lam[1] == "https://cloud.lambda.ai/api/v1/instance-operations/launch"
    assert lam[2]["name"] == "L" and lam[2]["tags"] == [{"key": acquire.ENV_NAME, "value": "i"}]
    assert lam[2]["region_name"] == "us-east-1" and lam[2]["ssh_key_names"] == ["k"]
    assert acquire.run_id({"torch": BUILD, "want": 2}) == acquire.run_id({"want": 2, "torch": BUILD})
    assert acquire.run_id({"torch": BUILD, "want": 2}) != acquire.run_id({"torch": BUILD, "want": 3})


@pytest.mark.parametrize("provider,offer", [("vastai", None), ("runpod", "NVIDIA GeForce RTX 4090/SECURE"),
                                            ("lambda", "gpu_1x_h100_sxm5")])
def test_each_provider_rents_lists_by_label_and_says_taken(provider, offer):
    answer = {"vastai": {"instances": [], "next_token": None}, "runpod": {"pods": []}, "lambda": {"data": []}}[provider]
    offer = offer or "7001"
    for fault in (None, "taken"):
        api = provider_api.ProviderAPI(provider, json.loads(json.dumps(answer)), key=KEY,
                                       offers=provider_api.offers(provider), rentals={offer: {"port": 2399}},
                                       faults={offer: fault} if fault else None).start()
        try:
            client = acquire.Provider(provider, api.api_url, KEY, retries=0)
            rec = {"id": offer, "gpu_count": 1, "location": "us-east-1"}
            status, said = client.create(rec, "gpufleet-acquire-x", "x", {"lambda_ssh_key_name": "k"})
            if fault:
                assert status == "taken", said
                assert KEY not in said
                continue
            assert status == "ok"
            ours = client.ours("gpufleet-acquire-x")
            assert [r["id"] for r in ours] == [said] and ours[0]["state"] == "ready"
            assert client.ours("someone-else") == []
            client.give_back(ours[0], "gpufleet-acquire-x")
            assert client.ours("gpufleet-acquire-x") == []
        finally:
            api.stop()


def test_want_two_gives_back_a_hard_failure_at_once_and_rents_a_replacement(vast):
    api = vast()
    calls = []
    report = _run(api, _checker({"6101": [HARD]}, calls))
    status = {r["offer"]: r["status"] for r in report["rentals"]}
    assert status == {"8101": "returned", "8102": "kept", "8103": "kept"}
    assert calls == [["vast-3001", "vast-3002"], ["vast-3003"]]  # one look only for the hard failure
    assert report["stopped"].startswith("reached") and report["good"] == 2
    assert ("DELETE", "/api/v0/instances/3001/") in [(c["method"], c["path"]) for c in api.calls]
    assert "6101" in report["excluded_machines"]


def test_another_tenant_is_hard_and_a_figure_below_floor_gets_a_second_look(vast):
    assert acquire.classify(TENANT, REQ)[0] == "return_hard"
    assert acquire.classify(SOFT, REQ)[0] == "return_soft"
    assert acquire.classify(dict(KEEP, driver_version="575.57.08"), REQ)[0] == "return_hard"
    assert acquire.classify({"action": "fix here", "verdict": "fix here: ..."}, REQ)[0] == "keep"
    api = vast()
    calls = []
    # 6101 soft once then fine: kept after the second look; 6102 soft twice: given back.
    report = _run(api, _checker({"6101": [SOFT, KEEP], "6102": [SOFT, SOFT]}, calls), want=2)
    status = {r["offer"]: r["status"] for r in report["rentals"]}
    assert status == {"8101": "kept", "8102": "returned", "8103": "kept"}
    assert calls[:2] == [["vast-3001", "vast-3002"], ["vast-3001", "vast-3002"]]
    returned = [r for r in report["rentals"] if r["status"] == "returned"][0]
    assert returned["returned_because"].startswith("failed twice") and len(returned["checks"]) == 2


def test_a_returned_machine_is_never_rented_again(vast):
    api = vast()
    report = _run(api, _checker({"6101": [HARD]}), want=1)
    # 8101's machine is back on the market after the return; the next run of the same id does not take it.
    again = _run(api, _checker({}), want=2, previous=acquire.public(report))
    assert "8101" not in [r["offer"] for r in again["rentals"] if not r.get("from_earlier_run")]


def test_a_rerun_finds_its_rentals_and_rents_nothing(vast):
    api = vast()
    report = _run(api, _checker({}))
    puts = len([c for c in api.calls if c["method"] == "PUT"])
    again = _run(api, _checker({}), previous=acquire.public(report))
    assert len([c for c in api.calls if c["method"] == "PUT"]) == puts == 2
    assert again["stopped"].startswith("reached") and all(r["from_earlier_run"] for r in again["rentals"])


def test_a_rerun_keeps_the_earlier_returns_in_its_report(vast):
    api = vast()
    report = _run(api, _checker({"6101": [HARD]}))
    again = _run(api, _checker({}), previous=acquire.public(report))
    status = {r["offer"]: r["status"] for r in again["rentals"]}
    assert status == {"8101": "returned", "8102": "kept", "8103": "kept"} and again["rentals_made"] == 3


def test_an_offer_taken_in_between_is_skipped(vast):
    api = vast(faults={"8101": "taken"})
    report = _run(api, _checker({}))
    assert [t["offer"] for t in report["taken"]] == ["8101"]
    assert sorted(r["offer"] for r in report["rentals"]) == ["8102", "8103"]
    assert report["rentals_made"] == 2  # a taken offer is no rental


def test_a_failed_create_that_left_an_instance_is_found_by_label_and_given_back(vast):
    api = vast(faults={"8101": "fails_with_instance"})
    report = _run(api, _checker({}))
    left = [r for r in report["rentals"] if r["offer"] == "8101"][0]
    assert left["status"] == "returned" and left["returned_because"] == "left by a failed create"
    assert ("DELETE", "/api/v0/instances/3001/") in [(c["method"], c["path"]) for c in api.calls]
    assert report["good"] == 2


def test_a_create_whose_retry_reads_taken_still_gives_back_what_the_first_try_left():
    # RunPod: the first try makes the pod and answers 500; the client's retry then reads "no longer any instances".
    api = provider_api.ProviderAPI("runpod", {"pods": []}, key=KEY, offers=provider_api.offers("runpod"),
                                   rentals={"NVIDIA GeForce RTX 4090/SECURE": {"port": 2399}},
                                   faults={"NVIDIA GeForce RTX 4090/SECURE": "fails_with_instance"}).start()
    try:
        client = acquire.Provider("runpod", api.api_url, KEY, retries=1)
        client.fetch = lambda *a, **kw: provider_api_fetch(*a, **dict(kw, sleep=lambda s: None))
        offer = {"provider": "runpod", "id": "NVIDIA GeForce RTX 4090/SECURE", "gpu_count": 1, "price_per_hour": 0.59,
                 "machine_id": None, "gpu_name": "RTX 4090"}
        report = acquire.run(_request(want=1), {"runpod": client}, [offer], _checker({}), confirm=True,
                             sleep=lambda s: None, log=lambda t: None)
    finally:
        api.stop()
    assert [t["offer"] for t in report["taken"]] == ["NVIDIA GeForce RTX 4090/SECURE"]
    returned = [(r["status"], r["returned_because"]) for r in report["rentals"]]
    assert returned == [("returned", "left by a failed create")]
    assert report["rentals_made"] == 1 and api.answer["pods"] == []


def test_nothing_without_the_runs_label_is_given_back(vast):
    other = {"id": 1, "machine_id": 1, "label": "my-training-run", "actual_status": "running", "num_gpus": 1,
             "gpu_name": "RTX 5090", "dph_total": 0.3, "public_ipaddr": "127.0.0.1",
             "ports": {"22/tcp": [{"HostIp": "127.0.0.1", "HostPort": "2399"}]}}
    api = vast(answer={"instances": [other], "next_token": None}, faults={"8101": "fails_with_instance"})
    client = acquire.Provider("vastai", api.api_url, KEY, retries=0)
    rec = [r for r in __import__("gpufleet.controller.providers", fromlist=["list_hosts"]).list_hosts(
        "vastai", api.api_url, KEY) if r["id"] == "1"][0]
    with pytest.raises(ProviderError, match="does not carry this run's label"):
        client.give_back(rec, "gpufleet-acquire-unit")
    _run(api, _checker({"6102": [HARD]}))
    assert "/api/v0/instances/1/" not in [c["path"] for c in api.calls if c["method"] == "DELETE"]


def test_a_box_whose_ssh_never_answers_is_given_back(vast):
    api = vast()
    client = acquire.Provider("vastai", api.api_url, KEY, retries=0)
    ticks = iter(range(0, 10000, 3))
    request = dict(_request(want=1), ssh_probe=lambda host, port: port != 2391)
    report = acquire.run(request, {"vastai": client}, _ranked(api), _checker({}), confirm=True,
                         clock=lambda: next(ticks), sleep=lambda s: None, log=lambda t: None)
    status = {r["offer"]: (r["status"], r.get("returned_because")) for r in report["rentals"]}
    assert status == {"8101": ("returned", "no SSH within the wait"), "8102": ("kept", None)}
    assert acquire.ssh_banner("127.0.0.1", 1) is False


def test_budget_stops_and_says_which(vast):
    api = vast()
    report = _run(api, _checker({"6101": [HARD]}), max_rentals=2)
    assert report["stopped"] == "budget: max_rentals 2 reached with 1 good box(es) of 2"
    assert [r["offer"] for r in report["rentals"] if r["status"] == "kept"] == ["8102"]
    api2 = vast()
    report = _run(api2, _checker({}), max_price_per_hour=0.5)
    assert report["stopped"].startswith("budget: no offer left within max_price_per_hour $0.50")
    assert report["fleet_price_per_hour"] <= 0.5


def test_keys_never_in_output_or_files(vast, tmp_path):
    api = vast(faults={"8101": "taken"})
    env = dict(os.environ, VAST_API_KEY=KEY)
    argv = [sys.executable, str(ROOT / "scripts" / "acquire"), "--torch", BUILD, "--want", "1", "--providers",
            "vastai", "--vastai-url", api.offers_url, "--vastai-api-url", api.api_url, "--report-root", str(tmp_path),
            "--id", "keys"]
    plan = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert plan.returncode == 0 and "would rent vast.ai offer 8101" in plan.stdout
    assert all(c["key_ok"] for c in api.calls)
    for root, _d, files in os.walk(str(tmp_path)):
        for name in files:
            assert KEY not in Path(root, name).read_text()
    assert KEY not in plan.stdout + plan.stderr
    out, err = io.StringIO(), io.StringIO()
    bad = acquire.Provider("vastai", "http://127.0.0.1:1/api/v1/instances/", KEY, retries=0)
    with redirect_stdout(out), redirect_stderr(err):
        status, said = bad.create({"id": "1"}, "L", "i", {})
    assert status == "failed" and KEY not in said + out.getvalue() + err.getvalue()


# ------------------------------------------------------------------------------------------- review fixes
def test_a_machine_given_back_is_not_rented_again_through_its_other_offer():
    # Two offers on one machine (6101), the machine bad: after the first goes back, the second is never rented.
    table = [(8101, 6101, 0.30), (8102, 6101, 0.31), (8103, 6103, 0.32)]
    answer = {"offers": [provider_api._vast_offer(i, m, "RTX 5090", 1200, 32607, "580.95.05", 13.0, p, 0.99)
                         for i, m, p in table]}
    api = provider_api.ProviderAPI("vastai", {"instances": [], "next_token": None}, key=KEY, offers=answer,
                                   rentals={str(i): {"port": 2390 + n} for n, (i, _m, _p) in enumerate(table)}).start()
    try:
        report = _run(api, _checker({"6101": [HARD]}), want=1)
    finally:
        api.stop()
    status = {r["offer"]: r["status"] for r in report["rentals"]}
    assert status == {"8101": "returned", "8103": "kept"}, status
    assert "8102" not in [c["path"].strip("/").split("/")[-1] for c in api.calls if c["method"] == "PUT"]


class _Unlisted(acquire.Provider):
    """A provider that never lists this run's new instances (an eventually consistent list)."""

    def ours(self, run_label):
        return []


def test_an_instance_never_listed_is_marked_return_failed_and_still_billed(vast):
    api = vast()
    client = _Unlisted("vastai", api.api_url, KEY, retries=0)
    ticks = iter(range(0, 100000, 3))
    lines = []
    report = acquire.run(_request(want=1, max_rentals=2), {"vastai": client}, _ranked(api), _checker({}),
                         confirm=True, clock=lambda: next(ticks), sleep=lambda s: None, log=lines.append)
    status = {r["offer"]: r["status"] for r in report["rentals"]}
    assert status == {"8101": "return failed", "8102": "return failed"}
    assert all("not listed" in r["returned_because"] for r in report["rentals"])
    assert any("return failed: not listed" in line for line in lines)
    assert "return failed" in acquire.to_markdown(acquire.public(report))
    assert report["rentals_made"] == 2 and report["stopped"].startswith("budget: max_rentals 2")
    assert report["fleet_price_per_hour"] == pytest.approx(0.63)  # still billed: counted against the cap
    assert not [c for c in api.calls if c["method"] == "DELETE"]


def test_an_instance_not_listed_during_the_wait_is_looked_up_by_label_and_given_back(vast, monkeypatch):
    api = vast()
    monkeypatch.setattr(acquire, "_wait_ready", lambda *a, **kw: set())  # the wait never saw it
    report = _run(api, _checker({}), want=1, max_rentals=1)
    assert [(r["status"], r["returned_because"]) for r in report["rentals"]] == [
        ("returned", "no SSH within the wait")]
    assert ("DELETE", "/api/v0/instances/3001/") in [(c["method"], c["path"]) for c in api.calls]


def _script_argv(api, tmp_path, *extra):
    return ["--torch", BUILD, "--want", "1", "--providers", "vastai", "--vastai-url", api.offers_url,
            "--vastai-api-url", api.api_url, "--report-root", str(tmp_path), "--id", "script"] + list(extra)


def test_the_script_writes_acquire_json_when_the_run_dies(vast, tmp_path, monkeypatch, load_script):
    api = vast()
    monkeypatch.setenv("VAST_API_KEY", KEY)
    monkeypatch.setattr(acquire, "ssh_banner", lambda host, port, timeout=3.0: True)
    script = load_script("acquire")

    def dying_checker(*_a):
        def check(records):
            raise RuntimeError("the pre-check crashed")
        return check
    monkeypatch.setattr(script, "_checker", dying_checker)
    with pytest.raises(RuntimeError):
        script.main(_script_argv(api, tmp_path, "--confirm", "--max-rentals", "2", "--max-price-per-hour", "5",
                                 "--deadline-s", "60", "--ssh-wait-s", "5"))
    data = json.loads((tmp_path / "acquire-script" / "acquire.json").read_text())
    assert data["rentals_made"] == 1 and data["stopped"].startswith("error:") and "crashed" in data["stopped"]
    assert [r["id"] for r in data["rentals"]] == ["3001"] and "rec" not in data["rentals"][0]
    assert KEY not in json.dumps(data)


def test_the_script_sends_runpod_the_builds_cuda_versions(vast, tmp_path, monkeypatch, load_script):
    api = vast()
    monkeypatch.setenv("VAST_API_KEY", KEY)
    script = load_script("acquire")
    seen, real = {}, acquire.run

    def spy(request, *a, **kw):
        seen.update(request)
        return real(request, *a, **kw)
    monkeypatch.setattr(acquire, "run", spy)
    assert script.main(_script_argv(api, tmp_path)) == 0
    assert seen["cfg"]["cuda_versions"] == ["13.0"]
    body = acquire.create_request("runpod", None, {"id": "NVIDIA H200/SECURE", "gpu_count": 1}, "L", "i",
                                  seen["cfg"])[2]
    assert body["allowedCudaVersions"] == ["13.0"]
    req = offers.requirement("2.9.1+cu128")
    assert acquire.cuda_versions(req, offers.filters_of({})) == ["12.8", "12.9", "13.0"]


def test_only_a_keep_verdict_is_kept_an_unknown_one_is_checked_again_then_returned(vast):
    assert acquire.classify({"action": None, "verdict": "keep (note: ECC off)"}, REQ)[0] == "keep"
    assert acquire.classify({"action": "keep"}, REQ)[0] == "keep"
    assert acquire.classify({"action": None}, REQ)[0] == "return_soft"
    assert acquire.classify({}, REQ)[0] == "return_soft"
    assert acquire.classify({"action": "", "verdict": "keeper?"}, REQ)[0] == "return_soft"
    assert None not in acquire.KEPT_ACTIONS and "" not in acquire.KEPT_ACTIONS
    api = vast()
    calls = []
    report = _run(api, _checker({"6101": [{"action": None}]}, calls), want=1)
    first = [r for r in report["rentals"] if r["offer"] == "8101"][0]
    assert first["status"] == "returned" and first["returned_because"].startswith("failed twice")
    assert calls[:2] == [["vast-3001"], ["vast-3001"]] and report["good"] == 1


def test_an_offer_without_a_price_is_never_rented(vast):
    api = vast()
    ranked = _ranked(api)
    ranked[0] = dict(ranked[0], price_per_hour=None)
    lines = []
    client = acquire.Provider("vastai", api.api_url, KEY, retries=0)
    plan = acquire.run(_request(want=1), {"vastai": client}, ranked, _checker({}), confirm=False,
                       sleep=lambda s: None, log=None)
    assert [p["offer"] for p in plan["plan"]] == ["8102"]
    report = acquire.run(_request(want=1), {"vastai": client}, ranked, _checker({}), confirm=True,
                         sleep=lambda s: None, log=lines.append)
    assert [r["offer"] for r in report["rentals"]] == ["8102"]
    assert any("offer vast.ai 8101 lists no price: not rented" in line for line in lines)


def test_a_found_rental_without_a_price_stops_the_renting(vast):
    found = {"id": 3999, "machine_id": 6999, "label": "gpufleet-acquire-unit", "actual_status": "running",
             "num_gpus": 1, "gpu_name": "RTX 5090", "public_ipaddr": "127.0.0.1",
             "ports": {"22/tcp": [{"HostIp": "127.0.0.1", "HostPort": "2399"}]}}
    api = vast(answer={"instances": [found], "next_token": None})
    report = _run(api, _checker({}), want=2)
    assert not [c for c in api.calls if c["method"] == "PUT"]
    assert "price of vast-3999 is not known" in report["stopped"]
    assert report["fleet_price_unknown"] == ["vast-3999"] and report["good"] == 1


def test_the_playbook_passes_the_history_as_offers_yml_does():
    import yaml
    play = yaml.safe_load((ROOT / "playbooks" / "acquire.yml").read_text())[0]
    argv = play["tasks"][0]["ansible.builtin.set_fact"]["__acq_argv"]
    offers_play = (ROOT / "playbooks" / "offers.yml").read_text()
    line = "offers_history | default(gpufleet_history_file | default("
    assert line in offers_play and line + "__acq_root ~ '/history.json'))" in argv
    assert "a.extend(['--history', hist])" in argv and "a.extend(['--known-bad', bad])" in argv
