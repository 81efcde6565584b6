"""The fleet-wide report: per-host result files in, one summary and five renderings out.

Input is a folder of JSON files, one per inventory host (``<inventory_hostname>.json``), written
by ``playbooks/report.yml``::

    {"host", "reachable", "failed", "reason", "provider", "price_per_hour",
     "gpu": <gpu facts> | null, "gate": [..] | null, "doctor": {..} | null, "collected_at"}

``load_results`` reads them (inventory hosts that left no file become unreachable placeholders),
``summarize`` turns them into one row per host and per GPU (the data model, docs/schema/fleet.schema.json),
fleet totals, the hosts to return or fix, version drift, and each host's ``verdict``: one line a renter acts
on (keep / fix here and what gpufleet will do / restart the container / reboot / return to provider /
check access, with the evidence worst first). ``summarize_folder`` does the same one file at a time.
``write_all`` writes fleet.html, fleet.json, fleet.csv, fleet.md and gpufleet.prom atomically.
Every value in the input may be missing or null; nothing here raises on partial data.

The package, one concern per file (docs/report.md has the picture):

    _common.py          constants (statuses, actions, file names) and value helpers
    load.py             reading result files, bundles, host lists
    model.py            one host row and its GPU rows from one result; judgement/door.py judge_host decides it
    summary.py          summarize / summarize_folder: totals, bad hosts, one_line; judge_fleet adds history, drift
    cells.py            table cells shared by the Markdown and HTML reports (plain text)
    columns.py          the GPU columns as data: fleet.csv's GPU part and the GPU tables' headers and cells
    pictures.py         the numbers behind the page's SVG pictures
    render_json.py      fleet.json          render_csv.py   fleet.csv
    render_markdown.py  fleet.md (templates/report.md.j2, explicit ``md`` escaping filter)
    render_html.py      fleet.html (templates/report.html.j2 + _pictures.html.j2, autoescape on)
    prometheus.py       gpufleet.prom (the one Prometheus writer)
    jinja_env.py        the Jinja2 environment, imported lazily (the package imports without Jinja2)
    parallel.py         the speed work: GC pause, forked workers, chunking
    write.py            write_all

To add a GPU column: one row in columns.py ``GPU_COLUMNS`` (key, label, formats, cell) gives fleet.csv, fleet.html
and fleet.md their header and cells; a new value also needs its key in the GPU row (model.py) and in
docs/schema/fleet.schema.json. A host column is likewise one row in ``HOST_COLUMNS`` (fleet.csv's host part, the
HTML and Markdown host tables), plus its key in model.py's host row and the schema when it shows a new value. The
templates loop over the cells, so they need no edit.
Templates print every value escaped (HTML: autoescape; Markdown: ``md``).
"""

from ..judgement.findings import finding_text as _finding_text  # noqa: F401
from ..judgement.judge import KEEP as VERDICT_KEEP  # noqa: F401
from ..judgement.judge import VERDICT_MAX, verdict, what_to_do  # noqa: F401
from ..parallel import PARALLEL_MIN_FILES, PARALLEL_MIN_ROWS, ReportWriteError  # noqa: F401
from ._common import (  # noqa: F401 - the package's public names
    _REASON_SEVERITIES,
    ACTION_CHECK,
    ACTION_FIX,
    ACTION_REBOOT,
    ACTION_RESTART,
    ACTION_RETURN,
    CHECK_ITEMS,
    CHECK_MODE_BANNER,
    CHECK_MODE_NOTE,
    CHECK_STATUSES,
    FACTS_TIME_SOURCES,
    NO_GPU_CODES,
    NOT_REACHED,
    OUTPUT_FILES,
    PROVIDER_CODES,
    SCHEMA,
    STATUSES,
    ReportInputError,
)
from .cells import CHECKLIST_ROWS, _checklist_hosts  # noqa: F401
from .columns import CSV_COLUMNS, GPU_COLUMNS  # noqa: F401
from .jinja_env import ReportTemplateError  # noqa: F401
from .load import iter_results, load_results, read_hosts_file, split_bundle  # noqa: F401
from .model import _measured_tflops, apply_decision, facts_time_text  # noqa: F401
from .prometheus import PROMETHEUS_METRICS, _host_gate, iter_prometheus, prom_escape, to_prometheus  # noqa: F401
from .render_csv import csv_rows, iter_csv, to_csv  # noqa: F401
from .render_html import HTML_GPU_ROWS, SORT_SCRIPT, iter_html, script_hash, to_html  # noqa: F401
from .render_json import iter_json, to_json  # noqa: F401
from .render_markdown import iter_markdown, to_markdown  # noqa: F401
from .summary import SPLIT_NAMES, one_line, summarize, summarize_folder  # noqa: F401
from .write import _CHUNKED, _RENDERERS, write_all  # noqa: F401
