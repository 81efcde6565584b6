"""playbooks/offers.yml end to end, as a renter runs it: from the providers' offers to those that can run a build.

The three offer APIs are loopback stand-ins (tests/doubles/provider_api.py: vast.ai's search with its JSON query,
RunPod's GPU catalog with availability per CUDA version, Lambda's instance types with capacity), serving offers of
varied quality: drivers 535 to 595, cuda_max_good 12.2 to 13.2, a V100 a cu130 build carries no kernels for, and
a machine on the renter's known-bad list. ansible-playbook runs the playbook with a cu130 build: only offers with a
driver >= 580 and a GPU the build carries are kept, every other one is in offers.json with its reason, the vast.ai
filter is printed, and no key is in any output. Needs no demo fleet; runs in seconds.
"""

import json
import os
import subprocess
import sys

import demolib
import pytest

sys.path.insert(0, str(demolib.ROOT))
from module_utils.gpufleet.host.pytorch import table as torchtable  # noqa: E402 - after the line above
from tests.doubles import provider_api  # noqa: E402

BIN = demolib.ROOT / ".venv" / "bin"
KEY = "gpufleet-offers-e2e-KEY-0b7f3c"
# A cu130 build the torch table knows (the newest release that has one).
BUILD = [("%s+cu130" % r["patch"]) for r in torchtable.RELEASES if torchtable.wheel(r["series"], "cu130")][0]


def _version(text):
    return tuple(int(p) for p in str(text).split("."))


@pytest.fixture(scope="module")
def stand_ins():
    with provider_api.offer_stand_ins(KEY) as apis:
        yield apis


def _play(stand_ins, tmp, *extra, keys=True):
    env = {k: v for k, v in os.environ.items()
           if "proxy" not in k.lower() and not k.startswith("ANSIBLE_") and k not in provider_api.ENV_KEYS.values()}
    env.update(ANSIBLE_CONFIG=str(demolib.ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH="%s:%s" % (BIN, env.get("PATH", "")))
    if keys:
        env.update({provider_api.ENV_KEYS[p]: KEY for p in stand_ins})
    argv = [str(BIN / "ansible-playbook"), "playbooks/offers.yml", "-e", "gpufleet_report_dir=%s" % tmp,
            "-e", "offers_dir=%s" % (tmp / "run")]
    for p, api in stand_ins.items():
        argv += ["-e", "offers_%s_api_url=%s" % (p, api.offers_url)]
    proc = subprocess.run(argv + list(extra), cwd=str(demolib.ROOT), env=env, capture_output=True, text=True,
                          timeout=120)
    assert KEY not in proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def run(stand_ins, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("offers")
    (tmp / "known-bad.json").write_text(json.dumps({"machines": [
        {"provider": "vastai", "machine_id": str(provider_api.KNOWN_BAD_MACHINE), "why": "Xid 79 twice"}]}))
    proc = _play(stand_ins, tmp, "-e", "offers_torch=%s" % BUILD)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    data = json.loads((tmp / "run" / "offers.json").read_text())
    return {"proc": proc, "data": data, "md": (tmp / "run" / "offers.md").read_text(), "tmp": tmp}


def test_only_offers_with_driver_580_and_a_carried_gpu_remain(run):
    data = run["data"]
    req = data["requirement"]
    assert req["torch"] == BUILD and req["cuda"] == "13.0" and _version(req["driver_floor"]) >= (580,)
    assert all(q["status"] == "ok" for q in data["queried"].values()) and set(data["queried"]) == {
        "vastai", "runpod", "lambda"}
    kept = data["kept"]
    assert kept and {o["provider"] for o in kept} == {"vastai", "runpod", "lambda"}
    for o in kept:
        assert o["driver"] is None or _version(o["driver"]) >= _version(req["driver_floor"])
        assert o["driver"] is None or _version(o["driver"]) >= (580,)
        assert o["compute_cap"] in req["compute_caps"] and o["model"] != "V100"
        assert o["cuda_max_good"] is None or _version(o["cuda_max_good"]) >= (13, 0)
    assert [o["rank"] for o in kept] == list(range(1, len(kept) + 1))
    values = [o["usd_per_tflop_hour"] for o in kept if o["usd_per_tflop_hour"] is not None]
    assert values == sorted(values)


def test_the_excluded_carry_their_reasons(run):
    excluded = {(o["provider"], o["id"]): o["reason"] for o in run["data"]["excluded"]}
    assert all(excluded.values())
    assert excluded[("vastai", "7002")].startswith("driver: 570.124.06 and cuda_max_good 12.8 too old for cu130")
    assert "no forward compatibility" in excluded[("vastai", "7002")]  # a GeForce card
    # 580.65.06 is the 13.0 GA driver, the floor (provider-offers.md §4, what cuda_max_good >= 13.0 means): kept
    assert ("vastai", "7012") not in excluded and "7012" in [o["id"] for o in run["data"]["kept"]]
    assert excluded[("vastai", "7010")].startswith("architecture: V100 is sm_70 (Volta)")
    assert excluded[("vastai", "7011")] == "known bad: machine %d (%s: Xid 79 twice)" % (
        provider_api.KNOWN_BAD_MACHINE, run["tmp"] / "known-bad.json")
    assert excluded[("runpod", "Tesla V100-SXM2-16GB/COMMUNITY")].startswith("architecture:")
    assert excluded[("runpod", "NVIDIA H100 80GB HBM3/SECURE")].startswith("driver: no SECURE host with CUDA >= 13.0")
    assert excluded[("lambda", "gpu_1x_a100")].startswith("no capacity")


def test_the_run_prints_the_table_and_each_providers_filter(run):
    out = " ".join(run["proc"].stdout.split())  # the yaml callback folds long lines
    assert "kept %d offer(s), ranked by $ per dense BF16 TFLOP-hour" % len(run["data"]["kept"]) in out
    assert "filter, vast.ai CLI: vastai search offers" in out
    floor = run["data"]["requirement"]["driver_floor"]
    for token in ("num_gpus=1", "cuda_max_good>=13.0", "driver_version>=%s" % floor, "compute_cap in [750,"):
        assert token in out
    assert "filter, vast.ai API: POST https://console.vast.ai/api/v0/bundles/" in out and '"cuda_max_good":' in out
    assert 'minCudaVersion "13.0"' in out and "Lambda lists no driver" in out
    assert "## The same filter for each provider" in run["md"] and "cuda_max_good" in run["md"]


def test_nothing_is_asked_on_bad_input(stand_ins, tmp_path):
    before = {p: len(api.calls) for p, api in stand_ins.items()}
    proc = _play(stand_ins, tmp_path, "-e", "offers_torch=2.9.1+cu121", "-e", "offers_min_reliability=2")
    assert proc.returncode != 0
    assert "no cu121 build" in proc.stdout and "offers_min_reliability" in proc.stdout
    proc = _play(stand_ins, tmp_path, "-e", "offers_torch=%s" % BUILD, keys=False)
    assert proc.returncode != 0 and "no provider to ask" in proc.stdout
    assert {p: len(api.calls) for p, api in stand_ins.items()} == before
    assert not (tmp_path / "run").exists()
