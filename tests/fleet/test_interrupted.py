"""Interrupted runs: ansible-playbook killed at task boundaries (SIGKILL: the laptop or the
connection is gone; SIGINT: Ctrl-C) at every role's configure step and at a few install steps.
After each kill the host's configs are valid, and a full provision.yml re-run converges with every config valid.

One host, fresh. Kill point k is reached by run k, which also re-runs everything run k-1 left
unfinished, so the chain of killed runs is itself a chain of re-runs after interruptions.

The killed runs and the re-run are playbooks/provision.yml (the play of site.yml that holds the roles; site.yml's
other stages are not killed here, and re-running them after the kills only cost the suite a minute). A further run
changing nothing is shown elsewhere, not here (it cost this suite 50 s): each role's second converge in its molecule
scenario (the idempotence step or a rerun in verify.yml), the second run of all of site.yml in tests/e2e
(test_second_run_changes_nothing_and_says_the_same)."""

import os
import signal
import time

import fleetlib as fl
import pytest

# (task as ansible prints it in "TASK [...]", signal, seconds after the banner): in run order.
KILL_POINTS = [
    ("supervisord : configure | Write the main config (checked by supervisor's own parser first)", signal.SIGKILL, 0.3),
    ("nvidia_container_toolkit : install | Install the local packages in dependency order", signal.SIGKILL, 1.5),
    # (the task takes about 0.25 s on an idle machine: 0.3 s landed in the next one)
    ("nvidia_container_toolkit : configure | Register the nvidia runtime in daemon.json (merged, backed up, parsed "
     "before it replaces the file)", signal.SIGINT, 0.1),
    ("cuda_links : backup | Copy each file into the backup folder", signal.SIGKILL, 0.2),
    ("cuda_links : configure | Write the one CUDA ld.so.conf.d file", signal.SIGKILL, 0.2),
    ("torch : install | Install the pinned torch packages into the venv", signal.SIGKILL, 4.0),
    ("ssh_hardening : configure | Write the candidate config (checked with sshd -t first; /etc/ssh is not touched)",
     signal.SIGKILL, 0.2),
    ("jupyter : configure | Write the config (checked by module_utils/gpufleet/host/system/jupyter.py on the host "
     "first)",
     signal.SIGKILL, 0.2),
]

# Every config the roles write, checked after each kill: (description, shell check that exits 0 when valid).
CONFIG_CHECKS = [
    ("supervisord main config parses (the role's own checker)",
     "f=/etc/gpufleet/supervisor/supervisord.conf; [ ! -e $f ] || "
     "/opt/gpufleet/supervisor/bin/python /opt/gpufleet/supervisor/bin/gpufleet-supervisor-check $f"),
    ("every supervisord program file parses",
     "for p in /etc/gpufleet/supervisor/conf.d/*.conf; do [ -e \"$p\" ] || continue; "
     "/opt/gpufleet/supervisor/bin/python /opt/gpufleet/supervisor/bin/gpufleet-supervisor-check "
     "/etc/gpufleet/supervisor/supervisord.conf \"$p\" \"$(basename \"$p\" .conf)\" || exit 1; done"),
    ("daemon.json parses as JSON", "f=/etc/docker/daemon.json; [ ! -e $f ] || python3 -m json.tool $f >/dev/null"),
    ("containerd drop-in parses as TOML",
     "f=/etc/containerd/conf.d/99-nvidia.toml; [ ! -e $f ] || "
     "python3 -c 'import sys, tomllib; tomllib.load(open(sys.argv[1], \"rb\"))' $f"),
    # (Debian's own x86_64-linux-gnu.conf names /usr/local/lib/x86_64-linux-gnu, which need not exist)
    ("every CUDA/NVIDIA ld.so.conf.d entry is an existing folder and ldconfig reads them",
     "for f in /etc/ld.so.conf.d/*.conf; do sed -e 's/#.*//' \"$f\" | grep -Ei 'cuda|nvidia' | while read -r d; do "
     "[ -d \"$d\" ] || { echo \"$f: $d\"; exit 1; }; done || exit 1; done; ldconfig -N"),
    ("/usr/local/cuda, when present, resolves", "[ ! -L /usr/local/cuda ] || [ -e /usr/local/cuda ]"),
    ("the cuda_links backup manifest, when present, parses",
     "f=/var/lib/gpufleet/cuda_links/backup/manifest.json; [ ! -e $f ] || python3 -m json.tool $f >/dev/null"),
    ("sshd accepts its config", "[ ! -x /usr/sbin/sshd ] || /usr/sbin/sshd -t"),
    ("the Jupyter config, when present, parses",
     "for f in /etc/gpufleet-jupyter/*.json; do [ -e \"$f\" ] || continue; python3 -m json.tool \"$f\" >/dev/null "
     "|| exit 1; done; for f in /etc/gpufleet-jupyter/*.py; do [ -e \"$f\" ] || continue; "
     "python3 -m py_compile \"$f\" || exit 1; done"),
]


