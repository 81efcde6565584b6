# shellcheck shell=bash
# Sourced by scripts/wheelhouse. .wheelhouse/jupyter/: JupyterLab and jupyter_server at the jupyter role's pins
# with all their dependencies, for Python 3.11 manylinux x86_64 (the torch set's target), for the jupyter role.
fetch jupyter yes "jupyterlab==$(pin jupyter jupyter_lab_version)" "jupyter-server==$(pin jupyter jupyter_server_version)"
