# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Want N good boxes: rent from the ranked offers, check each, give back the bad, rent replacements (issue 52).

``run`` is the loop playbooks/acquire.yml runs through scripts/acquire (docs/acquire.md). Without ``confirm`` it
only plans: the offers it would rent and the fleet's $/h. Confirmed, it needs a budget (``max_rentals``,
``max_price_per_hour`` for the fleet, ``deadline_s``) before any call. Every rental carries the run's label
(vast.ai ``label``, RunPod ``name`` and ``env``, Lambda ``name`` and ``tags``), so a re-run lists what it rented
and rents nothing twice; a failed create is followed by a look for the label, and an instance it left is given
back. A box is checked (``check``: playbooks/check.yml through scripts/acquire); "return to provider" is given back
at once for a hard failure (no or wrong GPU, a driver that cannot run the build, another tenant) and after a second
check for a soft one (a figure below its floor); "keep" and "fix here" are kept. Replacements come from the next
offers, never from a machine given back. Nothing is given back that does not carry the run's label. The API key
goes only into the Authorization header (``client.fetch_json``); every message is scrubbed of it.
Sources: ../shared/reference/provider-offers.md (create shapes and errors), provider-apis.md (lists, destroy).
"""

import hashlib
import json
import math
import re
import socket
import time
import urllib.parse

from . import offers as offerlib
from .client import PROVIDERS, ProviderError, fetch_json, label, scrub, shown_url
from .fleet import _api_base, host_vars, return_requests
from .inventory import list_hosts

LIST_SUFFIX = {"vastai": "/api/v1/instances", "runpod": "/v2/pods", "lambda": "/api/v1/instances"}
DEFAULT_IMAGES = {"vastai": "vastai/pytorch:latest", "runpod": "runpod/pytorch:latest", "lambda": ""}
LABEL_PREFIX = "gpufleet-acquire-"
ENV_NAME = "GPUFLEET_ACQUIRE_ID"  # RunPod env and Lambda tag key carrying the run id
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
# The provider's words for "this offer was taken between the search and the create": move on to the next.
TAKEN = re.compile(r"no_such_ask|is no longer available|is not available|no longer any instances available|"
                   r"insufficient-capacity|not enough capacity", re.I)
# Findings that make "return to provider" hard (give back at once); any other is soft (a second look first).
HARD_CODES = {"no_gpu", "container_without_gpus", "gpu_stack_broken", "gpu_lost", "gpu_count_mismatch",
              "gpu_model_mismatch", "claimed_model_mismatch", "gpu_used_by_another_tenant", "driver_too_old",
              "driver_library_mismatch", "ecc_or_row_remap_failure", "row_remap_failure", "xid_fatal"}
HARD_WORDS = re.compile(r"tenant|lost|no_gpu|without_gpu|mismatch|driver|missing", re.I)
# The actions kept as good. A host record with no action is kept only when its verdict says "keep" (a healthy host
# in check.yml's fleet.json: action None, verdict "keep" or "keep (note: ...)"); any other is an unknown verdict:
# checked again (soft), then given back.
KEPT_ACTIONS = ("keep", "fix here")
_KEEP_VERDICT = re.compile(r"^keep(\s|\(|$)")
# The statuses whose instances are paid for now: a box whose return failed is still billed.
PAID = ("kept", "rented", "return failed")


class AcquireInputError(ValueError):
    """The request cannot be used: nothing was asked, nothing rented."""


# ---------------------------------------------------------------------------------------- the request
def run_id(request):
    """A stable id of a request (same build, count, providers, filters, image: same id), so a re-run finds its
    rentals: 10 hex digits of a SHA-256 over its canonical JSON."""
    keys = ("torch", "want", "providers", "filters", "image")
    text = json.dumps({k: request.get(k) for k in keys}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def label_of(ident):
    return LABEL_PREFIX + ident


def check_id(ident):
    if not _ID.match(str(ident or "")):
        raise AcquireInputError("gpufleet_acquire_id %r: 1-40 letters, digits, '.', '_' or '-'" % (ident,))
    return str(ident)


def budget_problems(budget, confirm):
    """Why a run cannot go on (empty: it can). A confirmed run needs every limit of the budget."""
    out = []
    for key, kind in (("max_rentals", int), ("max_price_per_hour", float), ("deadline_s", int)):
        value = budget.get(key)
        if value in (None, ""):
            if confirm:
                out.append("%s is not set: a confirmed run needs a budget (max_rentals, max_price_per_hour for the "
                           "fleet, deadline_s); nothing was rented" % key)
            continue
        try:
            if kind(value) <= 0:
                raise ValueError
        except (TypeError, ValueError):
            out.append("%s must be a positive number, got %r" % (key, value))
    return out


# ---------------------------------------------------------------------------------------- the provider calls
def _base(provider, api_url):
    """Where the provider's write calls go: the list URL's scheme, host and prefix (RunPod's REST v1 host for the
    documented v2 list URL)."""
    if provider == "runpod" and (api_url or PROVIDERS[provider]["url"]).rstrip("/") == PROVIDERS[provider]["url"]:
        return "https://rest.runpod.io"
    return _api_base(provider, api_url, LIST_SUFFIX[provider])


def create_request(provider, api_url, offer, run_label, ident, cfg):
    """(method, url, body) of the provider's create call for an offer record, labelled with the run."""
    base = _base(provider, api_url)
    if provider == "vastai":
        body = {"client_id": "me", "image": cfg.get("image") or DEFAULT_IMAGES[provider], "label": run_label,
                "disk": int(cfg.get("disk_gb") or 20), "runtype": "ssh_direct", "target_state": "running",
                "cancel_unavail": True, "env": {ENV_NAME: ident}}
        return "PUT", "%s/api/v0/asks/%s/" % (base, urllib.parse.quote(str(offer["id"]), safe="")), body
    if provider == "runpod":
        gpu_type, _sep, cloud = str(offer["id"]).partition("/")
        body = {"name": run_label, "imageName": cfg.get("image") or DEFAULT_IMAGES[provider], "gpuTypeIds": [gpu_type],
                "gpuCount": int(offer.get("gpu_count") or 1), "cloudType": cloud or "SECURE", "ports": ["22/tcp"],
                "supportPublicIp": True, "env": {ENV_NAME: ident},
                "containerDiskInGb": int(cfg.get("disk_gb") or 20)}
        if cfg.get("cuda_versions"):
            body["allowedCudaVersions"] = list(cfg["cuda_versions"])
        return "POST", base + "/v1/pods", body
    region = (offer.get("location") or "").split(",")[0].strip()
    body = {"region_name": region, "instance_type_name": str(offer["id"]), "name": run_label,
            "ssh_key_names": [cfg.get("lambda_ssh_key_name") or ""], "tags": [{"key": ENV_NAME, "value": ident}]}
    return "POST", base + "/api/v1/instance-operations/launch", body


