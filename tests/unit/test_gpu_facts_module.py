"""library/gpu_facts.py run as Ansible runs it: the AnsiballZ payload Ansible builds, run by this Python; the first
case through the real `ansible localhost -m gpu_facts` CLI (tests/unit/ansible_module.py).

Hardware doubles: a fake ``nvidia-smi`` script that replays a recorded output, and a
``pynvml`` that fails to import (so the run does not depend on the machine having NVML).
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.unit import ansible_module
from tests.unit.doubles import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
DOUBLES = Path(__file__).resolve().parent / "doubles"

pytestmark = ansible_module.needs_ansible


def run_module(tmp_path, args="", smi_out=None, smi_rc=0, with_fake_smi=True, check=False, cli=False):
    """The module's result: its AnsiballZ payload as Ansible builds it, run by this Python
    (tests/unit/ansible_module.py), or with cli through the real `ansible localhost -m gpu_facts` CLI."""
    env = dict(os.environ)
    env.update(PYTHONPATH=str(DOUBLES / "no_pynvml"), FAKE_NVIDIA_SMI_ARGS=str(tmp_path / "smi-args"))
    path = [p for p in env.get("PATH", "").split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()]
    if with_fake_smi:
        path.insert(0, str(DOUBLES / "fakebin"))
    env["PATH"] = os.pathsep.join(path)
    if smi_out:
        env["FAKE_NVIDIA_SMI_OUT"] = str(smi_out)
    env["FAKE_NVIDIA_SMI_RC"] = str(smi_rc)
    if cli:
        rc, result, out = ansible_module.cli_json("gpu_facts", args, tmp_path, check=check, env=env)
        assert rc == 0, out
        return result
    ok, result = ansible_module.run("gpu_facts", args, tmp_path, check=check, env=env)
    assert ok, result
    return result


def test_module_reads_recorded_nvidia_smi_xml(tmp_path):
    result = run_module(tmp_path, "include_processes=true kernel_log=false",
                        smi_out=FIXTURES / "nvidia_smi_xml" / "telegraf-pr_dual_a5000-v13.xml", cli=True)
    assert result["changed"] is False
    gpu = result["ansible_facts"]["gpu"]
    assert gpu["source"] == "nvidia-smi" and gpu["error"] is None
    assert gpu["driver_version"] == "590.44.01" and gpu["cuda_driver_version"] == "13.1"
    assert gpu["gpu_count"] == 2
    assert [g["pci_bus_id"] for g in gpu["gpus"]] == ["00000000:81:00.0", "00000000:C1:00.0"]
    assert gpu["gpus"][0]["processes"][0]["pid"] == 100477
    assert gpu["attempts"][0]["error_code"] == "pynvml_missing"
    assert any("nvidia-ml-py" in w for w in gpu["warnings"])
    assert gpu["xid"]["readable"] is False
    assert gpu["health"]["status"] in ("ok", "degraded")
    assert isinstance(gpu["host"]["container"], bool) and gpu["host"]["os"]["id"]
    # readiness probes run by default (read-only); their shape, whatever this machine is
    ready = gpu["readiness"]
    assert ready["disks"][0]["path"] == "/" and isinstance(ready["listeners"]["sockets"], list)
    assert set(ready) >= {"sshd", "venv", "pip", "monitoring", "container_toolkit"}
    # nvidia-smi was asked for XML, under a timeout
    assert (tmp_path / "smi-args").read_text().split() == ["-q", "-x"]


def test_module_reports_driver_mismatch(tmp_path):
    mismatch = FIXTURES / "nvidia_smi_text" / "error_nvml-driver-library-mismatch_shine-cluster-30.txt"
    result = run_module(tmp_path, "kernel_log=false readiness=false", smi_out=mismatch,
                        smi_rc=18)
    gpu = result["ansible_facts"]["gpu"]
    assert gpu["error_code"] == "driver_library_mismatch"
    assert gpu["health"]["status"] == "failed"
    assert gpu["readiness"] is None


def test_module_without_nvidia_smi(tmp_path):
    result = run_module(tmp_path, "kernel_log=true", with_fake_smi=False)
    gpu = result["ansible_facts"]["gpu"]
    assert result["changed"] is False
    assert gpu["source"] == "none" and gpu["gpu_count"] == 0
    # this test machine has no NVIDIA device node or driver either
    assert gpu["error_code"] == "no_gpu_stack"
    assert gpu["health"]["status"] == "failed"
    assert {a["error_code"] for a in gpu["attempts"]} == {"pynvml_missing", "nvidia_smi_missing"}
    # the kernel log is either read or says why not
    assert gpu["xid"]["readable"] or gpu["xid"]["reason"]


def test_module_says_when_it_read_the_facts(tmp_path):
    import time

    before = time.time()
    result = run_module(tmp_path, "kernel_log=true", smi_out=FIXTURES / "nvidia_smi_xml" / "telegraf_tesla-t4.xml")
    after = time.time()
    gpu = result["ansible_facts"]["gpu"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", gpu["collected_at"])
    stamp = time.mktime(time.strptime(gpu["collected_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(time.gmtime(0))
    assert int(before) <= stamp <= after
    # the commands ran through the module's threaded runner: nvidia-smi under its timeout, the rest alongside
    assert gpu["source"] == "nvidia-smi" and (tmp_path / "smi-args").read_text().split() == ["-q", "-x"]
    assert gpu["xid"]["readable"] or gpu["xid"]["reason"]
    assert gpu["readiness"]["dpkg_readable"] is (shutil.which("dpkg-query") is not None)


def test_module_check_mode(tmp_path):
    result = run_module(tmp_path, "kernel_log=false prefer=nvidia-smi",
                        smi_out=FIXTURES / "nvidia_smi_xml" / "telegraf_tesla-t4.xml", check=True)
    # facts are gathered in check mode too (the module only reads)
    assert result["changed"] is False and "skipped" not in result
    assert result["ansible_facts"]["gpu"]["gpus"][0]["spec"]["key"] == "t4"


def test_ansible_doc_renders():
    doc = Path(sys.executable).parent / "ansible-doc"
    proc = subprocess.run([str(doc), "-M", "library", "gpu_facts"], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), PAGER="cat"))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"nvidia_smi_timeout", proc.stdout) and "include_processes" in proc.stdout
