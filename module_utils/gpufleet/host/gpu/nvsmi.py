"""Parse ``nvidia-smi -q -x`` (XML) and ``nvidia-smi -q`` (text) into the gpufleet facts schema.

Nothing here raises on bad input: malformed XML, truncated output, non-UTF-8 bytes, missing
fields and "N/A" / "[Not Supported]" values give ``None`` fields or an ``error`` /
``error_code`` pair. Both formats are turned into one element tree first (text labels become
slugs: "PCIe Generation" -> ``pcie_generation``), so one field map with alternative paths
serves both, and every nvidia-smi schema version seen in the fixtures (v10 .. v13).
"""

import re

from ..system.textmatch import first_match
from .specs import lookup

# Values nvidia-smi prints when it has none.
_MISSING = {
    "", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]",
    "requested functionality has been deprecated", "insufficient permissions", "[insufficient permissions]",
    "gpu is lost", "[gpu is lost]", "not available", "[not available]", "unknown",
}

# nvidia-smi error texts -> short codes (first match wins). Sources: fixtures nvidia_smi_text/error_*.txt.
ERROR_PATTERNS = [
    ("driver_library_mismatch", re.compile(r"driver/library version mismatch", re.I)),
    ("driver_not_reachable", re.compile(r"couldn't communicate with the nvidia driver", re.I)),
    ("no_devices", re.compile(r"no devices were found", re.I)),
    ("device_handle_error", re.compile(r"unable to determine the device handle", re.I)),
    ("gpu_lost", re.compile(r"gpu is lost|has fallen off the bus", re.I)),
    ("nvml_library_not_found", re.compile(r"nvml shared library not found|libnvidia-ml\.so.*(cannot|not found)"
                                          r"|failed to initialize nvml: (?:could not|unknown)", re.I)),
    ("insufficient_permissions", re.compile(r"insufficient permissions", re.I)),
    ("nvml_init_failed", re.compile(r"failed to initialize nvml", re.I)),
    ("command_not_found", re.compile(r"command not found|no such file or directory", re.I)),
    ("timeout", re.compile(r"timed out|timeout", re.I)),
]

# nvidia-smi's text names of throttle / clocks-event reasons that differ from NVML's bit names (snake_case).
_TEXT_THROTTLE_ALIASES = {"idle": "gpu_idle", "display_clock_setting": "display_clocks_setting"}


def classify_error(text):
    """Short code for an nvidia-smi / NVML error text, or None when nothing is recognised."""
    return explain_error(text)[0]


def explain_error(text):
    """(code, the line that matched) for an error text; (None, None) when nothing is recognised."""
    return first_match(text, ERROR_PATTERNS, by_line=True)


def empty_facts(source="nvidia-smi", error=None, error_code=None):
    return {
        "schema": 1, "source": source, "error": error, "error_code": error_code,
        "driver_version": None, "cuda_driver_version": None, "nvml_version": None,
        "gpu_count": 0, "gpus": [], "warnings": [],
    }


def empty_gpu(index):
    return {
        "index": index, "uuid": None, "name": None, "serial": None, "pci_bus_id": None,
        "memory_total_mib": None, "memory_used_mib": None, "compute_capability": None,
        "compute_capability_source": None, "architecture": None, "brand": None, "vbios_version": None,
        "pcie": {"gen_current": None, "gen_max": None, "gen_device_max": None, "gen_host_max": None,
                 "width_current": None, "width_max": None, "replays": None},
        "clocks": {"sm_mhz": None, "sm_max_mhz": None, "mem_mhz": None, "mem_max_mhz": None},
        "applications_clocks": {"sm_mhz": None, "sm_default_mhz": None},
        "temperature_c": None, "power_draw_w": None, "power_limit_w": None, "power_default_limit_w": None,
        "throttle_reasons": [], "persistence_mode": None, "mig_mode": None, "mig_devices": None,
        "ecc": {"mode": None, "volatile_corrected": None, "volatile_uncorrected": None,
                "aggregate_corrected": None, "aggregate_uncorrected": None},
        "retired_pages": {"single_bit": None, "double_bit": None, "pending": None},
        "remapped_rows": {"correctable": None, "uncorrectable": None, "pending": None, "failure": None},
        "nvlink": {"links_active": None, "links_total": None},
        "fabric": {"state": None, "status": None},
        "reset_required": None,
        "spec": None,
    }


