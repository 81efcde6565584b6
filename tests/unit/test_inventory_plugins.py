"""The inventory plugins vastai, runpod and lambda_cloud, end to end, and module_utils/gpufleet/controller/providers/.

A local HTTP server (127.0.0.1, port 0) replays response shapes built from the providers' documented fields
(tests/unit/data/providers/), the inventory configs point api_url at it, and the real ansible-inventory runs
as a subprocess: its JSON output is what a user's playbook would see. Errors are judged by what the user
reads (the provider named, the remedy) and by what must never appear (the API key).
"""

import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
from email.utils import parsedate_to_datetime
from http.client import IncompleteRead
from pathlib import Path

import pytest
import yaml
from gpufleet.controller import providers

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data" / "providers"
BIN = REPO / ".venv" / "bin"
KEY = "gpufleet-test-KEY-9f3c1a7e5d"  # what a leak would look like in any output


def _tool(name):
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        pytest.skip("%s not installed (scripts/bootstrap)" % name)
    return found


# ------------------------------------------------------------------------------------------ the server

class _Server:
    """Answers GET /<scenario>/... with the scenario's responses in order (the last one repeats)."""

    def __init__(self):
        self.scenarios, self.log, self.lock = {}, [], threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                name = self.path.split("/")[1]
                with outer.lock:
                    outer.log.append({"scenario": name, "path": self.path, "time": time.monotonic(),
                                      "auth": self.headers.get("Authorization")})
                    queue = outer.scenarios.get(name) or [(404, {}, b'{"error": "no such scenario"}')]
                    status, headers, body = queue.pop(0) if len(queue) > 1 else queue[0]
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(headers.get("_length", len(body))))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, scenario, path):
        return "http://127.0.0.1:%d/%s%s" % (self.port, scenario, path)

    def requests(self, scenario):
        return [r for r in self.log if r["scenario"] == scenario]


