"""The device runs' raw results and docs/gpu-validation.md (issue 37, "raw results kept").

A device run (scripts/device-smoke on a lent GPU machine) returns its files: gpu_gate.json and gpu_gate-N.json (the
gate module's results, one per --repeat), gpu_facts.json, gpu_doctor.json, summary.json, summary.md, run-status.json
and check.json. They are committed as they came, one folder per call:

    tests/fixtures/device/<date>-<machine>/<call>/gpu_gate.json ...

and the page's table of that call carries a marker line right above it:

    <!-- raw results: tests/fixtures/device/<date>-<machine>/<call> -->

Every marked table is recomputed here from its folder (the medians of each run, and the difference between runs as
scripts/gpu-smoke's summary computes it), and every committed folder must be marked in the page. The H200 runs of
2026-12-04 came back before this rule and their files were never committed: until a lent machine runs again the page
must say so, and the one thing checkable, call 3's difference column, is recomputed from the medians it prints.
"""

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "gpu-validation.md"
DEVICE = ROOT / "tests" / "fixtures" / "device"
MARKER = re.compile(r"^<!-- raw results: (\S+) -->$", re.M)
H200_RUN = DEVICE / "2026-12-04-h200"
NO_RAW = "No raw results of these runs are in the repository"


def fmt(value):
    """A figure as the page prints it: four significant digits, thousands separated (771.1, 4,343, 55.23)."""
    digits = len(str(int(abs(value)))) if abs(value) >= 1 else 1
    return "{:,.{}f}".format(value, max(0, 4 - digits))


def runs_of(folder):
    """The gate results of one call, in run order (gpu_gate.json, gpu_gate-2.json, ...)."""
    files = sorted(folder.glob("gpu_gate*.json"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 1))
    return [json.loads(p.read_text()) for p in files]


def render(runs, units):
    """The page's table of one call: a row per GPU and test with a figure, each run's median, and the difference
    (max - min) / mean between the runs (scripts/gpu-smoke rerun_table's formula)."""
    rows, order = {}, []
    for run in runs:
        for e in (run.get("ansible_facts") or {}).get("gpu_gate") or []:
            if e.get("measured") is None:
                continue
            key = (e["index"], e["test"])
            if key not in rows:
                order.append(key)
                rows[key] = {"unit": e.get("unit") or units.get(e["test"], ""), "values": []}
            rows[key]["values"].append(float(e["measured"]))
    several_gpus = len({i for i, _t in order}) > 1
    out = ["| test | %s |%s" % (" | ".join("run %d" % (n + 1) for n in range(len(runs))),
                                 " difference |" if len(runs) > 1 else "")]
    for index, test in order:
        vals = rows[(index, test)]["values"]
        name = "%s%s (%s)" % ("GPU %d " % index if several_gpus else "", test, rows[(index, test)]["unit"])
        line = "| %s | %s |" % (name, " | ".join(fmt(v) for v in vals))
        if len(runs) > 1:
            mean = sum(vals) / len(vals)
            line += " %.1f %% |" % (100.0 * (max(vals) - min(vals)) / mean)
        out.append(line)
    return out


def table_after(text, start):
    """The markdown table that begins at the first '|' line at or after ``start``: its rows, header first, the
    separator left out, bold marks removed."""
    lines = text[start:].splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    rows = []
    for ln in lines[first:]:
        if not ln.startswith("|"):
            break
        if not re.match(r"^\|[-| ]+\|$", ln):
            rows.append(re.sub(r"\s+", " ", ln.replace("**", "")).strip())
    return rows


def _units():
    from module_utils.gpufleet.host.gate import rules as gate

    return gate.UNITS


def test_each_marked_table_is_recomputed_from_its_raw_results():
    text = DOC.read_text()
    for match in MARKER.finditer(text):
        folder = ROOT / match.group(1)
        runs = runs_of(folder)
        assert runs, "%s names %s, which holds no gpu_gate*.json" % (DOC.name, match.group(1))
        assert table_after(text, match.end()) == render(runs, _units()), match.group(1)