# --------------------------------------------------------------------------- value helpers
def clean(value):
    """Strip; None for the placeholders nvidia-smi prints instead of a value."""
    if value is None:
        return None
    value = str(value).strip()
    if value.lower() in _MISSING:
        return None
    return value


def to_int(value):
    value = clean(value)
    if value is None:
        return None
    m = re.match(r"^[-+]?(0x[0-9a-fA-F]+|\d+)", value)
    if not m:
        return None
    return int(m.group(1), 0) if m.group(1).lower().startswith("0x") else int(m.group(0))


def to_float(value):
    value = clean(value)
    if value is None:
        return None
    m = re.match(r"^[-+]?\d+(?:\.\d+)?", value)
    return float(m.group(0)) if m else None


def to_bool(value):
    """Enabled/Yes/Active -> True, Disabled/No/Not Active -> False, else None."""
    value = clean(value)
    if value is None:
        return None
    v = value.lower()
    if v in ("enabled", "yes", "active", "on", "true"):
        return True
    if v in ("disabled", "no", "not active", "off", "false", "none"):
        return False
    return None


def to_mode(value):
    b = to_bool(value)
    return None if b is None else ("enabled" if b else "disabled")


def decode(data):
    """bytes -> str; invalid UTF-8 is replaced. Returns (text, had_bad_bytes)."""
    if data is None:
        return "", False
    if isinstance(data, str):
        return data, False
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), True


# --------------------------------------------------------------------------- text -> tree
def slug(label):
    return re.sub(r"[^a-z0-9]+", "_", label.strip().lower()).strip("_")


def _element_tree():
    """xml.etree.ElementTree, imported when nvidia-smi output is parsed (the NVML path never needs it)."""
    import xml.etree.ElementTree as ET  # noqa: S405 - input is local nvidia-smi output, not network data

    return ET