def created_id(provider, answer):
    """The new instance's id from a create answer (None when it does not say)."""
    answer = answer if isinstance(answer, dict) else {}
    if provider == "vastai":
        ident = answer.get("new_contract")
    elif provider == "runpod":
        ident = answer.get("id")
    else:
        ids = (answer.get("data") or {}).get("instance_ids") if isinstance(answer.get("data"), dict) else None
        ident = ids[0] if ids else None
    return None if ident in (None, "") else str(ident)


class Provider:
    """One provider's calls for the run: list by label, create, give back (only what carries the label)."""

    def __init__(self, provider, api_url, key, fetch=fetch_json, retries=3):
        self.provider, self.api_url, self.key, self.fetch, self.retries = provider, api_url, key, fetch, retries

    def ours(self, run_label):
        """The run's instances (label equal to the run's), records as the inventory plugins make them."""
        recs = list_hosts(self.provider, self.api_url, self.key, retries=self.retries)
        return [r for r in recs if (r.get("label") or "") == run_label
                and (r.get("status") or "").lower() not in ("terminated", "terminating")]

    def create(self, offer, run_label, ident, cfg):
        """("ok", id) | ("taken", message) | ("failed", message)."""
        method, url, body = create_request(self.provider, self.api_url, offer, run_label, ident, cfg)
        try:
            answer = self.fetch(self.provider, url, self.key, method=method, body=body, retries=self.retries)
        except ProviderError as exc:
            msg = scrub(exc, self.key)
            said = re.search(r"The provider said: (.*?)\.( Check|$)", msg)
            if TAKEN.search(msg):
                return "taken", "%s said: %s" % (label(self.provider), said.group(1) if said else msg)
            return "failed", msg
        ident = created_id(self.provider, answer)
        if ident is None:
            return "failed", "%s: the create answer names no instance (%s)" % (label(self.provider), shown_url(url))
        return "ok", ident

    def give_back(self, rec, run_label):
        """Give back one instance record; refused (ProviderError) unless it carries the run's label."""
        if (rec.get("label") or "") != run_label:
            raise ProviderError("%s %s does not carry this run's label %s: not given back" % (
                label(self.provider), rec.get("id"), run_label))
        for method, url, body, _ids in return_requests(self.provider, self.api_url, [rec["id"]]):
            self.fetch(self.provider, url, self.key, method=method, body=body, retries=self.retries)


