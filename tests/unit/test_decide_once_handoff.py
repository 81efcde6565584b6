"""Issue 27 items 1, 3 and 4: the doctor decides once, the remediate role hands the decision down, --check names
the exact targets, and a remediation whose outcome did not change writes nothing.

Hosts are real file trees (real toolkit directories, version.json files and symlinks, read by cudatk through a
HostFS) with the doctor's recorded torch texts; the torch build comes from the same solver torch_variant runs.
"""

import copy
import importlib.util
import json
import pathlib

import yaml
from gpufleet.host.cuda import layout as cudalayout
from gpufleet.host.cuda import read as cudaread
from gpufleet.host.cuda import toolkit as cudatk
from gpufleet.host.doctor import diagnose as doctor
from gpufleet.host.pytorch import compat as torchcompat
from gpufleet.host.pytorch import parse as torchparse
from test_cudatk import link, local_toolkit
from test_doctor import _torch, ev_arch, ev_wrong_variant, healthy, text

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("remediate_filters_once",
                                               ROOT / "roles/remediate/filter_plugins/remediate.py")
rf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rf)


def host_11_8_and_12_1(tmp_path, link_to="/usr/local/cuda-12.1"):
    """Toolkits 11.8 and 12.1 from NVIDIA's runfiles, /usr/local/cuda at ``link_to``."""
    root = tmp_path / "host"
    local_toolkit(root, "11.8", "11.8.0", "11.8.89")
    local_toolkit(root, "12.1", "12.1.1", "12.1.105")
    link(root, "/usr/local/cuda", link_to)
    return root


def layout(root, **kw):
    return cudalayout.collect(cudaread.HostFS(str(root)), run_ldconfig=False, **kw)


def examine(ev):
    result = doctor.diagnose(ev)
    result["evidence"] = ev
    return result


def nvml_only_driver_12_0(root):
    """The doctor's evidence where only NVML answers: it reports CUDA 12.0 (a 525 driver); gpu_doctor hands that
    version to cudalayout.collect, as library/gpu_doctor.py does."""
    ev = healthy()
    ev["nvml"].update(driver_version="525.147.05", cuda_driver_version="12.0", source="nvml")
    ev["proc_driver_version"] = None
    ev["cudatk"] = layout(root, driver_cuda="12.0")
    return ev


# ---------------------------------------------------------------- item 1: one decision, handed down

def test_doctor_and_cuda_links_pick_the_same_toolkit_where_only_nvml_answers(tmp_path):
    root = host_11_8_and_12_1(tmp_path)
    before = examine(nvml_only_driver_12_0(root))
    decision = before["decision"]
    assert decision["driver_cuda_version"] == "12.0" and decision["driver_cuda_version_source"] == "nvml"
    assert decision["toolkit"]["root"] == "/usr/local/cuda-11.8" and decision["toolkit"]["rule"] == "driver_compatible"
    found = [f for f in before["findings"] if f["code"] == "cuda_link_wrong_target"]
    assert found and found[0]["evidence"]["expected"] == decision["cuda_link"]["target"] == "/usr/local/cuda-11.8"

    # What cuda_links got before: nothing, and its cuda_toolkits asked the driver itself, which did not answer
    # outside the venv: the highest toolkit, the one the doctor flags.
    assert layout(root)["chosen"]["root"] == "/usr/local/cuda-12.1"

    # What remediate hands down now (fix_links.yml), and what cuda_toolkits then chooses with no driver answering.
    handed = rf.remediate_handoff(before)
    assert handed["cuda_links_version"] == "11.8" and handed["cuda_links_driver_cuda_version"] == "12.0"
    links_side = layout(root, pinned=handed["cuda_links_version"], driver_cuda=handed["cuda_links_driver_cuda_version"])
    assert links_side["chosen"]["root"] == decision["toolkit"]["root"]

    # cuda_links repoints the link; the doctor's next look finds nothing to fix: remediation converges.
    link(root, "/usr/local/cuda", links_side["chosen"]["root"])
    after = examine(nvml_only_driver_12_0(root))
    assert "cuda_link_wrong_target" not in [f["code"] for f in after["findings"]]
    assert after["decision"]["cuda_link"]["right"] is True
    assert rf.remediate_handoff(after) == handed


