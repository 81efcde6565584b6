# shellcheck shell=bash
# Sourced by scripts/wheelhouse. .wheelhouse/jupyter/: JupyterLab and jupyter_server at the jupyter role's pins
# with all their dependencies, manylinux x86_64, for every Python the supported images run that JupyterLab supports:
# 3.10 (Ubuntu 22.04), 3.11 (Debian 12), 3.12 (Ubuntu 24.04), 3.13 (Debian 13). pip on the host picks the compiled
# wheels of its own Python from the one folder. (3.8, Ubuntu 20.04, and 3.9, Debian 11, get none: JupyterLab 4.6 and
# jupyter_server 2.21 need 3.10+, and the role refuses such a host.) GPUFLEET_JUPYTER_PYTHONS="3.12" resolves for
# those only (the role names the missing Python and this command when a host's Python has no wheels here).
jupyter_pins=("jupyterlab==$(pin jupyter jupyter_lab_version)" "jupyter-server==$(pin jupyter jupyter_server_version)")
for jupyter_py in ${GPUFLEET_JUPYTER_PYTHONS:-3.10 3.11 3.12 3.13}; do
  [[ "$jupyter_py" =~ ^3\.[0-9]+$ ]] || die "GPUFLEET_JUPYTER_PYTHONS: '$jupyter_py' is not a Python version like 3.12"
  FETCH_PYTHON=$jupyter_py fetch jupyter yes "${jupyter_pins[@]}"
done
