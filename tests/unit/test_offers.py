"""Offers that can run a torch build (controller/providers/offers.py, scripts/offers; issue 52).

The requirement of a build comes from the torch table (driver floor, CUDA version, the architectures its wheels
carry); every offer that cannot run it, or misses a filter, is left out with its reason; the rest is ranked by
$ per dense BF16 TFLOP-hour; the filter for each provider's own CLI and API is printed. A provider whose answer is
malformed or cut short reads "failed" in ``queried``, never as an empty "nothing matched", and the API key is in
no output. The HTTP cases run against the loopback stand-in (tests/doubles/provider_api.py).
"""

import copy
import json
import sys
from pathlib import Path

import pytest
from gpufleet.controller.providers import client, offers

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.doubles import provider_api  # noqa: E402 - after the line above

KEY = "gpufleet-offers-KEY-5d02a9e1"
CU130 = "2.9.1+cu130"


def _vast(**changes):
    """One good vast.ai offer for a cu130 build (an RTX 4090 on driver 580.95.05), with changes."""
    offer = copy.deepcopy(provider_api.offers("vastai")["offers"][0])
    offer.update(changes)
    return offer


def _judge(offer_answer, provider="vastai", build=CU130, bad=None, **filters):
    req = offers.requirement(build, filters.pop("driver_security", False))
    f = offers.filters_of(filters)
    if provider == "vastai":
        recs = offers.vast_offers({"offers": [offer_answer]}, "u")
    elif provider == "runpod":
        recs = offers.runpod_offers({"gpus": [offer_answer]}, "u", "SECURE", f["gpus_per_box"])
    else:
        recs = offers.lambda_offers({"data": {"t": offer_answer}}, "u")
    return [offers.judge(r, req, f, bad) for r in recs]


def _reasons(*args, **kw):
    (reasons, _notes), = _judge(*args, **kw)
    return reasons


def _version(text):
    return tuple(int(p) for p in text.split("."))


# ------------------------------------------------------------------------------------------- requirement
def test_a_cu130_build_needs_driver_580_and_turing_or_newer():
    req = offers.requirement(CU130)
    assert req["cuda"] == "13.0" and req["variant"] == "cu130"
    assert _version(req["driver_floor"]) >= (580,)
    assert "sm_70" not in req["arches"] and "sm_75" in req["arches"] and "sm_120" in req["arches"]
    assert "7.0" not in req["compute_caps"] and {"7.5", "8.9", "9.0", "12.0"} <= set(req["compute_caps"])


def test_the_floor_is_the_ga_driver_of_the_cuda_version_as_the_vast_filter_means_it():
    # provider-offers.md §4: the per-minor floor is the GA driver (580.65.06 for 13.0), what cuda_max_good >= 13.0
    # means; 13.0 Update 2's 580.95.05 (the torch table's toolkit driver) is no floor.
    req = offers.requirement(CU130)
    assert req["driver_floor"] == "580.65.06" and req["toolkit_driver"] == "580.95.05"
    assert "GA driver of CUDA 13.0" in req["driver_floor_kind"]
    assert _reasons(_vast(driver_version="580.65.06", driver_vers=580065006)) == []
    assert "too old for cu130" in _reasons(_vast(driver_version="580.65.05", driver_vers=580065005))[0]
    pf = offers.provider_filters(req, offers.filters_of({}))
    assert "cuda_max_good>=13.0" in pf["vastai"]["cli"] and "driver_version>=580.65.06" in pf["vastai"]["cli"]
    assert pf["vastai"]["body"]["driver_vers"] == {"gte": 580065006}
    assert offers.requirement("2.9.1+cu126")["driver_floor"] == "560.28.03"  # 12.6 GA, not U3's 560.35.05


def test_one_malformed_optional_field_drops_that_field_not_the_list():
    good = _vast()
    odd = _vast(id=7999, inet_down="fast", disk_bw=[1], inet_up=None)
    recs = offers.vast_offers({"offers": [good, odd]}, "u")
    assert [r["id"] for r in recs] == ["7001", "7999"]
    assert recs[0]["inet_down_mbps"] == 850.0 and recs[0]["notes"] == []
    assert recs[1]["inet_down_mbps"] is None and recs[1]["disk_bw_mbs"] is None
    assert any("malformed inet_down" in n for n in recs[1]["notes"])
    assert any("malformed disk_bw" in n for n in recs[1]["notes"])
    with pytest.raises(offers.ProviderDataError):  # a field a filter reads still fails the answer
        offers.vast_offers({"offers": [_vast(dph_total="cheap")]}, "u")