def test_the_toolkit_is_chosen_by_one_function(tmp_path, monkeypatch):
    """The doctor's decision calls cudatk.choose_target, the function behind the cuda_toolkits facts."""
    root = host_11_8_and_12_1(tmp_path)
    ev = nvml_only_driver_12_0(root)
    calls = []
    real = cudatk.choose_target

    def spy(toolkits, pinned=None, driver_cuda=None):
        calls.append((pinned, driver_cuda))
        return real(toolkits, pinned=pinned, driver_cuda=driver_cuda)

    monkeypatch.setattr(cudatk, "choose_target", spy)
    assert doctor.diagnose(ev)["decision"]["toolkit"]["root"] == "/usr/local/cuda-11.8"
    assert calls == [(None, "12.0")]


def test_a_pin_is_the_doctors_target_too(tmp_path):
    root = host_11_8_and_12_1(tmp_path)
    ev = nvml_only_driver_12_0(root)
    ev["cudatk"] = layout(root, pinned="12.1", driver_cuda="12.0")
    result = examine(ev)
    assert result["decision"]["toolkit"]["root"] == "/usr/local/cuda-12.1"
    assert "cuda_link_wrong_target" not in [f["code"] for f in result["findings"]]
    assert rf.remediate_handoff(result)["cuda_links_version"] == "12.1"


def test_the_driver_cuda_version_read_from_torchs_text_decides_when_nvml_gives_none(tmp_path):
    """NVML gave no CUDA version (an old nvidia-smi, a failed read); torch said "found version 11000": the doctor's
    decision (and the link finding) uses CUDA 11.0, not "unknown, take the highest"."""
    root = host_11_8_and_12_1(tmp_path)
    ev = ev_wrong_variant()  # driver 470, torch cu121, "too old (found version 11000)" (recorded text)
    ev["cudatk"] = layout(root)  # collected with no driver CUDA version: it would take 12.1
    assert ev["cudatk"]["chosen"]["root"] == "/usr/local/cuda-12.1"
    result = examine(ev)
    decision = result["decision"]
    assert decision["driver_cuda_version"] == "11.0" and decision["driver_cuda_version_source"].startswith("torch")
    assert decision["toolkit"]["root"] == "/usr/local/cuda-11.8"
    assert decision["toolkit"]["rule"] == "minor_version_compat"
    found = [f for f in result["findings"] if f["code"] == "cuda_link_wrong_target"]
    assert found and found[0]["evidence"]["expected"] == "/usr/local/cuda-11.8"
    assert rf.remediate_handoff(result)["cuda_links_driver_cuda_version"] == "11.0"


def test_no_toolkit_installed_decides_nothing_and_says_why(tmp_path):
    (tmp_path / "empty").mkdir()
    ev = healthy()
    ev["cudatk"] = layout(tmp_path / "empty", driver_cuda="12.4")
    decision = doctor.diagnose(ev)["decision"]
    assert decision["toolkit"] is None and decision["toolkit_why_none"] == "no CUDA toolkit is installed"
    assert rf.remediate_handoff({"decision": decision})["cuda_links_version"] == ""


def test_a_pin_that_is_not_installed_is_handed_on_to_be_refused(tmp_path):
    root = host_11_8_and_12_1(tmp_path)
    ev = nvml_only_driver_12_0(root)
    ev["cudatk"] = layout(root, pinned="12.6", driver_cuda="12.0")
    decision = doctor.diagnose(ev)["decision"]
    assert decision["toolkit"] is None and "12.6 is not installed" in decision["toolkit_why_none"]
    assert rf.remediate_handoff({"decision": decision}, "12.6")["cuda_links_version"] == "12.6"


# ---------------------------------------------------------------- item 3: --check names the exact targets

def wrong_variant_host(tmp_path):
    """Driver 470 (CUDA 11.4 through NVML), torch 2.5.1+cu121 (built for a newer CUDA), /usr/local/cuda at 12.1."""
    root = host_11_8_and_12_1(tmp_path)
    ev = ev_wrong_variant()
    ev["nvml"].update(cuda_driver_version="11.4", source="nvml")
    ev["cudatk"] = layout(root, driver_cuda="11.4")
    return ev


