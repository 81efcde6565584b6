"""The gpu_monitoring role's exporter (roles/gpu_monitoring/files/gpufleet_gpu_exporter.py) on the
controller, against the fake libnvidia-ml.so.1 (tests/fakenvml) loaded by the real pynvml.

Each run is a subprocess (pynvml keeps its library for the life of a process). Expected values
are read from the profile JSON; every output goes through ``promtool check metrics``.
"""

import ctypes
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests import fakenvml

ROOT = Path(__file__).resolve().parents[2]
EXPORTER = ROOT / "roles" / "gpu_monitoring" / "files" / "gpufleet_gpu_exporter.py"
_VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = _VENV_PYTHON if _VENV_PYTHON.exists() else Path(sys.executable)
PROMTOOL = shutil.which("promtool")
KERNEL_LOGS = ROOT / "tests" / "fixtures" / "kernel_logs"
MIB = 1024 * 1024
HEALTHY = ("h100-sxm-8x-nvswitch", "rtx4090-riser-x4", "h200-1x")
INIT_FAILS = {"no-driver": "driver_not_loaded", "driver-mismatch": "lib_rm_version_mismatch",
              "no-permission": "no_permission"}

pytestmark = pytest.mark.skipif(not fakenvml.usable(PYTHON), reason=fakenvml.NEEDS)


