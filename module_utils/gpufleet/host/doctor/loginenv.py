# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The environment a login session gets, for the doctor: /etc/environment (pam_env), the login shell's profile
files, and which file set each key (CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH, the thread-pool sizes ...), since
Ansible's exec session reads no profile file. ``doctor_probe.gather`` reads it through its ``Host``.
"""

import os
import re

from ..cuda import toolkit as cudatk
from .match_renter import THREAD_ENV_KEYS

ETC_ENVIRONMENT = cudatk.ETC_ENVIRONMENT  # the file pam_env applies to every login
ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PATH", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES") + THREAD_ENV_KEYS
# What a login shell reads, in order (pam_env's file first): the last file that assigns a variable set it.
# Per-user files are those of the login user's home (~ stands for it).
LOGIN_FILES = ("/etc/environment", "/etc/profile", "/etc/profile.d/*.sh", "/etc/bash.bashrc",
               "~/.bash_profile", "~/.bash_login", "~/.profile", "~/.bashrc")
LOGIN_SHELL_TIMEOUT = 10
_PRINT_ENV = "env -0"

_ASSIGN_RE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def parse_environment_file(text):
    """KEY=VALUE lines of /etc/environment (pam_env's simple format) -> dict; quotes removed."""
    out = {}
    for line in (text or "").splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = _ASSIGN_RE.match(line)
        if not m:
            continue
        value = m.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[m.group(1)] = value
    return out


def login_shell_env(host, user=None, timeout=LOGIN_SHELL_TIMEOUT, account=None):
    """(env, error): what ``user``'s login shell gets (pam_env's /etc/environment applied first, as at an SSH
    login, then the shell's own profile files). Ansible's exec session reads no profile file, so a variable
    exported from /etc/profile.d is invisible to the module's own environment; this reads it the way the
    renter's ``ssh host`` does. ``user`` defaults to the account the module runs as."""
    if account is None:
        import pwd
        try:
            entry = pwd.getpwnam(user) if user else pwd.getpwuid(os.geteuid())
        except (KeyError, OSError) as exc:
            return None, "login user %r unknown: %s" % (user, exc)
        account = (entry.pw_name, entry.pw_dir, entry.pw_shell or "/bin/sh")
    name, home, shell = account
    if not host.exists(shell) or os.path.basename(shell) in ("nologin", "false"):
        return None, "login user %s has no login shell (%s)" % (name, shell)
    start = {"HOME": home, "USER": name, "LOGNAME": name, "SHELL": shell,
             "PATH": "/usr/local/bin:/usr/bin:/bin", "TERM": "dumb"}
    start.update(parse_environment_file(host.read(ETC_ENVIRONMENT)))  # pam_env, before the shell starts
    argv = ["env", "-i"] + ["%s=%s" % kv for kv in sorted(start.items())] + [shell, "-l", "-c", _PRINT_ENV]
    res = host.run(argv, timeout=timeout)
    if res is None:
        return None, "env(1) not found"
    rc, out, err = res
    if isinstance(out, bytes):
        out = out.decode("utf-8", "replace")
    if rc != 0:
        return None, "login shell %s of %s exited %s: %s" % (shell, name, rc, str(err)[-300:])
    env = dict(item.split("=", 1) for item in out.split("\0") if "=" in item)
    return env, None


_LOGIN_ASSIGN = {}


def setting_file(host, key, home):
    """The last login file (LOGIN_FILES order) that assigns ``key``, or None."""
    pattern = _LOGIN_ASSIGN.get(key)
    if pattern is None:
        pattern = _LOGIN_ASSIGN[key] = re.compile(r"^[ \t]*(?:export[ \t]+)?%s=" % re.escape(key), re.M)
    found = None
    for entry in LOGIN_FILES:
        path = home + entry[1:] if entry.startswith("~") else entry
        for name in (host.glob(path) if "*" in path else [path]):
            if pattern.search(host.read(name) or ""):
                found = name
    return found


def login_environment(process_env, etc_environment_text, login_env=None, setting=None):
    """(env, sources) of the keys the doctor reads, as a login session gets them.

    pam_env applies /etc/environment to SSH and console logins; the module's own process may or may
    not have it (docker exec does not), so the file is read directly. A value in the process
    environment wins, as it does for the programs started from it. ``login_env`` (login_shell_env) adds
    what a login shell gets from the profile files; ``setting(key)`` names the file that set a key.
    """
    env, sources = {}, {}
    from_file = parse_environment_file(etc_environment_text)
    for key in ENV_KEYS:
        if key in process_env:
            env[key], sources[key] = process_env[key], "process environment"
        elif login_env is not None and key in login_env:
            env[key] = login_env[key]
            sources[key] = (setting(key) if setting else None) or (
                ETC_ENVIRONMENT if from_file.get(key) == login_env[key] else "login shell")
        elif key in from_file:
            env[key], sources[key] = from_file[key], ETC_ENVIRONMENT
    return env, sources
