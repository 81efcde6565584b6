"""The demo fleet against an independent audit: ssh-audit (pinned in requirements.txt), run from the controller
against every demo host's sshd after `make demo`, finds no fail and no warn but the accepted ones, and ssh-audit's
built-in policy for the host's release (Ubuntu 20.04 on host 02, 24.04 on 04, 22.04 on 05, Debian 12 on 01 and 03)
passes except for the deviations roles/ssh_hardening/README.md argues; both lists are in
roles/ssh_hardening/vars/ssh_audit.yml. A release with no built-in policy in ssh-audit (Debian 11) gets the standard
audit only. This is the only ssh-audit run of the test suites.
"""

import concurrent.futures
import json
import re
import subprocess
import sys
import time

import demolib
import pytest
import yaml

AUDIT = yaml.safe_load((demolib.ROOT / "roles" / "ssh_hardening" / "vars" / "ssh_audit.yml").read_text())[
    "__ssh_hardening_audit"]
CATEGORIES = ("kex", "key", "enc", "mac")
# ssh-audit's exit codes: 0 good, 2 warnings, 3 failures (both judged from the JSON), 1 no connection.
NO_CONNECTION = 1


def ssh_audit(host, *args):
    """ssh-audit -j from the controller venv against the host's published SSH port; its parsed JSON report.

    OpenSSH >= 9.8 (Debian 13, a bigger demo fleet's hosts 06+) refuses the auditing address for about 16 s after an
    audit's dozen connections that never authenticate (PerSourcePenalties): a report-less run is retried after a pause.
    """
    # -t 30: ssh-audit's 5 s default for connecting and reading is short for a loaded 2-core CI machine
    argv = [sys.executable, "-m", "ssh_audit", "-j", "-t", "30", *args, "-p", str(host.port), "127.0.0.1"]
    for _ in range(10):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=180)
        if res.returncode != NO_CONNECTION:
            break
        time.sleep(10)
    assert res.returncode in (0, 2, 3), "%s: %s exited %d: %s %s" % (host.name, argv, res.returncode, res.stdout,
                                                                       res.stderr)
    report, _ = json.JSONDecoder().raw_decode(res.stdout)
    return report


def wait_for_login(host, seconds=120):
    """Leave the host as found: wait until a fresh SSH login works again after the audit's penalty."""
    deadline = time.time() + seconds
    while True:
        res = host.run("true", check=False)
        if res.returncode == 0:
            return
        assert time.time() < deadline, "%s: no fresh login %d s after the audit: %s" % (host.name, seconds, res.stderr)
        time.sleep(5)


def _audit_one(host):
    release = host.run(". /etc/os-release && echo $VERSION_ID").stdout.strip()
    assert release in AUDIT["release_notes"], "%s: release %r is not in vars/ssh_audit.yml" % (host.name, release)
    # A release with a built-in policy must be held to it: only one without (Debian 11) goes without.
    assert (release in AUDIT["policies"]) == (release != "11"), (host.name, release, AUDIT["policies"])
    policy = ssh_audit(host, "-P", AUDIT["policies"][release]) if release in AUDIT["policies"] else None
    report = ssh_audit(host)
    wait_for_login(host)
    return {"release": release, "policy": policy, "report": report}


@pytest.fixture(scope="module")
def audits(demo_hosts):
    """{name: {release, policy, report}} with both audits of every demo host, run once for the module: the hosts
    side by side (each sshd throttles only its own auditor: one host's penalty pause does not hold up the rest)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(demo_hosts)) as pool:
        futures = {name: pool.submit(_audit_one, host) for name, host in sorted(demo_hosts.items())}
        return {name: future.result() for name, future in futures.items()}


def findings(report):
    """Every fail and warn of a standard audit, as "<algorithm>: <note>"."""
    out = []
    for category in CATEGORIES:
        for alg in report.get(category) or []:
            for level in ("fail", "warn"):
                out += ["%s: %s" % (alg["algorithm"], note) for note in (alg.get("notes") or {}).get(level, [])]
    return out


def test_the_pinned_ssh_audit_runs():
    from ssh_audit import globals as ssh_audit_globals

    assert "v" + AUDIT["version"] == ssh_audit_globals.VERSION
    assert "ssh-audit==%s" % AUDIT["version"] in (demolib.ROOT / "requirements.txt").read_text().split()


def test_standard_audit_finds_no_fail_no_warn_no_cve(audits):
    problems = []
    for name, audit in sorted(audits.items()):
        accepted_notes = [re.escape(n) for n in AUDIT["notes"] + AUDIT["release_notes"].get(audit["release"], [])]
        report = audit["report"]
        if not report.get("kex") or not report.get("key"):
            problems.append("%s: the audit saw no key exchange or host key: %s" % (name, report))
            continue
        unargued = [f for f in findings(report) if f.split(":")[0] not in AUDIT["findings"]]
        if unargued:
            problems.append("%s (release %s): %s" % (name, audit["release"], unargued))
        if report.get("cves"):
            problems.append("%s: CVEs %s" % (name, report["cves"]))
        notes = [n for n in report.get("additional_notes") or [] if not any(re.match(p, n) for p in accepted_notes)]
        if notes:
            problems.append("%s: notes %s" % (name, notes))
    assert not problems, "; ".join(problems)


def test_policy_for_the_release_passes_but_for_the_argued_deviations(audits):
    problems = []
    for name, audit in sorted(audits.items()):
        policy, release = audit["policy"], audit["release"]
        if policy is None:  # Debian 11: no built-in policy (the standard audit above still holds it)
            continue
        argued = {d["field"]: d["kind"] for d in AUDIT["policy_deviations"][release]}
        errors = {e["mismatched_field"]: e for e in policy.get("errors") or []}
        if policy.get("policy") != AUDIT["policies"][release]:
            problems.append("%s: ran policy %r" % (name, policy.get("policy")))
        if policy.get("passed") != (not argued):
            problems.append("%s: passed=%s with argued deviations %s" % (name, policy.get("passed"), sorted(argued)))
        if sorted(errors) != sorted(argued):
            problems.append("%s (release %s): mismatches %s, argued %s" % (name, release, sorted(errors),
                                                                          sorted(argued)))
        for field, kind in argued.items():
            error = errors.get(field)
            if error is None:
                continue
            wanted = [a for a in error["expected_required"] + error["expected_optional"] if a]
            if kind == "subset":
                ok = bool(error["actual"]) and set(error["actual"]) <= set(wanted)
            elif kind == "superset":  # the policy's list plus the argued extras (curve25519 for older clients)
                extra = [d.get("extra") for d in AUDIT["policy_deviations"][release] if d["field"] == field][0]
                ok = (set(error["expected_required"]) <= set(error["actual"])
                      and sorted(set(error["actual"]) - set(wanted)) == sorted(extra))
            else:
                ok = sorted(error["actual"]) == sorted(error["expected_required"])
            if not ok:
                problems.append("%s: %s is not a %s of the policy's list: %s" % (name, field, kind, error))
    assert not problems, "; ".join(problems)
