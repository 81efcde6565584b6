"""The demo fleet discovered through an inventory plugin, as a renter of vast.ai would run gpufleet.

The vastai plugin lists the demo containers from a loopback stand-in of vast.ai's API
(tests/doubles/provider_api.py: each instance's public_ipaddr and 22/tcp port are a demo host's, plus one
instance still loading and one vast.ai lists as exited). playbooks/facts.yml runs over that inventory and writes a
report; then playbooks/return.yml, which must send nothing without confirmation and exactly vast.ai's destroy
calls for the boxes the report says to return with it. `make demo DEMO_PROVIDER=vastai` runs site.yml the same way.
"""

import json
import os
import subprocess
import sys

import demolib
import pytest

sys.path.insert(0, str(demolib.ROOT))
from tests.doubles import provider_api  # noqa: E402 - after the line above

BIN = demolib.ROOT / ".venv" / "bin"


@pytest.fixture(scope="module")
def vast(tmp_path_factory, demo_hosts):
    boxes, group_vars = provider_api.demo_boxes(demolib.INVENTORY)
    api = provider_api.ProviderAPI("vastai", provider_api.instances("vastai", boxes)).start()
    folder = tmp_path_factory.mktemp("vast")
    config = provider_api.write_inventory("vastai", api.api_url, boxes, group_vars, folder / "inventory",
                                          demolib.INVENTORY.parent / "group_vars" / "all.yml")
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("ANSIBLE_")}
    env.update(VAST_API_KEY=provider_api.DEMO_KEY, ANSIBLE_CONFIG=str(demolib.ROOT / "ansible.cfg"),
               ANSIBLE_NOCOLOR="1", PATH="%s:%s" % (BIN, env.get("PATH", "")))
    yield {"api": api, "config": config, "env": env, "reports": folder / "reports", "boxes": boxes}
    api.stop()


def _play(vast, playbook, *extra):
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(vast["config"]), playbook,
                           "-e", "gpufleet_report_dir=%s" % vast["reports"]] + list(extra),
                          cwd=str(demolib.ROOT), env=vast["env"], capture_output=True, text=True, timeout=600)
    assert provider_api.DEMO_KEY not in proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def vast_report(vast):
    proc = _play(vast, "playbooks/facts.yml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    data, _ = demolib.load_report(vast["reports"] / "latest")
    return {h["host"]: h for h in data["hosts"]}, data


def test_the_plugin_lists_the_demo_fleet_with_its_provider_data(vast):
    proc = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(vast["config"]), "--list"],
                          cwd=str(demolib.ROOT), env=vast["env"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout, object_hook=lambda d: d["__ansible_unsafe"] if list(d) == ["__ansible_unsafe"]
                     else d)
    hv = out["_meta"]["hostvars"]
    for box in vast["boxes"]:
        host = hv["vast-%d" % (1000 + box["number"])]
        assert (host["ansible_host"], host["ansible_port"], host["ansible_user"]) == ("127.0.0.1", box["port"], "root")
        assert host["gpufleet_provider_machine_id"] == str(50000 + box["number"])
        assert host["gpufleet_expected_gpu_count"] == box["gpus"]
    assert set(out["gpufleet_ready"]["hosts"]) == {"vast-%d" % (1000 + b["number"]) for b in vast["boxes"]}
    assert set(out["gpufleet_provisioning"]["hosts"]) == {"vast-1901"}
    assert set(out["gpufleet_failed"]["hosts"]) == {"vast-1902"}


def test_report_names_provider_ids_and_the_return_action(vast_report):
    hosts, data = vast_report
    degraded = hosts["vast-1005"]  # demo host 05: 4x A100, ECC errors and a GPU off the bus
    assert degraded["action"] == "return to provider" and degraded["provider_id"] == "1005"
    assert degraded["return_action"].startswith("vast.ai: destroy instance 1005")
    assert "machine_id 50005" in degraded["return_action"]
    assert hosts["vast-1001"]["status"] == "ok" and hosts["vast-1001"]["return_action"] is None
    exited = hosts["vast-1902"]
    assert exited["status"] == "unreachable" and exited["action"] == "return to provider"
    assert any("never brings such an instance back" in r for r in exited["reasons"])
    assert hosts["vast-1901"]["action"] != "return to provider"  # still loading: wait, do not destroy
    bad = {b["host"]: b for b in data["bad_hosts"]}
    assert bad["vast-1005"]["return_action"] == degraded["return_action"]


def test_return_plays_plan_then_destroys_exactly_the_boxes_to_return(vast, vast_report):
    html = (vast["reports"] / "latest" / "fleet.html").read_text()
    assert "vastai 1005" in html and "destroy instance 1005" in html
    calls = vast["api"].calls
    plan = _play(vast, "playbooks/return.yml")
    assert plan.returncode == 0, plan.stdout[-3000:]
    assert [c for c in calls if c["method"] != "GET"] == []
    assert "would send: DELETE %s" % vast["api"].api_url.replace("/api/v1/instances/", "/api/v0/instances/1005/") \
        in plan.stdout
    done = _play(vast, "playbooks/return.yml", "-e", "gpufleet_return_confirm=yes")
    assert done.returncode == 0, done.stdout[-3000:]
    sent = sorted((c["method"], c["path"], c["key_ok"]) for c in calls if c["method"] != "GET")
    assert sent == [("DELETE", "/api/v0/instances/1005/", True), ("DELETE", "/api/v0/instances/1902/", True)]
