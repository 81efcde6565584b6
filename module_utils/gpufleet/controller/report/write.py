"""``write_all``: the five files, each written in chunks to a temporary file and moved into place."""

import os
import tempfile

from ..parallel import gc_paused as _gc_paused
from ..parallel import parallel_ok as _parallel_ok
from ..parallel import write_parallel as _write_parallel
from ._common import OUTPUT_FILES
from .prometheus import iter_prometheus, to_prometheus
from .render_csv import iter_csv, to_csv
from .render_html import iter_html, to_html
from .render_json import iter_json, to_json
from .render_markdown import iter_markdown, to_markdown
from .summary import summarize


def _write_atomic(path, chunks):
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="", buffering=1 << 20) as fh:
            if isinstance(chunks, str):
                chunks = (chunks,)
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # noqa: S103 - a report for people and node_exporter; holds no secrets
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_RENDERERS = {"html": to_html, "json": to_json, "csv": to_csv, "markdown": to_markdown, "prometheus": to_prometheus}
_CHUNKED = {"html": iter_html, "json": iter_json, "csv": iter_csv, "markdown": iter_markdown,
            "prometheus": iter_prometheus}
# The two workers' shares, about even in time on a large fleet (see docs/benchmarks.md).


def _write_group(summary, outdir, kinds):
    for kind in kinds:
        _write_atomic(os.path.join(outdir, OUTPUT_FILES[kind]), _CHUNKED[kind](summary))


def write_all(results, outdir, now=None, include_results=False, workers=None, check_mode=False):
    """Write fleet.html, fleet.json, fleet.csv, fleet.md and gpufleet.prom into ``outdir`` (created if needed).

    ``results``: a summary (from ``summarize``) or raw results (summarized here; ``include_results``
    then keeps them in fleet.json). Each file is written in chunks to a temporary file in ``outdir``
    and moved into place with ``os.replace``, so a reader (a browser, node_exporter) never sees a
    half-written file. ``workers``: None picks two forked worker processes for a large fleet on a
    machine with two or more CPUs, one process otherwise; 1 forces one, 2 forces two. A worker's
    failure is raised here (``OSError`` for an I/O error, else ``ReportWriteError``). Returns
    ``{"html": path, "json": path, "csv": path, "markdown": path, "prometheus": path}``.
    ``check_mode`` is used when ``results`` are raw results (see ``summarize``).
    """
    outdir = os.fspath(outdir)
    os.makedirs(outdir, exist_ok=True)
    if isinstance(results, dict) and "hosts" in results:
        summary = results
    else:
        summary = summarize(results, now=now, include_results=include_results, check_mode=check_mode)
    with _gc_paused():
        if _parallel_ok(summary, workers):
            _write_parallel(_write_group, summary, outdir, OUTPUT_FILES)
        else:
            _write_group(summary, outdir, OUTPUT_FILES)
    return {kind: os.path.join(outdir, filename) for kind, filename in OUTPUT_FILES.items()}
