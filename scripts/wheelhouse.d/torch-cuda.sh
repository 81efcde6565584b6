# shellcheck shell=bash
# A real CUDA build of torch for the doctor scenario's "CPU-only torch where a CUDA build is expected"
# host (molecule/doctor), sourced by scripts/wheelhouse. Opt-in, because it is about 2.9 GB:
#   GPUFLEET_TORCH_CUDA=1 scripts/wheelhouse        (make molecule sets it when the doctor scenario runs)
# PyPI's torch 2.14.1 for Python 3.11 on Linux x86_64 is the cu130 build (torch.__version__ 2.14.1+cu130,
# torch.version.cuda 13.0) with its nvidia-*-cu13 libraries; the wheel file carries no +cu130 label, which
# the torch role handles (torch_variant: an unlabelled PyPI wheel is that release's PyPI build). It lies on
# this kind of machine's disk, where pip's configuration finds it; elsewhere pip downloads it from PyPI.
# download.pytorch.org (the +cu121 wheels) is not reachable from this project's machines or CI.
[ "${GPUFLEET_TORCH_CUDA:-0}" = 1 ] || return 0
fetch torch-cu130 yes torch==2.14.1
fetch torch-cu130 no "$(controller_pin nvidia-ml-py)" "numpy==$(pin torch torch_numpy_version)"
