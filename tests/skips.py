"""The reasons a test may be skipped under `make test`, in one place (issue 30).

`make test`, `make unit`, `make fleet-tests` and `make e2e` run pytest with GPUFLEET_STRICT=1. There a skip whose
reason matches none of ALLOWED below fails the test (or the test file, for a skip at import), naming the reason:
a missing tool or package means the machine is not set up (scripts/lib.sh ensure_test_tools installs the tools,
scripts/bootstrap the venv), not that the check may be left out. Every pytest run ends with the skips it took and
whether each is allowed (tests/conftest.py). Outside those make targets (`pytest tests/unit` in the inner loop) a
skip stays a skip, and is listed the same way.

A test that cannot run on this kind of machine skips with a reason starting with one of the keys, for example
``pytest.skip(skips.reason("no GPU", "nvidia-smi finds no device"))``.
"""

import re

# key: (pattern the skip's reason must match, why such a skip cannot be helped on a machine that is set up)
ALLOWED = {
    "no GPU": (r"^no GPU\b",
               "the machine has no NVIDIA GPU (CI, a laptop); such checks run on a lent GPU machine "
               "(scripts/device-smoke, docs/gate.md)"),
    "no torch CUDA build": (r"^no torch CUDA build\b",
                            "no torch CUDA wheel in .wheelhouse/torch-cu130 (2.9 GB, GPUFLEET_TORCH_CUDA=1 "
                            "scripts/wheelhouse); make test fetches it"),
    "a real NVIDIA driver": (r"^this machine has a real libnvidia-ml\.so\.1",
                             "the opposite case, on a GPU machine: a test of a host without any NVML library "
                             "cannot take the machine's own driver away"),
}


def reason(key, detail=""):
    """A skip reason under one of ALLOWED's keys: reason("no GPU", "nvidia-smi finds no device")."""
    if key not in ALLOWED:
        raise KeyError("%r is not an allowed skip (tests/skips.py: %s)" % (key, ", ".join(ALLOWED)))
    return "%s: %s" % (key, detail) if detail else key


def clean(text):
    """A skip report's reason without pytest's "Skipped: " prefix."""
    text = str(text or "").strip()
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


def allowed(text):
    """The ALLOWED key the skip reason ``text`` falls under, or None."""
    text = clean(text)
    for key, (pattern, _why) in ALLOWED.items():
        if re.search(pattern, text):
            return key
    return None


# Container suites left out of a run that did not ask for them (why -> how many); the run's summary says so.
DESELECTED = {}


def deselect(config, items, chosen, why):
    """Leave ``chosen`` out of this run (pytest's "deselected", not "skipped": they were not asked for), noting why."""
    chosen_ids = {id(item) for item in chosen}
    items[:] = [item for item in items if id(item) not in chosen_ids]
    config.hook.pytest_deselected(items=list(chosen))
    DESELECTED[why] = DESELECTED.get(why, 0) + len(chosen)
