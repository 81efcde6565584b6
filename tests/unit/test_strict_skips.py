"""GPUFLEET_STRICT's own hook (tests/conftest.py, tests/skips.py; issue 37): under GPUFLEET_STRICT=1 a skip whose
reason tests/skips.py does not list fails the run, a listed one stays a skip, and without it every skip stays a skip.

Each case is a tiny test file run by a pytest of its own (a subprocess) with the project's conftest loaded as a
plugin (-p tests.conftest), so the hook judges it exactly as it judges the suites; turning the hook off (or making
it lenient) fails these tests."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

CASES = {
    "unlisted skip in a test": "import pytest\n\ndef test_x():\n    pytest.skip('no network today')\n",
    "unlisted skipif marker": "import pytest\n\n@pytest.mark.skipif(True, reason='tool missing')\ndef test_x():\n"
                              "    pass\n",
    "unlisted skip at import": "import pytest\n\npytest.skip('no docker here', allow_module_level=True)\n\n"
                               "def test_x():\n    pass\n",
    "listed skip": "import pytest\nfrom tests import skips\n\ndef test_x():\n"
                   "    pytest.skip(skips.reason('no GPU', 'nvidia-smi finds no device'))\n",
    "xfail": "import pytest\n\n@pytest.mark.xfail(reason='known', strict=True)\ndef test_x():\n    assert False\n",
}


def _pytest(tmp_path, case, strict):
    test = tmp_path / "test_case.py"
    test.write_text(CASES[case])
    env = {k: v for k, v in os.environ.items() if k not in ("GPUFLEET_STRICT", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT)
    if strict is not None:
        env["GPUFLEET_STRICT"] = strict
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                           "--rootdir", str(tmp_path), str(test)],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("case", ["unlisted skip in a test", "unlisted skipif marker", "unlisted skip at import"])
def test_a_skip_not_listed_fails_a_strict_run(tmp_path, case):
    rc, out = _pytest(tmp_path, case, "1")
    assert rc == (2 if case.endswith("at import") else 1), out  # at import: a collection error interrupts the run
    assert "skipped for a reason make test does not allow" in out and "FAILED (not allowed, GPUFLEET_STRICT=1)" in out


@pytest.mark.parametrize("case", ["listed skip", "xfail"])
def test_a_listed_skip_or_an_xfail_passes_a_strict_run(tmp_path, case):
    rc, out = _pytest(tmp_path, case, "1")
    assert rc == 0, out
    assert ("1 skipped" in out and "allowed (no GPU)" in out) if case == "listed skip" else "1 xfailed" in out


@pytest.mark.parametrize("strict", [None, "0"])
def test_outside_strict_mode_a_skip_stays_a_skip_and_is_listed(tmp_path, strict):
    rc, out = _pytest(tmp_path, "unlisted skip in a test", strict)
    assert rc == 0 and "1 skipped" in out, out
    assert "skips taken: 1" in out and "not allowed under make test: no network today" in out