def test_the_down_column_says_it_is_vasts_figure():
    result = _search({"vastai": provider_api.vast_search(provider_api.offers("vastai"), {"num_gpus": {"eq": 1}})})
    assert "down (vast's figure)" in "\n".join(offers.lines(result))
    assert "| down (vast's figure) |" in offers.to_markdown(result)


def test_a_cu128_build_needs_driver_570_and_its_arch_list():
    req = offers.requirement("2.9.1+cu128")
    assert req["cuda"] == "12.8" and (570,) <= _version(req["driver_floor"]) < (580,)
    assert "sm_70" in req["arches"] and "7.0" in req["compute_caps"]  # 2.9's cu128 still carries Volta
    assert "7.0" not in offers.requirement("2.11.0+cu128")["compute_caps"]  # 2.11's dropped it


def test_auto_is_the_newest_build_and_a_series_alone_takes_its_patch():
    req = offers.requirement("auto")
    assert req["torch"] == offers.newest_build() and req["series"] == offers.torchtable.RELEASES[-1]["series"]
    assert offers.build_of("2.9+cu130")["torch"] == "2.9.0+cu130"
    assert offers.requirement(CU130)["driver_security"]["required"] is False
    assert "R580" in offers.requirement(CU130, True)["driver_security"]["floors"]


@pytest.mark.parametrize("build, said", [
    ("2.9.1", "not a torch CUDA build"), ("2.9.1+cpu", "not a torch CUDA build"),
    ("2.99.0+cu130", "not in the torch table"), ("2.9.1+cu121", "no cu121 build"), ("", "not a torch CUDA build")])
def test_a_build_the_table_does_not_know_is_refused(build, said):
    with pytest.raises(offers.OffersInputError, match=said):
        offers.build_of(build)


def test_filters_are_checked_all_at_once():
    with pytest.raises(offers.OffersInputError) as err:
        offers.filters_of({"gpus_per_box": 0, "min_reliability": 1.5, "gpu_models": ["NoSuchGPU"],
                           "min_class": "kepler", "max_price_per_hour": "cheap", "driver_security": "maybe"})
    for said in ("offers_gpus_per_box", "offers_min_reliability", "NoSuchGPU", "offers_min_class",
                 "offers_max_price_per_hour", "offers_driver_security"):
        assert said in str(err.value)
    f = offers.filters_of({"gpu_models": "H100, RTX 4090", "min_reliability": "0.98", "driver_security": "yes"})
    assert f["gpu_models"] == ["H100", "RTX 4090"] and f["min_reliability"] == 0.98 and f["driver_security"]


