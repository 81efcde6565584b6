"""The renter's checks as doctor findings (issue 22): another tenant on the GPU, a container that lost its GPUs,
a MIG slice or memory share, CPU quota and pids.max, /dev/shm, the provider's claims, NVML's recovery action.

Each rule fires on its evidence and stays quiet on the healthy baseline of test_doctor. The NVML part is also run
for real: the real pynvml against the fake libnvidia-ml.so.1 (tests/fakenvml) with the h100-sxm-8x-shared and
lost-gpus-unknown-error profiles, in a subprocess (pynvml keeps the loaded library for the life of a process).
"""

import copy
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from gpufleet.controller.checklist import build as checklist
from gpufleet.host.doctor import diagnose as doctor
from gpufleet.host.doctor import hostprobe as doctor_hostprobe
from gpufleet.host.doctor import match_renter as doctor_match_renter
from gpufleet.host.doctor import nvmlprobe as doctor_nvmlprobe
from gpufleet.host.doctor import probe as doctor_probe
from gpufleet.host.doctor import rules as doctor_rules
from test_audit import TORCH, h100
from test_doctor import PROC_MODULES, codes, healthy
from test_doctor_probe import FakeHost, gpu_host

from tests import fakenvml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(__file__).resolve().parent / "data" / "renter"


def data(name):
    return (DATA / name).read_text()


# ----------------------------------------------------------------------------- evidence builders
def usage(*looks, interval=3):
    """gpu_usage from looks: each look is ({index: (memory_used_mib, [pids])}, [our CUDA processes])."""
    samples = []
    for gpus, ours in looks:
        samples.append({"gpus": [{"index": i, "memory_used_mib": used, "memory_reserved_mib": 500,
                                  "memory_used_v1_mib": None,
                                  "processes": [{"pid": p, "used_memory_mib": 1000} for p in pids]}
                                 for i, (used, pids) in sorted(gpus.items())],
                        "cuda_processes": ours})
    return {"interval_s": interval, "samples": samples, "error": None}


def state(**per_gpu):
    """gpu_state of the baseline's two RTX A6000s, with fields replaced per GPU (g0={...}, g1={...})."""
    out = []
    for i in range(2):
        g = {"index": i, "name": "NVIDIA RTX A6000", "minor_number": i, "memory_total_mib": 49140,
             "mig_mode": None, "mig_devices": None, "recovery_action": 0}
        g.update(per_gpu.get("g%d" % i, {}))
        out.append(g)
    return out


def baseline():
    """The healthy baseline with the renter's evidence of a clean host: idle GPUs, no limits, 16 GiB /dev/shm."""
    ev = healthy()
    ev.update(gpu_state=state(), gpu_usage=usage(({0: (1, []), 1: (1, [])}, []), ({0: (1, []), 1: (1, [])}, [])),
              shm_size_mib=16384, device_open_errors={},
              cgroup={"version": 2, "cpu_quota": None, "cpu_max": None, "cpu_max_at": None, "pids_max": None,
                      "pids_max_at": None, "visible_cpus": 32},
              provider_claims={"provider": "vastai", "gpu_model": "RTX A6000", "driver_version": "550.90.07",
                               "cuda_version": "12.4"})
    ev["nvml"]["cuda_driver_version"] = "12.4"
    return ev


def ev_tenant():
    ev = baseline()
    ev["gpu_usage"] = usage(({0: (30513, [48213]), 1: (1, [])}, []), ({0: (30513, [48213]), 1: (1, [])}, []))
    return ev


def ev_lost():
    ev = baseline()
    ev.update(in_container=True, device_open_errors={"/dev/nvidia0": "EPERM", "/dev/nvidia1": "EPERM",
                                                      "/dev/nvidiactl": "EPERM"},
              nvml={"ok": False, "error_code": "nvml_unknown_error",
                    "error_text": "nvmlInit failed: Unknown Error", "gpu_count": None, "driver_version": None},
              gpus=[], gpu_state=None, gpu_usage={"interval_s": 3, "samples": [], "error": "nvmlInit failed"})
    ev["torch"] = dict(ev["torch"], is_available=False, device_count=0,
                       warning="CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up "
                               "environment")
    ev["cuinit"] = dict(ev["cuinit"], result=999)
    return ev


