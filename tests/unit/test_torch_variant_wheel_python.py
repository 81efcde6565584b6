"""Issue 41: a wheelhouse that holds the torch release only for other Pythons is refused before anything changes,
naming the Python torch goes into and the command that adds its wheel (library/torch_variant.py)."""

import pytest

from tests.unit.ansible_module import needs_ansible
from tests.unit.test_torch_variant_module import CPU_WHEEL, run_module

pytestmark = needs_ansible
CU128_311 = "torch-2.11.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"
BLACKWELL = {"torch_version": "2.11.0", "variant": "auto", "driver_version": "575.57.08",
             "compute_capabilities": ["12.0"]}


def test_a_wheelhouse_for_python_311_is_refused_for_a_312_environment(tmp_path):
    ok, res = run_module(tmp_path, dict(BLACKWELL, python_version="3.12", wheelhouse="/srv/wh",
                                        wheelhouse_files=[CU128_311]))
    assert not ok
    assert "/srv/wh holds torch 2.11.0+cu128 for Python 3.11 only, none for Python 3.12" in res["msg"]
    assert ("pip download --only-binary=:all: --no-deps --python-version 3.12 --platform manylinux_2_28_x86_64 "
            "-d /srv/wh 'torch==2.11.0+cu128' --index-url https://download.pytorch.org/whl/cu128") in res["msg"]
    assert res["problems"][0]["code"] == "wheelhouse_python"


@pytest.mark.parametrize("args", [
    dict(BLACKWELL, python_version="3.11", wheelhouse_files=[CU128_311]),
    {"torch_version": "2.13.0", "variant": "cpu", "python_version": "3.11", "wheelhouse_files": [CPU_WHEEL]},
])
def test_a_wheel_for_the_targets_python_passes(tmp_path, args):
    ok, res = run_module(tmp_path, args)
    assert ok, res.get("msg")
