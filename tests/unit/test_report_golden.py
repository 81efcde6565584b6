"""Golden outputs of the fleet report: every file scripts/fleet-report writes (fleet.json, fleet.csv, fleet.md,
fleet.html, gpufleet.prom) stays byte-identical to the ones in tests/fixtures/report-golden/<input>/.

Two inputs, each run through scripts/fleet-report's main() in this process:

- ``fixture-fleet``: tests/fixtures/report/ with ``--hosts`` naming its hosts and gpu-never-08 (no file).
- ``demo``: tests/fixtures/report-demo/ (a ``make demo`` run's inputs, README there): ``hosts/``,
  ``--hosts-file hosts.txt``, ``--check-mode`` and ``--history`` (a copy of history.json in a temporary folder;
  a --check run does not record itself in it).

Pinned, nothing normalised: the report's only clock is ``generated_at`` (fleet.json, the "Generated" line of
fleet.md and fleet.html, gpufleet_report_timestamp_seconds in gpufleet.prom). It is pinned through the existing
``now`` parameter: ``report.summarize_folder``, the function the CLI calls, is wrapped to pass a fixed timezone-aware
time (the demo's is that run's own generated_at, so its golden files equal the files that run wrote). The test fails
if the CLI stops calling it. No age is computed from "now"; paths do not reach the files (results are named by file
name); the fleets are too small for write_all's forked workers, which write the same bytes anyway.

Regenerate after an intended change: ``GPUFLEET_REGEN_GOLDEN=1 .venv/bin/pytest -q tests/unit/test_report_golden.py``
rewrites the golden files with the working tree's code, then fails saying so (it never passes in that mode); review
``git diff tests/fixtures/report-golden`` and rerun without the variable.
"""

import contextlib
import datetime
import difflib
import io
import itertools
import json
import os
import runpy
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from gpufleet.controller import report

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "scripts" / "fleet-report"
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = FIXTURES / "report-golden"
REGEN_ENV = "GPUFLEET_REGEN_GOLDEN"
FILES = ("fleet.csv", "fleet.html", "fleet.json", "fleet.md", "gpufleet.prom")
# Each golden file is stored as its name plus this suffix (fleet.html.golden): expected outputs are data, and the
# suffix keeps code readers (linters, duplicate finders) from taking them for the templates' or renderers' source.
SUFFIX = ".golden"
DIFF_LINES = 80

_UTC = datetime.timezone.utc
_FIXTURE_HOSTS = ("gpu-h100-01", "gpu-a100-02", "gpu-4090-03", "gpu-nodriver-04", "gpu-unreach-05", "gpu-l40s-06",
                  "demo-sim-07", "gpu-never-08", "cpu-box-09")
# name: (results folder, fixed time, extra arguments; "{work}" is a scratch folder holding a copy of history.json)
INPUTS = {
    "fixture-fleet": (FIXTURES / "report", datetime.datetime(2025, 6, 3, 9, 30, tzinfo=_UTC),
                      ["--hosts", ",".join(_FIXTURE_HOSTS)]),
    "demo": (FIXTURES / "report-demo" / "hosts", datetime.datetime(2026, 12, 6, 22, 24, 13, tzinfo=_UTC),
             ["--hosts-file", str(FIXTURES / "report-demo" / "hosts.txt"), "--check-mode",
              "--history", "{work}/history.json"]),
}


@contextlib.contextmanager
def _pinned_clock(now):
    """report.summarize_folder with ``now`` fixed for the block; yields the list of its calls."""
    real, calls = report.summarize_folder, []

    def pinned(*args, **kwargs):
        calls.append(args)
        kwargs["now"] = now
        return real(*args, **kwargs)

    report.summarize_folder = pinned
    try:
        yield calls
    finally:
        report.summarize_folder = real