def torch_pick(decision_handoff, torch_version="2.5.1"):
    """The registered torch_variant result of diagnose.yml: its auto path is torchcompat.solve over these inputs."""
    selection = torchcompat.solve(decision_handoff["driver_version"] or None, decision_handoff["compute_capabilities"],
                                  torch_version=torch_version, requested_variant="auto")
    return {"changed": False, "ansible_facts": {"torch_selection": selection}}


def test_check_names_the_torch_build_and_the_link_target(tmp_path):
    before = examine(wrong_variant_host(tmp_path))
    assert {"wrong_variant_for_driver", "cuda_link_wrong_target"} <= {f["code"] for f in before["findings"]}
    plan = rf.remediate_plan(before)
    assert plan["groups"] == ["links", "torch"]
    handed = rf.remediate_handoff(before)
    pick = torch_pick(handed)
    build = pick["ansible_facts"]["torch_selection"]["requirement"]
    assert build == "torch==2.5.1+cu118"  # cu121 needs driver >= 525.60.13
    details = rf.remediate_details(before, pick)
    lines = rf.remediate_plan_lines(plan, details)
    torch_line = next(line for line in lines if line.startswith("would fix wrong_variant_for_driver"))
    assert "torch==2.5.1+cu118 from https://download.pytorch.org/whl/cu118" in torch_line
    link_line = next(line for line in lines if line.startswith("would fix cuda_link_wrong_target"))
    assert "point /usr/local/cuda at /usr/local/cuda-11.8" in link_line and "11.4" in link_line
    # the --check record says the same, per planned item
    record = rf.remediate_record(before, None, plan, {}, check_mode=True, planned_details=details)
    would = {p["code"]: p.get("would", "") for p in record["planned"]}
    assert "torch==2.5.1+cu118" in would["wrong_variant_for_driver"]
    assert "/usr/local/cuda-11.8" in would["cuda_link_wrong_target"]
    # and the real run installs that build: the torch role is handed its variant
    assert rf.remediate_torch_variant(pick, "auto") == "cu118"


def test_check_says_why_no_torch_build_fits(tmp_path):
    before = examine(wrong_variant_host(tmp_path))
    failed = {"failed": True, "msg": "refused: driver 470.223.02 is older than 525.60.13, the minimum for cu121"}
    details = rf.remediate_details(before, failed)
    assert details["torch"].startswith("install no torch build: refused: driver 470.223.02")
    assert rf.remediate_torch_variant(failed, "auto") == "auto"


def test_a_wheelhouse_is_named_as_the_source(tmp_path):
    before = examine(wrong_variant_host(tmp_path))
    details = rf.remediate_details(before, torch_pick(rf.remediate_handoff(before)), "the wheelhouse")
    assert details["torch"] == "install torch==2.5.1+cu118 from the wheelhouse"


def test_the_fallback_torch_release_is_the_torch_roles_default():
    torch_defaults = yaml.safe_load((ROOT / "roles/torch/defaults/main.yml").read_text())
    remediate_vars = yaml.safe_load((ROOT / "roles/remediate/vars/main.yml").read_text())
    assert remediate_vars["__remediate_torch_version_default"] == torch_defaults["torch_version"]


# ---------------------------------------------------------------- item 4: no change, no write

def failing_record():
    """A torch fix that keeps failing (pip's log names a new temporary folder each run)."""
    ev = _torch(healthy(), version="2.13.0+cpu", cuda=None, is_available=False, device_count=0, arch_list=[])
    before = examine(ev)
    plan = rf.remediate_plan(before)
    return before, plan


def test_a_fix_that_keeps_failing_the_same_way_writes_nothing():
    before, plan = failing_record()
    first = rf.remediate_record(before, before, plan, {"torch": "torch | Install: pip failed in /tmp/pip-build-a1b2"})
    again = rf.remediate_record(before, before, plan, {"torch": "torch | Install: pip failed in /tmp/pip-build-z9y8"})
    assert first != again and first["state"] == again["state"] == "still_broken"
    assert rf.remediate_record_changed(None, first) is True  # the first run keeps it
    assert rf.remediate_record_changed(copy.deepcopy(first), again) is False
    # as record.yml hands it: the file's text
    assert rf.remediate_record_changed(json.dumps(first, indent=4, sort_keys=True) + "\n", again) is False
    assert rf.remediate_record_changed("", again) is True
    assert rf.remediate_record_changed("{not json", again) is True