# ---------------------------------------------------------------------------------------- the judgement
def _version(text):
    return tuple(int(p) for p in re.findall(r"\d+", str(text or "")))


def classify(host, req):
    """("keep" | "return_hard" | "return_soft", why) of a fleet.json host record against the requirement."""
    floor = (req or {}).get("driver_floor")
    driver = host.get("driver_version")
    if floor and driver and _version(driver) < _version(floor):
        return "return_hard", "driver %s cannot run torch %s (needs >= %s)" % (driver, req.get("torch"), floor)
    action = host.get("action")
    if action in KEPT_ACTIONS or (action in (None, "") and _KEEP_VERDICT.match(str(host.get("verdict") or ""))):
        return "keep", host.get("verdict") or action
    if action in (None, ""):
        return "return_soft", "no verdict in the pre-check's record (%s): not kept as good" % (
            host.get("verdict") or "no action, no verdict")
    items = [j for j in host.get("judgement") or [] if j.get("action") == action and j.get("source") != "history"]
    hard = [j for j in items if j.get("code") in HARD_CODES or HARD_WORDS.search(str(j.get("code") or ""))]
    if action == "return to provider" and hard:
        return "return_hard", host.get("verdict") or action
    return "return_soft", host.get("verdict") or action


# ---------------------------------------------------------------------------------------- the loop
def _rec_box(rec):
    return {"provider": rec["provider"], "id": str(rec["id"]), "machine_id": rec.get("machine_id"),
            "label": rec.get("label"), "price_per_hour": rec.get("price_per_hour"), "state": rec.get("state"),
            "gpu": rec.get("gpu_model"), "host": "%s-%s" % (PROVIDERS[rec["provider"]]["prefix"], rec["id"])}


def cuda_versions(req, filters):
    """The CUDA versions a RunPod create allows for the build (REST v1 ``allowedCudaVersions``: every version
    >= the build's CUDA), as ``offers.provider_filters`` prints them."""
    return list(offerlib.provider_filters(req, filters)["runpod"]["v1_allowedCudaVersions"])


