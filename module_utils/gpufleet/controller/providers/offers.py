# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Offers that can run a torch build: from the providers' offer listings to a ranked list, read-only (issue 52).

``requirement(build)`` works out once what a box needs for a torch build: the driver floor and CUDA version of its
CUDA variant (``host/pytorch/table.py``), the GPU architectures its wheels carry (``arch.coverage``) and, when asked,
NVIDIA's driver security floor (``controller/checklist/driver_security``). ``search`` asks each provider's offer API
(vast.ai ``POST /api/v0/bundles/``, RunPod ``GET /v2/catalog/gpus`` with availability per CUDA version, Lambda
``GET /api/v1/instance-types`` with capacity), turns every offer into one record, drops those that cannot run the
build or miss a filter (each with its ``reason``) and ranks the rest by dollars per dense BF16 TFLOP-hour
(``host/gpu/specs.py`` x GPUs). ``provider_filters`` gives the filter for each provider's own CLI and API.

Sources: ../shared/reference/provider-offers.md (endpoints, field names, units; vast's ``gpu_ram`` is MB in JSON,
GB on the CLI; RunPod prices are per GPU; Lambda prices are cents per instance and it lists no driver), the torch
table's rows and NVIDIA's CUDA release notes as the table cites them. A provider whose answer is malformed or cut
short reads ``failed`` in ``queried``, never as an empty "nothing matched". The API key goes only into the
Authorization header (``client.fetch_json``); every message is scrubbed of it. Plain Python >= 3.8, stdlib only.
"""

import json
import math
import re
import urllib.parse

from ...host.gpu import specs
from ...host.pytorch import arch as torcharch
from ...host.pytorch import table as torchtable
from ..checklist import driver_security
from ..values import as_dict, as_list, number
from .client import ProviderDataError, ProviderError, _get, _list_of, fetch_json, label, scrub, shown_url

OFFER_URLS = {"vastai": "https://console.vast.ai/api/v0/bundles/",
              "runpod": "https://api.runpod.io/v2/catalog/gpus",
              "lambda": "https://cloud.lambda.ai/api/v1/instance-types"}
# The playbook's variables (and the script's flags) that move an offer endpoint, e.g. to the test stand-in.
URL_VARS = {p: "offers_%s_api_url" % p for p in OFFER_URLS}
RUNPOD_CLOUDS = ("SECURE", "COMMUNITY")
# Minimum class: this architecture or newer, by compute capability.
CLASSES = {"volta": (7, 0), "turing": (7, 5), "ampere": (8, 0), "ada": (8, 9), "hopper": (9, 0),
           "blackwell": (10, 0)}
DEFAULT_LIMIT = 200  # vast: offers per search (its search is limited to 10 requests a minute per IP)

# The GPU models the providers name, as gpufleet knows them: display name, pattern over the name as normalised by
# ``_core`` (lower case, no vendor words, no memory size), compute capability, spec rows (several: the memory
# decides), class, and vast.ai's own spellings (vast-cli vastai/data/query.py) for its gpu_name filter.
_MODEL_FIELDS = ("model", "pattern", "cc", "spec_keys", "gpu_class", "vast_names")
MODELS = [dict(zip(_MODEL_FIELDS, row)) for row in (
    ("RTX 4090", r"rtx 4090(d| ti)?", (8, 9), ("rtx-4090",), "geforce", ("RTX 4090", "RTX 4090D")),
    ("RTX 5090", r"rtx 5090( ti)?", (12, 0), ("rtx-5090",), "geforce", ("RTX 5090",)),
    ("RTX 3090", r"rtx 3090( ti)?", (8, 6), ("rtx-3090",), "geforce", ("RTX 3090", "RTX 3090 Ti")),
    ("RTX A6000", r"rtx a6000|a6000", (8, 6), ("rtx-a6000",), "workstation", ("RTX A6000",)),
    ("RTX 6000 Ada", r"rtx 6000 ?ada( generation)?", (8, 9), ("rtx-6000-ada",), "workstation", ("RTX 6000Ada",)),
    ("RTX PRO 6000", r"rtx pro 6000( .*)?", (12, 0), (), "workstation",
     ("RTX PRO 6000", "RTX PRO 6000 S", "RTX PRO 6000 WS", "RTX PRO 6000 Max-Q")),
    ("Quadro RTX 6000", r"(quadro |q )?rtx 6000", (7, 5), (), "workstation", ("Q RTX 6000",)),
    ("H100 NVL", r"h100 nvl", (9, 0), ("h100-nvl",), "datacenter-hbm", ("H100 NVL",)),
    ("H100 PCIe", r"h100 pcie", (9, 0), ("h100-pcie",), "datacenter-hbm", ("H100 PCIE",)),
    ("H100 SXM", r"h100( sxm5?| hbm3)?", (9, 0), ("h100-sxm",), "datacenter-hbm", ("H100 SXM",)),
    ("H200 NVL", r"h200 nvl", (9, 0), ("h200-nvl",), "datacenter-hbm", ("H200 NVL",)),
    ("H200", r"h200( sxm5?)?", (9, 0), ("h200-sxm",), "datacenter-hbm", ("H200",)),
    ("GH200", r"gh200( sxm)?", (9, 0), (), "datacenter-hbm", ("GH200 SXM",)),
    ("B200", r"b200( sxm6?)?", (10, 0), ("b200",), "datacenter-hbm", ("B200",)),
    ("A100 PCIe", r"a100 pcie", (8, 0), ("a100-pcie-40gb", "a100-pcie-80gb"), "datacenter-hbm", ("A100 PCIE",)),
    ("A100 SXM4", r"a100( sxm4?)?|a100x", (8, 0), ("a100-sxm4-40gb", "a100-sxm4-80gb"), "datacenter-hbm",
     ("A100 SXM4", "A100 SXM", "A100X")),
    ("V100", r"v100( sxm2| pcie)?", (7, 0), ("v100-sxm2-16gb", "v100-sxm2-32gb"), "datacenter-hbm", ("Tesla V100",)),
    ("L40S", r"l40s", (8, 9), ("l40s",), "datacenter-pcie", ("L40S",)),
    ("L40", r"l40", (8, 9), ("l40",), "datacenter-pcie", ("L40",)),
    ("L4", r"l4", (8, 9), ("l4",), "datacenter-pcie", ("L4",)),
    ("A10G", r"a10g", (8, 6), ("a10g",), "datacenter-pcie", ("A10g",)),
    ("A10", r"a10( pcie)?", (8, 6), ("a10",), "datacenter-pcie", ("A10",)),
    ("A40", r"a40", (8, 6), ("a40",), "datacenter-pcie", ("A40",)),
    ("T4", r"t4", (7, 5), ("t4",), "datacenter-pcie", ("Tesla T4",)),
)]
for _m in MODELS:
    _m["re"] = re.compile(_m["pattern"])
# Compute capabilities a build's arch list is held against (the vast compute_cap filter lists the covered ones).
KNOWN_CCS = ((3, 7), (5, 0), (5, 2), (6, 0), (6, 1), (7, 0), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0),
             (10, 0), (10, 3), (11, 0), (12, 0), (12, 1))
_BUILD = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?\+(cu\d+)$")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*gb\b")
_DROP = re.compile(r"\b(nvidia|geforce|tesla|blackwell server edition|server edition|workstation edition)\b")


# The GA driver of each CUDA minor (Linux x86_64): ../shared/reference/provider-offers.md §4 ("the per-minor strict
# floor is the GA row"), from the "Toolkit Driver Version" table of NVIDIA's CUDA release notes (13.2 from copies
# quoting the 13.2 notes). It is what the providers' own CUDA filters mean: vast's cuda_max_good >= X.Y and RunPod's
# minCudaVersion "X.Y" both say "driver >= the X.Y GA driver", so the floor, the vast driver filter and the
# cuda_max_good filter agree. The torch table's ``strict_driver`` (the toolkit's update driver, e.g. 580.95.05 for
# 13.0 Update 2) is a later driver of the same minor: shown, not a floor.
GA_DRIVERS = {"11.8": "520.61.05", "12.0": "525.60.13", "12.1": "530.30.02", "12.2": "535.54.03",
              "12.3": "545.23.06", "12.4": "550.54.14", "12.5": "555.42.02", "12.6": "560.28.03", "12.8": "570.26",
              "12.9": "575.51.03", "13.0": "580.65.06", "13.1": "590.44.01", "13.2": "595.45.04"}


class OffersInputError(ValueError):
    """The request cannot be used (a build the table does not know, a filter out of range): nothing is asked."""


# ------------------------------------------------------------------------------------------- the requirement
def newest_build():
    """"2.14.1+cu132": the newest release in the torch table and the build PyTorch marks default there (else
    PyPI's build, else its newest CUDA build)."""
    rel = torchtable.RELEASES[-1]
    builds = [w for w in torchtable.wheels_for(rel["series"]) if w["variant"] != "cpu"]
    chosen = ([w for w in builds if w["status"] == "default"]
              or [w for w in builds if w["variant"] == rel.get("pypi_default")] or builds[-1:])
    return "%s+%s" % (rel["patch"], chosen[0]["variant"])


def build_of(text):
    """{"torch", "series", "variant", "wheel"} of a build such as "2.9.1+cu130" ("auto": ``newest_build``)."""
    text = str(text if text is not None else "").strip()
    if text.lower() == "auto":
        text = newest_build()
    m = _BUILD.match(text)
    if not m:
        raise OffersInputError("offers_torch %r is not a torch CUDA build: write <version>+<CUDA variant>, e.g. %s, "
                               "or auto (the newest build the torch table knows)" % (text, newest_build()))
    series = "%s.%s" % (m.group(1), m.group(2))
    rel = torchtable.release(series)
    if rel is None:
        raise OffersInputError("torch %s is not in the torch table (releases %s to %s)" % (
            series, torchtable.RELEASES[0]["series"], torchtable.RELEASES[-1]["series"]))
    w = torchtable.wheel(series, m.group(4))
    if w is None or m.group(4) not in torchtable.CUDA_VARIANTS:
        have = ", ".join(x["variant"] for x in torchtable.wheels_for(series) if x["variant"] != "cpu")
        raise OffersInputError("torch %s has no %s build in the torch table (its CUDA builds: %s)" % (
            series, m.group(4), have))
    version = "%s.%s" % (series, m.group(3)) if m.group(3) is not None else rel["patch"]
    return {"torch": "%s+%s" % (version, m.group(4)), "series": series, "variant": m.group(4), "wheel": w}


def _cc_text(cc):
    return "%d.%d" % tuple(cc)


def _cc_int(cc):
    return cc[0] * 100 + cc[1] * 10


def covers(wheel_row, cc):
    """The kernel a build runs on compute capability cc with ("sm_90", "compute_120"), or None (no arch list
    counts as none)."""
    got = torcharch.coverage(wheel_row, tuple(cc))
    return got[1] if got and got[0] in ("sass", "ptx") else None


def requirement(build, driver_security_floor=False):
    """What a box needs to run the build, worked out once: CUDA version, driver floor, architectures, security."""
    b = build if isinstance(build, dict) else build_of(build)
    cv = torchtable.CUDA_VARIANTS[b["variant"]]
    w = b["wheel"]
    ga = GA_DRIVERS.get(cv["cuda"])
    floor = ga or cv["strict_driver"] or cv["minor_floor"]
    if ga:
        kind = "GA driver of CUDA %s, what cuda_max_good >= %s means" % (cv["cuda"], cv["cuda"])
    elif cv["strict_driver"]:
        kind = "toolkit driver of CUDA %s" % cv["toolkit"]
    else:
        kind = "CUDA %s.x minor-version floor (the table has no toolkit driver for %s)" % (
            cv["cuda"].split(".")[0], b["variant"])
    covered = [cc for cc in KNOWN_CCS if covers(w, cc)]
    return {
        "torch": b["torch"], "series": b["series"], "variant": b["variant"], "cuda": cv["cuda"],
        "driver_floor": floor, "driver_floor_kind": kind, "toolkit_driver": cv["strict_driver"],
        "driver_source": ("../shared/reference/provider-offers.md §4 (CUDA release notes, Toolkit Driver Version, GA "
                          "column); " if ga else "") + cv["source"],
        "arches": list(w["arches"] or ()), "ptx": list(w["ptx"] or ()),
        "compute_caps": [_cc_text(cc) for cc in covered],
        "arch_source": w["source"],
        "driver_security": {"required": bool(driver_security_floor), "floors": driver_security.supported(),
                            "as_of": getattr(driver_security.table, "AS_OF", None)},
    }


# ------------------------------------------------------------------------------------------- the filters
def filters_of(raw):
    """The user's filters, checked ({} keys as the playbook's variables without ``offers_``); raises
    OffersInputError naming every problem."""
    raw = as_dict(raw)
    problems = []
    out = {"gpus_per_box": 1, "gpu_models": [], "min_class": None, "min_vram_gb": None, "max_price_per_hour": None,
           "min_disk_gb": None, "min_reliability": None, "driver_security": False, "limit": DEFAULT_LIMIT}

    def num(key, low=0.0, high=None, integer=False):
        value = raw.get(key)
        if value is None or value == "":
            return
        try:
            value = float(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            value = None
        if value is None or math.isnan(value) or value < low or (high is not None and value > high) \
                or (integer and value != int(value)):
            rng = "%g to %g" % (low, high) if high is not None else ">= %g" % low
            kind = "a whole number" if integer else "a number"
            problems.append("offers_%s must be %s %s, got %r" % (key, kind, rng, raw.get(key)))
            return
        out[key] = int(value) if integer else value

    num("gpus_per_box", 1, 64, integer=True)
    num("min_vram_gb")
    num("max_price_per_hour")
    num("min_disk_gb")
    num("min_reliability", 0.0, 1.0)
    num("limit", 1, 1000, integer=True)
    models = raw.get("gpu_models")
    if isinstance(models, str):
        models = [m for m in models.split(",") if m.strip()]
    if models not in (None, "") and not (isinstance(models, list) and all(isinstance(m, str) for m in models)):
        problems.append("offers_gpu_models must be a list of GPU model names, got %r" % (models,))
    else:
        unknown = [m for m in models or () if not models_matching(m)]
        if unknown:
            problems.append("offers_gpu_models: %s not known (known: %s)" % (
                ", ".join(unknown), ", ".join(m["model"] for m in MODELS)))
        out["gpu_models"] = [m.strip() for m in models or ()]
    cls = raw.get("min_class")
    if cls not in (None, ""):
        if str(cls).lower() not in CLASSES:
            problems.append("offers_min_class must be one of %s, got %r" % (", ".join(CLASSES), cls))
        else:
            out["min_class"] = str(cls).lower()
    sec = raw.get("driver_security")
    if sec not in (None, ""):
        if isinstance(sec, bool) or str(sec).lower() in ("true", "false", "yes", "no", "1", "0"):
            out["driver_security"] = sec if isinstance(sec, bool) else str(sec).lower() in ("true", "yes", "1")
        else:
            problems.append("offers_driver_security must be true or false, got %r" % (sec,))
    if problems:
        raise OffersInputError("; ".join(problems))
    return out


def _core(name):
    """"rtx 4090", "h100 sxm5" ...: a provider's GPU name without vendor words, memory size, brackets, dashes."""
    name = re.sub(r"[()\-_,]", " ", str(name or "").lower())
    name = _SIZE.sub(" ", _DROP.sub(" ", name))
    return " ".join(name.split())


def model_of(name):
    """The MODELS row a provider's GPU name is, or None."""
    core = _core(name)
    for m in MODELS:
        if m["re"].fullmatch(core):
            return m
    return None


def models_matching(wanted):
    """The MODELS rows a user's model name means: "H100" all H100s, "H100 SXM" that one."""
    core = _core(wanted)
    if not core:
        return []
    return [m for m in MODELS if _core(m["model"]) == core or _core(m["model"]).startswith(core + " ")
            or m["re"].fullmatch(core)]


def _spec(model, vram_gb):
    """The spec row of a model (the one nearest in memory where there are several), or None."""
    rows = [r for r in (specs.by_key(k) for k in model["spec_keys"]) if r]
    if len(rows) > 1 and vram_gb:
        rows.sort(key=lambda r: abs((r.get("memory_gib") or 0) - vram_gb))
    return rows[0] if rows else None


# ------------------------------------------------------------------------------------------- one offer
def _offer(provider, ident, **fields):
    rec = {"provider": provider, "id": str(ident), "machine_id": None, "host_id": None, "gpu_name": None,
           "model": None, "compute_cap": None, "gpu_class": None, "gpu_count": None, "vram_gb": None,
           "price_per_hour": None, "driver": None, "cuda_max_good": None, "reliability": None, "disk_gb": None,
           "disk_bw_mbs": None, "inet_down_mbps": None, "inet_up_mbps": None, "location": None, "cloud": None,
           "in_stock": True, "bf16_tflops": None, "usd_per_tflop_hour": None, "notes": []}
    rec.update(fields)
    model = model_of(rec["gpu_name"])
    if model:
        spec = _spec(model, rec["vram_gb"])
        rec["model"], rec["gpu_class"] = model["model"], model["gpu_class"]
        if rec["compute_cap"] is None:
            rec["compute_cap"] = _cc_text(model["cc"])
        per_gpu = spec.get("bf16_tflops") if spec else None
        if per_gpu and rec["gpu_count"]:
            rec["bf16_tflops"] = round(per_gpu * rec["gpu_count"], 1)
            if rec["price_per_hour"] is not None:
                rec["usd_per_tflop_hour"] = round(rec["price_per_hour"] / rec["bf16_tflops"], 8)
        if not per_gpu:
            rec["notes"].append("no dense BF16 figure for %s in specs.py: not ranked by $/TFLOP-h" % model["model"])
    return rec


def _cuda_text(value):
    """"12.8" from 12.8 or "12.8"; None when it is not a version."""
    if isinstance(value, bool) or value is None:
        return None
    m = re.match(r"^\s*(\d+)\.(\d+)", str(value))
    return "%s.%s" % (m.group(1), m.group(2)) if m else None


def _version(text):
    """(580, 95, 5) of "580.95.05", (13, 0) of "13.0": compared as numbers; () when there is none."""
    return tuple(int(p) for p in re.findall(r"\d+", str(text or "")))


def _driver_text(version, packed):
    """"580.95.05" from vast's driver_version, else from its packed driver_vers (580095005)."""
    if isinstance(version, str) and driver_security.version_key(version):
        return version.strip()
    n = number(packed)
    if n and n >= 1000000:
        n = int(n)
        return "%d.%02d.%02d" % (n // 1000000, n // 1000 % 1000, n % 1000)
    return None


def _optional(provider, obj, key, types, where, notes):
    """obj[key] as ``_get`` reads it; a malformed value is None and a note, not an error."""
    try:
        return _get(provider, obj, key, types, where)
    except ProviderDataError:
        notes.append("%s listed a malformed %s (%.40r): left out" % (label(provider), key, obj.get(key)))
        return None


def vast_offers(answer, url):
    """vast.ai's search answer as offer records; raises ProviderDataError on a malformed one (a malformed
    descriptive field no filter reads, disk_bw, inet_down, inet_up or geolocation, is left out of its offer with a
    note instead: one bad field does not fail the list)."""
    p = "vastai"
    out = []
    for o in _list_of(p, answer, "offers", url):
        ident = _get(p, o, "id", (int, str), "an offer", required=True)
        where = "offer %s" % ident
        notes = []
        ram = _get(p, o, "gpu_ram", (int, float), where)
        cap = _get(p, o, "compute_cap", (int,), where)
        rel = _get(p, o, "reliability", (int, float), where)
        rel = rel if rel is not None else _get(p, o, "reliability2", (int, float), where)
        out.append(_offer(
            p, ident, machine_id=_text_id(_get(p, o, "machine_id", (int, str), where)),
            host_id=_text_id(_get(p, o, "host_id", (int, str), where)),
            gpu_name=_get(p, o, "gpu_name", (str,), where, required=True),
            gpu_count=_get(p, o, "num_gpus", (int,), where, required=True),
            vram_gb=round(ram / 1000.0, 1) if ram is not None else None,
            compute_cap="%d.%d" % (cap // 100, cap % 100 // 10) if cap else None,
            price_per_hour=_get(p, o, "dph_total", (int, float), where, required=True),
            driver=_driver_text(_get(p, o, "driver_version", (str,), where), _get(p, o, "driver_vers", (int,), where)),
            cuda_max_good=_cuda_text(_get(p, o, "cuda_max_good", (int, float, str), where)),
            reliability=rel, disk_gb=_get(p, o, "disk_space", (int, float), where),
            disk_bw_mbs=_optional(p, o, "disk_bw", (int, float), where, notes),
            inet_down_mbps=_optional(p, o, "inet_down", (int, float), where, notes),
            inet_up_mbps=_optional(p, o, "inet_up", (int, float), where, notes),
            location=_optional(p, o, "geolocation", (str,), where, notes),
            cloud=_get(p, o, "verification", (str,), where), notes=notes))
    return out


def _text_id(value):
    return None if value is None else str(value)


def runpod_offers(answer, url, cloud, count):
    """RunPod's GPU catalog (``include=AVAILABILITY``) as offers: one per GPU type on ``cloud``; a type not on
    that cloud is no offer. Prices are per GPU; the box is ``count`` GPUs."""
    p = "runpod"
    out = []
    for g in _list_of(p, answer, "gpus", url):
        ident = _get(p, g, "id", (str,), "a GPU type", required=True)
        where = "GPU type %s" % ident
        prices = _get(p, g, "price", (dict,), where) or {}
        price = prices.get(cloud.lower())
        if _get(p, g, cloud.lower(), (bool,), where) is False or number(price) is None:
            continue
        versions = _get(p, g, "cudaVersions", (list,), where)
        available = sorted((_cuda_text(v.get("version")) for v in as_list(versions)
                            if isinstance(v, dict) and v.get("available") is True and _cuda_text(v.get("version"))),
                           key=_version)
        stock = _get(p, g, "availability", (str,), where)
        centres = [dc.get("id") or dc.get("name") for dc in as_list(_get(p, g, "dataCenters", (list,), where))
                   if isinstance(dc, dict) and str(dc.get("availability") or "").upper() not in ("NONE", "")]
        name = _get(p, g, "name", (str,), where) or ident
        if model_of(name) is None and model_of(ident):
            name = ident
        rec = _offer(p, "%s/%s" % (ident, cloud), gpu_name=name,
                     gpu_count=count, vram_gb=_get(p, g, "memory", (int, float), where),
                     price_per_hour=round(price * count, 4), cuda_max_good=available[-1] if available else None,
                     location=", ".join(str(c) for c in centres) or None, cloud=cloud,
                     in_stock=(stock or "").upper() not in ("NONE",))
        rec["cuda_versions"] = available
        rec["cuda_listed"] = versions is not None
        rec["notes"].append("RunPod lists no reliability, host driver, disk or network figures; the host is chosen "
                            "at create")
        out.append(rec)
    return out


def lambda_offers(answer, url):
    """Lambda's instance types as offers: price in cents per instance, GPUs and VRAM from the description."""
    p = "lambda"
    data = as_dict(answer).get("data") if isinstance(answer, dict) else None
    if not isinstance(data, dict):
        raise _shape(p, url, 'an object without a "data" object of instance types')
    out = []
    for name, entry in data.items():
        where = "instance type %s" % name
        it = _get(p, as_dict(entry), "instance_type", (dict,), where, required=True)
        spec = _get(p, it, "specs", (dict,), where, required=True)
        desc = _get(p, it, "gpu_description", (str,), where, required=True)
        size = _SIZE.search(desc.lower())
        regions = _get(p, as_dict(entry), "regions_with_capacity_available", (list,), where, required=True)
        cents = _get(p, it, "price_cents_per_hour", (int, float), where, required=True)
        out.append(_offer(p, name, gpu_name=desc, gpu_count=_get(p, spec, "gpus", (int,), where, required=True),
                          vram_gb=float(size.group(1)) if size else None, price_per_hour=round(cents / 100.0, 4),
                          disk_gb=_get(p, spec, "storage_gib", (int, float), where),
                          location=", ".join(str(as_dict(r).get("name")) for r in regions) or None,
                          in_stock=bool(regions)))
    return out


def _shape(provider, url, got):
    return ProviderDataError("%s: the answer from %s is %s. Check %s (default %s)." % (
        label(provider), shown_url(url), got, URL_VARS[provider], OFFER_URLS[provider]))


# ------------------------------------------------------------------------------------------- the judgement
def _forward_note(offer):
    if offer.get("gpu_class") == "geforce":
        return " (a GeForce card: no forward compatibility)"
    return " (forward compatibility through cuda-compat is not counted: the container gets the host's driver)"


def judge(offer, req, filters, bad=None):
    """(reasons, notes) for one offer: no reasons means it can run the build and meets every filter."""
    reasons, notes = [], []
    build = req["torch"]
    wheel_row = torchtable.wheel(req["series"], req["variant"])
    if filters["gpus_per_box"] != offer["gpu_count"]:
        reasons.append("GPU count: %s GPU(s) per box, asked %d" % (offer["gpu_count"], filters["gpus_per_box"]))
    cc = tuple(int(x) for x in offer["compute_cap"].split(".")) if offer.get("compute_cap") else None
    if offer.get("model") is None and cc is None:
        reasons.append("GPU model: %r is not in gpufleet's model table, its architecture cannot be checked"
                       % offer.get("gpu_name"))
    wanted = [m["model"] for w in filters["gpu_models"] for m in models_matching(w)]
    if wanted and offer.get("model") not in wanted:
        reasons.append("GPU model: %s is not one of offers_gpu_models (%s)" % (
            offer.get("model") or offer.get("gpu_name"), ", ".join(filters["gpu_models"])))
    if filters["min_class"] and cc is not None and cc < CLASSES[filters["min_class"]]:
        reasons.append("class: %s (%s) is older than offers_min_class %s" % (
            offer.get("model") or offer.get("gpu_name"), torcharch.arch_name(cc) or _cc_text(cc), filters["min_class"]))
    if cc is not None and not covers(wheel_row, cc):
        reasons.append("architecture: %s is sm_%d%d (%s); torch %s carries %s%s: no kernels for it" % (
            offer.get("model") or offer.get("gpu_name"), cc[0], cc[1], torcharch.arch_name(cc) or "?", build,
            ", ".join(req["arches"]) or "no GPU code", " +PTX " + ", ".join(req["ptx"]) if req["ptx"] else ""))
    reasons += _driver_reasons(offer, req, cc, notes)
    if req["driver_security"]["required"]:
        reasons += _security_reasons(offer, notes)
    for key in (("machine", offer.get("machine_id")), ("host_id", offer.get("host_id"))):
        why = (bad or {}).get((key[0], offer["provider"], key[1])) or (bad or {}).get((key[0], "*", key[1]))
        if key[1] is not None and why:
            reasons.append("known bad: %s %s (%s)" % ("machine" if key[0] == "machine" else "host", key[1], why))
    reasons += _plain_filters(offer, filters, notes)
    if not offer.get("in_stock", True):
        reasons.append("no capacity: %s lists it with no stock now" % label(offer["provider"]))
    return reasons, notes


def _driver_reasons(offer, req, cc, notes):
    out = []
    floor, cuda = req["driver_floor"], req["cuda"]
    have, got = offer.get("driver"), offer.get("cuda_max_good")
    low_driver = bool(have) and _version(have) < _version(floor)
    low_cuda = offer["provider"] == "vastai" and bool(got) and _version(got) < _version(cuda)
    if low_driver or low_cuda:
        said = [x for x in (have if low_driver else None,
                            "cuda_max_good %s" % got if low_cuda else None) if x]
        out.append("driver: %s too old for %s (driver >= %s, the %s; CUDA >= %s)%s" % (
            " and ".join(said), req["variant"], floor, req["driver_floor_kind"], cuda, _forward_note(offer)))
    gpu_floor = torcharch.gpu_driver_floor(cc) if cc else None
    if have and gpu_floor and _version(have) < _version(gpu_floor["driver"]):
        out.append("driver: %s is older than %s, the first driver that knows %s" % (
            have, gpu_floor["driver"], gpu_floor["name"]))
    if offer["provider"] == "vastai":
        if not got and not have:
            out.append("driver: the offer lists neither driver_version nor cuda_max_good, the floor cannot be checked")
    elif offer["provider"] == "runpod":
        enough = [v for v in offer.get("cuda_versions", ()) if _version(v) >= _version(cuda)]
        if offer.get("cuda_listed") and not enough:
            out.append("driver: no %s host with CUDA >= %s in stock for it (available: %s)" % (
                offer.get("cloud"), cuda, ", ".join(offer.get("cuda_versions") or ()) or "none"))
        elif not offer.get("cuda_listed"):
            notes.append("RunPod lists no CUDA versions for it: minCudaVersion %s at create decides" % cuda)
    else:
        notes.append("Lambda lists no driver: check after boot (nvidia-smi: driver >= %s)" % floor)
    return out


def _security_reasons(offer, notes):
    have = offer.get("driver")
    if not have:
        notes.append("driver security: no driver listed, check after boot (%s)" % driver_security.supported())
        return []
    got = driver_security.assess(have)
    if got["state"] in ("below", "ended"):
        return ["driver security: %s" % got["text"]]
    if got["state"] != "ok":
        notes.append("driver security: %s" % got["text"])
    return []


def _plain_filters(offer, f, notes):
    out = []
    checks = (("max_price_per_hour", "price_per_hour", "price $%s/h is above offers_max_price_per_hour %s", False),
              ("min_vram_gb", "vram_gb", "VRAM %s GB per GPU is below offers_min_vram_gb %s", True),
              ("min_disk_gb", "disk_gb", "disk %s GB is below offers_min_disk_gb %s", True),
              ("min_reliability", "reliability", "reliability %s is below offers_min_reliability %s", True))
    for key, field, text, at_least in checks:
        want, have = f.get(key), offer.get(field)
        if want is None:
            continue
        if have is None:
            notes.append("%s: not listed by %s, not checked" % (field.replace("_", " "), label(offer["provider"])))
            continue
        if (have < want) if at_least else (have > want):
            out.append(text % (_short(have), _short(want)))
    return out


def _short(value):
    return ("%.4f" % value).rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def rank(kept):
    """Cheapest dense BF16 TFLOP-hour first; offers without a figure after them, cheapest first."""
    return sorted(kept, key=lambda o: (o["usd_per_tflop_hour"] is None, o["usd_per_tflop_hour"] or 0,
                                       o["price_per_hour"] if o["price_per_hour"] is not None else 1e9,
                                       o["provider"], o["id"]))


# ------------------------------------------------------------------------------------------- the queries
def _covered_caps(req, f):
    caps = [tuple(int(x) for x in c.split(".")) for c in req["compute_caps"]]
    if f.get("min_class"):
        caps = [c for c in caps if c >= CLASSES[f["min_class"]]]
    return [_cc_int(c) for c in caps]


def _packed_driver(version):
    key = (_version(version) + (0, 0, 0))[:3]
    return key[0] * 1000000 + key[1] * 1000 + key[2]


def vast_query(req, f, exact=False):
    """The JSON body of vast.ai's search. Sent (exact=False): the user's filters only, so the offers that cannot
    run the build come back and are told apart with their reason. exact=True adds the build's own filter
    (cuda_max_good, driver, compute_cap): the body to use in your own searches."""
    q = {"verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True}, "rented": {"eq": False},
         "num_gpus": {"eq": f["gpus_per_box"]}}
    names = sorted({n for w in f["gpu_models"] for m in models_matching(w) for n in m["vast_names"]})
    if names:
        q["gpu_name"] = {"in": names}
    if f.get("min_vram_gb") is not None:
        q["gpu_ram"] = {"gte": int(round(f["min_vram_gb"] * 1000))}
    if f.get("max_price_per_hour") is not None:
        q["dph_total"] = {"lte": f["max_price_per_hour"]}
    if f.get("min_reliability") is not None:
        q["reliability"] = {"gte": f["min_reliability"]}
    if f.get("min_class"):
        q["compute_cap"] = {"gte": _cc_int(CLASSES[f["min_class"]])}
    if exact:
        q["cuda_max_good"] = {"gte": float(req["cuda"])}
        q["driver_vers"] = {"gte": _packed_driver(req["driver_floor"])}
        q["compute_cap"] = {"in": _covered_caps(req, f)}
    if f.get("min_disk_gb") is not None:
        q["allocated_storage"] = f["min_disk_gb"]
    q.update({"order": [["dph_total", "asc"]], "type": "on-demand", "limit": f.get("limit") or DEFAULT_LIMIT})
    return q


def vast_cli(req, f):
    """The same filter for vast-cli: ``vastai search offers '...'``."""
    parts = ["num_gpus=%d" % f["gpus_per_box"], "cuda_max_good>=%s" % req["cuda"],
             "driver_version>=%s" % req["driver_floor"],
             "compute_cap in [%s]" % ",".join(str(c) for c in _covered_caps(req, f)),
             "verified=true", "rentable=true", "rented=false"]
    names = sorted({n for w in f["gpu_models"] for m in models_matching(w) for n in m["vast_names"]})
    if names:
        parts.append("gpu_name in [%s]" % ",".join(n.replace(" ", "_") for n in names))
    for key, cli in (("min_vram_gb", "gpu_ram>=%s"), ("max_price_per_hour", "dph<=%s"),
                     ("min_reliability", "reliability>=%s")):
        if f.get(key) is not None:
            parts.append(cli % _short(f[key]))
    tail = " --storage %s" % _short(f["min_disk_gb"]) if f.get("min_disk_gb") is not None else ""
    return "vastai search offers '%s'%s -o 'dph'" % (" ".join(parts), tail)


def provider_filters(req, f):
    """The filter for each provider's own CLI and API, to search or rent by hand with the same requirement."""
    newer = [v for v in ("11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0")
             if _version(v) >= _version(req["cuda"])]
    return {
        "vastai": {"cli": vast_cli(req, f), "api": "POST %s" % OFFER_URLS["vastai"], "body": vast_query(req, f, True)},
        "runpod": {
            "catalog": "GET %s?include=AVAILABILITY&product=POD&count=%d&minCudaVersion=%s" % (
                OFFER_URLS["runpod"], f["gpus_per_box"], req["cuda"]),
            "create_v2": {"gpu": {"id": "<GPU type id>", "count": f["gpus_per_box"], "minCudaVersion": req["cuda"]}},
            "graphql": 'podFindAndDeployOnDemand(input: {gpuTypeId: "<GPU type id>", gpuCount: %d, '
                       'minCudaVersion: "%s", ...})' % (f["gpus_per_box"], req["cuda"]),
            "v1_allowedCudaVersions": newer,
            "note": "compute capability is not in RunPod's API: pick GPU types whose architecture the build carries "
                    "(%s)" % ", ".join(req["compute_caps"])},
        "lambda": {"api": "GET %s" % OFFER_URLS["lambda"],
                   "note": "Lambda lists no driver or CUDA version: pin image.family at launch, then check after boot "
                           "that nvidia-smi shows a driver >= %s (playbooks/check.yml does)" % req["driver_floor"]},
    }


# ------------------------------------------------------------------------------------------- known bad
def known_bad(path=None, history_path=None):
    """({(kind, provider or "*", id): why}, warnings) from the user's known-bad file (its ``machines``, by
    ``machine_id``, or by vast ``host_id``) and the boxes the history flagged "return to provider" (their machine
    ids). Read only: neither file is moved or written."""
    bad, warnings = {}, []
    if path:
        from ..judgement import history  # noqa: PLC0415 - the report's own reader of the user's file
        entries, warns = history.load_known_bad(path)
        warnings += warns
        for entry in entries.values():
            if entry.get("kind") == "machine":
                bad[("machine", entry.get("provider") or "*", entry["machine_id"])] = "%s: %s" % (path, entry["why"])
        for item in as_list(as_dict(_read(path, warnings)).get("machines")):
            item = as_dict(item)
            if item.get("host_id") not in (None, ""):
                bad[("host_id", str(item.get("provider") or "*"), str(item["host_id"]).strip())] = "%s: %s" % (
                    path, item.get("why") or "no reason given")
    if history_path:
        for entry in as_dict(as_dict(_read(history_path, warnings)).get("known_bad")).values():
            entry = as_dict(entry)
            if entry.get("machine_id") not in (None, ""):
                reasons = as_list(entry.get("reasons"))
                bad.setdefault(("machine", str(entry.get("provider") or "*"), str(entry["machine_id"])),
                               "returned before (%s, %s)" % (history_path, reasons[0] if reasons else "no reason"))
    return bad, warnings


def _read(path, warnings):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        warnings.append("%s is not usable (%s): not read" % (path, exc))
        return None


# ------------------------------------------------------------------------------------------- the search
def _ask(provider, source, req, f, fetch):
    url, key = source["url"], source.get("key")
    if provider == "vastai":
        return vast_offers(fetch(provider, url, key, method="POST", body=vast_query(req, f)), url), 1
    if provider == "runpod":
        out = []
        for cloud in RUNPOD_CLOUDS:
            query = urllib.parse.urlencode({"include": "AVAILABILITY", "product": "POD", "count": f["gpus_per_box"],
                                            "cloud": cloud})
            full = url + ("&" if "?" in url else "?") + query
            out += runpod_offers(fetch(provider, full, key), full, cloud, f["gpus_per_box"])
        return out, len(RUNPOD_CLOUDS)
    return lambda_offers(fetch(provider, url, key), url), 1


def search(req, f, sources, bad=None, fetch=fetch_json):
    """Ask every provider in ``sources`` ({provider: {"url", "key"}}), judge and rank: the result written to
    offers.json (``requirement``, ``filters``, ``queried``, ``kept``, ``excluded``, ``provider_filters``)."""
    queried, offers = {}, []
    for provider, source in sources.items():
        url = source.get("url") or OFFER_URLS[provider]
        entry = {"provider": provider, "label": label(provider), "url": shown_url(url)}
        try:
            got, requests = _ask(provider, dict(source, url=url), req, f, fetch)
            entry.update(status="ok", requests=requests, offers=len(got))
            offers += got
        except ProviderError as exc:
            entry.update(status="failed", offers=None, error=scrub(str(exc), source.get("key")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            entry.update(status="failed", offers=None, error=scrub(
                "%s: the answer from %s does not have the documented shape (%s: %s); nothing from it is used"
                % (label(provider), shown_url(url), type(exc).__name__, exc), source.get("key")))
        queried[provider] = entry
    kept, excluded = [], []
    for offer in offers:
        reasons, notes = judge(offer, req, f, bad)
        offer["notes"] = offer["notes"] + notes
        offer["reasons"] = reasons
        offer["reason"] = "; ".join(reasons) or None
        (excluded if reasons else kept).append(offer)
    kept = rank(kept)
    for i, offer in enumerate(kept, 1):
        offer["rank"] = i
    return {"requirement": req, "filters": f, "queried": queried, "kept": kept, "excluded": excluded,
            "provider_filters": provider_filters(req, f)}


def answered(result):
    """True when at least one provider answered (an empty list from all of them is "nothing matched")."""
    return any(q["status"] == "ok" for q in result["queried"].values())


# ------------------------------------------------------------------------------------------- the output
_COLUMNS = (("#", "rank"), ("provider", "provider"), ("id", "id"), ("GPU", "gpu_name"), ("n", "gpu_count"),
            ("VRAM GB", "vram_gb"), ("$/h", "price_per_hour"), ("$/TFLOP-h", "usd_per_tflop_hour"),
            ("driver", "driver"), ("CUDA max", "cuda_max_good"), ("reliab.", "reliability"), ("disk GB", "disk_gb"),
            ("disk MB/s", "disk_bw_mbs"), ("down (vast's figure)", "inet_down_mbps"), ("location", "location"))


def _cell(offer, key):
    value = offer.get(key)
    if value is None:
        return "-"
    if key == "usd_per_tflop_hour":
        return "%.5f" % value
    if key in ("disk_gb", "disk_bw_mbs", "inet_down_mbps") and isinstance(value, float):
        return "%.0f" % value
    if key == "reliability":
        return "%.3f" % value
    return _short(value) if isinstance(value, float) else str(value)


def _requirement_line(req):
    return ("torch %s needs CUDA %s: driver >= %s (%s), GPU compute capability %s (%s%s)%s" % (
        req["torch"], req["cuda"], req["driver_floor"], req["driver_floor_kind"], ", ".join(req["compute_caps"]),
        ", ".join(req["arches"]), " +PTX " + ", ".join(req["ptx"]) if req["ptx"] else "",
        "; driver security floors: " + req["driver_security"]["floors"] if req["driver_security"]["required"] else ""))


def _queried_line(q):
    if q["status"] == "ok":
        return "%s: %d offer(s) from %s" % (q["label"], q["offers"], q["url"])
    return "%s: FAILED, its offers are unknown (not 'none'): %s" % (q["label"], q["error"])


def lines(result):
    """The text the playbook prints: requirement, who answered, the ranked table, the excluded, the filters."""
    out = [_requirement_line(result["requirement"])]
    out += [_queried_line(q) for q in result["queried"].values()]
    rows = [[head for head, _key in _COLUMNS]] + [[_cell(o, key) for _head, key in _COLUMNS] for o in result["kept"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    out.append("kept %d offer(s), ranked by $ per dense BF16 TFLOP-hour:" % len(result["kept"]))
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows] if result["kept"] else []
    out.append("excluded %d offer(s):" % len(result["excluded"]))
    out += ["  %s %s (%s): %s" % (o["provider"], o["id"], o.get("gpu_name"), o["reason"]) for o in result["excluded"]]
    pf = result["provider_filters"]
    out += ["filter, vast.ai CLI: %s" % pf["vastai"]["cli"],
            "filter, vast.ai API: %s %s" % (pf["vastai"]["api"], json.dumps(pf["vastai"]["body"], sort_keys=True)),
            "filter, RunPod: minCudaVersion \"%s\" (REST v2 gpu.minCudaVersion, GraphQL minCudaVersion); v1 "
            "allowedCudaVersions %s; catalog %s" % (result["requirement"]["cuda"],
                                                    json.dumps(pf["runpod"]["v1_allowedCudaVersions"]),
                                                    pf["runpod"]["catalog"]),
            "filter, Lambda: %s" % pf["lambda"]["note"]]
    return out


def _md_escape(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(result, generated_at=None):
    """offers.md: the same as ``lines``, as Markdown tables."""
    req = result["requirement"]
    out = ["# Offers for torch %s" % req["torch"], ""]
    if generated_at:
        out += ["Written %s. Read-only: nothing was rented." % generated_at, ""]
    out += ["- " + _md_escape(_requirement_line(req))]
    out += ["- " + _md_escape(_queried_line(q)) for q in result["queried"].values()]
    out += ["", "## Kept (%d), ranked by $ per dense BF16 TFLOP-hour" % len(result["kept"]), ""]
    if result["kept"]:
        out += ["| " + " | ".join(head for head, _key in _COLUMNS) + " | notes |", "|" + "---|" * (len(_COLUMNS) + 1)]
        out += ["| " + " | ".join(_md_escape(_cell(o, key)) for _head, key in _COLUMNS) + " | %s |" % _md_escape(
            "; ".join(o["notes"])) for o in result["kept"]]
    else:
        out.append("None.")
    out += ["", "## Excluded (%d)" % len(result["excluded"]), ""]
    if result["excluded"]:
        out += ["| provider | id | GPU | $/h | driver | CUDA max | reason |", "|---|---|---|---|---|---|---|"]
        out += ["| %s |" % " | ".join(_md_escape(x) for x in (
            o["provider"], o["id"], o.get("gpu_name"), _cell(o, "price_per_hour"), _cell(o, "driver"),
            _cell(o, "cuda_max_good"), o["reason"])) for o in result["excluded"]]
    else:
        out.append("None.")
    pf = result["provider_filters"]
    out += ["", "## The same filter for each provider", "", "vast.ai CLI:", "", "```", pf["vastai"]["cli"], "```", "",
            "vast.ai API (%s):" % pf["vastai"]["api"], "", "```json",
            json.dumps(pf["vastai"]["body"], indent=2, sort_keys=True), "```", "",
            "RunPod: `%s`; create (REST v2) `%s`; GraphQL `%s`; REST v1 `allowedCudaVersions: %s`. %s." % (
                pf["runpod"]["catalog"], json.dumps(pf["runpod"]["create_v2"]), pf["runpod"]["graphql"],
                json.dumps(pf["runpod"]["v1_allowedCudaVersions"]), pf["runpod"]["note"]), "",
            "Lambda: %s." % pf["lambda"]["note"], ""]
    return "\n".join(out)
