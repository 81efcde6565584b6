"""ssh_hardening: every default algorithm is one OpenSSH knows and none is refused, the defaults leave a usable
list on both Debian releases (recorded `ssh -Q` output), what they offer there passes ssh-audit's algorithm
database and its built-in Debian policies except for the deviations argued in the README (vars/ssh_audit.yml), and
the on-host rollback script restores the config unless it is cancelled."""
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from ssh_audit import globals as ssh_audit_globals
from ssh_audit.builtin_policies import BUILTIN_POLICIES
from ssh_audit.ssh2_kexdb import SSH2_KexDB

ROLE = Path(__file__).resolve().parents[2] / "roles" / "ssh_hardening"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
ROLLBACK = ROLE / "files" / "gpufleet-ssh-rollback"
AUDIT = yaml.safe_load((ROLE / "vars" / "ssh_audit.yml").read_text())["__ssh_hardening_audit"]
REQUIREMENTS = (ROLE.parents[1] / "requirements.txt").read_text()
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
# Ubuntu (`ssh -Q` in gpufleet/ubuntu:20.04, 22.04 and 24.04 with -updates and -security, recorded 2026-12-05:
# openssh 1:8.2p1-4ubuntu0.13, 1:8.9p1-3ubuntu0.18, 1:9.6p1-3ubuntu13.20): the same MACs; 20.04 also has the
# rijndael-cbc alias (refused as CBC); key exchange: no sntrup761 on 8.2 (only the withdrawn sntrup4591761 of
# tinyssh), sntrup761 under its @openssh.com name only on 8.9 and 9.6.
UBUNTU_KEX = words("""diffie-hellman-group1-sha1 diffie-hellman-group14-sha1 diffie-hellman-group14-sha256
        diffie-hellman-group16-sha512 diffie-hellman-group18-sha512
        diffie-hellman-group-exchange-sha1 diffie-hellman-group-exchange-sha256
        ecdh-sha2-nistp256 ecdh-sha2-nistp384 ecdh-sha2-nistp521 curve25519-sha256
        curve25519-sha256@libssh.org""")
SUPPORTED = {
    "12": SUPPORTED_COMMON,
    "13": dict(SUPPORTED_COMMON, kex=SUPPORTED_COMMON["kex"] + ["mlkem768x25519-sha256"]),
    "20.04": dict(SUPPORTED_COMMON, kex=UBUNTU_KEX + ["sntrup4591761x25519-sha512@tinyssh.org"],
                  cipher=SUPPORTED_COMMON["cipher"] + ["rijndael-cbc@lysator.liu.se"]),
    "22.04": dict(SUPPORTED_COMMON, kex=UBUNTU_KEX + ["sntrup761x25519-sha512@openssh.com"]),
    "24.04": dict(SUPPORTED_COMMON, kex=UBUNTU_KEX + ["sntrup761x25519-sha512@openssh.com"]),
}
# The first key exchange the defaults leave on each release: ML-KEM where OpenSSH >= 9.9 has it, then sntrup761 (under
# the name the release has), curve25519 where there is no hybrid.
FIRST_KEX = {"12": "sntrup761x25519-sha512", "13": "mlkem768x25519-sha256", "20.04": "curve25519-sha256",
             "22.04": "sntrup761x25519-sha512@openssh.com", "24.04": "sntrup761x25519-sha512@openssh.com"}


@pytest.mark.parametrize("kind", sorted(LISTS))
def test_defaults_are_known_and_not_refused(kind):
    names = DEFAULTS[LISTS[kind]]
    assert set(names) <= set(VARS["__ssh_hardening_known"][kind])
    assert not [n for n in names if re.search(VARS["__ssh_hardening_refused_pattern"][kind], n)]


def test_weak_and_group_exchange_algorithms_are_refused():
    refused = VARS["__ssh_hardening_refused_pattern"]
    for cipher in ("aes256-cbc", "aes128-cbc", "3des-cbc"):
        assert re.search(refused["cipher"], cipher), cipher
    for mac in ("hmac-sha1", "hmac-sha1-etm@openssh.com", "hmac-md5", "umac-64-etm@openssh.com"):
        assert re.search(refused["mac"], mac), mac
    # Group exchange: DHEat amplifier, needs /etc/ssh/moduli edited (Debian ships 2048-bit groups), not post-quantum.
    for kex in ("diffie-hellman-group-exchange-sha256", "diffie-hellman-group14-sha256", "ecdh-sha2-nistp256"):
        assert re.search(refused["kex"], kex), kex
    assert not re.search(refused["cipher"], "aes256-gcm@openssh.com")


