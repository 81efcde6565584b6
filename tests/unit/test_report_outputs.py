"""The fleet report's files checked by the tools that consume them.

write_all renders the sample fleet (tests/fixtures/report/ plus an inventory host with no result
file), then:

- fleet.json is validated against docs/schema/fleet.schema.json (jsonschema, draft 2020-12);
- gpufleet.prom is read by ``promtool check metrics`` (Prometheus' own parser and linter);
- fleet.html is opened by headless Chromium, which takes a screenshot and dumps the rendered DOM.

Each check skips with a reason when its tool is missing; CI installs all of them.
"""

import copy
import csv
import io
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from gpufleet.controller import report

from tests.unit.test_report import EXPECTED_STATUS, FIXTURES, INVENTORY, NOW, PARTIAL, _evil_results

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "docs" / "schema" / "fleet.schema.json"
TOOL_TIMEOUT = 60
WIDTH, HEIGHT = 1400, 2000


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    out = tmp_path_factory.mktemp("fleet-report")
    report.write_all(report.load_results(FIXTURES, inventory_hosts=INVENTORY), out, now=NOW)
    return out


@pytest.fixture(scope="module")
def fleet(outdir):
    return json.loads((outdir / report.OUTPUT_FILES["json"]).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- JSON Schema
@pytest.fixture(scope="module")
def validator():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, data):
    return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(top)", e.message)
            for e in validator.iter_errors(data)]


def test_schema_statuses_match_the_report(validator):
    assert validator.schema["$defs"]["status"]["enum"] == list(report.STATUSES)
    actions = validator.schema["$defs"]["action"]["enum"]
    assert set(actions) == {report.ACTION_RETURN, report.ACTION_FIX, report.ACTION_RESTART, report.ACTION_REBOOT,
                            report.ACTION_CHECK, None}
    sources = validator.schema["$defs"]["host"]["properties"]["facts_read_at_source"]["enum"]
    assert sources == list(report.FACTS_TIME_SOURCES)


def test_fleet_json_validates_against_the_schema(validator, fleet):
    assert {h["host"] for h in fleet["hosts"]} == set(INVENTORY)
    assert _errors(validator, fleet) == []


@pytest.mark.parametrize("data", [PARTIAL, _evil_results(), []], ids=["partial", "hostile", "empty"])
def test_partial_hostile_and_empty_input_still_give_a_valid_fleet_json(validator, data):
    assert _errors(validator, json.loads(report.to_json(report.summarize(data, now=NOW)))) == []


def test_fleet_json_with_embedded_results_validates(validator, tmp_path):
    paths = report.write_all(report.load_results(FIXTURES, inventory_hosts=INVENTORY), tmp_path, now=NOW,
                             include_results=True)
    data = json.loads(Path(paths["json"]).read_text(encoding="utf-8"))
    assert len(data["results"]) == len(INVENTORY)
    assert _errors(validator, data) == []


def test_fleet_json_drift_entries_validate(validator, fleet):
    assert len(fleet["totals"]["drift"]) == 3
    assert fleet["totals"]["usual_driver_version"] == "550.90.07"
    assert fleet["check_mode"] is False and fleet["totals"]["version_split"] == []
    assert {h["facts_read_at_source"] for h in fleet["hosts"]} == {"gpu_facts", "record", None}


def test_fleet_json_of_a_check_run_with_a_version_split_validates(validator):
    # --check run; three GPU hosts on three drivers: no majority, one fleet-level line
    results = report.load_results(FIXTURES, inventory_hosts=INVENTORY)
    h100 = next(r for r in results if r["host"] == "gpu-h100-01")
    fleet = []
    for name, driver in (("a", "535.161.08"), ("b", "550.90.07"), ("c", "570.124.06")):
        r = copy.deepcopy(h100)
        r["host"] = name
        r["gpu"]["driver_version"] = driver
        fleet.append(r)
    data = json.loads(report.to_json(report.summarize(fleet, now=NOW, check_mode=True)))
    assert data["check_mode"] is True and len(data["totals"]["version_split"]) == 1
    assert _errors(validator, data) == []


