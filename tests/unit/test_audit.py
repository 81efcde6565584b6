"""The renter's checklist and the security audit, on readiness facts built from recorded outputs.

The readiness facts come from hostready.collect_readiness fed with files recorded in a gpufleet/debian:12
container (tests/fixtures/host/: /proc/net/tcp{,6} with sshd on 22 and a server on 0.0.0.0:8888,
`sshd -T`, `ssh -V`, `dpkg-query`, /proc/mounts). What could not be recorded here (a container toolkit
package, a Jupyter process owning the socket, site-packages) is added by the test and named so.
"""

# ruff: noqa: S104 - addresses read back from recorded /proc/net/tcp, nothing binds

import copy
import json
import types

import pytest
from gpufleet.controller.checklist import audit
from gpufleet.controller.checklist import build as checklist
from gpufleet.controller.checklist import gpu as checklist_gpu
from gpufleet.controller.checklist import host as checklist_host
from gpufleet.controller.checklist import item as checkitem
from gpufleet.host.system import hostready

from tests.unit.doubles import FIXTURES


def fx(name):
    return (FIXTURES / "host" / name).read_text()


def report_result(name):
    return json.loads((FIXTURES / "report" / name).read_text())


SITE = "/opt/gpufleet/venv/lib/python3.11/site-packages"


def readiness(ctk=None, jupyter_server="2.14.0", pip_extra=True, tls="plain", root=True, venv_pkgs=None,
              textfile_age=12):
    files = {"/proc/net/tcp": fx("debian12_proc_net_tcp.txt"), "/proc/net/tcp6": fx("debian12_proc_net_tcp6.txt"),
             "/proc/mounts": fx("docker_proc_mounts.txt"), "/proc/77/comm": "jupyter-lab\n",
             "/proc/77/cmdline": b"/opt/gpufleet/venv/bin/python3\0/opt/gpufleet/venv/bin/jupyter-lab\0",
             "/proc/12/comm": "sshd\n", "/proc/12/cmdline": b"/usr/sbin/sshd\0-D\0"}
    if pip_extra:
        files["/etc/pip.conf"] = "[global]\nextra-index-url = https://user:secret@pypi.example.org/simple\n"
    dirs = {"/proc": ["12", "77", "self"], "/proc/12/fd": ["3", "4"], "/proc/77/fd": ["5"],
            "/opt/gpufleet/venv/lib": ["python3.11"],
            SITE: venv_pkgs if venv_pkgs is not None else [
                "torch-2.5.1+cu121.dist-info", "jupyter_server-%s.dist-info" % jupyter_server,
                "tqdm-4.67.1.dist-info", "transformers-4.46.3.dist-info", "pip-24.0.dist-info"]}
    links = {"/proc/12/fd/3": "socket:[5054619]", "/proc/12/fd/4": "socket:[5054621]",
             "/proc/77/fd/5": "socket:[5055750]"}
    dpkg = fx("debian12_dpkg-query.txt") + (ctk or "")

    def run(argv):
        if argv[0] == "ssh":
            return 0, b"", fx("debian12_ssh-V.txt").encode()
        if argv[0] == "sshd" and argv[1] == "-V":
            return 0, b"", b"OpenSSH_9.2, OpenSSL 3.0.20 7 Apr 2026\n"
        if argv[0] == "sshd" and argv[1] == "-T":
            return 0, fx("debian12_sshd-T.txt").encode(), b""
        if argv[0] == "dpkg-query":
            return 1, dpkg.encode(), b"dpkg-query: no packages found matching libnvidia-container1\n"
        return None

    stat = {hostready.MONITORING_TEXTFILE: types.SimpleNamespace(st_mtime=1000.0 - textfile_age, st_size=4096)}
    return hostready.collect_readiness(
        read_file=files.get, exists=lambda p: p == "/opt/gpufleet/venv", run=run,
        statvfs=lambda p: types.SimpleNamespace(f_frsize=1024, f_bavail=76128128, f_blocks=264212084),
        listdir=dirs.get, readlink=links.get, stat=stat.get, environ={}, geteuid=lambda: 0 if root else 1000,
        probe_tls=lambda addr, port: tls, now=lambda: 1000.0)


