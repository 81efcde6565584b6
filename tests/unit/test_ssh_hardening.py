"""ssh_hardening: the crypto defaults follow the Terrapin statement in the reference, every default
name is one OpenSSH knows, the defaults leave a usable list on both Debian releases (recorded
`ssh -Q` output), and the on-host rollback script restores the config unless it is cancelled."""
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "ssh_hardening"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
ROLLBACK = ROLE / "files" / "gpufleet-ssh-rollback"
LISTS = {"kex": "ssh_hardening_kex_algorithms", "cipher": "ssh_hardening_ciphers", "mac": "ssh_hardening_macs"}


def words(text):
    return text.split()


# `ssh -Q kex|cipher|mac` in the test images: gpufleet/debian:12 (openssh 1:9.2p1-2+deb12u10) and
# gpufleet/debian:13 (1:10.0p1-7+deb13u4), recorded 2026-11-29.
SUPPORTED_COMMON = {
    "kex": words("""diffie-hellman-group1-sha1 diffie-hellman-group14-sha1 diffie-hellman-group14-sha256
        diffie-hellman-group16-sha512 diffie-hellman-group18-sha512 diffie-hellman-group-exchange-sha1
        diffie-hellman-group-exchange-sha256 ecdh-sha2-nistp256 ecdh-sha2-nistp384 ecdh-sha2-nistp521
        curve25519-sha256 curve25519-sha256@libssh.org sntrup761x25519-sha512
        sntrup761x25519-sha512@openssh.com"""),
    "cipher": words("""3des-cbc aes128-cbc aes192-cbc aes256-cbc aes128-ctr aes192-ctr aes256-ctr aes128-gcm@openssh.com
        aes256-gcm@openssh.com chacha20-poly1305@openssh.com"""),
    "mac": words("""hmac-sha1 hmac-sha1-96 hmac-sha2-256 hmac-sha2-512 hmac-md5 hmac-md5-96 umac-64@openssh.com
        umac-128@openssh.com hmac-sha1-etm@openssh.com hmac-sha1-96-etm@openssh.com hmac-sha2-256-etm@openssh.com
        hmac-sha2-512-etm@openssh.com hmac-md5-etm@openssh.com hmac-md5-96-etm@openssh.com umac-64-etm@openssh.com
        umac-128-etm@openssh.com"""),
}
SUPPORTED = {
    "debian12": SUPPORTED_COMMON,
    "debian13": dict(SUPPORTED_COMMON, kex=SUPPORTED_COMMON["kex"] + ["mlkem768x25519-sha256"]),
}


@pytest.mark.parametrize("kind", sorted(LISTS))
def test_defaults_are_known_and_not_refused(kind):
    names = DEFAULTS[LISTS[kind]]
    assert set(names) <= set(VARS["__ssh_hardening_known"][kind])
    assert not [n for n in names if re.search(VARS["__ssh_hardening_refused_pattern"][kind], n)]


def test_terrapin_affected_algorithms_are_refused():
    # security-reliability.md 1.4: Terrapin affects chacha20-poly1305 and *-etm MACs when the peer lacks strict-kex.
    refused = VARS["__ssh_hardening_refused_pattern"]
    assert re.search(refused["cipher"], "chacha20-poly1305@openssh.com")
    assert re.search(refused["cipher"], "aes256-cbc")
    for mac in VARS["__ssh_hardening_known"]["mac"]:
        if "-etm@" in mac:
            assert re.search(refused["mac"], mac), mac
    assert not re.search(refused["cipher"], "aes256-gcm@openssh.com")


@pytest.mark.parametrize("release", sorted(SUPPORTED))
def test_defaults_leave_strong_lists_on_each_release(release):
    for kind, var in LISTS.items():
        kept = [n for n in DEFAULTS[var] if n in SUPPORTED[release][kind]]
        assert kept, (release, kind)
    kex = [n for n in DEFAULTS["ssh_hardening_kex_algorithms"] if n in SUPPORTED[release]["kex"]]
    # ML-KEM hybrid first where OpenSSH >= 9.9 has it, the sntrup hybrid first otherwise.
    assert kex[0] == ("mlkem768x25519-sha256" if release == "debian13" else "sntrup761x25519-sha512")


def test_argument_spec_lists_match_defaults():
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert spec["ssh_hardening_permit_root_login"]["choices"] == ["auto", "no", "prohibit-password"]
    for var in LISTS.values():
        assert spec[var]["default"] == DEFAULTS[var]


def _start(tmp_path, seconds):
    state = tmp_path / "state"
    state.mkdir()
    config = tmp_path / "sshd_config"
    config.write_text("AllowUsers nobody\n")
    (state / "sshd_config.previous").write_text("PermitRootLogin prohibit-password\n")
    reloaded = tmp_path / "reloaded"
    env = dict(os.environ, GPUFLEET_SSHD_CONFIG=str(config))
    proc = subprocess.Popen(["sh", str(ROLLBACK), str(state), "tok1", str(seconds), "touch", str(reloaded)], env=env)
    for _ in range(50):
        if (state / "armed-tok1").exists():
            break
        time.sleep(0.1)
    assert (state / "armed-tok1").exists(), "the script must say it is armed"
    return proc, state, config, reloaded


def test_rollback_restores_and_reloads_when_not_cancelled(tmp_path):
    proc, state, config, reloaded = _start(tmp_path, 1)
    assert proc.wait(timeout=20) == 0
    assert config.read_text() == "PermitRootLogin prohibit-password\n"
    assert reloaded.exists()
    assert "tok1: no fresh login confirmed within 1s" in (state / "rollback.log").read_text()
    assert not (state / "armed-tok1").exists()
    assert not list(tmp_path.glob(".sshd_config.gpufleet-rollback"))


def test_rollback_does_nothing_when_cancelled(tmp_path):
    proc, state, config, reloaded = _start(tmp_path, 30)
    (state / "cancel-tok1").touch()
    assert proc.wait(timeout=10) == 0
    assert config.read_text() == "AllowUsers nobody\n"
    assert not reloaded.exists()
    assert not (state / "rollback.log").exists()
    assert not (state / "armed-tok1").exists() and not (state / "cancel-tok1").exists()
