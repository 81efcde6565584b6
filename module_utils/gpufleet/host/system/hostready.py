# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The renter's readiness checklist on the host: disks, listeners, sshd, packages, the venv, pip, monitoring.

``collect_readiness`` reads /proc/mounts, /proc/net/tcp{,6}, ``sshd -V``/``-T``, ``dpkg-query``, the venv's
site-packages, the pip.conf files, /etc/environment, the monitoring textfile and ``supervisorctl``, all
through injected readers; ``readiness_commands`` lists the commands it will run.
"""

import re

from .hostctx import GPUFLEET_VENV, read_text, safe_call
from .hostnet import MAX_LISTENERS, is_loopback, parse_proc_net_tcp, socket_owners
from .hostres import block_device, disk_info, mount_of, parse_mounts

# Cheap, side-effect-free reads for the renter's checklist (docs/checklist.md). Each helper takes
# plain inputs (file text, command output) so the tests feed it recorded data; ``collect_readiness``
# wires them to the injected readers and never raises.
DATA_DIRS = ("/workspace", "/data")
MONITORING_TEXTFILE = "/var/lib/gpufleet/textfile/gpufleet_gpu.prom"
MONITORING_PROGRAM = "gpufleet-gpu-exporter"
SUPERVISORCTL = "/usr/local/bin/supervisorctl"
DPKG_PACKAGES = ("openssh-server", "nvidia-container-toolkit", "nvidia-container-toolkit-base",
                 "libnvidia-container-tools", "libnvidia-container1")
# The commands collect_readiness runs, in its order (see readiness_commands).
SSH_VERSION_COMMANDS = (("sshd", "-V"), ("/usr/sbin/sshd", "-V"), ("ssh", "-V"))
SSHD_T_COMMANDS = (("sshd", "-T"), ("/usr/sbin/sshd", "-T"))  # as root; the second when the first is not there
DPKG_QUERY = ("dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n") + DPKG_PACKAGES
SUPERVISOR_STATUS = (SUPERVISORCTL, "status", MONITORING_PROGRAM)  # when SUPERVISORCTL exists
PIP_CONFIG_FILES = ("/etc/pip.conf", "/etc/xdg/pip/pip.conf", "/root/.config/pip/pip.conf", "/root/.pip/pip.conf")
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def parse_sshd_t(text):
    """`sshd -T` output -> the settings the checklist reads (lower-case keys, text values)."""
    keep = ("passwordauthentication", "kbdinteractiveauthentication", "permitrootlogin", "pubkeyauthentication",
            "authenticationmethods", "permitemptypasswords", "logingracetime")
    out = {}
    ports = []
    for line in (text or "").splitlines():
        key, _unused, value = line.strip().partition(" ")
        key = key.lower()
        if key in keep and key not in out:
            out[key] = value.strip()
        elif key == "port":
            ports.append(value.strip())
    if ports:
        out["port"] = ports
    return out


def parse_openssh_version(text):
    """"OpenSSH_9.2p1 Debian-2+deb12u10, OpenSSL ..." -> "9.2p1"; "OpenSSH_9.2, OpenSSL" -> "9.2"."""
    m = re.search(r"OpenSSH_(\d+\.\d+(?:p\d+)?)", text or "")
    return m.group(1) if m else None


def parse_dpkg_query(text):
    """Lines "name<TAB>version<TAB>ii " -> {name: version} for installed packages only."""
    out = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) == 2 or len(parts) >= 3 and parts[2].strip().startswith("ii"):
            out[parts[0].strip()] = parts[1].strip()
    return out


def parse_dist_info(names):
    """site-packages entries ("torch-2.5.1+cu121.dist-info") -> {"torch": "2.5.1+cu121"} (names normalized)."""
    out = {}
    for entry in names or ():
        if not entry.endswith(".dist-info"):
            continue
        stem = entry[: -len(".dist-info")]
        name, sep, version = stem.partition("-")
        if sep and version:
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def redact_url(url):
    return _URL_CREDENTIALS.sub("***@", url)


def parse_pip_conf(text):
    """index-url / extra-index-url of a pip.conf (any section), credentials in URLs masked."""
    out = {"index_url": [], "extra_index_url": []}
    current = None  # key whose value continues on indented lines (ini multi-line values)
    for line in (text or "").splitlines():
        if current and line[:1] in (" ", "\t") and line.strip() and not line.strip().startswith(("#", ";")):
            out[current] += [redact_url(v) for v in line.split() if v]
            continue
        current = None
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key = key.strip().lower().replace("_", "-")
        if key in ("index-url", "extra-index-url"):
            current = key.replace("-", "_")
            out[current] += [redact_url(v) for v in value.split() if v]
    return out


def parse_supervisorctl_status(text, program):
    """`supervisorctl status PROGRAM` -> its state ("RUNNING", "FATAL", ...) or None."""
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in (program, "%s:%s" % (program, program)):
            return parts[1]
    return None


def _site_packages(listdir, venv):
    for lib in ("lib", "lib64"):
        for entry in sorted(listdir("%s/%s" % (venv, lib)) or ()):
            if re.match(r"^python3\.\d+$", entry):
                return "%s/%s/%s/site-packages" % (venv, lib, entry), entry[len("python"):]
    return None, None


def readiness_commands(exists=None, geteuid=None):
    """The commands ``collect_readiness`` will run with these readers, slowest first, to start together.

    All three OpenSSH version commands are listed although the probe stops at the first that gives
    the portable version ("9.2p1"): on Debian ``sshd -V`` does not, so all three run there anyway
    (and "sshd" resolves to /usr/sbin/sshd, which ``Prefetch`` runs once). The second ``sshd -T`` only
    runs when the first is not installed, so it is not listed.
    """
    cmds = []
    if exists is not None and safe_call(exists, SUPERVISORCTL):
        cmds.append(list(SUPERVISOR_STATUS))  # a Python program: the slowest by far
    if geteuid is not None and safe_call(geteuid) == 0:
        cmds.append(list(SSHD_T_COMMANDS[0]))
    cmds.append(list(DPKG_QUERY))
    cmds += [list(argv) for argv in SSH_VERSION_COMMANDS]
    return cmds


def collect_readiness(read_file, exists, run=None, statvfs=None, listdir=None, readlink=None, stat=None,
                      environ=None, geteuid=None, probe_tls=None, now=None, venv=GPUFLEET_VENV,
                      data_dirs=DATA_DIRS):
    """Readiness facts for the checklist. Every part has a value or a ``reason``; nothing raises."""
    def rf(path):
        return read_text(read_file, path)

    def out_of(argv):
        """(rc, stdout + stderr text) or None when the command is missing or failed to start."""
        if run is None:
            return None
        res = safe_call(run, argv)
        if not res:
            return None
        rc, out, err = res
        text = b"".join(x if isinstance(x, bytes) else (x or "").encode() for x in (out, err))
        return rc, text.decode("utf-8", "replace")

    ls = (lambda p: safe_call(listdir, p) or []) if listdir else (lambda p: [])
    result = {}

    mounts = parse_mounts(rf("/proc/mounts"))
    disks = []
    for path in ("/",) + tuple(d for d in data_dirs if safe_call(exists, d)):
        m = mount_of(path, mounts)
        dev = block_device(m["device"]) if m else None
        rot = rf("/sys/block/%s/queue/rotational" % dev) if dev else None
        disks.append(disk_info(path, mounts, safe_call(statvfs, path) if statvfs else None, rot))
    result["disks"] = disks

    listeners = []
    tables = {"tcp": rf("/proc/net/tcp"), "tcp6": rf("/proc/net/tcp6")}  # read once: large on busy hosts
    for proto, text in tables.items():
        listeners += [s for s in parse_proc_net_tcp(text, proto) if not is_loopback(s["address"])]
    listeners = listeners[:MAX_LISTENERS]
    owners = safe_call(socket_owners, listdir, readlink, read_file, [s["inode"] for s in listeners]) or {}
    for s in listeners:
        owner = owners.get(s.pop("inode"))
        s["process"] = owner["name"] if owner else None
        s["jupyter"] = bool(owner and (owner["jupyter"] or "jupyter" in (owner["name"] or "")))
        s["tls"] = None
        if s["jupyter"] and probe_tls:
            s["tls"] = safe_call(probe_tls, s["address"], s["port"])
    result["listeners"] = {"readable": tables["tcp"] is not None, "owners_readable": bool(owners),
                           "sockets": listeners}

    sshd = {"version": None, "version_source": None, "package_version": None, "config": None, "reason": None}
    # sshd -V prints "OpenSSH_9.2" on Debian 12 (no portable suffix); ssh -V (the client, same source
    # package) prints "OpenSSH_9.2p1 Debian-2+deb12u10": keep the most precise answer and say where from.
    for argv in SSH_VERSION_COMMANDS:
        res = out_of(list(argv))
        ver = parse_openssh_version(res[1]) if res else None
        if ver and (sshd["version"] is None or ("p" in ver and "p" not in sshd["version"])):
            sshd["version"], sshd["version_source"] = ver, " ".join(argv)
        if sshd["version"] and "p" in sshd["version"]:
            break
    is_root = safe_call(geteuid) == 0 if geteuid else False
    if is_root:
        res = out_of(list(SSHD_T_COMMANDS[0])) or out_of(list(SSHD_T_COMMANDS[1]))
        if res and res[0] == 0:
            sshd["config"] = parse_sshd_t(res[1])
        else:
            sshd["reason"] = "sshd -T failed: %s" % (res[1].strip()[:200] if res else "sshd not found")
    else:
        sshd["reason"] = "not root: sshd -T (effective config) not read"
    dpkg = out_of(list(DPKG_QUERY))
    packages = parse_dpkg_query(dpkg[1]) if dpkg else {}
    result["dpkg_readable"] = dpkg is not None
    sshd["package_version"] = packages.get("openssh-server")
    result["sshd"] = sshd
    result["container_toolkit"] = {k: v for k, v in packages.items() if k in DPKG_PACKAGES and k != "openssh-server"}

    site, pyver = _site_packages(ls, venv)
    result["venv"] = {"path": venv, "exists": bool(safe_call(exists, venv)), "python": pyver,
                      "packages": parse_dist_info(ls(site)) if site else {}}

    pip = {"files": [], "env": {}}
    for path in PIP_CONFIG_FILES + ("%s/pip.conf" % venv,):
        conf = rf(path)
        if conf is not None:
            parsed = parse_pip_conf(conf)
            parsed["path"] = path
            pip["files"].append(parsed)
    env = environ or {}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE"):
        if env.get(key):
            pip["env"][key] = redact_url(env[key])
    for line in (rf("/etc/environment") or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
            pip["env"].setdefault(key.strip(), redact_url(value.strip().strip('"').strip("'")))
    result["pip"] = pip

    mon = {"textfile": MONITORING_TEXTFILE, "textfile_age_s": None, "textfile_size": None, "program": None,
           "reason": None}
    st = safe_call(stat, MONITORING_TEXTFILE) if stat else None
    if st is not None and now is not None:
        mon["textfile_age_s"] = max(0, int(safe_call(now) - st.st_mtime)) if safe_call(now) is not None else None
        mon["textfile_size"] = st.st_size
    elif st is None:
        mon["reason"] = "%s absent" % MONITORING_TEXTFILE
    if safe_call(exists, SUPERVISORCTL):
        res = out_of(list(SUPERVISOR_STATUS))
        status = parse_supervisorctl_status(res[1], MONITORING_PROGRAM) if res else None
        mon["program"] = status
    result["monitoring"] = mon
    return result