def ev_partitioned():
    ev = baseline()
    ev["gpu_state"] = state(g0={"mig_mode": "enabled", "mig_devices": []}, g1={"memory_total_mib": 12288})
    return ev


def ev_cpu_quota():
    ev = baseline()
    ev["cgroup"].update(cpu_quota=2.0, cpu_max="200000 100000", cpu_max_at="/sys/fs/cgroup/cpu.max")
    return ev


def ev_pids():
    ev = baseline()
    ev["cgroup"].update(pids_max=512, pids_max_at="/sys/fs/cgroup/pids.max")
    return ev


def ev_shm():
    ev = baseline()
    ev.update(shm_size_mib=64, in_container=True)
    return ev


def ev_claim():
    ev = baseline()
    ev["provider_claims"] = dict(ev["provider_claims"], gpu_model="H100 SXM")
    return ev


def ev_recovery():
    ev = baseline()
    ev["gpu_state"] = state(g1={"recovery_action": 2})
    return ev


RENTER_CASES = {
    "gpu_used_by_another_tenant": ev_tenant,
    "container_lost_gpus": ev_lost,
    "gpu_partitioned": ev_partitioned,
    "cpu_quota_below_visible_cpus": ev_cpu_quota,
    "pids_max_low": ev_pids,
    "shm_too_small": ev_shm,
    "provider_claim_mismatch": ev_claim,
    "gpu_recovery_action": ev_recovery,
}
# The remedy class each finding has on its evidence above (containers: ev_lost, ev_shm).
WANT_CLASS = {
    "gpu_used_by_another_tenant": "provider", "container_lost_gpus": "restart_container",
    "gpu_partitioned": "provider", "cpu_quota_below_visible_cpus": "fixable", "pids_max_low": "fixable",
    "shm_too_small": "restart_container", "provider_claim_mismatch": "provider", "gpu_recovery_action": "reboot",
}


def finding(result, code):
    return next(f for f in result["findings"] if f["code"] == code)


# ----------------------------------------------------------------------------- each rule
def test_renter_baseline_is_healthy():
    r = doctor.diagnose(baseline())
    assert r["status"] == "healthy" and r["findings"] == [] and r["unknown"] == [], r


@pytest.mark.parametrize("code", sorted(RENTER_CASES))
def test_renter_rule_fires_with_its_remedy_class(code):
    r = doctor.diagnose(RENTER_CASES[code]())
    assert code in codes(r), r
    f = finding(r, code)
    assert f["remedy_class"] == WANT_CLASS[code] and f["evidence"]
    assert r["status"] in (("broken",) if f["severity"] == "critical" else ("degraded", "broken"))
    if code != "container_lost_gpus":
        assert codes(r) == [code], r  # each case shows one problem only


@pytest.mark.parametrize("code", sorted(RENTER_CASES))
def test_renter_rule_is_quiet_on_both_baselines(code):
    rule = next(x for x in doctor_rules.RULES if x["code"] == code)
    assert rule["match"](doctor.view(baseline())) is None
    assert rule["match"](doctor.view(healthy())) is None  # evidence not gathered is no finding


@pytest.mark.parametrize("code", sorted(RENTER_CASES))
def test_renter_finding_shows_in_its_checklist_item(code):
    """The host a renter reads about: the finding turns its checklist item and says what to do."""
    clean = checklist.checklist(h100())
    r = h100()
    r["doctor"] = doctor.diagnose(RENTER_CASES[code]())
    r["doctor"]["evidence"] = {"torch": copy.deepcopy(TORCH)}  # the item's own facts stay those of a good host
    c = checklist.checklist(r)
    key = checklist.DOCTOR_ITEMS[code]
    f = finding(r["doctor"], code)
    want = "fail" if f["severity"] == "critical" else "warn"
    assert c[key]["status"] == want, c[key]
    assert code in c[key]["doctor_codes"]
    assert "doctor %s: " % code in c[key]["summary"], c[key]["summary"]
    assert WANT_TEXT[code] in c[key]["summary"], c[key]["summary"]
    assert clean[key]["summary"] in c[key]["summary"]  # what the facts say is kept
    others = {k: v for k, v in c.items() if k != key and k != "torch_cuda"}
    assert others == {k: v for k, v in clean.items() if k in others}