def text_to_tree(text):
    """Turn ``nvidia-smi -q`` text into an Element tree shaped like the XML (labels slugged)."""
    ET = _element_tree()
    root = ET.Element("nvidia_smi_log")
    stack = [(-1, root)]
    gpu = None
    proc_section = None
    proc = None
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("====="):
            continue
        line = raw.replace("\t", "    ")
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        m_gpu = re.match(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$", body)
        if indent == 0 and m_gpu:
            gpu = ET.SubElement(root, "gpu", id=m_gpu.group(1))
            stack = [(-1, root), (0, gpu)]
            proc_section = proc = None
            continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if " : " in body or body.endswith(" :"):
            key, _unused, value = body.partition(":")
            key = slug(key)
            if not key:
                continue
            if proc_section is not None and _inside(stack, proc_section):
                if key == "gpu_instance_id" or proc is None or proc.find(key) is not None:
                    proc = ET.SubElement(proc_section, "process_info")
                el = ET.SubElement(proc, key)
                el.text = value.strip()
                stack.append((indent, el))
                continue
            el = ET.SubElement(parent, key)
            el.text = value.strip()
            stack.append((indent, el))
        else:
            el = ET.SubElement(parent, slug(body))
            stack.append((indent, el))
            if slug(body) == "processes" and parent is gpu:
                proc_section, proc = el, None
    return root


def _inside(stack, element):
    return any(el is element for _unused, el in stack)


# --------------------------------------------------------------------------- tree -> facts
def _first(node, *paths):
    """Text of the first path that exists and holds a value (after ``clean``)."""
    for path in paths:
        el = node.find(path)
        if el is not None:
            value = clean(el.text)
            if value is not None:
                return value
    return None


def _sum_counts(node, uncorrectable):
    """Sum ECC counters under a volatile/aggregate node; None when none is readable."""
    if node is None:
        return None
    total = None
    for child in list(node):
        tag = child.tag
        if tag in ("single_bit", "double_bit"):  # schema v10/v11 and old -q text
            if (tag == "double_bit") != uncorrectable:
                continue
            value = to_int(_first(child, "total"))
        elif "threshold" in tag:
            continue
        elif "uncorrectable" in tag:
            if not uncorrectable:
                continue
            value = to_int(child.text)
        elif "correctable" in tag:
            if uncorrectable:
                continue
            value = to_int(child.text)
        else:
            continue
        if value is not None:
            total = (total or 0) + value
    return total


def _throttle(gpu_node):
    names = []
    section = None
    for path in ("clocks_event_reasons", "clocks_throttle_reasons", "clocks_events_reasons"):
        section = gpu_node.find(path)
        if section is not None:
            break
    if section is None:
        return [], False
    for el in section.iter():
        if el is section:
            continue
        tag = re.sub(r"^clocks_(?:event|throttle)_reason_", "", el.tag)
        tag = _TEXT_THROTTLE_ALIASES.get(tag, tag)
        if to_bool(el.text) and tag not in names:
            names.append(tag)
    return names, True


def _processes(gpu_node):
    out = []
    section = gpu_node.find("processes")
    if section is None:
        return out
    for p in section.findall("process_info"):
        out.append({
            "pid": to_int(_first(p, "pid", "process_id")),
            "type": _first(p, "type"),
            "name": _first(p, "process_name", "name"),
            "used_memory_mib": to_int(_first(p, "used_memory", "used_gpu_memory")),
            "gpu_instance_id": to_int(_first(p, "gpu_instance_id")),
            "compute_instance_id": to_int(_first(p, "compute_instance_id")),
        })
    return out


def _gpu_from_node(index, g, include_processes):
    gpu = empty_gpu(index)
    gpu["name"] = _first(g, "product_name")
    gpu["brand"] = _first(g, "product_brand")
    gpu["architecture"] = _first(g, "product_architecture")
    gpu["uuid"] = _first(g, "uuid", "gpu_uuid")
    gpu["serial"] = _first(g, "serial", "serial_number")
    gpu["vbios_version"] = _first(g, "vbios_version")
    gpu["pci_bus_id"] = _first(g, "pci/pci_bus_id", "pci/bus_id") or clean(g.get("id"))
    gpu["memory_total_mib"] = to_int(_first(g, "fb_memory_usage/total"))
    gpu["memory_used_mib"] = to_int(_first(g, "fb_memory_usage/used"))

    link = "pci/pci_gpu_link_info/"
    tlink = "pci/gpu_link_info/"
    gpu["pcie"] = {
        "gen_current": to_int(_first(g, link + "pcie_gen/current_link_gen", tlink + "pcie_generation/current")),
        "gen_max": to_int(_first(g, link + "pcie_gen/max_link_gen", tlink + "pcie_generation/max")),
        "gen_device_max": to_int(_first(g, link + "pcie_gen/max_device_link_gen",
                                        tlink + "pcie_generation/device_max")),
        "gen_host_max": to_int(_first(g, link + "pcie_gen/max_host_link_gen", tlink + "pcie_generation/host_max")),
        "width_current": to_int(_first(g, link + "link_widths/current_link_width", tlink + "link_width/current")),
        "width_max": to_int(_first(g, link + "link_widths/max_link_width", tlink + "link_width/max")),
        "replays": to_int(_first(g, "pci/replay_counter", "pci/replays_since_reset")),
    }
    gpu["clocks"] = {
        "sm_mhz": to_int(_first(g, "clocks/sm_clock", "clocks/sm")),
        "sm_max_mhz": to_int(_first(g, "max_clocks/sm_clock", "max_clocks/sm")),
        "mem_mhz": to_int(_first(g, "clocks/mem_clock", "clocks/memory")),
        "mem_max_mhz": to_int(_first(g, "max_clocks/mem_clock", "max_clocks/memory")),
    }
    # nvidia-smi lists applications clocks for the graphics clock only (-ac MEM,GRAPHICS); the SM clock
    # runs at the graphics clock (both equal in every Clocks/Max Clocks section of the captures).
    gpu["applications_clocks"] = {
        "sm_mhz": to_int(_first(g, "applications_clocks/graphics_clock", "applications_clocks/graphics")),
        "sm_default_mhz": to_int(_first(g, "default_applications_clocks/graphics_clock",
                                        "default_applications_clocks/graphics")),
    }
    gpu["temperature_c"] = to_int(_first(g, "temperature/gpu_temp", "temperature/gpu_current_temp"))
    gpu["power_draw_w"] = to_float(_first(
        g, "gpu_power_readings/power_draw", "gpu_power_readings/instant_power_draw",
        "gpu_power_readings/average_power_draw", "power_readings/power_draw",
        "power_readings/instant_power_draw", "power_readings/average_power_draw"))
    gpu["power_limit_w"] = to_float(_first(
        g, "gpu_power_readings/current_power_limit", "power_readings/enforced_power_limit",
        "power_readings/power_limit", "power_readings/current_power_limit",
        "gpu_power_readings/enforced_power_limit"))
    # <power_readings> (schema v10/v11) and <gpu_power_readings> (v12+, text "GPU Power Readings") both
    # carry <default_power_limit>; <module_power_readings> is the module's, N/A on single-GPU boards.
    gpu["power_default_limit_w"] = to_float(_first(
        g, "gpu_power_readings/default_power_limit", "power_readings/default_power_limit"))
    reasons, _unused = _throttle(g)
    gpu["throttle_reasons"] = reasons
    gpu["persistence_mode"] = to_bool(_first(g, "persistence_mode"))
    gpu["mig_mode"] = to_mode(_first(g, "mig_mode/current_mig", "mig_mode/current"))
    mig = g.find("mig_devices")
    if mig is not None:
        gpu["mig_devices"] = len(mig.findall("mig_device"))

    ecc = g.find("ecc_errors")
    gpu["ecc"] = {
        "mode": to_mode(_first(g, "ecc_mode/current_ecc", "ecc_mode/current")),
        "volatile_corrected": _sum_counts(ecc.find("volatile") if ecc is not None else None, False),
        "volatile_uncorrected": _sum_counts(ecc.find("volatile") if ecc is not None else None, True),
        "aggregate_corrected": _sum_counts(ecc.find("aggregate") if ecc is not None else None, False),
        "aggregate_uncorrected": _sum_counts(ecc.find("aggregate") if ecc is not None else None, True),
    }
    gpu["retired_pages"] = {
        "single_bit": to_int(_first(g, "retired_pages/multiple_single_bit_retirement/retired_count",
                                    "retired_pages/single_bit_ecc")),
        "double_bit": to_int(_first(g, "retired_pages/double_bit_retirement/retired_count",
                                    "retired_pages/double_bit_ecc")),
        "pending": to_bool(_first(g, "retired_pages/pending_retirement", "retired_pages/pending_blacklist",
                                  "retired_pages/pending_page_retirement", "retired_pages/pending_page_blacklist")),
    }
    gpu["remapped_rows"] = {
        "correctable": to_int(_first(g, "remapped_rows/remapped_row_corr", "remapped_rows/correctable_error")),
        "uncorrectable": to_int(_first(g, "remapped_rows/remapped_row_unc", "remapped_rows/uncorrectable_error")),
        "pending": to_bool(_first(g, "remapped_rows/remapped_row_pending", "remapped_rows/pending")),
        "failure": to_bool(_first(g, "remapped_rows/remapped_row_failure",
                                  "remapped_rows/remapping_failure_occurred")),
    }
    gpu["fabric"] = {"state": _first(g, "fabric/state"), "status": _first(g, "fabric/status")}
    gpu["reset_required"] = to_bool(_first(g, "gpu_reset_status/reset_required"))
    if include_processes:
        gpu["processes"] = _processes(g)
    attach_spec(gpu)
    return gpu


def attach_spec(gpu):
    """Add the spec row; take compute capability from it when the source did not report one."""
    spec = lookup(gpu.get("name"), gpu.get("memory_total_mib")) if gpu.get("name") else None
    gpu["spec"] = spec
    if gpu.get("compute_capability"):
        gpu["compute_capability_source"] = gpu.get("compute_capability_source") or "device"
    elif spec and spec.get("compute_capability"):
        gpu["compute_capability"] = spec["compute_capability"]
        gpu["compute_capability_source"] = "spec"
    return gpu


def _facts_from_tree(root, include_processes):
    facts = empty_facts()
    facts["driver_version"] = _first(root, "driver_version", "kmd_version")
    facts["cuda_driver_version"] = _first(root, "cuda_version", "cuda_umd_version")
    attached = to_int(_first(root, "attached_gpus"))
    gpus = [_gpu_from_node(i, g, include_processes) for i, g in enumerate(root.findall("gpu"))]
    facts["gpus"] = gpus
    facts["gpu_count"] = len(gpus)
    facts["attached_gpus"] = attached
    if attached is not None and attached != len(gpus):
        facts["warnings"].append("nvidia-smi says %d GPUs attached but lists %d" % (attached, len(gpus)))
    return facts


def parse_xml(data, include_processes=False):
    """Facts from ``nvidia-smi -q -x`` output (bytes or str). Never raises."""
    text, bad_bytes = decode(data)
    if not text.strip():
        return empty_facts(error="nvidia-smi printed nothing", error_code="empty_output")
    ET = _element_tree()
    try:
        root = ET.fromstring(text)  # noqa: S314 - local nvidia-smi output; expat loads no external DTD
    except ET.ParseError as exc:
        code, line = explain_error(text)
        if code:
            return empty_facts(error=line, error_code=code)
        return empty_facts(error="malformed nvidia-smi XML: %s" % exc, error_code="xml_parse_error")
    except Exception as exc:  # expat can raise other errors on hostile input; never propagate
        return empty_facts(error="malformed nvidia-smi XML: %s" % exc, error_code="xml_parse_error")
    if root.tag != "nvidia_smi_log":
        return empty_facts(error="unexpected XML root <%s>" % root.tag, error_code="xml_parse_error")
    facts = _facts_from_tree(root, include_processes)
    if bad_bytes:
        facts["warnings"].append("nvidia-smi output was not valid UTF-8; bad bytes replaced")
    return facts


def parse_text(data, include_processes=False):
    """Facts from ``nvidia-smi -q`` text output. Never raises."""
    text, bad_bytes = decode(data)
    if not text.strip():
        return empty_facts(error="nvidia-smi printed nothing", error_code="empty_output")
    if "Attached GPUs" not in text and "Driver Version" not in text:
        code, line = explain_error(text)
        return empty_facts(error=line or _first_line(text), error_code=code or "unrecognised_output")
    try:
        root = text_to_tree(text)
        facts = _facts_from_tree(root, include_processes)
    except Exception as exc:  # defensive: a parser bug must not break fact gathering
        return empty_facts(error="could not parse nvidia-smi -q text: %r" % exc, error_code="text_parse_error")
    if bad_bytes:
        facts["warnings"].append("nvidia-smi output was not valid UTF-8; bad bytes replaced")
    return facts


def parse_output(rc, stdout, stderr=b"", include_processes=False):
    """Facts from one ``nvidia-smi -q -x`` run: its exit code, stdout and stderr. Never raises."""
    out, _unused = decode(stdout)
    err, _unused = decode(stderr)
    if out.lstrip().startswith("<"):
        facts = parse_xml(stdout, include_processes)
        if rc not in (0, None) and not facts["error"]:
            facts["warnings"].append("nvidia-smi exited %s: %s" % (rc, _first_line(err) or "no message"))
        return facts
    combined = "\n".join(s for s in (out, err) if s.strip())
    code, line = explain_error(combined)
    if rc == 0 and not code and out.strip():
        return parse_text(stdout, include_processes)
    if code is None:
        code = "nvidia_smi_failed" if rc else "unrecognised_output"
    facts = empty_facts(error=line or _first_line(combined) or "nvidia-smi exited %s with no output" % rc,
                        error_code=code)
    facts["raw_output"] = combined.strip()[:2000]
    return facts


def _first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:500]
    return ""
