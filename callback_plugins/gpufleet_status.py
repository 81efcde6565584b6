# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Callback plugin gpufleet_status: remembers, per host, why a run left it behind.

Failed and unreachable hosts drop out of later plays, so the report play at the end of site.yml
cannot see them. This plugin writes, after every failure or unreachable event, one JSON file
with each such host's first reason (play, task, message), and the report play reads it.
It never changes the output of the run.

The file is GPUFLEET_STATUS_FILE when set, else .cache/run-status.json beside the ansible.cfg
in use (or the current folder). It is reset at the start of every playbook run.
"""
# ruff: noqa: E402 - Ansible reads a plugin's DOCUMENTATION before its imports (ansible-test validate-modules)

DOCUMENTATION = r"""
name: gpufleet_status
type: aggregate
short_description: Record why hosts failed or were unreachable, for the fleet report
description:
  - Writes a JSON file with, for each host that failed or was unreachable, the first play, task and message.
  - Used by playbooks/report.yml so the report names hosts that dropped out of the run.
author:
  - gpufleet maintainers (@gpufleet)
requirements:
  - enabled in callbacks_enabled (gpufleet's ansible.cfg does this)
"""

import json
import os
import tempfile
from datetime import datetime, timezone

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

MAX_MESSAGE = 600


def _status_path():
    explicit = os.environ.get("GPUFLEET_STATUS_FILE")
    if explicit:
        return explicit
    base = os.path.dirname(C.CONFIG_FILE) if C.CONFIG_FILE else os.getcwd()
    return os.path.join(base, ".cache", "run-status.json")


def _message(result):
    res = result._result or {}
    msg = res.get("msg") or res.get("stderr") or res.get("reason") or ""
    if res.get("results") and (not msg or msg == "One or more items failed"):  # a loop: each item's own message
        msgs = [r.get("msg", "") for r in res["results"] if isinstance(r, dict) and r.get("failed")]
        msg = "; ".join(m for m in msgs if m) or msg
    return str(msg).strip()[:MAX_MESSAGE] or "failed without a message"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet_status"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._path = _status_path()
        self._play = None
        self._status = {"started_at": None, "hosts": {}}

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

    def _record(self, result, state):
        host = result._host.get_name()
        if host in self._status["hosts"]:
            return  # the first reason is the one that matters
        self._status["hosts"][host] = {
            "state": state,
            "play": self._play,
            "task": result._task.get_name(),
            "reason": _message(result),
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        self._write()

    def v2_playbook_on_start(self, playbook):
        self._status = {"started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "hosts": {}}
        self._write()

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._record(result, "failed")

    def v2_runner_on_unreachable(self, result):
        if not result._task.ignore_unreachable:
            self._record(result, "unreachable")
