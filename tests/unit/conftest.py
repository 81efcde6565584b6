"""Shared fixtures of the unit tests."""

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="session")
def load_script():
    """load_script("bench-fleet"): a scripts/ file with no .py suffix, imported as a module (main() not run)."""

    def load(name):
        module_name = name.replace("-", "_")
        loader = importlib.machinery.SourceFileLoader(module_name, str(SCRIPTS / name))
        spec = importlib.util.spec_from_loader(module_name, loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module

    return load
