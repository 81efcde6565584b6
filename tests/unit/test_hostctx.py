"""Host context from plain inputs (hostenv, hostres, hostnet, hostready), Xid parsing of recorded kernel logs
(kmsg), and the command runner and readers they share (hostctx)."""

import os
import types

import pytest
from gpufleet.host.system import hostctx, hostenv, hostnet, hostready, hostres, kmsg

from tests.unit.doubles import FIXTURES, fixture_bytes


def log(name):
    return fixture_bytes("kernel_logs", name)


def test_xid_48_63_94_iso_dmesg():
    x = kmsg.parse_kernel_log(log("gpud_xid48-63-94_peermem_dmesg-iso.log"), "dmesg")
    assert x["readable"] and x["source"] == "dmesg"
    assert x["counts"] == {"48": 1, "63": 1, "94": 9}
    first = x["events"][0]
    assert first["xid"] == 48 and first["pci"] == "0000:19:00" and first["pid"] is None
    assert first["severity"] == "critical"
    assert first["text"].startswith("An uncorrectable double bit error (DBE)")
    named = [e for e in x["events"] if e["pid"] == 1248209]
    assert named and named[0]["process"] == "python3.10" and named[0]["severity"] == "warning"


def test_xid_119_bracketed_timestamps():
    x = kmsg.parse_kernel_log(log("gpud_h100-xe9680_xid119-gsp-timeout_dmesg.log"))
    assert x["counts"] == {"119": 5}
    assert {e["pci"] for e in x["events"]} == {"0000:9b:00"}
    assert x["events"][0]["pid"] == 2024380 and x["events"][0]["process"] == "nvidia-smi"
    assert [m["code"] for m in x["nvrm_messages"]] == ["gsp_rpc_rate_limited"]


def test_many_xid_13_lines_are_capped_but_counted():
    x = kmsg.parse_kernel_log(log("gpud_xid13-43_dmesg-decode-iso.log"))
    assert x["total"] == 636 and x["counts"] == {"13": 629, "43": 7}
    assert x["counts_by_pci"] == {"13@0000:38:00": 629, "43@0000:38:00": 7}
    assert x["truncated"] and len(x["events"]) == kmsg.MAX_EVENTS
    assert {e["xid"] for e in x["events"]} == {13, 43}  # the rarer code survives the cap
    assert all(e["severity"] == "app" for e in x["events"])


def test_journal_xid_45():
    x = kmsg.parse_kernel_log(log("ogkm-1150_xid45-caused-by-xid149-145_590.48.01_journal.log"))
    assert x["counts"] == {"45": 7}
    assert {e["pci"] for e in x["events"]} == {"0000:dc:00", "0000:ed:00", "0000:ba:00", "0000:97:00"}
    assert x["events"][0]["text"] == "Ch 00000001 caused by previous Xid 149"


def test_legacy_fallen_off_the_bus_is_xid_79():
    x = kmsg.parse_kernel_log(log("bumblebee-554_gpu-fallen-off-bus-legacy-format_dmesg.log"))
    assert x["counts"] == {"79": 2}
    assert x["events"][0]["pci"] == "0000:01:00" and x["events"][0]["severity"] == "critical"
    assert x["events"][0]["derived"] is True


def test_syslog_escaped_newlines_and_api_mismatch():
    name = "stackhpc-slurm-appliance-287_api-mismatch-syslog-escaped-012_535.54.03-vs-530.30.02.log"
    x = kmsg.parse_kernel_log(log(name))
    assert x["events"] == []
    assert x["nvrm_messages"][0]["code"] == "api_mismatch"
    # an Xid inside a #012-escaped syslog line is still found
    line = (b"Jun 30 11:07:05 gpu-0 kernel: NVRM: something#012NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, "
            b"name=python, GPU has fallen off the bus.")
    x = kmsg.parse_kernel_log(line)
    assert [(e["xid"], e["pci"], e["pid"]) for e in x["events"]] == [(79, "0000:3b:00", 1234)]


