#!/usr/bin/env python3
"""A stand-in for the vast.ai, RunPod and Lambda Cloud APIs, on loopback only, for the demo and the e2e suite.

It serves the documented list endpoints (``GET /api/v1/instances/`` of vast.ai, ``GET /v2/pods`` of RunPod,
``GET /api/v1/instances`` of Lambda Cloud) with instances built from the demo fleet's inventory
(inventories/demo/hosts.yml, written by scripts/demo-fleet up), each pointing at a demo container's loopback SSH
port, and the calls that give a box back (vast.ai ``DELETE /api/v0/instances/{id}/``, RunPod
``DELETE /v1/pods/{id}``, Lambda ``POST /api/v1/instance-operations/terminate``). Every request is recorded
(method, path, JSON body, whether the Bearer key was the expected one), in memory and, when asked, as JSON lines
in a file; a box given back leaves the list, as at the provider. Shapes and field names:
../shared/reference/provider-apis.md; the inventory plugins' own unit tests replay more awkward answers.

    python3 -m tests.doubles.provider_api --provider vastai --hosts inventories/demo/hosts.yml \\
        --inventory-dir inventories/demo-vastai --port 0 --log .demo/provider-api.jsonl

writes the plugin's config (api_url pointing here), the demo's own host variables under the plugin's host
names, and serves until stopped. A test double: it lives under tests/ and is never used against a real host.
"""

import argparse
import http.server
import json
import os
import re
import sys
import threading
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "module_utils"))
from gpufleet.controller import providers  # noqa: E402 - the plugins' own naming, from the checkout

PROFILES = ROOT / "tests" / "fakenvml" / "profiles"
# Per provider: the list path, the plugin config file name, the env variable of the key, the host name prefix.
LIST_PATHS = {"vastai": "/api/v1/instances/", "runpod": "/v2/pods", "lambda": "/api/v1/instances"}
CONFIG_NAMES = {"vastai": "vastai.yml", "runpod": "runpod.yml", "lambda": "lambda_cloud.yml"}
PLUGINS = {"vastai": "vastai", "runpod": "runpod", "lambda": "lambda_cloud"}
ENV_KEYS = {"vastai": "VAST_API_KEY", "runpod": "RUNPOD_API_KEY", "lambda": "LAMBDA_API_KEY"}
# What the plugin derives from the provider (connection and the provider's claims): not copied into host_vars.
FROM_PROVIDER = {"ansible_host", "ansible_port", "ansible_user", "gpufleet_expected_gpu_count",
                 "gpufleet_price_per_hour"}
DEMO_KEY = "gpufleet-demo-provider-key"  # the demo's key for this stand-in (not a secret: it opens nothing real)


def _gpu_name(profile):
    """The provider's GPU name for a fake NVML profile: "NVIDIA H200" -> "H200" (as vast.ai's gpu_name)."""
    data = json.loads((PROFILES / ("%s.json" % profile)).read_text())
    return re.sub(r"^NVIDIA\s+", "", data["gpus"][0]["name"])


def demo_boxes(hosts_file):
    """The demo fleet as boxes: [{number, name, port, gpus, gpu_name, price, vars}] from inventories/demo/hosts.yml."""
    inv = yaml.safe_load(Path(hosts_file).read_text())
    group = inv["rented"]
    boxes = []
    for name, hv in group["hosts"].items():
        hv = hv or {}
        number = int(name.rsplit("-", 1)[1])
        profile = hv.get("gpufleet_demo_profile")
        boxes.append({"number": number, "name": name, "port": int(hv["ansible_port"]),
                      "gpus": int(hv.get("gpufleet_expected_gpu_count") or 0),
                      "gpu_name": _gpu_name(profile) if profile else None,
                      "price": hv.get("gpufleet_price_per_hour"), "vars": hv})
    return boxes, group.get("vars") or {}


def box_id(provider, number):
    """A stable provider id per demo host number."""
    return {"vastai": str(1000 + number), "runpod": "demo%04dpod" % number, "lambda": "d%031x" % number}[provider]


