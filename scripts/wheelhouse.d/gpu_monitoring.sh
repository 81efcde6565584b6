# shellcheck shell=bash
# Sourced by scripts/wheelhouse: the gpu_monitoring role's exporter runs on prometheus-client (its registry,
# textfile writer and HTTP server) next to nvidia-ml-py, in the gpufleet venv, from the same pushed folder
# (.wheelhouse/gpufleet/, gpu_monitoring_pip_wheelhouse). Pure Python, no dependencies: one wheel, at the
# role's pin (gpu_monitoring_prometheus_client_version, equal to the controller's requirements.txt pin).
fetch gpufleet no "prometheus-client==$(pin gpu_monitoring gpu_monitoring_prometheus_client_version)"
