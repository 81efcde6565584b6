"""Giving boxes back: the report's return action, providers.return_requests and playbooks/return.yml.

return.yml runs on the controller only, so it is judged here for real: the inventory plugin lists boxes from the
loopback stand-in of the provider's API (tests/doubles/provider_api.py), a report file says which to return, and
the stand-in records every call the playbook sends - none without confirmation or under --check, exactly the
provider's documented return calls with it, and the key in no output.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet.controller import providers, report

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.doubles import provider_api  # noqa: E402 - after the line above

BIN = REPO / ".venv" / "bin"
KEY = "gpufleet-return-KEY-7c1e0b9d"


def _boxes(*numbers):
    gpus = {1: 0, 3: 1, 5: 4}
    return [{"number": n, "name": "gpufleet-demo-%02d" % n, "port": 2220 + n, "gpus": gpus.get(n, 0),
             "gpu_name": "A100-PCIE-40GB" if gpus.get(n) else None, "price": 1.5, "vars": {}} for n in numbers]


@pytest.fixture()
def stand_in(request):
    provider = request.param
    api = provider_api.ProviderAPI(provider, provider_api.instances(provider, _boxes(1, 3, 5)), key=KEY,
                                   prefix="/stand-in").start()
    yield api
    api.stop()


def _env(provider):
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("ANSIBLE_")}
    env.update(PATH="%s:%s" % (BIN, env.get("PATH", "")), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_NOCOLOR="1", NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    env[provider_api.ENV_KEYS[provider]] = KEY
    return env


def _host(provider, number):
    return provider_api.host_name(provider, {"number": number, "name": "gpufleet-demo-%02d" % number})


def _write_report(path, provider, bad):
    """A fleet.json as report.summarize writes it, with only what return.yml reads."""
    path.write_text(json.dumps({"generated_at": "2026-12-02T12:00:00Z", "bad_hosts": [
        {"host": host, "status": status, "provider": provider if pid else None, "provider_id": pid,
         "action": action, "reasons": [], "simulated": False, "return_action": None}
        for host, status, action, pid in bad]}))


def _play(tmp_path, provider, api, *extra):
    config = tmp_path / provider_api.CONFIG_NAMES[provider]
    config.write_text("plugin: %s\napi_url: %s\n" % (provider_api.PLUGINS[provider], api.api_url))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(config), str(REPO / "playbooks" / "return.yml"),
                           "-e", "gpufleet_return_report=%s" % (tmp_path / "fleet.json")] + list(extra),
                          cwd=str(REPO), env=_env(provider), capture_output=True, text=True, timeout=180)
    assert KEY not in proc.stdout + proc.stderr
    return proc


def _sent(api):
    return [(c["method"], c["path"], c["body"], c["key_ok"]) for c in api.calls if c["method"] != "GET"]


@pytest.mark.parametrize("stand_in", ["vastai", "runpod"], indirect=True)
def test_return_sends_the_documented_calls_only_when_confirmed(stand_in, tmp_path):
    provider = stand_in.provider
    bad, fix = _host(provider, 5), _host(provider, 3)
    _write_report(tmp_path / "fleet.json", provider, [
        (bad, "failed", "return to provider", provider_api.box_id(provider, 5)),
        (fix, "failed", "fix here", provider_api.box_id(provider, 3)),
        ("static-box", "failed", "return to provider", None),
        (_host(provider, 77), "failed", "return to provider", provider_api.box_id(provider, 77))])
    expected_path = {"vastai": "/stand-in/api/v0/instances/1005/",
                     "runpod": "/stand-in/v1/pods/%s" % provider_api.box_id(provider, 5)}[provider]

    plan = _play(tmp_path, provider, stand_in)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert _sent(stand_in) == []
    assert "would send: DELETE http://127.0.0.1:%d%s (%s)" % (stand_in.port, expected_path, bad) in plan.stdout
    assert "static-box: not listed by a provider inventory plugin" in plan.stdout
    assert "is not in the inventory now" in plan.stdout  # the report's box 77 is gone: nothing is sent for it
    assert fix not in plan.stdout.split("to give back:")[1].split("\n")[0]

    checked = _play(tmp_path, provider, stand_in, "--check", "-e", "gpufleet_return_confirm=yes")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert _sent(stand_in) == []

    done = _play(tmp_path, provider, stand_in, "-e", "gpufleet_return_confirm=yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _sent(stand_in) == [("DELETE", expected_path, None, True)]
    assert "sent: DELETE" in done.stdout and "changed=1" in done.stdout
    items = stand_in.answer["instances" if provider == "vastai" else "pods"]  # the box left the provider's list
    assert str(provider_api.box_id(provider, 3)) in [str(i["id"]) for i in items]
    assert str(provider_api.box_id(provider, 5)) not in [str(i["id"]) for i in items]


def test_lambda_terminates_in_one_call_and_a_missing_key_is_named(tmp_path):
    api = provider_api.ProviderAPI("lambda", provider_api.instances("lambda", _boxes(1, 3, 5)), key=KEY).start()
    try:
        config = tmp_path / "lambda_cloud.yml"
        config.write_text("plugin: lambda_cloud\napi_url: %s\n" % api.api_url)
        ids = [provider_api.box_id("lambda", n) for n in (3, 5)]
        _write_report(tmp_path / "fleet.json", "lambda", [
            ("lambda-gpufleet-demo-%02d" % n, "failed", "return to provider", i) for n, i in zip((3, 5), ids)])
        argv = [str(BIN / "ansible-playbook"), "-i", str(config), str(REPO / "playbooks" / "return.yml"),
                "-e", "gpufleet_return_report=%s" % (tmp_path / "fleet.json"), "-e", "gpufleet_return_confirm=yes"]
        env = _env("lambda")
        del env["LAMBDA_API_KEY"]
        env["GPUFLEET_LISTING_KEY"] = KEY  # the inventory reads it from here; return.yml finds no key
        config.write_text(config.read_text() + "api_key: \"{{ lookup('env', 'GPUFLEET_LISTING_KEY') }}\"\n")
        nokey = subprocess.run(argv, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=180)
        assert nokey.returncode != 0
        assert "no API key. Set LAMBDA_API_KEY" in nokey.stdout
        assert _sent(api) == []
        done = subprocess.run(argv + ["-e", "gpufleet_lambda_api_key=%s" % KEY], cwd=str(REPO), env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert KEY not in done.stdout + done.stderr + nokey.stdout + nokey.stderr
        assert _sent(api) == [("POST", "/api/v1/instance-operations/terminate", {"instance_ids": ids}, True)]
    finally:
        api.stop()


def test_return_requests_follow_each_providers_documented_endpoint():
    assert providers.return_requests("vastai", "", ["7"]) == [
        ("DELETE", "https://console.vast.ai/api/v0/instances/7/", None, ["7"])]
    assert providers.return_requests("runpod", "https://api.runpod.io/v2/pods", ["abc"]) == [
        ("DELETE", "https://rest.runpod.io/v1/pods/abc", None, ["abc"])]
    assert providers.return_requests("lambda", "https://cloud.lambda.ai/api/v1/instances", ["a", "b"]) == [
        ("POST", "https://cloud.lambda.ai/api/v1/instance-operations/terminate", {"instance_ids": ["a", "b"]},
         ["a", "b"])]
    assert providers.return_requests("vastai", "http://127.0.0.1:9/mirror/api/v1/instances/", ["1/2"]) == [
        ("DELETE", "http://127.0.0.1:9/mirror/api/v0/instances/1%2F2/", None, ["1/2"])]
    with pytest.raises(providers.ProviderError, match="cannot tell where to send the return call"):
        providers.return_requests("lambda", "https://example.test/other", ["a"])
    assert providers.return_requests("runpod", "", []) == []


def _result(host, **extra):
    result = {"host": host, "reachable": True, "failed": False, "provider": "vastai", "provider_id": "1005",
              "provider_machine_id": "51005", "expected_gpu_count": 1, "gpu": {"source": "none"}}
    result.update(extra)
    return result


def test_report_names_the_box_and_the_providers_return_action():
    s = report.summarize([
        _result("vast-1005", gpu={"source": "nvml", "gpu_count": 0, "gpus": [], "health": {"findings": []}}),
        _result("vast-1902", reachable=False, provider_id="1902", provider_readiness="failed",
                reason="vast.ai failed: exited"),
        _result("vast-1901", reachable=False, provider_id="1901", provider_readiness="provisioning"),
        {"host": "static-01", "reachable": False, "failed": False}])
    bad = {b["host"]: b for b in s["bad_hosts"]}
    assert bad["vast-1902"]["action"] == "return to provider"  # the provider itself lists it as failed
    assert bad["vast-1902"]["return_action"].startswith("vast.ai: destroy instance 1902")
    assert "machine_id 51005" in bad["vast-1902"]["return_action"]
    assert bad["vast-1901"]["action"] != "return to provider" and bad["vast-1901"]["return_action"] is None
    assert bad["static-01"]["return_action"] is None and bad["static-01"]["provider_id"] is None
    html = report.to_html(s)
    assert "vastai 1902" in html and "destroy instance 1902" in html
    assert "destroy instance 1902" in report.to_markdown(s)
