"""A torch test double: a ``torch`` package, written into an environment's site-packages, that reports what a real
torch build reports about CUDA on a simulated GPU, and fails a kernel launch where its build has no kernels for
that GPU's architecture.

    install(site_packages, "2.7.1+cu126", gpus=[{"name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0"}])

What it answers (the calls gpu_doctor's torch probe, doctor_childprobe.TORCH_PROBE, makes):

* ``torch.__version__`` and ``torch/version.py``'s ``__version__`` (scripts/find-python reads the file), and
  ``torch.version.cuda`` ("12.6" for a +cu126 build; None for +cpu), ``torch.version.hip`` None;
* ``torch.cuda.is_available()``: True for a CUDA build with a GPU, as real torch says even when it has no kernels
  for the GPU (it checks the driver and the device count, not the architecture);
* ``torch.cuda.device_count()``, ``torch.cuda.get_arch_list()``: the build's arch list, from torchcompat's wheel
  table (each row sourced there) unless given;
* the first CUDA tensor warns as torch's ``_check_capability`` does ("NVIDIA GeForce RTX 5090 with CUDA capability
  sm_120 is not compatible with the current PyTorch installation. ..."), and a kernel on a GPU the arch list does
  not cover raises ``RuntimeError: CUDA error: no kernel image is available for execution on the device``
  (tests/fixtures/doctor/torch_errors/no-kernel-image_*: the texts of real runs);
* ``torch.backends.cudnn.version()``, ``torch.cuda.nccl.version()``.

The GPUs are the simulated machine's (a fake NVML profile's, tests/fakenvml/profiles): real torch learns them from
the driver; the double is told them.
"""

import json
import pathlib
import re

# The package: one module, reading its build and the simulated GPUs from _double.json beside it.
_INIT = r'''"""torch test double (tests/unit/doubles/torch_double.py): not torch."""
import json as _json
import os as _os
import types as _types
import warnings as _warnings

with open(_os.path.join(_os.path.dirname(__file__), "_double.json")) as _f:
    _CONF = _json.load(_f)

__version__ = _CONF["version"]
version = _types.SimpleNamespace(__version__=__version__, cuda=_CONF["cuda"], hip=None)
_GPUS = _CONF["gpus"] if _CONF["cuda"] else []
_ARCHES = _CONF["arch_list"] if _CONF["cuda"] else []
_checked = []


def _sm(cc):
    major, minor = str(cc).split(".")
    return int(major), int(minor)


def _covers(cc):
    major, minor = _sm(cc)
    for arch in _ARCHES:
        kind, digits = arch.split("_", 1)
        digits = digits.rstrip("abcdefghijklmnopqrstuvwxyz")
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True  # PTX: JIT-compiled for a newer GPU
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
    return False


def _check_capability():
    # torch/cuda/__init__.py _check_capability: once, at the first CUDA use.
    if _checked:
        return
    _checked.append(True)
    for g in _GPUS:
        if not _covers(g["compute_capability"]):
            major, minor = _sm(g["compute_capability"])
            _warnings.warn(
                "\n%s with CUDA capability sm_%d%d is not compatible with the current PyTorch installation.\n"
                "The current PyTorch install supports CUDA capabilities %s.\n"
                "If you want to use the %s GPU with PyTorch, please check the instructions at "
                "https://pytorch.org/get-started/locally/\n" % (g["name"], major, minor, " ".join(_ARCHES), g["name"]),
                UserWarning)


class _Tensor:
    def __init__(self, device):
        self.device = device

    def _kernel(self):
        if self.device.startswith("cuda"):
            index = int(self.device.partition(":")[2] or 0)
            if not _covers(_GPUS[index]["compute_capability"]):
                raise RuntimeError(
                    "CUDA error: no kernel image is available for execution on the device\n"
                    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                    "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
        return _Tensor(self.device)

    def __mul__(self, other):
        return self._kernel()

    def sum(self):
        return self._kernel()

    def item(self):
        return 8.0


def ones(*size, device="cpu", **kw):
    device = str(device)
    if device.startswith("cuda"):
        if not _GPUS:
            raise RuntimeError("Found no NVIDIA driver on your system." if not _CONF["cuda"] else "No CUDA GPUs are "
                               "available")
        _check_capability()
    return _Tensor(device)


def _is_available():
    return bool(_GPUS)


cuda = _types.SimpleNamespace(
    is_available=_is_available, device_count=lambda: len(_GPUS), get_arch_list=lambda: list(_ARCHES),
    nccl=_types.SimpleNamespace(version=lambda: tuple(_CONF["nccl"]) if _CONF["cuda"] else None))
backends = _types.SimpleNamespace(cudnn=_types.SimpleNamespace(
    version=lambda: _CONF["cudnn"] if _CONF["cuda"] else None))
'''


def arch_list(version):
    """The arch list of a build ("2.7.1+cu126") from torchcompat's wheel table (sm and PTX entries), or None."""
    from gpufleet.host.pytorch import table as torchtable

    m = re.match(r"^(\d+\.\d+)\.\d+\+(cu\d+)$", version)
    row = torchtable.wheel(m.group(1), m.group(2)) if m else None
    return list(row["arches"]) + list(row["ptx"]) if row and row["arches"] is not None else None


def install(site_packages, version, gpus=(), arches=None, cudnn=90100, nccl=(2, 21, 5)):
    """Write the double into ``site_packages``/torch. ``gpus``: the simulated machine's GPUs, dicts with ``name``
    and ``compute_capability`` ("12.0"). ``arches``: the build's arch list (default: torchcompat's row)."""
    label = version.partition("+")[2]
    cuda = "%s.%s" % (label[2:-1], label[-1]) if label.startswith("cu") else None
    if cuda and arches is None:
        arches = arch_list(version)
        if arches is None:
            raise ValueError("no arch list known for %s: pass arches" % version)
    pkg = pathlib.Path(site_packages) / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(_INIT)
    (pkg / "version.py").write_text("from typing import Optional\n\n__version__ = %r\ncuda: Optional[str] = %r\n"
                                    % (version, cuda))
    (pkg / "_double.json").write_text(json.dumps({
        "version": version, "cuda": cuda, "arch_list": list(arches or ()), "cudnn": cudnn, "nccl": list(nccl),
        "gpus": [{"name": g["name"], "compute_capability": str(g["compute_capability"])} for g in gpus]}))
    dist = pathlib.Path(site_packages) / ("torch-%s.dist-info" % version)
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: %s\n" % version)
    return pkg


def profile_gpus(profile):
    """The GPUs of a fake NVML profile (tests/fakenvml/profiles/NAME.json) as install() takes them."""
    path = pathlib.Path(__file__).resolve().parents[2] / "fakenvml" / "profiles" / ("%s.json" % profile)
    data = json.loads(path.read_text())
    return [{"name": g["name"], "compute_capability": "%d.%d" % tuple(g["compute_capability"])}
            for g in data["gpus"]]
