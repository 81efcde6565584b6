"""No failure reads as good: the report's judgement on mutated copies of the recorded fleets.

The recorded fleets are tests/fixtures/report (the fixture fleet) and tests/fixtures/report-demo (a make demo run),
each host as recorded and again with its GPU facts' ``health`` removed (the report then computes it, as it does for
facts from an older gpufleet or a hand-made file). Hypothesis picks a host, a path in its result and a mutation:
the value dropped, nulled or retyped (text for a number, a number for a table ...). Then:

- the summariser never crashes, and every host still has a status, an action and a verdict from the judgement's
  vocabulary;
- no host is judged more favourably than its unmutated self ("keep" where it was not, "ok" where it was not),
  unless what was dropped is evidence not gathered (``NOT_GATHERED_PARTS``, one entry less in a list);
- a value of the wrong shape in a field the judgement reads (evidence.SHAPES) is never "keep": the host's action
  is "check access / rerun" or worse, with what could not be read in its reasons.

The two cases the issue names (the demo's H100 host without ``health``: one GPU entry null, one GPU's ``ecc`` a
string) are pinned as explicit examples and as plain tests.
"""

import copy
import datetime
import json
from pathlib import Path

import pytest
from gpufleet.controller import report
from gpufleet.controller.judgement import evidence
from gpufleet.controller.judgement import judge as judgement
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NOW = datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.timezone.utc)
H100 = "gpufleet-demo-04"
GARBLED = "garbled"


def _load(folder):
    return [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]


def _without_health(results):
    out = copy.deepcopy(results)
    for r in out:
        if isinstance(r.get("gpu"), dict):
            r["gpu"].pop("health", None)
    return out


RECORDED = {"fixture": _load(FIXTURES / "report"), "demo": _load(FIXTURES / "report-demo" / "hosts")}
FLEETS = dict(RECORDED)
FLEETS.update({name + "-no-health": _without_health(results) for name, results in RECORDED.items()})
# The parts of a result the judgement reads (evidence.PART_KEYS), and the run record's own fields.
RUN_FIELDS = ("reachable", "failed", "reason", "failed_in", "expected_gpu_count")


def paths(value, prefix=()):
    """Every path (a tuple of keys and indexes) to a value inside ``value``."""
    out = []
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return out
    for key, sub in items:
        out.append(prefix + (key,))
        out.extend(paths(sub, prefix + (key,)))
    return out


def result_paths(result):
    out = [(k,) for k in RUN_FIELDS if k in result]
    for key in ("gpu", "gate", "check", "doctor"):
        if result.get(key) is not None:
            out.append((key,))
            out.extend(paths(result[key], (key,)))
    return out


def retyped(value, shape=None):
    """A value of another shape than ``value`` (and than ``shape``, evidence.SHAPES' for it): a number for text,
    text for anything else."""
    kind = shape[0] if isinstance(shape, tuple) else shape
    if isinstance(value, str) or kind == evidence.TEXT:
        return 7
    return GARBLED


MUTATIONS = ("drop", "null", "retype")
# Evidence that was not gathered, as opposed to evidence that cannot be read: a whole part a run may leave out
# (facts.yml runs no gate, site.yml no pre-check, an old run no doctor) and one entry less in a list (a gate test not
# run, a finding not made). Dropping or nulling these may make a host read better: the run that left them out is
# another run, and the report says which evidence it had. Every other drop, null or retype may not.
NOT_GATHERED_PARTS = (("doctor",), ("gate",), ("check",))


def not_gathered(path, how):
    if how == "retype":
        return False
    return path in NOT_GATHERED_PARTS or (how == "drop" and isinstance(path[-1], int))


def mutate(result, path, how):
    """A copy of ``result`` with the value at ``path`` dropped, nulled or retyped."""
    out = copy.deepcopy(result)
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "drop":
        parent.pop(last)
    elif how == "null":
        parent[last] = None
    else:
        parent[last] = retyped(parent[last], shape_of(path))
    return out


def judged(results):
    """{host: (status, action, verdict, reasons)} of the report's summary of ``results``."""
    summary = report.summarize(results, now=NOW)
    return {h["host"]: h for h in summary["hosts"]}


def favour(host):
    """How favourable a host's judgement is: 2 keep and ok, 1 keep (a note aside), 0 anything else."""
    if host["action"] is None and host["status"] == "ok":
        return 2
    return 1 if host["action"] is None else 0


BASE = {name: judged(results) for name, results in FLEETS.items()}


def shape_of(path):
    """The shape evidence.SHAPES gives the value at ``path`` of a result, or None where it reads none."""
    part = {"gpu": "facts", "gate": "gate", "check": "check", "doctor": "doctor"}.get(path[0])
    shape = evidence.SHAPES["run"] if part is None else evidence.SHAPES[part]
    steps = path if part is None else path[1:]
    for step in steps:
        kind, inner = shape if isinstance(shape, tuple) else (shape, None)
        if kind == evidence.TABLE and isinstance(inner, dict) and step in inner:
            shape = inner[step]
        elif kind == evidence.LIST and inner is not None and isinstance(step, int):
            shape = inner
        else:
            return None
    return shape


