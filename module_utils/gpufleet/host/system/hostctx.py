# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How host-side code runs a command and reads a file on the host: the one runner and the shared readers.

``command_runner`` is the command runner (``run(argv) -> (rc, stdout, stderr)``); ``Prefetch`` starts the commands
of one gathering together, each in a thread. ``read_limited`` reads the start or the end of a file (``read_tail``
the end); ``safe_call`` and ``read_text`` are how the probes call an injected reader without raising.
"""

import os
import signal
import subprocess
import threading

# gpufleet's own virtual environment (roles/gpufleet_common's gpufleet_common_venv): gpu_facts lists its
# packages (hostready), cudatk and the audit look there.
GPUFLEET_VENV = "/opt/gpufleet/venv"

# ----------------------------------------------------------------------------- commands
SBIN_DIRS = ("/sbin", "/usr/sbin", "/usr/local/sbin")
# What AnsibleModule.run_command strips from a child's PYTHONPATH: the module payload's own entries.
_PAYLOAD_PATHS = ("/ansible_modlib.zip", "/debug_dir")


def which(name, environ=None):
    """Path of the executable ``name`` the way AnsibleModule.get_bin_path finds it (PATH, then /sbin,
    /usr/sbin and /usr/local/sbin), or None."""
    dirs = [d for d in (os.environ if environ is None else environ).get("PATH", "").split(os.pathsep) if d]
    dirs += [d for d in SBIN_DIRS if d not in dirs]
    for d in dirs:
        path = os.path.join(d, name)  # an absolute ``name`` stays itself
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


LOCALE = {"LC_ALL": "C"}  # numbers and messages as the parsers read them (CmdRunner's and run_command's C)
TIMED_OUT = 124  # the exit status of a command killed at its timeout (timeout(1)'s)


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # gone already
        pass


def command_runner(which=which, environ=None, timeout=None):
    """The one command runner, shaped like community.general's CmdRunner: ``run(argv, env=None, timeout=None) ->
    (rc, stdout, stderr)`` in bytes, None when argv[0] is not installed (``which``: a module's get_bin_path).
    Environment: ``environ`` (default this process's) less the payload's PYTHONPATH entries, as run_command does,
    plus ``LOCALE`` and ``env``; stdin /dev/null; cwd / (python -c imports nothing from the module's temp dir).
    Past ``timeout`` s (the call's, else the runner's) the command and what it started are killed: ``(TIMED_OUT,
    output, "... timed out after N s")``; found but not startable: 126.
    Safe from several threads (run_command is not: per-call state, a ``preexec_fn``, fail_json)."""
    base = dict(os.environ if environ is None else environ)
    kept = [p for p in base.pop("PYTHONPATH", "").split(":") if p and not p.endswith(_PAYLOAD_PATHS)]
    if kept:
        base["PYTHONPATH"] = ":".join(kept)
    base.update(LOCALE)
    default_timeout = timeout

    def run(argv, env=None, timeout=None):
        exe = which(argv[0])
        if not exe:
            return None
        limit = default_timeout if timeout is None else timeout
        try:
            # run_command has no timeout and cannot kill a process group: hence Popen (ansible-core 2.21's sanity)
            proc = subprocess.Popen([exe] + [str(a) for a in argv[1:]], stdin=subprocess.DEVNULL, close_fds=True,  # pylint: disable=ansible-bad-function
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, cwd="/",
                                    env=dict(base, **env) if env else base)
        except OSError as exc:
            return 126, b"", ("%s: %s" % (exe, exc.strerror or exc)).encode("utf-8", "replace")
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return TIMED_OUT, out, err + ("%s timed out after %s s" % (argv[0], limit)).encode()
        return proc.returncode, out, err

    return run


class _Job:
    """One command, run in a thread (``background``) or at once; ``get`` waits and returns or re-raises."""

    def __init__(self, run, argv, background):
        self.result = self.error = self.thread = None
        if background:
            thread = threading.Thread(target=self._do, args=(run, argv), daemon=True)
            try:
                thread.start()
                self.thread = thread
                return
            except RuntimeError:  # "can't start new thread" (a tight process limit): run it here instead
                pass
        self._do(run, argv)

    def _do(self, run, argv):
        try:
            self.result = run(argv)
        except Exception as exc:  # handed to the caller in get(), as a direct call would raise it
            self.error = exc

    def get(self):
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


class Prefetch:
    """A command runner that starts the commands in ``ahead`` at once, each in a thread.

    ``run(argv)`` answers from those (waiting for the one asked for) and runs anything else then
    and there. Every answer is kept for the gathering: a command asked for twice, by name or by
    path ("sshd -V", then "/usr/sbin/sshd -V"), runs once. ``which`` resolves argv[0] for that
    (None: argv is the key as given); a name it does not find gives None without running anything.
    ``run`` must be safe to call from several threads (``command_runner``'s is). Use it as a context
    manager: leaving the block waits for what is still running, so no command outlives the module.
    ``ran`` lists the commands started, in order.
    """

    def __init__(self, run, ahead=(), which=None):
        self._run = run
        self._which = which
        self._jobs = {}
        self.ran = []
        for argv in ahead:
            self._job(argv, background=True)

    def _job(self, argv, background):
        argv = list(argv)
        if self._which is not None:
            exe = self._which(argv[0])
            if not exe:
                return None
            argv[0] = exe
        key = tuple(argv)
        if key not in self._jobs:
            self.ran.append(argv)
            self._jobs[key] = _Job(self._run, argv, background)
        return self._jobs[key]

    def __call__(self, argv):
        job = self._job(argv, background=False)
        return job.get() if job is not None else None

    def wait(self):
        for job in list(self._jobs.values()):
            if job.thread is not None:
                job.thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.wait()
        return False


def read_limited(path, limit, tail=False):
    """The first ``limit`` bytes of ``path`` (the last with ``tail``) as text; "" when it does not exist; None when
    it exists but cannot be read."""
    try:
        with open(path, "rb") as fh:
            if tail:
                size = os.fstat(fh.fileno()).st_size
                fh.seek(max(0, size - limit))
            return fh.read(limit).decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    except OSError:
        return None


def read_tail(path, limit):
    """The last ``limit`` bytes of ``path`` as text; "" when it does not exist; None when it cannot be read."""
    return read_limited(path, limit, tail=True)


# ----------------------------------------------------------------------------- injected readers
def safe_call(fn, *args):
    """``fn(*args)``, or None when it raises: how the probes call the readers they are given."""
    try:
        return fn(*args)
    except Exception:
        return None


def read_text(read_file, path):
    """``read_file(path)`` as text (bytes decoded as UTF-8, bad bytes replaced); None when it raises or gives None."""
    data = safe_call(read_file, path)
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data