@pytest.mark.parametrize("name, model", [
    ("RTX 4090", "RTX 4090"), ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("H100 SXM", "H100 SXM"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("H100 (80 GB SXM5)", "H100 SXM"), ("H100 PCIE", "H100 PCIe"),
    ("A100 (40 GB PCIe)", "A100 PCIe"), ("NVIDIA A100-SXM4-80GB", "A100 SXM4"), ("Tesla V100", "V100"),
    ("RTX PRO 6000 WS", "RTX PRO 6000"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000"),
    ("H200", "H200"), ("A10 (24 GB PCIe)", "A10"), ("GH200 (96 GB)", "GH200")])
def test_provider_gpu_names_map_to_one_model(name, model):
    assert offers.model_of(name)["model"] == model


def test_a_family_name_means_every_model_of_it():
    assert {m["model"] for m in offers.models_matching("H100")} == {"H100 SXM", "H100 PCIe", "H100 NVL"}
    assert [m["model"] for m in offers.models_matching("RTX 4090")] == ["RTX 4090"]


# ------------------------------------------------------------------------------------------- exclusion reasons
def test_a_good_offer_is_kept_with_its_figures():
    (reasons, notes), = _judge(_vast())
    assert reasons == [] and notes == []
    rec = offers.vast_offers({"offers": [_vast()]}, "u")[0]
    figures = (rec["vram_gb"], rec["compute_cap"], rec["driver"], rec["cuda_max_good"])
    assert figures == (24.6, "8.9", "580.95.05", "13.0")
    assert rec["bf16_tflops"] == 165.2 and rec["usd_per_tflop_hour"] == pytest.approx(0.40 / 165.2, rel=1e-4)


@pytest.mark.parametrize("changes, said", [
    ({"driver_version": "570.124.06", "cuda_max_good": 12.8}, "driver: 570.124.06 and cuda_max_good 12.8"),
    ({"driver_version": "575.57.08"}, "driver: 575.57.08 too old for cu130"),
    ({"driver_version": None, "driver_vers": None, "cuda_max_good": 12.2}, "driver: cuda_max_good 12.2"),
    ({"driver_version": None, "driver_vers": None, "cuda_max_good": None}, "neither driver_version nor"),
    ({"gpu_name": "Tesla V100", "compute_cap": 700}, "architecture: V100 is sm_70 (Volta)"),
    ({"dph_total": 0.9}, "price $0.9/h is above offers_max_price_per_hour 0.5"),
    ({"gpu_ram": 16000}, "VRAM 16 GB per GPU is below offers_min_vram_gb 20"),
    ({"disk_space": 50.0}, "disk 50 GB is below offers_min_disk_gb 100"),
    ({"reliability": 0.9}, "reliability 0.9 is below offers_min_reliability 0.95"),
    ({"gpu_name": "Mystery 9000", "compute_cap": None}, "not in gpufleet's model table"),
])
def test_each_reason(changes, said):
    reasons = _reasons(_vast(**changes), max_price_per_hour=0.5, min_vram_gb=20, min_disk_gb=100,
                       min_reliability=0.95)
    assert len(reasons) == 1 and said in reasons[0], reasons


def test_geforce_gets_no_forward_compatibility_and_a_datacenter_card_is_not_counted_either():
    geforce = _reasons(_vast(driver_version="550.127.05", cuda_max_good=12.4))
    h100 = _reasons(_vast(gpu_name="H100 SXM", compute_cap=900, gpu_ram=81559, driver_version="550.127.05",
                          cuda_max_good=12.4))
    assert "GeForce card: no forward compatibility" in geforce[0]
    assert "forward compatibility through cuda-compat is not counted" in h100[0]


def test_known_bad_by_machine_id_and_by_vast_host_id(tmp_path):
    bad_file = tmp_path / "known-bad.json"
    bad_file.write_text(json.dumps({"machines": [{"provider": "vastai", "machine_id": "4101", "why": "Xid 79"},
                                                 {"provider": "vastai", "host_id": "777", "why": "slow disks"}]}))
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"schema": 1, "known_bad": {"rental:vastai:9": {
        "provider": "vastai", "provider_id": "9", "machine_id": "4200", "reasons": ["GPU lost"]}}}))
    bad, warnings = offers.known_bad(str(bad_file), str(history))
    assert warnings == [] or all("naming nothing usable" in w for w in warnings)
    assert "known bad: machine 4101" in _reasons(_vast(), bad=bad)[0] and "Xid 79" in _reasons(_vast(), bad=bad)[0]
    assert "known bad: host 777 " in _reasons(_vast(machine_id=1, host_id=777), bad=bad)[0]
    assert "returned before" in _reasons(_vast(machine_id=4200), bad=bad)[0]
    assert _reasons(_vast(machine_id=5), bad=bad) == []


def test_an_unusable_known_bad_file_is_a_warning_not_a_crash(tmp_path):
    (tmp_path / "kb.json").write_text("{not json")
    bad, warnings = offers.known_bad(str(tmp_path / "kb.json"), str(tmp_path / "missing.json"))
    assert bad == {} and warnings and "not usable" in warnings[0]