def test_readiness_from_recorded_container():
    r = readiness()
    socks = {(s["address"], s["port"]): s for s in r["listeners"]["sockets"]}
    assert set(socks) == {("0.0.0.0", 8888), ("0.0.0.0", 22), ("::", 22)}  # 127.0.0.1:8899 is loopback
    assert socks[("0.0.0.0", 8888)]["jupyter"] and socks[("0.0.0.0", 8888)]["tls"] == "plain"
    assert socks[("0.0.0.0", 22)]["process"] == "sshd" and not socks[("0.0.0.0", 22)]["jupyter"]
    assert r["sshd"]["version"] == "9.2p1" and r["sshd"]["version_source"] == "ssh -V"
    assert r["sshd"]["package_version"] == "1:9.2p1-2+deb12u10"
    assert r["sshd"]["config"]["passwordauthentication"] == "yes"
    assert r["sshd"]["config"]["permitrootlogin"] == "without-password"
    assert r["disks"][0]["fstype"] == "overlay" and r["disks"][0]["local_ssd"] is None
    assert r["disks"][0]["free_gib"] == 72.6
    assert r["venv"]["python"] == "3.11" and r["venv"]["packages"]["jupyter-server"] == "2.14.0"
    assert r["pip"]["files"][0]["extra_index_url"] == ["https://***@pypi.example.org/simple"]  # secret masked
    assert r["monitoring"]["textfile_age_s"] == 12


def test_security_audit_findings_and_fixes():
    a = audit.security(readiness(ctk="nvidia-container-toolkit\t1.17.4-1\tii \n"))
    codes = {f["code"]: f for f in a["findings"]}
    assert set(codes) == {"ctk_below_floor", "jupyter_server_advisories",
                          "torch_extra_index", "jupyter_public_plain", "password_ssh"}
    assert "1.17.4-1 < 1.19.1" in codes["ctk_below_floor"]["message"]
    assert codes["ctk_below_floor"]["fix"].startswith("role nvidia_container_toolkit")
    # Debian 12's 1:9.2p1-2+deb12u10 carries the fix of DSA-5724-1 (1:9.2p1-2+deb12u3): no finding
    # (tests/unit/test_audit_floors.py has the other releases and the evidence)
    ssh = [p for p in a["passed"] if p.startswith("OpenSSH 9.2p1 (package 1:9.2p1-2+deb12u10)")]
    assert len(ssh) == 1 and ">= 1:9.2p1-2+deb12u3" in ssh[0] and "[evidence: distro table]" in ssh[0]
    assert "2.14.0: 4 published advisories" in codes["jupyter_server_advisories"]["message"]
    assert "user:secret" not in json.dumps(a) and "***@pypi.example.org" in json.dumps(a)
    assert codes["jupyter_public_plain"]["fix"].startswith("role jupyter")
    assert codes["password_ssh"]["fix"].startswith("role ssh_hardening")
    assert all(f["source"] for f in a["findings"])


def test_security_clean_host():
    r = readiness(ctk="nvidia-container-toolkit\t1.20.0-1\tii \n", jupyter_server="2.20.0", pip_extra=False,
                  tls="tls")
    r["sshd"]["config"]["passwordauthentication"] = "no"
    r["sshd"]["version"] = "9.9p1"
    a = audit.security(r)
    assert a["findings"] == [] and not a["unknown"]
    assert audit.security_item(a)["status"] == "ok"


def test_not_root_means_sshd_config_unknown_not_good():
    a = audit.security(readiness(root=False))
    assert "password_ssh" not in {f["code"] for f in a["findings"]}
    assert any(u.startswith("sshd effective config (not root") for u in a["unknown"])


