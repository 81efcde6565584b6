"""The renter's own torch in fleet.html and fleet.md (issue 41): every environment with torch the pre-check found on a
host, with its build, the judged one first with why it was chosen; nothing for a host without such a record.

The sample fleet (tests/fixtures/report/) with pre-check records (playbooks/check.yml's ``gpu_check``, in the shape
tests/unit/test_renter_torch.py gets from scripts/find-python on the real layouts) added to three of its hosts.
"""

import copy
from html.parser import HTMLParser

import pytest
from gpufleet.controller import report
from gpufleet.controller.report import cells

from tests.unit.test_report import FIXTURES, INVENTORY, NOW

STEPS = {"connect": 0.4, "environment": 3.1}
LOGIN = "root's interactive login shell (/bin/bash -lic)"


def _check(envs, judged, why):
    return {"deadline_s": 60, "steps": STEPS, "total_s": 3.2, "torch_python": judged or "",
            "pythons_tried": [e["python"] for e in envs], "environments": envs,
            "judged": {"python": judged, "why": why}, "failed_step": None, "timed_out": False, "probe_run": False}


def _env(python, kind, torch):
    return {"python": python, "kind": kind, "version": "3.11.9", "torch": torch, "nvml": torch is not None}


# gpu-h100-01, a pytorch/pytorch image: torch in /opt/conda (judged: the login shell's python has none) and in a venv.
CONDA = _check([_env("/usr/bin/python3", "login_shell", None), _env("/opt/conda/bin/python", "conda", "2.5.1+cu121"),
                _env("/venv/main/bin/python", "venv", "2.8.0+cu128")], "/opt/conda/bin/python",
               LOGIN + " runs /usr/bin/python3, without torch; the first environment with torch in the search order is "
               "the conda Python /opt/conda/bin/python (torch 2.5.1+cu121); torch also in /venv/main/bin/python")
# demo-sim-07, RunPod's layout: the login shell's python3 has torch, listed after a conda one: judged all the same.
LOGIN_SHELL = _check([_env("/opt/conda/bin/python", "conda", "2.3.0+cu118"),
                      _env("/usr/bin/python3", "login_shell", "2.4.0+cu121")], "/usr/bin/python3",
                     LOGIN + " runs /usr/bin/python3, with torch 2.4.0+cu121: the renter's own torch")
# cpu-box-09: a pre-check record whose Pythons have no torch; gpu-4090-03: a record older than issue 41 (no list).
NO_TORCH = _check([_env("/usr/bin/python3", "login_shell", None)], None, "no torch in any of the 1 Python(s)")
OLD = {k: v for k, v in _check([], "/usr/bin/python3", "x").items() if k not in ("environments", "judged")}

RECORDS = {"gpu-h100-01": CONDA, "demo-sim-07": LOGIN_SHELL, "cpu-box-09": NO_TORCH, "gpu-4090-03": OLD}
HEADERS = ["host", "environment", "kind", "torch", "judged"]
# What the renter must read, in this order (the judged one first on each host).
EXPECTED = [
    ["demo-sim-07", "/usr/bin/python3", "login shell's python", "2.4.0+cu121", "judged: the login shell's python"],
    ["demo-sim-07", "/opt/conda", "conda", "2.3.0+cu118", ""],
    ["gpu-h100-01", "/opt/conda", "conda", "2.5.1+cu121", "judged: the login shell's /usr/bin/python3 has no torch"],
    ["gpu-h100-01", "/venv/main", "venv", "2.8.0+cu128", ""],
]


@pytest.fixture(scope="module")
def fleet():
    results = report.load_results(FIXTURES, inventory_hosts=INVENTORY)
    for r in results:
        if r.get("host") in RECORDS:
            r["check"] = copy.deepcopy(RECORDS[r["host"]])
    return report.summarize(results, now=NOW)