# What each item's line says, from the cases' evidence above.
WANT_TEXT = {
    "container_lost_gpus": "the container lost its GPUs (nvmlInit failed: Unknown Error) (restart the container)",
    "gpu_recovery_action": "NVML recovery action: GPU 1 NODE_REBOOT (reboot the machine) (reboot)",
    "gpu_used_by_another_tenant": "another tenant: GPU 0 compute processes that are not this host's",
    "gpu_partitioned": "not a whole GPU: GPU 0 is a MIG slice, GPU 1 has 25 % of its memory (return to provider)",
    "provider_claim_mismatch": "vastai listing: gpu_model listed H100 SXM, found NVIDIA RTX A6000",
    "cpu_quota_below_visible_cpus": "CPU quota 2.0 of 32 visible CPUs; set OMP_NUM_THREADS=2 (fix here)",
    "pids_max_low": "pids.max 512 (< 1024) (fix here)",
    "shm_too_small": "/dev/shm 64 MiB (< 1024 MiB) (restart the container)",  # noqa: S108 - report text
}


def test_shm_finding_on_an_item_that_already_says_so_adds_no_second_line():
    r = h100()
    r["gpu"]["host"]["shm_size_mib"] = 64
    alone = checklist.checklist(r)["multi_gpu"]
    r["doctor"] = doctor.diagnose(ev_shm())
    r["doctor"]["evidence"] = {"torch": copy.deepcopy(TORCH)}
    item = checklist.checklist(r)["multi_gpu"]
    assert item["status"] == alone["status"] == "fail" and item["summary"] == alone["summary"]
    assert item["doctor_codes"] == ["shm_too_small"]


def test_the_baseline_doctor_result_changes_no_item():
    r = h100()
    r["doctor"] = doctor.diagnose(baseline())
    r["doctor"]["evidence"] = {"torch": copy.deepcopy(TORCH)}
    assert checklist.checklist(r) == checklist.checklist(h100())


def test_every_class_of_the_issue_is_used():
    used = {r["remedy_class"] for r in doctor_rules.RULES} | set(WANT_CLASS.values())
    assert {"fixable", "restart_container", "reboot", "provider"} <= used


# ----------------------------------------------------------------------------- another tenant
def test_a_job_of_ours_starting_between_the_looks_is_not_another_tenant():
    ev = baseline()
    # Look 1: NVML lists PID 900 before our scan saw it hold the GPU; look 2: it holds /dev/nvidia-uvm and nvidia0.
    ev["gpu_usage"] = usage(({0: (900, [900]), 1: (1, [])}, []),
                            ({0: (4000, [900]), 1: (1, [])}, [{"pid": 900, "comm": "python", "minors": [0]}]))
    assert "gpu_used_by_another_tenant" not in codes(doctor.diagnose(ev))


def test_in_a_container_host_pids_count_against_our_own_processes():
    # NVML lists host PIDs (nvidia-docker #1483): our one CUDA process (PID 57 here) is listed as 31337.
    ours = [{"pid": 57, "comm": "python", "minors": [0]}]
    ev = baseline()
    ev["in_container"] = True
    ev["gpu_usage"] = usage(({0: (9000, [31337]), 1: (1, [])}, ours), ({0: (9000, [31337]), 1: (1, [])}, ours))
    assert "gpu_used_by_another_tenant" not in codes(doctor.diagnose(ev))
    ev["gpu_usage"] = usage(({0: (9000, [31337, 48213]), 1: (1, [])}, ours),
                            ({0: (9000, [31337, 48213]), 1: (1, [])}, ours))
    f = finding(doctor.diagnose(ev), "gpu_used_by_another_tenant")
    assert f["evidence"]["gpus"][0]["foreign_count"] == 1


