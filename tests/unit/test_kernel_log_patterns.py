"""The kernel-log pattern table of kmsg: every row's real sample, and the multi-line probe message in the
framings it is read in (dmesg, journalctl -k, rsyslog's kern.log/syslog lines)."""

from pathlib import Path

import pytest
from gpufleet.controller import doctor_page
from gpufleet.host.system import kmsg

from tests.unit.doubles import fixture_bytes

DATA = Path(__file__).resolve().parent / "data" / "kernel-log"
ROWS = kmsg.KERNEL_LOG_PATTERNS

# What each row's sample must give: Xid rows (xid, pci, pid, process); "fallen" rows (79, pci); message rows
# their nvrm_messages code. A row added to the table without an entry here fails test_every_row_is_expected.
EXPECTED = {
    "xid_mig": (94, "0000:01:00", 7194, None),
    "xid_pid_unknown": (79, "0000:5d:00", None, None),
    "xid_pid_name": (31, "0000:01:00", 14292, "python"),
    "xid_pid": (63, "0000:10:1c", 1896, None),
    "xid_plain": (120, "0000:02:00", None, None),
    "xid_no_pci_prefix": (31, "0000:01:00", None, None),
    "fallen_gpu_dev": (79, "0000:5d:00"),
    "fallen_gpu_at_legacy": (79, "0000:01:00"),
    "fallen_probe_multiline": (79, "0000:b3:00"),
    "api_mismatch": "api_mismatch",
    "rm_init_adapter_failed": "rm_init_adapter_failed",
    "rm_init_adapter_failed_minor": "rm_init_adapter_failed",
    "no_adapter_probed": "no_adapter_probed",
    "probe_not_called": "no_adapter_probed",
    "gsp_firmware_load_failed": "gsp_firmware_missing",
    "gsp_firmware_missing": "gsp_firmware_missing",
    "gsp_rpc_rate_limited": "gsp_rpc_rate_limited",
}


def data(name):
    return (DATA / name).read_text()


def parse(text):
    return kmsg.parse_kernel_log(text, "test")


def lost(x):
    return [(e["xid"], e["pci"], bool(e.get("derived"))) for e in x["events"]]


def test_every_row_is_expected():
    forms = [r["form"] for r in ROWS]
    assert len(forms) == len(set(forms))
    assert set(forms) == set(EXPECTED)


@pytest.mark.parametrize("row", ROWS, ids=[r["form"] for r in ROWS])
def test_row_has_a_real_sample_with_its_source(row):
    assert row["sample"].strip()
    assert row["source"].startswith("https://") and row["driver"]
    assert row["kind"] in ("xid", "fallen", "fallen_multiline", "message")
    assert (row["xid"] is None) == (row["kind"] == "message") == (row["code"] is not None)
    assert (row["pci"] is None) == (row["kind"] == "message")
    first = row["sample"].splitlines()[0].split("#012")[0]
    assert kmsg.match_row(first)[0] is row, "the sample's first line is taken by an earlier row"


@pytest.mark.parametrize("row", ROWS, ids=[r["form"] for r in ROWS])
def test_row_sample_through_the_parser(row):
    x = parse(row["sample"])
    want = EXPECTED[row["form"]]
    if row["kind"] == "message":
        assert x["events"] == [] and x["total"] == 0
        assert [(m["code"], m["count"]) for m in x["nvrm_messages"]] == [(want, 1)]
        return
    assert x["nvrm_messages"] == [] and x["total"] == 1 and len(x["events"]) == 1
    ev = x["events"][0]
    assert (ev["xid"], ev["pci"]) == want[:2]
    assert ev["severity"] == kmsg.xid_class(want[0])["severity"]
    assert set(ev) >= {"xid", "pci", "pid", "process", "text", "severity", "name", "line"}
    if row["kind"] == "xid":
        assert "derived" not in ev and (ev["pid"], ev["process"]) == want[2:]
        assert ev["line"] == row["sample"].strip()
    else:
        assert ev["derived"] is True and ev["xid"] == row["xid"] == 79
        assert ev["pid"] is None and ev["process"] is None
        assert ev["line"] == "\n".join(s.rstrip() for s in row["sample"].splitlines()).strip()


# ----------------------------------------------------------------------------- the multi-line probe message
def probe_lines(text):
    return [s for s in text.splitlines() if "NVRM" in s and ("The NVIDIA GPU" in s or "installed in this" in s
                                                             or "not responding to commands" in s)]