@pytest.fixture(scope="module")
def server():
    srv = _Server()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def ok(name):
    return (200, {}, (DATA / name).read_bytes())


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("ANSIBLE_")
           and k not in ("VAST_API_KEY", "RUNPOD_API_KEY", "LAMBDA_API_KEY")}
    env.update(PATH="%s:%s" % (BIN, env.get("PATH", "")), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0")
    env.update(extra)
    return env


def write_config(tmp_path, filename, example=None, **options):
    """A config file: inventories/<example> (the documented one) with options on top."""
    config = yaml.safe_load((REPO / "inventories" / example).read_text()) if example else {}
    config.update(options)
    path = tmp_path / filename
    path.write_text(yaml.safe_dump(config))
    return path


def inventory(config, *args, env=None):
    """ansible-inventory -i config (--list by default): (returncode, parsed stdout or text, stderr)."""
    cmd = [_tool("ansible-inventory"), "-i", str(config)] + (list(args) or ["--list"])
    proc = subprocess.run(cmd, cwd=str(REPO), env=env or _env(), capture_output=True, text=True, timeout=120)
    out = proc.stdout
    if "--list" in cmd and proc.returncode == 0:
        out = parse_list(out)
    return proc.returncode, out, proc.stderr


def parse_list(text):
    """ansible-inventory --list JSON with Ansible's unsafe-text wrappers ({"__ansible_unsafe": v}) removed."""
    return json.loads(text, object_hook=lambda d: d["__ansible_unsafe"] if list(d) == ["__ansible_unsafe"] else d)


def hostvars(out):
    return out["_meta"]["hostvars"]


def members(out, group):
    return set(out.get(group, {}).get("hosts", []))


def children(out, group):
    return set(out.get(group, {}).get("children", []))


# ----------------------------------------------------------------------------------- vast.ai, end to end

def test_vastai_two_pages_after_a_429_every_host_kept_and_resolved(server, tmp_path):
    server.scenarios["vastok"] = [(429, {"Retry-After": "0"}, b'{"msg": "slow down"}'),
                                  ok("vastai_page1.json"), ok("vastai_page2.json")]
    config = write_config(tmp_path, "vastai.yml", "vastai.yml", api_url=server.url("vastok", "/api/v1/instances/"))
    rc, out, err = inventory(config, env=_env(VAST_API_KEY=KEY))
    assert rc == 0, err
    hv = hostvars(out)
    assert set(hv) == {"vast-%d" % i for i in range(12345678, 12345684)}

    # paging: the first page again after the 429, then after_token; the key only in the header
    reqs = server.requests("vastok")
    assert len(reqs) == 3 and all(r["auth"] == "Bearer " + KEY for r in reqs)
    assert "after_token" not in reqs[1]["path"] and "after_token=eyJpZCI6MTIzNDU2Nzl9" in reqs[2]["path"]
    assert "limit=25" in reqs[0]["path"]

    direct = hv["vast-12345678"]  # public_ipaddr "203.0.113.10\n" + ports["22/tcp"][0].HostPort "41022"
    assert (direct["ansible_host"], direct["ansible_port"], direct["ansible_user"]) == ("203.0.113.10", 41022, "root")
    assert direct["gpufleet_ssh_route"] == "direct"
    assert direct["gpufleet_provider"] == "vastai" and direct["gpufleet_provider_id"] == "12345678"
    assert direct["gpufleet_provider_machine_id"] == "4242"
    assert direct["gpufleet_price_per_hour"] == 0.3912 and direct["gpufleet_expected_gpu_count"] == 1
    assert direct["gpufleet_claimed_gpu_model"] == "RTX 4090" and direct["gpufleet_provider_status"] == "running"
    assert direct["gpufleet_ready"] is True and direct["gpufleet_skip"] is False  # compose of the example
    assert direct["gpufleet_price_per_gpu_hour"] == pytest.approx(0.3912)
    # the listing beside the GPU (issue 51): disk_bw MB/s as is, inet_down/inet_up Mibit/s x 1.048576 = Mbit/s
    assert direct["gpufleet_listing_disk_read_mb_s"] == 2500.3 and direct["gpufleet_listing_disk_gb"] == 100.0
    assert direct["gpufleet_listing_net_down_mbit"] == 794.8 and direct["gpufleet_listing_net_up_mbit"] == 315.1
    assert direct["gpufleet_listing_source"] == "vast.ai disk_bw/inet_down/inet_up/disk_space"

    proxy = hv["vast-12345679"]  # no 22/tcp mapping: the proxy, as vast-cli ssh-url
    assert not [k for k in proxy if k.startswith("gpufleet_listing_")]  # no listing fields: none set
    assert (proxy["ansible_host"], proxy["ansible_port"]) == ("ssh7.vast.ai", 22040)
    assert proxy["gpufleet_ssh_route"] == "proxy" and proxy["gpufleet_ready"] is True
    jupyter = hv["vast-12345680"]  # proxy of a jupyter runtype: ssh_port + 1 (vast-cli issue #79)
    assert (jupyter["ansible_host"], jupyter["ansible_port"]) == ("ssh2.vast.ai", 18001)

    assert members(out, "gpufleet_ready") == {"vast-12345678", "vast-12345679", "vast-12345680"}
    assert members(out, "vastai") == members(out, "gpufleet_ready")
    assert members(out, "gpufleet_provisioning") == {"vast-12345681"}  # actual_status null
    assert members(out, "gpufleet_failed") == {"vast-12345682", "vast-12345683"}  # OCI failure, offline
    assert {"gpufleet_provisioning", "gpufleet_failed"} <= children(out, "gpufleet_not_ready")
    assert "OCI runtime create failed" in hv["vast-12345682"]["gpufleet_provider_status_message"]
    assert hv["vast-12345683"]["gpufleet_provider_status_message"] == "host offline (no heartbeat)"
    assert hv["vast-12345683"]["gpufleet_not_ready_reason"].startswith("vast.ai failed: offline: vast.ai never brings")
    assert hv["vast-12345683"]["gpufleet_not_ready_reason"].endswith("; vast.ai says: host offline (no heartbeat)")
    assert "gpufleet_not_ready_reason" not in direct
    assert hv["vast-12345681"]["gpufleet_skip"] is True and "ansible_host" not in hv["vast-12345681"]
    assert members(out, "gpu_H100_SXM") == {"vast-12345680", "vast-12345681"}  # keyed_groups of the example
    assert members(out, "cheap") == {"vast-12345678", "vast-12345679"}
    assert "vast.ai: 3 host(s) not ready" in err and "vast-12345683 failed" in err

    text = json.dumps(out) + err
    for secret in (KEY, "jt-should-not-leak", "hf_should_not_leak"):
        assert secret not in text


# ------------------------------------------------------------------------------------ RunPod, end to end

def test_runpod_direct_only_proxy_only_and_a_running_pod_without_runtime(server, tmp_path):
    server.scenarios["rpok"] = [ok("runpod_pods.json")]
    config = write_config(tmp_path, "runpod.yml", "runpod.yml", api_url=server.url("rpok", "/v2/pods"))
    rc, out, err = inventory(config, env=_env(RUNPOD_API_KEY=KEY))
    assert rc == 0, err
    hv = hostvars(out)
    assert set(hv) == {"runpod-abc123xyz", "runpod-proxyonly1", "runpod-startingnow", "runpod-exited0001"}
    ready = hv["runpod-abc123xyz"]
    assert (ready["ansible_host"], ready["ansible_port"], ready["ansible_user"]) == ("194.68.245.10", 22104, "root")
    assert ready["gpufleet_expected_gpu_count"] == 2 and ready["gpufleet_price_per_hour"] == 5.38
    assert ready["gpufleet_claimed_gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert ready["gpufleet_provider_machine_id"] == "m-9f8e7d" and ready["gpufleet_provider_region"] == "EU-RO-1"
    # the machine's listing (issue 51): MBps and Mbps as RunPod names them, no conversion
    assert (ready["gpufleet_listing_disk_read_mb_s"], ready["gpufleet_listing_net_down_mbit"],
            ready["gpufleet_listing_net_up_mbit"]) == (3612, 5102, 2268)
    assert ready["gpufleet_listing_source"] == ("RunPod machine.diskThroughputMBps/machine.maxDownloadSpeedMbps/"
                                                "machine.maxUploadSpeedMbps")
    assert "gpufleet_listing_disk_gb" not in ready
    assert not [k for k in hv["runpod-proxyonly1"] if k.startswith("gpufleet_listing_")]
    proxy = hv["runpod-proxyonly1"]  # the ssh.runpod.io proxy is shell only: not a connection for Ansible
    assert "ansible_host" not in proxy and proxy["gpufleet_ssh_proxy"] == "proxyonly1-11aa22bb@ssh.runpod.io:22"
    assert "no SFTP/SCP" in proxy["gpufleet_readiness_reason"]
    assert members(out, "gpufleet_ready") == members(out, "runpod") == {"runpod-abc123xyz"}
    assert members(out, "gpufleet_proxy_only") == {"runpod-proxyonly1"}
    assert members(out, "gpufleet_provisioning") == {"runpod-startingnow"}  # RUNNING, runtime still null
    assert members(out, "gpufleet_stopped") == {"runpod-exited0001"}  # TERMINATED is left out by default
    assert "RUNNING, but no SSH endpoint yet" in hv["runpod-startingnow"]["gpufleet_provider_status_message"]
    assert KEY not in json.dumps(out) + err

    rc, graph, err = inventory(config, "--graph", env=_env(RUNPOD_API_KEY=KEY))
    assert rc == 0, err
    lines = graph.splitlines()
    parent = lines.index("  |--@gpufleet_not_ready:")
    child = lines.index("  |  |--@gpufleet_proxy_only:")
    assert parent < child and lines[child + 1] == "  |  |  |--runpod-proxyonly1"
    assert KEY not in graph + err


# ------------------------------------------------------------------------------ Lambda Cloud, end to end

def test_lambda_active_unhealthy_booting_after_a_429_with_retry_after(server, tmp_path):
    server.scenarios["lok"] = [(429, {"Retry-After": "1"}, b'{"error": {"code": "global/rate-limited", '
                                                            b'"message": "Too many requests"}}'),
                               ok("lambda_instances.json")]
    config = write_config(tmp_path, "lambda_cloud.yml", "lambda_cloud.yml",
                          api_url=server.url("lok", "/api/v1/instances"))
    rc, out, err = inventory(config, env=_env(LAMBDA_API_KEY=KEY))
    assert rc == 0, err
    reqs = server.requests("lok")
    assert len(reqs) == 2 and reqs[1]["time"] - reqs[0]["time"] >= 0.9  # Retry-After: 1 honoured
    hv = hostvars(out)
    assert set(hv) == {"lambda-train-8x-h100", "lambda-sick", "lambda-2c3d4e5f60718293a4b5c6d7e8f90112"}
    ready = hv["lambda-train-8x-h100"]  # the name "train 8x/h100", made a safe host name
    assert (ready["ansible_host"], ready["ansible_port"], ready["ansible_user"]) == ("198.51.100.30", 22, "ubuntu")
    assert ready["gpufleet_price_per_hour"] == 23.92 and ready["gpufleet_expected_gpu_count"] == 8
    assert ready["gpufleet_claimed_gpu_model"] == "H100 (80 GB SXM5)"
    assert members(out, "gpufleet_ready") == members(out, "lambda") == {"lambda-train-8x-h100"}
    assert members(out, "gpufleet_failed") == {"lambda-sick"}
    assert hv["lambda-sick"]["gpufleet_provider_status"] == "unhealthy"
    assert members(out, "gpufleet_provisioning") == {"lambda-2c3d4e5f60718293a4b5c6d7e8f90112"}
    assert members(out, "region_us_east_1") == {"lambda-train-8x-h100"}
    text = json.dumps(out) + err
    assert KEY not in text and "53968f128c4a4489b688c2c0a181d083" not in text  # nor the Jupyter token


# --------------------------------------------------------------------------------------------- errors

ERRORS = [
    # scenario, plugin file, env var, responses, options, what the user must read
    ("e401", "vastai.yml", "VAST_API_KEY", [(401, {}, b'{"success": false, "msg": "bad key %s"}' % KEY.encode())], {},
     ["vast.ai refused the API key (HTTP 401", "Set VAST_API_KEY", "https://cloud.vast.ai/manage-keys/"]),
    ("e500", "runpod.yml", "RUNPOD_API_KEY", [(500, {}, b'{"error": "internal"}')], {"retries": 1},
     ["RunPod: the API failed with HTTP 500", "run again later"]),
    ("e404", "lambda_cloud.yml", "LAMBDA_API_KEY",
     [(404, {}, b'{"error": {"code": "global/object-does-not-exist", "message": "Not found"}}')], {},
     ["Lambda Cloud:", "HTTP 404", "Check api_url"]),
    ("etrunc", "lambda_cloud.yml", "LAMBDA_API_KEY", [(200, {}, b'{"data": [{"id": "0920582c7ff0", "na')], {},
     ["Lambda Cloud: the answer from", "not valid JSON", "malformed or truncated"]),
    ("ecut", "runpod.yml", "RUNPOD_API_KEY", [(200, {"_length": 5000}, b'{"pods": [')], {"retries": 0},
     ["RunPod:", "cut short", "Run again"]),
    ("etype", "vastai.yml", "VAST_API_KEY",
     [(200, {}, json.dumps({"instances": [{"id": 1, "actual_status": "running", "num_gpus": "two"}],
                            "next_token": None}).encode())], {},
     ["vast.ai: instance 1 field 'num_gpus' is str ('two'), expected an integer", "check api_url"]),
]


@pytest.mark.parametrize("scenario,filename,env_var,responses,options,expected", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_answers_name_the_provider_and_the_remedy_never_the_key(server, tmp_path, scenario, filename, env_var,
                                                                    responses, options, expected):
    server.scenarios[scenario] = list(responses)
    path = "/api/v1/instances/" if filename != "runpod.yml" else "/v2/pods"
    config = write_config(tmp_path, filename, plugin=filename.split(".")[0], api_url=server.url(scenario, path),
                          **options)
    rc, out, err = inventory(config, env=_env(**{env_var: KEY}))
    assert rc == 0  # Ansible reports a failed source as a warning and goes on with an empty inventory
    assert hostvars(out) == {}
    message = " ".join(err.split())
    for text in expected:
        assert text in message, (text, message)
    assert KEY not in json.dumps(out) + err
    if options.get("retries") == 1:  # retried once, then given up
        assert len(server.requests(scenario)) == 2
    else:  # tried by the 'auto' plugin and by the plugin itself: the provider is still asked once
        assert len(server.requests(scenario)) == 1


def test_empty_fleet_is_a_warning_not_an_error(server, tmp_path):
    server.scenarios["empty"] = [(200, {}, b'{"pods": []}')]
    config = write_config(tmp_path, "runpod.yml", plugin="runpod", api_url=server.url("empty", "/v2/pods"))
    rc, out, err = inventory(config, env=_env(RUNPOD_API_KEY=KEY))
    assert rc == 0 and hostvars(out) == {}
    assert "RunPod: the account has no instances; the inventory is empty." in " ".join(err.split())


def test_no_key_says_which_variable_to_set(server, tmp_path):
    config = write_config(tmp_path, "vastai.yml", plugin="vastai", api_url=server.url("nokey", "/x/"))
    rc, out, err = inventory(config)
    assert "vast.ai: no API key. Set VAST_API_KEY" in " ".join(err.split())
    assert server.requests("nokey") == []


# ---------------------------------------------------------------------------- the cache and the vault

def test_cache_serves_the_hosts_without_the_key_and_a_vaulted_key_works(server, tmp_path):
    from ansible.parsing.vault import VaultLib, VaultSecret

    vaulted = VaultLib([("default", VaultSecret(b"test-vault-pass"))]).encrypt(KEY).decode()
    (tmp_path / "vault-pass").write_text("test-vault-pass\n")
    cache_dir = tmp_path / "cache"
    server.scenarios["cache"] = [ok("vastai_page1.json"), ok("vastai_page2.json"), (500, {}, b"{}")]
    config = tmp_path / "vastai.yml"
    config.write_text(
        "plugin: vastai\napi_url: %s\nretries: 0\ncache: true\ncache_plugin: ansible.builtin.jsonfile\n"
        "cache_connection: %s\ncache_timeout: 600\napi_key: !vault |\n%s\n"
        % (server.url("cache", "/api/v1/instances/"), cache_dir,
           "\n".join("  " + line for line in vaulted.splitlines())))
    env = _env(ANSIBLE_VAULT_PASSWORD_FILE=str(tmp_path / "vault-pass"))
    rc, first, err = inventory(config, env=env)
    assert rc == 0, err
    assert len(hostvars(first)) == 6
    assert all(r["auth"] == "Bearer " + KEY for r in server.requests("cache"))
    rc, second, err = inventory(config, env=env)  # the provider now fails: the cache answers
    assert rc == 0, err
    assert hostvars(second) == hostvars(first) and len(server.requests("cache")) == 2
    cached = "".join(p.read_text() for p in cache_dir.rglob("*") if p.is_file())
    assert "vast-12345678" in cached
    for secret in (KEY, "jt-should-not-leak", "hf_should_not_leak", "ANSIBLE_VAULT"):
        assert secret not in cached


# --------------------------------------------------------------------------------- docs and neighbours

def test_ansible_doc_renders_each_plugin():
    proc = subprocess.run([_tool("ansible-doc"), "-t", "inventory", "-M", "inventory_plugins",
                           "vastai", "runpod", "lambda_cloud"], cwd=str(REPO), env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for name, var in (("vastai", "VAST_API_KEY"), ("runpod", "RUNPOD_API_KEY"), ("lambda_cloud", "LAMBDA_API_KEY")):
        assert "INVENTORY %s" % name in proc.stdout.replace("\x1b[1m", "").replace("\x1b[0m", "")
        assert var in proc.stdout
    assert "keyed_groups" in proc.stdout and "cache_timeout" in proc.stdout  # the two fragments


def test_static_inventories_still_parse_with_the_plugins_enabled():
    rc, out, err = inventory(REPO / "inventories" / "example")
    assert rc == 0, err
    assert {"vast-4090-a", "runpod-h100-a", "lambda-8xh100"} <= set(hostvars(out))
    assert "Failed to" not in err


# ---------------------------------------------------------------------------------- providers/, pure

def _vast(**fields):
    base = {"id": 1, "machine_id": 2, "actual_status": "running", "image_runtype": "ssh_direc ssh_proxy",
            "num_gpus": 1, "gpu_name": "RTX 4090", "ssh_host": "ssh1.vast.ai", "ssh_port": 10000,
            "public_ipaddr": "203.0.113.1", "ports": {}, "dph_total": 0.5}
    base.update(fields)
    return providers.vast_record(base)


@pytest.mark.parametrize("fields,endpoint,route", [
    ({"ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40022"}]},  # noqa: S104 - vast's data, not a bind
      "public_ipaddr": " 203.0.113.1\n"},
     ("203.0.113.1", 40022), "direct"),
    ({}, ("ssh1.vast.ai", 10000), "proxy"),
    ({"image_runtype": "jupyter_direc ssh_proxy"}, ("ssh1.vast.ai", 10001), "proxy"),
    ({"image_runtype": "jupyter", "ports": {"22/tcp": [{"HostPort": "40022"}]}}, ("203.0.113.1", 40022), "direct"),
    ({"ports": {"22/tcp": [{"HostPort": "40022"}]}, "public_ipaddr": None}, ("ssh1.vast.ai", 10000), "proxy"),
    ({"ssh_host": None, "ssh_port": None}, None, None),
])
def test_vast_ssh_as_vast_cli_resolves_it(fields, endpoint, route):
    rec = _vast(**fields)
    got = (rec["ssh"]["host"], rec["ssh"]["port"]) if rec["ssh"] else None
    assert (got, rec["route"]) == (endpoint, route)
    assert rec["state"] == ("ready" if endpoint else "provisioning")


@pytest.mark.parametrize("status,msg,state", [
    ("running", None, "ready"), (None, None, "provisioning"), ("loading", None, "provisioning"),
    ("created", "OCI runtime create failed: runc", "failed"), ("created", "pulling image", "provisioning"),
    ("exited", None, "failed"), ("unknown", None, "failed"), ("offline", None, "failed"),
    ("stopped", None, "stopped"), ("frozen", None, "stopped"), ("weird", None, "provisioning"),
])
def test_vast_states(status, msg, state):
    assert _vast(actual_status=status, status_msg=msg)["state"] == state


def test_vast_wrong_types_are_named():
    with pytest.raises(providers.ProviderDataError, match=r"vast.ai: instance 1 field 'ssh_port' is 'x'"):
        _vast(ssh_port="x")
    with pytest.raises(providers.ProviderDataError, match=r"field 'dph_total' is bool"):
        _vast(dph_total=True)
    with pytest.raises(providers.ProviderDataError, match=r"has no 'id'"):
        providers.vast_record({"actual_status": "running"})
    with pytest.raises(providers.ProviderDataError, match=r"expected \{\"instances\""):
        providers.vast_page({"instances": {}}, "https://x/api?limit=25")


def test_vast_paging_follows_next_token_and_refuses_a_loop():
    pages = {None: {"instances": [{"id": 1}], "next_token": "a"}, "a": {"instances": [{"id": 2}], "next_token": None}}
    seen = []

    def get(url):
        token = re.search(r"after_token=(\w+)", url)
        seen.append(url)
        return pages[token.group(1) if token else None]

    assert [i["id"] for i in providers.vast_fetch_all(get, "https://h/api/v1/instances/")] == [1, 2]
    assert len(seen) == 2
    with pytest.raises(providers.ProviderDataError, match="same next_token twice"):
        providers.vast_fetch_all(lambda url: {"instances": [], "next_token": "loop"}, "https://h/")


def _pod(**fields):
    base = {"id": "p1", "name": "n", "status": "RUNNING", "gpu": {"id": "NVIDIA A40", "count": 1}, "cost": 0.4,
            "ssh": {"proxy": None, "direct": None}, "runtime": None}
    base.update(fields)
    return providers.runpod_record(base)


def test_runpod_endpoints():
    direct = _pod(ssh={"direct": {"host": "194.68.1.1", "port": 2200, "username": "root"}, "proxy": None})
    assert direct["state"] == "ready" and direct["ssh"] == {"host": "194.68.1.1", "port": 2200, "user": "root"}
    from_runtime = _pod(runtime={"ports": [{"private": 22, "public": 40100, "type": "tcp", "ip": "194.68.1.2"}]})
    assert from_runtime["state"] == "ready" and from_runtime["ssh"]["port"] == 40100
    private_only = _pod(runtime={"ports": [{"private": 22, "public": 40100, "type": "tcp", "ip": "10.1.2.3"}]})
    assert private_only["state"] == "provisioning"
    proxy = _pod(ssh={"direct": None, "proxy": {"host": "ssh.runpod.io", "port": 22, "username": "p1-x"}})
    assert proxy["state"] == "proxy_only" and proxy["ssh"] is None
    assert _pod(status="ERROR")["state"] == "failed" and _pod(status="EXITED")["state"] == "stopped"
    assert _pod(status="STARTING")["state"] == "provisioning"
    with pytest.raises(providers.ProviderDataError, match="RunPod: pod p1 field 'ssh.direct' is str"):
        _pod(ssh={"direct": "1.2.3.4:22"})


def test_lambda_names_price_and_states():
    data = json.loads((DATA / "lambda_instances.json").read_text())
    data["data"].append(dict(data["data"][1], id="dup0000000000000000000000000000", status="terminated"))
    recs = providers.parse("lambda", data)
    assert [r["name"] for r in recs] == ["lambda-train-8x-h100", "lambda-1b2c3d4e5f60718293a4b5c6d7e8f901",
                                         "lambda-2c3d4e5f60718293a4b5c6d7e8f90112",
                                         "lambda-dup0000000000000000000000000000"]  # "sick" twice: ids
    assert recs[0]["price_per_hour"] == 23.92 and recs[1]["state"] == "failed"
    assert [r["id"] for r in providers.select(recs)] == [r["id"] for r in recs[:3]]  # terminated left out
    assert [r["status"] for r in providers.select(recs, ["TERMINATED"])] == ["terminated"]
    assert [r["label"] for r in providers.select(recs, name_regex="^tr")] == ["train 8x/h100"]
    for rec in recs:
        assert "/" not in rec["name"] and " " not in rec["name"]


def test_listing_fields_convert_and_absent_or_zero_ones_set_nothing():
    """vast's Mibit/s become Mbit/s; RunPod's figures keep their units; a field absent, null or 0 sets nothing; a
    field of the wrong type fails the listing as any other field does."""
    vast = {"id": 1, "disk_bw": 48, "inet_down": 1000, "inet_up": None, "disk_space": 0}
    assert providers.vastai.vast_listing(vast, "instance 1") == {
        "gpufleet_listing_disk_read_mb_s": 48.0, "gpufleet_listing_net_down_mbit": 1048.6,
        "gpufleet_listing_source": "vast.ai disk_bw/inet_down"}
    assert providers.vastai.vast_listing({"id": 2}, "instance 2") == {}
    with pytest.raises(providers.ProviderDataError, match="inet_down"):
        providers.vastai.vast_listing({"id": 3, "inet_down": "fast"}, "instance 3")
    assert providers.runpod.runpod_listing({"maxDownloadSpeedMbps": 800}, "pod p") == {
        "gpufleet_listing_net_down_mbit": 800, "gpufleet_listing_source": "RunPod machine.maxDownloadSpeedMbps"}
    assert providers.runpod.runpod_listing({}, "pod p") == {}


def test_host_vars_carry_no_tokens():
    page = json.loads((DATA / "vastai_page1.json").read_text())
    text = json.dumps([providers.host_vars(r) for r in providers.parse("vastai", page)])
    assert "jt-should-not-leak" not in text and "hf_should_not_leak" not in text


# ------------------------------------------------------------------------------------ fetch_json, pure

class _Answer(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _http_error(code, body=b"{}", headers=None):
    import email.message

    msg = email.message.Message()
    for key, value in (headers or {}).items():
        msg[key] = value
    return urllib.error.HTTPError("https://x", code, "err", msg, io.BytesIO(body))


def _opener(*answers):
    calls = []

    def opener(request, timeout):
        calls.append(request)
        answer = answers[min(len(calls), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return _Answer(answer)

    opener.calls = calls
    return opener


def test_fetch_retries_429_honouring_retry_after_then_succeeds():
    waits = []
    opener = _opener(_http_error(429, headers={"Retry-After": "7"}), _http_error(503), b'{"data": []}')
    got = providers.fetch_json("lambda", "https://x", KEY, retries=3, opener=opener, sleep=waits.append)
    assert got == {"data": []}
    assert waits == [7.0, 2.0]  # Retry-After, then the second backoff step
    assert opener.calls[0].get_header("Authorization") == "Bearer " + KEY


def test_fetch_gives_up_after_the_retries_and_caps_the_wait():
    waits = []
    opener = _opener(_http_error(429, headers={"Retry-After": "3600"}))
    with pytest.raises(providers.ProviderError, match="kept answering HTTP 429"):
        providers.fetch_json("runpod", "https://x", KEY, retries=2, max_wait=5, opener=opener, sleep=waits.append)
    assert waits == [5, 5] and len(opener.calls) == 3


def test_fetch_errors_are_clear_and_keyless():
    cases = [
        (_http_error(403, b'{"error": {"message": "key %s revoked", "suggestion": "make a new one"}}' % KEY.encode()),
         ["Lambda Cloud refused the API key (HTTP 403", "key *** revoked make a new one", "Set LAMBDA_API_KEY"]),
        (urllib.error.URLError("Name or service not known"), ["could not reach https://x (Name or service"]),
        (IncompleteRead(b"{\"da"), ["cut short (4 bytes read)"]),
    ]
    for error, texts in cases:
        with pytest.raises(providers.ProviderError) as info:
            providers.fetch_json("lambda", "https://x?token=1", KEY, retries=0, opener=_opener(error),
                                 sleep=lambda s: None)
        for text in texts:
            assert text in str(info.value)
        assert KEY not in str(info.value) and "token=1" not in str(info.value)


def test_list_hosts_remembers_a_failure_per_source(tmp_path):
    providers._FAILED.clear()
    source = str(tmp_path / "runpod.yml")
    with pytest.raises(providers.ProviderError, match="no API key"):
        providers.list_hosts("runpod", "https://x", "", source=source)
    assert ("runpod", source, "https://x") in providers._FAILED
    providers._FAILED[("runpod", source, "http://x")] = providers._FAILED[("runpod", source, "https://x")]
    with pytest.raises(providers.ProviderError, match="no API key"):  # the same source: not asked again
        providers.list_hosts("runpod", "https://x", KEY, source=source)
    later = time.monotonic() + providers.FAILED_TTL + 1  # a later refresh asks again (and fails differently)
    with pytest.raises(providers.ProviderError, match="must be https://"):
        providers.list_hosts("runpod", "http://x", KEY, source=source, clock=lambda: later)
    providers._FAILED.clear()


def test_a_key_never_travels_over_plain_http_to_another_host():
    opener = _opener(b"{}")
    with pytest.raises(providers.ProviderError, match="must be https://"):
        providers.fetch_json("vastai", "http://mirror.example/api", KEY, opener=opener)
    assert opener.calls == []


def test_retry_after_forms():
    assert providers.retry_after_seconds("5") == 5.0
    now = parsedate_to_datetime("Wed, 02 Dec 2026 12:00:00 GMT").timestamp()
    assert providers.retry_after_seconds("Wed, 02 Dec 2026 12:00:10 GMT", now=now) == pytest.approx(10.0)
    assert providers.retry_after_seconds("soon") is None
    assert providers.backoff_seconds(10) == 60.0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