def run(request, clients, offer_list, check, confirm=False, previous=None, clock=time.monotonic, sleep=time.sleep,
        log=None, state=None):
    """The loop. ``request``: {want, budget {max_rentals, max_price_per_hour, deadline_s}, id, cfg, requirement,
    ssh_wait_s, recheck_wait_s}; ``clients``: {provider: Provider}; ``offer_list``: the ranked kept offers;
    ``check(records)`` -> {host: fleet.json host record} (the pre-check); ``previous``: the last acquire.json of this
    run id; ``state``: a dict whose "report" is the report as it grows, so a caller can write it when the run
    raises. Returns the report (acquire.json's content)."""
    ident = request["id"]
    run_label = label_of(ident)
    want = int(request["want"])
    budget = request.get("budget") or {}
    previous = previous or {}
    start = clock()
    report = {"id": ident, "label": run_label, "want": want, "confirm": bool(confirm), "budget": budget,
              "requirement": request.get("requirement"), "rentals": [], "events": [], "stopped": None,
              "excluded_machines": sorted(set(str(m) for m in previous.get("excluded_machines") or [])
                                          | set(str(m) for m in request.get("excluded_machines") or []))}
    if state is not None:
        state["report"] = report
    excluded = set(report["excluded_machines"])
    before = {(r["provider"], r["id"]): r for r in previous.get("rentals") or []}

    def event(text):
        report["events"].append(text)
        if log is not None:  # the events are the report's; scripts/acquire prints them as they come
            log(text)

    # What this run rented before (its label), with the verdict it got then.
    kept, pending = [], []
    for provider, client in clients.items():
        try:
            found = client.ours(run_label)
        except ProviderError as exc:
            event("%s: could not list this run's rentals: %s" % (label(provider), exc))
            report["stopped"] = "error: the run's rentals could not be listed, nothing was rented"
            return report
        for rec in found:
            box = _rec_box(rec)
            old = before.get((provider, box["id"]), {})
            box.update(offer=old.get("offer"), checks=old.get("checks", []), from_earlier_run=True, rec=rec)
            if old.get("status") == "kept":
                box["status"] = "kept"
                kept.append(box)
            else:
                box["status"] = "rented"
                pending.append(box)
            report["rentals"].append(box)
            event("found %s %s (%s, this run's label) from an earlier run: %s" % (
                label(provider), box["id"], box["gpu"], box["status"]))
    # The earlier runs' rentals no longer listed stay in the report: given back, or gone since.
    listed = {(b["provider"], b["id"]) for b in report["rentals"]}
    for key, old in before.items():
        if key not in listed:
            gone = dict(old, from_earlier_run=True, rec=None)
            if old.get("status") not in ("returned", "gone"):
                gone.update(status="gone", returned_because="no longer listed by %s" % label(old["provider"]))
            report["rentals"].append(gone)
    rented_offers = {(r.get("provider"), r.get("offer")) for r in previous.get("rentals") or []}
    taken_before = {(r.get("provider"), r.get("offer")) for r in previous.get("taken") or []}
    report["taken"] = list(previous.get("taken") or [])
    queue = [o for o in offer_list if str(o.get("machine_id")) not in excluded
             and (o["provider"], o["id"]) not in rented_offers | taken_before and o["provider"] in clients]

    def unpriced():
        """The paid rentals whose price is not known (a found rental without one): the fleet's $/h is unknown."""
        return [b for b in report["rentals"] if b["status"] in PAID and number_or_none(b.get("price_per_hour")) is None]

    def fleet_price():
        return round(sum(number_or_none(b.get("price_per_hour")) or 0 for b in report["rentals"]
                         if b["status"] in PAID), 4)

    def rentable(o):
        """An offer the pick may take: priced, and not on a machine given back (or excluded) in this run."""
        return (number_or_none(o.get("price_per_hour")) is not None
                and (o.get("machine_id") is None or str(o["machine_id"]) not in excluded))

    for o in queue:
        if number_or_none(o.get("price_per_hour")) is None:
            event("offer %s %s lists no price: not rented" % (label(o["provider"]), o["id"]))

    if not confirm:
        need = max(want - len(kept) - len(pending), 0)
        plan, price = [], fleet_price()
        cap = budget.get("max_price_per_hour")
        if unpriced():
            need = 0
            event("the price of %s is not known: the fleet's $/h is unknown, nothing more is planned" % ", ".join(
                b["host"] for b in unpriced()))
        for o in queue:
            if len(plan) >= need:
                break
            if not rentable(o):
                continue
            if cap not in (None, "") and price + o["price_per_hour"] > float(cap):
                continue
            plan.append(o)
            price += o["price_per_hour"]
        report["plan"] = [{"provider": o["provider"], "offer": o["id"], "gpu": o.get("gpu_name"),
                           "gpus": o.get("gpu_count"), "price_per_hour": o["price_per_hour"],
                           "machine_id": o.get("machine_id")} for o in plan]
        report["plan_price_per_hour"] = round(price, 4)
        report["stopped"] = "plan only: nothing rented (-e gpufleet_acquire_confirm=yes rents)"
        for o in plan:
            event("would rent %s offer %s (%s x%s) at $%.2f/h" % (label(o["provider"]), o["id"], o.get("gpu_name"),
                                                                  o.get("gpu_count"), o["price_per_hour"]))
        event("plan: %d to rent, fleet $%.2f/h with the %d found" % (len(plan), price, len(kept) + len(pending)))
        return report

    max_rentals = int(budget["max_rentals"])
    cap = float(budget["max_price_per_hour"])
    deadline = start + int(budget["deadline_s"])
    made = int(previous.get("rentals_made") or 0)
    report["rentals_made"] = made

    def give_back(box, why):
        client = clients[box["provider"]]
        if box.get("machine_id") is not None:  # returned or not, the run does not rent this machine again
            excluded.add(str(box["machine_id"]))
            report["excluded_machines"] = sorted(excluded)
        if box.get("rec") is None:
            # Never listed while we waited: look for it again by the run's label before giving it back.
            try:
                box["rec"] = next((r for r in client.ours(run_label) if str(r["id"]) == str(box["id"])), None)
            except ProviderError as exc:
                event("could not list this run's label to give back %s %s: %s" % (
                    label(box["provider"]), box["id"], exc))
        if box.get("rec") is None:
            box["status"] = "return failed"
            box["returned_because"] = "%s; not listed by %s under label %s: not given back, still billed: give it " \
                                      "back by hand" % (why, label(box["provider"]), run_label)
            event("could not give back %s %s: return failed: not listed by %s under label %s (%s)" % (
                label(box["provider"]), box["id"], label(box["provider"]), run_label, why))
            return
        try:
            client.give_back(box["rec"], run_label)
            box["status"] = "returned"
            box["returned_because"] = why
            event("gave back %s %s (machine %s): %s" % (label(box["provider"]), box["id"], box["machine_id"], why))
        except ProviderError as exc:
            box["status"] = "return failed"
            box["returned_because"] = why
            event("could not give back %s %s: %s" % (label(box["provider"]), box["id"], exc))

    while True:
        good = [b for b in report["rentals"] if b["status"] == "kept"]
        pending = [b for b in report["rentals"] if b["status"] == "rented"]
        if len(good) >= want:
            report["stopped"] = "reached: %d good box(es) of %d wanted" % (len(good), want)
            break
        if clock() > deadline:
            report["stopped"] = "budget: deadline_s %s passed with %d good box(es) of %d" % (
                budget["deadline_s"], len(good), want)
            break
        # Rent what is missing, within the budget.
        need = want - len(good) - len(pending)
        stop_why = None
        while need > 0:
            if made >= max_rentals:
                stop_why = "budget: max_rentals %d reached" % max_rentals
                break
            if unpriced():
                stop_why = "budget: the price of %s is not known, the fleet's $/h cannot be held under " \
                           "max_price_per_hour" % ", ".join(b["host"] for b in unpriced())
                break
            price = fleet_price()
            queue[:] = [o for o in queue if rentable(o)]
            offer = next((o for o in queue if price + o["price_per_hour"] <= cap + 1e-9), None)
            if offer is None:
                stop_why = ("budget: no offer left within max_price_per_hour $%.2f (fleet now $%.2f/h)" % (cap, price)
                            if queue else "no offer left to rent")
                break
            queue.remove(offer)
            client = clients[offer["provider"]]
            status, said = client.create(offer, run_label, ident, request.get("cfg") or {})
            if status != "ok":
                # Any create that did not say "ok" may still have left an instance (a 5xx after the instance was
                # made, then a retry that reads "taken"; vast.ai's error with a stopped instance): look for the label.
                known = {b["id"] for b in report["rentals"]}
                try:
                    left = [r for r in client.ours(run_label) if str(r["id"]) not in known]
                except ProviderError as exc:
                    left = []
                    event("could not list this run's label after the create: %s" % exc)
                if status == "taken":
                    report["taken"].append({"provider": offer["provider"], "offer": offer["id"], "said": said})
                    event("offer %s %s was taken in between (%s): next offer" % (
                        label(offer["provider"]), offer["id"], said))
                else:
                    event("create of %s offer %s failed: %s" % (label(offer["provider"]), offer["id"], said))
                if status == "failed" or left:
                    made += 1
                    report["rentals_made"] = made
                for rec in left:
                    box = dict(_rec_box(rec), offer=offer["id"], checks=[], rec=rec, status="rented")
                    report["rentals"].append(box)
                    give_back(box, "left by a failed create")
                continue
            made += 1
            report["rentals_made"] = made
            rec_id = said
            box = {"provider": offer["provider"], "id": rec_id, "offer": offer["id"],
                   "machine_id": offer.get("machine_id"), "label": run_label, "gpu": offer.get("gpu_name"),
                   "price_per_hour": offer["price_per_hour"], "status": "rented", "checks": [], "rec": None,
                   "host": "%s-%s" % (PROVIDERS[offer["provider"]]["prefix"], rec_id)}
            report["rentals"].append(box)
            event("rented %s offer %s -> instance %s (%s, $%.2f/h, label %s)" % (
                label(offer["provider"]), offer["id"], rec_id, offer.get("gpu_name"), offer["price_per_hour"],
                run_label))
            need -= 1
        pending = [b for b in report["rentals"] if b["status"] == "rented"]
        if not pending:
            report["stopped"] = "%s with %d good box(es) of %d" % (
                stop_why or "nothing left to rent", len([b for b in report["rentals"] if b["status"] == "kept"]), want)
            break
        # Wait for SSH (the provider's ready state), then the pre-check.
        ready = _wait_ready(clients, run_label, pending, min(deadline, clock() + int(request.get("ssh_wait_s") or 300)),
                            clock, sleep, request.get("ssh_probe", ssh_banner))
        for box in pending:
            if box["id"] not in ready:
                give_back(box, "no SSH within the wait")
        boxes = [b for b in pending if b["status"] == "rented"]
        if not boxes:
            continue
        soft = []
        for box, verdict, why in _look(check, boxes, request.get("requirement")):
            if verdict == "keep":
                box["status"] = "kept"
                event("keep %s: %s" % (box["host"], why))
            elif verdict == "return_hard":
                give_back(box, "hard failure: %s" % why)
            else:
                soft.append(box)
        if soft:  # a soft failure (a figure below its floor, no answer) gets a second look before it goes back
            event("soft failure on %s: a second look" % ", ".join(b["host"] for b in soft))
            sleep(float(request.get("recheck_wait_s") or 0))
            for box, verdict, why in _look(check, soft, request.get("requirement")):
                if verdict == "keep":
                    box["status"] = "kept"
                    event("keep %s after a second look: %s" % (box["host"], why))
                else:
                    give_back(box, "failed twice: %s" % why)
        if stop_why and not [b for b in report["rentals"] if b["status"] == "rented"]:
            good = [b for b in report["rentals"] if b["status"] == "kept"]
            if len(good) < want:
                report["stopped"] = "%s with %d good box(es) of %d" % (stop_why, len(good), want)
                break
    report["excluded_machines"] = sorted(excluded)
    report["fleet_price_per_hour"] = fleet_price()
    if unpriced():
        report["fleet_price_unknown"] = [b["host"] for b in unpriced()]
    report["good"] = len([b for b in report["rentals"] if b["status"] == "kept"])
    event("stopped: %s; fleet $%.2f/h" % (report["stopped"], report["fleet_price_per_hour"]))
    return report