def test_multiline_in_dmesg():
    text = data("nvsentinel-155_570.158.01-open_dmesg_probe-fallen.log")
    x = parse(text)
    assert x["counts"] == {"79": 1} and x["counts_by_pci"] == {"79@0000:b3:00": 1}
    ev = x["events"][0]
    assert ev["severity"] == "critical" and ev["derived"] is True
    assert ev["line"] == "\n".join(probe_lines(text))
    assert ev["line"].startswith("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n")
    assert ev["line"].endswith("NVRM: fallen off the bus and is not responding to commands.")
    assert x["nvrm_messages"] == []


def test_multiline_in_journalctl_k():
    text = data("gpud-pr1209_b200_journalctl-k_probe-fallen.log")
    x = parse(text)
    assert lost(x) == [(79, "0000:18:00", True)]
    line = x["events"][0]["line"]
    assert line.count("\n") == 2 and "kernel: NVRM: The NVIDIA GPU 0000:18:00.0" in line
    assert "(PCI ID: 10de:2901) installed in this system has" in line and "probe of" not in line


def test_multiline_in_kern_log_framing():
    # rsyslog (imklog) writes each line of the record with the full prefix; /var/log/kern.log is the kern.*
    # part of the same lines, /var/log/syslog (this recording) all of them.
    text = data("nolebase-gpu-k8s_h100_525.125.06_syslog_probe-fallen.log")
    x = parse(text)
    assert lost(x) == [(79, "0000:5d:00", True)]
    assert x["events"][0]["line"].count("[17257.355375] NVRM:") == 3
    assert [(m["code"], m["count"]) for m in x["nvrm_messages"]] == [("gsp_firmware_missing", 2)]
    # the same text read back by the kernel-log reader as /var/log/kern.log
    got = kmsg.read_kernel_log(lambda argv: None, read_tail=lambda path, limit: text)
    assert got["source"] == "/var/log/kern.log" and parse(got["text"])["counts"] == {"79": 1}


@pytest.mark.parametrize("name", ["nvsentinel-155_570.158.01-open_dmesg_probe-fallen.log",
                                  "nolebase-gpu-k8s_h100_525.125.06_syslog_probe-fallen.log"])
def test_multiline_interleaved_with_other_kernel_lines(name):
    text = data(name)
    head, more, last = probe_lines(text)
    other = "[14387.511008] nvidia_uvm: module uses symbols from proprietary module nvidia, inheriting taint."
    other_nvrm = "[ 4254.197854] NVRM: GPU Board Serial Number: 1653923026510"
    for mixed in ([head, other, more, other, last], [head, other_nvrm, more, last], [head, other, last]):
        x = parse("\n".join(mixed) + "\n")
        pci = kmsg.normalize_pci(head.split("The NVIDIA GPU ")[1])
        assert lost(x) == [(79, pci, True)], mixed
        assert x["events"][0]["line"] == "\n".join(s for s in mixed if s in (head, more, last))


def test_multiline_first_line_missing_still_counts():
    _head, more, last = probe_lines(data("nvsentinel-155_570.158.01-open_dmesg_probe-fallen.log"))
    x = parse(more + "\n" + last + "\n")
    assert lost(x) == [(79, None, True)]


def test_multiline_first_line_too_far_away_is_not_joined():
    head, more, last = probe_lines(data("nvsentinel-155_570.158.01-open_dmesg_probe-fallen.log"))
    filler = ["[14387.511008] nvidia_uvm: module uses symbols from proprietary module nvidia, inheriting taint."]
    x = parse("\n".join([head, more] + filler * (kmsg.PROBE_WINDOW + 1) + [last]))
    assert lost(x) == [(79, None, True)]


def test_multiline_on_one_line():
    # log shippers that flatten a multi-line record into one line
    head, more, last = probe_lines(data("nvsentinel-155_570.158.01-open_dmesg_probe-fallen.log"))
    x = parse(" ".join(s.strip() for s in (head, more, last)))
    assert lost(x) == [(79, "0000:b3:00", True)]


def test_not_supported_message_is_not_the_fallen_message():
    # NVIDIA/open-gpu-kernel-modules#322: the other message that starts with "The NVIDIA GPU ..."
    text = ("[ 1157.046099] NVRM: The NVIDIA GPU 0000:af:00.0 (PCI ID: 10de:1db5)\n"
            "               NVRM: installed in this system is not supported by open\n"
            "               NVRM: nvidia.ko because it does not include the required GPU\n"
            "               NVRM: System Processor (GSP).\n")
    assert kmsg.match_row(text.splitlines()[0]) == (None, None)
    assert parse(text)["events"] == []