PROVISION = "playbooks/provision.yml"

# torch's install (a 200 MB wheelhouse push and pip) takes minutes on a busy 2-core machine: opt in.
TORCH = os.environ.get("GPUFLEET_FT_TORCH") == "1"


def _kill_points():
    roles = [r for r in fl.provisioned_roles() if r != "torch" or TORCH]
    return [p for p in KILL_POINTS if p[0].split(" : ")[0] in roles]


def _wait_remote_idle(host, timeout=180):
    """Wait until no Ansible module started by the killed run still runs on the host
    (pipelined modules run as: /bin/sh -c '<python> && sleep 0')."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if host.exec("pgrep -f '[&]& sleep 0' >/dev/null", check=False).returncode != 0:
            return
        time.sleep(0.5)
    raise AssertionError("a module of the killed run still runs on %s after %ds" % (host.name, timeout))


def _role_ran(out, role):
    """True when a task of role returned ok or changed in the run's output: a kill in a role the host skips
    (its 'when' false) would find nothing of it to break."""
    current = None
    for line in out.splitlines():
        if line.startswith("TASK ["):
            current = line
        elif current and current.startswith("TASK [%s : " % role) and line.startswith(("ok: [", "changed: [")):
            return True
    return False


def _invalid_configs(host):
    """Every check of CONFIG_CHECKS in one docker exec (one per check cost a minute of the suite under load), each in
    its own subshell with its output kept apart: a marker line per check says whether it passed."""
    script = "".join("out=$( (%s) 2>&1 ); echo \"@@check %d rc=$?\"; printf '%%s\\n' \"$out\"\n" % (cmd, i)
                     for i, (_, cmd) in enumerate(CONFIG_CHECKS))
    res = host.exec(script, check=False)
    assert res.returncode == 0, "the config checks did not run: %s" % (res.stdout + res.stderr)[-1000:]
    bad, seen, current = [], set(), None
    for line in res.stdout.splitlines():
        if line.startswith("@@check "):
            index, rc = line.split()[1:]
            current = int(index)
            seen.add(current)
            if rc != "rc=0":
                bad.append([CONFIG_CHECKS[current][0], []])
        elif current is not None and bad and bad[-1][0] == CONFIG_CHECKS[current][0]:
            bad[-1][1].append(line)
    assert seen == set(range(len(CONFIG_CHECKS))), "a config check did not report: %s" % res.stdout[-1000:]
    return ["%s: %s" % (what, "\n".join(out).strip()[-400:]) for what, out in bad]


@pytest.fixture(scope="module")
def interrupted_host(ft_workdir, request):
    fleet, host = fl.one_seeded_host(ft_workdir / "interrupted", "int", fl.BASE_PORT + 10, request.addfinalizer)
    group_vars = fl.role_vars(fleet.workdir, torch=TORCH)
    group_vars["jupyter_password"] = "ft-int-%s" % os.urandom(4).hex()  # the jupyter role runs only with one
    inventory = fleet.inventory(fleet.workdir / "hosts.json", group_vars=group_vars)
    return fleet, host, inventory


def test_a_plan_on_the_fresh_host_changes_nothing(interrupted_host):
    """provision.yml --check on the host before anything ran there, as a renter's first look at what gpufleet would
    do: a fresh image has no apt package lists and no python3-packaging (which ansible.builtin.pip imports), and a
    plan must neither fail on that nor change the host (runs before the kills; pytest keeps the file's order)."""
    fleet, host, _ = interrupted_host
    # The suite's hosts come from an image with apt's lists and python3-packaging (fleetlib.base_image, to save the
    # kills below minutes of apt): both are moved aside for the plan, as a rented image has neither, and put back.
    host.exec("mv /var/lib/apt/lists /var/lib/apt/lists.ft-aside && mkdir -p /var/lib/apt/lists/partial && "
              "mv /usr/lib/python3/dist-packages/packaging /usr/lib/python3/dist-packages.ft-packaging-aside")
    try:
        assert host.exec("python3 -c 'import packaging'", check=False).returncode != 0
        watched = ["/etc", "/opt", "/usr/local", "/var/lib/gpufleet", "/var/lib/dpkg/status"]
        before = host.checksums(watched)
        assert "/etc/passwd" in before  # the listing ran and saw the host
        # torch included whatever GPUFLEET_FT_TORCH says: a plan only reads the wheelhouse, and its pip steps are the
        # ones a fresh image broke
        group_vars = fl.role_vars(fleet.workdir, torch=True)
        group_vars["jupyter_password"] = "ft-plan-%s" % os.urandom(4).hex()
        plan_inventory = fleet.inventory(fleet.workdir / "plan-hosts.json", group_vars=group_vars)
        rc, out, rec = fl.Runner(fleet.workdir / "plan").playbook(PROVISION, plan_inventory, args=["--check"])
        assert rc == 0 and rec[host.name]["failed"] == 0, out[-3000:]
        assert rec[host.name]["changed"] > 0, "a plan on a fresh host with nothing to do: %s" % rec
        # the plan met the fresh image: no package lists (dpkg asked instead of apt) and no packaging (pip skipped)
        assert "python3-venv and python3-packaging are installed" in out, out[-3000:]  # dpkg-query, not apt
        assert "this plan skips every pip install step" in out, out[-3000:]
        assert host.checksums(watched) == before
    finally:
        host.exec("rm -rf /var/lib/apt/lists && mv /var/lib/apt/lists.ft-aside /var/lib/apt/lists && "
                  "mv /usr/lib/python3/dist-packages.ft-packaging-aside /usr/lib/python3/dist-packages/packaging")


def test_killed_runs_leave_valid_configs_and_converge(interrupted_host):
    fleet, host, inventory = interrupted_host
    runner = fl.Runner(fleet.workdir / "runs")
    timings, problems = [], []
    for task, sig, delay in _kill_points():
        started = time.monotonic()
        # Only the role under test (--tags): what runs before it in provision.yml was converged or killed by the
        # runs before this one, and running it again only costs time; the two full runs below judge the whole.
        role = task.split(" : ")[0]
        killed, out = runner.playbook_killed_at(PROVISION, inventory, task, sig, delay=delay, args=["--tags", role])
        runner.close_connections()
        _wait_remote_idle(host)
        timings.append((task, sig.name, round(time.monotonic() - started, 1)))
        if not killed:
            problems.append("never reached: %s (run %d)" % (task, runner.runs))
            continue
        if not _role_ran(out, role):
            problems.append("killed in a role the host skipped: %s (run %d)" % (task, runner.runs))
        bad = _invalid_configs(host)
        print("after %s at %r: %s" % (sig.name, task, "; ".join(bad) or "all configs valid"))
        if bad:
            problems.append("after %s at %r: %s" % (sig.name, task, "; ".join(bad)))
    started = time.monotonic()
    rc, out, rec = runner.playbook(PROVISION, inventory)
    timings.append(("re-run", "", round(time.monotonic() - started, 1)))
    assert not problems, "\n".join(problems)
    assert rc == 0 and rec[host.name]["failed"] == 0, out[-3000:]
    (fleet.workdir / "timings.txt").write_text("\n".join("%6.1f s  %s %s" % (t, s, k) for k, s, t in timings) + "\n")
    print("\n".join("%6.1f s  %s %s" % (t, s, k) for k, s, t in timings))
    assert not _invalid_configs(host)
