"""Every recorded `nvidia-smi -q -x` output, parsed by nvsmi, against the values in the XML itself.

The expected values are read here with ElementTree straight from each file, independently of
nvsmi's field map, so a parser that drops or mangles a field fails on the file that shows it.
"""
import glob
import os
import re
import xml.etree.ElementTree as ET

import pytest
from gpufleet.host.gpu import nvsmi

from tests.unit.doubles import FIXTURES

FILES = sorted(glob.glob(str(FIXTURES / "nvidia_smi_xml" / "*.xml")))


def raw(node, path):
    found = node.find(path)
    return None if found is None or found.text is None else found.text.strip()


def number(text):
    match = re.match(r"^\s*(-?[0-9.]+)", text or "")
    return float(match.group(1)) if match else None


def test_all_shared_xml_fixtures_are_in_the_project():
    assert len(FILES) == 20


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_parsed_values_match_the_xml(path):
    with open(path, "rb") as handle:
        data = handle.read()
    facts = nvsmi.parse_xml(data, include_processes=True)
    root = ET.fromstring(data)  # noqa: S314 - our own recorded fixture files
    xml_gpus = root.findall("gpu")

    assert facts["error"] is None
    assert facts["gpu_count"] == len(xml_gpus) == len(facts["gpus"])
    assert facts["driver_version"] == raw(root, "driver_version")
    cuda = raw(root, "cuda_version")
    assert facts["cuda_driver_version"] == (cuda if cuda and cuda[0].isdigit() else None)

    for parsed, node in zip(facts["gpus"], xml_gpus):
        assert parsed["name"] == raw(node, "product_name")
        assert parsed["uuid"] == raw(node, "uuid")
        assert nvsmi_bus(parsed["pci_bus_id"]) == nvsmi_bus(node.get("id"))
        total = number(raw(node, "fb_memory_usage/total"))
        assert parsed["memory_total_mib"] == (None if total is None else int(total))
        used = number(raw(node, "fb_memory_usage/used"))
        assert parsed["memory_used_mib"] == (None if used is None else int(used))
        temp = number(raw(node, "temperature/gpu_temp"))
        assert parsed["temperature_c"] == (None if temp is None else pytest.approx(temp))
        width = number(raw(node, "pci/pci_gpu_link_info/link_widths/current_link_width"))
        assert parsed["pcie"]["width_current"] == (None if width is None else int(width))
        gen = number(raw(node, "pci/pci_gpu_link_info/pcie_gen/max_link_gen"))
        assert parsed["pcie"]["gen_max"] == (None if gen is None else int(gen))
        if parsed.get("processes") is not None and node.find("processes") is not None:
            assert len(parsed["processes"]) == len(node.findall("processes/process_info"))


def nvsmi_bus(bus):
    """Bus ids appear as 00000000:3B:00.0 in one place and 0000:3b:00.0 in another."""
    if not bus:
        return bus
    domain, rest = bus.split(":", 1)
    return ("%04x:%s" % (int(domain, 16), rest)).lower()