def test_a_changed_outcome_is_written():
    before, plan = failing_record()
    failed = rf.remediate_record(before, before, plan, {"torch": "pip failed"})
    healthy_after = examine(healthy())
    fixed = rf.remediate_record(before, healthy_after, plan, {})
    assert fixed["state"] == "fixed"
    assert rf.remediate_record_changed(failed, fixed) is True


def test_texts_the_rules_quote_are_real_recordings():
    # the torch text the decision reads its driver CUDA version from is a recorded one
    assert "found version 11000" in text("torch_errors", "driver-too-old_found-11000_userwarning_IEIT-Yuan-2.0-65.txt")


# ---------------------------------------------------------------- issue 36: provision and remediate, one torch build

def _torch_variant_options(path, task_name_part):
    tasks = yaml.safe_load((ROOT / path).read_text())
    task = next(t for t in tasks if task_name_part in t.get("name", "") and "torch_variant" in t)
    return set(task["torch_variant"])


def test_remediate_solves_the_torch_build_with_the_torch_roles_inputs():
    """remediate's diagnose names the build a torch fix installs; the torch role (included by the fix, and run by
    provision next time) solves it again from its own inputs. Each input the role gives the solver that changes the
    pick must be given in diagnose too, or the two name different builds (a wheelhouse without the target Python's
    wheel, a driver policy, an index). The role's package list is the role's alone (numpy, nvidia-ml-py, hashes)."""
    role = _torch_variant_options("roles/torch/tasks/assert.yml", "")
    remediate = _torch_variant_options("roles/remediate/tasks/diagnose.yml", "Pick the torch build")
    missing = role - {"packages"} - remediate
    assert not missing, "diagnose.yml's torch_variant lacks %s" % sorted(missing)
    # the Python comes from the same place the torch role's does: the target environment torch_target decided
    text = (ROOT / "roles/remediate/tasks/diagnose.yml").read_text()
    assert "ansible_facts['torch_target']" in text and "['python_version']" in text


def blackwell_host():
    """A simulated RTX 5090 (CC 12.0) on driver 575.57.08 (CUDA 12.9, read through NVML) with the renter's torch
    2.5.1+cu121, which has no sm_120 kernels."""
    ev = ev_arch()
    ev["nvml"].update(driver_version="575.57.08", cuda_driver_version="12.9", source="nvml")
    ev["proc_driver_version"] = None
    return ev


def torch_solved(handed, torch_version):
    """diagnose.yml's registered torch_variant result: the selection, or the module's failure with its reason."""
    try:
        return torch_pick(handed, torch_version)
    except torchparse.CompatError as exc:  # library/torch_variant.py fails the task with this text
        return {"failed": True, "msg": str(exc)}


def test_check_on_blackwell_names_a_cu128_build():
    """Issue 36: remediate.yml --check with auto on a simulated RTX 5090 names a build that runs it. With the
    release the torch role's refusal advises (2.11.0), the plan line names torch==2.11.0+cu128 and the fix hands the
    torch role cu128; with the default release (2.5.1, no Blackwell build) it names no build, and says which one
    runs, so the renter knows which torch_version to set."""
    before = examine(blackwell_host())
    assert "arch_missing_from_wheel" in codes_of(before)
    plan = rf.remediate_plan(before)
    assert "torch" in plan["groups"]
    handed = rf.remediate_handoff(before)
    assert handed["compute_capabilities"] == ["12.0"] and handed["driver_version"] == "575.57.08"

    pick = torch_solved(handed, "2.11.0")
    lines = rf.remediate_plan_lines(plan, rf.remediate_details(before, pick))
    torch_line = next(line for line in lines if line.startswith("would fix arch_missing_from_wheel"))
    assert "torch==2.11.0+cu128 from https://download.pytorch.org/whl/cu128" in torch_line
    assert rf.remediate_torch_variant(pick, "auto") == "cu128"

    refused = torch_solved(handed, "2.5.1")
    assert refused.get("failed"), refused
    details = rf.remediate_details(before, refused)
    assert details["torch"].startswith("install no torch build:")
    assert "has no kernels in torch 2.5.1+cu121" in details["torch"] and "torch 2.11.0+cu128" in details["torch"]


def codes_of(result):
    return {f["code"] for f in result["findings"]}
