#!/usr/bin/env python3
"""The Python that runs on hosts, for scripts/collection-sanity's checks against the oldest Python hosts may have.

    host_python.py PROBE_DIR   prints one path a line: every host-side Python file of the checkout, then the Python
                               sources that run on hosts as `python -c SOURCE`, each written to PROBE_DIR/<name>.py

Host-side files: the modules (library/*.py, roles/*/library/*.py), module_utils/, and the Python files roles copy to
hosts (roles/*/files/: a .py suffix or a python shebang). Embedded sources: a module-level string passed as
`[python, "-c", NAME]` in that code (the doctor's torch and cuInit probes, the gate's gloo child), and a role or
playbook variable passed as `[.../python, "-c", NAME]` in a task (the torch role's probes). Each such `-c` argument
found must be named in PYTHON_SOURCES or NOT_PYTHON, so a new probe cannot go unchecked. Controller-only code
(plugins, scripts/) is not listed: ansible-core 2.19's controller is Python >= 3.11, which the collection's own sanity
run covers.
"""

import ast
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
# `-c` arguments that are Python source, run with the host's (or the image's) interpreter.
PYTHON_SOURCES = {"TORCH_PROBE", "CUINIT_PROBE", "_GLOO_CHILD", "__torch_have_script", "__torch_probe_script",
                  "TORCH_LOCATE"}
# `-c` arguments that are something else: a login shell's script (doctor_probe's environment print).
NOT_PYTHON = {"_PRINT_ENV"}
# A task's argv that runs a python with -c and a variable: ["{{ venv }}/bin/python", "-c", "{{ NAME }}"] or
# [venv ~ '/bin/python', '-c', NAME].
TASK_DASH_C = re.compile(r"""python['"]?\s*,\s*['"]-c['"]\s*,\s*['"]?(?:\{\{\s*)?(\w+)""")


def host_files():
    """The checkout's host-side Python files, sorted."""
    files = set(ROOT.glob("library/*.py")) | set(ROOT.glob("roles/*/library/*.py"))
    files |= set(ROOT.glob("module_utils/**/*.py"))
    for path in ROOT.glob("roles/*/files/*"):
        if path.is_file() and (path.suffix == ".py" or re.match(rb"#!\S*python|#!.*env python", path.read_bytes())):
            files.add(path)
    return sorted(files)


def python_dash_c(path):
    """{NAME: source} for each module-level string NAME that `path` passes as a `-c` argument in a list literal."""
    tree = ast.parse(path.read_text(), str(path))
    strings = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            strings.update((t.id, node.value.value) for t in node.targets if isinstance(t, ast.Name))
    found = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.List):
            continue
        for before, arg in zip(node.elts, node.elts[1:]):
            if isinstance(before, ast.Constant) and before.value == "-c" and isinstance(arg, ast.Name):
                if arg.id not in strings:
                    sys.exit(f"{path}: `-c` {arg.id} is not a module-level string; check it by hand")
                found[arg.id] = strings[arg.id]
    return found


def yaml_vars(node, into):
    """Every string value of a mapping key in a loaded YAML document, by key."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str):
                into.setdefault(key, value)
            yaml_vars(value, into)
    elif isinstance(node, list):
        for item in node:
            yaml_vars(item, into)
    return into


def task_dash_c():
    """{NAME: source} for each variable a role task or playbook runs as `python -c`."""
    yml = sorted(ROOT.glob("roles/*/tasks/*.yml")) + sorted(ROOT.glob("playbooks/*.yml"))
    names = {name for path in yml for name in TASK_DASH_C.findall(path.read_text())}
    values = {}
    for path in yml + sorted(ROOT.glob("roles/*/vars/*.yml")) + sorted(ROOT.glob("roles/*/defaults/*.yml")):
        for doc in yaml.safe_load_all(path.read_text()):
            yaml_vars(doc, values)
    found = {}
    for name in sorted(names - NOT_PYTHON):
        if name not in values or "{{" in values[name] or "{%" in values[name]:
            sys.exit(f"python -c {name}: no plain (template-free) definition of it under roles/; check it by hand")
        found[name] = values[name]
    return found


def main(probe_dir):
    """Print the host files, then write and print the embedded sources."""
    files = host_files()
    sources = task_dash_c()
    for path in files:
        if path.suffix == ".py":
            sources.update(python_dash_c(path))
    unknown = set(sources) - PYTHON_SOURCES - NOT_PYTHON
    if unknown:
        sys.exit(f"new `-c` argument(s) {sorted(unknown)}: name each in PYTHON_SOURCES or NOT_PYTHON of {__file__}")
    missing = PYTHON_SOURCES - set(sources)
    if missing:
        sys.exit(f"PYTHON_SOURCES names {sorted(missing)}, run with -c nowhere any more: update {__file__}")
    out = Path(probe_dir)
    out.mkdir(parents=True, exist_ok=True)
    for path in files:
        print(path)
    for name in sorted(PYTHON_SOURCES):
        probe = out / f"{name.strip('_')}.py"
        probe.write_text(sources[name] + "\n")
        print(probe)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
