"""torch_target (issue 41): which environment's torch gpufleet acts on, whether that torch runs the GPUs, what restores
its saved freeze; gpufleet/host/pytorch/target.py, the probe it runs on the host, and library/torch_target.py as a
module."""

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from gpufleet.host.pytorch import target as tt

from tests.unit import ansible_module

ROOT = Path(__file__).resolve().parents[2]
GPUFLEET = "/opt/gpufleet/venv"

# What scripts/find-python prints on a vast.ai-like host: root's ~/.bashrc activates /venv/main (torch 2.5.1+cu121),
# gpufleet's venv holds its own torch (tests/unit/test_find_python.py makes the real script print this shape).
VAST = {
    "torch": "/venv/main/bin/python3", "nvml": "", "any": "/venv/main/bin/python3",
    "envs": [{"python": "/venv/main/bin/python3", "kind": "login_shell", "version": "3.12.3", "torch": "2.5.1+cu121",
              "nvml": False},
             {"python": "/opt/gpufleet/venv/bin/python", "kind": "gpufleet", "version": "3.11.2",
              "torch": "2.13.0+cpu", "nvml": True},
             {"python": "/usr/bin/python3", "kind": "system", "version": "3.12.3", "torch": None, "nvml": False}],
    "judged": {"python": "/venv/main/bin/python3", "why": "root's interactive login shell (/bin/bash -lic) runs "
                                                          "/venv/main/bin/python3, with torch 2.5.1+cu121: the "
                                                          "renter's own torch"},
}


# ---- choose ------------------------------------------------------------------------------------------------------
def test_auto_takes_the_renter_environment_find_python_judged():
    got = tt.choose("auto", VAST, GPUFLEET, GPUFLEET)
    assert got["python"] == "/venv/main/bin/python3"
    assert got["gpufleet"] is False
    assert got["found_kind"] == "login_shell"
    assert "renter's own torch" in got["why"]


def test_gpufleet_mode_keeps_the_isolated_venv_whatever_the_renter_has():
    got = tt.choose("gpufleet", VAST, "/opt/other", GPUFLEET)
    assert got == {"python": "/opt/other/bin/python", "gpufleet": True, "found_kind": "gpufleet",
                   "why": "torch_target is gpufleet: gpufleet's own venv /opt/other"}


def test_auto_without_any_torch_is_gpufleets_venv_as_before():
    found = {"envs": [{"python": "/usr/bin/python3", "kind": "login_shell", "torch": None}],
             "judged": {"python": None, "why": "no torch in any of the 1 Python(s) that run here"}}
    got = tt.choose("auto", found, GPUFLEET, GPUFLEET)
    assert got["python"] == GPUFLEET + "/bin/python" and got["gpufleet"] is True
    assert "no torch in any" in got["why"]
    assert tt.choose("auto", {}, GPUFLEET, GPUFLEET)["gpufleet"] is True


@pytest.mark.parametrize("judged, kind", [
    ("/opt/gpufleet/venv/bin/python", "gpufleet"),      # the second run after gpufleet installed its own torch
    ("/opt/gpufleet/venv/bin/python3", "login_shell"),  # a login shell that activates gpufleet's venv
])
def test_gpufleets_own_torch_is_never_taken_for_the_renters(judged, kind):
    found = {"envs": [{"python": judged, "kind": kind, "torch": "2.13.0+cpu"}], "judged": {"python": judged}}
    got = tt.choose("auto", found, GPUFLEET, GPUFLEET)
    assert got["gpufleet"] is True and got["python"] == GPUFLEET + "/bin/python"


def test_the_remediate_fix_handing_the_doctors_interpreter_in_as_torch_venv_still_finds_the_renter():
    # roles/remediate/tasks/fix_torch.yml includes the torch role with torch_venv = the doctor's interpreter's prefix
    got = tt.choose("auto", VAST, "/venv/main", GPUFLEET)
    assert got["gpufleet"] is False and got["python"] == "/venv/main/bin/python3"


