"""Variables as users pass them (issue 41): every boolean a playbook takes (``NAME | default(true|false)`` in
site.yml and playbooks/*.yml) means the same from YAML (a bool) and from ``-e NAME=false`` (the string "false"):
each condition and assertion that reads it, evaluated by Ansible's own template engine with the play's vars, gives
the same answer for both, and neither is refused. ``-e check_probe=false`` was refused once ("check_probe true or
false (got false)")."""

import pathlib
import re

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOKS = [ROOT / "site.yml"] + sorted((ROOT / "playbooks").glob("*.yml"))
# The inputs a user sets per run (docs/check.md, docs/gate.md, docs/remediate.md ...); the playbooks' own
# internals start with "__" and per-host inventory flags (gpufleet_ready, gpufleet_simulated: read through hostvars)
# are not passed with -e.
NOT_USER_INPUTS = {"gpufleet_ready", "gpufleet_simulated"}
# Known refusals of a boolean given with -e, each a bug in a file this test does not own: strict xfail, so the test
# fails once the bug is fixed and the entry must go.
KNOWN = {}


# Booleans handed whole to a module argument of type bool (its argument spec turns "false" into False).
MODULE_ARGUMENTS = {("playbooks/facts.yml", "gpufleet_facts_include_processes"): ("library/gpu_facts.py",
                                                                                   "include_processes")}


def _booleans():
    out = []
    for path in PLAYBOOKS:
        names = set(re.findall(r"\b([a-z][a-z0-9_]*) \| default\((?:true|false)\)", path.read_text()))
        out += [(path, name) for name in sorted(names - NOT_USER_INPUTS)]
    return out


def _walk(tasks):
    for task in tasks or ():
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key))


def _conditions(plays):
    """(play vars, condition) of every when: and assert that: in the plays (and import_playbook's when:)."""
    for play in plays:
        pvars = play.get("vars") or {}
        entries = [play] + [t for key in ("pre_tasks", "roles", "tasks", "post_tasks", "handlers")
                            for t in _walk(play.get(key))]
        for task in entries:
            when = task.get("when")
            for cond in when if isinstance(when, list) else [when] if when else []:
                yield pvars, str(cond)
            check = task.get("ansible.builtin.assert") or task.get("assert")
            if isinstance(check, dict):
                that = check.get("that")
                for cond in that if isinstance(that, list) else [that]:
                    yield pvars, str(cond)


def _reads(cond, name, pvars):
    """Whether ``cond`` reads ``name``, directly or through a play var whose expression reads it."""
    via = {k for k, v in pvars.items() if isinstance(v, str) and re.search(r"\b%s\b" % name, v)}
    return any(re.search(r"\b%s\b" % n, cond) for n in {name} | via)


def _evaluate(loader, pvars, cond, name, value):
    variables = dict(pvars)
    variables[name] = value
    try:
        return Templar(loader=loader, variables=variables).evaluate_conditional(trust_as_template(cond))
    except Exception as exc:  # noqa: BLE001 - the error is the answer compared
        return "error: %s" % type(exc).__name__


def test_the_booleans_users_pass_are_found():
    found = {name for _path, name in _booleans()}
    assert {"check_probe", "check_then_return", "gate_fail_hosts", "gpufleet_return_confirm",
            "gpufleet_history_enabled", "gpufleet_torch_enabled"} <= found, found


@pytest.mark.parametrize(("path", "name"), [
    pytest.param(p, n, marks=pytest.mark.xfail(strict=True, reason=KNOWN[(str(p.relative_to(ROOT)), n)]))
    if (str(p.relative_to(ROOT)), n) in KNOWN else (p, n)
    for p, n in _booleans()], ids=lambda x: x.name if isinstance(x, pathlib.Path) else x)
def test_a_boolean_from_the_command_line_means_what_it_means_in_yaml(path, name):
    loader = DataLoader()
    plays = loader.load_from_file(str(path), trusted_as_template=True)
    read = [(pvars, cond) for pvars, cond in _conditions(plays) if _reads(cond, name, pvars)]
    module = MODULE_ARGUMENTS.get((str(path.relative_to(ROOT)), name))
    if module:
        assert re.search(r'\b%s=dict\(type="bool"' % module[1], (ROOT / module[0]).read_text()), module
        return
    # Read in no condition (a list built in a template, a fact): each use turns it into a bool first.
    for use in re.findall(r"\b%s \| default\((?:true|false)\)(?: \| \w+)?" % name, path.read_text()):
        assert read or use.endswith("| bool") or use.endswith("| string"), (path.name, use)
    for pvars, cond in read:
        for typed, typed_as_e in ((True, "true"), (False, "false"), (False, "no"), (True, "yes")):
            want = _evaluate(loader, pvars, cond, name, typed)
            got = _evaluate(loader, pvars, cond, name, typed_as_e)
            assert got == want, (cond, typed, typed_as_e, want, got)
            assert not str(got).startswith("error"), (cond, got)