def test_clean_boot_log_has_no_events():
    x = kmsg.parse_kernel_log(log("gpud_535.129.03_boot_dmesg.log"))
    assert x["events"] == [] and x["total"] == 0 and x["readable"]


def test_no_adapter_probed():
    x = kmsg.parse_kernel_log(log("mattshma-bigdata-133_no-adapter-probed_nouveau-conflict_dmesg.log"))
    assert "no_adapter_probed" in [m["code"] for m in x["nvrm_messages"]]


def test_unknown_xid_code_is_unknown_not_guessed():
    x = kmsg.parse_kernel_log("NVRM: Xid (PCI:0000:01:00): 999, pid=1, name=x, whatever")
    assert x["events"][0]["severity"] == "unknown"


def test_every_xid_class_has_a_source():
    for code, entry in kmsg.XID_CLASSES.items():
        assert entry["severity"] in ("critical", "warning", "app"), code
        assert entry["source"], code
    assert kmsg.XID_CLASSES[79]["severity"] == "critical"


@pytest.mark.parametrize(("pci", "norm"), [
    ("00000000:19:00.0", "0000:19:00"), ("PCI:0000:3b:00", "0000:3b:00"), ("0000:3B:00.0", "0000:3b:00"),
    (None, None),
])
def test_normalize_pci(pci, norm):
    assert kmsg.normalize_pci(pci) == norm


# ----------------------------------------------------------------------------- host context
OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n'
MEMINFO = "MemTotal:       2113567300 kB\nMemFree:        1000 kB\n"
CPUINFO = ("processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu hypervisor\n\n"
           "processor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu hypervisor\n")


def host(files, existing=(), run=None, rlimit=(65536, 65536)):
    return hostenv.collect_host(
        read_file=lambda p: files.get(p), exists=lambda p: p in existing, run=run,
        statvfs=lambda p: types.SimpleNamespace(f_frsize=4096, f_blocks=16384),
        getrlimit=lambda: rlimit, rlim_infinity=-1, uname_release="6.1.0-18-amd64")


def test_docker_container_without_systemd():
    h = host({"/etc/os-release": OS_RELEASE, "/proc/meminfo": MEMINFO, "/proc/cpuinfo": CPUINFO,
              "/proc/1/comm": "tini\n", "/proc/1/cgroup": "0::/\n", "/sys/fs/cgroup/cpu.max": "800000 100000\n"},
             existing={"/.dockerenv"})
    assert h["container"] is True and h["container_kind"] == "docker"
    assert h["init_system"] == "none" and h["pid1_comm"] == "tini"
    assert h["os"] == {"id": "debian", "version_id": "12", "pretty_name": "Debian GNU/Linux 12 (bookworm)"}
    assert h["cpu"] == {"model": "AMD EPYC 9654 96-Core Processor", "count": 2, "quota": 8.0}
    assert h["memory_total_mib"] == 2113567300 // 1024
    assert h["shm_size_mib"] == 64
    assert h["memlock_limit_kib"] == 64
    assert h["kernel"] == "6.1.0-18-amd64"
    assert h["virtualization"] == "unknown-hypervisor"  # hypervisor CPU flag, no better hint


def test_systemd_vm():
    def run(argv):
        return (0, b"kvm\n", b"") if argv[-1] == "--vm" else (1, b"none\n", b"")
    h = host({"/proc/1/comm": "systemd\n", "/proc/1/cgroup": "0::/init.scope\n"},
             existing={"/run/systemd/system"}, run=run, rlimit=(-1, -1))
    assert h["container"] is False and h["container_kind"] is None
    assert h["virtualization"] == "kvm" and h["init_system"] == "systemd"
    assert h["memlock_limit_kib"] == "unlimited"


