"""module_utils/gpufleet/host/system/jupyter.py: what the jupyter role refuses, the controller-side hashing, the
config."""
import json

import pytest
from gpufleet.host.system import jupyter

argon2 = pytest.importorskip("argon2")  # argon2-cffi, in the controller venv (requirements.txt)

# Recorded with jupyter_server 2.21.1 (the role's pin), from the project's wheelhouse:
#   from jupyter_server.auth.security import passwd, passwd_check
#   passwd('correct horse battery staple')                     -> REAL_ARGON2
#   passwd('correct horse battery staple', algorithm='sha1')   -> REAL_SHA1
#   passwd_check(REAL_ARGON2, 'correct horse battery staple')  -> True; with 'x' -> False
REAL_PASSWORD = "correct horse battery staple"  # noqa: S105 - the recorded test password
REAL_ARGON2 = ("argon2:$argon2id$v=19$m=10240,t=10,p=8$Vu0JO8WpB2Uu7Sfo9kbD8w$"
               "OpsOZAL3DZO/XFIZanhA7BCTo3479xd7gR1eOyziX7Q")
ANY_V4 = "0.0.0.0"  # noqa: S104 - the public bind under test
REAL_SHA1 = "sha1:c1a291dd97a0:4db73e689a99d02e0494642b2d49472db68a1ea3"

GOOD = {
    "user": "gpufleet", "home": "/home/gpufleet", "ip": "127.0.0.1", "port": 8888,
    "password": "", "password_hash": REAL_ARGON2, "tls_enabled": False, "tls_certfile": "", "tls_keyfile": "",
    "allow_origin": "", "root_dir": "/home/gpufleet/notebooks", "terminals_enabled": True, "extra_config": {},
    "lab_version": "4.6.6", "server_version": "2.21.1", "pip_index_url": "",
    "kernel_transport_encryption": "auto",
}


def settings(**changes):
    return dict(GOOD, **changes)


def test_the_defaults_pass():
    assert jupyter.input_problems(GOOD) == []
    assert jupyter.input_problems(settings(password=REAL_PASSWORD, password_hash="")) == []


def test_public_bind_with_tls_passes():
    assert jupyter.input_problems(settings(ip=ANY_V4, tls_enabled=True)) == []
    assert jupyter.input_problems(settings(ip="::", tls_enabled=True, tls_certfile="/etc/ssl/j.crt",
                                           tls_keyfile="/etc/ssl/j.key")) == []


