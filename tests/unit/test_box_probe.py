"""box_probe (issue 51): the disk and network the renter pays for, measured in seconds, never from the page cache.

The module runs as Ansible runs it (its AnsiballZ payload; the cases that read the output through `ansible -m
box_probe -o`) on tmp_path; the disk tests run against a fake file layer that holds a known rate (a shared device, so 8
threads do not read 8 times faster) and, for the fallback, one that answers from "RAM" unless the data was synced or
evicted; the network tests against a paced HTTP server on 127.0.0.1 (tests/doubles/paced_http.py). Nothing leaves the
machine.
"""

import errno
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from gpufleet.host.box import disk as boxdisk
from gpufleet.host.box import net as boxnet
from gpufleet.host.system import hostctx

from tests.doubles.paced_http import PacedServer
from tests.unit import ansible_module

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    """Loopback servers are reached directly, whatever proxy the test machine sets."""
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


def near(value, target, within=0.2):
    return value is not None and abs(value - target) <= within * target


def left_in(folder):
    return sorted(p.name for p in Path(folder).iterdir())


# ----------------------------------------------------------------------------- the module as Ansible runs it
def run_module(tmp_path, args, check=False, home=None, verbose=False, cli=False):
    """(state, result, output): the AnsiballZ payload Ansible builds, run by this Python (tests/unit/ansible_module.py);
    with cli (or verbose) through the real `ansible localhost -m box_probe -o` CLI, whose output a test then reads."""
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    if home is not None:
        env["HOME"] = str(home)
        env.pop("SUDO_USER", None)
    if not (cli or verbose):
        state, result = ansible_module.run_state("box_probe", args, tmp_path, check=check, env=env)
        return state, result, None
    extra = ["-vvv"] if verbose else []  # the callback shows the module's invocation (its arguments, no_log masked)
    return ansible_module.cli_run("box_probe", args, tmp_path, check=check, env=env, extra=extra)


needs_ansible = ansible_module.needs_ansible
QUIET = "dns_names=localhost dns_timeout_s=1 disk_bytes=%d disk_seconds=2" % (8 * MIB)


@needs_ansible
@pytest.mark.parametrize("check", [False, True], ids=["run", "check_mode"])
def test_module_measures_the_folder_and_leaves_nothing(tmp_path, check):
    data = tmp_path / "data"
    data.mkdir()
    with PacedServer(rate_mb_s=20, size_mb=5) as srv:
        state, result, _out = run_module(tmp_path, "data_path=%s download_url=%s/file.bin download_max_s=3 %s"
                                         % (data, srv.url, QUIET), check=check)
    assert state == "localhost | SUCCESS", result
    assert result["changed"] is False
    box = result["box"]
    assert box["data_path"] == str(data.resolve()) and box["data_path_source"] == "variable"
    assert box["fstype"] and box["mount_point"] and box["free_bytes"] > 0 and box["total_bytes"] >= box["free_bytes"]
    d = box["disk"]
    assert d["error"] is None, d
    assert d["method"] in ("O_DIRECT", "fdatasync")
    assert (d["why_method"] is None) == (d["method"] == "O_DIRECT")
    assert d["bytes"] == 8 * MIB and d["write_mb_s"] > 0 and d["read_mb_s"] > 0 and d["rand_read_mb_s"] > 0
    assert (d["rand_block_kib"], d["rand_threads"]) == (32, 8)
    assert box["dns"] == [{"name": "localhost", "ms": box["dns"][0]["ms"], "ok": True, "error": None}]
    assert box["download"]["bytes"] == 5000000 and box["download"]["stopped_by"] == "end"
    assert box["upload"] is None and box["torch_files"] is None
    assert box["left_behind"] == [] and left_in(data) == []


