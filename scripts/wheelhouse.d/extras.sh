# shellcheck shell=bash
# Optional extra Python packages for the torch venv (roles/torch `torch_extra_packages`), sourced by
# scripts/wheelhouse. Opt-in: they add a few hundred MB (pyarrow, pandas, tokenizers) to the torch
# wheelhouse, which the torch role pushes to every host, so they are fetched only with
#   GPUFLEET_TORCH_EXTRAS=1 scripts/wheelhouse
# They go into .wheelhouse/torch/ next to torch: the torch role installs torch_extra_packages from the
# same source as torch (--no-index --find-links of the pushed wheelhouse), never from a second index.
#
# Pins (latest releases on 2026-11-29). transformers 5.24.0 declares torch>=2.6 (its `torch` extra)
# and Python >= 3.11: use it with torch_version >= 2.6 (the torch scenario's 2.13.0); with the role's
# default torch 2.5.1 pin a transformers release that still supports 2.5 instead.
[ "${GPUFLEET_TORCH_EXTRAS:-0}" = 1 ] || return 0
# transformers, datasets and tqdm with their dependencies (none of them requires torch itself).
fetch torch yes transformers==5.24.0 datasets==5.2.0 tqdm==4.70.1 psutil==7.2.2
# accelerate requires torch: without --no-deps pip download would fetch another torch build.
# Its other requirements (numpy, packaging, psutil, pyyaml, huggingface_hub, safetensors) come above.
fetch torch no accelerate==1.15.0