@pytest.mark.parametrize("changes, expected", [
    ({"password_hash": ""}, "no password"),
    ({"password": "", "password_hash": "   "}, "does not look like a hash"),
    ({"password": REAL_PASSWORD}, "not both"),
    ({"password": "short", "password_hash": ""}, "shorter than 8"),
    ({"password_hash": "hunter2hunter2"}, "a plain password?"),
    ({"password_hash": REAL_ARGON2[len("argon2:"):]}, "lacks the 'argon2:' prefix"),
    ({"password_hash": REAL_SHA1}, "legacy salted hash"),
    ({"ip": ANY_V4}, "public bind needs jupyter_tls_enabled"),
    ({"ip": "10.1.2.3"}, "public bind needs jupyter_tls_enabled"),
    ({"ip": "::"}, "public bind needs jupyter_tls_enabled"),
    ({"ip": "0.0.0.0; id"}, "must be an IP address"),
    ({"port": 0}, "from 1 to 65535"),
    ({"port": 70000}, "from 1 to 65535"),
    ({"port": "22; id"}, "from 1 to 65535"),
    ({"user": "root"}, "must not run as root"),
    ({"user": "Bad User"}, "plain login name"),
    ({"allow_origin": "*"}, "'*' refused"),
    ({"allow_origin": "https://a.example/path"}, "one origin"),
    ({"root_dir": "/"}, "system folder"),
    ({"root_dir": "/etc/"}, "system folder"),
    ({"root_dir": "relative/notebooks"}, "absolute path"),
    ({"root_dir": "/home/gpufleet/../.."}, "'..'"),
    ({"root_dir": "/home/gpufleet"}, "CVE-2022-29241"),
    ({"root_dir": "/home"}, "CVE-2022-29241"),
    ({"tls_enabled": True, "tls_certfile": "/etc/ssl/j.crt"}, "both jupyter_tls_certfile and jupyter_tls_keyfile"),
    ({"tls_certfile": "/etc/ssl/j.crt", "tls_keyfile": "/etc/ssl/j.key"}, "jupyter_tls_enabled is false"),
    ({"extra_config": {"ServerApp": {"allow_root": True}}}, "must not run as root (allow_root)"),
    ({"extra_config": {"ServerApp": {"disable_check_xsrf": True}}}, "XSRF protection stays on"),
    ({"extra_config": {"ServerApp": {"allow_origin": "*"}}}, "never '*'"),
    ({"extra_config": {"IdentityProvider": {"token": ""}}}, "tokens are not used"),
    ({"extra_config": {"ServerApp": {"token": "abc"}}}, "tokens are not used"),
    ({"extra_config": {"ServerApp": "allow_root"}}, "map class names"),
    ({"server_version": "2.20.0"}, "published advisories"),
    ({"lab_version": ">=4"}, "exact release"),
    ({"pip_index_url": "http://pypi.example/simple"}, "must be https"),
    ({"kernel_transport_encryption": "off"}, "jupyter_kernel_transport_encryption must be one of"),
    ({"extra_config": {"MappingKernelManager": {"transport_encryption": "disabled"}}},
     "jupyter_kernel_transport_encryption"),
])
def test_bad_inputs_are_refused_with_a_clear_message(changes, expected):
    problems = jupyter.input_problems(settings(**changes))
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("secret", ["hunter2hunter2", REAL_ARGON2[len("argon2:"):], REAL_SHA1, "my pass word!"])
def test_messages_never_repeat_the_secret(secret):
    for changes in ({"password_hash": secret}, {"password": secret, "password_hash": ""},
                    {"password": secret}):
        problems = jupyter.input_problems(settings(**changes))
        assert secret not in " ".join(problems)


def test_our_hash_is_what_jupyter_server_writes_and_verifies():
    ours = jupyter.hash_password(REAL_PASSWORD)
    assert jupyter.hash_problems(ours) == []
    # Same algorithm and parameters as jupyter_server.auth.passwd(): only salt and digest differ.
    assert ours.split("$")[:4] == REAL_ARGON2.split("$")[:4]
    assert jupyter.verify_password(REAL_ARGON2, REAL_PASSWORD)
    assert not jupyter.verify_password(REAL_ARGON2, "x")
    assert jupyter.verify_password(ours, REAL_PASSWORD)


def test_hash_is_kept_while_the_password_matches_and_renewed_when_it_changes():
    assert jupyter.hash_password(REAL_PASSWORD, REAL_ARGON2) == REAL_ARGON2
    new = jupyter.hash_password("another password", REAL_ARGON2)
    assert new != REAL_ARGON2 and jupyter.verify_password(new, "another password")
    # Without a current hash every call salts anew: hashing must be skipped when the config already matches.
    assert jupyter.hash_password(REAL_PASSWORD) != jupyter.hash_password(REAL_PASSWORD)


@pytest.mark.parametrize("current", ["", "garbage", REAL_SHA1, "argon2:$argon2id$broken"])
def test_unusable_current_hashes_are_replaced(current):
    new = jupyter.hash_password(REAL_PASSWORD, current)
    assert new != current and jupyter.verify_password(new, REAL_PASSWORD)


def test_empty_password_is_never_hashed():
    with pytest.raises(jupyter.JupyterInputError):
        jupyter.hash_password("")