@pytest.mark.parametrize(("kwargs", "kind"), [
    ({"containerenv": True}, "podman"),
    ({"environ": b"PATH=/bin\0container=lxc\0"}, "lxc"),
    ({"cgroup": "12:pids:/kubepods/besteffort/pod1/abc\n"}, "kubernetes"),
    ({"cgroup": "11:memory:/docker/0123abcd\n"}, "docker"),
    ({"detect_virt_container": "systemd-nspawn"}, "systemd-nspawn"),
])
def test_container_signs(kwargs, kind):
    assert hostenv.detect_container(**kwargs) == (True, kind)


def test_bare_metal():
    assert hostenv.detect_container(cgroup="0::/init.scope\n", detect_virt_container="none") == (False, None)
    assert hostenv.detect_virtualization(None, "PowerEdge XE9680", "Dell Inc.", "flags : fpu\n") is None
    assert hostenv.detect_virtualization(None, "Google Compute Engine", "Google", None) == "google"


def test_broken_readers_do_not_raise():
    def boom(path):
        raise PermissionError(path)
    h = hostenv.collect_host(read_file=boom, exists=lambda p: False, run=lambda a: (_ for _ in ()).throw(OSError()),
                             statvfs=boom, getrlimit=boom)
    assert h["container"] is False and h["os"]["id"] is None and h["memlock_limit_kib"] is None


def test_real_host_readers_work_here():
    # smoke test on this machine's real files: the shapes are right whatever the host is
    def read(path):
        if not os.path.exists(path):
            return None
        with open(path, "rb") as fh:
            return fh.read()

    h = hostenv.collect_host(read_file=read,
                             exists=os.path.exists, statvfs=os.statvfs,
                             getrlimit=lambda: __import__("resource").getrlimit(__import__("resource").RLIMIT_MEMLOCK))
    assert isinstance(h["container"], bool)
    assert h["init_system"] in ("systemd", "none")
    assert h["memory_total_mib"] and h["memory_total_mib"] > 0


# ----------------------------------------------------------------------------- readiness probes
def fx(name):
    return (FIXTURES / "host" / name).read_text()


def test_proc_net_tcp_recorded_in_a_container():
    v4 = hostnet.parse_proc_net_tcp(fx("debian12_proc_net_tcp.txt"))
    any4 = ".".join(["0"] * 4)  # read back from /proc/net/tcp, nothing binds
    assert [(s["address"], s["port"]) for s in v4] == [("127.0.0.1", 8899), (any4, 8888), (any4, 22)]
    v6 = hostnet.parse_proc_net_tcp(fx("debian12_proc_net_tcp6.txt"), "tcp6")
    assert [(s["proto"], s["address"], s["port"], s["inode"]) for s in v6] == [("tcp6", "::", 22, "5054621")]
    assert hostnet.is_loopback("127.0.0.1") and hostnet.is_loopback("::1") and not hostnet.is_loopback("::")


def test_ipv6_loopback_and_mapped_addresses():
    line = "  sl  local\n   0: %s:1F90 00000000000000000000000000000000:0000 0A 0 0 0 0 0 0 0 123 1\n"
    assert hostnet.parse_proc_net_tcp(line % ("00000000000000000000000001000000"), "tcp6")[0]["address"] == "::1"
    mapped = hostnet.parse_proc_net_tcp(line % ("0000000000000000FFFF00000100007F"), "tcp6")[0]
    assert mapped["address"] == "::ffff:127.0.0.1" and mapped["port"] == 8080
    assert hostnet.is_loopback(mapped["address"])


def test_sshd_t_and_versions_recorded():
    cfg = hostready.parse_sshd_t(fx("debian12_sshd-T.txt"))
    assert cfg["passwordauthentication"] == "yes" and cfg["kbdinteractiveauthentication"] == "no"
    assert cfg["port"] == ["22"]
    assert hostready.parse_openssh_version(fx("debian12_ssh-V.txt")) == "9.2p1"
    assert hostready.parse_openssh_version("OpenSSH_9.2, OpenSSL 3.0.20 7 Apr 2026") == "9.2"
    assert hostready.parse_openssh_version("unknown option -- V") is None
    assert hostready.parse_dpkg_query(fx("debian12_dpkg-query.txt")) == {"openssh-server": "1:9.2p1-2+deb12u10",
                                                                         "python3": "3.11.2-1+b1"}


