"""The supervisord role's config checker, run with supervisor's real parser on real configs."""
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("supervisor")

CHECK = Path(__file__).resolve().parents[2] / "roles" / "supervisord" / "files" / "gpufleet-supervisor-check"

MAIN = """\
[unix_http_server]
file={tmp}/s.sock
chmod=0700

[supervisord]
logfile={tmp}/supervisord.log
pidfile={tmp}/supervisord.pid
umask=027

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{tmp}/s.sock

[include]
files={tmp}/conf.d/*.conf
"""


def run(*args):
    result = subprocess.run([sys.executable, str(CHECK), *map(str, args)], capture_output=True, text=True)
    return result.returncode, result.stderr


@pytest.fixture
def main_conf(tmp_path):
    (tmp_path / "conf.d").mkdir()
    path = tmp_path / "supervisord.conf"
    path.write_text(MAIN.format(tmp=tmp_path))
    return path


def program(tmp_path, text, name="candidate.conf"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_main_config_passes(main_conf):
    assert run(main_conf) == (0, "")


def test_good_program_passes(main_conf, tmp_path):
    assert run(main_conf, program(tmp_path, "[program:web]\ncommand=/bin/sleep 1\n"), "web")[0] == 0


def test_empty_command_is_refused(main_conf, tmp_path):
    rc, err = run(main_conf, program(tmp_path, "[program:web]\ncommand=\n"), "web")
    assert rc == 1 and "empty command" in err


def test_supervisor_parse_error_is_reported_with_its_reason(main_conf, tmp_path):
    rc, err = run(main_conf, program(tmp_path, "[program:web]\ncommand=/bin/true\nautostart=maybe\n"), "web")
    assert rc == 1 and "not a valid boolean value: 'maybe'" in err


def test_file_must_define_exactly_the_named_program(main_conf, tmp_path):
    text = "[program:web]\ncommand=/bin/true\n[program:evil]\ncommand=/bin/sh\n"
    rc, err = run(main_conf, program(tmp_path, text), "web")
    assert rc == 1 and "expected exactly [program:web]" in err


def test_program_check_ignores_other_installed_programs(main_conf, tmp_path):
    program(tmp_path / "conf.d", "[program:old]\ncommand=\n", "old.conf")
    assert run(main_conf, program(tmp_path, "[program:web]\ncommand=/bin/true\n"), "web")[0] == 0


@pytest.mark.parametrize("inet, message", [
    ("[inet_http_server]\nport=0.0.0.0:9001\nusername=a\npassword=b\n", "only a loopback address"),
    ("[inet_http_server]\nport=*:9001\nusername=a\npassword=b\n", "only a loopback address"),
    ("[inet_http_server]\nport=127.0.0.1:9001\n", "has no password"),
])
def test_unsafe_inet_server_is_refused(main_conf, inet, message):
    main_conf.write_text(main_conf.read_text() + inet)
    rc, err = run(main_conf)
    assert rc == 1 and message in err


def test_loopback_inet_server_with_password_passes(main_conf):
    main_conf.write_text(main_conf.read_text() + "[inet_http_server]\nport=[::1]:9001\nusername=a\npassword={SHA}ab\n")
    assert run(main_conf) == (0, "")


def test_world_writable_socket_is_refused(main_conf):
    main_conf.write_text(main_conf.read_text().replace("chmod=0700", "chmod=0777"))
    rc, err = run(main_conf)
    assert rc == 1 and "requires 0700" in err


def test_garbage_is_refused(tmp_path):
    rc, err = run(program(tmp_path, "this is not ini\n"))
    assert rc == 1 and "supervisord refuses this config" in err