def check_host(host):
    assert host["status"] in report.STATUSES
    assert host["action"] in judgement.ACTION_ORDER + (None,)
    assert isinstance(host["verdict"], str) and host["verdict"]


def _h100_index(fleet):
    return next(i for i, r in enumerate(FLEETS[fleet]) if r["host"] == H100)


@st.composite
def cases(draw):
    fleet = draw(st.sampled_from(sorted(FLEETS)))
    index = draw(st.integers(0, len(FLEETS[fleet]) - 1))
    candidates = result_paths(FLEETS[fleet][index])
    path = draw(st.sampled_from(candidates))
    how = draw(st.sampled_from(MUTATIONS))
    return fleet, index, path, how


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(cases())
@example(("demo-no-health", _h100_index("demo-no-health"), ("gpu", "gpus", 0), "null"))
@example(("demo-no-health", _h100_index("demo-no-health"), ("gpu", "gpus", 0, "ecc"), "retype"))
def test_a_mutated_fleet_never_reads_better_than_its_record(case):
    fleet, index, path, how = case
    results = list(FLEETS[fleet])
    original = results[index]
    results[index] = mutate(original, path, how)
    after = judged(results)
    for host in after.values():
        check_host(host)
    before, now = BASE[fleet][original["host"]], after[original["host"]]
    if not_gathered(path, how):
        return
    assert favour(now) <= favour(before), "%s %s of %s made %s read better: %s -> %s" % (
        how, "/".join(map(str, path)), fleet, original["host"], before["verdict"], now["verdict"])
    if how == "retype" and shape_of(path) is not None:
        assert now["action"] is not None, "%s retyped (%s) still reads keep: %s" % (
            "/".join(map(str, path)), evidence.shown(_value(results[index], path)), now["verdict"])
        assert any("unreadable" in r for r in now["reasons"]), now["reasons"]


def _value(result, path):
    for step in path:
        result = result[step]
    return result


@pytest.mark.parametrize("path, how, said", [
    (("gpu", "gpus", 0), "null", "GPU entry 0 is null, not a table"),
    (("gpu", "gpus", 0, "ecc"), "retype", "GPU 0: ecc is 'garbled', not a table"),
])
def test_the_demo_h100_with_malformed_facts_is_unknown_and_checked_again(path, how, said):
    fleet = "demo-no-health"
    index = _h100_index(fleet)
    assert BASE[fleet][H100]["verdict"] == judgement.KEEP  # the host as recorded is a good box
    results = list(FLEETS[fleet])
    results[index] = mutate(results[index], path, how)
    host = judged(results)[H100]
    assert host["status"] == "unknown"
    assert host["action"] == judgement.ACTION_CHECK
    assert said in host["verdict"]


def test_a_health_computation_that_fails_is_unknown(monkeypatch):
    """The report computes health itself from facts without it; an error there is unknown, never ok."""
    from gpufleet.host.gpu import facts

    def broken(_facts, expected_gpu_count=None):
        raise KeyError("temperature_c")

    monkeypatch.setattr(facts, "health", broken)
    fleet = "demo-no-health"
    host = judged(FLEETS[fleet])[H100]
    assert host["status"] == "unknown" and host["action"] == judgement.ACTION_CHECK
    assert "could not be judged" in host["verdict"]


def test_the_shape_table_covers_what_facts_health_reads():
    """Every GPU field facts.health reads has a shape in evidence.SHAPES: a field added to health's rules and not
    to the table would be read as "nothing wrong" when garbled."""
    from gpufleet.host.gpu import facts

    class Reading(dict):
        def __init__(self, data, path, seen):
            super().__init__(data)
            self._path, self._seen = path, seen

        def _wrap(self, key, value):
            self._seen.add(self._path + (key,))
            if isinstance(value, dict):
                return Reading(value, self._path + (key,), self._seen)
            return value

        def get(self, key, default=None):
            return self._wrap(key, super().get(key, default))

        def __getitem__(self, key):
            return self._wrap(key, super().__getitem__(key))

    seen = set()
    for result in RECORDED["demo"] + RECORDED["fixture"]:
        gpu_facts = result.get("gpu")
        if not isinstance(gpu_facts, dict):
            continue
        for g in gpu_facts.get("gpus") or []:
            facts._gpu_findings([], Reading(g, ("gpus", 0), seen), g.get("index"))
    unread = sorted("/".join(map(str, p)) for p in seen if shape_of(("gpu",) + p) is None
                    and p[-1] not in ("spec",))
    assert not unread, "facts.health reads these GPU fields with no shape in evidence.SHAPES: %s" % unread