def test_driver_security_floor_when_asked():
    assert _reasons(_vast(), driver_security=False) == []
    said = _reasons(_vast(), driver_security=True)
    assert len(said) == 1 and said[0].startswith("driver security: driver 580.95.05 is below 580.")
    assert _reasons(_vast(driver_version="580.178.04"), driver_security=True) == []
    assert "receives no security fixes" in _reasons(_vast(driver_version="590.48.01", cuda_max_good=13.1),
                                                    driver_security=True)[0]


def test_gpu_models_count_and_class_filters():
    assert "not one of offers_gpu_models" in _reasons(_vast(), gpu_models=["H100"])[0]
    assert _reasons(_vast(gpu_name="H100 NVL", compute_cap=900), gpu_models=["H100"]) == []
    assert "older than offers_min_class hopper" in _reasons(_vast(), min_class="hopper")[0]
    assert "GPU count: 2 GPU(s) per box, asked 1" in _reasons(_vast(num_gpus=2))[0]


def test_runpod_offers_per_cloud_with_cuda_availability():
    catalog = provider_api.offers("runpod")["gpus"]
    assert _judge(catalog[0], "runpod") == [([], [])]
    rec = offers.runpod_offers({"gpus": catalog[:1]}, "u", "SECURE", 1)[0]
    assert "the host is chosen at create" in rec["notes"][0]
    (h100, _), = _judge(catalog[1], "runpod")
    assert h100 == ["driver: no SECURE host with CUDA >= 13.0 in stock for it (available: 12.4, 12.8)"]
    assert _judge(catalog[3], "runpod") == []  # the V100 is on COMMUNITY only: no SECURE offer at all
    (none, _), = _judge(catalog[4], "runpod")
    assert none == ["no capacity: RunPod lists it with no stock now"]
    rec = offers.runpod_offers({"gpus": [catalog[0]]}, "u", "COMMUNITY", 2)[0]
    assert rec["price_per_hour"] == pytest.approx(0.68) and rec["gpu_count"] == 2  # per GPU x GPUs


def test_lambda_lists_no_driver_so_the_offer_says_check_after_boot():
    types = provider_api.offers("lambda")["data"]
    (h100, notes), = _judge(types["gpu_1x_h100_sxm5"], "lambda")
    assert h100 == [] and any("Lambda lists no driver: check after boot" in n for n in notes)
    assert _judge(types["gpu_1x_a100"], "lambda")[0][0] == ["no capacity: Lambda Cloud lists it with no stock now"]
    rec = offers.lambda_offers({"data": {"x": types["gpu_8x_h100_sxm5"]}}, "u")[0]
    assert (rec["gpu_count"], rec["price_per_hour"], rec["vram_gb"]) == (8, 23.92, 80.0)


# ------------------------------------------------------------------------------------------- ranking and filters
def _fetch_from(answers):
    def fetch(provider, url, key, **kw):
        answer = answers[provider]
        if isinstance(answer, Exception):
            raise answer
        return copy.deepcopy(answer(url, kw) if callable(answer) else answer)
    return fetch


def _search(answers, build=CU130, bad=None, **filters):
    req = offers.requirement(build, filters.pop("driver_security", False))
    sources = {p: {"url": "https://example.invalid/%s" % p, "key": KEY} for p in answers}
    return offers.search(req, offers.filters_of(filters), sources, bad, fetch=_fetch_from(answers))


def test_ranked_by_dollars_per_dense_tflop_hour_unknown_figures_last():
    result = _search({"vastai": provider_api.vast_search(provider_api.offers("vastai"), {"num_gpus": {"eq": 1}})})
    kept = result["kept"]
    values = [o["usd_per_tflop_hour"] for o in kept if o["usd_per_tflop_hour"] is not None]
    assert values == sorted(values) and [o["rank"] for o in kept] == list(range(1, len(kept) + 1))
    assert kept[-1]["model"] == "RTX PRO 6000" and kept[-1]["usd_per_tflop_hour"] is None  # no spec figure
    # an H100 at $2.10 (989 TFLOPS) beats a 4090 at $0.40 (165.2); a 4090 at $0.35 beats it, and the H100 at $1.95
    # on the 13.0 GA driver (580.65.06, kept: it is the floor) beats them all
    assert [o["id"] for o in kept[:5]] == ["7012", "7011", "7004", "7014", "7001"]
    assert all(o["reason"] for o in result["excluded"]) and not any(o["reason"] for o in kept)