def test_a_decision_handed_down_is_kept_and_a_bad_mode_is_refused():
    decided = {"mode": "auto", "python": "/venv/main/bin/python3", "gpufleet": False, "found_kind": "venv",
               "why": "earlier"}
    assert tt.choose("auto", {}, GPUFLEET, GPUFLEET, decided)["python"] == "/venv/main/bin/python3"
    with pytest.raises(tt.TargetError, match="gpufleet"):
        tt.choose("auto", {}, GPUFLEET, GPUFLEET, {"python": "/x"})
    with pytest.raises(tt.TargetError, match="auto, gpufleet"):
        tt.choose("renter", VAST, GPUFLEET, GPUFLEET)


# ---- classify ----------------------------------------------------------------------------------------------------
def test_classify_venv_conda_pep668_system():
    assert tt.classify({"prefix": "/venv/main", "base_prefix": "/usr", "externally_managed": True}) == {
        "kind": "venv", "managed": False, "managed_why": None}  # a venv ignores the base's marker (PEP 668)
    conda = tt.classify({"prefix": "/opt/conda", "base_prefix": "/opt/conda", "conda": True})
    assert conda["kind"] == "conda" and conda["managed"] and "/opt/conda/conda-meta" in conda["managed_why"]
    system = tt.classify({"prefix": "/usr", "base_prefix": "/usr", "externally_managed": True})
    assert system["kind"] == "system" and system["managed"] and "PEP 668" in system["managed_why"]
    assert tt.classify({"prefix": "/usr", "base_prefix": "/usr", "externally_managed": False})["managed"] is False


# ---- judge -------------------------------------------------------------------------------------------------------
def test_the_cu121_build_cannot_run_an_rtx_5090_and_says_why():
    runs, why = tt.judge("2.5.1+cu121", "12.1", "575.57.08", ["12.0"])
    assert runs is False
    assert "12.0 (Blackwell) has no kernels in torch 2.5.1+cu121" in why


@pytest.mark.parametrize("version, cuda, driver, ccs", [
    ("2.11.0+cu128", "12.8", "575.57.08", ["12.0"]),  # the build the solver picks for that card
    ("2.5.1+cu121", "12.1", "535.183.01", ["9.0"]),   # the default pin on an H100
    ("2.11.0", "12.8", "575.57.08", ["12.0"]),        # unlabelled: the variant from torch.version.cuda
])
def test_builds_that_run_are_kept(version, cuda, driver, ccs):
    runs, why = tt.judge(version, cuda, driver, ccs)
    assert runs is True, why


def test_a_cpu_build_on_a_gpu_host_cannot_run_it():
    assert tt.judge("2.13.0+cpu", None, "575.57.08", ["12.0"])[0] is False


@pytest.mark.parametrize("version, cuda, driver, ccs, words", [
    (None, None, "575.57.08", ["12.0"], "no torch"),
    ("2.5.1+cu121", "12.1", "575.57.08", [], "no GPU"),
    ("2.5.1+cu121", "12.1", "", ["12.0"], "no driver version"),  # a driver being repaired: not a torch to replace
    ("1.13.1+cu117", "11.7", "575.57.08", ["8.0"], "not in the compatibility table"),
    ("2.5.1", None, "575.57.08", ["8.0"], "no CUDA variant label"),
])
def test_what_cannot_be_judged_is_left_alone(version, cuda, driver, ccs, words):
    runs, why = tt.judge(version, cuda, driver, ccs)
    assert runs is None and words in why


def test_variant_of():
    assert tt.variant_of("2.5.1+cu121", None) == "cu121"
    assert tt.variant_of("2.8.0", "12.8") == "cu128"
    assert tt.variant_of("2.8.0", None) is None


# ---- freeze and rollback -----------------------------------------------------------------------------------------
def test_freeze_file_is_one_per_environment_under_the_state_folder():
    assert tt.freeze_file("/var/lib/gpufleet", "/venv/main") == "/var/lib/gpufleet/torch/freeze/venv-main.txt"
    assert tt.freeze_file("/var/lib/gpufleet/", "/opt/conda/envs/a b") == \
        "/var/lib/gpufleet/torch/freeze/opt-conda-envs-a-b.txt"


