# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Callback plugin gpufleet_status: remembers, per host, why a run left it behind.

Failed and unreachable hosts drop out of later plays, so the report play at the end of site.yml
cannot see them. This plugin writes, after every failure or unreachable event, one JSON file
with each such host's first reason (play, task, message), and the report play reads it.
It never changes the output of the run, except for one line when it writes the report itself:

- A report after every run that reached the fleet: when every host failed, Ansible ends the playbook
  before its last plays, so site.yml's report play ("Write the fleet report") never starts. If a
  playbook holds that play (one not switched off by gpufleet_report_enabled: false in its play vars or
  the extra vars) and it did not start, the plugin runs that play's file (playbooks/report.yml) once
  more at the end of the run, with the same inventory, limit, extra vars, vault options and check mode,
  and prints one line saying so.
  The run's exit status stays Ansible's own. The command line is never printed (extra vars may hold secrets).
  A run stopped on the controller (bad input in a localhost play) reached no fleet host: no report, and the
  controller's own failures are no host's record.
- A failure stays until a run clears it: every run starts from the earlier runs' failed and
  unreachable hosts, each marked with the run it happened in (its reason ends with
  "(in the run started <time>)"), so a later run limited to other hosts, or playbooks/report.yml
  alone, still reports them. An earlier failure of a host is cleared when a later run of the same
  playbook (site.yml, check.yml ...: its file name) reaches that host and does not fail there; an
  earlier unreachable host is cleared by any run that reaches it. A failure in this run replaces the
  host's earlier one. A run of the report play alone clears nothing (it reaches no fleet host), and
  the file's hosts_from_run names the run it carried the hosts from.

The file is GPUFLEET_STATUS_FILE when set, else .cache/run-status.json beside the ansible.cfg
in use (or the current folder). GPUFLEET_STATUS_KEEP=1 (set for the report run above) keeps the
file as it is: the report belongs to the run that failed.
"""
# ruff: noqa: E402 - Ansible reads a plugin's DOCUMENTATION before its imports (ansible-test validate-modules)

DOCUMENTATION = r"""
name: gpufleet_status
type: aggregate
short_description: Record why hosts failed or were unreachable, for the fleet report
description:
  - Writes a JSON file with, for each host that failed or was unreachable, the first play, task and message.
  - Used by playbooks/report.yml so the report names hosts that dropped out of the run.
  - When every host failed and Ansible ended the playbook before its report play, runs that play's file once more
    at the end of the run (same inventory, limit, extra vars, vault options, check mode), so every run has a report.
  - Keeps earlier runs' failed and unreachable hosts, marked with their run, until a later run of the same playbook
    reaches the host and does not fail there (any run that reaches it, for an unreachable host).
author:
  - gpufleet maintainers (@gpufleet)
