"""Fixtures of the end-to-end suite: the demo fleet after `make demo`'s site.yml, judged from outside.

The suite looks at what a renter finds after one site.yml run on the five demo hosts of
scripts/demo-fleet: the report's statuses and checklist, the hosts themselves over SSH (sshd's
answer, the state folder, the exporter's textfile checked by promtool), Jupyter through an SSH
tunnel with a real client, and a second site.yml run. It does not start the fleet: `make e2e`
runs `make demo` first. Left out of a run (deselected) unless named on the command line or GPUFLEET_E2E=1.
"""

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "fleet"))

import demolib  # noqa: E402 - after the sys.path lines above
import fleetlib  # noqa: E402


def pytest_collection_modifyitems(config, items):
    fleetlib.suite_runs(config, items, HERE, "GPUFLEET_E2E",
                        "the end-to-end suite needs the demo fleet: run it with make e2e")


@pytest.fixture(scope="session")
def demo_hosts():
    if not demolib.INVENTORY.exists() or not demolib.KEY.exists():
        pytest.fail("no demo fleet (%s): run make demo first" % demolib.INVENTORY.relative_to(demolib.ROOT))
    return demolib.hosts()


@pytest.fixture(scope="session")
def report():
    """fleet.json of the run make demo just did, with the run folder's path."""
    data, folder = demolib.load_report()
    return {"json": data, "folder": folder.resolve(), "hosts": {h["host"]: h for h in data["hosts"]}}


@pytest.fixture(scope="session")
def promtool():
    path = shutil.which("promtool")
    if not path:
        pytest.fail("promtool is missing (apt-get install prometheus; .ci/run installs it)")
    return path
