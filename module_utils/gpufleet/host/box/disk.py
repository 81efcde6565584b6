# Copyright: gpufleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The renter's data disk, measured in seconds and never from the page cache (box_probe; docs/box-probe.md).

``where`` says which file system holds a path (``/proc/self/mountinfo``: the longest mount point that contains it)
and how much room it has; ``measure`` writes a file of its own there and reads it back - sequential write and read
with ``O_DIRECT`` (falling back to buffered IO timed with ``fdatasync`` and read after ``POSIX_FADV_DONTNEED``
where ``O_DIRECT`` is refused), then random 32 KiB reads from 8 threads - each test stopped at its time cap, the
file always removed; ``torch_files`` times the open and read of the small files ``import torch`` reads.

Every file operation goes through ``ops`` (the ``os`` module by default) and every time through ``clock``, so that a
test can slow the disk down or stop the clock. MB is 10^6 bytes.
"""

import errno
import json
import mmap
import os
import random
import re
import tempfile
import threading
import time

from ..system import hostctx, hostres

MB = 1000000.0
KIB = 1024
MIB = 1024 * 1024
ALIGN = 4096  # O_DIRECT: buffer address, offset and length are multiples of the logical block size (4 KiB here)
SEQ_BLOCK = 4 * MIB  # one sequential request; a test may run past its cap by one such request
RAND_BLOCK = 32 * KIB  # vast's host daemon: fio random 32 KiB reads, QD64, 16 jobs (renter-disk-network.md 1)
RAND_THREADS = 8
PREFIX = ".gpufleet-box-probe-"  # the temporary file's name, so that one left behind is recognised
TORCH_MAX_FILES = 2000  # `import torch` makes about 2,300 openat calls (stas00, storage/README.md)
TORCH_READ = 64 * KIB  # read of each file: a .so is mapped by the loader, never read whole
NO_DIRECT = getattr(os, "O_DIRECT", None)


# ----------------------------------------------------------------------------- where
def _unescape(text):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text):
    """/proc/self/mountinfo -> [{"mountpoint", "fstype", "device", "root"}] in file order. Fields: id, parent,
    major:minor, root, mount point, options, optional fields up to "-", then fstype, source, super options."""
    out = []
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) < 7 or "-" not in parts[6:]:
            continue
        tail = parts[parts.index("-", 6) + 1:]
        if not tail:
            continue
        out.append({"mountpoint": _unescape(parts[4]), "root": _unescape(parts[3]), "fstype": tail[0],
                    "device": _unescape(tail[1]) if len(tail) > 1 else None})
    return out


def where(path, mountinfo_text, statvfs=os.statvfs):
    """The file system that holds ``path``: fstype, mount_point, device, free_bytes, total_bytes (None unknown)."""
    mount = hostres.mount_of(path, parse_mountinfo(mountinfo_text)) or {}
    info = {"fstype": mount.get("fstype"), "mount_point": mount.get("mountpoint"), "device": mount.get("device"),
            "free_bytes": None, "total_bytes": None}
    try:
        st = statvfs(path)
        info["free_bytes"] = st.f_frsize * st.f_bavail
        info["total_bytes"] = st.f_frsize * st.f_blocks
    except (OSError, AttributeError, TypeError):
        pass
    return info


# ----------------------------------------------------------------------------- measure
def rate(nbytes, seconds):
    """MB/s (10^6 B) from what was done in how long; None when nothing was done or no time passed."""
    if not nbytes or not seconds or seconds <= 0:
        return None
    return round(nbytes / seconds / MB, 1)


def _aligned(size):
    """A page-aligned buffer of ``size`` bytes (mmap's anonymous memory), filled with incompressible bytes."""
    buf = mmap.mmap(-1, size)
    buf.write(os.urandom(min(size, MIB)) * max(1, size // MIB))
    return buf


def _errtext(exc):
    name = errno.errorcode.get(getattr(exc, "errno", None) or 0)
    return "%s: %s" % (name, exc.strerror) if name and getattr(exc, "strerror", None) else str(exc)


class _Disk:
    """One run of the disk tests on one temporary file."""

    def __init__(self, path, total, cap, ops, clock, direct):
        self.path, self.total, self.cap, self.ops, self.clock = path, total, cap, ops, clock
        self.direct = direct
        self.written = 0

    def _open(self, flags):
        return self.ops.open(self.path, flags | (NO_DIRECT if self.direct else 0))

    def write(self, buf):
        """Sequential write of up to ``total`` bytes until the cap; synced (and, buffered, synced after every block,
        so that the timing is the disk's and the cap holds); returns seconds."""
        fd = self._open(os.O_WRONLY | os.O_TRUNC)
        try:
            view = memoryview(buf)
            start = self.clock()
            while self.written < self.total and self.clock() - start < self.cap:
                n = min(len(buf), self.total - self.written)
                self.written += self.ops.writev(fd, [view[:n]])
                if not self.direct:
                    self.ops.fdatasync(fd)
            self.ops.fdatasync(fd)  # O_DIRECT: the allocation's metadata; buffered: nothing left by now
            return self.clock() - start
        finally:
            self.ops.close(fd)

    def _evict(self, fd):
        """The file's pages, synced and so clean, out of the cache (works unprivileged) before every read, whatever
        the method: where ``O_DIRECT`` is accepted but ignored (fuse-overlayfs drops the flag, ZFS before 2.3) the
        reads would otherwise come from the page cache; under a real ``O_DIRECT`` it costs nothing."""
        self.ops.fdatasync(fd)
        self.ops.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)

    def read(self, buf):
        """Sequential read of what was written, until the cap; returns (bytes, seconds)."""
        fd = self._open(os.O_RDONLY)
        try:
            self._evict(fd)
            done = 0
            start = self.clock()
            while done < self.written and self.clock() - start < self.cap:
                got = self.ops.readv(fd, [buf])
                if not got:
                    break
                done += got
            return done, self.clock() - start
        finally:
            self.ops.close(fd)

    def random_read(self, threads=RAND_THREADS, block=RAND_BLOCK, rng=None):
        """32 KiB reads at random aligned offsets from ``threads`` threads (each its own fd), every block of the file
        at most once (a buffered read never meets a block it read before), until the cap; returns (bytes, seconds)."""
        blocks = list(range(self.written // block))
        (rng or random.Random(51)).shuffle(blocks)  # noqa: S311 - an order of reads, no secret
        lock = threading.Lock()
        done = [0]
        errors = []
        ready = threading.Barrier(threads + 1)
        start = []

        def worker(fd, buf):
            ready.wait()
            try:
                while self.clock() - start[0] < self.cap:
                    with lock:
                        if not blocks:
                            return
                        offset = blocks.pop() * block
                    got = self.ops.preadv(fd, [buf], offset)
                    with lock:
                        done[0] += got
            except Exception as exc:  # said, not raised: the other threads still finish
                errors.append(_errtext(exc))

        fds, bufs = [], []
        try:
            for _thread in range(threads):
                fds.append(self._open(os.O_RDONLY))
                bufs.append(_aligned(block))
                if not self.direct:
                    self.ops.posix_fadvise(fds[-1], 0, 0, os.POSIX_FADV_RANDOM)
            self._evict(fds[0])
            pool = [threading.Thread(target=worker, args=(fd, buf), daemon=True) for fd, buf in zip(fds, bufs)]
            for t in pool:
                t.start()
            start.append(self.clock())
            ready.wait()
            for t in pool:
                t.join()
            seconds = self.clock() - start[0]
        finally:
            for fd in fds:
                self.ops.close(fd)
            for buf in bufs:
                buf.close()
        if errors:
            raise OSError(errors[0])
        return done[0], seconds


def _blank():
    return {"method": None, "why_method": None, "bytes": 0, "write_mb_s": None, "read_mb_s": None,
            "rand_read_mb_s": None, "rand_block_kib": RAND_BLOCK // KIB, "rand_threads": RAND_THREADS,
            "seconds": {"write": None, "read": None, "rand": None}, "error": None}


def measure(folder, total=64 * MIB, cap=3.0, ops=os, clock=time.monotonic, left_behind=None, free_bytes=None):
    """Write, read and random-read a temporary file of up to ``total`` bytes in ``folder``; each test stops at ``cap``
    seconds. Returns the ``disk`` record (docs/box-probe.md); a path that could not be removed goes to
    ``left_behind``."""
    total = max(ALIGN, -(-int(total) // ALIGN) * ALIGN)
    out = _blank()
    if free_bytes is not None and free_bytes < 2 * total:
        out["error"] = "not measured: %d bytes free, the test needs %d" % (free_bytes, 2 * total)
        return out
    try:
        fd, path = tempfile.mkstemp(prefix=PREFIX, dir=folder)
    except OSError as exc:
        out["error"] = "cannot create a file in %s: %s" % (folder, _errtext(exc))
        return out
    os.close(fd)
    buf = None
    try:
        buf = _aligned(min(SEQ_BLOCK, total))
        disk = _Disk(path, total, cap, ops, clock, direct=NO_DIRECT is not None)
        if NO_DIRECT is None:
            out["why_method"] = "no O_DIRECT on this platform"
        try:
            seconds = disk.write(buf)
        except OSError as exc:
            if not disk.direct or exc.errno != errno.EINVAL:
                raise
            out["why_method"] = "O_DIRECT refused: %s (FUSE, tmpfs before Linux 6.6)" % _errtext(exc)
            disk = _Disk(path, total, cap, ops, clock, direct=False)
            seconds = disk.write(buf)
        out["method"] = "O_DIRECT" if disk.direct else "fdatasync"
        out["bytes"] = disk.written
        out["write_mb_s"] = rate(disk.written, seconds)
        out["seconds"]["write"] = round(seconds, 3)
        nbytes, seconds = disk.read(buf)
        out["read_mb_s"] = rate(nbytes, seconds)
        out["seconds"]["read"] = round(seconds, 3)
        nbytes, seconds = disk.random_read()
        out["rand_read_mb_s"] = rate(nbytes, seconds)
        out["seconds"]["rand"] = round(seconds, 3)
    except Exception as exc:  # the figures so far stay; what failed is said
        out["error"] = _errtext(exc)
    finally:
        if buf is not None:
            buf.close()
        try:
            ops.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            if left_behind is not None:
                left_behind.append(path)
    return out


# ----------------------------------------------------------------------------- torch's files
TORCH_LOCATE = ("import importlib.util, json; s = importlib.util.find_spec('torch'); "
                "print(json.dumps(list(s.submodule_search_locations or []) if s else []))")


def torch_dir(run, python, timeout=3.0):
    """Where the interpreter ``python`` finds its torch package, without importing torch; (path, error). The lookup
    is killed at ``timeout`` s (box_probe passes the disk tests' cap, so that the step keeps to its budget)."""
    res = run([python, "-c", TORCH_LOCATE], timeout=timeout)
    if res is None:
        return None, "%s not found" % python
    rc, out, err = res
    if rc == hostctx.TIMED_OUT:
        return None, "%s did not answer in %s s (timed out)" % (python, timeout)
    if rc != 0:
        return None, "%s exited %s: %s" % (python, rc, err.decode("utf-8", "replace").strip()[-300:])
    try:
        found = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, "unreadable answer from %s" % python
    return (found[0], None) if found else (None, "no torch in %s" % python)


def _p90(values):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def torch_record(path=None, error=None):
    """The ``torch_files`` record before anything is timed (or when torch was not found: ``error``)."""
    return {"path": path, "fstype": None, "files": 0, "listed": 0, "list_s": None, "total_s": None, "p90_ms": None,
            "missing_p90_ms": None, "error": error}


def torch_files(path, cap=3.0, limit=TORCH_MAX_FILES, clock=time.monotonic, ops=os):
    """Open, read (the first 64 KiB) and close up to ``limit`` .py and .so files of the package at ``path``, and stat
    one missing name beside each (as the import system probes), until ``cap`` seconds. Warm caches are not dropped:
    on a network file system each open still costs a round trip, locally microseconds."""
    out = torch_record(path)
    start = clock()
    names = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        names += [os.path.join(root, f) for f in sorted(files) if f.endswith((".py", ".so"))]
        if len(names) >= limit or clock() - start >= cap:
            break
    names = names[:limit]
    out["listed"] = len(names)
    out["list_s"] = round(clock() - start, 3)
    opened, missing = [], []
    begin = clock()
    try:
        for name in names:
            if clock() - begin >= cap:
                break
            t0 = clock()
            fd = ops.open(name, os.O_RDONLY)
            try:
                ops.read(fd, TORCH_READ)
            finally:
                ops.close(fd)
            t1 = clock()
            try:
                ops.stat(name + ".cpython-missing.so")
            except FileNotFoundError:
                pass
            opened.append(t1 - t0)
            missing.append(clock() - t1)
    except OSError as exc:
        out["error"] = "%s: %s" % (name, _errtext(exc))
    out["files"] = len(opened)
    out["total_s"] = round(clock() - begin, 3)
    out["p90_ms"] = round(_p90(opened) * 1000, 3) if opened else None
    out["missing_p90_ms"] = round(_p90(missing) * 1000, 3) if missing else None
    return out
