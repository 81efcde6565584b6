#!/usr/bin/env python3
"""Containers the provider stand-in hands out as rented boxes (playbooks/acquire.yml's e2e, docs/acquire.md).

Each box is a demo image (scripts/test-images) started the way scripts/demo-fleet starts its simulated hosts: sshd on
127.0.0.1:<port>, the demo key (.demo/id_ed25519) trusted, the fake NVML (tests/fakenvml, built into .demo/fakenvml
by scripts/demo-fleet up) with a profile, nvidia-ml-py in /opt/gpufleet/venv and the device nodes. A quality names
what the renter finds on it (the boxes with a GPU carry the renter's torch, the torch test double
tests/unit/doubles/torch_double.py of TORCH, in /venv/main activated from root's ~/.bashrc, as vast.ai's image):

    good         1x RTX 5090, idle, driver 580.95.05 / CUDA 13.0 (rtx5090-1x with a driver a cu130 build runs on)
    lost_gpu     the GPUs lost after a host's daemon-reload (lost-gpus-unknown-error: nvmlInit "Unknown Error")
    old_driver   1x RTX 5090 on driver 575.57.08 / CUDA 12.9 (rtx5090-1x as captured): too old for a cu130 build
    slow         1x RTX 5090, driver 580, its power limit lowered to 300 of 575 W (a figure below its floor)
    tenant       1x H200 with another tenant's processes on it (h200-1x, captured under load)

Container names are <prefix>-NN (prefix gpufleet-acq by default, never the demo's gpufleet-demo), labelled
gpufleet.fleet=<prefix>; ``stop`` removes those containers only. A test double: never used against a real host.
"""

import copy
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "tests" / "fakenvml" / "profiles"
KEY = ROOT / ".demo" / "id_ed25519"
FAKE_NVML = ROOT / ".demo" / "fakenvml" / "libnvidia-ml.so.1"
IMAGE = "gpufleet/debian:12"
TORCH = "2.9.1+cu130"  # the renter's torch on the boxes with GPUs: the torch test double of this build
QUALITIES = ("good", "lost_gpu", "old_driver", "slow", "tenant")


def profile(quality):
    """The fake NVML profile (a dict) of a quality."""
    if quality == "lost_gpu":
        return json.loads((PROFILES / "lost-gpus-unknown-error.json").read_text())
    if quality == "tenant":
        return json.loads((PROFILES / "h200-1x.json").read_text())
    if quality not in QUALITIES:
        raise ValueError("quality %r not one of %s" % (quality, ", ".join(QUALITIES)))
    data = copy.deepcopy(json.loads((PROFILES / "rtx5090-1x.json").read_text()))
    if quality != "old_driver":
        data.update(driver_version="580.95.05", nvml_version="13.580.95.05", cuda_driver_version=13000)
        data["description"] = "rtx5090-1x with driver 580.95.05 / CUDA 13.0 (tests/doubles/rental_pool.py)"
    if quality == "slow":
        for gpu in data["gpus"]:
            gpu["power_limit_mw"] = gpu["enforced_power_limit_mw"] = 300000
    return data


def _docker(*args, check=True, stdin=None):
    return subprocess.run(["docker"] + list(args), check=check, capture_output=True, text=True, input=stdin)


