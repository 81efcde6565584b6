"""Host and controller code apart (issue 38): module_utils/gpufleet/layers.py says where each module runs.

What a module ships to a host is the transitive closure of its imports of module_utils (Ansible's
``recursive_finder``: every import, also one inside a function, plus the package ``__init__`` files). These
tests walk the imports with ``ast`` the same way and hold the rule: no host-side module reaches a
controller-side one, and every module is classified. One test checks the walk against Ansible's own finder.

``python tests/unit/test_layers.py`` prints each library module's payload: its gpufleet files and their bytes.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet import layers

ROOT = Path(__file__).resolve().parents[2]
UTILS = ROOT / "module_utils"
PACKAGE = UTILS / "gpufleet"
# The ways code names the package: in a module of the checkout, of the built collection, and on sys.path.
PREFIXES = ("ansible.module_utils.", "ansible_collections.gpufleet.fleet.plugins.module_utils.", "")


def library_modules():
    return sorted(list(ROOT.glob("library/*.py")) + list(ROOT.glob("roles/*/library/*.py")))


def file_of(dotted):
    """gpufleet.report.cells -> its file; None when the name is no module of the package."""
    if dotted != "gpufleet" and not dotted.startswith("gpufleet."):
        return None
    path = UTILS.joinpath(*dotted.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def dotted_of(path):
    parts = path.relative_to(UTILS).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def key_of(dotted):
    """The name layers.py classifies: gpufleet -> __init__, gpufleet.report.cells -> report."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path):
    """The gpufleet modules a file imports, anywhere in it (a lazy import inside a function ships too)."""
    package = dotted_of(path).split(".") if path.is_relative_to(UTILS) else []
    if package and path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module
            names = [base] + [base + "." + alias.name for alias in node.names]
        else:
            continue
        for name in names:
            for prefix in PREFIXES:
                if name.startswith(prefix) and file_of(name[len(prefix):]):
                    found.add(name[len(prefix):])
                    break
    return found


def closure(path):
    """{dotted name: the import chain that reaches it} for everything a module pulls in, package inits included."""
    seen = {}
    todo = [(name, (name,)) for name in sorted(imports(path))]
    while todo:
        name, chain = todo.pop(0)
        if name in seen:
            continue
        seen[name] = chain
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo += [(p, chain) for p in parents if p not in seen]
        todo += [(n, chain + (n,)) for n in sorted(imports(file_of(name))) if n not in seen]
    return seen


def payload(path):
    """(files, bytes) of module_utils/gpufleet a library module ships."""
    files = sorted({file_of(name) for name in closure(path)})
    return files, sum(f.stat().st_size for f in files)


def test_every_module_is_classified_once():
    files = sorted(PACKAGE.rglob("*.py"))
    keys = {key_of(dotted_of(f)) for f in files}
    assert not set(layers.HOST) & set(layers.CONTROLLER), "on both sides"
    unclassified = keys - set(layers.HOST) - set(layers.CONTROLLER)
    assert not unclassified, "add these to HOST or CONTROLLER in module_utils/gpufleet/layers.py: %s" % sorted(
        unclassified)
    assert set(layers.HOST) | set(layers.CONTROLLER) <= keys, "layers.py names a module that is not there"
    assert {p.stem for p in library_modules()} >= set(layers.CONTROLLER_MODULES)


def test_no_host_module_imports_controller_code():
    """doctor_rules once imported audit for one constant: 950 lines of checklist in every doctor payload."""
    wrong = []
    for key in sorted(layers.HOST):
        path = file_of("gpufleet" if key == "__init__" else "gpufleet." + key)
        for name, chain in closure(path).items():
            if key_of(name) in layers.CONTROLLER:
                wrong.append("%s -> %s" % (key, " -> ".join(key_of(n) for n in chain)))
    assert not wrong, "host-side code imports controller-side code: %s" % wrong


@pytest.mark.parametrize("module", [p for p in library_modules() if p.stem not in layers.CONTROLLER_MODULES],
                         ids=lambda p: p.stem)
def test_a_host_module_ships_host_code_only(module):
    shipped = {key_of(name) for name in closure(module)}
    assert shipped <= set(layers.HOST), "%s ships controller code: %s" % (module.stem, sorted(shipped - set(
        layers.HOST)))


def test_the_walk_reads_imports_as_ansible_does():
    """Ansible's recursive_finder builds each payload of the checkout's modules; its gpufleet files are ours."""
    code = r"""
import datetime, io, json, sys, zipfile
from ansible.plugins.loader import init_plugin_loader, module_utils_loader
from ansible.executor import module_common
from ansible._internal._ansiballz import _builder
init_plugin_loader()
module_utils_loader.add_directory(sys.argv[1])
out = {}
for path in sys.argv[2:]:
    zf = zipfile.ZipFile(io.BytesIO(), "w")
    name = path.rsplit("/", 1)[-1][:-3]
    module_common.recursive_finder(name, "ansible.modules." + name, open(path, "rb").read(), zf,
                                   datetime.datetime(2020, 1, 1), _builder.ExtensionManager())
    out[name] = sorted(i.filename for i in zf.infolist() if i.filename.startswith("ansible/module_utils/gpufleet/"))
print(json.dumps(out))
"""
    modules = library_modules()
    done = subprocess.run([sys.executable, "-c", code, str(UTILS)] + [str(p) for p in modules], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=120, check=False)
    # Written against ansible-core 2.19's module_common (pinned in requirements.txt); another one may need this
    # snippet adjusted.
    assert done.returncode == 0, done.stderr[-2000:]
    ansible = json.loads(done.stdout)
    assert "ansible/module_utils/gpufleet/doctor.py" in ansible["gpu_doctor"]
    for module in modules:
        ours = ["ansible/module_utils/" + str(f.relative_to(UTILS)) for f in payload(module)[0]]
        assert ours == ansible[module.stem], module.stem


if __name__ == "__main__":
    for module in library_modules():
        files, size = payload(module)
        print("%-22s %2d files %8d bytes  %s" % (module.stem, len(files), size,
                                                 " ".join(str(f.relative_to(PACKAGE)) for f in files)))
