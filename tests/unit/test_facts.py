"""facts.collect end to end on recorded data: source choice, fallback, health summary."""

import pytest
from gpufleet.host.gpu import facts as gf
from gpufleet.host.gpu import nvsmi

from tests.unit.doubles import fake_pynvml, fixture_bytes
from tests.unit.doubles.fake_pynvml import FakeNvml

SCHEMA_KEYS = {"schema", "source", "error", "error_code", "driver_version", "cuda_driver_version", "nvml_version",
               "gpu_count", "gpus", "host", "xid", "health", "duration_s"}
GPU_KEYS = {"index", "uuid", "name", "serial", "pci_bus_id", "memory_total_mib", "memory_used_mib",
            "compute_capability", "pcie", "clocks", "temperature_c", "power_draw_w", "power_limit_w",
            "throttle_reasons", "persistence_mode", "mig_mode", "ecc", "retired_pages", "remapped_rows", "nvlink",
            "spec"}


def smi(kind, name, rc=0):
    data = fixture_bytes(kind, name)
    return lambda: (rc, data, b"")


def collect(**kw):
    kw.setdefault("read_file", lambda p: None)
    kw.setdefault("exists", lambda p: False)
    kw.setdefault("statvfs", lambda p: None)
    kw.setdefault("getrlimit", lambda: None)
    return gf.collect(**kw)


def codes(facts):
    return [(f["code"], f["severity"], f["gpu_index"]) for f in facts["health"]["findings"]]


def test_schema_keys_from_nvidia_smi():
    f = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_a100-sxm4-v12.xml"))
    assert set(f) >= SCHEMA_KEYS
    assert set(f["gpus"][0]) >= GPU_KEYS
    assert set(f["gpus"][0]["pcie"]) >= {"gen_current", "gen_max", "width_current", "width_max"}
    assert f["source"] == "nvidia-smi" and f["schema"] == 1
    assert f["attempts"][0] == {"source": "nvml", "error_code": "pynvml_missing", "error": "pynvml is not available"}
    assert isinstance(f["duration_s"], float)


def test_nvml_first_and_nvidia_smi_not_run_when_nvml_works():
    rec = nvsmi.parse_text(fixture_bytes("nvidia_smi_text", "l40s_595.80_q_idle.txt"))
    ran = []
    f = collect(pynvml=FakeNvml.from_facts(rec), run_nvidia_smi=lambda: ran.append(1))
    assert f["source"] == "nvml" and not ran
    assert f["gpus"][0]["spec"]["key"] == "l40s"
    # L40S was recorded with persistence mode off: only an info finding
    assert codes(f) == [("persistence_mode_off", "info", 0), ("kernel_log_unreadable", "info", None)]
    assert f["health"]["status"] == "ok"