@pytest.mark.parametrize(("text", "key"), [
    ("9.2p1", (9, 2, 0, 1, 0)), ("1:9.2p1-2+deb12u10", (9, 2, 0, 1, 2)), ("1.17.8-1", (1, 17, 8, 0, 1)),
    ("2.5.1+cu121", (2, 5, 1, 0, 0)), ("8.5p1", (8, 5, 0, 1, 0)), (None, None), ("x", None),
])
def test_version_key(text, key):
    assert audit.version_key(text) == key


def test_version_ranges():
    k = audit.version_key
    assert k("8.4p1") < k("8.5p1") <= k("9.2p1") < k("9.8p1") <= k("9.9p1")
    assert k("1.17.7-1") < k("1.17.8") <= k("1.17.8-1")


TORCH = {"importable": True, "version": "2.5.1+cu121", "cuda": "12.1", "is_available": True, "device_count": 8,
         "arch_list": ["sm_80", "sm_90"], "cudnn_version": 90100, "nccl_version": "2.21.5",
         "torchrun": "/opt/gpufleet/venv/bin/torchrun", "error": None, "warning": None}


def h100(torch=TORCH, **kw):
    r = report_result("gpu-h100-01.json")
    r["gpu"]["readiness"] = readiness(**kw)
    r["doctor"] = {"status": "healthy", "findings": [], "evidence": {"torch": copy.deepcopy(torch)}}
    return r


def test_checklist_has_twelve_items_from_facts():
    c = checklist.checklist(h100(ctk="nvidia-container-toolkit\t1.17.8-1\tii \n"))
    assert [k for k, _ in checkitem.ITEMS] == list(c) and len(c) == 12
    assert c["torch_cuda"]["status"] == "ok" and "torch 2.5.1+cu121 (CUDA 12.1)" in c["torch_cuda"]["summary"]
    assert c["cudnn"] == {"status": "ok", "summary": "cuDNN 9.1.0 loadable by torch", "reason": None}
    assert c["capacity"]["summary"].startswith("inference fp16/bf16 up to 32B (256.5B over 8 GPUs)")
    assert c["features"]["summary"] == ("NVIDIA H100 80GB HBM3 (CC 9.0): TF32, BF16, FP8, 2:4 sparsity, "
                                        "TE BF16/FP8/FP8 block scaling; cu121 wheel: yes")
    assert c["access"]["status"] == "fail" and "Jupyter public on 0.0.0.0:8888 (plain HTTP" in c["access"]["summary"]
    assert "Ubuntu 22.04.4 LTS" in c["image"]["summary"] and "26.0 CPU cores per GPU" in c["image"]["summary"]
    assert c["multi_gpu"]["status"] == "ok" and "NCCL 2.21.5" in c["multi_gpu"]["summary"]
    assert "NVLink between all GPUs" in c["multi_gpu"]["summary"]
    assert c["packages"]["status"] == "warn" and "missing: datasets, accelerate" in c["packages"]["summary"]
    assert c["monitoring"]["status"] == "ok" and "12 s old" in c["monitoring"]["summary"]
    assert c["security"]["status"] == "fail"


def test_checklist_without_doctor_or_readiness_says_unknown_with_reason():
    r = report_result("gpu-h100-01.json")
    c = checklist.checklist(r)
    for key in ("torch_cuda", "cudnn", "access", "packages", "monitoring", "security"):
        assert c[key]["status"] == "unknown" and c[key]["reason"], key
    assert c["capacity"]["status"] == "ok" and c["features"]["status"] == "ok"
    none = checklist.checklist(report_result("gpu-unreach-05.json"))
    assert {v["status"] for v in none.values()} == {"unknown"}
    assert none["capacity"]["reason"] == "no GPU facts in the result"


@pytest.mark.parametrize(("change", "status", "text"), [
    ({"is_available": False, "error": "CUDA driver too old"}, "fail", "is_available() is False: CUDA driver too old"),
    ({"cuda": None, "version": "2.5.1+cpu"}, "fail", "CPU build"),
    ({"device_count": 4}, "warn", "torch sees 4 of 8 GPUs"),
    ({"cuda": "12.6"}, "warn", "minor version compatibility"),
    ({"cuda": "13.0"}, "fail", "major CUDA version behind"),
    ({"importable": False, "import_error": "libcudnn.so.9: cannot open"}, "fail", "not importable"),
])
def test_torch_cuda_match(change, status, text):
    torch = dict(TORCH, **change)
    item = checklist_gpu.torch_cuda(torch, report_result("gpu-h100-01.json")["gpu"])
    assert item["status"] == status and text in item["summary"]