def test_missing_argon2_on_the_controller_is_named(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_argon2(name, *args, **kwargs):
        if name == "argon2":
            raise ImportError("No module named 'argon2'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_argon2)
    with pytest.raises(jupyter.JupyterInputError, match="argon2-cffi"):
        jupyter.hash_password(REAL_PASSWORD)


def test_current_hash_is_read_from_the_written_config():
    config = jupyter.server_config(GOOD, REAL_ARGON2)
    assert jupyter.current_hash(json.dumps(config)) == REAL_ARGON2
    for text in ("", "not json", "[]", '{"PasswordIdentityProvider": {}}',
                 '{"PasswordIdentityProvider": {"hashed_password": 1}}'):
        assert jupyter.current_hash(text) == ""


def test_the_config_is_locked_down():
    config = jupyter.server_config(GOOD, REAL_ARGON2)
    server = config["ServerApp"]
    assert server["ip"] == "127.0.0.1" and server["port"] == 8888 and server["port_retries"] == 0
    assert server["allow_root"] is False and server["disable_check_xsrf"] is False
    assert server["allow_origin"] == "" and server["allow_unauthenticated_access"] is False
    assert server["root_dir"] == "/home/gpufleet/notebooks"
    assert "certfile" not in server
    assert config["MappingKernelManager"] == {"transport_encryption": "auto"}
    assert config["IdentityProvider"] == {"token": ""}
    assert config["PasswordIdentityProvider"] == {
        "hashed_password": REAL_ARGON2, "password_required": True, "allow_password_change": False}
    assert jupyter.config_problems(config) == []


def test_the_config_carries_tls_and_extra_settings():
    config = jupyter.server_config(settings(ip=ANY_V4, tls_enabled=True, tls_certfile="/c", tls_keyfile="/k",
                                            extra_config={"ServerApp": {"shutdown_no_activity_timeout": 3600},
                                                          "MappingKernelManager": {"cull_idle_timeout": 600}}),
                                   REAL_ARGON2)
    assert config["ServerApp"]["certfile"] == "/c" and config["ServerApp"]["keyfile"] == "/k"
    assert config["ServerApp"]["shutdown_no_activity_timeout"] == 3600
    assert config["MappingKernelManager"] == {"transport_encryption": "auto", "cull_idle_timeout": 600}
    assert jupyter.config_problems(config) == []


@pytest.mark.parametrize("section, key, value, expected", [
    ("ServerApp", "ip", ANY_V4, "not loopback"),
    ("ServerApp", "allow_root", True, "allow_root"),
    ("ServerApp", "disable_check_xsrf", True, "disable_check_xsrf"),
    ("ServerApp", "allow_origin", "*", "allow_origin"),
    ("ServerApp", "allow_origin_pat", ".*", "allow_origin_pat"),
    ("ServerApp", "allow_unauthenticated_access", True, "allow_unauthenticated_access"),
    ("ServerApp", "root_dir", "/", "root_dir"),
    ("IdentityProvider", "token", "abc", "token"),
    ("PasswordIdentityProvider", "hashed_password", "plain", "does not look like a hash"),
    ("PasswordIdentityProvider", "allow_password_change", True, "allow_password_change"),
])
def test_unsafe_configs_are_caught_by_the_host_check(section, key, value, expected):
    config = jupyter.server_config(GOOD, REAL_ARGON2)
    config[section][key] = value
    assert any(expected in p for p in jupyter.config_problems(config))


def test_the_host_check_reads_a_file(tmp_path, capsys):
    good, bad, broken = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "broken.json"
    good.write_text(json.dumps(jupyter.server_config(GOOD, REAL_ARGON2)))
    config = jupyter.server_config(GOOD, REAL_ARGON2)
    config["ServerApp"]["disable_check_xsrf"] = True
    bad.write_text(json.dumps(config))
    broken.write_text("{")
    assert jupyter.main(["check", str(good)]) == 0
    assert jupyter.main(["check", str(bad)]) == 1
    assert "disable_check_xsrf" in capsys.readouterr().err
    assert jupyter.main(["check", str(broken)]) == 1
    assert jupyter.main(["check"]) == 2
