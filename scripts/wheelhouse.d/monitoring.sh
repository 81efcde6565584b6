# Sourced by scripts/wheelhouse: .wheelhouse/monitoring/ holds the terminal tools the gpu_monitoring
# role installs for people logged in (gpu_monitoring_tools), with their dependencies, at the versions
# pinned in the role's defaults. The exporter itself takes nvidia-ml-py from .wheelhouse/gpufleet/.
fetch monitoring yes "nvitop==$(pin gpu_monitoring gpu_monitoring_nvitop_version)"
# gpustat is published on PyPI as a source archive only: build its (pure Python) wheel here once,
# then fetch its dependencies as wheels, finding gpustat itself in the same folder.
__gpustat_version=$(pin gpu_monitoring gpu_monitoring_gpustat_version)
if ! have .wheelhouse/monitoring gpustat "$__gpustat_version"; then
  log "building gpustat==$__gpustat_version into .wheelhouse/monitoring/"
  .venv/bin/python -m pip wheel -q --disable-pip-version-check --no-deps -w .wheelhouse/monitoring \
    "gpustat==$__gpustat_version" 2> >(grep -v "is ignored: it is neither" >&2)
  .venv/bin/python -m pip download -q --disable-pip-version-check --only-binary :all: \
    --python-version 3.11 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    --platform any --find-links .wheelhouse/monitoring -d .wheelhouse/monitoring \
    "gpustat==$__gpustat_version" 2> >(grep -v "is ignored: it is neither" >&2)
fi
