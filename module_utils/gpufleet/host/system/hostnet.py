# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who listens on the host's network: /proc/net/tcp and tcp6, the processes that own the sockets
(/proc/<pid>/fd, /proc/<pid>/comm and cmdline), and whether a listener speaks TLS (one local handshake).
"""

MAX_SOCKET_FDS = 20000
MAX_LISTENERS = 64
_TCP_LISTEN = "0A"


def _hex_addr(text):
    """Address field of /proc/net/tcp{,6} ("0100007F:22C3") -> (address text, port)."""
    addr, _unused, port = text.partition(":")
    raw = bytes.fromhex(addr)
    if len(raw) == 4:
        ip = ".".join(str(b) for b in raw[::-1])
    else:  # four 32-bit words, each in host (little-endian) order
        words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
        flat = b"".join(words)
        groups = ["%x" % int.from_bytes(flat[i:i + 2], "big") for i in range(0, 16, 2)]
        if flat[:12] == b"\0" * 10 + b"\xff\xff":  # IPv4-mapped: written the way people read it
            ip = "::ffff:" + ".".join(str(b) for b in flat[12:])
        else:
            ip = _compress_v6(":".join(groups))
    return ip, int(port, 16)


def _compress_v6(ip):
    try:
        import ipaddress

        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ip


def is_loopback(address):
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1") or address.startswith("::ffff:127.")


def parse_proc_net_tcp(text, proto="tcp"):
    """Listening sockets from /proc/net/tcp or tcp6: [{"proto", "address", "port", "inode"}]."""
    out = []
    for line in (text or "").splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or parts[3] != _TCP_LISTEN:
            continue
        try:
            address, port = _hex_addr(parts[1])
        except ValueError:
            continue
        out.append({"proto": proto, "address": address, "port": port, "inode": parts[9]})
    return out


def socket_owners(listdir, readlink, read_file, inodes, max_fds=MAX_SOCKET_FDS):
    """{inode: process name} for the given socket inodes, from /proc/<pid>/fd (what is readable)."""
    owners = {}
    if not inodes or listdir is None or readlink is None:
        return owners
    wanted = {"socket:[%s]" % i: i for i in inodes}
    seen = 0
    for pid in listdir("/proc") or ():
        if not pid.isdigit():
            continue
        fds = listdir("/proc/%s/fd" % pid) or ()
        for fd in fds:
            seen += 1
            if seen > max_fds:
                return owners
            target = readlink("/proc/%s/fd/%s" % (pid, fd))
            if target in wanted and wanted[target] not in owners:
                comm = read_file("/proc/%s/comm" % pid)
                if isinstance(comm, bytes):
                    comm = comm.decode("utf-8", "replace")
                cmdline = read_file("/proc/%s/cmdline" % pid) or b""
                if isinstance(cmdline, str):
                    cmdline = cmdline.encode()
                args = [a.decode("utf-8", "replace") for a in cmdline.split(b"\0") if a][:4]
                owners[wanted[target]] = {"pid": int(pid), "name": (comm or "").strip() or None,
                                          "jupyter": any("jupyter" in a for a in args)}
        if len(owners) == len(wanted):
            break
    return owners


def tls_probe(address, port, timeout=2.0):
    """"tls" if a TLS handshake to address:port succeeds, "plain" if the peer answers but not with TLS,
    None when nothing answers. Connects locally only; sends a ClientHello and nothing else."""
    import socket
    import ssl

    target = "127.0.0.1" if address in ("0.0.0.0", "") else ("::1" if address == "::" else address)  # noqa: S104
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # only asks "does it speak TLS", trusts nothing it says
    try:
        sock = socket.create_connection((target, port), timeout=timeout)
    except OSError:
        return None
    try:
        with ctx.wrap_socket(sock, server_hostname=None):
            return "tls"
    except ssl.SSLError:
        return "plain"
    except OSError:
        return "plain"
    finally:
        sock.close()