def test_nvml_init_failure_falls_back_to_nvidia_smi():
    nv = FakeNvml("x", 0, [], init_error=fake_pynvml.NVMLError_LibraryNotFound())
    f = collect(pynvml=nv, run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"))
    assert f["source"] == "nvidia-smi" and f["error"] is None
    assert f["gpus"][0]["spec"]["key"] == "t4"
    assert any("nvml failed (nvml_library_not_found)" in w for w in f["warnings"])
    # T4 recorded on an x8 link: width below max is a warning
    assert ("pcie_width_below_max", "warning", 0) in codes(f)
    assert f["health"]["status"] == "degraded"


def test_prefer_nvidia_smi():
    rec = nvsmi.parse_text(fixture_bytes("nvidia_smi_text", "l40s_595.80_q_idle.txt"))
    nv = FakeNvml.from_facts(rec)
    f = collect(pynvml=nv, run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"), prefer="nvidia-smi")
    assert f["source"] == "nvidia-smi" and nv.calls == []


def test_driver_library_mismatch_everywhere_is_failed():
    nv = FakeNvml("x", 0, [], init_error=fake_pynvml.NVMLError_LibRmVersionMismatch())
    f = collect(pynvml=nv, run_nvidia_smi=smi("nvidia_smi_text",
                                              "error_nvml-driver-library-mismatch_570.124_tinygrad-ogkm-47.txt", rc=18))
    assert f["error_code"] == "driver_library_mismatch"
    assert f["gpu_count"] == 0
    assert f["health"]["status"] == "failed"
    assert codes(f)[0] == ("gpu_stack_broken", "critical", None)


def test_nothing_installed_and_no_device_is_no_gpu_stack():
    f = collect(pynvml=None, run_nvidia_smi=lambda: (127, b"", b"nvidia-smi: command not found"))
    assert f["source"] == "none" and f["error_code"] == "no_gpu_stack"
    assert [a["error_code"] for a in f["attempts"]] == ["pynvml_missing", "nvidia_smi_missing"]
    assert f["health"]["status"] == "failed"


def test_nvidia_smi_timeout():
    f = collect(run_nvidia_smi=lambda: (124, b"", b""))
    assert f["error_code"] == "nvidia_smi_timeout" and f["health"]["status"] == "unknown"


def test_runner_that_raises_does_not_break_collect():
    def boom():
        raise OSError("exec format error")
    f = collect(run_nvidia_smi=boom)
    assert f["error_code"] == "nvidia_smi_failed" and f["health"]["status"] == "unknown"


def test_h100_hw_slowdown_and_xid_mapped_to_gpu():
    rec = nvsmi.parse_text(fixture_bytes("nvidia_smi_text", "gpud_8x-h100-80gb-hbm3_535.161.08_q.txt"))
    for g in rec["gpus"]:
        g["compute_capability"] = "9.0"
    log = fixture_bytes("kernel_logs", "gpud_h100-xe9680_xid119-gsp-timeout_dmesg.log")
    f = collect(pynvml=FakeNvml.from_facts(rec), kernel_log={"text": log, "source": "dmesg"})
    assert f["gpu_count"] == 8 and f["xid"]["readable"] and f["xid"]["source"] == "dmesg"
    found = codes(f)
    assert ("clocks_throttled_hw", "warning", 0) in found
    # Xid 119 on PCI 0000:9b:00 is the 5th GPU (index 4) of this machine
    assert ("xid_119", "critical", 4) in found
    assert f["health"]["status"] == "failed"


def test_a10_pending_row_remap_is_degraded():
    f = collect(run_nvidia_smi=lambda: (0, fixture_bytes("nvidia_smi_text", "gpud_a10_535.129.03_q.txt"), b""),
                kernel_log={"text": b"", "source": "dmesg"})
    assert codes(f) == [("row_remap_pending", "warning", 0)]
    assert f["health"]["status"] == "degraded"


def test_ecc_and_xid_48_make_failed():
    rec = nvsmi.parse_xml(fixture_bytes("nvidia_smi_xml", "telegraf_a100-sxm4-v12.xml"))
    g = rec["gpus"][0]
    g["compute_capability"] = "8.0"
    g["ecc"]["volatile_uncorrected"] = 2
    g["pci_bus_id"] = "00000000:19:00.0"
    log = fixture_bytes("kernel_logs", "gpud_xid48-63-94_peermem_dmesg-iso.log")
    f = collect(pynvml=FakeNvml.from_facts(rec), kernel_log={"text": log, "source": "journalctl -k"})
    found = codes(f)
    assert ("ecc_uncorrectable_volatile", "critical", 0) in found
    assert ("xid_48", "critical", 0) in found and ("xid_63", "warning", 0) in found
    xid94 = [x for x in f["health"]["findings"] if x["code"] == "xid_94"][0]
    assert xid94["count"] == 9
    assert f["health"]["status"] == "failed"


def test_no_gpus_and_expected_count():
    f = collect(run_nvidia_smi=lambda: (0, b'<?xml version="1.0" ?><nvidia_smi_log><driver_version>550.1'
                                           b'</driver_version><attached_gpus>0</attached_gpus></nvidia_smi_log>', b""))
    assert ("no_gpus", "critical", None) in codes(f)
    rec = nvsmi.parse_text(fixture_bytes("nvidia_smi_text", "gpud_8x-rtx-4090_535.154.05_q.txt"))
    f = collect(run_nvidia_smi=lambda: (0, fixture_bytes("nvidia_smi_text", "gpud_8x-rtx-4090_535.154.05_q.txt"), b""),
                expected_gpu_count=8)
    assert rec["gpu_count"] == 8 and "gpu_count_low" not in [c for c, _, _ in codes(f)]
    f = collect(run_nvidia_smi=lambda: (0, fixture_bytes("nvidia_smi_text", "gpud_8x-rtx-4090_535.154.05_q.txt"), b""),
                expected_gpu_count=10)
    assert ("gpu_count_low", "critical", None) in codes(f)


@pytest.mark.parametrize(("kernel_log", "readable", "reason"), [
    (None, False, "kernel log not read (kernel_log disabled)"),
    ({"text": None, "source": None, "reason": "dmesg: Operation not permitted"}, False,
     "dmesg: Operation not permitted"),
])
def test_kernel_log_unreadable_is_said(kernel_log, readable, reason):
    f = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"), kernel_log=kernel_log)
    assert f["xid"]["readable"] is readable and f["xid"]["reason"] == reason
    assert ("kernel_log_unreadable", "info", None) in codes(f)


def test_idle_pcie_gen_is_info_only():
    f = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf-pr_dual_a5000-v13.xml"),
                kernel_log={"text": "", "source": "dmesg"})
    assert ("pcie_gen_below_max", "info", 0) in codes(f) and ("pcie_gen_below_max", "info", 1) in codes(f)
    assert f["health"]["status"] == "ok"


UNKNOWN_ERROR_SMI = b"Failed to initialize NVML: Unknown Error\n"


@pytest.mark.parametrize("driver_loaded, code, status", [
    (False, "driver_not_loaded", "failed"),
    (True, "nvml_unknown_error", "unknown"),
])
def test_unknown_nvml_error_names_a_missing_driver_only_when_proc_says_so(driver_loaded, code, status):
    # Debian's real libnvidia-ml1 in a container without the kernel driver: nvmlInit fails with
    # "Unknown Error" (999) and nvidia-smi prints the same (seen in molecule scenario "facts").
    nv = FakeNvml("x", 0, [], init_error=fake_pynvml.NVMLError(999))
    f = collect(pynvml=nv, run_nvidia_smi=lambda: (255, UNKNOWN_ERROR_SMI, b""),
                exists=lambda p: driver_loaded and p == gf.DRIVER_PROC_FILE)
    assert f["error_code"] == code
    assert f["health"]["status"] == status
    assert ("kernel driver is not loaded" in f["error"]) is (not driver_loaded)


@pytest.mark.parametrize("traces, code, status", [
    ((), "no_gpu_stack", "failed"),
    (("/dev/nvidia0",), "pynvml_missing", "unknown"),
])
def test_nothing_at_all_is_no_gpu_stack_but_a_device_node_keeps_it_unknown(traces, code, status):
    f = collect(pynvml=None, run_nvidia_smi=lambda: (127, b"", b"nvidia-smi: command not found"),
                exists=lambda p: p in traces)
    assert f["error_code"] == code
    assert f["health"]["status"] == status
    assert f["gpu_count"] == 0


@pytest.mark.parametrize("celsius, flagged", [(37, False), (84, False), (85, True), (91, True)])
def test_high_temperature_is_a_warning(celsius, flagged):
    xml = fixture_bytes("nvidia_smi_xml", "telegraf_rtx-3090-v12.xml")
    # This capture runs at 200 W of its 350 W default (power_limit_lowered, test_power_clocks.py): put the
    # limits back at the default so the temperature is the only thing that varies here.
    xml = xml.replace(b"<power_limit>200.00 W</power_limit>", b"<power_limit>350.00 W</power_limit>")
    xml = xml.replace(b"<enforced_power_limit>200.00 W</enforced_power_limit>",
                      b"<enforced_power_limit>350.00 W</enforced_power_limit>")
    hot = xml.replace(b"<gpu_temp>37 C</gpu_temp>", b"<gpu_temp>%d C</gpu_temp>" % celsius)
    f = collect(run_nvidia_smi=lambda: (0, hot, b""), kernel_log={"text": "", "source": "dmesg"})
    assert f["gpus"][0]["temperature_c"] == celsius
    assert (("high_temperature", "warning", 0) in codes(f)) is flagged
    assert (f["health"]["status"] == "degraded") is flagged


def test_readiness_probes_are_opt_in_and_never_break_collect():
    f = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"))
    assert f["readiness"] is None
    def boom(*a):
        raise OSError("unreadable")
    f = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"),
                readiness={"listdir": boom, "readlink": boom, "stat": boom, "environ": {}, "geteuid": lambda: 1000,
                           "probe_tls": None, "now": lambda: 0.0})
    assert f["readiness"]["sshd"]["reason"] == "not root: sshd -T (effective config) not read"
    assert f["readiness"]["listeners"]["readable"] is False and f["health"]["status"]


