"""The alert rules in a real Prometheus, scraping the real exporter over the fake NVML.

The exporter (roles/gpu_monitoring/files/gpufleet_gpu_exporter.py) runs as a local process on
127.0.0.1 with the fake libnvidia-ml.so.1 (tests/fakenvml) and ``--interval 1``; Debian's
``prometheus`` runs on 127.0.0.1 with a temporary config (scrape and evaluation every second) and
monitoring/rules/gpufleet-gpu.rules.yml loaded. The test restarts the exporter on the same port with
one profile after another and reads the alerts back from Prometheus's HTTP API: none on the healthy
profiles, exactly the expected ones on the riser, hot and degraded ones.

Only its own copy of the rules differs from the shipped file: every ``for`` is rewritten to 0s, so
that an alert shows within seconds (the shipped durations are tested by promtool in
test_monitoring.py). About 20 s.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests import fakenvml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "rules" / "gpufleet-gpu.rules.yml"
EXPORTER = ROOT / "roles" / "gpu_monitoring" / "files" / "gpufleet_gpu_exporter.py"
_VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = _VENV_PYTHON if _VENV_PYTHON.exists() else Path(sys.executable)
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(
    not (PROMETHEUS and PROMTOOL)
    or not sys.platform.startswith("linux")
    or not (os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc"))
    or subprocess.run([str(PYTHON), "-c", "import pynvml, prometheus_client"], capture_output=True,
                      check=False).returncode != 0,
    reason="needs Debian's prometheus package (prometheus, promtool), a C compiler, and nvidia-ml-py and "
           "prometheus-client in the project venv",
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url):
    with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 (http on loopback)
        return json.loads(r.read().decode())


class Live:
    """A Prometheus and an exporter, both on loopback ports of their own."""

    def __init__(self, tmp, libdir):
        self.tmp, self.libdir = tmp, libdir
        self.exporter_port, self.prom_port = _free_port(), _free_port()
        self.api = "http://127.0.0.1:%d/api/v1/" % self.prom_port
        self.exporter = self.prometheus = None
        (tmp / "textfile").mkdir()

    def start_prometheus(self):
        rules = yaml.safe_load(RULES.read_text())
        for group in rules["groups"]:
            for rule in group["rules"]:
                rule["for"] = "0s"  # this copy only: see the module docstring
        (self.tmp / "rules.yml").write_text(yaml.safe_dump(rules))
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(self.tmp / "rules.yml")],
            "scrape_configs": [{"job_name": "gpufleet_gpu",
                                "static_configs": [{"targets": ["127.0.0.1:%d" % self.exporter_port]}]}],
        }
        (self.tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
        check = subprocess.run([PROMTOOL, "check", "config", str(self.tmp / "prometheus.yml")], capture_output=True,
                               text=True, timeout=60, check=False)
        assert check.returncode == 0, check.stdout + check.stderr
        self.prom_log = open(self.tmp / "prometheus.log", "w")  # noqa: SIM115 (closed in stop())
        self.prometheus = subprocess.Popen(
            [PROMETHEUS, "--config.file=%s" % (self.tmp / "prometheus.yml"),
             "--storage.tsdb.path=%s" % (self.tmp / "data"), "--web.listen-address=127.0.0.1:%d" % self.prom_port,
             "--log.level=warn"], stdout=self.prom_log, stderr=subprocess.STDOUT)
        self._until(lambda: self._ready(), 30, "Prometheus never became ready")

    def _ready(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.prom_port, timeout=2) as r:  # noqa: S310
                return r.status == 200
        except OSError:
            return False

    def start_exporter(self, profile, expected_gpus, kernel_log=""):
        self.stop_exporter()
        env = {**os.environ, **fakenvml.env_for(profile, self.libdir)}
        self.exporter = subprocess.Popen(
            [str(PYTHON), str(EXPORTER), "--interval", "1", "--http-port", str(self.exporter_port),
             "--textfile-dir", str(self.tmp / "textfile"), "--kernel-log", kernel_log,
             "--expected-gpus", str(expected_gpus)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop_exporter(self):
        if self.exporter is not None:
            self.exporter.terminate()
            _, err = self.exporter.communicate(timeout=30)
            assert "Traceback" not in err, err
            self.exporter = None

    def stop(self):
        self.stop_exporter()
        if self.prometheus is not None:
            self.prometheus.terminate()
            self.prometheus.wait(timeout=30)
            self.prom_log.close()

    def query(self, promql):
        return _get(self.api + "query?" + urllib.parse.urlencode({"query": promql}))["data"]["result"]

    def alerts(self):
        """{(alertname, gpu)} of the alerts Prometheus holds (pending or firing)."""
        found = set()
        for a in _get(self.api + "alerts")["data"]["alerts"]:
            assert a["state"] == "firing", a  # `for` is 0s in this copy: nothing waits as pending
            found.add((a["labels"]["alertname"], a["labels"].get("gpu", "")))
        return found

    def _until(self, check, seconds, message):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.prometheus is not None and self.prometheus.poll() is not None:
                pytest.fail("Prometheus exited: %s" % (self.tmp / "prometheus.log").read_text()[-2000:])
            if check():
                return
            time.sleep(0.25)
        pytest.fail(message)

    def switch(self, profile, expected_gpus, expected_alerts, kernel_log=""):
        """Run PROFILE; wait until Prometheus holds its readings, then until the alerts are exactly
        EXPECTED_ALERTS, and check they stay so for two more evaluations."""
        driver = fakenvml.load_profile(profile)["driver_version"]
        self.start_exporter(profile, expected_gpus, kernel_log)
        self._until(lambda: [r for r in self.query("gpufleet_gpu_exporter_info")
                             if r["metric"].get("driver_version") == driver],
                    20, "Prometheus never scraped the exporter with %s" % profile)
        got = []
        self._until(lambda: got.append(self.alerts()) or got[-1] == expected_alerts, 15,
                    "alerts on %s never became %s" % (profile, sorted(expected_alerts)))
        time.sleep(2.2)  # two more rule evaluations on fresh scrapes
        assert self.alerts() == expected_alerts, profile


@pytest.fixture(scope="module")
def libdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fakenvml-live")
    fakenvml.build(d)
    return d


def _pci(bus_id):
    """NVML's 00000000:E3:00.0 as the kernel log writes it: 0000:e3:00."""
    return "0000:%s" % bus_id.split(":", 1)[1].rsplit(".", 1)[0].lower()