def test_rollback_plan_reinstalls_what_differs_and_removes_what_was_added():
    saved = ["numpy==1.26.4", "torch==2.5.1+cu121", "-e git+https://x/y#egg=mine", "Pillow==10.0.0", "", "# c"]
    current = ["numpy==1.26.4", "torch==2.11.0+cu128", "nvidia-cudnn-cu12==9.1.0.70", "pillow==10.0.0", "mine==0.1"]
    plan = tt.rollback_plan(saved, current)
    assert plan["install"] == ["torch==2.5.1+cu121"]  # numpy is as saved; Pillow/pillow is one project
    assert plan["uninstall"] == ["nvidia-cudnn-cu12"]
    assert plan["skipped"] == ["-e git+https://x/y#egg=mine"]


def test_rollback_plan_of_a_restored_environment_is_empty():
    lines = ["numpy==1.26.4", "torch==2.5.1+cu121"]
    assert tt.rollback_plan(lines, list(reversed(lines))) == {"install": [], "uninstall": [], "skipped": []}


# ---- the probe, run by a real interpreter ------------------------------------------------------------------------
def _fake_torch(site, version, cuda):
    pkg = Path(site) / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise SystemExit('the probe must not import torch')\n")
    (pkg / "version.py").write_text("__version__ = '%s'\ncuda: Optional[str] = %s\n"
                                    % (version, repr(cuda) if cuda else "None"))


