# shellcheck shell=bash
# Ansible for a lent GPU machine (scripts/device-smoke), sourced by scripts/wheelhouse. That machine has a
# CUDA torch, nvidia-ml-py, Jinja2, PyYAML and packaging in its python3, no Ansible, and no network: these
# wheels travel with the checkout (carry .wheelhouse/device, about 2.4 MB). Both are pure Python, so one
# set serves any Python >= 3.11. ansible-core's other requirement, cryptography, is imported only for
# vault encryption, which the smoke check does not use.
fetch device no "$(controller_pin ansible-core)" resolvelib==1.2.1