@pytest.mark.parametrize(("device", "block"), [
    ("/dev/nvme0n1p2", "nvme0n1"), ("/dev/sda1", "sda"), ("/dev/vda", "vda"), ("/dev/xvda1", "xvda"),
    ("overlay", None), ("/dev/mapper/vg-root", None), ("tmpfs", None),
])
def test_block_device(device, block):
    assert hostres.block_device(device) == block


def test_disk_kinds_from_recorded_mounts():
    vfs = types.SimpleNamespace(f_frsize=4096, f_bavail=2621440, f_blocks=26214400)
    vm = hostres.parse_mounts(fx("vm_proc_mounts.txt"))
    root = hostres.disk_info("/", vm, vfs, "1\n")
    assert (root["device"], root["fstype"], root["free_gib"], root["total_gib"]) == ("/dev/vda", "ext4", 10.0, 100.0)
    assert root["rotational"] is True and root["local_ssd"] is False  # virtio disk says rotational here
    assert hostres.disk_info("/", vm, vfs, "0\n")["local_ssd"] is True
    assert hostres.disk_info("/", vm, vfs, None)["local_ssd"] is None
    docker = hostres.parse_mounts(fx("docker_proc_mounts.txt"))
    over = hostres.disk_info("/workspace", docker, vfs, None)
    assert over["fstype"] == "overlay" and over["local_ssd"] is None and "overlay" in over["reason"]
    nfs = hostres.disk_info("/data/x", docker + [{"device": "srv:/d", "mountpoint": "/data", "fstype": "nfs4"}],
                            vfs, None)
    assert nfs["network"] is True and nfs["local_ssd"] is False and nfs["mountpoint"] == "/data"


def test_pip_conf_masks_credentials_and_dist_info_names():
    conf = hostready.parse_pip_conf("[global]\nindex-url=https://pypi.org/simple\n[install]\n"
                                  "extra_index_url = https://tok:s3cret@x.example/simple https://download.pytorch.org/whl/cu121\n")
    assert conf == {"index_url": ["https://pypi.org/simple"],
                    "extra_index_url": ["https://***@x.example/simple", "https://download.pytorch.org/whl/cu121"]}
    multi = hostready.parse_pip_conf("[global]\nextra-index-url =\n    https://download.pytorch.org/whl/cu121\n"
                                   "    https://a:b@mirror.example/simple\ntimeout = 60\n  # indented comment\n")
    assert multi["extra_index_url"] == ["https://download.pytorch.org/whl/cu121", "https://***@mirror.example/simple"]
    assert hostready.parse_dist_info(["torch-2.5.1+cu121.dist-info", "Jupyter_Server-2.14.0.dist-info", "x.py",
                                    "nvidia_ml_py-13.615.71.dist-info"]) == {
        "torch": "2.5.1+cu121", "jupyter-server": "2.14.0", "nvidia-ml-py": "13.615.71"}


def test_supervisorctl_status():
    out = "gpufleet-gpu-exporter            RUNNING   pid 41, uptime 0:03:12\n"
    assert hostready.parse_supervisorctl_status(out, "gpufleet-gpu-exporter") == "RUNNING"
    assert hostready.parse_supervisorctl_status("gpufleet-gpu-exporter: ERROR (no such process)\n",
                                              "gpufleet-gpu-exporter") is None


def test_tls_probe_tells_plain_http_from_nothing():
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def answer():
        conn, _ = srv.accept()
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        conn.close()

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    assert hostnet.tls_probe("0.0.0.0", port, timeout=5) == "plain"  # noqa: S104 - the probe maps it to 127.0.0.1
    t.join(5)
    srv.close()
    assert hostnet.tls_probe("127.0.0.1", port, timeout=1) is None  # nothing listens any more


