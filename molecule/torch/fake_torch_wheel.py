#!/usr/bin/env python3
"""Build a tiny stand-in for a CUDA torch wheel: fake_torch_wheel.py VERSION CUDA PYTAG OUTDIR.

  fake_torch_wheel.py 2.11.0+cu128 12.8 cp311 DIR  ->  DIR/torch-2.11.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl

Named and tagged like PyTorch's own wheel of that build (so the role's wheelhouse checks, pip's tag matching and the
solver see a cu128 build for Python 3.11), a few kilobytes instead of gigabytes. Inside: torch/version.py as the real
wheels write it (__version__, cuda: read by scripts/find-python and the torch_target module without importing torch),
torch.version.cuda, and torch.cuda.is_available() answering True as a real CUDA build does when NVML and the driver
answer (the simulated GPU). It runs no kernel: a test double for the install path, not for the GPU.
"""

import base64
import hashlib
import sys
import zipfile
from pathlib import Path


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build(version, cuda, pytag, outdir):
    tag = "%s-%s-manylinux_2_28_x86_64" % (pytag, pytag)
    dist = "torch-%s.dist-info" % version
    cuda_text = repr(cuda) if cuda else "None"
    files = {
        "torch/__init__.py": ("from torch import version  # noqa: F401\nfrom torch import cuda  # noqa: F401\n"
                              "__version__ = version.__version__\n"),
        "torch/version.py": ("from typing import Optional\n\n__all__ = ['__version__', 'cuda']\n"
                             "__version__ = '%s'\ncuda: Optional[str] = %s\n" % (version, cuda_text)),
        "torch/cuda.py": "def is_available():\n    return %s\n" % bool(cuda),
        dist + "/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: %s\nSummary: a test double\n" % version,
        dist + "/WHEEL": "Wheel-Version: 1.0\nGenerator: gpufleet-test\nRoot-Is-Purelib: false\nTag: %s\n" % tag,
        dist + "/top_level.txt": "torch\n",
    }
    out = Path(outdir) / ("torch-%s-%s.whl" % (version, tag))
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, text in files.items():
            data = text.encode()
            whl.writestr(name, data)
            lines.append(record_line(name, data))
        lines.append(dist + "/RECORD,,")
        whl.writestr(dist + "/RECORD", "\n".join(lines) + "\n")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    print(build(*sys.argv[1:]))