def _set_status(d):
    d["hosts"][0]["status"] = "bogus"


def _bad_host_ok(d):
    d["bad_hosts"][0]["status"] = "ok"


def _drop_totals_gpus(d):
    del d["totals"]["gpus"]


def _drop_top(d):
    del d["bad_hosts"]


def _rename_reasons(d):
    d["hosts"][0]["reason"] = d["hosts"][0].pop("reasons")


def _rename_gpu_key(d):
    gpu = next(h for h in d["hosts"] if h["gpus"])["gpus"][0]
    gpu["memory_mib"] = gpu.pop("memory_total_mib")


def _drop_status_count(d):
    del d["totals"]["hosts_by_status"]["no-gpu"]


def _text_count(d):
    d["totals"]["hosts"] = "8"


def _wrong_schema(d):
    d["schema"] = 2


def _drift_not_info(d):
    d["totals"]["drift"][0]["severity"] = "critical"


def _drop_drift(d):
    del d["totals"]["drift"]


def _drop_check_mode(d):
    del d["check_mode"]


def _facts_time_source_bogus(d):
    d["hosts"][0]["facts_read_at_source"] = "guessed"


def _drop_version_split(d):
    del d["totals"]["version_split"]


def _verdict_bogus(d):
    d["hosts"][0]["verdict"] = "maybe later"


def _drop_verdict(d):
    del d["hosts"][0]["verdict"]


