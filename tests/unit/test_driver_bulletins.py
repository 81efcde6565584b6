"""scripts/driver-bulletins: the driver security table rebuilt from NVIDIA PSIRT's CSAF files (issue 50).

tests/fixtures/driver-bulletins/ holds the bulletins 5614 to 5861 as CSAF 2.0 files in the repository's YEAR/ID/ID.json
layout (trimmed copies of NVIDIA/product-security's files, 5861 written in their shape; PROVENANCE.md there) and one
bulletin of another product (5659, the container toolkit). The committed table, driver_bulletins.json, is what the
script makes of them; driver_bulletins.py reads it and derives the rest (the branch rows, each bulletin's URL).
"""

import contextlib
import functools
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from gpufleet.controller.checklist import driver_bulletins as table

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "driver-bulletins"
CSAF = ROOT / "tests" / "fixtures" / "driver-bulletins"
TABLE = ROOT / "module_utils" / "gpufleet" / "controller" / "checklist" / "driver_bulletins.json"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("driver-bulletins")


def test_the_committed_table_is_what_the_script_makes_of_the_bulletins():
    out = run(CSAF)
    assert out.returncode == 0, out.stderr
    assert out.stdout == TABLE.read_text(encoding="utf-8")
    assert "5659.json fixes no Linux driver branch, skipped" in out.stderr  # the container toolkit's bulletin
    assert run(CSAF, "--check", TABLE).returncode == 0


def test_check_says_when_the_table_differs_from_the_sources(tmp_path):
    edited = tmp_path / "driver_bulletins.json"
    edited.write_text(TABLE.read_text(encoding="utf-8").replace("580.178.04", "580.178.05"), encoding="utf-8")
    out = run(CSAF, "--check", edited)
    assert out.returncode == 1 and "differs from the sources; rerun with --write" in out.stderr
    # sources older than the table (5861 left out) differ as well: the floors would fall back to 5821's
    older = tmp_path / "older"
    for f in CSAF.glob("*/*/*.json"):
        if f.name != "5861.json":
            (older / f.parent.relative_to(CSAF)).mkdir(parents=True, exist_ok=True)
            (older / f.parent.relative_to(CSAF) / f.name).write_bytes(f.read_bytes())
    assert run(older, "--check", TABLE).returncode == 1


def test_write_writes_a_table_the_reader_reads(tmp_path):
    out = tmp_path / "table.json"
    done = run(CSAF / "2025", "--write", out)  # 2025's bulletins alone: as of 5703 (October 2025)
    assert done.returncode == 0 and "wrote %s (4 bulletins, as of 2025-10-09)" % out in done.stderr
    text = out.read_text(encoding="utf-8")
    assert text.endswith("}\n") and list(json.loads(text)) == ["generated_by", "source", "as_of", "bulletins"]
    got = table.table(json.loads(text))
    assert got["AS_OF"] == "2025-10-09" and got["NEWEST_BULLETIN"] == "5703"
    assert got["BRANCHES"]["R580"] == {"fixed": "580.95.05", "bulletin": "5703", "date": "2025-10-09",
                                       "security_fixes": True}
    assert got["BRANCHES"]["R550"]["security_fixes"] is False  # not in 5703 either
    assert run(CSAF / "2025", "--write", out).returncode == 0 and out.read_text(encoding="utf-8") == text