def test_cudnn_missing_and_shm_small():
    torch = dict(TORCH, cudnn_version=None, nccl_version=None, torchrun=None)
    r = h100(torch)
    r["gpu"]["host"]["shm_size_mib"] = 64
    c = checklist.checklist(r)
    assert c["cudnn"]["status"] == "fail" and "not loadable" in c["cudnn"]["summary"]
    assert c["multi_gpu"]["status"] == "fail"
    assert "/dev/shm 64 MiB (< 1024 MiB" in c["multi_gpu"]["summary"]  # noqa: S108 - report text
    assert "torchrun missing" in c["multi_gpu"]["summary"]


def test_monitoring_stale_and_absent():
    assert checklist_host.monitoring(readiness(textfile_age=3600))["status"] == "warn"
    r = readiness()
    r["monitoring"] = {"textfile": hostready.MONITORING_TEXTFILE, "textfile_age_s": None, "program": None,
                       "reason": "%s absent" % hostready.MONITORING_TEXTFILE}
    item = checklist_host.monitoring(r)
    assert item["status"] == "fail"
    assert item["summary"] == ("no exporter textfile at /var/lib/gpufleet/textfile/gpufleet_gpu.prom (absent); "
                               "the gpu_monitoring role writes it; exporter program not seen in supervisord")


def test_monitoring_says_what_it_saw_not_that_a_role_was_not_applied():
    # The demo fleet: the exporter was installed and runs, but could not write its file.
    r = readiness()
    r["monitoring"] = {"textfile": hostready.MONITORING_TEXTFILE, "textfile_age_s": None, "program": "RUNNING",
                       "reason": "stat %s: [Errno 13] Permission denied" % hostready.MONITORING_TEXTFILE}
    item = checklist_host.monitoring(r)
    assert item["status"] == "fail" and "not applied" not in item["summary"]
    assert item["summary"].startswith("no exporter textfile at /var/lib/gpufleet/textfile/gpufleet_gpu.prom "
                                      "(stat /var/lib/gpufleet/textfile/gpufleet_gpu.prom: [Errno 13] Permission "
                                      "denied); the gpu_monitoring role writes it")
    assert "gpufleet-gpu-exporter RUNNING" in item["summary"]


def test_packages_without_the_venv_say_how_to_install_it():
    r = readiness()
    r["venv"] = {"path": "/opt/gpufleet/venv", "exists": False, "python": None, "packages": {}}
    item = checklist_host.packages(r)
    assert item["status"] == "warn" and "not applied" not in item["summary"]
    assert item["summary"] == "gpufleet venv /opt/gpufleet/venv absent: install it with the torch role"


def test_packages_of_the_renters_environment_are_named():
    """vast.ai's layout: the torch role acted on /venv/main, and facts.yml listed that environment's packages."""
    r = readiness()
    r["venv"] = {"path": "/venv/main", "exists": True, "python": "3.12", "packages": {"torch": "2.5.1+cu121"}}
    item = checklist_host.packages(r)
    assert item["status"] == "warn"
    assert item["summary"] == ("in /venv/main: torch 2.5.1+cu121; missing: transformers, datasets, accelerate, tqdm "
                               "(role torch: torch_extra_packages)")
    r["venv"] = {"path": "/venv/main", "exists": False, "python": None, "packages": {}}
    assert checklist_host.packages(r)["summary"] == "environment /venv/main absent (the torch target of the last run)"
    r["venv"] = {"path": "/opt/gpufleet/venv", "exists": True, "python": "3.11", "packages": {"torch": "2.13.0+cpu"}}
    assert checklist_host.packages(r)["summary"].startswith("torch 2.13.0+cpu; missing:")


