"""scripts/gpu-smoke reads each module's result from ansible-core's `minimal` callback (JSON results)."""

import pytest


@pytest.fixture(scope="module")
def smoke(load_script):
    return load_script("gpu-smoke")


def test_success_with_pretty_json_and_warnings_before(smoke):
    out = ('[WARNING]: something\nlocalhost | SUCCESS => {\n    "ansible_facts": {"gpu_gate": [{"test": "tf32_gemm"}]},'
           '\n    "changed": false\n}\n')
    assert smoke.parse_result(out) == {"ansible_facts": {"gpu_gate": [{"test": "tf32_gemm"}]}, "changed": False}


def test_failed_and_unreachable_are_failed(smoke):
    failed = smoke.parse_result('localhost | FAILED! => {"msg": "tests: unknown test no_such_test"}\n')
    assert failed == {"msg": "tests: unknown test no_such_test", "failed": True}
    gone = smoke.parse_result('localhost | UNREACHABLE! => {"msg": "no", "unreachable": true}')
    assert gone["failed"] is True


@pytest.mark.parametrize("out", ["", "localhost | SUCCESS => not json", "ERROR! the playbook could not be read",
                                 'localhost | SUCCESS => ["a list"]'])
def test_unreadable_output_is_none(smoke, out):
    assert smoke.parse_result(out) is None
