"""Issue 27 item 2: a container with /dev/nvidiactl and /dev/nvidia0 but no /dev/nvidia-uvm is named.

The device-node list is the evidence in a container: the runtime passes /dev/nvidia-uvm in with the GPUs, so a
container without it is restarted with its devices, whether /proc/modules could be read or not.
"""

import pytest
from gpufleet.host.doctor import diagnose as doctor
from test_doctor import PROC_MODULES, _torch, healthy


def container_without_uvm_node(proc_modules):
    ev = healthy()
    ev.update(in_container=True, device_nodes=["/dev/nvidia0", "/dev/nvidiactl"], proc_modules=proc_modules)
    ev["cuinit"]["result"] = 999
    return _torch(ev, is_available=False, device_count=0)


@pytest.mark.parametrize("proc_modules", [None, PROC_MODULES], ids=["no-proc-modules", "host-modules-listed"])
def test_missing_uvm_node_in_a_container_is_named_restart_container(proc_modules):
    result = doctor.diagnose(container_without_uvm_node(proc_modules))
    found = [f for f in result["findings"] if f["code"] == "nvidia_uvm_not_loaded"]
    assert found, result
    assert found[0]["remedy_class"] == "restart_container"
    assert found[0]["evidence"]["missing"] == ["/dev/nvidia-uvm"]
    assert found[0]["evidence"]["device_nodes"] == ["/dev/nvidia0", "/dev/nvidiactl"]
    assert "restart" in found[0]["remedy"]
    assert result["status"] == "broken"


def test_a_container_with_its_uvm_node_has_no_uvm_finding():
    ev = container_without_uvm_node(None)
    ev["device_nodes"].append("/dev/nvidia-uvm")
    assert "nvidia_uvm_not_loaded" not in [f["code"] for f in doctor.diagnose(ev)["findings"]]


def test_a_container_without_gpu_nodes_is_container_without_gpus_not_uvm():
    ev = container_without_uvm_node(PROC_MODULES)
    ev["device_nodes"] = ["/dev/nvidiactl"]
    codes = [f["code"] for f in doctor.diagnose(ev)["findings"]]
    assert "nvidia_uvm_not_loaded" not in codes and "container_without_gpus" in codes


def test_on_a_vm_the_module_list_still_decides_and_it_is_fixable_here():
    ev = healthy()
    ev["proc_modules"] = "\n".join(line for line in PROC_MODULES.splitlines() if not line.startswith("nvidia_uvm"))
    found = [f for f in doctor.diagnose(ev)["findings"] if f["code"] == "nvidia_uvm_not_loaded"]
    assert found and found[0]["remedy_class"] == "fixable"
