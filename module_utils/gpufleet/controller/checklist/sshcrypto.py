# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which SSH algorithms the ssh_hardening role offers on one host.

Plain Python (>= 3.8, stdlib only). In: the role's wanted lists, what the host's OpenSSH supports (`ssh -Q kex`,
`ssh -Q cipher`, `ssh -Q mac`), the crypto profile, whether sshd has strict KEX (the Terrapin fix) and the OpenSSH
release. Out: the lists to write into sshd_config, in the wanted order, and the problems that must stop the role
before anything changes (each one sentence naming the variable, the value and the fix).

Profiles:
  compatible  every wanted key exchange this OpenSSH has, in order: the post-quantum hybrids first where the host has
              them, then curve25519-sha256 for clients that have no hybrid in common with it (OpenSSH < 8.5, Paramiko
              without ML-KEM) and for sshd < 8.5 itself.
  strict      only the post-quantum hybrids among the wanted key exchanges; refused on an OpenSSH that has none.
"""

PROFILES = ("compatible", "strict")

# Hybrid key exchanges that resist a quantum attacker (ssh-audit: no "post-quantum" warning), with the first
# OpenSSH release that has each name (https://www.openssh.com/releasenotes.html: 8.5 sntrup761x25519-sha512@openssh.com,
# 9.9 mlkem768x25519-sha256 and the sntrup761x25519-sha512 alias, backported to some distribution builds, e.g.
# Debian 12's 9.2p1).
POST_QUANTUM_KEX = {
    "mlkem768x25519-sha256": "9.9",
    "sntrup761x25519-sha512": "9.9",
    "sntrup761x25519-sha512@openssh.com": "8.5",
}

# Attackable by Terrapin (CVE-2023-48795) when a peer lacks strict KEX (kex-strict-s-v00@openssh.com).
TERRAPIN_CIPHERS = ("chacha20-poly1305@openssh.com",)
TERRAPIN_MAC_SUFFIX = "-etm@openssh.com"

VARIABLES = {"kex": "ssh_hardening_kex_algorithms", "cipher": "ssh_hardening_ciphers", "mac": "ssh_hardening_macs"}


def openssh_release(text):
    """'OpenSSH_8.4p1 Debian-5+deb11u3, OpenSSL ...' (ssh -V) -> '8.4'; '' when it names no OpenSSH release."""
    start = text.find("OpenSSH_")
    if start < 0:
        return ""
    digits = []
    for char in text[start + len("OpenSSH_"):]:
        if not (char.isdigit() or char == "."):
            break
        digits.append(char)
    return "".join(digits).strip(".")


def is_post_quantum(name):
    return name in POST_QUANTUM_KEX


def _keep(wanted, supported):
    have = set(supported)
    return [name for name in wanted if name in have]


def select(wanted, supported, profile="compatible", strict_kex=True, release=""):
    """The algorithms to offer: {'kex': [...], 'cipher': [...], 'mac': [...], 'problems': [...]}.

    wanted and supported map 'kex', 'cipher' and 'mac' to lists of names. problems is empty when the lists may be
    written; otherwise the role must stop with them, changing nothing.
    """
    if profile not in PROFILES:
        raise ValueError("ssh_hardening_crypto_profile must be one of %s, not %r" % (", ".join(PROFILES), profile))
    openssh = "OpenSSH %s" % release if release else "OpenSSH"
    chosen = {kind: _keep(wanted.get(kind) or [], supported.get(kind) or []) for kind in VARIABLES}
    problems = []

    if profile == "strict":
        wanted_pq = [name for name in wanted.get("kex") or [] if is_post_quantum(name)]
        chosen["kex"] = [name for name in chosen["kex"] if is_post_quantum(name)]
        if not wanted_pq:
            problems.append(
                "ssh_hardening_crypto_profile strict offers only the post-quantum hybrids of "
                "ssh_hardening_kex_algorithms, and it names none (%s)." % ", ".join(wanted.get("kex") or []))
        elif not chosen["kex"]:
            problems.append(
                "ssh_hardening_crypto_profile strict offers only post-quantum hybrid key exchange, and this host's "
                "%s has none of %s (sntrup761x25519-sha512@openssh.com needs OpenSSH >= 8.5, mlkem768x25519-sha256 "
                ">= 9.9). Set ssh_hardening_crypto_profile: compatible (the hybrids the host has, then "
                "curve25519-sha256), or upgrade openssh-server to a release that has a hybrid."
                % (openssh, ", ".join(wanted_pq)))

    for kind, variable in VARIABLES.items():
        if chosen[kind] or (kind == "kex" and profile == "strict"):
            continue
        problems.append(
            "none of the wanted %s algorithms (%s: %s) is supported by this host's %s, which has %s."
            % (kind, variable, ", ".join(wanted.get(kind) or []) or "empty", openssh,
               ", ".join(supported.get(kind) or []) or "none"))

    if not strict_kex:
        affected = [name for name in chosen["cipher"] if name in TERRAPIN_CIPHERS]
        affected += [name for name in chosen["mac"] if name.endswith(TERRAPIN_MAC_SUFFIX)]
        if affected:
            problems.append(
                "this host's sshd has no strict KEX (kex-strict-s-v00@openssh.com, the fix for Terrapin, "
                "CVE-2023-48795: OpenSSH >= 9.6, backported by Debian and Ubuntu to their older releases), so %s "
                "would be attackable. Upgrade openssh-server (apt-get install --only-upgrade openssh-server), or set "
                "ssh_hardening_ciphers without chacha20-poly1305@openssh.com and ssh_hardening_macs to non-etm MACs "
                "(hmac-sha2-512, hmac-sha2-256)." % ", ".join(affected))

    chosen["problems"] = problems
    return chosen
