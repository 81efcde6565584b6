"""Run one of library/'s modules the way Ansible's executor runs it on a host, without the `ansible` CLI around it.

Ansible's own ``modify_module`` (ansible.executor.module_common, what the ``normal`` action plugin calls) builds the
AnsiballZ payload: the module, the module_utils it imports and its arguments with the internal ``_ansible_*`` ones the
action plugin adds (``_update_module_args``: check mode, diff, no_log, verbosity, ...). The payload then runs under the
given Python with the given environment and its JSON answer is read back, as the executor reads a host's answer.

What this leaves out is the controller's own start (about a second of CPU a call on the 2-core test machine: 150
calls cost the unit suite two minutes; issue 50): inventory, plugin loading, the worker process and the ``local``
connection. Each test file that uses it keeps at least one run through the real ``ansible localhost -m`` CLI
(``cli_run``), so that path stays tested too.

    ok, result = run("torch_variant", {"torch_version": "2.5.1", ...}, tmp_path)
    state, result = run_state("box_probe", "data_path=/x disk_seconds=2", tmp_path, check=True)
"""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE = Path(sys.executable).parent / "ansible"

# The mark of every test that runs a module (the payload is built by the ansible-core installed next to this Python).
needs_ansible = pytest.mark.skipif(not ANSIBLE.exists(), reason="ansible not installed next to this Python")


@functools.cache
def _prepare():
    """Point Ansible's loaders at the checkout's library/ and module_utils/ (ansible.cfg names both), once."""
    from ansible.plugins.loader import init_plugin_loader, module_loader, module_utils_loader

    init_plugin_loader()
    module_loader.add_directory(str(ROOT / "library"))
    module_utils_loader.add_directory(str(ROOT / "module_utils"))


def _parse_args(args):
    """A dict as it is; a string as `ansible -a` reads it: JSON when it starts with '{', key=value pairs otherwise."""
    if isinstance(args, dict):
        return dict(args)
    args = (args or "").strip()
    if args.startswith("{"):
        return json.loads(args)
    from ansible.parsing.splitter import parse_kv

    return parse_kv(args)


def build(module, args, tmp, check=False, diff=False, no_log=False, verbosity=0, python=None):
    """The AnsiballZ payload (bytes) Ansible would send to a host for this task."""
    _prepare()
    from ansible import __version__
    from ansible import constants as C
    from ansible.executor.module_common import modify_module
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import module_loader
    from ansible.template import Templar

    path = module_loader.find_plugin(module)
    assert path, "module %s not found in %s" % (module, ROOT / "library")
    module_args = _parse_args(args)
    module_args.update({
        "_ansible_check_mode": bool(check), "_ansible_no_log": bool(no_log), "_ansible_debug": False,
        "_ansible_diff": bool(diff), "_ansible_verbosity": verbosity, "_ansible_version": __version__,
        "_ansible_module_name": module, "_ansible_syslog_facility": C.DEFAULT_SYSLOG_FACILITY,
        "_ansible_selinux_special_fs": C.DEFAULT_SELINUX_SPECIAL_FS, "_ansible_socket": None,
        "_ansible_shell_executable": "/bin/sh", "_ansible_keep_remote_files": False,
        "_ansible_tmpdir": str(tmp), "_ansible_remote_tmp": str(tmp), "_ansible_ignore_unknown_opts": False,
        "_ansible_target_log_info": None, "_ansible_tracebacks_for": [],
    })
    built = modify_module(module_name=module, module_path=path, module_args=module_args,
                          templar=Templar(loader=DataLoader()),
                          task_vars={"ansible_python_interpreter": python or sys.executable})
    return built.b_module_data


def run(module, args, tmp_path, check=False, diff=False, no_log=False, verbosity=0, env=None, python=None,
        cwd=None, timeout=120):
    """(ok, result): the module's JSON answer; ok is False when it failed (result["msg"] says why).

    A payload that ends without a JSON answer (a crash, a kill) reads as the executor reads it: failed, with
    module_stdout, module_stderr and rc."""
    tmp = Path(tmp_path) / "ansible-module"
    tmp.mkdir(parents=True, exist_ok=True)
    payload = tmp / ("AnsiballZ_%s.py" % module)
    payload.write_bytes(build(module, args, tmp, check=check, diff=diff, no_log=no_log, verbosity=verbosity,
                              python=python))
    proc = subprocess.run([python or sys.executable, str(payload)], env=env if env is not None else dict(os.environ),
                          cwd=str(cwd or ROOT), capture_output=True, text=True, timeout=timeout)
    result = _answer(proc.stdout)
    if result is None:
        result = {"failed": True, "msg": "MODULE FAILURE", "module_stdout": proc.stdout,
                  "module_stderr": proc.stderr, "rc": proc.returncode}
    result.setdefault("changed", False)
    return not result.get("failed"), result


def run_state(module, args, tmp_path, **kw):
    """(state, result) with the state `ansible -o` prints: "localhost | SUCCESS", "... | CHANGED" or "... | FAILED!"."""
    ok, result = run(module, args, tmp_path, **kw)
    state = "FAILED!" if not ok else ("CHANGED" if result.get("changed") else "SUCCESS")
    return "localhost | %s" % state, result


def _answer(stdout):
    """The JSON object a module prints (AnsiballZ prints nothing else on success)."""
    text = stdout.strip()
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return None


def _cli(module, args, tmp_path, check, env, extra, callback_env):
    env = dict(env if env is not None else os.environ)
    env.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(Path(tmp_path) / "tmp"),
               ANSIBLE_HOME=str(Path(tmp_path) / "ansible-home"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_CACHE_PLUGIN_CONNECTION=str(Path(tmp_path) / "facts"),
               **callback_env)
    cmd = [str(ANSIBLE), "localhost", "-c", "local", "-i", "localhost,", "-M", str(ROOT / "library"),
           "-m", module, "-e", "ansible_python_interpreter=%s" % sys.executable, *extra]
    if args:
        cmd += ["-a", args if isinstance(args, str) else json.dumps(args)]
    if check:
        cmd.append("--check")
    return subprocess.run(cmd, env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=120)


def cli_run(module, args, tmp_path, check=False, env=None, extra=()):
    """The same module through the real `ansible localhost -m MODULE -o` CLI: (state, result, stdout)."""
    proc = _cli(module, args, tmp_path, check, env, ["-o", *extra], {})
    line = [x for x in proc.stdout.splitlines() if x.startswith("localhost | ")][0]
    return line.split(" => ", 1)[0], json.loads(line.split(" => ", 1)[1]), proc.stdout


def cli_json(module, args, tmp_path, check=False, env=None, extra=()):
    """The real CLI with the ansible.posix.json callback, whose result keeps what -o drops (a --diff's diff):
    (exit status, result, stdout)."""
    proc = _cli(module, args, tmp_path, check, env, list(extra),
                {"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                 "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})
    out = json.loads(proc.stdout[proc.stdout.find("{"):])
    return proc.returncode, out["plays"][0]["tasks"][0]["hosts"]["localhost"], proc.stdout + proc.stderr
