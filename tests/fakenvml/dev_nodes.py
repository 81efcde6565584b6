"""Test double: empty files named as the NVIDIA driver's device nodes, as a container started with its
GPUs has them: /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools and one /dev/nvidiaN per GPU of a
fake NVML profile. Run inside a simulated host (scripts/demo-fleet, molecule/doctor/prepare.yml):

    python3 dev_nodes.py [PROFILE]        default /etc/gpufleet-fake-nvml/profile.json
"""

import json
import pathlib
import sys


def main(profile="/etc/gpufleet-fake-nvml/profile.json"):
    with open(profile) as f:
        count = len(json.load(f)["gpus"])
    for node in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] + ["nvidia%d" % i for i in range(count)]:
        pathlib.Path("/dev", node).touch()


if __name__ == "__main__":
    main(*sys.argv[1:])
