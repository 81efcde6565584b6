"""ssh_hardening's choice of algorithms (module_utils/gpufleet/controller/checklist/sshcrypto.py) on the OpenSSH
releases rented
containers come with: 8.2 (Ubuntu 20.04), 8.4 (Debian 11), 8.9 (Ubuntu 22.04), 9.2 (Debian 12), 10.0 (Debian 13).
The compatible default works on each and still lets an old client in; the strict profile offers hybrids only and is
refused, with nothing changed, where the host's OpenSSH has none."""
from pathlib import Path

import pytest
import yaml
from gpufleet.controller.checklist import sshcrypto

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((ROOT / "roles" / "ssh_hardening" / "defaults" / "main.yml").read_text())
WANTED = {"kex": DEFAULTS["ssh_hardening_kex_algorithms"], "cipher": DEFAULTS["ssh_hardening_ciphers"],
          "mac": DEFAULTS["ssh_hardening_macs"]}


def words(text):
    return text.split()


DH_ECDH = words("""diffie-hellman-group1-sha1 diffie-hellman-group14-sha1 diffie-hellman-group14-sha256
    diffie-hellman-group16-sha512 diffie-hellman-group18-sha512 diffie-hellman-group-exchange-sha1
    diffie-hellman-group-exchange-sha256 ecdh-sha2-nistp256 ecdh-sha2-nistp384 ecdh-sha2-nistp521
    curve25519-sha256 curve25519-sha256@libssh.org""")
CIPHERS = words("""3des-cbc aes128-cbc aes192-cbc aes256-cbc aes128-ctr aes192-ctr aes256-ctr aes128-gcm@openssh.com
    aes256-gcm@openssh.com chacha20-poly1305@openssh.com""")
# OpenSSH 8.2-8.4 still list the aes256-cbc alias rijndael-cbc@lysator.liu.se (gone by 8.9).
CIPHERS_8X = CIPHERS[:4] + ["rijndael-cbc@lysator.liu.se"] + CIPHERS[4:]
MACS = words("""hmac-sha1 hmac-sha1-96 hmac-sha2-256 hmac-sha2-512 hmac-md5 hmac-md5-96 umac-64@openssh.com
    umac-128@openssh.com hmac-sha1-etm@openssh.com hmac-sha1-96-etm@openssh.com hmac-sha2-256-etm@openssh.com
    hmac-sha2-512-etm@openssh.com hmac-md5-etm@openssh.com hmac-md5-96-etm@openssh.com umac-64-etm@openssh.com
    umac-128-etm@openssh.com""")

# What `ssh -Q kex|cipher|mac` reports on each release.
# 8.2, 8.9: the kexalgs/ciphers/macs tables of openssh-portable's kex.c, cipher.c and mac.c at tags V_8_2_P1 and
#   V_8_9_P1 (built with OpenSSL, as Ubuntu builds them; no Ubuntu archive is reachable here to record them).
# 8.4: recorded in gpufleet/debian:11 (openssh-client 1:8.4p1-5+deb11u3), 2026-12-04.
# 9.2, 10.0: recorded in gpufleet/debian:12 (1:9.2p1-2+deb12u10) and :13 (1:10.0p1-7+deb13u4), 2026-11-29 (also in
#   tests/unit/test_ssh_hardening.py).
SUPPORTED = {
    "8.2": {"kex": DH_ECDH + ["sntrup4591761x25519-sha512@tinyssh.org"], "cipher": CIPHERS_8X, "mac": MACS},
    "8.4": {"kex": DH_ECDH + ["sntrup4591761x25519-sha512@tinyssh.org"], "cipher": CIPHERS_8X, "mac": MACS},
    "8.9": {"kex": DH_ECDH + ["sntrup761x25519-sha512@openssh.com"], "cipher": CIPHERS, "mac": MACS},
    "9.2": {"kex": DH_ECDH + ["sntrup761x25519-sha512", "sntrup761x25519-sha512@openssh.com"], "cipher": CIPHERS,
            "mac": MACS},
    "10.0": {"kex": DH_ECDH + ["sntrup761x25519-sha512", "sntrup761x25519-sha512@openssh.com",
                               "mlkem768x25519-sha256"], "cipher": CIPHERS, "mac": MACS},
}
CURVE = ["curve25519-sha256", "curve25519-sha256@libssh.org"]
COMPATIBLE_KEX = {
    "8.2": CURVE,
    "8.4": CURVE,
    "8.9": ["sntrup761x25519-sha512@openssh.com"] + CURVE,
    "9.2": ["sntrup761x25519-sha512", "sntrup761x25519-sha512@openssh.com"] + CURVE,
    "10.0": ["mlkem768x25519-sha256", "sntrup761x25519-sha512", "sntrup761x25519-sha512@openssh.com"] + CURVE,
}
STRICT_KEX = {release: [n for n in kex if n not in CURVE] for release, kex in COMPATIBLE_KEX.items()}


@pytest.mark.parametrize("release", sorted(SUPPORTED))
def test_compatible_default_works_on_every_openssh_from_8_2(release):
    got = sshcrypto.select(WANTED, SUPPORTED[release], "compatible", True, release)
    assert got["problems"] == []
    assert got["kex"] == COMPATIBLE_KEX[release]
    # The ciphers and MACs of the defaults are all in OpenSSH since 6.5: the same lists everywhere.
    assert got["cipher"] == WANTED["cipher"]
    assert got["mac"] == WANTED["mac"]


