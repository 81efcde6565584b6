# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lambda Cloud: one instance of ``GET /api/v1/instances`` as a host record (ubuntu@ip:22), and the host names
(lambda-<name> where the name is unique).

Sources: Lambda Cloud API 1.8.3 (https://docs.lambda.ai/api/cloud): GET /api/v1/instances, ubuntu@ip:22,
``{"error": {"code", "message", "suggestion"}}``, about 1 request per second.
"""

from .client import READY, _get, _number, _record, safe_name


def lambda_record(inst):
    p = "lambda"
    ident = _get(p, inst, "id", (str,), "an instance", required=True)
    where = "instance %s" % ident
    status = _get(p, inst, "status", (str,), where)
    ip = _get(p, inst, "ip", (str,), where)
    ip = ip.strip() if ip else ""
    ssh = {"host": ip, "port": 22, "user": "ubuntu"} if ip else None
    s = (status or "").lower()
    if s == "active":
        state, reason = (READY, "active, SSH as ubuntu on port 22") if ssh else (
            "provisioning", "active, but Lambda has not assigned an IP yet")
    elif s in ("booting", ""):
        state, reason = "provisioning", "%s: not active yet" % (status or "no status yet")
    elif s == "unhealthy":
        state, reason = "failed", ("unhealthy: Lambda reports the instance as unhealthy; restart it from the console "
                                   "or terminate it and launch another")
    elif s in ("terminating", "terminated"):
        state, reason = "stopped", "%s: the instance is going away" % status
    else:
        state, reason = "provisioning", "status %r not known to gpufleet" % status
    itype = _get(p, inst, "instance_type", (dict,), where) or {}
    specs = _get(p, itype, "specs", (dict,), where) or {}
    cents = _number(p, itype, "price_cents_per_hour", where)
    region = _get(p, inst, "region", (dict,), where) or {}
    return _record(
        p, ident, label=_get(p, inst, "name", (str,), where), status=status, status_message=None, state=state,
        reason=reason, ssh=ssh, route="direct" if ssh else None,
        price_per_hour=None if cents is None else round(cents / 100.0, 4),
        gpu_count=_get(p, specs, "gpus", (int,), where),
        gpu_model=_get(p, itype, "gpu_description", (str,), where) or _get(p, itype, "description", (str,), where),
        region=_get(p, region, "name", (str,), where),
        extra={"instance_type": _get(p, itype, "name", (str,), where),
               "hostname": _get(p, inst, "hostname", (str,), where)})


def lambda_names(records):
    """Lambda hosts are named lambda-<name> when the name is set and unique in the fleet, else lambda-<id>."""
    counts = {}
    for rec in records:
        if rec["label"]:
            key = safe_name(rec["label"])
            counts[key] = counts.get(key, 0) + 1
    for rec in records:
        if rec["label"] and counts[safe_name(rec["label"])] == 1:
            rec["name"] = "lambda-%s" % safe_name(rec["label"])
    return records
