"""Lines with numbers for every finding (issue 41): each doctor code (why CUDA fails, and the renter's checks) on
evidence that fires it (test_doctor.CASES, test_doctor_renter.RENTER_CASES: every rule has one) becomes a line in
the host's verdict that says what was found in numbers or paths, and no line is a sentence cut mid-word or inside
parentheses ("The torch wheel carries no kernels for this GPU's architecture (e.g" was one)."""

import re

import pytest
from gpufleet.controller import report
from gpufleet.controller.judgement import briefs
from gpufleet.controller.judgement import judge as j
from gpufleet.host.doctor import diagnose as doctor
from gpufleet.host.doctor import rules as doctor_rules
from test_doctor import CASES
from test_doctor_renter import RENTER_CASES

ALL_CASES = {**CASES, **RENTER_CASES}


def cut_where(line):
    """Why ``line`` reads as a cut sentence, or None: an open parenthesis or bracket, an odd number of quotes, an
    abbreviation's first half at its end ("(e.g"), a word cut off with "..."."""
    depth = 0
    for ch in line:
        depth += ch in "(["
        depth -= ch in ")]"
        if depth < 0:
            return "a parenthesis closed that was never opened"
    if depth:
        return "cut inside parentheses"
    if line.count('"') % 2:
        return "cut inside quotes"
    if re.search(r"(?:\b(?:e\.g|i\.e|etc|vs|cf)|[A-Za-z]\.[A-Za-z])$", line):
        return "cut after an abbreviation"
    if line.endswith("..."):
        return "cut with ..."
    return None


def _values(evidence):
    """The evidence's scalar values as text (a line quotes some of them), long texts left out."""
    out = []
    stack = [evidence]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, (int, float, str)) and not isinstance(v, bool) and 0 < len(str(v)) <= 60:
            out.append(str(v))
        elif isinstance(v, str):  # a long text (torch's error): its words with numbers
            out.extend(re.findall(r"[\w.+/-]*\d[\w.+/-]*", v))
    return out


def _host(code):
    r = doctor.diagnose(ALL_CASES[code]())
    result = {"host": "box", "reachable": True, "failed": False, "doctor": r,
              "gpu": {"source": "nvml", "gpu_count": 1, "health": {"status": "ok", "findings": []},
                      "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559}]}}
    (h,) = report.summarize([result])["hosts"]
    return r, h


def test_every_rule_is_walked():
    assert sorted(ALL_CASES) == sorted(r["code"] for r in doctor_rules.RULES)


@pytest.mark.parametrize("code", sorted(ALL_CASES))
def test_each_finding_is_a_line_with_numbers_that_is_never_cut(code):
    r, h = _host(code)
    f = next(f for f in r["findings"] if f["code"] == code)
    line = briefs.brief(code, f["evidence"], f["meaning"])
    assert cut_where(line) is None, (cut_where(line), line)
    # the evidence's own values (numbers, paths, names), not the rule's general meaning
    assert line != briefs.first_sentence(f["meaning"]), line
    assert any(v in line for v in _values(f["evidence"])), (line, f["evidence"])
    # in the host's record and its verdict: whole
    mine = [x for x in h["judgement"] if x["code"] == code]
    if not mine:  # a note the doctor keeps to itself (persistence mode off alone: healthy)
        assert f["severity"] == "info", f
        return
    assert mine[0]["text"] == line
    verdict = h["verdict"]
    if h["action"] is None:  # keep (note: LINE)
        verdict = re.sub(r"^keep \(note: (.*)\)$", r"\1", verdict)
    verdict = re.sub(r" \(\+\d+ more\)$", "", verdict)  # its count of other findings
    assert len(h["verdict"]) <= j.VERDICT_MAX and cut_where(verdict) is None, h["verdict"]
    assert line in h["verdict"] or h["judgement"][0]["code"] != code, (line, h["verdict"])


@pytest.mark.parametrize("rule", doctor_rules.RULES, ids=lambda r: r["code"])
def test_without_evidence_a_finding_reads_its_meanings_first_whole_sentence(rule):
    line = briefs.brief(rule["code"], {}, rule["meaning"])
    assert cut_where(line) is None, (cut_where(line), line)
    rest = " ".join(rule["meaning"].split())[len(line):]
    assert rest == "" or rest.startswith(". ") or rest == ".", (line, rest)


@pytest.mark.parametrize(("text", "room", "want"), [
    ("torch 2.7.1+cu126 in /opt/conda/envs/train has no sm_120 kernels (RTX 5090): needs cu128 or later", 60,
     "torch 2.7.1+cu126 in /opt/conda/envs/train has no sm_120..."),
    ("GPU 0 holds 30.0 GiB (no process of this host listed) seen twice", 40, "GPU 0 holds 30.0 GiB..."),
])
def test_a_verdict_too_long_is_cut_at_a_word_outside_parentheses(text, room, want):
    assert j._cut(text, room) == want


def test_the_torch_arch_line_names_build_arch_gpu_and_what_is_needed():
    r, h = _host("arch_missing_from_wheel")
    assert h["verdict"] == "fix here: torch 2.5.1+cu121 has no sm_120 kernels (RTX 5090): needs cu128 or later"
    f = next(f for f in r["findings"] if f["code"] == "arch_missing_from_wheel")
    assert f["evidence"]["needs"] == {"series": "2.7", "variant": "cu128"}  # torchcompat's first covering build
    # an older record without "needs": the line works it out from the compute capability
    ev = dict(f["evidence"])
    del ev["needs"]
    assert briefs.brief("arch_missing_from_wheel", ev, f["meaning"], where="/opt/conda") == (
        "torch 2.5.1+cu121 in /opt/conda has no sm_120 kernels (RTX 5090): needs cu128 or later")