def number_or_none(value):
    """A price as a float, None when there is none (never 0 for a missing one)."""
    if isinstance(value, bool) or value in (None, ""):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _look(check, boxes, req):
    """[(box, class, why)]: one pre-check of the boxes, each verdict kept in the box's checks."""
    results = check([b["rec"] for b in boxes])
    out = []
    for box in boxes:
        host = results.get(box["host"]) or {"action": "check access / rerun", "verdict": "not in the report"}
        verdict, why = classify(host, req)
        box["checks"].append({"verdict": host.get("verdict") or host.get("action") or "no verdict", "class": verdict})
        out.append((box, verdict, why))
    return out


def ssh_banner(host, port, timeout=3.0):
    """True when host:port answers with an SSH banner (sshd is up: the login itself is check.yml's step 1)."""
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(4).startswith(b"SSH-")
    except (OSError, ValueError):
        return False


def _wait_ready(clients, run_label, boxes, until, clock, sleep, probe=ssh_banner):
    """{id} of the boxes the provider lists ready (running, with an SSH endpoint) whose SSH port answers
    (``probe``; None: the provider's word alone), each box's record refreshed."""
    ready = set()
    while True:
        for provider in {b["provider"] for b in boxes}:
            try:
                recs = {str(r["id"]): r for r in clients[provider].ours(run_label)}
            except ProviderError:
                recs = {}
            for box in boxes:
                rec = recs.get(box["id"])
                if box["provider"] == provider and rec is not None:
                    box["rec"] = rec
                    box["machine_id"] = box.get("machine_id") or rec.get("machine_id")
                    ssh = rec.get("ssh") or {}
                    if rec.get("state") == "ready" and ssh and (probe is None or probe(ssh["host"], ssh["port"])):
                        ready.add(box["id"])
        if len(ready) == len(boxes) or clock() >= until:
            return ready
        sleep(2)


