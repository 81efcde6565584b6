"""The report's GPU columns as data (issue 38): one row of report.columns.GPU_COLUMNS is a column of fleet.csv,
fleet.html and fleet.md alike, header and cells; the renderers read the table when they render."""

import csv
import datetime
import io
from pathlib import Path

import pytest
from gpufleet.controller import report
from gpufleet.controller.report import columns

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "report"
NOW = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)


def _free(g):
    total, used = g["memory_total_mib"], g["memory_used_mib"]
    return None if total is None or used is None else total - used


@pytest.fixture
def summary():
    return report.summarize(report.load_results(FIXTURES), now=NOW)


def _gpus(s):
    return [g for h in s["hosts"] for g in h["gpus"]]


def test_a_new_column_row_shows_in_csv_html_and_markdown(summary, monkeypatch):
    row = columns.column("memory_free_mib", "free memory (test)", field=None, csv=_free,
                         cell=lambda h, g, driver: "free %s MiB" % _free(g))
    at = [c.key for c in columns.GPU_COLUMNS].index("memory_used_mib") + 1
    monkeypatch.setattr(columns, "GPU_COLUMNS", columns.GPU_COLUMNS[:at] + [row] + columns.GPU_COLUMNS[at:])
    gpus = [g for g in _gpus(summary) if _free(g) is not None]
    assert gpus, "the fixture fleet has GPUs with memory figures"

    table = list(csv.reader(io.StringIO(report.to_csv(summary))))
    head = table[0]
    assert head[head.index("memory_used_mib") + 1] == "memory_free_mib"
    got = {r[head.index("uuid")]: r[head.index("memory_free_mib")] for r in table[1:] if r[head.index("uuid")]}
    for g in gpus:
        assert got[g["uuid"]] == str(_free(g))
    assert [r["memory_free_mib"] for r in report.csv_rows(summary) if "memory_free_mib" in r]

    page = report.to_html(summary)
    assert "<th>free memory (test)</th>" in page or "free memory (test)</th>" in page
    md = report.to_markdown(summary)
    assert "free memory (test)" in md
    for g in gpus:
        text = "free %s MiB" % _free(g)
        assert text in page and text in md


def test_formats_choose_the_files(summary, monkeypatch):
    row = columns.column("x_page_only", "page only (test)", formats=columns.PAGE,
                         cell=lambda h, g, driver: "page-only-cell")
    monkeypatch.setattr(columns, "GPU_COLUMNS", columns.GPU_COLUMNS + [row])
    assert "x_page_only" not in report.to_csv(summary).splitlines()[0]
    assert "page-only-cell" in report.to_html(summary) and "page-only-cell" in report.to_markdown(summary)


def test_the_table_makes_the_headers_it_replaced():
    assert columns.page_headers(columns.HTML) == columns.page_headers(columns.MD) == [
        "GPU", "model", "memory", "CC", "driver / CUDA", "PCIe gen cur/max", "PCIe width cur/max", "temp",
        "power/limit", "throttle", "ECC", "features (pinned torch wheel)", "health findings"]
    assert columns.csv_columns() == report.CSV_COLUMNS
    assert report.CSV_COLUMNS[:12] == ("host", "host_status", "simulated", "provider", "price_per_hour", "source",
                                       "driver_version", "cuda_driver_version", "facts_read_at",
                                       "facts_read_at_source", "gpu_index", "name")


def _gpu_note(h):
    return "%d GPU(s) on %s" % (len(h["gpus"]), h["host"])


def test_a_new_host_column_row_shows_in_csv_html_and_markdown(summary, monkeypatch):
    row = columns.host_column("gpu_note", "GPU note (test)", cell=_gpu_note, csv=_gpu_note)
    at = [c.key for c in columns.HOST_COLUMNS].index("provider") + 1
    monkeypatch.setattr(columns, "HOST_COLUMNS", columns.HOST_COLUMNS[:at] + [row] + columns.HOST_COLUMNS[at:])
    hosts = summary["hosts"]
    assert any(h["gpus"] for h in hosts) and any(not h["gpus"] for h in hosts)

    table = list(csv.reader(io.StringIO(report.to_csv(summary))))
    head = table[0]
    assert head[head.index("provider") + 1] == "gpu_note"
    assert head.index("gpu_note") < head.index("gpu_index")
    got = {r[head.index("host")]: r[head.index("gpu_note")] for r in table[1:]}
    assert got == {h["host"]: _gpu_note(h) for h in hosts}
    assert [r["gpu_note"] for r in report.csv_rows(summary)] == [_gpu_note(h) for h in hosts for _g in h["gpus"] or [h]]

    page = report.to_html(summary)
    host_table = page[page.index("<h2>Hosts ("):]
    host_table = host_table[:host_table.index("</table>")]
    assert "GPU note (test)</th>" in host_table
    md = report.to_markdown(summary)
    md_table = md[md.index("\n## Hosts\n"):]
    md_table = md_table[:md_table.index("\n\n", len("\n## Hosts\n\n"))]
    assert "| provider | GPU note (test) | $/h |" in md_table
    for h in hosts:
        assert "<td>%s</td>" % _gpu_note(h) in host_table
        assert "| %s |" % _gpu_note(h) in md_table


def test_the_host_table_makes_the_headers_it_replaced():
    assert columns.host_headers(columns.HTML) == [
        "host", "status", "provider", "$/h", "GPUs", "memory", "peak BF16 TFLOPS", "driver / CUDA", "source",
        "facts read at", "reasons", "verdict"]
    assert columns.host_headers(columns.MD) == [
        "host", "status", "provider", "$/h", "GPUs", "driver / CUDA", "facts read at", "reasons", "verdict"]
    assert columns.csv_host() == report.CSV_COLUMNS[:10]