@needs_ansible
def test_module_default_folder_is_workspace_or_the_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    state, result, _out = run_module(tmp_path, 'download_url="" python=/nonexistent/bin/python ' + QUIET, home=home)
    assert state == "localhost | SUCCESS", result
    box = result["box"]
    if os.path.isdir("/workspace"):
        assert box["data_path_source"] == "workspace"
    else:
        assert (box["data_path"], box["data_path_source"]) == (str(home.resolve()), "home")
        assert box["disk"]["bytes"] == 8 * MIB and left_in(home) == []
    assert box["download"] is None
    assert box["torch_files"]["path"] is None and box["torch_files"]["error"] == "/nonexistent/bin/python not found"


@needs_ansible
def test_module_download_rate_is_measured_and_its_secrets_are_not_returned(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    with PacedServer(rate_mb_s=5, size_mb=50) as srv:
        url = srv.url.replace("://", "://renter:s3cret@") + "/file.bin?X-Amz-Signature=t0psecret#frag"
        up = srv.url.replace("://", "://renter:upw@") + "/upload?sig=upt0ken"
        state, result, out = run_module(tmp_path, "data_path=%s download_url='%s' upload_url='%s' download_max_s=2 "
                                        "download_max_bytes=5000000 %s" % (data, url, up, QUIET), cli=True)
    assert state == "localhost | SUCCESS", result
    down, upl = result["box"]["download"], result["box"]["upload"]
    assert down["url"] == srv.url + "/file.bin" and down["host"] == "127.0.0.1" and down["status"] == 200
    assert near(down["mb_s"], 5.0), down
    assert down["streams"] == 1 and down["error"] is None and down["stopped_by"] == "bytes" and down["bytes"] == 5000000
    assert upl["url"] == srv.url + "/upload" and upl["status"] == 200 and near(upl["mb_s"], 5.0), upl
    for secret in ("s3cret", "t0psecret", "upw", "upt0ken", "renter"):
        assert secret not in json.dumps(result["box"])
    assert "upt0ken" not in out  # upload_url is no_log


@needs_ansible
@pytest.mark.parametrize("args, says", [
    ("data_path=relative/dir", "data_path must be absolute"),
    ("disk_bytes=-1", "disk_bytes must be from 4096"),
    ("disk_seconds=0", "disk_seconds must be above 0"),
    ("download_max_bytes=-5", "download_max_bytes must be above 0"),
    ("download_url=ftp://example.org/x", "download_url: not an http(s) URL"),
    ("upload_url=file:///etc/passwd", "upload_url: not an http(s) URL"),
    ("dns_timeout_s=-3", "dns_timeout_s must be above 0"),
])
def test_module_refuses_bad_input_before_writing(tmp_path, args, says):
    data = tmp_path / "data"
    data.mkdir()
    extra = "" if args.startswith("data_path") else "data_path=%s " % data
    state, result, _out = run_module(tmp_path, extra + args)
    assert state == "localhost | FAILED!", result
    assert says in result["msg"] and "Nothing was written" in result["msg"]
    assert left_in(data) == []


def test_ansible_doc_renders():
    doc = Path(sys.executable).parent / "ansible-doc"
    if not doc.exists():
        pytest.skip("ansible-doc not installed next to this Python")
    proc = subprocess.run([str(doc), "-M", "library", "box_probe"], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "data_path" in proc.stdout and "download_max_s" in proc.stdout


# ----------------------------------------------------------------------------- disk: fake file layers
class SlowDisk:
    """``os``, but every transfer waits its turn on one device that moves ``rate_mb_s`` MB/s."""

    def __init__(self, rate_mb_s):
        self.rate = rate_mb_s * 1e6
        self.lock = threading.Lock()
        self.free_at = 0.0
        self.calls = []

    def __getattr__(self, name):
        return getattr(os, name)

    def spend(self, n):
        with self.lock:
            self.free_at = max(time.monotonic(), self.free_at) + n / self.rate
            until = self.free_at
        delay = until - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def open(self, path, flags, *mode):
        self.calls.append(("open", bool(flags & (boxdisk.NO_DIRECT or 0))))
        return os.open(path, flags, *mode)

    def writev(self, fd, bufs):
        n = os.writev(fd, bufs)
        self.spend(n)
        return n

    def readv(self, fd, bufs):
        n = os.readv(fd, bufs)
        self.spend(n)
        return n

    def preadv(self, fd, bufs, offset):
        n = os.preadv(fd, bufs, offset)
        self.spend(n)
        return n


class CachedDisk(SlowDisk):
    """A file system that refuses O_DIRECT (``where``: at open, FUSE; at the first write) and has a page cache:
    buffered writes and reads of cached pages are free (RAM); fdatasync pays for the dirty bytes, a read pays only
    after POSIX_FADV_DONTNEED. A probe that measured the cache would read thousands of MB/s here."""

    def __init__(self, rate_mb_s, where="open"):
        super().__init__(rate_mb_s)
        self.where = where
        self.dirty = 0
        self.cached = False
        self.direct_fds = set()
        self.synced = self.evicted = 0

    def open(self, path, flags, *mode):
        direct = bool(boxdisk.NO_DIRECT and flags & boxdisk.NO_DIRECT)
        if direct and self.where == "open":
            raise OSError(errno.EINVAL, "Invalid argument")
        fd = os.open(path, flags & ~(boxdisk.NO_DIRECT or 0), *mode)
        if direct:
            self.direct_fds.add(fd)
        return fd

    def close(self, fd):
        self.direct_fds.discard(fd)
        os.close(fd)

    def writev(self, fd, bufs):
        if fd in self.direct_fds:
            raise OSError(errno.EINVAL, "Invalid argument")
        n = os.writev(fd, bufs)
        self.dirty += n
        self.cached = True
        return n

    def fdatasync(self, fd):
        self.synced += 1
        self.spend(self.dirty)
        self.dirty = 0

    def posix_fadvise(self, fd, offset, length, advice):
        if advice == os.POSIX_FADV_DONTNEED and not self.dirty:
            self.cached = False
            self.evicted += 1

    def readv(self, fd, bufs):
        n = os.readv(fd, bufs)
        if not self.cached:
            self.spend(n)
        return n

    def preadv(self, fd, bufs, offset):
        n = os.preadv(fd, bufs, offset)
        if not self.cached:
            self.spend(n)
        return n


@pytest.mark.skipif(boxdisk.NO_DIRECT is None, reason="no O_DIRECT on this platform")
def test_rates_come_from_time_not_from_the_cache(tmp_path):
    slow = SlowDisk(20)
    d = boxdisk.measure(str(tmp_path), 8 * MIB, cap=3, ops=slow)
    assert d["error"] is None, d
    assert near(d["write_mb_s"], 20) and near(d["read_mb_s"], 20) and near(d["rand_read_mb_s"], 20), d
    assert d["bytes"] == 8 * MIB and left_in(tmp_path) == []


@pytest.mark.skipif(boxdisk.NO_DIRECT is None, reason="no O_DIRECT on this platform")
def test_each_test_stops_at_its_cap_and_rates_what_it_did(tmp_path):
    slow = SlowDisk(20)
    start = time.monotonic()
    d = boxdisk.measure(str(tmp_path), 64 * MIB, cap=0.3, ops=slow)
    assert d["error"] is None, d
    assert d["bytes"] < 64 * MIB and d["bytes"] % (4 * MIB) == 0
    for name in ("write", "read", "rand"):
        assert d["seconds"][name] < 0.3 + 0.25, d  # the cap, plus at most one 4 MiB block at 20 MB/s
    assert near(d["write_mb_s"], 20) and near(d["read_mb_s"], 20) and near(d["rand_read_mb_s"], 20), d
    assert time.monotonic() - start < 2.5


@pytest.mark.parametrize("where", ["open", "write"])
def test_o_direct_refused_falls_back_to_synced_and_evicted_io(tmp_path, where):
    if boxdisk.NO_DIRECT is None:
        pytest.skip("no O_DIRECT on this platform")
    cached = CachedDisk(20, where=where)
    d = boxdisk.measure(str(tmp_path), 8 * MIB, cap=3, ops=cached)
    assert d["method"] == "fdatasync" and "EINVAL" in d["why_method"], d
    assert d["error"] is None
    assert near(d["write_mb_s"], 20) and near(d["read_mb_s"], 20) and near(d["rand_read_mb_s"], 20), d
    assert cached.synced >= 2 and cached.evicted >= 2
    assert left_in(tmp_path) == []


def test_the_file_is_removed_when_a_test_fails_or_is_interrupted(tmp_path):
    class Broken(SlowDisk):
        def __init__(self, exc):
            super().__init__(1000)
            self.exc = exc

        def readv(self, fd, bufs):
            raise self.exc

    d = boxdisk.measure(str(tmp_path), 1 * MIB, cap=1, ops=Broken(OSError(errno.EIO, "Input/output error")))
    assert d["error"] == "EIO: Input/output error" and d["write_mb_s"] is not None and d["read_mb_s"] is None
    assert left_in(tmp_path) == []
    with pytest.raises(KeyboardInterrupt):
        boxdisk.measure(str(tmp_path), 1 * MIB, cap=1, ops=Broken(KeyboardInterrupt()))
    assert left_in(tmp_path) == []


def test_a_file_that_cannot_be_removed_is_listed(tmp_path):
    class Stuck(SlowDisk):
        def unlink(self, path):
            raise PermissionError(errno.EACCES, "Permission denied")

    left = []
    d = boxdisk.measure(str(tmp_path), 1 * MIB, cap=1, ops=Stuck(1000), left_behind=left)
    assert d["error"] is None and len(left) == 1
    assert Path(left[0]).parent == tmp_path and Path(left[0]).name.startswith(boxdisk.PREFIX)
    os.unlink(left[0])


def test_no_room_or_no_folder_writes_nothing(tmp_path):
    d = boxdisk.measure(str(tmp_path), 8 * MIB, free_bytes=10 * MIB)
    assert d["error"].startswith("not measured: 10485760 bytes free") and d["write_mb_s"] is None
    assert left_in(tmp_path) == []
    d = boxdisk.measure(str(tmp_path / "missing"), 8 * MIB)
    assert d["error"].startswith("cannot create a file in") and "ENOENT" in d["error"]


def test_rate_is_unknown_when_nothing_was_done():
    assert boxdisk.rate(0, 1.0) is None and boxdisk.rate(10, 0) is None
    assert boxdisk.rate(5000000, 2.0) == 2.5


# ----------------------------------------------------------------------------- where the data lives
# A container's mount table and, for each path, the mount that holds it (data: tests/unit/data/mountinfo-cases.json).
MOUNTS = json.loads((ROOT / "tests" / "unit" / "data" / "mountinfo-cases.json").read_text())
MOUNTINFO = "\n".join(MOUNTS["mountinfo"]) + "\n"


@pytest.mark.parametrize("case", MOUNTS["cases"], ids=[c["path"] for c in MOUNTS["cases"]])
def test_mountinfo_finds_the_longest_mount_point_that_holds_the_path(case):
    class St:
        f_frsize, f_bavail, f_blocks = 4096, 10, 100

    info = boxdisk.where(case["path"], MOUNTINFO, statvfs=lambda p: St)
    mount = ("fstype", "mount_point", "device")
    assert {k: info[k] for k in mount} == {k: case[k] for k in mount}
    assert (info["free_bytes"], info["total_bytes"]) == (40960, 409600)


def test_mountinfo_parsing_keeps_the_root_and_skips_bad_lines():
    mounts = boxdisk.parse_mountinfo(MOUNTINFO)
    assert len(mounts) == 7
    assert mounts[3] == {"mountpoint": "/mnt/nfs share", "root": "/vol1", "fstype": "nfs4",
                         "device": "10.0.0.5:/export/vol1"}
    info = boxdisk.where("/x", "", statvfs=lambda p: (_ for _ in ()).throw(OSError(errno.ENOENT, "gone")))
    assert info == {"fstype": None, "mount_point": None, "device": None, "free_bytes": None, "total_bytes": None}


def test_this_machine_mountinfo_names_the_tmp_path(tmp_path):
    text = Path("/proc/self/mountinfo").read_text() if Path("/proc/self/mountinfo").exists() else ""
    if not text:
        pytest.skip("no /proc/self/mountinfo")
    info = boxdisk.where(str(tmp_path), text)
    assert info["fstype"] and str(tmp_path).startswith(info["mount_point"])


# ----------------------------------------------------------------------------- torch's files
def test_torch_is_located_without_being_imported_and_its_files_timed(tmp_path):
    site = tmp_path / "site"
    pkg = site / "torch"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise SystemExit('torch must not be imported by the probe')\n")
    for i in range(30):
        (pkg / ("m%02d.py" % i)).write_text("x = %d\n" % i)
        (pkg / "lib" / ("libm%02d.so" % i)).write_bytes(b"\x7fELF" + b"\0" * 100)
    (pkg / "README.txt").write_text("not timed")
    run = hostctx.command_runner(environ=dict(os.environ, PYTHONPATH=str(site)), timeout=30)
    path, error = boxdisk.torch_dir(run, sys.executable)
    assert (path, error) == (str(pkg), None)
    got = boxdisk.torch_files(path, cap=2, limit=50)
    assert got["listed"] == 50 and got["files"] == 50 and got["error"] is None
    assert got["p90_ms"] is not None and got["missing_p90_ms"] is not None and got["total_s"] < 2

    bare = hostctx.command_runner(environ={"PATH": os.environ.get("PATH", "")}, timeout=30)
    path, error = boxdisk.torch_dir(bare, sys.executable + "-missing")
    assert path is None and "not found" in error
    path, error = boxdisk.torch_dir(hostctx.command_runner(environ=dict(os.environ, PYTHONPATH=str(tmp_path))),
                                    sys.executable)
    if path is None:  # no torch in this interpreter, as on CI
        assert error == "no torch in %s" % sys.executable


def test_torch_files_stop_at_the_cap():
    ticks = iter(x * 0.5 for x in range(10000))
    got = boxdisk.torch_files(str(ROOT / "module_utils"), cap=2.0, limit=500, clock=lambda: next(ticks))
    assert 0 < got["files"] < 10 and got["total_s"] >= 2.0


# ----------------------------------------------------------------------------- DNS
def test_a_hung_lookup_is_abandoned_at_the_cap():
    release = threading.Event()

    def resolver(name, port, family=0, type=0):
        if name == "hangs.example":
            release.wait(30)
        if name == "fails.example":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    start = time.monotonic()
    got = boxnet.resolve(["ok.example", "hangs.example", "fails.example"], timeout=0.3, getaddrinfo=resolver)
    took = time.monotonic() - start
    release.set()
    assert took < 1.0
    ok, hung, failed = got
    assert ok["ok"] is True and ok["ms"] is not None and ok["error"] is None
    assert hung == {"name": "hangs.example", "ms": None, "ok": False,
                    "error": "no answer in 0.3 s (getaddrinfo abandoned)"}
    assert failed["ok"] is False and "not known" in failed["error"]


def test_a_real_lookup_of_localhost_answers():
    """The real getaddrinfo through the worker thread (loopback only)."""
    start = time.monotonic()
    got = boxnet.resolve(["localhost"], timeout=2)
    assert got[0]["ok"] is True and time.monotonic() - start < 3


# ----------------------------------------------------------------------------- download and upload
def test_download_holds_the_servers_rate_and_stops_at_the_time_cap():
    with PacedServer(rate_mb_s=5, size_mb=50) as srv:
        start = time.monotonic()
        got = boxnet.download(srv.url + "/file.bin", max_bytes=50e6, max_s=1.5)
        took = time.monotonic() - start
    assert took < 2.5
    assert near(got["mb_s"], 5.0), got
    assert got["stopped_by"] == "time" and got["error"] is None and got["status"] == 200
    assert 5e6 < got["bytes"] < 9e6 and got["seconds"] <= 1.6 and got["streams"] == 1


def test_download_stops_at_the_byte_cap():
    with PacedServer(rate_mb_s=20, size_mb=50) as srv:
        got = boxnet.download(srv.url + "/file.bin", max_bytes=2000000, max_s=5)
    assert got["bytes"] == 2000000 and got["stopped_by"] == "bytes" and near(got["mb_s"], 20.0), got


@pytest.mark.parametrize("path, says, status", [
    ("/missing", "HTTP 404", 404),
    ("/stall", "no data in the download's time", 200),
])
def test_a_failed_download_has_an_error_and_no_rate(path, says, status):
    with PacedServer(rate_mb_s=20, size_mb=5, stall_s=5) as srv:
        start = time.monotonic()
        got = boxnet.download(srv.url + path, max_bytes=1e6, max_s=1)
        assert time.monotonic() - start < 2
    assert got["mb_s"] is None and got["error"].startswith(says) and got["status"] == status, got


def test_no_egress_is_unknown_not_zero():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    got = boxnet.download("http://127.0.0.1:%d/file.bin" % port, max_bytes=1e6, max_s=2)
    assert got["mb_s"] is None and got["bytes"] == 0 and got["error"].startswith("no connection"), got


def test_upload_is_paced_and_counted():
    with PacedServer(rate_mb_s=5, size_mb=1) as srv:
        got = boxnet.upload(srv.url + "/upload", max_bytes=5e6, max_s=3, method="PUT")
        assert got["status"] == 200 and near(got["mb_s"], 5.0), got
        cut = boxnet.upload(srv.url + "/upload", max_bytes=50e6, max_s=1)
    assert cut["mb_s"] is not None and cut["stopped_by"] == "time" and cut["bytes"] < 50e6


@pytest.mark.parametrize("url, public", [
    ("https://u:p@host.example:8443/a/b.whl?sig=abc&exp=1#x", "https://host.example:8443/a/b.whl"),
    ("http://host.example/file.bin", "http://host.example/file.bin"),
    ("https://tok@[::1]/f?x=1", "https://[::1]/f"),
])
def test_urls_are_returned_without_credentials_or_query(url, public):
    assert boxnet.public_url(url) == public


def test_error_texts_do_not_carry_the_urls_secrets():
    url = "https://user:pw123@h.example/f?token=abcdef"
    err = boxnet.error_text(ValueError("bad thing at %s (token=abcdef, pw123)" % url), url)
    assert "abcdef" not in err and "pw123" not in err


@pytest.mark.parametrize("url", ["ftp://h/x", "file:///etc/passwd", "h.example/x", "http://", "http://h:99999/x"])
def test_only_http_urls_are_accepted(url):
    assert boxnet.check_url(url)
    assert boxnet.download(url, max_s=1)["error"]


# ----------------------------------------------------------------------------- issue 51's review
class IgnoresDirect(CachedDisk):
    """O_DIRECT accepted and ignored (fuse-overlayfs drops the flag, ZFS before 2.3): every read comes from the page
    cache unless the file was synced and evicted, whatever the open flags say."""

    def __init__(self, rate_mb_s):
        super().__init__(rate_mb_s, where="never")

    def writev(self, fd, bufs):
        self.direct_fds.discard(fd)  # accepted, then ignored: buffered
        return super().writev(fd, bufs)


def test_o_direct_accepted_but_ignored_still_reads_past_the_cache(tmp_path):
    if boxdisk.NO_DIRECT is None:
        pytest.skip("no O_DIRECT on this platform")
    fake = IgnoresDirect(20)
    d = boxdisk.measure(str(tmp_path), 8 * MIB, cap=3, ops=fake)
    assert d["method"] == "O_DIRECT" and d["error"] is None, d
    assert near(d["read_mb_s"], 20) and near(d["rand_read_mb_s"], 20), d  # the cache would read thousands
    assert fake.evicted >= 2 and left_in(tmp_path) == []


def test_torch_dir_is_bounded_by_the_cap_and_says_it_timed_out(tmp_path):
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nsleep 20\n")
    slow.chmod(0o755)
    start = time.monotonic()
    path, error = boxdisk.torch_dir(hostctx.command_runner(timeout=30), str(slow), timeout=0.5)
    assert time.monotonic() - start < 3
    assert path is None and error == "%s did not answer in 0.5 s (timed out)" % slow


@needs_ansible
def test_module_bounds_the_torch_lookup_by_disk_seconds(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    start = time.monotonic()
    state, result, _out = run_module(tmp_path, "data_path=%s python=%s download_url='' dns_names=localhost "
                                     "dns_timeout_s=1 disk_bytes=%d disk_seconds=1" % (data, slow, MIB))
    assert state == "localhost | SUCCESS", result
    assert time.monotonic() - start < 14  # 15 s before: the lookup was outside the caps
    tf = result["box"]["torch_files"]
    assert tf["path"] is None and tf["error"] == "%s did not answer in 1.0 s (timed out)" % slow


@needs_ansible
def test_module_hides_the_download_url_in_its_invocation_but_not_a_plain_one(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    with PacedServer(rate_mb_s=20, size_mb=1) as srv:
        secret = srv.url + "/file.bin?X-Amz-Signature=t0psecret"
        state, result, out = run_module(tmp_path, "data_path=%s download_url='%s' %s" % (data, secret, QUIET),
                                        verbose=True)
        assert state == "localhost | SUCCESS", result
        assert "t0psecret" not in out and "download_url" in result["invocation"]["module_args"]
        assert result["box"]["download"]["url"] == srv.url + "/file.bin"
        plain = srv.url + "/file.bin"
        state, result, out = run_module(tmp_path, "data_path=%s download_url='%s' %s" % (data, plain, QUIET),
                                        verbose=True)
    assert result["box"]["download"]["url"] == plain  # nothing secret: not masked in the record
    assert result["invocation"]["module_args"]["download_url"] == plain


class _Recorder:
    """A loopback HTTP server that records each request's Authorization header; ``redirect_to``: answer /go with a
    302 there."""

    def __init__(self, redirect_to=None):
        import http.server

        seen = self.seen = []
        target = [redirect_to]
        self.target = target

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append((self.path, self.headers.get("Authorization")))
                if self.path.startswith("/go") and target[0]:
                    self.send_response(302)
                    self.send_header("Location", target[0])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"x" * 1000
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_credentials_are_not_sent_on_to_another_host():
    """urllib copies the Authorization header to wherever a redirect points; the probe's opener drops it when the
    redirect leaves the URL's scheme, host and port."""
    other = _Recorder()
    first = _Recorder(redirect_to=other.url + "/file.bin")
    try:
        got = boxnet.download(first.url.replace("://", "://renter:s3cret@") + "/go", max_bytes=1000, max_s=3)
        assert got["error"] is None and got["bytes"] == 1000, got
        assert first.seen[0][1] is not None  # the URL's own host gets the credentials
        assert other.seen == [("/file.bin", None)]
        first.target[0] = first.url + "/file.bin"  # the same host: kept
        got = boxnet.download(first.url.replace("://", "://renter:s3cret@") + "/go", max_bytes=1000, max_s=3)
        assert got["error"] is None and first.seen[-1][0] == "/file.bin" and first.seen[-1][1] is not None
    finally:
        first.close()
        other.close()
