# shellcheck shell=bash
# Sourced by scripts/wheelhouse. .wheelhouse/jupyter/: JupyterLab and jupyter_server at the jupyter role's pins
# with all their dependencies, for Python 3.11 (Debian 12) and 3.13 (Debian 13) manylinux x86_64, for the jupyter
# role: pip on the host picks the compiled wheels of its own Python from the one folder. (Python 3.9, Debian 11,
# gets none: JupyterLab 4.6 and jupyter_server 2.21 need 3.10+, and the role refuses such a host.)
jupyter_pins=("jupyterlab==$(pin jupyter jupyter_lab_version)" "jupyter-server==$(pin jupyter jupyter_server_version)")
fetch jupyter yes "${jupyter_pins[@]}"
FETCH_PYTHON=3.13 fetch jupyter yes "${jupyter_pins[@]}"