@pytest.mark.parametrize(("value", "text"), [(90100, "9.1.0"), (8902, "8.9.2"), (None, None), (True, None)])
def test_cudnn_text(value, text):
    assert checklist_gpu.cudnn_text(value) == text


# ----------------------------------------------------------------------------- CPU hosts by intent
def test_cpu_host_by_intent_is_judged_as_a_cpu_host():
    # tests/fixtures/report/cpu-box-09.json: gpu_facts and the doctor on a CPU container, expected_gpu_count 0
    c = checklist.checklist(report_result("cpu-box-09.json"))
    assert c["torch_cuda"] == {"status": "ok", "summary": "torch 2.13.0+cpu is a CPU build, as intended for a CPU host",
                               "reason": None}
    assert c["cudnn"]["status"] == "ok" and "not needed on a CPU host" in c["cudnn"]["summary"]
    assert c["monitoring"] == {"status": "ok", "summary": "CPU host: no GPU exporter needed", "reason": None}
    assert c["multi_gpu"]["status"] == "ok" and c["multi_gpu"]["summary"].startswith("CPU host: NCCL")
    assert c["capacity"]["status"] == "ok" and c["features"]["status"] == "ok"
    assert not [k for k, v in c.items() if v["status"] == "fail"], c
    # what is not about GPUs is judged as on any host
    assert c["packages"]["status"] == "warn" and "missing: transformers" in c["packages"]["summary"]
    assert c["security"]["status"] == "warn" and c["access"]["status"] == "warn"  # password SSH login on


def test_cpu_host_intent_from_inventory_text_and_unset_keeps_the_gpu_rules():
    r = report_result("cpu-box-09.json")
    r["expected_gpu_count"] = "0"  # inventory vars may reach the result as text
    assert checklist.checklist(r)["torch_cuda"]["status"] == "ok"
    r["expected_gpu_count"] = None  # intent unknown: a CPU build where GPUs may be rented is a failure
    c = checklist.checklist(r)
    assert c["torch_cuda"]["status"] == "fail" and "CPU build" in c["torch_cuda"]["summary"]
    assert c["cudnn"]["status"] == "fail"
    assert c["monitoring"]["status"] == "fail" and "the gpu_monitoring role writes it" in c["monitoring"]["summary"]
    assert c["capacity"]["status"] == "unknown"


def test_cuda_torch_on_a_cpu_host_warns_and_says_how_to_fix():
    torch = dict(TORCH, is_available=False, device_count=0)
    item = checklist_gpu.torch_cuda(torch, report_result("cpu-box-09.json")["gpu"], cpu_host=True)
    assert item["status"] == "warn" and "CUDA build (CUDA 12.1) on a CPU host" in item["summary"]
    assert "torch_cuda_variant: cpu" in item["summary"]
    r = report_result("cpu-box-09.json")
    r["doctor"]["evidence"]["torch"] = {"importable": False, "import_error": "No module named 'torch'"}
    assert checklist.checklist(r)["torch_cuda"]["status"] == "fail"  # a CPU host still needs a working torch


@pytest.mark.parametrize(("value", "count"), [(0, 0), ("0", 0), (" 8 ", 8), (None, None), ("none", None),
                                              (True, None), (float("nan"), None)])
def test_expected_gpu_count(value, count):
    assert checkitem.expected_gpu_count({"expected_gpu_count": value}) == count


def test_no_torch_says_what_the_doctor_found_not_that_it_did_not_run():
    r = report_result("cpu-box-09.json")
    r["doctor"]["evidence"].update(torch=None, torch_skipped="torch is not installed in /opt/gpufleet/venv/bin/python")
    c = checklist.checklist(r)
    assert c["torch_cuda"]["status"] == "unknown"
    assert c["torch_cuda"]["reason"] == "no torch to check: torch is not installed in /opt/gpufleet/venv/bin/python"
    assert c["cudnn"]["status"] == "ok"  # a CPU host needs no cuDNN, torch or not
    r["doctor"] = None
    assert checklist.checklist(r)["torch_cuda"]["reason"] == "no doctor evidence about torch (run the doctor)"