def test_prometheus_fires_the_expected_alerts_per_profile(libdir, tmp_path):
    degraded = fakenvml.load_profile("a100-pcie-4x-degraded")
    gpus = degraded["gpus"]
    lost = next(i for i, g in enumerate(gpus) if g.get("lost"))
    remap = next(i for i, g in enumerate(gpus) if (g.get("remapped_rows") or {}).get("failure"))
    # What the kernel logs with such a fault: Xid 79 for the lost GPU, Xid 64 for the failed remap.
    kern = tmp_path / "kern.log"
    kern.write_text("kernel: NVRM: Xid (PCI:%s): 79, pid=0, GPU has fallen off the bus.\n"
                    "kernel: NVRM: Xid (PCI:%s): 64, pid=0, Row remapper failure.\n"
                    % (_pci(gpus[lost]["pci"]["bus_id"]), _pci(gpus[remap]["pci"]["bus_id"])))
    # A hot, throttled H200: 91 C, sw_power_cap (0x4, no alert) + hw_slowdown (0x8) + hw_thermal_slowdown (0x40).
    hot = fakenvml.load_profile("h200-1x")
    hot.update(name="h200-1x-hot", description="h200-1x at 91 C in thermal and hardware slowdown (made by a test)")
    hot["gpus"][0].update(temperature_c=91, clocks_event_reasons="0x4C")
    assert fakenvml.validate_profile(hot) == []
    (tmp_path / "hot.json").write_text(json.dumps(hot))

    live = Live(tmp_path, libdir)
    try:
        live.start_prometheus()
        live.switch("h200-1x", 1, set())
        live.switch("h100-sxm-8x-nvswitch", 8, set())
        live.switch("rtx4090-riser-x4", 1, {("GpufleetGpuPcieWidthBelowMax", "0")})
        live.switch(str(tmp_path / "hot.json"), 1, {("GpufleetGpuTemperatureHigh", "0"),
                                                    ("GpufleetGpuThermalThrottling", "0"),
                                                    ("GpufleetGpuPowerThrottling", "0")})
        live.switch("a100-pcie-4x-degraded", len(gpus), {
            ("GpufleetGpuLost", str(lost)),
            ("GpufleetGpuFewerThanRented", ""),
            ("GpufleetGpuXidFallenOffBus", ""),  # the lost GPU has no NVML identity: its Xid names no GPU
            ("GpufleetGpuXidRowRemapFailure", str(remap)),
            ("GpufleetGpuUncorrectableEcc", str(remap)),
            ("GpufleetGpuRowRemapFailed", str(remap)),
            ("GpufleetGpuRowRemapPending", str(remap)),
        }, kernel_log=str(kern))
    finally:
        live.stop()