def test_tls_probe_sees_tls(tmp_path):
    import shutil
    import socket
    import ssl
    import subprocess
    import threading

    if not shutil.which("openssl"):
        pytest.skip("openssl not installed: cannot make a test certificate")
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-days", "1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def answer():
        conn, _ = srv.accept()
        try:
            with ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    assert hostnet.tls_probe("127.0.0.1", srv.getsockname()[1], timeout=5) == "tls"
    t.join(5)
    srv.close()


def test_readiness_never_raises_on_broken_readers():
    def boom(*a):
        raise PermissionError("no")
    r = hostready.collect_readiness(read_file=boom, exists=boom, run=boom, statvfs=boom, listdir=boom, readlink=boom,
                                  stat=boom, environ=None, geteuid=boom, probe_tls=boom, now=boom)
    assert r["listeners"]["readable"] is False and r["sshd"]["version"] is None
    assert r["venv"]["packages"] == {} and r["monitoring"]["reason"].endswith("absent")


# ----------------------------------------------------------------------------- commands, kernel log
def test_read_kernel_log_prefers_dmesg_then_journalctl_then_kern_log():
    dmesg = fixture_bytes("kernel_logs", "gpud_h100-xe9680_xid119-gsp-timeout_dmesg.log")
    assert kmsg.read_kernel_log(lambda argv: (0, dmesg, b"")) == {"text": dmesg, "source": "dmesg"}
    answers = {"dmesg": (1, b"", b"dmesg: read kernel buffer failed: Operation not permitted\n"),
               "journalctl": (0, b"kernel: NVRM: loading\n", b"")}
    asked = []

    def run(argv):
        asked.append(argv)
        return answers.get(argv[0])
    got = kmsg.read_kernel_log(run)
    assert got == {"text": b"kernel: NVRM: loading\n", "source": "journalctl -k"}
    assert asked == [["dmesg"], ["journalctl", "-k", "-b", "--no-pager", "-q"]]
    got = kmsg.read_kernel_log(lambda argv: None, read_tail=lambda path, limit: "")
    assert got == {"text": None, "source": None, "reason": "dmesg: not installed; journalctl: not installed; "
                                                          "/var/log/kern.log: absent or empty"}
    got = kmsg.read_kernel_log(lambda argv: (1, b"", b"Operation not permitted"),
                                  read_tail=lambda path, limit: "kernel: hello\n")
    assert got == {"text": "kernel: hello\n", "source": "/var/log/kern.log"}


def test_read_tail_keeps_the_end(tmp_path):
    log_file = tmp_path / "kern.log"
    log_file.write_bytes(b"old line\nnew line\n")
    assert hostctx.read_tail(str(log_file), 9) == "new line\n"
    assert hostctx.read_tail(str(log_file), 1 << 20) == "old line\nnew line\n"
    assert hostctx.read_tail(str(tmp_path / "absent"), 10) == ""
    assert hostctx.read_tail(str(tmp_path), 10) is None  # a folder: there, not readable as a file


def test_command_runner_runs_real_commands(tmp_path):
    run = hostctx.command_runner(environ={"PATH": os.environ["PATH"], "PYTHONPATH": "/x/ansible_modlib.zip:/keep"})
    assert run(["sh", "-c", "echo out; echo err >&2; exit 3"]) == (3, b"out\n", b"err\n")
    assert run(["cat"]) == (0, b"", b"")  # stdin is /dev/null: nothing waits on the module's own stdin
    assert run(["sh", "-c", "echo $PYTHONPATH"])[1] == b"/keep\n"  # the payload's entry is dropped
    assert run(["gpufleet-no-such-command"]) is None
    script = tmp_path / "not-executable-for-exec"
    script.write_text("no shebang, no exec format\n")
    script.chmod(0o755)
    rc, out, err = run([str(script)])
    assert rc == 126 and out == b"" and str(script).encode() in err