requirements:
  - enabled in callbacks_enabled (gpufleet's ansible.cfg does this)
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone

from ansible import constants as C
from ansible import context
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.callback import CallbackBase

MAX_MESSAGE = 600
# The play of playbooks/report.yml that writes the report (site.yml and facts.yml import it).
REPORT_PLAY = "Write the fleet report"
# The report's own run: its last line names the report ("latest: <root>/latest/fleet.html").
# The controller: its failures (a play's input check on localhost) are no fleet host's.
CONTROLLER = "localhost"
REPORT_LATEST = re.compile(r"latest: (\S+fleet\.html)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# A report for thousands of hosts takes minutes; a hung one must not hold the run for ever.
REPORT_TIMEOUT = 3600


def _status_path():
    explicit = os.environ.get("GPUFLEET_STATUS_FILE")
    if explicit:
        return explicit
    base = os.path.dirname(C.CONFIG_FILE) if C.CONFIG_FILE else os.getcwd()
    return os.path.join(base, ".cache", "run-status.json")


def _now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _message(result):
    res = result._result or {}
    msg = res.get("msg") or res.get("stderr") or res.get("reason") or ""
    if res.get("results") and (not msg or msg == "One or more items failed"):  # a loop: each item's own message
        msgs = [r.get("msg", "") for r in res["results"] if isinstance(r, dict) and r.get("failed")]
        msg = "; ".join(m for m in msgs if m) or msg
    failed_modules = res.get("failed_modules")
    if isinstance(failed_modules, dict) and failed_modules:  # fact gathering: each failed module's own cause
        # ("The following modules failed to execute: ansible.legacy.setup." says which, not why: 2.20+ on Python 3.8)
        causes = [str(r.get("msg") or "") for r in failed_modules.values() if isinstance(r, dict)]
        msg = "%s %s" % (msg, "; ".join(c for c in causes if c)) if any(causes) else msg
    # ansible-core 2.19 puts "Task failed: " (and "Action failed: ") before the cause: the cause is what matters.
    msg = _ANSIBLE_PREFIX.sub("", str(msg).strip())
    return msg[:MAX_MESSAGE] or "failed without a message"


_ANSIBLE_PREFIX = re.compile(r"^(?:(?:Task|Action|Module) failed: )+")


def _report_enabled(play):
    """False where extra vars or the play's own vars switch the report off (site.yml's imports of facts.yml do)."""
    manager = getattr(play, "_variable_manager", None)
    extra = getattr(manager, "extra_vars", None) or {}
    value = extra.get("gpufleet_report_enabled", (play.vars or {}).get("gpufleet_report_enabled", True))
    try:
        return boolean(value, strict=True)
    except TypeError:
        return True  # a template: decided when the play runs


def _report_argv(playbook_file):
    """ansible-playbook for the report play's file with this run's inventory, limit, extra vars and vault options."""
    args = context.CLIARGS
    argv = [sys.executable, "-m", "ansible.cli.playbook", playbook_file]
    for source in args.get("inventory") or ():
        argv += ["-i", source]
    if args.get("subset"):
        argv += ["--limit", args["subset"]]
    for extra in args.get("extra_vars") or ():
        argv += ["-e", extra]
    for vault_id in args.get("vault_ids") or ():
        argv += ["--vault-id", vault_id]
    for password_file in args.get("vault_password_files") or ():
        argv += ["--vault-password-file", password_file]
    if args.get("ask_vault_pass"):
        argv.append("--ask-vault-pass")
    if args.get("module_path"):
        for path in args["module_path"]:
            argv += ["-M", path]
    for option, key in (("--tags", "tags"), ("--skip-tags", "skip_tags")):
        if args.get(key):
            argv += [option, ",".join(args[key])]
    if args.get("check"):
        argv.append("--check")
    if args.get("diff"):
        argv.append("--diff")
    return argv


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet_status"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._path = _status_path()
        self._play = None
        self._stage = None  # the playbook's file name: a failure is cleared by a later run of the same one
        self._reached = set()  # the hosts a task of this run ran on
        self._status = {"started_at": None, "hosts": {}}
        self._report_play = None  # (uuid, file) of the playbook's last report play that writes a report
        self._report_started = False

    def _write(self):
        folder = os.path.dirname(self._path)
        try:
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".run-status.")
            with os.fdopen(fd, "w") as handle:
                json.dump(self._status, handle, indent=1, sort_keys=True)
            os.replace(tmp, self._path)
        except OSError as exc:
            self._display.warning("gpufleet_status: cannot write %s: %s" % (self._path, exc))

    def _read(self):
        try:
            with open(self._path) as handle:
                status = json.load(handle)
        except (OSError, ValueError):
            return None
        if not isinstance(status, dict) or not isinstance(status.get("hosts"), dict):
            return None
        return status

    def _record(self, result, state):
        host = result._host.get_name()
        self._reached.add(host)
        if host == CONTROLLER:
            return  # the controller's own plays (input checks, the report): no fleet host's record
        earlier = self._status["hosts"].get(host)
        if earlier is not None and not earlier.get("run_started_at"):
            return  # this run's first reason is the one that matters
        self._status["hosts"][host] = {
            "state": state,
            "play": self._play,
            "task": result._task.get_name(),
            "reason": _message(result),
            "at": _now(),
            "playbook": self._stage,
        }
        self._write()

    def _carry_over(self, previous):
        """The earlier runs' failed and unreachable hosts, each marked once with the run it dropped out of."""
        run = previous.get("hosts_from_run") or previous.get("started_at") or "unknown"
        hosts = {}
        for name, entry in previous["hosts"].items():
            if not isinstance(entry, dict):
                continue
            entry = dict(entry)
            if not entry.get("run_started_at"):  # marked once, by the first run after it
                entry["run_started_at"] = previous.get("started_at") or run
                entry["reason"] = "%s (in the run started %s)" % (entry.get("reason") or "no reason given",
                                                                  entry["run_started_at"])
            hosts[name] = entry
        return hosts

    def _clear_reached(self):
        """Drop the earlier runs' entries of the hosts this run reached without a failure: a failure when this run is
        of the same playbook (or the entry names none), an unreachable host in any case."""
        hosts = self._status["hosts"]
        cleared = [name for name, entry in hosts.items()
                   if name in self._reached and entry.get("run_started_at")
                   and (entry.get("state") == "unreachable" or entry.get("playbook") in (None, self._stage))]
        for name in cleared:
            del hosts[name]
        if cleared:
            self._write()

    def v2_playbook_on_start(self, playbook):
        plays = playbook.get_plays()
        reports = [p for p in plays if p.get_name() == REPORT_PLAY and _report_enabled(p)]
        self._report_play = (reports[-1]._uuid, reports[-1].get_path().rsplit(":", 1)[0]) if reports else None
        self._report_started = False
        self._stage = os.path.basename(getattr(playbook, "_file_name", None) or "") or None
        self._reached = set()
        previous = self._read()
        if os.environ.get("GPUFLEET_STATUS_KEEP") and previous is not None:
            self._status = previous  # the report run of a run that failed: that run's status, as it is
            return
        carried = self._carry_over(previous) if previous is not None else {}
        self._status = {"started_at": _now(), "hosts": carried}
        if plays and all(p.get_name() == REPORT_PLAY for p in plays) and previous is not None:
            self._status["hosts_from_run"] = previous.get("hosts_from_run") or previous.get("started_at") or "unknown"
        self._write()

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()
        if self._report_play and play._uuid == self._report_play[0]:
            self._report_started = True
        if self._play == REPORT_PLAY and not os.environ.get("GPUFLEET_STATUS_KEEP"):
            self._clear_reached()  # before the report reads the file

    def _reach(self, result):
        self._reached.add(result._host.get_name())

    def v2_runner_on_ok(self, result):
        self._reach(result)

    def v2_runner_on_skipped(self, result):
        self._reach(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._record(result, "failed")
        else:
            self._reach(result)

    def v2_runner_on_unreachable(self, result):
        if not result._task.ignore_unreachable:
            self._record(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        if not os.environ.get("GPUFLEET_STATUS_KEEP"):
            self._clear_reached()
        # Ansible ended the playbook before its report play (every host of a play failed): write the report now.
        if not self._report_play or self._report_started or os.environ.get("GPUFLEET_STATUS_KEEP"):
            return
        if not any(not e.get("run_started_at") for e in self._status["hosts"].values()):
            return  # no fleet host dropped out in this run (bad input stopped it on the controller): nothing to report
        try:
            self._write_report(self._report_play[1])
        except Exception as exc:  # a callback's error must not end the run; its status stays Ansible's
            self._display.warning("gpufleet_status: the run ended before its report, and writing it failed: %s" % exc)

    def _write_report(self, playbook_file):
        # Ansible's own stdout callback (under ansible-runner the run's is awx_display, whose events belong to the
        # job): its last line names the report.
        env = dict(os.environ, GPUFLEET_STATUS_FILE=self._path, GPUFLEET_STATUS_KEEP="1", ANSIBLE_NOCOLOR="1",
                   ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
        if C.CONFIG_FILE:
            env["ANSIBLE_CONFIG"] = C.CONFIG_FILE
        # The output is kept, not shown: the one line below says what happened (the command line holds extra vars).
        done = subprocess.run(_report_argv(playbook_file), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", timeout=REPORT_TIMEOUT, check=False)
        output = ANSI.sub("", done.stdout or "")
        latest = REPORT_LATEST.findall(output)
        dropped = len(self._status["hosts"])
        # On stderr: stdout is the stdout callback's own (a JSON callback's output must still parse).
        if done.returncode == 0 and latest:
            self._display.display("gpufleet_status: the run ended before its report play (%d host(s) failed or "
                                  "unreachable); %s wrote the report: %s"
                                  % (dropped, os.path.basename(playbook_file), latest[-1]), stderr=True)
        elif done.returncode == 0:
            self._display.display("gpufleet_status: the run ended before its report play; %s ran and wrote no report "
                                  "(gpufleet_report_enabled is false?)" % os.path.basename(playbook_file),
                                  stderr=True)
        else:
            tail = "\n".join(output.rstrip().splitlines()[-20:])
            self._display.warning("gpufleet_status: the run ended before its report play, and %s failed (rc %d) "
                                  "writing it:\n%s" % (os.path.basename(playbook_file), done.returncode, tail))