@pytest.mark.parametrize("release", sorted(SUPPORTED))
def test_strict_offers_only_hybrids_and_is_refused_without_one(release):
    got = sshcrypto.select(WANTED, SUPPORTED[release], "strict", True, release)
    assert got["kex"] == STRICT_KEX[release]
    if STRICT_KEX[release]:
        assert got["problems"] == []
    else:
        assert len(got["problems"]) == 1
        problem = got["problems"][0]
        for part in ("ssh_hardening_crypto_profile strict", "OpenSSH %s has none of" % release,
                     "sntrup761x25519-sha512@openssh.com needs OpenSSH >= 8.5",
                     "ssh_hardening_crypto_profile: compatible"):
            assert part in problem, problem


def test_the_old_sntrup4591761_hybrid_is_not_taken_for_a_post_quantum_one():
    # OpenSSH 8.0-8.4 have sntrup4591761x25519-sha512@tinyssh.org, withdrawn in 8.5 for sntrup761: the role never
    # offers it, so strict is refused on 8.4 rather than falling back to it.
    assert not sshcrypto.is_post_quantum("sntrup4591761x25519-sha512@tinyssh.org")
    wanted = dict(WANTED, kex=["sntrup4591761x25519-sha512@tinyssh.org"] + WANTED["kex"])
    assert sshcrypto.select(wanted, SUPPORTED["8.4"], "strict", True, "8.4")["problems"]


def test_defaults_put_every_hybrid_before_the_classic_fallback():
    kex = WANTED["kex"]
    hybrids = [n for n in kex if sshcrypto.is_post_quantum(n)]
    assert kex[:len(hybrids)] == hybrids
    assert kex[len(hybrids):] == CURVE


# Clients a renter uses. OpenSSH client 8.4 (Debian 11) and 8.2 (Ubuntu 20.04) offer what they support; Paramiko's
# list is read from the pinned release in the controller venv (requirements.txt).
OLD_OPENSSH_CLIENT = SUPPORTED["8.4"]["kex"]


@pytest.mark.parametrize("release", sorted(SUPPORTED))
def test_an_openssh_8_4_client_gets_in_under_compatible_on_every_release(release):
    offer = sshcrypto.select(WANTED, SUPPORTED[release], "compatible", True, release)["kex"]
    assert [n for n in OLD_OPENSSH_CLIENT if n in offer]
    strict = sshcrypto.select(WANTED, SUPPORTED[release], "strict", True, release)["kex"]
    assert not [n for n in OLD_OPENSSH_CLIENT if n in strict]


@pytest.mark.parametrize("release", sorted(SUPPORTED))
def test_paramiko_gets_in_under_compatible_and_only_with_ml_kem_under_strict(release):
    paramiko = pytest.importorskip("paramiko")
    client = list(paramiko.Transport._preferred_kex)
    offer = sshcrypto.select(WANTED, SUPPORTED[release], "compatible", True, release)
    assert [n for n in client if n in offer["kex"]], (release, client)
    assert [n for n in paramiko.Transport._preferred_ciphers if n in offer["cipher"]]
    assert [n for n in paramiko.Transport._preferred_macs if n in offer["mac"]]
    strict = sshcrypto.select(WANTED, SUPPORTED[release], "strict", True, release)["kex"]
    common = [n for n in client if n in strict]
    # Paramiko has no sntrup761; it has ML-KEM where the installed cryptography does (Paramiko 5.x).
    assert common == [n for n in ["mlkem768x25519-sha256"] if n in strict and n in client]


def test_terrapin_affected_algorithms_are_refused_without_strict_kex():
    got = sshcrypto.select(WANTED, SUPPORTED["8.4"], "compatible", False, "8.4")
    assert len(got["problems"]) == 1
    assert "chacha20-poly1305@openssh.com, hmac-sha2-512-etm@openssh.com" in got["problems"][0]
    assert "CVE-2023-48795" in got["problems"][0]
    safe = dict(WANTED, cipher=["aes256-gcm@openssh.com", "aes256-ctr"], mac=["hmac-sha2-512", "hmac-sha2-256"])
    assert sshcrypto.select(safe, SUPPORTED["8.4"], "compatible", False, "8.4")["problems"] == []


def test_nothing_supported_names_the_variable_and_what_the_host_has():
    got = sshcrypto.select(dict(WANTED, kex=["mlkem768x25519-sha256"]), SUPPORTED["8.4"], "compatible", True, "8.4")
    assert got["kex"] == []
    assert len(got["problems"]) == 1
    problem = got["problems"][0]
    assert problem.startswith("none of the wanted kex algorithms (ssh_hardening_kex_algorithms: mlkem768x25519-sha256)")
    assert "OpenSSH 8.4, which has diffie-hellman-group1-sha1" in problem


def test_strict_with_no_hybrid_wanted_is_refused():
    got = sshcrypto.select(dict(WANTED, kex=CURVE), SUPPORTED["10.0"], "strict", True, "10.0")
    assert got["kex"] == []
    assert "names none" in got["problems"][0]


def test_unknown_profile_is_an_error():
    with pytest.raises(ValueError, match="compatible, strict"):
        sshcrypto.select(WANTED, SUPPORTED["9.2"], "paranoid")


@pytest.mark.parametrize("text, release", [
    ("OpenSSH_8.4p1 Debian-5+deb11u3, OpenSSL 1.1.1w  11 Sep 2023", "8.4"),
    ("OpenSSH_8.2p1 Ubuntu-4ubuntu0.13, OpenSSL 1.1.1f  31 Mar 2020", "8.2"),
    ("OpenSSH_10.0p2 Debian-7, OpenSSL 3.5.1 1 Jul 2025", "10.0"),
    ((ROOT / "tests" / "fixtures" / "host" / "debian12_ssh-V.txt").read_text(), "9.2"),
    ("ssh: command not found", ""),
])
def test_openssh_release_is_read_from_ssh_v(text, release):
    assert sshcrypto.openssh_release(text) == release