def test_every_committed_device_run_is_marked_in_the_page():
    marked = {m.group(1).rstrip("/") for m in MARKER.finditer(DOC.read_text())}
    calls = {str(p.parent.relative_to(ROOT)) for p in DEVICE.glob("*/*/gpu_gate.json")}
    assert calls <= marked, "device runs committed but not in %s: %s" % (DOC.name, sorted(calls - marked))


def test_the_h200_page_says_where_its_raw_results_are():
    text = DOC.read_text()
    if H200_RUN.is_dir():
        assert NO_RAW not in text and any(m.group(1).startswith(str(H200_RUN.relative_to(ROOT)))
                                          for m in MARKER.finditer(text))
    else:  # the 2026-12-04 files were never committed: the page must not pass its tables off as recomputed
        assert NO_RAW in text
        assert not [m.group(1) for m in MARKER.finditer(text) if "2026-12-04-h200" in m.group(1)]


def _gate_result(medians):
    """A gate module result as scripts/gpu-smoke writes gpu_gate.json (the fields the page reads)."""
    return {"changed": False, "gate": {"passed": True, "tier": "quick"}, "ansible_facts": {"gpu_gate": [
        {"index": 0, "test": test, "measured": value, "unit": unit, "passed": True}
        for test, unit, value in medians]}}


CALL3 = [  # docs/gpu-validation.md, call 3: the medians of each run as the page prints them
    ("bf16_gemm", "TFLOPS", (771.1, 785.2, 787.0, 782.3)), ("tf32_gemm", "TFLOPS", (404.4, 408.6, 408.3, 409.4)),
    ("memory_bandwidth", "GB/s", (4343, 4325, 4333, 4343)), ("h2d_bandwidth", "GB/s", (55.23, 55.10, 55.31, 55.44)),
    ("d2h_bandwidth", "GB/s", (55.23, 55.16, 55.16, 55.32)),
]


def test_call_3s_differences_follow_from_its_medians_in_device_smokes_format(tmp_path, load_script):
    for n in range(4):
        name = "gpu_gate.json" if n == 0 else "gpu_gate-%d.json" % (n + 1)
        (tmp_path / name).write_text(json.dumps(_gate_result([(t, u, v[n]) for t, u, v in CALL3])))
    runs = runs_of(tmp_path)
    assert len(runs) == 4 and runs[1]["ansible_facts"]["gpu_gate"][0]["measured"] == 785.2  # gpu_gate-2 second
    text = DOC.read_text()
    got = render(runs, _units())
    want = table_after(text, text.index("Call 3, `scripts/device-smoke --repeat 4`"))
    assert got == want
    # the same difference as the run's own summary (scripts/gpu-smoke rerun_table, summary.json's "rerun")
    rerun = {r["test"]: r["difference"] for r in load_script("gpu-smoke").rerun_table(runs)}
    for row, (test, _unit, _v) in zip(got[1:], CALL3):
        assert row.endswith("| %.1f %% |" % (100 * rerun[test]))


@pytest.mark.parametrize(("value", "shown"), [(771.06, "771.1"), (4342.8, "4,343"), (55.234, "55.23"),
                                               (0.5, "0.500"), (12345.6, "12,346")])
def test_figures_are_printed_with_four_significant_digits(value, shown):
    assert fmt(value) == shown


def test_a_two_gpu_run_names_each_gpu():
    runs = [{"ansible_facts": {"gpu_gate": [
        {"index": i, "test": "p2p_bandwidth", "measured": 300.0 + i, "unit": "GB/s"} for i in (0, 1)]}}]
    assert render(runs, _units()) == ["| test | run 1 |", "| GPU 0 p2p_bandwidth (GB/s) | 300.0 |",
                                      "| GPU 1 p2p_bandwidth (GB/s) | 301.0 |"]