def test_memory_held_without_a_process_is_another_tenant_only_in_every_look():
    ev = baseline()
    ev["gpu_usage"] = usage(({0: (1, []), 1: (18000, [])}, []), ({0: (1, []), 1: (18000, [])}, []))
    f = finding(doctor.diagnose(ev), "gpu_used_by_another_tenant")
    assert f["evidence"]["gpus"] == [{"gpu": 1, "why": "memory held with no process listed and none of ours on the "
                                                       "GPU", "memory_used_mib": [18000, 18000]}]
    ev["gpu_usage"] = usage(({0: (1, []), 1: (18000, [])}, []), ({0: (1, []), 1: (2, [])}, []))  # freed
    assert "gpu_used_by_another_tenant" not in codes(doctor.diagnose(ev))
    ev["gpu_usage"] = usage(({0: (1, []), 1: (18000, [])}, [{"pid": 7, "comm": "python", "minors": [1]}]),
                            ({0: (1, []), 1: (18000, [])}, []))  # ours held it at the first look
    assert "gpu_used_by_another_tenant" not in codes(doctor.diagnose(ev))


def test_one_look_or_an_unreadable_proc_tells_nothing():
    ev = ev_tenant()
    ev["gpu_usage"]["samples"] = ev["gpu_usage"]["samples"][:1]
    assert "gpu_used_by_another_tenant" not in codes(doctor.diagnose(ev))
    ev = ev_tenant()
    ev["gpu_usage"]["samples"][1]["cuda_processes"] = None
    assert "gpu_used_by_another_tenant" not in codes(doctor.diagnose(ev))


# ----------------------------------------------------------------------------- lost GPUs
def test_lost_gpus_is_a_restart_with_the_provider_fix_and_blocks_cuda():
    r = doctor.diagnose(ev_lost())
    f = finding(r, "container_lost_gpus")
    assert r["cuda_usable"] is False and r["status"] == "broken" and f["severity"] == "critical"
    assert f["evidence"]["open_denied"]["/dev/nvidia0"] == "EPERM" and "Unknown Error" in f["evidence"]["nvml_error"]
    assert "CUDA unknown error" in f["evidence"]["torch_text"]
    assert "create-dev-char-symlinks" in f["remedy"] and "Restart" in f["remedy"]
    assert "container_without_gpus" not in codes(r) and r["unknown"] == []


def test_nvml_unknown_error_alone_needs_the_driver_and_a_container():
    ev = ev_lost()
    ev["device_open_errors"] = {}
    assert "container_lost_gpus" in codes(doctor.diagnose(ev))  # NVML's "Unknown Error" with the driver loaded
    ev.update(proc_modules="ext4 1 0 - Live 0x0\n", proc_driver_version="")
    assert "container_lost_gpus" not in codes(doctor.diagnose(ev))  # no driver: another story (no_driver rules)
    ev = ev_lost()
    ev["in_container"] = False
    assert "container_lost_gpus" not in codes(doctor.diagnose(ev))
    ev = ev_lost()
    ev["device_open_errors"] = {"/dev/nvidia0": "EACCES"}  # file modes, not the cgroup: not this finding
    ev["nvml"]["error_code"] = "insufficient_permissions"
    assert "container_lost_gpus" not in codes(doctor.diagnose(ev))