MUTATIONS = {
    "verdict bogus": (_verdict_bogus, "does not match"),
    "verdict missing": (_drop_verdict, "'verdict' is a required property"),
    "status bogus": (_set_status, "'bogus' is not one of"),
    "ok host in bad_hosts": (_bad_host_ok, "should not be valid"),
    "totals.gpus missing": (_drop_totals_gpus, "'gpus' is a required property"),
    "bad_hosts missing": (_drop_top, "'bad_hosts' is a required property"),
    "hosts[].reasons renamed": (_rename_reasons, "'reasons' is a required property"),
    "gpus[].memory_total_mib renamed": (_rename_gpu_key, "'memory_total_mib' is a required property"),
    "hosts_by_status incomplete": (_drop_status_count, "'no-gpu' is a required property"),
    "count as text": (_text_count, "is not of type 'integer'"),
    "schema version": (_wrong_schema, "1 was expected"),
    "drift severity not info": (_drift_not_info, "'info' was expected"),
    "totals.drift missing": (_drop_drift, "'drift' is a required property"),
    "check_mode missing": (_drop_check_mode, "'check_mode' is a required property"),
    "facts_read_at_source bogus": (_facts_time_source_bogus, "'guessed' is not one of"),
    "totals.version_split missing": (_drop_version_split, "'version_split' is a required property"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_schema_rejects_a_broken_fleet_json(validator, fleet, name):
    mutate, message = MUTATIONS[name]
    broken = copy.deepcopy(fleet)
    mutate(broken)
    errors = _errors(validator, broken)
    assert any(message in e for e in errors), errors


# --------------------------------------------------------------------------- promtool
def _promtool():
    tool = shutil.which("promtool")
    if not tool:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return tool


def _check_metrics(path):
    with open(path, "rb") as fh:
        proc = subprocess.run([_promtool(), "check", "metrics"], stdin=fh, capture_output=True, text=True,
                              timeout=TOOL_TIMEOUT, check=False)
    output = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0, output
    # Lint findings print one per line; metric names such as ..._ecc_errors_total are no errors.
    assert [line for line in output.splitlines() if re.search(r"\berror\b", line, re.IGNORECASE)] == []
    return output


def test_promtool_accepts_the_textfile(outdir):
    path = outdir / report.OUTPUT_FILES["prometheus"]
    assert "gpufleet_host_status" in path.read_text(encoding="utf-8")
    assert _check_metrics(path) == ""


def test_promtool_accepts_hostile_and_partial_label_values(tmp_path):
    paths = report.write_all(_evil_results() + PARTIAL, tmp_path, now=NOW)
    _check_metrics(paths["prometheus"])


# --------------------------------------------------------------------------- headless Chromium
def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        tool = shutil.which(name)
        if tool:
            return tool
    pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    return None


def _run_chromium(tmp_path, *args):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(home))
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", "--user-data-dir=%s" % (tmp_path / "profile"),
           "--window-size=%d,%d" % (WIDTH, HEIGHT), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _png_info(data):
    """(width, height, bit depth, colour type, decompressed scanlines) of a PNG; asserts it is well formed."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks = 8, []
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, "bad CRC in %r" % kind
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    return width, height, depth, colour, pixels


class _Rows(HTMLParser):
    """Text of every table cell, row by row."""

    def __init__(self):
        super().__init__()
        self.rows, self._row, self._cell = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_chromium_renders_the_page_with_every_host(outdir, tmp_path):
    url = (outdir / report.OUTPUT_FILES["html"]).as_uri()
    shot = tmp_path / "fleet.png"
    _run_chromium(tmp_path, "--screenshot=%s" % shot, url)
    assert shot.is_file(), "Chromium wrote no screenshot"
    width, height, depth, colour, pixels = _png_info(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    assert depth == 8 and colour in (2, 6)  # 8-bit RGB or RGBA
    channels = 3 if colour == 2 else 4
    assert len(pixels) == height * (1 + width * channels)
    # Whatever the row filters, one flat colour leaves a handful of distinct bytes; text and the
    # coloured status badges leave far more.
    assert len(set(pixels)) > 32, "the screenshot looks like one flat colour"

    dom = _run_chromium(tmp_path, "--dump-dom", url).stdout
    assert "gpufleet fleet report" in dom
    parser = _Rows()
    parser.feed(dom)
    rows = [r for r in parser.rows if len(r) == 12 and r[0] != "host"]  # the "Hosts" table
    by_host = {}
    for row in rows:
        host = row[0][:-len("simulated")].strip() if row[0].endswith("simulated") else row[0]
        by_host[host] = row[1]
    for host, status in EXPECTED_STATUS.items():
        assert by_host.get(host) == status, (host, by_host.get(host))
    for status in report.STATUSES:
        assert re.search(r'class="st st-%s">%s<' % (re.escape(status), re.escape(status)), dom), status
    # The sort script ran (its CSP hash matched): it marks each sortable table and its headers.
    assert dom.count('data-sortable="ready"') == dom.count('class="sortable"') >= 3
    assert 'title="sort by this column"' in dom


def test_chromium_blocks_a_script_whose_hash_does_not_match(outdir, tmp_path):
    page = (outdir / report.OUTPUT_FILES["html"]).read_text(encoding="utf-8")
    assert '"ready"' in report.SORT_SCRIPT
    tampered = tmp_path / "tampered.html"
    # One character of the script changed, the CSP left as it is: the browser must refuse to run it.
    tampered.write_text(page.replace('"ready"', '"readY"'), encoding="utf-8")
    dom = _run_chromium(tmp_path, "--dump-dom", tampered.as_uri()).stdout
    assert "gpufleet fleet report" in dom
    assert "data-sortable=\"" not in dom and "tabindex=" not in dom


_SORT_DRIVER = """
(function () {
  var table = Array.prototype.filter.call(document.querySelectorAll("table.sortable"), function (t) {
    return t.tHead.rows[0].cells.length === 12;
  })[0];
  var th = table.tHead.rows[0].cells[3];
  function column() {
    return Array.prototype.map.call(table.tBodies[0].rows, function (r) { return r.cells[3].textContent; }).join("|");
  }
  th.click();
  document.body.setAttribute("data-asc", column() + "|" + th.getAttribute("aria-sort"));
  th.click();
  document.body.setAttribute("data-desc", column() + "|" + th.getAttribute("aria-sort"));
}());"""


def test_chromium_sorts_the_hosts_table_by_a_clicked_column(outdir, tmp_path):
    page = (outdir / report.OUTPUT_FILES["html"]).read_text(encoding="utf-8")
    # The page's script plus a driver that clicks the "$/h" header twice; the CSP hash is redone
    # for that longer script, the way to_html computes it.
    script = report.SORT_SCRIPT + _SORT_DRIVER
    page = page.replace(report.SORT_SCRIPT, script).replace(report.script_hash(), report.script_hash(script))
    test_page = tmp_path / "sort.html"
    test_page.write_text(page, encoding="utf-8")
    dom = _run_chromium(tmp_path, "--dump-dom", test_page.as_uri()).stdout
    asc = re.search(r'data-asc="([^"]*)"', dom).group(1).split("|")
    desc = re.search(r'data-desc="([^"]*)"', dom).group(1).split("|")
    prices = ["$0.10", "$0.39", "$0.42", "$1.10", "$1.72", "$7.16", "$23.92"]
    assert asc == ["", ""] + prices + ["ascending"]
    assert desc == prices[::-1] + ["", "", "descending"]


# --------------------------------------------------------------------------- the renter's checklist
@pytest.fixture(scope="module")
def checklist_summary():
    from tests.unit.test_audit import h100

    results = [r for r in report.load_results(FIXTURES, inventory_hosts=INVENTORY) if r.get("host") != "gpu-h100-01"]
    results.append(h100(ctk="nvidia-container-toolkit\t1.17.4-1\tii \n"))
    return report.summarize(results, now=NOW)


def test_checklist_in_fleet_json_validates(validator, checklist_summary):
    data = json.loads(report.to_json(checklist_summary))
    assert _errors(validator, data) == []
    h = next(x for x in data["hosts"] if x["host"] == "gpu-h100-01")
    assert {k for k, _ in report.CHECK_ITEMS} == set(h["checklist"])  # fleet.json sorts keys
    assert h["checklist"]["security"]["status"] == "fail"
    assert {f["code"] for f in h["checklist"]["security"]["findings"]} >= {"ctk_below_floor", "jupyter_public_plain"}
    unreachable = next(x for x in data["hosts"] if x["host"] == "gpu-unreach-05")
    assert {v["status"] for v in unreachable["checklist"].values()} == {"unknown"}
    # the H100 fails (toolkit below its floor); the CPU host warns (password SSH; its Debian 12 OpenSSH
    # 1:9.2p1-2+deb12u10 has the CVE-2024-6387 fix, DSA-5724-1)
    assert data["totals"]["checklist"]["security"] == {"ok": 0, "warn": 1, "fail": 1, "unknown": len(data["hosts"]) - 2}
    assert h["gpus"][0]["features"].endswith("cu121 wheel: yes")


def test_checklist_in_markdown_html_and_csv(checklist_summary):
    md = report.to_markdown(checklist_summary)
    assert "## Renter's checklist" in md and "### Security findings" in md
    assert "role nvidia_container_toolkit: nvidia_container_toolkit_version" in md
    assert "full fine-tuning (Adam, mixed precision): 16 bytes/param" in md  # the rule next to the answers
    assert "cu121 wheel: yes" in md
    page = report.to_html(checklist_summary)
    assert "<h2>Renter's checklist</h2>" in page and "Security findings (6)" in page  # H100 5, CPU host 1
    assert 'class="fail">fail: NVIDIA container toolkit' in page
    rows = list(csv.DictReader(io.StringIO(report.to_csv(checklist_summary))))
    h100 = [r for r in rows if r["host"] == "gpu-h100-01"]
    assert len(h100) == 8 and h100[0]["check_security"] == "fail" and h100[0]["check_capacity"] == "ok"
    assert h100[0]["check_torch_cuda"] == "ok" and h100[0]["features"].startswith("TF32, BF16, FP8")
    nogpu = next(r for r in rows if r["host"] == "gpu-unreach-05")
    assert nogpu["check_security"] == "unknown"


def test_checklist_tables_are_capped_worst_first(monkeypatch, checklist_summary):
    monkeypatch.setattr(report.cells, "CHECKLIST_ROWS", 2)
    listed, total = report._checklist_hosts(checklist_summary)
    assert total == len(checklist_summary["hosts"]) and len(listed) == 2
    assert listed[0]["host"] == "gpu-a100-02" or any(
        v["status"] == "fail" for v in listed[0]["checklist"].values())
    assert "2 of %d hosts" % total in report.to_markdown(checklist_summary)


# --------------------------------------------------------------------------- the pictures (inline SVG)
class _Svg(HTMLParser):
    """Every element inside an <svg data-picture>: (picture, tag, attributes, enclosing <g>'s attributes)."""

    def __init__(self):
        super().__init__()
        self.svgs, self.elements, self._picture, self._group = {}, [], None, {}
        self.titles = {}
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg":
            self._picture = attrs.get("data-picture")
            self.svgs[self._picture] = attrs
            self.titles[self._picture] = []
        elif self._picture:
            if tag == "g":
                self._group = attrs
            elif tag == "title":
                self._in_title = True
            self.elements.append((self._picture, tag, attrs, self._group))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag == "svg":
            self._picture = None
        elif tag == "g":
            self._group = {}
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._picture and self._in_title:
            self.titles[self._picture].append(data)


def _svg_of(dom):
    parser = _Svg()
    parser.feed(dom)
    return parser


@pytest.fixture(scope="module")
def dom_svg(outdir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chromium-svg")
    dom = _run_chromium(tmp, "--dump-dom", (outdir / report.OUTPUT_FILES["html"]).as_uri()).stdout
    assert "gpufleet fleet report" in dom
    return _svg_of(dom)


def _fractions(fleet):
    """{model: {(host, test)}} of the gate figures in fleet.json, read independently of the report's code."""
    out = {}
    for h in fleet["hosts"]:
        for g in h["gpus"]:
            for e in g["gate"]:
                frac = e["fraction_of_peak"]
                if frac is None and e["measured"] is not None and e["expected"]:
                    frac = e["measured"] / e["expected"]
                if frac is not None:
                    out.setdefault(g["name"] or "unknown GPU", set()).add((h["host"], e["test"]))
    return out


def test_chromium_finds_four_labelled_pictures(dom_svg):
    assert set(dom_svg.svgs) == {"status", "gate", "price", "checklist"}
    for name, attrs in dom_svg.svgs.items():
        assert attrs["role"] == "img" and attrs["aria-label"] and attrs["id"] == "picture-" + name, name
        assert dom_svg.titles[name] and dom_svg.titles[name][0] == attrs["aria-label"], name


def test_the_status_picture_has_one_bar_per_status_present_with_its_count(dom_svg, fleet):
    bars = {a["data-status"]: int(a["data-count"]) for pic, tag, a, _g in dom_svg.elements
            if pic == "status" and tag == "rect" and "data-status" in a}
    present = {k: n for k, n in fleet["totals"]["hosts_by_status"].items() if n}
    assert bars == present and len(present) == 5  # the sample fleet has every status but "unknown"
    assert sum(bars.values()) == len(fleet["hosts"])


def test_the_gate_picture_has_one_mark_per_host_and_test_of_each_model(dom_svg, fleet):
    expected = _fractions(fleet)
    assert expected  # the sample fleet has gate figures (H100, RTX 4090)
    marks = {}
    for pic, tag, a, g in dom_svg.elements:
        if pic == "gate" and tag == "circle":
            marks.setdefault(g["data-model"], set()).add((a["data-host"], g["data-test"]))
    assert marks == expected
    # the failed gate (the 4090's h2d on a x4 riser) is drawn as a failure
    fails = [(g["data-model"], a["data-host"]) for pic, tag, a, g in dom_svg.elements
             if pic == "gate" and tag == "circle" and a["class"] == "m-fail"]
    assert fails == [("NVIDIA GeForce RTX 4090", "gpu-4090-03")]


def test_the_price_picture_has_one_bar_per_priced_measured_host_cheapest_first(dom_svg, fleet):
    priced = sorted((h["price_per_hour"] / h["measured_tflops"], h["host"]) for h in fleet["hosts"]
                    if h["price_per_hour"] is not None and h["measured_tflops"])
    bars = [g["data-host"] for pic, tag, a, g in dom_svg.elements if pic == "price" and tag == "rect"]
    assert bars == [host for _v, host in priced] and len(bars) == 2


def test_the_checklist_grid_has_a_cell_per_host_and_item_coloured_by_status(dom_svg, fleet):
    cells = [(g["data-host"], a["data-item"], a["data-status"]) for pic, tag, a, g in dom_svg.elements
             if pic == "checklist" and tag == "rect"]
    shown = min(len(fleet["hosts"]), report.pictures.GRID_ROWS)
    assert len(cells) == shown * len(report.CHECK_ITEMS)
    by_host = {h["host"]: h["checklist"] for h in fleet["hosts"]}
    for host, item, status in cells:
        assert status == by_host[host][item]["status"], (host, item)
    assert "%d of %d host(s) shown" % (shown, len(fleet["hosts"])) in dom_svg.svgs["checklist"]["aria-label"]


def test_the_checklist_grid_is_capped_and_says_so(monkeypatch, checklist_summary):
    monkeypatch.setattr(report.pictures, "GRID_ROWS", 3)
    svg = _svg_of(report.to_html(checklist_summary))
    rows = {g["data-host"] for pic, tag, a, g in svg.elements if pic == "checklist" and tag == "rect"}
    assert len(rows) == 3
    assert "3 of %d host(s) shown" % len(checklist_summary["hosts"]) in svg.svgs["checklist"]["aria-label"]


def test_host_text_in_the_pictures_arrives_escaped_in_chromium(tmp_path):
    page = tmp_path / "evil.html"
    page.write_text(report.to_html(report.summarize(_evil_results(), now=NOW)), encoding="utf-8")
    dom = _run_chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert dom.count("<script") == 1  # the sort script only: no host text became an element
    svg = _svg_of(dom)
    titles = " ".join(" ".join(t) for t in svg.titles.values())
    assert '<script>alert("x")</script>' in titles  # as text, in the gate mark's title
    models = {g["data-model"] for pic, tag, a, g in svg.elements if pic == "gate" and tag == "circle"}
    assert models == {'<script>alert("x")</script>'}
    md = report.to_markdown(report.summarize(_evil_results(), now=NOW))
    assert "<script" not in md and "&lt;script&gt;" in md


def test_without_gate_figures_the_page_says_why_there_is_no_gate_or_price_picture(fleet):
    # fleet has measured gate figures: the pictures, no note
    html = report.to_html(fleet)
    assert 'data-picture="gate"' in html and 'id="no-gate-figures"' not in html
    bare = report.summarize([{"host": "h", "reachable": True, "failed": False, "gate": None, "price_per_hour": 2.0,
                              "gpu": {"source": "nvml", "gpu_count": 1, "gpus": [{"index": 0, "name": "NVIDIA H100"}],
                                      "health": {"status": "ok", "findings": []}}}])
    html = report.to_html(bare)
    assert 'data-picture="gate"' not in html and 'data-picture="price"' not in html
    assert 'id="no-gate-figures"' in html and "playbooks/gate.yml" in html


def test_the_report_says_which_ansible_made_it(tmp_path, validator):
    """scripts/fleet-report --ansible-core (report.yml passes ansible_version.full): fleet.json records it with the
    controller's Python as produced_by, fleet.md and fleet.html name both on their first line; without it (a report
    made outside a playbook) neither says anything."""
    import platform
    import runpy

    cli = runpy.run_path(str(ROOT / "scripts" / "fleet-report"))["main"]
    for given, out in ((["--ansible-core", "2.19.14"], tmp_path / "with"), ([], tmp_path / "without")):
        assert cli([str(FIXTURES), "--out", str(out)] + given) == 0
        data = json.loads((out / "fleet.json").read_text(encoding="utf-8"))
        assert _errors(validator, data) == []
        md, html = (out / "fleet.md").read_text(), (out / "fleet.html").read_text()
        if given:
            python = platform.python_version()
            assert data["produced_by"] == {"ansible_core": "2.19.14", "python": python}
            line = ", by ansible-core 2.19.14 (Python %s)." % python
            assert line in md and line in html
        else:
            assert "produced_by" not in data and "by ansible-core" not in md + html
