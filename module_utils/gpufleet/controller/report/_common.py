"""Constants and small value helpers shared by every part of the report (no rendering here)."""

import datetime

from .. import values as _values
from ..checklist import item as _checkitem
from ..judgement import history as _history
from ..judgement import judge as _judgement

SCHEMA = 1

STATUSES = ("ok", "degraded", "failed", "unreachable", "no-gpu", "unknown")
# Order of the "hosts to return / fix" list: worst first.
_BAD_ORDER = {"failed": 0, "no-gpu": 1, "unreachable": 2, "unknown": 3, "degraded": 4}

NOT_REACHED = "no result (host not reached)"

# The judgement's vocabulary (controller/judgement/judge.py), by the names the report has always exported.
PROVIDER_CODES = _judgement.PROVIDER_CODES
_REASON_SEVERITIES = _judgement.FAULT_SEVERITIES
NO_GPU_CODES = _judgement.NO_GPU_CODES
# Where a host's facts_read_at comes from: the GPU facts' own time, else the time the report play
# wrote the host's record (the facts may be older: a fact cache), else none.
FACTS_TIME_SOURCES = ("gpu_facts", "record", None)

# The host actions (module_utils/gpufleet/controller/judgement/judge.py decides which one a host gets).
ACTION_RETURN = _judgement.ACTION_RETURN
ACTION_FIX = _judgement.ACTION_FIX
ACTION_CHECK = _judgement.ACTION_CHECK
ACTION_RESTART = _judgement.ACTION_RESTART
ACTION_REBOOT = _judgement.ACTION_REBOOT
# The pre-check's steps in order (playbooks/check.yml; the judgement's list).
CHECK_STEPS = _judgement.CHECK_STEPS

# Said in every rendering of a report written by an ``ansible-playbook --check`` run.
CHECK_MODE_BANNER = ("This report was written by a --check run: it shows what the run would do, "
                     "the hosts were not changed.")
CHECK_MODE_NOTE = "--check run: a plan, the hosts were not changed"

OUTPUT_FILES = {
    "html": "fleet.html",
    "json": "fleet.json",
    "csv": "fleet.csv",
    "markdown": "fleet.md",
    "prometheus": "gpufleet.prom",
}

# The renter's checklist (module_utils/gpufleet/controller/checklist/build.py, docs/checklist.md): item keys and
# labels (checkitem.ITEMS,
# read through audit); the last item is the GPU history's (module_utils/gpufleet/controller/judgement/history.py,
# docs/history.md).
CHECK_ITEMS = _checkitem.ITEMS + (_history.CHECK_ITEM,)
CHECK_STATUSES = _checkitem.STATUSES
_EMPTY = {}  # read only
# Items only some hosts have (checkitem.OPTIONAL_ITEMS: storage and network, where the pre-check measured them).
OPTIONAL_CHECK_ITEMS = _checkitem.OPTIONAL_ITEMS


def check_items(hosts):
    """The checklist items a fleet's report shows: ``CHECK_ITEMS``, then each optional item that some host of
    ``hosts`` has (a fleet without such evidence shows the items it always did)."""
    extra = tuple((key, label) for key, label in OPTIONAL_CHECK_ITEMS
                  if any(key in (h.get("checklist") or _EMPTY) for h in hosts))
    return CHECK_ITEMS + extra if extra else CHECK_ITEMS


class ReportInputError(Exception):
    """The results folder cannot be used (missing, not a folder, unreadable)."""


# --------------------------------------------------------------------------- small helpers
# The readers of untrusted JSON (controller/values.py), by the names the report's modules use.
_d = _values.as_dict
_l = _values.as_list
_num = _values.number
_flag = _values.flag
_price = _values.number_text
_INF = float("inf")
_text = _values.text


def _round(value, digits=2):
    return None if value is None else round(value, digits)


def _now_iso(now=None):
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if isinstance(now, datetime.datetime):
        return now.replace(microsecond=0).isoformat()
    return str(now)
