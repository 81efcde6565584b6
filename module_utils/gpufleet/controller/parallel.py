"""The report's speed work, in one place: the GC pause, forked workers and when to use them.

- ``gc_paused``: loading and summarizing a large fleet allocates millions of objects that all live on;
  the cyclic GC is off for the block, and what survived moves to the oldest generation in one step.
- ``in_two``: a list of work in two processes (a forked child does the second part and sends its
  rows back pickled); ``summarize`` and ``summarize_folder`` use it from ``PARALLEL_MIN_FILES`` files.
- ``write_parallel``: the five output files in two forked workers (``GROUPS``, about even in time)
  from ``PARALLEL_MIN_ROWS`` host + GPU rows.
Chunking (each renderer yields text in chunks, written with one buffered write each) is in the
renderers and ``write.py``; ``CHUNK_ITEMS`` is the size template output is joined at.
"""

import contextlib
import gc
import multiprocessing
import os
import pickle
from itertools import islice

# Fewer results (files) than this are summarized in the calling process.
PARALLEL_MIN_FILES = 500
# Fleets with fewer host + GPU rows than this render in the calling process: a fork costs more than it saves.
PARALLEL_MIN_ROWS = 5000
# The two workers' shares of the output files, about even in time on a large fleet: at 10,000 hosts x 8 GPUs
# fleet.json and fleet.csv take about 1.4 s each, fleet.md 1.4 s, fleet.html 0.8 s, gpufleet.prom 0.3 s
# (docs/benchmarks.md). The one-file report split them (prometheus, csv) / (json, markdown, html).
GROUPS = (("json", "csv"), ("markdown", "html", "prometheus"))
# Template output pieces joined into one chunk before it is written.
CHUNK_ITEMS = 4096


class ReportWriteError(RuntimeError):
    """A rendering worker process failed (its error text is the message)."""


@contextlib.contextmanager
def gc_paused():
    """The cyclic GC off for the block (restored after): loading and summarizing a large fleet
    allocates millions of objects that all live on, and each GC pass would rescan them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            # What survived the block moves to the oldest generation in one step (freeze, then
            # unfreeze); otherwise the first young-generation pass after gc.enable() would walk
            # every object allocated in the block. Skipped when the caller froze objects itself
            # (unfreeze would thaw those too).
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def chunked(pieces, size=CHUNK_ITEMS):
    """Join a stream of small strings (a template's ``generate()``) into chunks of ``size`` pieces."""
    it = iter(pieces)
    while True:
        part = "".join(islice(it, size))  # islice and join run in C: no Python step per piece
        if not part:
            return
        yield part


def cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def can_fork():
    # A daemonic process (a multiprocessing.Pool worker, say) may not start children.
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def _child_run(work, arg, conn):
    """Worker: send ``work(arg)`` back pickled; b"" on any failure (the parent then does it)."""
    try:
        payload = pickle.dumps(work(arg), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        payload = b""
    conn.send_bytes(payload)
    conn.close()


def in_two(work, first, second):
    """``(work(first), work(second))``: the second in a forked child whose result comes back
    pickled, the first here at the same time. If the child fails, the second is done here too."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_run, args=(work, second, send), daemon=True)
    child.start()
    send.close()
    try:
        a = work(first)
        try:
            payload = recv.recv_bytes()
        except EOFError:
            payload = b""
    finally:
        recv.close()
        child.join()
    b = pickle.loads(payload) if payload else work(second)  # noqa: S301 - from our own forked child
    return a, b


def split(n):
    return n * 11 // 20  # the child also pickles its rows: it gets a little less than half


def use_two(count, workers):
    """Whether to summarize ``count`` results in two processes (``workers``: None auto, 1 one, 2 two)."""
    if workers is None:
        return count >= PARALLEL_MIN_FILES and cpus() >= 2 and can_fork()
    return workers >= 2 and count >= 2 and can_fork()


def parallel_ok(summary, workers):
    """Whether to write the files in two workers (``workers``: None auto, 1 one, 2 two)."""
    if workers is not None:
        return workers >= 2 and can_fork()
    rows = len(summary["hosts"]) + sum(len(h["gpus"]) for h in summary["hosts"])
    return rows >= PARALLEL_MIN_ROWS and cpus() >= 2 and can_fork()


def _worker(write_group, summary, outdir, kinds, conn):
    try:
        write_group(summary, outdir, kinds)
    except BaseException as exc:  # report it to the parent, whatever it is
        try:
            conn.send((type(exc).__name__, getattr(exc, "errno", None), getattr(exc, "strerror", None) or str(exc),
                       getattr(exc, "filename", None)))
        finally:
            conn.close()
        os._exit(1)
    conn.send(None)
    conn.close()


def write_parallel(write_group, summary, outdir, names):
    """``write_group(summary, outdir, kinds)`` for each of ``GROUPS`` in a forked worker; the first
    failure is raised here (``OSError`` for an I/O error, else ``ReportWriteError`` naming ``names[kind]``)."""
    ctx = multiprocessing.get_context("fork")
    procs = []  # the GC is off here (write_all): the children inherit that and never walk the summary
    try:
        for kinds in GROUPS:
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(write_group, summary, outdir, kinds, send), daemon=True)
            proc.start()
            send.close()
            procs.append((kinds, proc, recv))
        errors = []
        for kinds, proc, recv in procs:
            try:
                message = recv.recv()
            except EOFError:
                message = ("died", None, "no answer", None)
            proc.join()
            recv.close()
            if message is not None or proc.exitcode != 0:
                errors.append((kinds, message or ("exit", None, "exit code %s" % proc.exitcode, None)))
    finally:
        for _unused, proc, _unused in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
    if errors:
        kinds, (name, errno, text, filename) = errors[0]
        if errno is not None:
            raise OSError(errno, text, filename) if filename else OSError(errno, text)
        raise ReportWriteError("rendering %s failed: %s: %s" % (", ".join(names[k] for k in kinds), name, text))