def host_name(provider, box):
    """The inventory name the provider's plugin gives the box: <prefix>-<id> (Lambda: <prefix>-<name>)."""
    ident = box["name"] if provider == "lambda" else box_id(provider, box["number"])
    return "%s-%s" % (providers.PROVIDERS[provider]["prefix"], providers.safe_name(ident))


def instances(provider, boxes, extra=True):
    """The provider's list answer for the boxes, plus (extra) one box still starting and one the provider lists
    as broken, as a real account shows them."""
    if provider == "vastai":
        out = [{"id": 1000 + b["number"], "machine_id": 50000 + b["number"], "actual_status": "running",
                "cur_state": "running", "intended_status": "running", "label": b["name"], "num_gpus": b["gpus"],
                "gpu_name": b["gpu_name"] or "CPU only", "dph_total": b["price"], "public_ipaddr": "127.0.0.1\n",
                "ports": {"22/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(b["port"])}]},
                "ssh_host": "ssh5.vast.ai", "ssh_port": 30000 + b["number"], "image_runtype": "ssh",
                "status_msg": "success, running gpufleet/debian"} for b in boxes]
        if extra:
            out += [{"id": 1901, "machine_id": 51901, "actual_status": "loading", "label": "demo-starting",
                     "num_gpus": 1, "gpu_name": "RTX 4090", "dph_total": 0.35, "public_ipaddr": None, "ports": {},
                     "status_msg": "Pulling image layers"},
                    {"id": 1902, "machine_id": 51902, "actual_status": "exited", "label": "demo-exited",
                     "num_gpus": 1, "gpu_name": "RTX 4090", "dph_total": 0.35, "public_ipaddr": "127.0.0.1",
                     "ports": {}, "status_msg": "Error response from daemon: failed to create task for container"}]
        return {"instances": out, "next_token": None}
    if provider == "runpod":
        out = [{"id": box_id(provider, b["number"]), "name": b["name"], "status": "RUNNING", "cost": b["price"],
                "gpu": {"id": b["gpu_name"] or "CPU", "count": b["gpus"], "displayName": b["gpu_name"] or "CPU"},
                "machineId": "m%04d" % b["number"], "cloud": "SECURE",
                "ssh": {"direct": {"host": "127.0.0.1", "port": b["port"], "username": "root"}, "proxy": None},
                "runtime": {"ports": [{"private": 22, "public": b["port"], "type": "tcp", "ip": "127.0.0.1"}]}}
               for b in boxes]
        return {"pods": out}
    out = [{"id": box_id(provider, b["number"]), "name": b["name"], "ip": "127.0.0.1", "status": "active",
            "region": {"name": "us-east-1", "description": "demo"},
            "instance_type": {"name": "demo", "description": "demo", "gpu_description": b["gpu_name"] or "CPU",
                              "price_cents_per_hour": round((b["price"] or 0) * 100),
                              "specs": {"vcpus": 2, "memory_gib": 4, "storage_gib": 10, "gpus": b["gpus"]}}}
           for b in boxes]
    return {"data": out}


class ProviderAPI:
    """The stand-in server (127.0.0.1 only) for one provider; ``calls`` records every request."""

    def __init__(self, provider, answer, key=DEMO_KEY, port=0, log=None, prefix=""):
        self.provider, self.answer, self.key, self.prefix = provider, answer, key, prefix
        self.calls, self.lock, self.log = [], threading.Lock(), log
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _handle(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                status, answer = outer.respond(method, self.path, body,
                                               self.headers.get("Authorization") == "Bearer %s" % outer.key)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's names
                self._handle("GET")

            def do_DELETE(self):  # noqa: N802
                self._handle("DELETE")

            def do_POST(self):  # noqa: N802
                self._handle("POST")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = None

    @property
    def api_url(self):
        return "http://127.0.0.1:%d%s%s" % (self.port, self.prefix, LIST_PATHS[self.provider])

    def respond(self, method, path, body, key_ok):
        path = path.split("?", 1)[0]
        with self.lock:
            call = {"method": method, "path": path, "body": body, "key_ok": key_ok}
            self.calls.append(call)
            if self.log:
                with open(self.log, "a") as f:
                    f.write(json.dumps(call) + "\n")
            if not key_ok:
                return 401, {"error": "bad or missing API key"}
            if path.startswith(self.prefix):
                path = path[len(self.prefix):]
            if method == "GET" and path == LIST_PATHS[self.provider]:
                return 200, self.answer
            gone = self._given_back(method, path, body)
            if gone is None:
                return 404, {"error": "no such endpoint: %s %s" % (method, path)}
            return 200, {"success": True} if self.provider != "lambda" else {"data": {"terminated_instances": gone}}

    def _given_back(self, method, path, body):
        """Remove the box(es) a return call names from the list; their ids, or None for an unknown call."""
        if self.provider == "vastai" and method == "DELETE":
            m = re.fullmatch(r"/api/v0/instances/([^/]+)/", path)
            ids = [m.group(1)] if m else None
            items = self.answer["instances"]
        elif self.provider == "runpod" and method == "DELETE":
            m = re.fullmatch(r"/v1/pods/([^/]+)", path)
            ids = [m.group(1)] if m else None
            items = self.answer["pods"]
        elif self.provider == "lambda" and method == "POST" and path == "/api/v1/instance-operations/terminate":
            ids = [str(i) for i in (body or {}).get("instance_ids", [])]
            items = self.answer["data"]
        else:
            return None
        if ids is None:
            return None
        kept = [i for i in items if str(i["id"]) not in ids]
        if len(kept) == len(items):
            return None
        items[:] = kept
        return ids

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def write_inventory(provider, api_url, boxes, group_vars, out_dir, demo_group_vars):
    """The plugin's config in out_dir, the demo's own host variables under the plugin's host names
    (host_vars/), and group_vars/all/ with the demo's settings and SSH key; returns the config's path."""
    out = Path(out_dir)
    (out / "host_vars").mkdir(parents=True, exist_ok=True)
    (out / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    config = out / CONFIG_NAMES[provider]
    config.write_text(
        "# Written by tests/doubles/provider_api.py for the demo: the %s plugin against a local stand-in of its API.\n"
        "---\nplugin: %s\napi_url: %s\n" % (provider, PLUGINS[provider], api_url))
    for b in boxes:
        hv = {k: v for k, v in b["vars"].items() if k not in FROM_PROVIDER}
        host = host_name(provider, b)
        (out / "host_vars" / ("%s.yml" % host)).write_text(
            "# The demo's own settings for %s (inventories/demo/hosts.yml)\n---\n%s" % (b["name"], yaml.safe_dump(hv)))
    link = out / "group_vars" / "all" / "demo.yml"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(demo_group_vars, link.parent))
    ssh = {k: v for k, v in group_vars.items() if k != "ansible_user"}
    (out / "group_vars" / "all" / "ssh.yml").write_text("---\n" + yaml.safe_dump(ssh))
    return config


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--provider", choices=sorted(LIST_PATHS), default="vastai")
    ap.add_argument("--hosts", default=str(ROOT / "inventories" / "demo" / "hosts.yml"))
    ap.add_argument("--inventory-dir", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    ap.add_argument("--ready-file", help="written with the api_url once the server listens")
    args = ap.parse_args(argv)
    boxes, group_vars = demo_boxes(args.hosts)
    api = ProviderAPI(args.provider, instances(args.provider, boxes), port=args.port, log=args.log)
    config = write_inventory(args.provider, api.api_url, boxes, group_vars, args.inventory_dir,
                             Path(args.hosts).parent / "group_vars" / "all.yml")
    if args.ready_file:
        Path(args.ready_file).write_text(api.api_url + "\n")
    print("%s stand-in on %s; inventory %s (key: %s=%s)" % (args.provider, api.api_url, config,
                                                             ENV_KEYS[args.provider], DEMO_KEY), flush=True)
    try:
        api.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