def test_command_runner_sets_the_locale_and_the_calls_environment():
    run = hostctx.command_runner(environ={"PATH": os.environ["PATH"], "LC_ALL": "de_DE.UTF-8", "KEEP": "k"})
    assert run(["sh", "-c", "echo $LC_ALL $KEEP"])[1] == b"C k\n"  # numbers as the parsers read them
    assert run(["sh", "-c", "echo $EXTRA $LC_ALL"], env={"EXTRA": "e"})[1] == b"e C\n"
    assert run(["sh", "-c", "echo ${EXTRA:-unset}"])[1] == b"unset\n"  # one call's env is that call's only


def test_command_runner_kills_what_runs_past_its_timeout(tmp_path):
    """A hung command (nvidia-smi on a GPU off the bus, an import that never returns) is killed with what it started
    (a child that keeps the pipe open too), and says so: rc TIMED_OUT, the output it wrote, "timed out"."""
    import time

    marker = tmp_path / "grandchild-ran-on"
    run = hostctx.command_runner(timeout=1)
    start = time.monotonic()
    rc, out, err = run(["sh", "-c", "echo started; (sleep 3; touch %s) & sleep 30" % marker])
    took = time.monotonic() - start
    assert (rc, out) == (hostctx.TIMED_OUT, b"started\n") and b"timed out after 1 s" in err
    assert took < 10, "the runner waited %.1f s for a command past its 1 s timeout" % took
    assert run(["sh", "-c", "sleep 2; echo late"], timeout=5) == (0, b"late\n", b"")  # the call's own timeout
    time.sleep(3)
    assert not marker.exists(), "a child of the timed-out command outlived it"


def test_which_searches_path_then_sbin(tmp_path):
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert hostctx.which("tool", {"PATH": str(tmp_path)}) == str(tool)
    assert hostctx.which(str(tool), {"PATH": ""}) == str(tool)
    assert hostctx.which("tool", {"PATH": "/nonexistent"}) is None
    (tmp_path / "plain").write_text("data\n")
    assert hostctx.which("plain", {"PATH": str(tmp_path)}) is None


def test_prefetch_runs_planned_commands_at_once():
    import threading

    barrier = threading.Barrier(3, timeout=10)  # three commands and nobody else: only met if they run together
    ran = []

    def run(argv):
        ran.append(argv)
        if argv[0] == "slow":
            barrier.wait()
        return 0, (" ".join(argv)).encode(), b""
    with hostctx.Prefetch(run, [["slow", "1"], ["slow", "2"], ["slow", "3"]]) as pre:
        assert pre(["slow", "2"]) == (0, b"slow 2", b"")
        assert pre(["other"]) == (0, b"other", b"")  # not planned: run when asked
        assert pre(["slow", "2"]) == (0, b"slow 2", b"")  # kept, not run again
    assert sorted(map(tuple, ran)) == [("other",), ("slow", "1"), ("slow", "2"), ("slow", "3")]
    assert [a[0] for a in pre.ran] == ["slow", "slow", "slow", "other"]


def test_prefetch_resolves_names_once_and_passes_errors_on():
    paths = {"sshd": "/usr/sbin/sshd", "/usr/sbin/sshd": "/usr/sbin/sshd", "boom": "/bin/boom"}
    ran = []

    def run(argv):
        ran.append(argv)
        if argv[0] == "/bin/boom":
            raise OSError("exec failed")
        return 0, b"OpenSSH_9.2, OpenSSL 3.0.20\n", b""
    with hostctx.Prefetch(run, [["sshd", "-V"], ["boom"]], which=paths.get) as pre:
        assert pre(["/usr/sbin/sshd", "-V"]) == pre(["sshd", "-V"])
        assert pre(["ssh", "-V"]) is None  # not installed: nothing runs
        with pytest.raises(OSError, match="exec failed"):
            pre(["boom"])
    assert ran.count(["/usr/sbin/sshd", "-V"]) == 1 and ["ssh", "-V"] not in ran