def _load_module():
    spec = importlib.util.spec_from_file_location("gpufleet_gpu_exporter", EXPORTER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


exporter = _load_module()


@pytest.fixture(scope="session")
def libdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fakenvml-exporter")
    fakenvml.build(d)
    return d


def run(libdir, profile, *args, timeout=60):
    env = {**os.environ, **fakenvml.env_for(profile, libdir)}
    return subprocess.run([str(PYTHON), str(EXPORTER), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def scrape(libdir, profile, kernel_log=""):
    proc = run(libdir, profile, "--once", "--stdout", "--kernel-log", kernel_log)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


def promtool_check(text):
    if not PROMTOOL:
        pytest.skip("promtool is not installed (apt-get install prometheus, or CI's .ci/run installs it)")
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr


def value(text, metric, **labels):
    """The value of the one sample METRIC whose labels include LABELS (None when there is none)."""
    found = []
    for line in text.splitlines():
        m = re.match(r"^gpufleet_gpu_%s(?:\{(.*)\})? (\S+)$" % re.escape(metric), line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1) or ""))
        if all(have.get(k) == str(v) for k, v in labels.items()):
            found.append(float(m.group(2)))
    assert len(found) <= 1, "%s%s matches %d samples" % (metric, labels, len(found))
    return found[0] if found else None


@pytest.mark.parametrize("profile", HEALTHY)
def test_healthy_profiles_are_read_back_and_pass_promtool(libdir, profile):
    text = scrape(libdir, profile)
    promtool_check(text)
    data = fakenvml.load_profile(profile)
    assert value(text, "up") == 1 and value(text, "scrape_error") == 0
    assert value(text, "devices") == len(data["gpus"])
    for index, gpu in enumerate(data["gpus"]):
        ids = {"gpu": index, "uuid": gpu["uuid"], "name": gpu["name"]}
        assert value(text, "device_up", **ids) == 1
        assert value(text, "temperature_celsius", **ids) == gpu["temperature_c"]
        assert value(text, "memory_total_bytes", **ids) == gpu["memory_mib"]["total"] * MIB
        assert value(text, "power_draw_watts", **ids) == pytest.approx(gpu["power_usage_mw"] / 1000.0)
        assert value(text, "power_limit_watts", **ids) == gpu["enforced_power_limit_mw"] / 1000.0
        assert value(text, "sm_clock_hertz", **ids) == gpu["clocks_mhz"]["sm"] * 1e6
        assert value(text, "memory_clock_hertz", **ids) == gpu["clocks_mhz"]["mem"] * 1e6
        assert value(text, "utilization_ratio", **ids) == pytest.approx(gpu["utilization_pct"]["gpu"] / 100.0)
        pcie = gpu["pcie"]
        assert value(text, "pcie_link_generation", **ids) == pcie["curr_gen"]
        assert value(text, "pcie_link_max_generation", **ids) == pcie["max_gen"]
        assert value(text, "pcie_link_width", **ids) == pcie["curr_width"]
        assert value(text, "pcie_link_max_width", **ids) == pcie["max_width"]
        mask = int(str(gpu["clocks_event_reasons"]), 0)
        assert value(text, "clock_event_reason", reason="gpu_idle", **ids) == mask & 1
        assert value(text, "clock_event_reason", reason="sw_power_cap", **ids) == (mask >> 2) & 1
        ecc = gpu.get("ecc_errors")
        if ecc:
            assert value(text, "ecc_errors_total", error_type="uncorrected", counter="aggregate", **ids) == \
                ecc["aggregate"]["uncorrected"]
        else:  # no ECC on this board (RTX 4090): no series rather than a made-up 0
            assert "gpufleet_gpu_ecc_errors_total{gpu=\"%d\"" % index not in text


def test_degraded_gpus_lost_gpu_and_row_remap_failure(libdir):
    profile = "a100-pcie-4x-degraded"
    text = scrape(libdir, profile)
    promtool_check(text)
    data = fakenvml.load_profile(profile)
    lost = [i for i, g in enumerate(data["gpus"]) if g.get("lost")]
    assert lost, "the profile should have a GPU off the bus"
    assert value(text, "up") == 0 and value(text, "scrape_error") == 1
    assert value(text, "devices") == len(data["gpus"])
    for i in lost:
        assert value(text, "device_up", gpu=i, uuid="", name="") == 0
    assert re.search(r'^gpufleet_gpu_scrape_error_info\{code="gpu_is_lost",message="GPU %d: [^"]+"\} 1(?:\.0)?$'
                     % lost[0], text, re.M)
    for i, gpu in enumerate(data["gpus"]):
        rows = gpu.get("remapped_rows")
        if gpu.get("lost") or not rows:
            continue
        ids = {"gpu": i, "uuid": gpu["uuid"], "name": gpu["name"]}
        assert value(text, "remapped_rows", kind="uncorrectable", **ids) == rows["uncorrectable"]
        assert value(text, "remapped_rows_failure", **ids) == int(rows["failure"])
        assert value(text, "remapped_rows_pending", **ids) == int(rows["pending"])


@pytest.mark.parametrize("profile, code", sorted(INIT_FAILS.items()))
def test_nvml_init_failure_gives_the_error_gauge(libdir, profile, code):
    text = scrape(libdir, profile)
    promtool_check(text)
    assert value(text, "up") == 0 and value(text, "scrape_error") == 1
    assert re.search(r'^gpufleet_gpu_scrape_error_info\{code="%s",message="[^"]+"\} 1(?:\.0)?$' % code, text, re.M)
    assert "gpufleet_gpu_temperature_celsius" not in text and "gpufleet_gpu_devices" not in text


def test_no_nvml_library_at_all(tmp_path):
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        pass
    else:
        pytest.skip("this machine has a real libnvidia-ml.so.1")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", fakenvml.PROFILE_ENV)}
    proc = subprocess.run([str(PYTHON), str(EXPORTER), "--once", "--stdout", "--kernel-log", ""], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    promtool_check(proc.stdout)
    assert value(proc.stdout, "up") == 0
    assert 'code="library_not_found"' in proc.stdout


def test_xid_counts_match_the_project_kernel_log_parser(libdir):
    sys.path.insert(0, str(ROOT / "module_utils"))
    from gpufleet.host.system import kmsg

    log = KERNEL_LOGS / "gpud_xid48-63-94_peermem_dmesg-iso.log"
    expected = {}
    for ev in kmsg.parse_kernel_log(log.read_text())["events"]:
        if not ev.get("derived"):
            expected[str(ev["xid"])] = expected.get(str(ev["xid"]), 0) + 1
    assert expected, "the fixture should hold Xid lines"
    text = scrape(libdir, "h100-sxm-8x-nvswitch", str(log))
    promtool_check(text)
    assert value(text, "kernel_log_readable", source=str(log)) == 1
    got = {xid: int(float(n)) for xid, n in re.findall(r'^gpufleet_gpu_xid_errors_total\{.*xid="(\d+)".*\} (\S+)$',
                                                         text, re.M)}
    assert got == expected


def test_xid_lines_are_labelled_with_the_gpu_at_that_pci_address(libdir, tmp_path):
    gpu = fakenvml.load_profile("h100-sxm-8x-nvswitch")["gpus"][3]
    bus = gpu["pci"]["bus_id"]  # 00000000:BB:DD.F in NVML's form; the kernel writes 0000:BB:DD
    short = "0000:%s" % bus.split(":", 1)[1].rsplit(".", 1)[0]
    log = tmp_path / "kern.log"
    log.write_text("kernel: NVRM: Xid (PCI:%s): 79, pid=0, GPU has fallen off the bus.\n" % short * 2)
    text = scrape(libdir, "h100-sxm-8x-nvswitch", str(log))
    promtool_check(text)
    assert value(text, "xid_errors_total", gpu=3, uuid=gpu["uuid"], xid=79, pci_bus_id=short.lower()) == 2


def test_unreadable_kernel_log_says_so_and_writes_no_xid_series(libdir, tmp_path):
    missing = tmp_path / "no-such.log"
    text = scrape(libdir, "h200-1x", str(missing))
    promtool_check(text)
    assert value(text, "kernel_log_readable", source=str(missing)) == 0
    assert "gpufleet_gpu_xid_errors_total" not in text
    assert value(text, "up") == 1  # the GPU readings are not spoiled by the log


def test_textfile_is_replaced_atomically_and_world_readable(libdir, tmp_path):
    for _ in range(2):
        proc = run(libdir, "h200-1x", "--once", "--textfile-dir", str(tmp_path), "--kernel-log", "")
        assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpufleet_gpu.prom"]  # no temporary file left
    prom = tmp_path / "gpufleet_gpu.prom"
    assert prom.stat().st_mode & 0o777 == 0o644
    promtool_check(prom.read_text())


@pytest.mark.parametrize("args, message", [
    (["--interval", "0"], "--interval must be > 0"),
    (["--interval", "-5"], "--interval must be > 0"),
    (["--textfile-dir", "var/lib/textfile"], "must be an absolute path"),
    (["--http-port", "9410", "--http-bind", "0.0.0.0"], "must be a loopback address"),  # noqa: S104 (refused)
    (["--http-bind", "192.168.1.5"], "must be a loopback address"),
    (["--http-port", "70000"], "--http-port must be"),
    (["--expected-gpus", "65"], "--expected-gpus must be"),
    (["--expected-gpus", "-1"], "--expected-gpus must be"),
])
def test_bad_arguments_are_refused(libdir, args, message):
    proc = run(libdir, "h200-1x", "--once", "--stdout", *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_loopback_names_are_accepted():
    assert exporter.check_bind("localhost") == "127.0.0.1"
    assert exporter.check_bind("127.0.0.2") == "127.0.0.2"
    assert exporter.check_bind("::1") == "::1"
    with pytest.raises(ValueError):
        exporter.check_bind("::")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_running_exporter_serves_loopback_http_and_logs_an_nvml_failure_once(libdir, tmp_path):
    port = _free_port()
    env = {**os.environ, **fakenvml.env_for("no-driver", libdir)}
    proc = subprocess.Popen([str(PYTHON), str(EXPORTER), "--interval", "0.1", "--textfile-dir", str(tmp_path),
                             "--http-port", str(port), "--kernel-log", ""],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        body, url = None, "http://127.0.0.1:%d/metrics" % port
        deadline = time.monotonic() + 30  # imports, the first pass and the bind, on a loaded machine
        while body is None and time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(url, timeout=2).read().decode()  # noqa: S310 (http on loopback)
            except OSError:
                time.sleep(0.1)
        assert body is not None, "the endpoint never answered"
        with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 (http on loopback)
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")  # prometheus_client's
        promtool_check(body)
        assert value(body, "up") == 0 and 'code="driver_not_loaded"' in body
        first = (tmp_path / "gpufleet_gpu.prom").stat().st_mtime_ns
        deadline = time.monotonic() + 10  # passes every 0.1 s: rewritten within a few, even on a loaded machine
        while (tmp_path / "gpufleet_gpu.prom").stat().st_mtime_ns == first and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (tmp_path / "gpufleet_gpu.prom").stat().st_mtime_ns > first
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert err.count("driver_not_loaded") == 1, err
    assert "Traceback" not in err


def test_rented_count_and_interval_are_written_for_the_alerts(libdir):
    text = scrape_with(libdir, "h200-1x", "--expected-gpus", "2", "--interval", "7.5")
    promtool_check(text)
    assert value(text, "expected_devices") == 2
    assert value(text, "exporter_interval_seconds") == 7.5
    assert value(scrape(libdir, "h200-1x"), "expected_devices") is None  # 0 (not known): no series


def scrape_with(libdir, profile, *args):
    proc = run(libdir, profile, "--once", "--stdout", "--kernel-log", "", *args)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def test_a_sample_off_its_label_set_is_refused_not_written():
    # one name, one label set (docs/metrics.md): a bug here must not reach Prometheus as a second schema
    with pytest.raises(ValueError, match="gpufleet_gpu_temperature_celsius"):
        exporter.families([exporter.Sample("temperature_celsius", {"gpu": "0"}, 40)])
    with pytest.raises(ValueError, match="not in METRICS"):
        exporter.families([exporter.Sample("fan_speed_ratio", {}, 0.3)])


def test_without_prometheus_client_it_stops_with_the_fix(libdir, tmp_path):
    (tmp_path / "prometheus_client").mkdir()
    # a package that fails to import shadows the venv's, as on a host where the role's pip step did not run
    (tmp_path / "prometheus_client" / "__init__.py").write_text("raise ImportError('no prometheus_client here')")
    env = {**os.environ, **fakenvml.env_for("h200-1x", libdir), "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([str(PYTHON), str(EXPORTER), "--once", "--stdout", "--kernel-log", ""], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    assert "prometheus_client is missing" in proc.stderr and "gpu_monitoring_prometheus_client_version" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_render_escapes_label_values():
    text = exporter.render([exporter.Sample("scrape_error_info", {"code": "x", "message": 'a "b"\\c\nd'}, 1)])
    assert 'message="a \\"b\\"\\\\c\\nd"' in text
    assert json.dumps(text)  # plain str
