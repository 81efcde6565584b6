"""The collection gpufleet.fleet as scripts/build-collection makes it, installed and used by its FQCNs only.

Cheap (a build, one install into a scratch path, ansible-doc, syntax checks and one local play; about 15 s):
no container, no network. ansible-test sanity on the same tarball is scripts/collection-sanity (make collection);
the same FQCN names against container hosts is tests/e2e/test_collection_fqcn.py (the demo fleet).
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.collection import ansible_env  # noqa: E402 - after the line above

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Kinds of ansible-test sanity ignore Red Hat's collection certification permits
# (ansible-collections/partner-certification-checker, README); anything else must be fixed at its source.
PERMITTED_IGNORES = {"validate-modules:missing-gplv3-license", "shellcheck", "shebang", "action-plugin-docs",
                     "import-2.6", "import-2.7", "import-3.5", "compile-2.6", "compile-2.7", "compile-3.5",
                     "pylint:used-before-assignment"}


def _tool(name):
    path = BIN / name
    return str(path) if path.exists() else name


def _env(collections):
    return ansible_env(collections)


@pytest.fixture(scope="module")
def build(load_script, tmp_path_factory):
    out = tmp_path_factory.mktemp("collection")
    script = load_script("build-collection")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build-collection"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    tarball = Path(proc.stdout.strip().splitlines()[-1])
    assert tarball.is_file() and tarball.name.startswith("gpufleet-fleet-"), proc.stdout
    return {"script": script, "tree": out / "ansible_collections" / "gpufleet" / "fleet", "tarball": tarball}


@pytest.fixture(scope="module")
def installed(build, tmp_path_factory):
    """The tarball installed into an empty collections path, as a user would (its dependency, community.general,
    comes with the pinned ansible bundle: --no-deps, there is no Galaxy here)."""
    path = tmp_path_factory.mktemp("collections")
    proc = subprocess.run([_tool("ansible-galaxy"), "collection", "install", "--no-deps", "--force", "-p", str(path),
                           str(build["tarball"])], capture_output=True, text=True, env=_env(path), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (path / "ansible_collections" / "gpufleet" / "fleet" / "MANIFEST.json").is_file()
    return path


def test_every_plugin_of_the_checkout_is_in_the_collection(build):
    tree = build["tree"]
    expected = {
        "plugins/modules": list(ROOT.glob("library/*.py")) + list(ROOT.glob("roles/*/library/*.py")),
        "plugins/filter": list(ROOT.glob("roles/*/filter_plugins/*.py")),
        "plugins/inventory": list(ROOT.glob("inventory_plugins/*.py")),
        "plugins/callback": list(ROOT.glob("callback_plugins/*.py")),
        "plugins/doc_fragments": list(ROOT.glob("doc_fragments/*.py")),
        "plugins/module_utils/gpufleet": list(ROOT.glob("module_utils/gpufleet/*.py")),
        "playbooks": list(ROOT.glob("playbooks/*.yml")) + [ROOT / "site.yml"],
    }
    for folder, sources in expected.items():
        assert sources, folder
        assert {p.name for p in sources} <= {p.name for p in (tree / folder).iterdir()}, folder
    assert {p.name for p in (ROOT / "roles").iterdir() if p.is_dir()} == {p.name for p in (tree / "roles").iterdir()}
    # a collection role loads no plugins from its own folders: they were hoisted to plugins/
    assert not list(tree.glob("roles/*/library")) and not list(tree.glob("roles/*/filter_plugins"))
    for name in ("galaxy.yml", "meta/runtime.yml", "README.md", "LICENSE", "CHANGELOG.md"):
        assert (tree / name).is_file(), name


def test_only_module_imports_and_fragment_names_change_on_the_way(build):
    """One source: every built file equals its checkout file, but for the documented rewrites."""
    script, tree = build["script"], build["tree"]
    fragments = {p.stem for p in (ROOT / "doc_fragments").glob("*.py")}
    for src in ROOT.glob("library/*.py"):
        built = (tree / "plugins" / "modules" / src.name).read_text()
        assert built == script.plugin_docs(script.module_source(src.read_text()), fragments)
        assert "ansible.module_utils.gpufleet" not in built
    for src in ROOT.glob("module_utils/gpufleet/**/*.py"):
        rel = src.relative_to(ROOT / "module_utils")
        assert (tree / "plugins" / "module_utils" / rel).read_bytes() == src.read_bytes()
    for src in ROOT.glob("roles/*/tasks/*.yml"):
        assert (tree / src.relative_to(ROOT)).read_bytes() == src.read_bytes()


def test_doc_fragment_names_are_rewritten_to_ones_the_collection_has(build):
    tree = build["tree"]
    have = {p.stem for p in (tree / "plugins" / "doc_fragments").glob("*.py")}
    seen = 0
    for path in (tree / "plugins").rglob("*.py"):
        match = re.search(r'DOCUMENTATION = r"""(.*?)"""', path.read_text(), re.S)
        if not match:
            continue
        for name in yaml.safe_load(match.group(1)).get("extends_documentation_fragment") or ():
            seen += 1
            assert name.startswith(("ansible.builtin.", "gpufleet.fleet.")), (path.name, name)
            if name.startswith("gpufleet.fleet."):
                assert name.split(".")[2] in have, (path.name, name)
    assert seen >= 10


def test_site_yml_imports_what_lies_beside_it_in_the_collection(build):
    site = yaml.safe_load((build["tree"] / "playbooks" / "site.yml").read_text())
    imports = [play["ansible.builtin.import_playbook"] for play in site]
    assert imports and all((build["tree"] / "playbooks" / name).is_file() for name in imports), imports


def test_sanity_ignores_are_only_the_kinds_certification_permits():
    lines = [line.split("#")[0].split() for p in (ROOT / "tests" / "collection" / "sanity").glob("ignore-*.txt")
             for line in p.read_text().splitlines() if line.split("#")[0].strip()]
    for path, kind in lines:
        assert kind in PERMITTED_IGNORES, (path, kind)
        assert (ROOT / path).exists(), path  # the collection keeps these paths


def test_galaxy_metadata():
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert (galaxy["namespace"], galaxy["name"]) == ("gpufleet", "fleet")
    assert re.fullmatch(r"\d+\.\d+\.\d+", galaxy["version"]) and int(galaxy["version"].split(".")[0]) >= 1
    assert galaxy["license"] == ["GPL-3.0-or-later"] and "license_file" not in galaxy
    assert "GNU GENERAL PUBLIC LICENSE" in (ROOT / "LICENSE").read_text()[:200]
    assert "## %s" % galaxy["version"] in (ROOT / "CHANGELOG.md").read_text()
    assert all(re.fullmatch(r".+ \(@[\w-]+\)", a) for a in galaxy["authors"])
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    pinned = re.search(r"^ansible-core==(\d+)\.(\d+)\.", (ROOT / "requirements.txt").read_text(), re.M).groups()
    newest = re.search(r"^ansible-core==(\d+)\.(\d+)\.", (ROOT / "requirements-next.txt").read_text(), re.M).groups()
    # what was tested: from the pinned line to the newest one (requirements-next.txt, tests/e2e/test_check.py)
    assert runtime["requires_ansible"] == ">=%s.%s.0,<%s.%d" % (pinned + (newest[0], int(newest[1]) + 1))


def test_every_plugin_documents_itself_by_fqcn(installed):
    tree = installed / "ansible_collections" / "gpufleet" / "fleet" / "plugins"
    for kind, folder in (("module", "modules"), ("inventory", "inventory"), ("callback", "callback")):
        names = ["gpufleet.fleet." + p.stem for p in (tree / folder).glob("*.py")]
        proc = subprocess.run([_tool("ansible-doc"), "-t", kind, "--json"] + names, capture_output=True, text=True,
                              env=_env(installed), timeout=120)
        assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
        docs = json.loads(proc.stdout)
        assert sorted(docs) == sorted(names)


def test_module_utils_data_files_ship_and_are_read_from_the_installed_collection(installed):
    """module_utils files that are not Python (the report's templates, the driver bulletins table) are in the installed
    collection as they are in the checkout, and the table's reader finds its JSON beside it there."""
    utils = installed / "ansible_collections" / "gpufleet" / "fleet" / "plugins" / "module_utils"
    data = [f for f in (ROOT / "module_utils" / "gpufleet").rglob("*")
            if f.is_file() and f.suffix not in (".py", ".pyc") and "__pycache__" not in f.parts]
    assert any(f.name == "driver_bulletins.json" for f in data), data
    for src in data:
        rel = src.relative_to(ROOT / "module_utils")
        assert (utils / rel).read_bytes() == src.read_bytes(), rel
    code = ("import sys; from ansible_collections.gpufleet.fleet.plugins.module_utils.gpufleet.controller.checklist "
            "import driver_bulletins as t; print(t.DATA, t.NEWEST_BULLETIN, sorted(t.BRANCHES)[-1])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=installed, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    path, newest, branch = proc.stdout.split()
    assert Path(path).resolve().is_relative_to(installed.resolve()) and newest and branch.startswith("R")


def test_playbooks_resolve_by_fqcn(installed, tmp_path):
    for name in ("site", "facts", "provision", "remediate", "gate", "report", "return"):
        argv = [_tool("ansible-playbook"), "-i", "localhost,", "--syntax-check", "gpufleet.fleet." + name]
        proc = subprocess.run(argv, capture_output=True, text=True, env=_env(installed), cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, (name, proc.stdout[-2000:] + proc.stderr[-2000:])


def test_a_module_and_a_filter_run_by_fqcn_from_the_installed_collection(installed, tmp_path):
    """A play naming only gpufleet.fleet.* (and ansible.builtin.*): the module's module_utils travel with it from the
    collection (AnsiballZ), the role filter is a collection filter."""
    play = [{"name": "gpufleet.fleet by FQCN", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
             "tasks": [
                 {"name": "Pick a torch build", "register": "picked",
                  "gpufleet.fleet.torch_variant": {"torch_version": "2.5.1", "driver_version": "550.90.07",
                                                   "compute_capabilities": ["9.0"]}},
                 {"name": "The pip source policy", "ansible.builtin.set_fact": {
                     "pip_env": "{{ '/srv/wheels' | gpufleet.fleet.gpufleet_pip_env }}"}},
                 {"name": "Both answered", "ansible.builtin.assert": {"that": [
                     "picked.ansible_facts.torch_selection.requirement == 'torch==2.5.1+cu121'",
                     "pip_env.PIP_NO_INDEX == '1' and pip_env.PIP_FIND_LINKS == '/srv/wheels'"]}},
             ]}]
    (tmp_path / "fqcn.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    proc = subprocess.run([_tool("ansible-playbook"), "-i", "localhost,", "fqcn.yml"], capture_output=True, text=True,
                          env=_env(installed), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"localhost\s+: ok=3\s+changed=0\s+unreachable=0\s+failed=0", proc.stdout), proc.stdout[-1500:]


def test_execution_environment_carries_the_pinned_controller_side_and_this_collection():
    ee = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    pins = dict(re.findall(r"^([\w.-]+)==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M))
    assert ee["version"] == 3
    assert ee["images"]["base_image"]["name"].startswith("quay.io/centos/centos:stream")  # RPM-based, as required
    deps = ee["dependencies"]
    assert deps["ansible_core"]["package_pip"] == "ansible-core==" + pins["ansible-core"]
    assert deps["ansible_runner"]["package_pip"] == "ansible-runner==" + pins["ansible-runner"]
    for req in deps["python"]:
        name, version = req.split("==")
        assert pins[name] == version, req
        assert name not in ("nvidia-ml-py", "torch")  # the rented hosts' side
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    tarball = "gpufleet-fleet-%s.tar.gz" % version
    assert {"src": ".cache/collection/dist/" + tarball, "dest": "collections"} in ee["additional_build_files"]
    assert {"name": "collections/" + tarball, "type": "file"} in deps["galaxy"]["collections"]
    awx = yaml.safe_load((ROOT / "collections" / "requirements.yml").read_text())["collections"]
    assert [c for c in deps["galaxy"]["collections"] if c.get("type") != "file"] == awx


def test_awx_credential_types_inject_what_the_inventory_plugins_read():
    sources = sorted((ROOT / "awx" / "inventory_sources").glob("*.yml"))
    assert [p.stem for p in sources] == sorted(p.stem for p in (ROOT / "inventory_plugins").glob("*.py"))
    for source in sources:
        plugin = source.stem
        assert yaml.safe_load(source.read_text())["plugin"] == "gpufleet.fleet." + plugin
        doc = re.search(r'DOCUMENTATION = r"""(.*?)"""', (ROOT / "inventory_plugins" / (plugin + ".py")).read_text(),
                        re.S).group(1)
        env = [e["name"] for e in yaml.safe_load(doc)["options"]["api_key"]["env"]]
        cred = yaml.safe_load((ROOT / "awx" / "credential_types" / (plugin + ".yml")).read_text())
        assert cred["inputs"]["fields"] == [dict(cred["inputs"]["fields"][0], id="api_key", secret=True)]
        assert cred["injectors"] == {"env": {env[0]: "{{ api_key }}"}}, plugin