class _Sections(HTMLParser):
    """Per <h2> heading: its tables' rows, each (the tr's class, [cell text], {cell index: title})."""

    def __init__(self):
        super().__init__()
        self.sections, self._heading, self._row, self._cell = {}, None, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "h2":
            self._heading = []
        elif tag == "tr":
            self._row = (attrs.get("class"), [], {})
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
            if attrs.get("title"):
                self._row[2][len(self._row[1])] = attrs["title"]

    def handle_endtag(self, tag):
        if tag == "h2" and self._heading is not None:
            self._current = " ".join("".join(self._heading).split())
            self.sections[self._current] = []
            self._heading = None
        elif tag in ("td", "th") and self._cell is not None:
            self._row[1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self.sections:
                self.sections[self._current].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._heading is not None:
            self._heading.append(data)
        elif self._cell is not None:
            self._cell.append(data)


def _html_sections(page):
    parser = _Sections()
    parser.feed(page)
    return parser.sections


def _md_table(page, heading):
    """The rows (lists of cells, header first) of the first table under ``## heading``; None without that heading."""
    lines = page.splitlines()
    if "## " + heading not in lines:
        return None
    start = lines.index("## " + heading)
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|---"):
            continue
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split(" | ")])
        elif rows:
            break
    return rows


def test_the_page_lists_each_environment_with_torch_and_marks_the_judged_one(fleet):
    rows = _html_sections(report.to_html(fleet))["Torch environments"]
    assert rows[0][1] == HEADERS
    assert [cells for _cls, cells, _titles in rows[1:]] == EXPECTED
    # The judged row stands out (class judged) and only it; its cell carries find-python's own words as a tooltip.
    assert [cls for cls, _cells, _titles in rows[1:]] == ["judged", None, "judged", None]
    assert rows[3][2] == {4: CONDA["judged"]["why"]} and rows[1][2] == {4: LOGIN_SHELL["judged"]["why"]}
    assert rows[2][2] == {} and rows[4][2] == {}


def test_markdown_lists_each_environment_with_torch_and_names_the_judged_one(fleet):
    rows = _md_table(report.to_markdown(fleet), "Torch environments")
    assert rows[0] == HEADERS
    assert [r + [""] * (5 - len(r)) for r in rows[1:]] == EXPECTED


def test_a_host_without_environments_with_torch_shows_nothing_new(fleet):
    """No record, an old record without the list, and a record whose Pythons have no torch: no row for those hosts,
    and a fleet without any such record has no section at all, in either file."""
    listed = {r[0] for r in EXPECTED}
    assert listed == {"gpu-h100-01", "demo-sim-07"}
    page = report.to_html(fleet)
    assert {cells[0] for _cls, cells, _t in _html_sections(page)["Torch environments"][1:]} == listed
    plain = report.load_results(FIXTURES, inventory_hosts=INVENTORY)
    without = [dict(r, check=copy.deepcopy(RECORDS[r["host"]])) for r in report.load_results(FIXTURES)
               if r.get("host") in ("cpu-box-09", "gpu-4090-03")]
    for results in (plain, without):
        summary = report.summarize(results, now=NOW)
        assert all(h["check"] for h in summary["hosts"]) is (results is without)  # the records were read
        page = report.to_html(summary)
        assert "Torch environments" not in page and "torch-environments" not in page
        hosts = _html_sections(page)["Hosts (%d)" % len(results)]
        assert hosts[0][1][0] == "host" and len(hosts) == len(results) + 1
        md = report.to_markdown(summary)
        assert _md_table(md, "Torch environments") is None and "## Hosts" in md.splitlines()


def test_the_table_is_cut_at_its_row_limit_and_says_so(fleet, monkeypatch):
    monkeypatch.setattr(cells, "ENVIRONMENT_ROWS", 3)
    page = report.to_html(fleet)
    assert [c for _cls, c, _t in _html_sections(page)["Torch environments"][1:]] == EXPECTED[:3]
    assert "3 of 4 environments; fleet.json has every one." in page
    md = report.to_markdown(fleet)
    assert "3 of 4 environments; fleet.json has every one." in md.splitlines()


def test_a_hostile_environment_path_arrives_as_text(fleet):
    evil = copy.deepcopy(fleet)
    h = next(h for h in evil["hosts"] if h["host"] == "gpu-h100-01")
    h["check"]["environments"][1]["where"] = "/opt/<script>alert(1)</script>|x"
    page = report.to_html(evil)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;|x" in page
    rows = _html_sections(page)["Torch environments"]
    assert rows[4][1][1] == "/opt/<script>alert(1)</script>|x"
    md = report.to_markdown(evil)
    assert "<script>alert(1)" not in md and _md_table(md, "Torch environments")[4][1] == (
        "/opt/&lt;script&gt;alert(1)&lt;/script&gt;\\|x")