def _ssh_ok(port):
    return subprocess.run(
        ["ssh", "-q", "-i", str(KEY), "-p", str(port), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=2", "root@127.0.0.1", "true"],
        capture_output=True).returncode == 0


def port_free(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


class RentalPool:
    """Boxes of given qualities: ``start(["good", "lost_gpu", ...])`` -> [{"name", "port", "quality"}]."""

    def __init__(self, prefix="gpufleet-acq", base_port=2300, image=IMAGE):
        if not prefix.startswith("gpufleet-") or prefix.startswith("gpufleet-demo"):
            raise ValueError("prefix must be gpufleet-NAME and not the demo fleet's, got %r" % prefix)
        self.prefix, self.base_port, self.image = prefix, base_port, image
        self.boxes = []

    def missing(self):
        """Why the pool cannot start here (None when it can)."""
        if not KEY.exists() or not FAKE_NVML.exists():
            return "no .demo/id_ed25519 or .demo/fakenvml: run scripts/demo-fleet up once"
        if not list((ROOT / ".wheelhouse" / "gpufleet").glob("nvidia_ml_py-*.whl")):
            return "no nvidia-ml-py wheel in .wheelhouse/gpufleet: run scripts/wheelhouse"
        try:
            if _docker("image", "inspect", self.image, check=False).returncode != 0:
                return "%s is missing: run scripts/test-images" % self.image
        except OSError:
            return "docker is not available"
        return None

    def _start_one(self, i, quality):
        name = "%s-%02d" % (self.prefix, i)
        port = self.base_port + i
        _docker("rm", "-f", name, check=False)
        _docker("create", "--name", name, "--hostname", name, "--label", "gpufleet.fleet=%s" % self.prefix,
                "--shm-size=1g", "-p", "127.0.0.1:%d:22" % port, self.image)
        _docker("cp", "-q", str(KEY) + ".pub", "%s:/root/authorized_keys.pub" % name)
        _docker("start", name)
        _docker("exec", name, "sh", "-c", "install -d -m 700 /root/.ssh && install -m 600 /root/authorized_keys.pub "
                "/root/.ssh/authorized_keys && rm /root/authorized_keys.pub")
        wheel = sorted((ROOT / ".wheelhouse" / "gpufleet").glob("nvidia_ml_py-*.whl"))[0]
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(profile(quality), f)
            f.flush()
            _docker("exec", name, "mkdir", "-p", "/etc/gpufleet-fake-nvml", "/opt/gpufleet")
            _docker("cp", "-q", str(FAKE_NVML), "%s:/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" % name)
            _docker("cp", "-q", f.name, "%s:/etc/gpufleet-fake-nvml/profile.json" % name)
        _docker("cp", "-q", str(wheel), "%s:/opt/gpufleet/" % name)
        _docker("exec", name, "sh", "-c", "python3 -m venv /opt/gpufleet/venv && /opt/gpufleet/venv/bin/pip install -q "
                "--no-index /opt/gpufleet/nvidia_ml_py-*.whl && rm /opt/gpufleet/nvidia_ml_py-*.whl")
        _docker("exec", "-i", name, "python3", "-", stdin=(ROOT / "tests" / "fakenvml" / "dev_nodes.py").read_text())
        if quality not in ("lost_gpu",):
            self._renter_torch(name, quality)
        return {"name": name, "port": port, "quality": quality}

    def _renter_torch(self, name, quality):
        """The torch double of TORCH in /venv/main, told the box's GPUs (scripts/demo-fleet's renter_torch)."""
        for path in (str(ROOT), str(ROOT / "module_utils")):
            if path not in sys.path:
                sys.path.insert(0, path)
        from tests.unit.doubles import torch_double
        gpus = [{"name": g["name"], "compute_capability": "%d.%d" % tuple(g["compute_capability"])}
                for g in profile(quality)["gpus"]]
        with tempfile.TemporaryDirectory() as tmp:
            torch_double.install(tmp, TORCH, gpus=gpus)
            _docker("exec", name, "python3", "-m", "venv", "/venv/main")
            site = _docker("exec", name, "/venv/main/bin/python", "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
            _docker("cp", "-q", tmp + "/.", "%s:%s/" % (name, site))
        _docker("exec", "-i", name, "sh", "-c", "cat >>/root/.bashrc", stdin=(
            'if [ -z "${CONDA_DEFAULT_ENV:-}" ] && [ -f /venv/main/bin/activate ]; then\n'
            '  . /venv/main/bin/activate\nfi\n'))

    def start(self, qualities, timeout=60):
        """Start one box per quality (in parallel) and wait for their SSH; the boxes in order."""
        out, errors = [None] * len(qualities), []

        def one(i, q):
            try:
                out[i] = self._start_one(i + 1, q)
            except subprocess.CalledProcessError as exc:
                errors.append("%s: %s" % (" ".join(exc.cmd[:3]), exc.stderr.strip()[-300:]))

        threads = [threading.Thread(target=one, args=(i, q)) for i, q in enumerate(qualities)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.boxes = [b for b in out if b]
        if errors:
            self.stop()
            raise RuntimeError("rental pool: " + "; ".join(errors))
        end = time.monotonic() + timeout
        for box in self.boxes:
            while not _ssh_ok(box["port"]):
                if time.monotonic() > end:
                    self.stop()
                    raise RuntimeError("rental pool: %s does not answer SSH on %d" % (box["name"], box["port"]))
                time.sleep(0.5)
        return self.boxes

    def stop(self):
        """Remove this pool's containers (by name, never another fleet's)."""
        for box in self.boxes:
            _docker("rm", "-f", box["name"], check=False)
        self.boxes = []