def test_terrapin_affected_algorithms_are_the_ones_gated_on_strict_kex():
    # CVE-2023-48795 (Terrapin): chacha20-poly1305, and *-etm MACs together with CBC, are attackable when a peer lacks
    # strict KEX; with kex-strict-s-v00@openssh.com on both sides they are not. CBC is refused outright, so only
    # chacha20-poly1305 and the etm MACs are gated on the strict-KEX probe in configure.yml.
    terrapin = VARS["__ssh_hardening_terrapin_pattern"]
    assert re.search(terrapin["cipher"], "chacha20-poly1305@openssh.com")
    for mac in VARS["__ssh_hardening_known"]["mac"]:
        assert bool(re.search(terrapin["mac"], mac)) == mac.endswith("-etm@openssh.com"), mac
    assert not re.search(terrapin["cipher"], "aes256-gcm@openssh.com")


@pytest.mark.parametrize("release", sorted(SUPPORTED))
def test_defaults_leave_strong_lists_on_each_release(release):
    for kind, var in LISTS.items():
        kept = [n for n in DEFAULTS[var] if n in SUPPORTED[release][kind]]
        assert kept, (release, kind)
    kex = [n for n in DEFAULTS["ssh_hardening_kex_algorithms"] if n in SUPPORTED[release]["kex"]]
    assert kex[0] == FIRST_KEX[release]


def test_argument_spec_lists_match_defaults():
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert spec["ssh_hardening_permit_root_login"]["choices"] == ["auto", "no", "prohibit-password"]
    for var in LISTS.values():
        assert spec[var]["default"] == DEFAULTS[var]


# What the hardened sshd offers on each release with the defaults: the wanted names this OpenSSH has, in order, plus
# the pseudo-algorithms sshd appends (strict KEX on every release, Debian's and Ubuntu's backports of the Terrapin fix
# included; ext-info-s from OpenSSH 9.6).
def offered(release):
    kex = [n for n in DEFAULTS["ssh_hardening_kex_algorithms"] if n in SUPPORTED[release]["kex"]]
    kex += ["ext-info-s"] if release in ("13", "24.04") else []
    kex += ["kex-strict-s-v00@openssh.com"]
    return {
        "Key exchanges": kex,
        "Ciphers": [n for n in DEFAULTS["ssh_hardening_ciphers"] if n in SUPPORTED[release]["cipher"]],
        "MACs": [n for n in DEFAULTS["ssh_hardening_macs"] if n in SUPPORTED[release]["mac"]],
        "Host keys": VARS["__ssh_hardening_host_key_algorithms"],
    }


POLICY_KEYS = {"Key exchanges": "kex", "Ciphers": "ciphers", "MACs": "macs", "Host keys": "host_keys"}


@pytest.mark.parametrize("release", sorted(SUPPORTED))
def test_offer_has_no_fail_or_warn_in_ssh_audits_database(release):
    db = SSH2_KexDB.MASTER_DB
    categories = {"Key exchanges": "kex", "Ciphers": "enc", "MACs": "mac", "Host keys": "key"}
    findings = []
    for field, names in offered(release).items():
        for name in names:
            entry = db[categories[field]][name]
            fails, warns = (entry[1] if len(entry) > 1 else []), (entry[2] if len(entry) > 2 else [])
            findings += [name] if fails + warns else []
    # curve25519 (both names) warns "does not provide protection against post-quantum attacks": argued in the README.
    assert sorted(findings) == sorted(AUDIT["findings"])


@pytest.mark.parametrize("release", sorted(SUPPORTED))
def test_offer_meets_ssh_audits_policy_but_for_the_argued_deviations(release):
    policy = BUILTIN_POLICIES[AUDIT["policies"][release]]
    deviations = AUDIT["policy_deviations"][release]
    argued = {d["field"]: d["kind"] for d in deviations}
    mismatched = {}
    for field, mine in offered(release).items():
        wanted = policy[POLICY_KEYS[field]]
        if field == "Host keys" and policy.get("allow_hostkey_subset_and_reordering"):
            if not set(mine) <= set(wanted):
                mismatched[field] = "other"
        elif mine != wanted:
            extra = sorted(set(mine) - set(wanted))
            mismatched[field] = "reorder" if sorted(mine) == sorted(wanted) else (
                "subset" if set(mine) <= set(wanted) else
                "superset" if set(wanted) <= set(mine) and [d.get("extra") for d in deviations
                                                            if d["field"] == field] == [extra] else "other")
    assert mismatched == argued
    assert policy["hostkey_sizes"]["rsa-sha2-512"]["hostkey_size"] == VARS["__ssh_hardening_rsa_bits"]


def test_ssh_audit_pin_is_the_one_installed_and_required():
    assert ssh_audit_globals.VERSION.lstrip("v") == AUDIT["version"]
    assert "\nssh-audit==%s\n" % AUDIT["version"] in REQUIREMENTS
    for name in AUDIT["policies"].values():
        assert name in BUILTIN_POLICIES, name


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