# ----------------------------------------------------------------------------- one GPU, several forms
def test_xid_79_and_both_fallen_forms_of_one_gpu_count_once():
    # one host, one GPU: the Xid 79 line and "GPU ...: GPU has fallen off the bus." at 4254 s, the probe
    # message after the module was loaded again at 14387 s
    x = parse(data("nolebase-gpu-k8s_h100_525.125.06_dmesg_xid79-then-probe-fallen.log"))
    assert x["counts"] == {"79": 1} and x["counts_by_pci"] == {"79@0000:5d:00": 1}
    ev = x["events"][0]
    assert "derived" not in ev and ev["text"] == "GPU has fallen off the bus."
    assert ev["line"].startswith("[ 4254.197860] NVRM: Xid (PCI:0000:5d:00): 79")
    assert [(m["code"], m["count"]) for m in x["nvrm_messages"]] == [("gsp_firmware_missing", 1)]


def test_the_xid_line_wins_whichever_form_comes_first():
    text = data("nolebase-gpu-k8s_h100_525.125.06_dmesg_xid79-then-probe-fallen.log").splitlines()
    xid_block, probe_block = text[:8], text[8:]
    x = parse("\n".join(probe_block + xid_block))
    assert lost(x) == [(79, "0000:5d:00", False)]
    assert x["events"][0]["pid"] is None and "Xid (PCI:0000:5d:00): 79" in x["events"][0]["line"]


def test_xid_79_and_gpu_fallen_line_in_journal_count_once():
    x = parse(data("ogkm-1010_rtx5070ti_journal_xid79-and-gpu-fallen.log"))
    assert lost(x) == [(79, "0000:01:00", False)]
    assert (x["events"][0]["pid"], x["events"][0]["process"]) == (6755, "vivaldi-bin")


def test_a_form_seen_again_is_a_new_event():
    # the probe message each time the module is loaded (14387 s in dmesg, 17257 s in syslog); like the
    # repeated legacy line of Bumblebee-Project/Bumblebee#554 (two events there as well)
    dmesg = data("nolebase-gpu-k8s_h100_525.125.06_dmesg_xid79-then-probe-fallen.log")
    syslog = data("nolebase-gpu-k8s_h100_525.125.06_syslog_probe-fallen.log")
    x = parse(dmesg + syslog)
    assert lost(x) == [(79, "0000:5d:00", False), (79, "0000:5d:00", True)]


def test_other_gpus_are_not_merged():
    a = parse(data("nvsentinel-155_570.158.01-open_dmesg_probe-fallen.log")
              + data("ogkm-1010_rtx5070ti_journal_xid79-and-gpu-fallen.log"))
    assert a["counts_by_pci"] == {"79@0000:b3:00": 1, "79@0000:01:00": 1}


def test_a_new_boot_starts_over():
    banner = fixture_bytes("kernel_logs", "gpud_535.129.03_boot_dmesg.log").decode().splitlines()[2]
    assert "Linux version " in banner
    xid_block = data("nolebase-gpu-k8s_h100_525.125.06_dmesg_xid79-then-probe-fallen.log").splitlines()[:8]
    probe = data("nolebase-gpu-k8s_h100_525.125.06_syslog_probe-fallen.log")
    x = parse("\n".join(xid_block + [banner]) + "\n" + probe)
    assert lost(x) == [(79, "0000:5d:00", False), (79, "0000:5d:00", True)]
    assert parse("\n".join(xid_block) + "\n" + probe)["counts"] == {"79": 1}


def test_doctor_sees_xid_79_from_the_probe_message_alone():
    from gpufleet.host.doctor import match_cuda as doctor_match_cuda
    x = parse(data("gpud-pr1209_b200_journalctl-k_probe-fallen.log"))
    assert doctor_match_cuda.m_xid_79({"xid_counts": {int(k): n for k, n in x["counts"].items()},
                                       "xid_events": x["events"]})


def test_docs_section_lists_every_row():
    md = doctor_page.kernel_log_patterns_markdown()
    for row in ROWS:
        assert "`%s`" % row["form"] in md and row["source"].split(" ")[0] in md