def render(name, outdir, results=None, cli=CLI):
    """Write input ``name``'s report into ``outdir`` with ``cli`` (scripts/fleet-report) and the pinned clock.

    ``results``: another results folder (the positive control's altered copy)."""
    default_results, now, extra = INPUTS[name]
    saved_path, out = list(sys.path), io.StringIO()
    try:
        with tempfile.TemporaryDirectory() as work, _pinned_clock(now) as calls, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            shutil.copy(FIXTURES / "report-demo" / "history.json", work)
            argv = [str(results or default_results), "--out", str(outdir)] + [a.replace("{work}", work) for a in extra]
            script = runpy.run_path(str(cli), run_name="fleet_report_golden")
            assert script["report"] is report, "the CLI imported another gpufleet.controller.report than this test"
            rc = script["main"](argv)
    finally:
        sys.path[:] = saved_path  # the script puts its module_utils in front
    assert rc == 0, "fleet-report %s exited %s:\n%s" % (" ".join(argv), rc, out.getvalue())
    assert calls, "fleet-report no longer calls report.summarize_folder: pin the clock where it now reads it"
    return Path(outdir)


def differences(expected, actual):
    """None when the two folders hold the same files, byte for byte; else what differs, with a unified diff of the
    first differing file (at most DIFF_LINES lines)."""
    names = [sorted(p.name.removesuffix(SUFFIX) for p in Path(expected).iterdir()),
             sorted(p.name for p in Path(actual).iterdir())]
    if names[0] != names[1]:
        return "different files: expected %s, rendered %s" % tuple(names)
    for name in names[0]:
        want, got = Path(expected, name + SUFFIX).read_bytes(), Path(actual, name).read_bytes()
        if want == got:
            continue
        diff = difflib.unified_diff(want.decode("utf-8", "replace").splitlines(True),
                                    got.decode("utf-8", "replace").splitlines(True),
                                    "expected/" + name, "rendered/" + name, n=2)
        lines = list(itertools.islice(diff, DIFF_LINES + 1))
        more = "\n... (diff cut at %d lines)" % DIFF_LINES if len(lines) > DIFF_LINES else ""
        if not lines:  # same text after decoding: the bytes differ in line endings or invalid UTF-8
            lines = ["(bytes differ: %d expected, %d rendered)\n" % (len(want), len(got))]
        return "%s differs from %s:\n%s%s" % (name, Path(expected, name + SUFFIX), "".join(lines[:DIFF_LINES]), more)
    return None


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_report_files_match_golden(name, tmp_path):
    expected = GOLDEN / name
    if os.environ.get(REGEN_ENV) == "1":
        shutil.rmtree(expected, ignore_errors=True)
        expected.mkdir(parents=True)
        for path in render(name, tmp_path / "regen").iterdir():
            shutil.copyfile(path, expected / (path.name + SUFFIX))
        pytest.fail("%s=1: regenerated %s with the working tree's code; review git diff, rerun without it"
                    % (REGEN_ENV, expected.relative_to(ROOT)))
    problem = differences(expected, render(name, tmp_path / "out"))
    assert problem is None, problem


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_golden_folder_has_every_report_file(name):
    expected = GOLDEN / name
    assert expected.is_dir(), "no golden files for %s: run with %s=1" % (name, REGEN_ENV)
    assert tuple(sorted(p.name for p in expected.iterdir())) == tuple(f + SUFFIX for f in FILES)
    assert all((expected / (f + SUFFIX)).stat().st_size > 0 for f in FILES)
    assert sorted(report.OUTPUT_FILES.values()) == list(FILES)


def test_comparison_reports_a_one_byte_change(tmp_path):
    """Positive control: one GPU's name changed by one byte in a copy of the fixture fleet is reported."""
    results = tmp_path / "results"
    shutil.copytree(FIXTURES / "report", results)
    path = results / "gpu-h100-01.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["gpu"]["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    data["gpu"]["gpus"][0]["name"] = "NVIDIA H100 80GB HBM4"
    path.write_text(json.dumps(data), encoding="utf-8")
    problem = differences(GOLDEN / "fixture-fleet", render("fixture-fleet", tmp_path / "out", results=results))
    assert problem is not None, "a changed GPU name went unnoticed"
    assert "HBM4" in problem and problem.startswith("fleet.csv differs"), problem
    assert len(problem.splitlines()) <= DIFF_LINES + 2


def test_the_checklist_note_counts_the_items():
    """The line above the checklist grid names how many items docs/checklist.md has: a new item moves it."""
    from gpufleet.controller.checklist import item
    from gpufleet.controller.report import cells

    words = {11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen"}
    assert "(the %s items of docs/checklist.md)" % words[len(item.ITEMS)] in cells._CHECK_NOTE