def test_the_filters_for_each_provider_are_printed():
    req = offers.requirement(CU130)
    f = offers.filters_of({"gpu_models": ["H100"], "max_price_per_hour": 3, "min_disk_gb": 100})
    pf = offers.provider_filters(req, f)
    cli = pf["vastai"]["cli"]
    assert cli.startswith("vastai search offers '") and "cuda_max_good>=13.0" in cli
    assert "driver_version>=%s" % req["driver_floor"] in cli and "compute_cap in [750," in cli and ",700" not in cli
    assert "gpu_name in [H100_NVL,H100_PCIE,H100_SXM]" in cli and "dph<=3" in cli and "--storage 100" in cli
    body = pf["vastai"]["body"]
    assert body["cuda_max_good"] == {"gte": 13.0} and body["driver_vers"] == {"gte": 580065006}
    assert 700 not in body["compute_cap"]["in"] and body["allocated_storage"] == 100
    assert pf["runpod"]["create_v2"]["gpu"]["minCudaVersion"] == "13.0"
    assert pf["runpod"]["v1_allowedCudaVersions"] == ["13.0"] and "minCudaVersion=13.0" in pf["runpod"]["catalog"]
    assert "lists no driver" in pf["lambda"]["note"] and req["driver_floor"] in pf["lambda"]["note"]
    assert offers.provider_filters(offers.requirement("2.9.1+cu128"), f)["runpod"]["v1_allowedCudaVersions"] == [
        "12.8", "12.9", "13.0"]
    text = "\n".join(offers.lines(_search({"vastai": {"offers": []}})))
    assert "filter, vast.ai CLI: vastai search offers" in text and 'filter, RunPod: minCudaVersion "13.0"' in text


def test_the_search_sent_to_vast_leaves_the_build_out_so_each_miss_gets_its_reason():
    body = offers.vast_query(offers.requirement(CU130), offers.filters_of({"min_reliability": 0.9}))
    assert "cuda_max_good" not in body and "driver_vers" not in body and "compute_cap" not in body
    assert body["num_gpus"] == {"eq": 1} and body["reliability"] == {"gte": 0.9} and body["rentable"] == {"eq": True}


# ------------------------------------------------------------------------------------------- failures
@pytest.mark.parametrize("answer", [
    {}, {"offers": None}, {"offers": "none"}, {"offers": [1, 2]},
    {"offers": [dict(provider_api.offers("vastai")["offers"][0], num_gpus="two")]},
    {"offers": [{"gpu_name": "RTX 4090"}]},  # no id: a cut-off item
    client.ProviderDataError("vast.ai: the answer from https://x is not valid JSON (12 bytes; malformed or truncated)"),
])
def test_a_malformed_or_partial_answer_is_a_failed_provider_not_nothing_matched(answer):
    result = _search({"vastai": answer, "lambda": provider_api.offers("lambda")})
    q = result["queried"]["vastai"]
    assert q["status"] == "failed" and q["offers"] is None and q["error"]
    assert result["queried"]["lambda"]["status"] == "ok" and offers.answered(result)
    assert not any(o["provider"] == "vastai" for o in result["kept"] + result["excluded"])
    assert "vast.ai: FAILED, its offers are unknown (not 'none')" in "\n".join(offers.lines(result))


@pytest.mark.parametrize("provider, answer", [
    ("runpod", {"gpus": [{"id": "NVIDIA H200", "price": "cheap"}]}), ("runpod", {"pods": []}),
    ("lambda", {"data": []}), ("lambda", {"data": {"t": {"instance_type": {"name": "t"}}}}),
    ("lambda", {"data": {"t": {"instance_type": provider_api.offers("lambda")["data"]["gpu_1x_a100"][
        "instance_type"]}}}),  # regions_with_capacity_available cut off
])
def test_runpod_and_lambda_partial_answers_fail_too(provider, answer):
    result = _search({provider: answer})
    assert result["queried"][provider]["status"] == "failed" and not offers.answered(result)