def test_write_needs_no_table_to_write_one(tmp_path):
    """The reader reads its JSON on first use only: the script imports it and writes a missing table."""
    utils = tmp_path / "module_utils"
    for rel in ("gpufleet/__init__.py", "gpufleet/controller/__init__.py", "gpufleet/controller/checklist/__init__.py",
                "gpufleet/controller/checklist/driver_bulletins.py"):
        (utils / rel).parent.mkdir(parents=True, exist_ok=True)
        (utils / rel).write_bytes((ROOT / "module_utils" / rel).read_bytes())
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / SCRIPT.name).write_bytes(SCRIPT.read_bytes())
    missing = utils / "gpufleet" / "controller" / "checklist" / "driver_bulletins.json"
    done = subprocess.run([sys.executable, str(tmp_path / "scripts" / SCRIPT.name), str(CSAF), "--write", str(missing)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert missing.read_text(encoding="utf-8") == TABLE.read_text(encoding="utf-8")


def test_every_bulletin_row_is_read_from_its_file():
    """The fixed Linux versions per bulletin, as NVIDIA's bulletins list them (Data Center "Tesla" rows)."""
    assert [(b["id"], b["date"], b["fixed"]) for b in table.BULLETINS] == [
        ("5614", "2025-01-16", {"R535": "535.230.02", "R550": "550.144.03", "R570": "570.86.15"}),
        ("5630", "2025-04-24", {"R535": "535.247.01", "R550": "550.163.01", "R570": "570.133.07",
                                "R575": "575.51.02"}),
        ("5670", "2025-07-24", {"R535": "535.261.03", "R570": "570.172.08"}),
        ("5703", "2025-10-09", {"R535": "535.274.02", "R570": "570.195.03", "R580": "580.95.05"}),
        ("5747", "2026-01-28", {"R535": "535.288.01", "R570": "570.211.01", "R580": "580.126.09",
                                "R590": "590.48.01"}),
        ("5821", "2026-05-19", {"R535": "535.309.01", "R580": "580.159.03", "R595": "595.71.05"}),
        ("5861", "2026-09-30", {"R580": "580.178.04", "R595": "595.91.07", "R610": "610.57.04",
                                "R615": "615.71.09"}),
    ]
    assert table.BULLETINS[-1]["url"] == "https://github.com/NVIDIA/product-security/blob/main/2026/5861/5861.json"
    assert table.AS_OF == "2026-09-30" and "github.com/NVIDIA/product-security" in table.SOURCE
    assert "url" not in json.loads(TABLE.read_text(encoding="utf-8"))["bulletins"][-1]  # derived, not stored


def _csaf(bid, date, tree, vulnerabilities):
    return json.dumps({"document": {"category": "csaf_security_advisory", "csaf_version": "2.0",
                                    "title": "Security Bulletin: test %s" % bid,
                                    "tracking": {"id": bid, "initial_release_date": date + "T00:00:00Z"}},
                       "product_tree": {"branches": [{"category": "vendor", "name": "NVIDIA", "branches": tree}]},
                       "vulnerabilities": vulnerabilities})


def _arch(name, *rows):
    return {"category": "architecture", "name": name,
            "branches": [{"category": "product_version", "name": fam, "product": {"name": version, "product_id": pid}}
                         for fam, version, pid in rows]}


def test_a_bulletin_row_takes_tesla_the_highest_fix_over_its_cves_and_nothing_else(script):
    tree = [_arch("Linux(R580)", ("GeForce", "580.100.02", "g580"), ("Tesla", "580.100.01", "t580"),
                  ("Tesla", "580.99.09", "t580old"), ("Tesla", "All driver versions prior to 580.100.01", "t580a")),
            _arch("Linux(R570)", ("GeForce", "570.50.01", "g570"), ("GeForce", "570.60.01", "g570b")),
            _arch("Linux(R590)", ("Tesla", "595.10.01", "typo")),           # a version of another branch
            _arch("Linux(R580 vGPU 19)", ("Guest driver", "580.200.01(vGPU 19.9)", "vgpu")),
            _arch("Windows(R580)", ("Tesla", "582.16", "win")),
            _arch("Linux(R610)", ("Tesla", "610.10.01", "t610"))]
    vulns = [{"cve": "CVE-A", "product_status": {"fixed": ["t580old", "g570", "typo", "vgpu", "win", "t580a"]}},
             {"cve": "CVE-B", "product_status": {"fixed": ["g580", "t580", "g570b"]}},
             {"cve": "CVE-C", "remediations": [{"category": "vendor_fix", "product_ids": ["t610"]},
                                               {"category": "workaround", "product_ids": ["g580"]}]}]
    row = script.bulletin("2026/9001/9001.json", _csaf("9001", "2026-11-02", tree, vulns))
    # Tesla over GeForce, the highest over the CVEs; no Tesla row: the highest other row; vendor_fix remediations
    assert row["fixed"] == {"R570": "570.60.01", "R580": "580.100.01", "R610": "610.10.01"}
    assert row["date"] == "2026-11-02" and "year" not in row and table.url(row).endswith("/2026/9001/9001.json")
    late = script.bulletin("2026/9003/9003.json", _csaf("9003", "2027-01-02", tree, vulns))  # filed under 2026
    assert late["year"] == "2026" and table.url(late).endswith("/2026/9003/9003.json")
    assert script.bulletin("x.json", _csaf("9002", "2026-11-03", tree[3:5], vulns)) is None  # no Linux(R...) row
    with pytest.raises(script.SourceError, match="not a CSAF document"):
        script.bulletin("bad.json", json.dumps({"document": {}}))


def test_a_branch_the_newest_bulletin_leaves_out_gets_no_fixes_any_more():
    rows = [{"id": "1", "date": "2025-01-01", "fixed": {"R535": "535.1.01", "R550": "550.5.01"}},
            {"id": "3", "date": "2025-06-01", "fixed": {"R535": "535.9.02", "R580": "580.3.01"}},
            {"id": "2", "date": "2025-03-01", "fixed": {"R535": "535.10.01", "R550": "550.7.01"}}]
    assert table.branches(rows) == {
        "R535": {"fixed": "535.10.01", "bulletin": "2", "date": "2025-03-01", "security_fixes": True},
        "R550": {"fixed": "550.7.01", "bulletin": "2", "date": "2025-03-01", "security_fixes": False},
        "R580": {"fixed": "580.3.01", "bulletin": "3", "date": "2025-06-01", "security_fixes": True},
    }
    assert table.version_key("535.10.01") > table.version_key("535.9.02")  # numbers, not text


def test_sources_that_cannot_be_used_exit_2(tmp_path):
    (tmp_path / "2026" / "1").mkdir(parents=True)
    (tmp_path / "2026" / "1" / "1.json").write_text("not json")
    out = run(tmp_path)
    assert out.returncode == 2 and "not a CSAF document" in out.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(empty).returncode == 2 and "no driver bulletin" in run(empty).stderr
    assert run(tmp_path / "absent.json").returncode == 2
    assert run(CSAF / "2025" / "5659" / "5659.json").returncode == 2  # only a bulletin of another product


@contextlib.contextmanager
def _served(folder):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_urls_are_read_like_files():
    """The CSAF files given as URLs (a local server here: this machine does not reach the internet in tests)."""
    with _served(CSAF) as base:
        urls = ["%s/%s" % (base, f.relative_to(CSAF).as_posix()) for f in sorted(CSAF.glob("*/*/*.json"))]
        out = run(*urls)
        missing = run(base + "/2027/1/1.json")
    assert out.returncode == 0 and out.stdout == TABLE.read_text(encoding="utf-8")
    assert missing.returncode == 2 and "404" in missing.stderr


def test_the_fixture_is_csaf_shaped():
    """Each fixture file has the CSAF 2.0 parts the script reads, as NVIDIA's files have them."""
    for f in sorted(CSAF.glob("*/*/*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        assert doc["document"]["csaf_version"] == "2.0" and doc["document"]["category"] == "csaf_security_advisory"
        assert f.stem == doc["document"]["tracking"]["id"] and f.parts[-3] == doc["document"]["tracking"][
            "initial_release_date"][:4]
        vendor = doc["product_tree"]["branches"][0]
        assert vendor["category"] == "vendor" and vendor["name"] == "NVIDIA"
        assert all(v["product_status"]["fixed"] for v in doc["vulnerabilities"])
