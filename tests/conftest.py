"""Every pytest run of the project: skips only for the reasons in tests/skips.py when GPUFLEET_STRICT=1
(make test, make unit, make fleet-tests, make e2e set it), and a list of the skips taken at the end of every run."""

import os
from collections import defaultdict

import pytest

from tests import skips

STRICT_ENV = "GPUFLEET_STRICT"
_TAKEN = defaultdict(list)  # skip reason -> node ids


def _strict():
    return os.environ.get(STRICT_ENV) == "1"


def _judge(report):
    """Record a skipped report; under GPUFLEET_STRICT=1 turn a skip with no allowed reason into a failure."""
    if not report.skipped or hasattr(report, "wasxfail") or not isinstance(report.longrepr, tuple):
        return
    why = skips.clean(report.longrepr[2])
    _TAKEN[why].append(report.nodeid)
    if _strict() and skips.allowed(why) is None:
        report.outcome = "failed"
        report.longrepr = (
            "skipped for a reason make test does not allow: %s\n"
            "%s=1 (make test, unit, fleet-tests, e2e) runs every check or fails. Install what is named above "
            "(scripts/lib.sh ensure_test_tools installs promtool, Chromium and the other tools as root on Debian; "
            "scripts/bootstrap the venv). The only skips allowed are in tests/skips.py: %s."
            % (why, STRICT_ENV, ", ".join(skips.ALLOWED)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _judge(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _judge(outcome.get_result())


def pytest_terminal_summary(terminalreporter):
    for why, count in skips.DESELECTED.items():
        terminalreporter.write_line("left out: %d test(s), %s" % (count, why))
    if not _TAKEN:
        return
    count = sum(len(ids) for ids in _TAKEN.values())
    terminalreporter.section("skips taken: %d (allowed reasons: tests/skips.py)" % count, sep="-")
    for why, ids in sorted(_TAKEN.items(), key=lambda kv: -len(kv[1])):
        key = skips.allowed(why)
        verdict = ("allowed (%s)" % key) if key else ("FAILED (not allowed, %s=1)" % STRICT_ENV if _strict()
                                                      else "not allowed under make test")
        terminalreporter.write_line("%3d x %s: %s" % (len(ids), verdict, why))
        terminalreporter.write_line("      e.g. %s" % ids[0])
