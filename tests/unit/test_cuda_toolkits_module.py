"""library/cuda_toolkits.py run as Ansible runs it (the AnsiballZ payload Ansible builds; the first case through the
real `ansible localhost -m cuda_toolkits -o` CLI) on a temp tree."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet.host.cuda import layout as cudalayout
from gpufleet.host.cuda import read as cudaread

from tests import fakenvml
from tests.unit import ansible_module
from tests.unit.test_cudatk import link, local_toolkit, pip_runtime, two_toolkits_wrong_link, write

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = ansible_module.needs_ansible


def run_module(tmp_path, args, check=False, ld_library_path=None, cli=False):
    """The module's result: its AnsiballZ payload as Ansible builds it, run by this Python
    (tests/unit/ansible_module.py), or with cli through the real `ansible localhost -m cuda_toolkits -o` CLI."""
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = ld_library_path
    if cli:
        state, result, out = ansible_module.cli_run("cuda_toolkits", args, tmp_path, check=check, env=env)
    else:
        state, result = ansible_module.run_state("cuda_toolkits", args, tmp_path, check=check, env=env)
        out = json.dumps(result)
    assert state == "localhost | SUCCESS", out
    return result


def test_module_reports_wrong_link_and_shadowing(tmp_path):
    host = tmp_path / "host"
    two_toolkits_wrong_link(host)
    site = "/opt/gpufleet/venv/lib/python3.11/site-packages"
    pip_runtime(host, site, "12.4.127")
    write(host, "/etc/environment", "LD_LIBRARY_PATH=/usr/local/cuda-11.8/lib64\n")
    result = run_module(tmp_path, "root=%s run_ldconfig=false driver_cuda_version=12.4" % host,
                        ld_library_path=site + "/nvidia/cudnn/lib", cli=True)
    assert result["changed"] is False
    facts = result["ansible_facts"]["cuda_toolkits"]
    assert facts["root"] == str(host)
    # site_packages default includes /opt/gpufleet/venv/lib/python3*/site-packages, read under root
    got = sorted((t["kind"], t["version"], t["root"]) for t in facts["toolkits"])
    assert got == [("local", "11.8.0", "/usr/local/cuda-11.8"), ("local", "12.4.1", "/usr/local/cuda-12.4"),
                   ("pip", "12.4.127", site + "/nvidia/cuda_runtime")]
    assert facts["cuda_symlink"]["resolved"] == "/usr/local/cuda-11.8"
    assert facts["cuda_symlink"]["chain"] == ["/usr/local/cuda", "/etc/alternatives/cuda", "/usr/local/cuda-11.8"]
    assert facts["chosen"]["root"] == "/usr/local/cuda-12.4" and facts["chosen"]["rule"] == "driver_compatible"
    assert facts["problem_codes"] == ["cuda_link_wrong_target", "ld_library_path_shadowing", "libcudart_unresolved"]
    assert facts["ldconfig"]["cache"]["source"] == "ld.so.conf scan"
    entries = {(e["source"], e["path"]): e["shadowing"] for e in facts["ld_library_path"]["entries"]}
    assert entries == {("environment", site + "/nvidia/cudnn/lib"): False,
                       ("/etc/environment:1", "/usr/local/cuda-11.8/lib64"): True}


def test_module_pinned_not_installed_check_mode(tmp_path):
    host = tmp_path / "host"
    two_toolkits_wrong_link(host)
    result = run_module(tmp_path, "root=%s run_ldconfig=false pinned_version=12.6 site_packages=[]" % host,
                        check=True)
    facts = result["ansible_facts"]["cuda_toolkits"]
    assert result["changed"] is False and "skipped" not in result
    assert facts["chosen"] is None and facts["problem_codes"] == ["pinned_not_installed"]
    assert facts["pinned_version"] == "12.6"


def test_module_on_this_machine_runs_ldconfig(tmp_path):
    # root=/ on the test machine (no CUDA here): real ldconfig -p, nothing found, nothing fails
    result = run_module(tmp_path, "site_packages=[]")
    facts = result["ansible_facts"]["cuda_toolkits"]
    assert result["changed"] is False and facts["root"] == "/"
    cache = facts["ldconfig"]["cache"]
    assert cache["source"] == "ldconfig -p" or cache["error"]
    if cache["source"] == "ldconfig -p":
        assert cache["libs"] > 0


def test_ansible_doc_renders():
    proc = subprocess.run([str(BIN / "ansible-doc"), "-M", "library", "cuda_toolkits"], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), PAGER="cat"))
    assert proc.returncode == 0, proc.stderr
    for word in ("pinned_version", "driver_cuda_version", "site_packages", "run_ldconfig", "cuda_link_wrong_target"):
        assert word in proc.stdout


def _driver_cuda_12_0_profile(tmp_path):
    """The bundled H200 profile with a driver that supports CUDA 12.0 (a 525-series driver)."""
    data = fakenvml.load_profile("h200-1x")
    data.update(driver_version="525.147.05", cuda_driver_version=12000)
    path = tmp_path / "driver-cuda-12.0.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.skipif(not shutil.which("gcc"), reason="the fake NVML library needs a C compiler")
def test_module_and_doctor_choose_the_same_toolkit_from_the_driver(tmp_path):
    """Issue 17 item 2: driver CUDA 12.0, toolkits 11.8 and 12.1, /usr/local/cuda dangling. The doctor asks
    for 11.8; the module, told nothing (as remediate.yml's cuda_links include is), reads the driver the way
    the doctor does and picks 11.8 too, instead of "not given; taking the highest" (12.1)."""
    host = tmp_path / "host"
    local_toolkit(host, "11.8", "11.8.0", "11.8.89")
    local_toolkit(host, "12.1", "12.1.1", "12.1.105")
    link(host, "/usr/local/cuda", "/usr/local/cuda-12.6")  # dangling: a removed toolkit
    libdir = tmp_path / "fakenvml"
    fakenvml.build(libdir)
    profile = _driver_cuda_12_0_profile(tmp_path)
    env = fakenvml.env_for(profile, libdir, base={})
    old = {k: os.environ.get(k) for k in env}
    os.environ[fakenvml.PROFILE_ENV] = env[fakenvml.PROFILE_ENV]
    try:
        result = run_module(tmp_path, "root=%s run_ldconfig=false" % host, ld_library_path=env["LD_LIBRARY_PATH"])
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    got = result["ansible_facts"]["cuda_toolkits"]
    assert (got["driver_cuda_version"], got["driver_cuda_version_source"]) == ("12.0", "nvml")
    assert got["chosen"]["root"] == "/usr/local/cuda-11.8" and got["chosen"]["rule"] == "driver_compatible"
    # The doctor's side, as library/gpu_doctor.py runs it: gpu_facts under the same driver, its CUDA version
    # into cudalayout.collect (in a subprocess: pynvml keeps the library it loaded for the life of a process).
    probe = ("import json, pynvml; from gpufleet.host.gpu import facts; "
             "print(json.dumps(facts.gpu_facts(pynvml, lambda: None)['cuda_driver_version']))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, **env, "PYTHONPATH": str(ROOT / "module_utils")})
    driver_cuda = json.loads(proc.stdout)
    assert driver_cuda == "12.0"
    doctor_side = cudalayout.collect(cudaread.HostFS(str(host)), run_ldconfig=False, driver_cuda=driver_cuda)
    assert doctor_side["chosen"]["root"] == got["chosen"]["root"]


def test_module_without_a_driver_says_the_version_is_unknown(tmp_path):
    host = tmp_path / "host"
    two_toolkits_wrong_link(host)
    result = run_module(tmp_path, "root=%s run_ldconfig=false" % host, ld_library_path="")
    got = result["ansible_facts"]["cuda_toolkits"]
    assert got["driver_cuda_version"] is None and got["driver_cuda_version_source"] is None
    assert got["chosen"]["rule"] == "highest" and "unknown" in got["chosen"]["reasons"][0]