def test_default_readiness_reads_this_machine():
    kw = gf.default_readiness(data_dirs=["/tmp"], tls=False)  # noqa: S108 - only read
    assert kw["probe_tls"] is None and kw["data_dirs"] == ("/tmp",)  # noqa: S108
    f = gf.collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"), readiness=kw)
    assert f["readiness"]["disks"][0]["path"] == "/" and f["readiness"]["disks"][0]["free_gib"] > 0


def test_collected_at_is_iso_utc_whole_seconds():
    f = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"), wall_clock=lambda: 1796158263.87)
    assert f["collected_at"] == "2026-12-01T20:51:03Z"
    import re
    import time

    before = time.time()
    f = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", f["collected_at"])
    stamp = time.mktime(time.strptime(f["collected_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(time.gmtime(0))
    assert int(before) <= stamp <= time.time()

    def broken():
        raise OSError("clock")
    f = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"), wall_clock=broken)
    assert f["collected_at"] is None and f["source"] == "nvidia-smi"


def test_planned_commands_follow_the_options():
    from gpufleet.host.system import hostenv, hostready

    host = [list(c) for c in hostenv.HOST_COMMANDS]
    assert gf.planned_commands(kernel_log=False) == host
    assert gf.planned_commands(kernel_log=True) == [["dmesg"]] + host
    ready = gf.planned_commands(kernel_log=True, readiness={"geteuid": lambda: 0}, exists=lambda p: False)
    assert ready[:2] == [["sshd", "-T"], list(hostready.DPKG_QUERY)] and ready[-3:] == [["dmesg"]] + host
    assert ["ssh", "-V"] in ready


def test_collect_through_prefetch_reads_the_same_facts():
    from gpufleet.host.system import hostctx

    answers = {"systemd-detect-virt": (0, b"kvm\n", b""), "dpkg-query": (1, b"", b"")}

    def run(argv):
        return answers.get(argv[0])
    readiness = {"geteuid": lambda: 1000, "environ": {}, "now": lambda: 0.0}
    plain = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"), run=run, readiness=readiness,
                    wall_clock=lambda: 0)
    with hostctx.Prefetch(run, gf.planned_commands(False, readiness, exists=lambda p: False)) as pre:
        ahead = collect(run_nvidia_smi=smi("nvidia_smi_xml", "telegraf_tesla-t4.xml"), run=pre, readiness=readiness,
                        wall_clock=lambda: 0)
    plain.pop("duration_s")
    ahead.pop("duration_s")
    assert ahead == plain and ahead["host"]["virtualization"] == "kvm"


def test_kernel_log_may_be_read_late():
    order = []

    def smi_run():
        order.append("nvidia-smi")
        return 0, fixture_bytes("nvidia_smi_xml", "telegraf_tesla-t4.xml"), b""

    def read_log():
        order.append("kernel log")
        return {"text": "NVRM: Xid (PCI:0000:00:1e): 79, GPU has fallen off the bus.\n", "source": "dmesg"}
    f = collect(run_nvidia_smi=smi_run, kernel_log=read_log)
    assert order == ["nvidia-smi", "kernel log"] and f["xid"]["source"] == "dmesg" and f["xid"]["counts"] == {"79": 1}

    def broken():
        raise OSError("no log")
    f = collect(run_nvidia_smi=smi_run, kernel_log=broken)
    assert f["xid"]["readable"] is False and "no log" in f["xid"]["reason"]