def recorded_runner(ran):
    """Debian 12 as root: sshd -V gives no portable version, so every version command runs."""
    answers = {"sshd": (1, b"OpenSSH_9.2, OpenSSL 3.0.20 7 Apr 2026\n", b""),
               "/usr/sbin/sshd": (1, b"OpenSSH_9.2, OpenSSL 3.0.20 7 Apr 2026\n", b""),
               "ssh": (0, b"", fx("debian12_ssh-V.txt").encode()),
               "dpkg-query": (0, fx("debian12_dpkg-query.txt").encode(), b""),
               hostready.SUPERVISORCTL: (0, b"gpufleet-gpu-exporter  RUNNING   pid 41, uptime 0:03:12\n", b"")}

    def run(argv):
        ran.append(list(argv))
        if argv[:2] == ["sshd", "-T"]:
            return 0, fx("debian12_sshd-T.txt").encode(), b""
        return answers.get(argv[0])
    return run


@pytest.mark.parametrize(("euid", "supervisorctl"), [(0, True), (0, False), (1000, True)])
def test_readiness_commands_are_the_ones_collect_readiness_runs(euid, supervisorctl):
    existing = {hostready.SUPERVISORCTL} if supervisorctl else set()
    kw = {"read_file": lambda p: None, "exists": lambda p: p in existing, "geteuid": lambda: euid}
    ran = []
    alone = hostready.collect_readiness(run=recorded_runner(ran), **kw)
    planned = hostready.readiness_commands(kw["exists"], kw["geteuid"])
    assert sorted(map(tuple, planned)) == sorted(map(tuple, ran))
    assert (list(hostready.SUPERVISOR_STATUS) in planned) is supervisorctl
    assert (["sshd", "-T"] in planned) is (euid == 0)
    # the same facts when the commands were started ahead, in threads
    with hostctx.Prefetch(recorded_runner([]), planned) as pre:
        assert hostready.collect_readiness(run=pre, **kw) == alone
    assert alone["sshd"]["version"] == "9.2p1" and alone["sshd"]["package_version"] == "1:9.2p1-2+deb12u10"
    assert alone["monitoring"]["program"] == ("RUNNING" if supervisorctl else None)


def test_prefetch_runs_in_line_when_no_thread_can_start(monkeypatch):
    import threading

    def refuse(self):
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(threading.Thread, "start", refuse)
    with hostctx.Prefetch(lambda argv: (0, b"ok", b""), [["a"]]) as pre:
        assert pre(["a"]) == (0, b"ok", b"") and pre.ran == [["a"]]


def test_shared_readers_never_raise():
    def read(path):
        if path == "boom":
            raise OSError("denied")
        return {"bytes": b"caf\xc3\xa9 \xff", "text": "plain"}.get(path)
    assert hostctx.read_text(read, "bytes") == "caf\u00e9 \ufffd"
    assert hostctx.read_text(read, "text") == "plain"
    assert hostctx.read_text(read, "absent") is None and hostctx.read_text(read, "boom") is None
    assert hostctx.safe_call(read, "boom") is None and hostctx.safe_call(read, "bytes") == b"caf\xc3\xa9 \xff"


def test_command_runner_runs_in_the_root_folder(tmp_path, monkeypatch):
    """python -c puts the working folder first on sys.path: run from the module's temp dir, a file there named like
    a package (torch.py) would be imported instead of the renter's torch. Every command runs in /."""
    (tmp_path / "torch.py").write_text("raise SystemExit('the temp dir shadowed torch')\n")
    monkeypatch.chdir(tmp_path)
    assert hostctx.command_runner()(["sh", "-c", "pwd"])[1] == b"/\n"