# ---------------------------------------------------------------------------------------- the outputs
def inventory(report, group_vars):
    """The kept boxes as a YAML-able inventory site.yml takes as it is (the demo inventory's layout)."""
    hosts = {}
    for box in report["rentals"]:
        if box["status"] == "kept" and box.get("rec"):
            hosts[box["host"]] = host_vars(box["rec"])
    return {"acquired": {"hosts": hosts, "vars": dict(group_vars)}}


def public(report):
    """The report without the raw records (acquire.json)."""
    out = dict(report)
    out["rentals"] = [{k: v for k, v in b.items() if k != "rec"} for b in report["rentals"]]
    return out


def to_markdown(report):
    lines = ["# Acquire run %s (label `%s`)" % (report["id"], report["label"]), "",
             "Wanted %d good box(es); %s." % (report["want"], report["stopped"]), ""]
    if report.get("plan") is not None:
        lines += ["| provider | offer | GPU | n | $/h |", "|---|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s | %.2f |" % (p["provider"], p["offer"], p["gpu"], p["gpus"], p["price_per_hour"])
                  for p in report["plan"]]
        lines += ["", "Fleet $%.2f/h if rented." % report.get("plan_price_per_hour", 0)]
    else:
        lines += ["| host | provider | offer | machine | GPU | $/h | checks | status |",
                  "|---|---|---|---|---|---|---|---|"]
        for b in report["rentals"]:
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s%s |" % (
                b["host"], b["provider"], b.get("offer") or "", b.get("machine_id") or "", b.get("gpu") or "",
                b.get("price_per_hour"), "; ".join(c["verdict"] for c in b.get("checks") or []).replace("|", "/"),
                b["status"], (": " + b["returned_because"]) if b.get("returned_because") else ""))
        lines += ["", "Fleet $%.2f/h; %d rental(s) made." % (
            report.get("fleet_price_per_hour") or 0, report.get("rentals_made") or 0)]
    lines += ["", "## Events", ""] + ["- %s" % e for e in report["events"]]
    return "\n".join(lines) + "\n"


def kept_offers(result):
    """The ranked offers of offers.search that are in stock."""
    return [o for o in result.get("kept") or [] if o.get("in_stock", True)]


__all__ = ["AcquireInputError", "Provider", "budget_problems", "classify", "create_request", "cuda_versions",
           "inventory", "label_of", "run", "run_id", "offerlib"]