def test_the_probe_reads_torch_without_importing_it(tmp_path):
    _fake_torch(tmp_path / "site", "2.5.1+cu121", "12.1")
    out = subprocess.run([sys.executable, "-c", tt.PROBE], capture_output=True, text=True, check=True, cwd="/",
                         env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")))
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["torch"] == "2.5.1+cu121" and got["torch_cuda"] == "12.1"
    assert got["prefix"] == sys.prefix and got["pip"] in (True, False)
    assert got["version"] == "%d.%d.%d" % sys.version_info[:3]


# ---- the module --------------------------------------------------------------------------------------------------
def _module(tmp_path, args, cli=False):
    """(ok, result): the module's AnsiballZ payload run by this Python, or with cli through the real `ansible
    localhost -m torch_target -o` CLI (tests/unit/ansible_module.py)."""
    if cli:
        state, result, _out = ansible_module.cli_run("torch_target", args, tmp_path)
        return state == "localhost | SUCCESS", result
    return ansible_module.run("torch_target", args, tmp_path)


@ansible_module.needs_ansible
def test_module_on_a_renter_venv_with_a_torch_the_rtx_5090_cannot_run(tmp_path):
    env_dir = tmp_path / "venv-main"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site = next(env_dir.glob("lib/python3*/site-packages"))
    _fake_torch(site, "2.5.1+cu121", "12.1")
    python = str(env_dir / "bin" / "python")
    state = tmp_path / "state"
    found = {"envs": [{"python": python, "kind": "venv", "torch": "2.5.1+cu121"}], "judged": {"python": python}}
    args = {"mode": "auto", "found": found, "venv": GPUFLEET, "gpufleet_venv": GPUFLEET,
            "driver_version": "575.57.08", "compute_capabilities": ["12.0"], "state_dir": str(state)}
    ok, res = _module(tmp_path, args, cli=True)
    assert ok, res
    assert res["changed"] is False
    t = res["ansible_facts"]["torch_target"]
    assert t["python"] == python and t["gpufleet"] is False and t["kind"] == "venv" and t["managed"] is False
    assert t["prefix"] == str(env_dir) and t["torch"] == "2.5.1+cu121" and t["runs"] is False
    assert "no kernels" in t["runs_why"]
    assert t["freeze_file"] == str(state) + "/torch/freeze/" + str(env_dir).strip("/").replace("/", "-") \
        .replace("_", "-") + ".txt"
    assert t["saved"] is False and t["rollback"] is None and t["pip"] is False

    # a saved freeze: the module says what restores it
    Path(t["freeze_file"]).parent.mkdir(parents=True)
    Path(t["freeze_file"]).write_text("torch==2.5.1+cu121\n")
    ok, res = _module(tmp_path, args)
    assert ok and res["ansible_facts"]["torch_target"]["rollback"]["install"] == ["torch==2.5.1+cu121"]

    # gpufleet mode does not look at the renter's environment at all
    ok, res = _module(tmp_path, dict(args, mode="gpufleet", venv=str(tmp_path / "nowhere")))
    t = res["ansible_facts"]["torch_target"]
    assert ok and t["gpufleet"] is True and t["prefix"] is None and "freeze_file" not in t


def _script(path, first_line):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(first_line + "\nimport sys\n")
    path.chmod(0o755)
    return str(path)


def test_pip_command_beside_the_interpreter_comes_first(tmp_path):
    python = _script(tmp_path / "venv/bin/python", "")
    pip = _script(tmp_path / "venv/bin/pip3", "#!" + python)
    _script(tmp_path / "usr-local-bin/pip", "#!" + python)
    assert tt.pip_command(python, "3.12", dirs=[str(tmp_path / "usr-local-bin")]) == pip


def test_pip_command_of_a_system_python_whose_pip_came_from_get_pip(tmp_path):
    """RunPod's layout: /usr/bin/python3 with pip installed by pip (get-pip.py): the command is /usr/local/bin/pip,
    whose #! line names /usr/bin/python3; before, the role refused with 'no pip' and advised ensurepip."""
    python = _script(tmp_path / "usr/bin/python3", "")
    other = _script(tmp_path / "usr/bin/python3.10", "")
    local = tmp_path / "usr/local/bin"
    _script(local / "pip3.10", "#!" + other)  # another Python's pip: never taken
    pip = _script(local / "pip", "#!%s -E" % python)  # with an option after the interpreter
    assert tt.pip_command(python, "3.12", dirs=[str(local)]) == pip
    assert tt.pip_command(other, "3.10", dirs=[str(local)]) == str(local / "pip3.10")
    # through a link to the interpreter, as /usr/bin/python3 -> python3.12
    link = tmp_path / "usr/bin/python3-link"
    link.symlink_to(python)
    assert tt.pip_command(str(link), "3.12", dirs=[str(local)]) == pip


def test_no_pip_command_is_none(tmp_path):
    python = _script(tmp_path / "usr/bin/python3", "")
    _script(tmp_path / "usr/local/bin/pip", "#!/opt/elsewhere/python")
    _script(tmp_path / "usr/local/bin/pip3", "not a script line")
    assert tt.pip_command(python, "3.12", dirs=[str(tmp_path / "usr/local/bin")]) is None


# ---- with the real scripts/find-python (its test layouts) ---------------------------------------------------------
def test_the_real_find_python_on_vast_ais_layout_gives_the_renters_venv(tmp_path):
    from tests.unit.test_find_python import Host

    host = Host(tmp_path)
    venv_main = host.env("/venv/main", torch="2.5.1+cu121")
    gpufleet = host.env("/opt/gpufleet/venv", torch="2.13.0+cpu", nvml=True)
    host.bashrc(". %s/bin/activate\n" % venv_main)
    got = tt.choose("auto", host.run(), str(gpufleet), str(gpufleet))
    assert got["python"] == "%s/bin/python3" % venv_main and got["gpufleet"] is False, got


def test_the_real_find_python_after_gpufleet_installed_its_own_torch_keeps_gpufleets_venv(tmp_path):
    from tests.unit.test_find_python import Host

    host = Host(tmp_path)
    gpufleet = host.env("/opt/gpufleet/venv", torch="2.13.0+cpu", nvml=True)
    found = host.run()
    assert found["judged"]["python"].startswith(str(gpufleet)), found["judged"]  # this machine's own has no torch
    got = tt.choose("auto", found, "/opt/gpufleet/venv", "/opt/gpufleet/venv")
    assert got["gpufleet"] is True and got["python"] == "/opt/gpufleet/venv/bin/python"