def test_nothing_matched_is_an_answer():
    result = _search({"vastai": {"offers": []}})
    assert result["queried"]["vastai"] == dict(result["queried"]["vastai"], status="ok", offers=0)
    assert offers.answered(result) and result["kept"] == [] and result["excluded"] == []


def test_the_key_is_scrubbed_from_a_provider_error():
    result = _search({"runpod": client.ProviderError("RunPod said: %s is not valid" % KEY)})
    assert KEY not in json.dumps(result) and "***" in result["queried"]["runpod"]["error"]


# ------------------------------------------------------------------------------------------- over HTTP
@pytest.fixture()
def stand_ins():
    with provider_api.offer_stand_ins(KEY) as apis:
        yield apis


def test_the_stand_in_serves_offers_only_when_asked():
    api = provider_api.ProviderAPI("vastai", {"instances": []}, key=KEY).start()
    try:
        with pytest.raises(client.ProviderError, match="HTTP 404"):
            client.fetch_json("vastai", api.offers_url, KEY, method="POST", body={}, retries=0)
        assert client.fetch_json("vastai", api.api_url, KEY) == {"instances": []}
    finally:
        api.stop()


def test_the_script_over_http_writes_both_files_and_no_key(stand_ins, tmp_path, monkeypatch, capsys, load_script):
    for p in stand_ins:
        monkeypatch.setenv(client.PROVIDERS[p]["env"], KEY)
    (tmp_path / "known-bad.json").write_text(json.dumps({"machines": [provider_api.KNOWN_BAD_MACHINE]}))
    script = load_script("offers")
    argv = ["--torch", CU130, "--known-bad", str(tmp_path / "known-bad.json"), "--out", str(tmp_path / "run")]
    argv += ["--%s-url=%s" % (p, api.offers_url) for p, api in stand_ins.items()]
    assert script.main(argv) == 0
    out = capsys.readouterr()
    data = json.loads((tmp_path / "run" / "offers.json").read_text())
    md = (tmp_path / "run" / "offers.md").read_text()
    assert KEY not in out.out + out.err + json.dumps(data) + md
    assert set(data) >= {"requirement", "kept", "excluded", "queried", "provider_filters"}
    assert all(q["status"] == "ok" for q in data["queried"].values())
    assert all(_version(o["driver"]) >= (580, 65, 6) for o in data["kept"] if o["driver"])
    assert any(o["reason"].startswith("known bad: machine %d" % provider_api.KNOWN_BAD_MACHINE)
               for o in data["excluded"])
    assert "## Excluded" in md and "vastai search offers" in md
    sent = [c for c in stand_ins["vastai"].calls if c["path"] == "/api/v0/bundles/"]
    assert len(sent) == 1 and sent[0]["key_ok"] and sent[0]["body"]["num_gpus"] == {"eq": 1}
    assert not any(o["gpu_count"] == 2 for o in data["kept"] + data["excluded"])  # the query was applied


def test_a_refused_key_fails_the_provider_without_quoting_it(stand_ins, monkeypatch, capsys, load_script):
    monkeypatch.setenv("VAST_API_KEY", "wrong-" + KEY)
    script = load_script("offers")
    assert script.main(["--torch", CU130, "--providers", "vastai",
                        "--vastai-url", stand_ins["vastai"].offers_url]) == 3
    out = capsys.readouterr().out
    assert "vast.ai: FAILED" in out and "refused the API key (HTTP 401" in out and KEY not in out


def test_bad_input_asks_no_one(stand_ins, monkeypatch, capsys, load_script):
    monkeypatch.setenv("VAST_API_KEY", KEY)
    script = load_script("offers")
    assert script.main(["--torch", "2.9.1+cu121", "--providers", "vastai,nebula", "--min-reliability", "7",
                        "--vastai-url", "http://example.com/bundles/"]) == 2
    err = capsys.readouterr().err
    for said in ("no cu121 build", "nebula not known", "offers_min_reliability", "must be https://"):
        assert said in err
    assert stand_ins["vastai"].calls == []
    monkeypatch.delenv("VAST_API_KEY")
    assert script.main(["--torch", CU130, "--providers", "vastai"]) == 2
    assert "no API key for vastai: set VAST_API_KEY" in capsys.readouterr().err
