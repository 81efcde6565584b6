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

It also serves the offer endpoints playbooks/offers.yml asks (``offers=`` or ``--offers``): vast.ai
``POST /api/v0/bundles/`` (the JSON query is applied: eq/neq/gt/gte/lt/lte/in/notin on the fields an offer has,
``allocated_storage`` as disk_space >=, ``order`` and ``limit``), RunPod ``GET /v2/catalog/gpus`` and Lambda
``GET /api/v1/instance-types``, with ``offers(provider)``: a set of varied quality in the recorded shapes
(../shared/reference/provider-offers.md): drivers 535 to 595, cuda_max_good 12.2 to 13.2, RTX 4090, H100, H200,
A100, RTX PRO 6000 and V100 (which a cu130 build lacks), one machine on ``KNOWN_BAD_MACHINE``.

    python3 -m tests.doubles.provider_api --provider vastai --offers-only --port 0

serves the offers alone (no demo fleet, no inventory written).

With ``rentals`` it also rents (playbooks/acquire.yml): vast.ai ``PUT /api/v0/asks/{id}/``, RunPod ``POST
/v1/pods`` and Lambda ``POST /api/v1/instance-operations/launch``, in their recorded shapes (the new instance's id:
``new_contract``, the pod, ``data.instance_ids``), each rented offer's instance listed with the create's label
(vast ``label``, RunPod ``name`` and ``env``, Lambda ``name`` and ``tags``) and pointing at the box ``rentals``
maps the offer to ({offer id: {"port": P}}: a container of tests/doubles/rental_pool.py; an offer without one
stays ``loading``). A rented offer leaves the search until it is given back. ``faults`` ({offer id: "taken" |
"fails_with_instance"}) answers as the providers do when an offer was taken in between (vast 404 ``no_such_ask``,
RunPod "no longer any instances available", Lambda ``insufficient-capacity``), or fails a create that still left
a (stopped) instance behind, as vast.ai does (dstack's vastai api_client).
"""

import argparse
import contextlib
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
# The offer endpoints: method and path per provider.
OFFER_PATHS = {"vastai": ("POST", "/api/v0/bundles/"), "runpod": ("GET", "/v2/catalog/gpus"),
               "lambda": ("GET", "/api/v1/instance-types")}
KNOWN_BAD_MACHINE = 4999  # the vast.ai machine id of offer 7011, a cheap RTX 4090 a known-bad list may name


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


def _vast_offer(ident, machine, gpu, cap, ram, driver, cuda, price, reliability, **extra):
    parts = [int(p) for p in driver.split(".")]
    offer = {"id": ident, "ask_contract_id": ident, "bundle_id": ident + 100000, "machine_id": machine,
             "host_id": 90000 + machine % 1000, "num_gpus": 1, "gpu_name": gpu, "gpu_arch": "nvidia", "gpu_ram": ram,
             "compute_cap": cap, "cuda_max_good": cuda, "driver_version": driver,
             "driver_vers": parts[0] * 1000000 + parts[1] * 1000 + parts[2], "dph_total": price, "storage_cost": 0.15,
             "inet_down_cost": 0.005, "reliability": reliability, "reliability2": reliability,
             "verification": "verified", "disk_bw": 2500.0, "inet_down": 850.0, "inet_up": 600.0, "disk_space": 220.5,
             "pcie_bw": 24.6, "geolocation": "Oslo, NO", "direct_port_count": 40, "rentable": True, "rented": False,
             "end_date": 1800000000.0}
    offer.update(extra)
    return offer


def offers(provider):
    """The offer endpoint's answer: varied quality, made-up values in the providers' recorded shapes."""
    if provider == "vastai":
        return {"offers": [
            _vast_offer(7001, 4101, "RTX 4090", 890, 24564, "580.95.05", 13.0, 0.40, 0.995),
            _vast_offer(7002, 4102, "RTX 4090", 890, 24564, "570.124.06", 12.8, 0.32, 0.991),
            _vast_offer(7003, 4103, "RTX 4090", 890, 24564, "535.183.01", 12.2, 0.28, 0.97, geolocation="Quebec, CA"),
            _vast_offer(7004, 4104, "H100 SXM", 900, 81559, "595.91.07", 13.2, 2.10, 0.998, disk_space=800.0),
            _vast_offer(7005, 4105, "H100 SXM", 900, 81559, "550.127.05", 12.4, 1.60, 0.99),
            _vast_offer(7006, 4106, "H200", 900, 143771, "580.105.08", 13.0, 3.20, 0.999, geolocation="Texas, US"),
            _vast_offer(7007, 4107, "A100 SXM4", 800, 81920, "580.95.05", 13.0, 1.10, 0.985),
            _vast_offer(7008, 4108, "A100 PCIE", 800, 40960, "570.172.08", 12.8, 0.75, 0.98),
            _vast_offer(7009, 4109, "RTX PRO 6000 WS", 1200, 97887, "580.95.05", 13.0, 1.05, 0.99),
            _vast_offer(7010, 4110, "Tesla V100", 700, 16384, "580.95.05", 13.0, 0.20, 0.96),
            _vast_offer(7011, KNOWN_BAD_MACHINE, "RTX 4090", 890, 24564, "580.95.05", 13.0, 0.35, 0.99),
            _vast_offer(7012, 4112, "H100 SXM", 900, 81559, "580.65.06", 13.0, 1.95, 0.99),
            _vast_offer(7013, 4113, "RTX 4090", 890, 24564, "580.95.05", 13.0, 0.80, 0.99, num_gpus=2),
            _vast_offer(7014, 4114, "H100 SXM", 900, 81559, "580.178.04", 13.0, 2.25, 0.997),
        ]}
    if provider == "runpod":
        def gpu(ident, name, pool, memory, price, stock, cudas, secure=True, community=True):
            return {"id": ident, "name": name, "pool": pool, "manufacturer": "NVIDIA", "memory": memory,
                    "secure": secure, "community": community,
                    "price": {"secure": price[0], "community": price[1], "serverless": None},
                    "maxCount": {"secure": 8, "community": 4}, "availability": stock,
                    "dataCenters": [{"id": "EU-RO-1", "name": "Europe Romania 1", "availability": stock}],
                    "cudaVersions": [{"version": v, "available": a} for v, a in cudas]}
        return {"gpus": [
            gpu("NVIDIA GeForce RTX 4090", "RTX 4090", "ADA_24", 24, (0.59, 0.34), "MEDIUM",
                (("12.8", True), ("13.0", True))),
            gpu("NVIDIA H100 80GB HBM3", "H100 SXM", "HOPPER_80", 80, (2.69, None), "HIGH",
                (("12.4", True), ("12.8", True), ("13.0", False)), community=False),
            gpu("NVIDIA H200", "H200", "HOPPER_141", 141, (3.59, None), "LOW", (("12.8", True), ("13.0", True)),
                community=False),
            gpu("Tesla V100-SXM2-16GB", "V100 SXM2", "VOLTA_16", 16, (None, 0.17), "HIGH",
                (("12.2", True), ("13.0", True)), secure=False),
            gpu("NVIDIA A100 80GB PCIe", "A100 PCIe", "AMPERE_80", 80, (1.19, None), "NONE", (("13.0", True),),
                community=False),
        ]}

    def itype(name, desc, gpus, cents, storage, regions):
        return {"instance_type": {"name": name, "description": "%dx %s" % (gpus, desc), "gpu_description": desc,
                                  "price_cents_per_hour": cents,
                                  "specs": {"vcpus": 26 * gpus, "memory_gib": 200 * gpus, "storage_gib": storage,
                                            "gpus": gpus}},
                "regions_with_capacity_available": [{"name": r, "description": "demo"} for r in regions]}
    return {"data": {
        "gpu_1x_h100_sxm5": itype("gpu_1x_h100_sxm5", "H100 (80 GB SXM5)", 1, 329, 1024, ["us-east-1"]),
        "gpu_8x_h100_sxm5": itype("gpu_8x_h100_sxm5", "H100 (80 GB SXM5)", 8, 2392, 22528, ["us-east-1"]),
        "gpu_1x_a100": itype("gpu_1x_a100", "A100 (40 GB PCIe)", 1, 129, 512, []),
        "gpu_1x_gh200": itype("gpu_1x_gh200", "GH200 (96 GB)", 1, 149, 4096, ["us-east-3"]),
    }}


_OPS = {"eq": lambda a, b: a == b, "neq": lambda a, b: a != b, "gt": lambda a, b: a > b,
        "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b,
        "in": lambda a, b: a in b, "notin": lambda a, b: a not in b}


def vast_search(answer, query):
    """vast.ai's search over the offers: the query's conditions on the fields an offer has, then order and limit."""
    query = query if isinstance(query, dict) else {}
    conds = {k: v for k, v in query.items() if isinstance(v, dict)}
    if query.get("allocated_storage") is not None:
        conds["disk_space"] = {"gte": query["allocated_storage"]}
    out = []
    for offer in answer["offers"]:
        if all(field not in offer or all(_OPS[op](offer[field], want) for op, want in cond.items() if op in _OPS)
               for field, cond in conds.items()):
            out.append(offer)
    for field, direction in reversed(query.get("order") or []):
        out.sort(key=lambda o: o.get(field) or 0, reverse=direction == "desc")
    return {"offers": out[:int(query.get("limit") or 64)]}


class ProviderAPI:
    """The stand-in server (127.0.0.1 only) for one provider; ``calls`` records every request. ``offers`` (the
    answer of ``offers(provider)``) adds the provider's offer endpoint."""

    def __init__(self, provider, answer, key=DEMO_KEY, port=0, log=None, prefix="", offers=None, rentals=None,
                 faults=None):
        self.provider, self.answer, self.key, self.prefix = provider, answer, key, prefix
        self.offers = offers
        self.rentals, self.faults = rentals, dict(faults or {})
        self.rented, self.instance_offer, self.created = set(), {}, 0
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

            def do_PUT(self):  # noqa: N802
                self._handle("PUT")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = None

    @property
    def api_url(self):
        return "http://127.0.0.1:%d%s%s" % (self.port, self.prefix, LIST_PATHS[self.provider])

    @property
    def offers_url(self):
        return "http://127.0.0.1:%d%s%s" % (self.port, self.prefix, OFFER_PATHS[self.provider][1])

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
            if self.offers is not None and (method, path) == OFFER_PATHS[self.provider]:
                return 200, self._offer_answer(body)
            if self.rentals is not None:
                created = self._create(method, path, body)
                if created is not None:
                    return created
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
        for i in ids:  # the offer is back on the market
            self.rented.discard(self.instance_offer.pop(i, None))
        return ids

    # ------------------------------------------------------------------ renting (playbooks/acquire.yml)
    def _offer_answer(self, body):
        """The offer endpoint's answer without the offers rented here (they are back once given back)."""
        if self.provider == "vastai":
            free = {"offers": [o for o in self.offers["offers"] if str(o["id"]) not in self.rented]}
            return vast_search(free, body)
        if self.provider == "lambda":
            data = {k: dict(v, regions_with_capacity_available=[] if k in self.rented
                            else v["regions_with_capacity_available"]) for k, v in self.offers["data"].items()}
            return {"data": data}
        return self.offers

    def _create(self, method, path, body):
        """(status, answer) of a create call, or None when path is no create endpoint."""
        body = body if isinstance(body, dict) else {}
        if self.provider == "vastai" and method == "PUT":
            m = re.fullmatch(r"/api/v0/asks/([^/]+)/", path)
            if not m:
                return None
            ident = m.group(1)
            offer = next((o for o in self.offers["offers"] if str(o["id"]) == ident), None)
            if offer is None or ident in self.rented or self.faults.get(ident) == "taken":
                return 404, {"success": False, "error": "no_such_ask", "msg": "ask %s is not available" % ident,
                             "ask_id": int(ident) if ident.isdigit() else ident}
        elif self.provider == "runpod" and method == "POST" and path == "/v1/pods":
            ident = "%s/%s" % ((body.get("gpuTypeIds") or [""])[0], body.get("cloudType") or "SECURE")
            offer = next((g for g in self.offers["gpus"] if g["id"] == ident.split("/")[0]), None)
            if offer is None or ident in self.rented or self.faults.get(ident) == "taken":
                return 400, {"message": "There are no longer any instances available with the requested "
                                        "specifications. Please refresh and try again."}
        elif self.provider == "lambda" and method == "POST" and path == "/api/v1/instance-operations/launch":
            ident = str(body.get("instance_type_name"))
            offer = self.offers["data"].get(ident)
            if offer is None or ident in self.rented or self.faults.get(ident) == "taken":
                return 400, {"error": {"code": "instance-operations/launch/insufficient-capacity",
                                       "message": "Not enough capacity to fulfill launch request.",
                                       "suggestion": "Try a different region or instance type."}}
        else:
            return None
        self.created += 1
        number = self.created
        box = self.rentals.get(ident) or {}
        inst_id = self._instance(ident, offer, body, number, box, self.faults.get(ident) == "fails_with_instance")
        self.rented.add(ident)
        self.instance_offer[inst_id] = ident
        if self.faults.get(ident) == "fails_with_instance":
            if self.provider == "vastai":
                return 400, {"success": False, "error": "invalid_args", "ask_id": int(ident),
                             "msg": "scheduling failed: instance left stopped", "new_contract": int(inst_id)}
            return 500 if self.provider != "lambda" else 400, {
                "message": "internal error while starting the pod", "error": {
                    "code": "global/internal-error", "message": "internal error while launching"}}
        if self.provider == "vastai":
            return 200, {"success": True, "new_contract": int(inst_id)}
        if self.provider == "runpod":
            return 200, next(p for p in self.answer["pods"] if p["id"] == inst_id)
        return 200, {"data": {"instance_ids": [inst_id]}}

    def _instance(self, ident, offer, body, number, box, stopped):
        """Add the rented offer's instance to the list; its id."""
        port = box.get("port")
        if self.provider == "vastai":
            inst_id = str(3000 + number)
            self.answer.setdefault("instances", [])
            self.answer.setdefault("next_token", None)
            running = port is not None and not stopped
            self.answer["instances"].append({
                "id": int(inst_id), "machine_id": offer["machine_id"], "label": body.get("label"),
                "actual_status": "running" if running else ("stopped" if stopped else "loading"),
                "cur_state": "running" if running else "stopped", "intended_status": "running",
                "num_gpus": offer["num_gpus"], "gpu_name": offer["gpu_name"], "dph_total": offer["dph_total"],
                "driver_version": offer.get("driver_version"), "cuda_max_good": offer.get("cuda_max_good"),
                "public_ipaddr": "127.0.0.1\n" if running else None, "image_runtype": "ssh_direct",
                "ports": {"22/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]} if running else {},
                "extra_env": [[k, v] for k, v in (body.get("env") or {}).items()],
                "status_msg": "success, running" if running else "Pulling image layers"})
            return inst_id
        if self.provider == "runpod":
            inst_id = "acq%04dpod" % number
            self.answer.setdefault("pods", [])
            count = int(body.get("gpuCount") or 1)
            running = port is not None and not stopped
            self.answer["pods"].append({
                "id": inst_id, "name": body.get("name"), "env": body.get("env") or {},
                "status": "RUNNING" if running else "EXITED" if stopped else "PROVISIONING",
                "cost": round((offer["price"].get((body.get("cloudType") or "SECURE").lower()) or 0) * count, 4),
                "gpu": {"id": offer["id"], "count": count, "displayName": offer["name"]},
                "machineId": "m-%s" % re.sub(r"[^a-z0-9]", "", offer["id"].lower())[:12],
                "cloud": body.get("cloudType"),
                "ssh": {"direct": {"host": "127.0.0.1", "port": port, "username": "root"} if running else None,
                        "proxy": None},
                "runtime": {"ports": [{"private": 22, "public": port, "type": "tcp", "ip": "127.0.0.1"}]}
                if running else None})
            return inst_id
        inst_id = "acq%029x" % number
        self.answer.setdefault("data", [])
        it = offer["instance_type"]
        regions = offer["regions_with_capacity_available"]
        self.answer["data"].append({
            "id": inst_id, "name": body.get("name"), "ip": "127.0.0.1" if port and not stopped else None,
            "status": "active" if port and not stopped else "booting", "tags": body.get("tags") or [],
            "region": {"name": body.get("region_name") or (regions[0]["name"] if regions else ""), "description": ""},
            "instance_type": {k: it[k] for k in ("name", "description", "gpu_description", "price_cents_per_hour",
                                                 "specs")}})
        return inst_id

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@contextlib.contextmanager
def offer_stand_ins(key=DEMO_KEY, names=("vastai", "runpod", "lambda")):
    """{provider: a started stand-in serving offers(provider)}, stopped on leaving the block."""
    apis = {p: ProviderAPI(p, {}, key=key, offers=offers(p)).start() for p in names}
    try:
        yield apis
    finally:
        for api in apis.values():
            api.stop()


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
    ap.add_argument("--inventory-dir", help="where to write the plugin's config (required unless --offers-only)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    ap.add_argument("--ready-file", help="written with the api_url once the server listens")
    ap.add_argument("--offers", action="store_true", help="also serve the offer endpoint (offers(provider))")
    ap.add_argument("--offers-only", action="store_true",
                    help="serve the offer endpoint alone: no demo fleet, no inventory; prints the offers URL")
    args = ap.parse_args(argv)
    if args.offers_only:
        api = ProviderAPI(args.provider, {}, port=args.port, log=args.log, offers=offers(args.provider))
        if args.ready_file:
            Path(args.ready_file).write_text(api.offers_url + "\n")
        print("%s offers stand-in on %s (key: %s=%s)" % (args.provider, api.offers_url, ENV_KEYS[args.provider],
                                                         DEMO_KEY), flush=True)
        return _serve(api)
    if not args.inventory_dir:
        ap.error("--inventory-dir is required unless --offers-only")
    boxes, group_vars = demo_boxes(args.hosts)
    api = ProviderAPI(args.provider, instances(args.provider, boxes), port=args.port, log=args.log,
                      offers=offers(args.provider) if args.offers else None)
    config = write_inventory(args.provider, api.api_url, boxes, group_vars, args.inventory_dir,
                             Path(args.hosts).parent / "group_vars" / "all.yml")
    if args.ready_file:
        Path(args.ready_file).write_text(api.api_url + "\n")
    print("%s stand-in on %s; inventory %s (key: %s=%s)" % (
        args.provider, api.api_url, config, ENV_KEYS[args.provider], DEMO_KEY), flush=True)
    return _serve(api)


def _serve(api):
    try:
        api.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
