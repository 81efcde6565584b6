"""The one pip source policy of every role (roles/gpufleet_common/filter_plugins/gpufleet_common.py)."""
import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "roles" / "gpufleet_common" / "filter_plugins" / "gpufleet_common.py"


@pytest.fixture(scope="module")
def pip_env():
    spec = importlib.util.spec_from_file_location("gpufleet_common_filters", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()["gpufleet_pip_env"]


BASE = {"PIP_ONLY_BINARY": ":all:", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def test_a_wheelhouse_is_the_only_source_even_with_an_index(pip_env):
    env = pip_env("/opt/gpufleet/wheelhouse/torch", "https://download.pytorch.org/whl/cu121")
    assert env == dict(BASE, PIP_NO_INDEX="1", PIP_FIND_LINKS="/opt/gpufleet/wheelhouse/torch")


def test_an_index_without_a_wheelhouse(pip_env):
    assert pip_env("", "https://pypi.example/simple") == dict(BASE, PIP_INDEX_URL="https://pypi.example/simple")


def test_neither_keeps_the_hosts_pip_configuration(pip_env):
    assert pip_env("") == BASE
    assert pip_env(None, None) == BASE


def test_isolated_and_hashes(pip_env):
    env = pip_env("", "https://download.pytorch.org/whl/cu121", isolated=True, require_hashes=True)
    assert env["PIP_CONFIG_FILE"] == "/dev/null" and env["PIP_REQUIRE_HASHES"] == "1"
    assert "PIP_CONFIG_FILE" not in pip_env("") and "PIP_REQUIRE_HASHES" not in pip_env("")