# ----------------------------------------------------------------------------- MIG and shares
def test_partition_fractions():
    f = finding(doctor.diagnose(ev_partitioned()), "gpu_partitioned")
    mig, share = f["evidence"]["gpus"]
    assert mig["kind"] == "mig" and mig["fraction"] is None and mig["fraction_unknown_why"]
    assert share == {"gpu": 1, "name": "NVIDIA RTX A6000", "kind": "memory_share", "memory_total_mib": 12288,
                     "spec_memory_gib": 48, "fraction": 0.25}
    ev = baseline()
    slice_1g = {"name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "memory_total_mib": 4864}
    ev["gpu_state"] = state(g0={"name": "NVIDIA A100-SXM4-40GB", "memory_total_mib": 40960, "mig_mode": "enabled",
                                "mig_devices": [slice_1g]})
    mig = finding(doctor.diagnose(ev), "gpu_partitioned")["evidence"]["gpus"][0]
    assert mig["fraction"] == round(4864 / 40960.0, 3)


def test_a_whole_gpu_is_no_share():
    ev = baseline()
    ev["gpu_state"] = state(g0={"name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559})
    assert "gpu_partitioned" not in codes(doctor.diagnose(ev))


# ----------------------------------------------------------------------------- CPU, pids, /dev/shm
def test_cpu_quota_offers_the_thread_settings_and_they_silence_it():
    f = finding(doctor.diagnose(ev_cpu_quota()), "cpu_quota_below_visible_cpus")
    assert f["evidence"]["suggested_threads"] == 2
    assert f["evidence"]["fix"] == {k: "2" for k in doctor_match_renter.THREAD_ENV_KEYS}
    ev = ev_cpu_quota()
    ev["env"] = {"OMP_NUM_THREADS": "2"}
    assert "cpu_quota_below_visible_cpus" not in codes(doctor.diagnose(ev))
    ev["env"] = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "32"}  # one pool still sized to the machine
    assert "cpu_quota_below_visible_cpus" in codes(doctor.diagnose(ev))
    ev = ev_cpu_quota()
    ev["cgroup"]["cpu_quota"] = 16.0  # half of 32: not far below
    assert "cpu_quota_below_visible_cpus" not in codes(doctor.diagnose(ev))


def test_shm_and_pids_are_the_hosts_own_setting_outside_a_container():
    ev = ev_shm()
    ev["in_container"] = False
    assert finding(doctor.diagnose(ev), "shm_too_small")["remedy_class"] == "fixable"
    ev = ev_pids()
    ev["in_container"] = True
    assert finding(doctor.diagnose(ev), "pids_max_low")["remedy_class"] == "restart_container"


def test_shm_on_a_cpu_host_by_intent_is_no_finding():
    ev = ev_shm()
    ev.update(expected_gpu_count=0, gpu_expected=False)
    assert "shm_too_small" not in codes(doctor.diagnose(ev))


# ----------------------------------------------------------------------------- the provider's claims
@pytest.mark.parametrize("claimed,nvml_name,match", [
    ("RTX 4090", "NVIDIA GeForce RTX 4090", True),
    ("H100 SXM", "NVIDIA H100 80GB HBM3", True),
    ("H100 (80 GB SXM5)", "NVIDIA H100 80GB HBM3", True),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", True),
    ("A10", "NVIDIA A10G", False),
    ("RTX 4090", "NVIDIA GeForce RTX 3090", False),
    ("H200", "NVIDIA H100 80GB HBM3", False),
])
def test_model_names_compared_by_their_chip(claimed, nvml_name, match):
    want = doctor_match_renter.model_tokens(claimed)
    assert want and (want <= doctor_match_renter.model_tokens(nvml_name)) is match


def test_claims_model_memory_driver_cuda():
    f = finding(doctor.diagnose(ev_claim()), "provider_claim_mismatch")
    assert f["severity"] == "critical"
    assert f["evidence"]["mismatches"] == [{"what": "gpu_model", "claimed": "H100 SXM",
                                            "found": ["NVIDIA RTX A6000"]}]
    ev = baseline()
    ev["provider_claims"].update(driver_version="570.86.15", cuda_version="12.8")
    f = finding(doctor.diagnose(ev), "provider_claim_mismatch")
    assert f["severity"] == "warning" and [m["what"] for m in f["evidence"]["mismatches"]] == [
        "driver_version", "cuda_version"]
    ev = baseline()
    ev["provider_claims"]["gpu_memory_mib"] = 81920
    assert finding(doctor.diagnose(ev), "provider_claim_mismatch")["evidence"]["mismatches"][0]["what"] == "gpu_memory"


def test_an_unreadable_claimed_model_is_unknown_not_guessed():
    ev = baseline()
    ev["provider_claims"]["gpu_model"] = "Tesla"
    r = doctor.diagnose(ev)
    assert "provider_claim_mismatch" not in codes(r)
    assert r["unknown"] == [{"what": "provider_claim_model_unparsed", "evidence": {"gpu_model": "Tesla"}}]


# ----------------------------------------------------------------------------- NVML's recovery action
def test_recovery_action_mapped_to_the_renters_action():
    f = finding(doctor.diagnose(ev_recovery()), "gpu_recovery_action")
    assert f["evidence"]["gpus"] == [{"gpu": 1, "recovery_action": 2, "name": "NODE_REBOOT",
                                      "renter_action": "reboot the machine"}]
    ev = ev_recovery()
    ev["in_container"] = True
    assert finding(doctor.diagnose(ev), "gpu_recovery_action")["remedy_class"] == "provider"
    ev["gpu_state"] = state(g0={"recovery_action": 42})
    assert "ask the provider" in finding(doctor.diagnose(ev), "gpu_recovery_action")["evidence"]["gpus"][0][
        "renter_action"]


def test_recovery_action_names_are_pynvmls():
    import pynvml
    for value, (name, _what) in doctor_match_renter.RECOVERY_ACTIONS.items():
        assert getattr(pynvml, "NVML_GPU_RECOVERY_ACTION_" + name) == value
    assert pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION == 230


def test_diagnose_does_not_mutate_renter_evidence():
    for build in RENTER_CASES.values():
        ev = build()
        before = copy.deepcopy(ev)
        doctor.diagnose(ev)
        assert ev == before


# ----------------------------------------------------------------------------- the probes, on recorded files
class RenterHost(FakeHost):
    """FakeHost plus what the renter's probes read: /dev/shm size, visible CPUs, device opens, GPU holders."""

    def __init__(self, files=None, shm=None, cpus=None, open_errors=None, holders=None, **kw):
        super().__init__(files, **kw)
        self._shm, self._cpus, self._open, self._holders = shm, cpus, dict(open_errors or {}), holders

    def shm_mib(self):
        return self._shm

    def visible_cpus(self):
        return self._cpus

    def open_error(self, path):
        return self._open.get(path)

    def gpu_holders(self):
        return self._holders


def test_cgroup_v2_limits_read_from_every_level_the_tightest_wins():
    host = RenterHost({"/proc/self/cgroup": data("proc-self-cgroup_v2-nested.txt"),
                       "/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
                       "/sys/fs/cgroup/system.slice/cpu.max": data("cpu.max_4-cpus.txt"),
                       "/sys/fs/cgroup/system.slice/docker-abc.scope/cpu.max": data("cpu.max_max.txt"),
                       "/sys/fs/cgroup/system.slice/docker-abc.scope/pids.max": data("pids.max_512.txt")},
                      cpus=64)
    cg = doctor_hostprobe.cgroup_limits(host)
    assert cg == {"version": 2, "cpu_quota": 4.0, "cpu_max": "400000 100000",
                  "cpu_max_at": "/sys/fs/cgroup/system.slice/cpu.max", "pids_max": 512,
                  "pids_max_at": "/sys/fs/cgroup/system.slice/docker-abc.scope/pids.max", "visible_cpus": 64}


def test_cgroup_v1_and_no_limits():
    host = RenterHost({"/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "150000\n", "/sys/fs/cgroup/cpu/cpu.cfs_period_us":
                       "100000\n", "/sys/fs/cgroup/pids/pids.max": "max\n"}, cpus=8)
    cg = doctor_hostprobe.cgroup_limits(host)
    assert cg["version"] == 1 and cg["cpu_quota"] == 1.5 and cg["pids_max"] is None
    cg = doctor_hostprobe.cgroup_limits(RenterHost({"/proc/self/cgroup": "0::/\n",
                                                    "/sys/fs/cgroup/cgroup.controllers": "cpu\n"}, cpus=8))
    assert cg["cpu_quota"] is None and cg["pids_max"] is None and cg["version"] == 2


def test_cuda_processes_are_the_uvm_holders():
    holders = {10: {"comm": "python", "nodes": ["/dev/nvidia-uvm", "/dev/nvidia1", "/dev/nvidiactl"]},
               11: {"comm": "gpufleet-gpu-ex", "nodes": ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]}}
    assert doctor_nvmlprobe.cuda_processes(holders) == [{"pid": 10, "comm": "python", "minors": [1]}]
    assert doctor_nvmlprobe.cuda_processes(None) is None


def test_gather_adds_the_renter_evidence_and_the_lost_gpus_finding_fires():
    files = gpu_host(**{"/.dockerenv": "", "/proc/self/cgroup": "0::/\n",
                        "/sys/fs/cgroup/cgroup.controllers": "cpu pids\n",
                        "/sys/fs/cgroup/cpu.max": data("cpu.max_4-cpus.txt"),
                        "/sys/fs/cgroup/pids.max": data("pids.max_512.txt")})
    host = RenterHost(files, shm=64, cpus=64, open_errors={"/dev/nvidia0": "EPERM", "/dev/nvidiactl": "EPERM"})
    gpu_facts = {"source": "nvml", "error": "nvmlInit failed: Unknown Error", "error_code": "nvml_unknown_error",
                 "gpu_count": 0, "driver_version": None, "gpus": []}
    ev = doctor_probe.gather(host, python="/nonexistent/python", gpu_facts=gpu_facts, expected_gpu_count=1,
                             provider_claims={"provider": "vastai", "gpu_model": "H200", "driver_version": None})
    assert ev["in_container"] is True and ev["shm_size_mib"] == 64
    assert ev["device_open_errors"] == {"/dev/nvidia0": "EPERM", "/dev/nvidiactl": "EPERM"}
    assert ev["cgroup"]["cpu_quota"] == 4.0 and ev["cgroup"]["pids_max"] == 512
    assert ev["provider_claims"] == {"provider": "vastai", "gpu_model": "H200"}
    r = doctor_probe.examine(ev)
    got = {f["code"]: f["remedy_class"] for f in r["findings"]}
    assert got["container_lost_gpus"] == "restart_container" and got["shm_too_small"] == "restart_container"
    assert got["cpu_quota_below_visible_cpus"] == "fixable" and got["pids_max_low"] == "restart_container"
    assert "cpu_quota_below_visible_cpus" in r["fixable"]


# ----------------------------------------------------------------------------- the real pynvml, the fake library
_VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = _VENV_PYTHON if _VENV_PYTHON.exists() else pathlib.Path(sys.executable)
needs_fakelib = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not (os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")),
    reason="needs Linux and a C compiler for the fake libnvidia-ml.so.1")

# Runs in the subprocess: the renter's NVML evidence with the sleep between the looks skipped, our processes none.
SAMPLE = r"""
import json, pynvml
from gpufleet.host.doctor import nvmlprobe as doctor_nvmlprobe; from gpufleet.host.gpu import facts

class NoProcesses:
    def gpu_holders(self):
        return {}

state, usage = doctor_nvmlprobe.nvml_renter_evidence(pynvml, NoProcesses(), interval=3, sleep=lambda s: None)
gpu = facts.gpu_facts(pynvml, lambda: (127, b"", b"nvidia-smi: command not found"))
print(json.dumps({"state": state, "usage": usage, "gpu_facts": gpu}))
"""


@pytest.fixture(scope="module")
def fakelib(tmp_path_factory):
    libdir = tmp_path_factory.mktemp("fakenvml-renter")
    fakenvml.build(libdir)
    return libdir


def sampled(fakelib, profile):
    env = {**os.environ, **fakenvml.env_for(profile, fakelib), "PYTHONPATH": str(ROOT / "module_utils")}
    proc = subprocess.run([str(PYTHON), "-c", SAMPLE], env=env, cwd=str(ROOT), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


@needs_fakelib
def test_shared_h100_node_through_the_fake_library(fakelib):
    out = sampled(fakelib, "h100-sxm-8x-shared")
    state, usage = out["state"], out["usage"]
    assert len(state) == 8 and len(usage["samples"]) == 2 and usage["error"] is None
    # absent from the profile: the field comes back NOT_SUPPORTED, read as "not reported" (None), not as NONE
    assert [g["recovery_action"] for g in state] == [None, None, None, None, 2, None, None, None]
    assert state[2]["mig_mode"] == "enabled" and state[3]["memory_total_mib"] == 20480
    look = usage["samples"][0]["gpus"]
    assert look[0]["processes"] == [{"pid": 48213, "used_memory_mib": 30512}] and look[1]["memory_used_mib"] == 18000
    assert look[1]["memory_reserved_mib"] == 551  # v2 keeps the driver's reservation apart
    ev = {"in_container": True, "device_nodes": ["/dev/nvidia%d" % i for i in range(8)] + ["/dev/nvidiactl",
                                                                                          "/dev/nvidia-uvm"],
          "proc_modules": PROC_MODULES, "nvml": doctor_nvmlprobe.nvml_evidence(out["gpu_facts"]),
          "gpus": doctor_nvmlprobe._gpus(out["gpu_facts"]), "gpu_state": state, "gpu_usage": usage,
          "expected_gpu_count": 8, "provider_claims": {"gpu_model": "H100 SXM", "driver_version": "550.90.07"}}
    r = doctor.diagnose(ev)
    got = {f["code"]: f for f in r["findings"]}
    assert sorted(got) == ["gpu_partitioned", "gpu_recovery_action", "gpu_used_by_another_tenant"], r
    tenant = {g["gpu"]: g["why"] for g in got["gpu_used_by_another_tenant"]["evidence"]["gpus"]}
    assert sorted(tenant) == [0, 1] and "not this host's" in tenant[0] and "memory held" in tenant[1]
    parts = {g["gpu"]: g for g in got["gpu_partitioned"]["evidence"]["gpus"]}
    assert parts[2]["kind"] == "mig" and parts[3]["fraction"] == 0.25
    assert got["gpu_recovery_action"]["remedy_class"] == "provider"  # in a container
    assert got["gpu_recovery_action"]["evidence"]["gpus"][0]["name"] == "NODE_REBOOT"


@needs_fakelib
def test_healthy_profiles_give_no_renter_finding(fakelib):
    out = sampled(fakelib, "h100-sxm-8x-nvswitch")
    # idle GPUs (1 MiB used, no process): the second look would find nothing, so the probe does not wait for it
    assert len(out["usage"]["samples"]) == 1 and out["usage"]["second_look"].startswith("skipped")
    # a healthy container's nodes: its GPUs, nvidiactl and nvidia-uvm (without it the uvm rule names the container)
    ev = {"in_container": True, "gpus": [],
          "device_nodes": ["/dev/nvidia%d" % i for i in range(8)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"],
          "gpu_state": out["state"], "gpu_usage": out["usage"],
          "nvml": doctor_nvmlprobe.nvml_evidence(out["gpu_facts"]),
          "provider_claims": {"gpu_model": "H100 SXM"}, "expected_gpu_count": 8}
    r = doctor.diagnose(ev)
    assert r["findings"] == [], r


@needs_fakelib
def test_lost_gpus_profile_through_the_fake_library(fakelib):
    out = sampled(fakelib, "lost-gpus-unknown-error")
    assert out["state"] is None and out["usage"]["error"] == "nvmlInit failed: nvml_unknown_error"
    assert out["gpu_facts"]["error_code"] == "nvml_unknown_error"
    files = gpu_host(**{"/.dockerenv": ""})
    host = RenterHost(files, shm=16384, cpus=8)
    ev = doctor_probe.gather(host, python="/nonexistent/python", gpu_facts=out["gpu_facts"], expected_gpu_count=1,
                             renter_nvml=(out["state"], out["usage"]))
    r = doctor.diagnose(ev)
    assert finding(r, "container_lost_gpus")["remedy_class"] == "restart_container" and r["status"] == "broken"
