"""check.yml judges the renter's own torch (issue 41), on the three layouts the PyTorch images renters rent use:

* vast.ai: torch in the venv /venv/main, activated from root's ~/.bashrc (interactive shells only);
* pytorch/pytorch: torch in /opt/conda, whose bin the image's ENV puts on PATH and an SSH login does not see;
* RunPod: torch pip-installed into the system Python, the login shell's python3.

Each on a simulated RTX 5090 (compute capability 12.0, the fake NVML profile rtx5090-1x) with a torch that cannot run
a kernel on it (2.7.1+cu126, 2.5.1+cu121: no sm_120) and one that can (2.8.0+cu128). The chain is the pre-check's:
scripts/find-python on the layout (a real login bash), the doctor's torch probe (doctor_childprobe.TORCH_PROBE, run in
the environment find-python judged) on a torch double that answers as real torch does, doctor.diagnose, the
report's judgement and check-verdicts' lines. The verdict and the lines name the build, and the environment when it
is not the login shell's python.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
from gpufleet.controller import report
from gpufleet.controller.judgement import judge as j
from gpufleet.host.doctor import childprobe as doctor_childprobe
from gpufleet.host.doctor import diagnose as doctor
from gpufleet.host.doctor import probe as doctor_probe
from test_doctor import ev_arch
from test_find_python import Host

from tests.unit.doubles import torch_double

GPUS = torch_double.profile_gpus("rtx5090-1x")
PROFILE = json.loads((pathlib.Path(torch_double.__file__).resolve().parents[2] / "fakenvml" / "profiles"
                      / "rtx5090-1x.json").read_text())
STEPS = {"connect": 0.4, "environment": 3.1}


def _run(argv, env=None, timeout=None):
    """gpu_doctor's runner, as the module's run_command gives it: (rc, stdout, stderr)."""
    proc = subprocess.run(argv, env=dict(os.environ, **(env or {})), capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def _layout(host, layout, build):
    """The layout on `host`, torch double `build` in it; returns the Python that holds it and extra env for run()."""
    if layout == "vast":
        venv = host.env("/venv/main")
        host.env("/opt/miniforge3")  # the base conda, without torch
        host.bashrc(f"[[ ${{CONDA_SHLVL:-0}} = 0 && -f {venv}/bin/activate ]] && . {venv}/bin/activate\n")
        where, env = venv, {}
    elif layout == "conda":
        where, env = host.env("/opt/conda"), {}
    else:  # RunPod: the system Python (a venv standing in for /usr), whose bin is on the login PATH
        where, env = host.env("/usr"), {}
        with (host.home / ".profile").open("a") as profile:  # /usr/bin of the layout, as /etc/profile puts /usr/bin
            profile.write('PATH="%s:$PATH"\n' % (where / "bin"))
    torch_double.install(next(where.glob("lib/python3*/site-packages")), build, gpus=GPUS)
    return where, env


def _checked(host, layout, build):
    where, env = _layout(host, layout, build)
    found = host.run(**env)
    # the doctor's torch probe, in the environment find-python judged (check.yml: gpu_doctor python=found.torch)
    errors = []
    torch, why_none = doctor_childprobe.probe_torch(doctor_probe.Host(_run), found["torch"], {}, 60, errors)
    assert torch is not None and not errors, (why_none, errors)
    ev = ev_arch()  # the doctor's evidence of a healthy host with the RTX 5090 (test_doctor), this torch in it
    ev["torch"] = torch
    ev["nvml"].update(driver_version=PROFILE["driver_version"], cuda_driver_version="12.9")
    gpu = PROFILE["gpus"][0]
    facts = {"source": "nvml", "gpu_count": 1, "driver_version": PROFILE["driver_version"],
             "health": {"status": "ok", "findings": []},
             "gpus": [{"index": 0, "name": gpu["name"], "compute_capability": "12.0",
                       "memory_total_mib": gpu["memory_mib"]["total"]}]}
    # the record check.yml keeps (gpu_check), from find-python's answer
    check = {"deadline_s": 60, "steps": STEPS, "total_s": 3.2, "torch_python": found["torch"],
             "pythons_tried": found["tried"], "environments": found["envs"], "judged": found["judged"],
             "failed_step": None, "timed_out": False, "probe_run": False}
    result = {"host": "box", "reachable": True, "failed": False, "gpu": facts, "expected_gpu_count": 1,
              "doctor": doctor.diagnose(ev), "check": check}
    summary = report.summarize([result])
    (h,) = summary["hosts"]
    return {"where": where, "found": found, "torch": torch, "host": h, "summary": summary,
            "lines": j.check_lines(summary)[0]}


LAYOUTS = ["vast", "conda", "system"]
# Whether the line names the environment: only where it is not what the login shell's python runs.
NAMED = {"vast": False, "conda": True, "system": False}
KIND = {"vast": "login_shell", "conda": "conda", "system": "login_shell"}


@pytest.fixture
def host():
    # A short folder: the paths appear in a verdict of at most 160 characters, as /opt/conda would on a host.
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # noqa: S108
    try:
        yield Host(tmp)
    finally:
        shutil.rmtree(tmp)


@pytest.mark.parametrize("build", ["2.7.1+cu126", "2.5.1+cu121"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_torch_without_kernels_for_the_gpu_is_fixed_here_and_named(host, layout, build):
    got = _checked(host, layout, build)
    where, h, found = got["where"], got["host"], got["found"]
    # find-python judged the layout's torch, and the doctor probed that one: is_available() True, no kernel runs
    assert found["torch"].startswith(str(where)), found
    assert next(e for e in found["envs"] if e["python"] == found["torch"])["kind"] == KIND[layout]
    assert got["torch"]["version"] == build and got["torch"]["is_available"] is True
    assert "no kernel image is available for execution on the device" in got["torch"]["error"]
    assert "sm_120 is not compatible" in got["torch"]["warning"]
    named = " in %s" % where if NAMED[layout] else ""
    assert h["verdict"] == "fix here: torch %s%s has no sm_120 kernels (RTX 5090): needs cu128 or later" % (
        build, named), h["verdict"]
    assert h["action"] == j.ACTION_FIX and j.check_exit_status(got["summary"]) == j.EXIT_OK
    lines = got["lines"]
    assert lines[0].startswith("box   " + h["verdict"])
    assert lines[-1] == "1 host(s): 0 keep, 1 fix here, 0 to give back, restart, reboot or check again"
    judged = h["check"]["judged"]
    assert judged["python"] == found["torch"] and judged["torch"] == build and judged["named"] is NAMED[layout]
    if NAMED[layout]:  # the line under the host lists the environments with torch, the judged one and why
        assert re.fullmatch(r"\s+torch: %s in %s \(judged: the login shell's \S+ has no torch\)" % (
            re.escape(build), re.escape(str(where))), lines[1]), lines
    else:
        assert judged["reason"] == "the login shell's python"
        assert not any(line.strip().startswith("torch:") for line in lines), lines  # the verdict says it all
    assert all("no torch on this image" not in line for line in lines)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_torch_that_runs_the_gpu_is_kept_naming_its_environment_where_not_the_login_shells(host, layout):
    got = _checked(host, layout, "2.8.0+cu128")
    where, h = got["where"], got["host"]
    assert got["torch"]["is_available"] is True and got["torch"]["error"] is None  # the kernel ran
    assert h["action"] is None and h["status"] == "ok"
    if NAMED[layout]:
        assert re.fullmatch(r"keep \(note: torch 2\.8\.0\+cu128 in %s; the login shell's \S+ has no torch\)"
                            % re.escape(str(where)), h["verdict"]), h["verdict"]
        assert got["lines"][1].strip().startswith("torch: 2.8.0+cu128 in %s (judged: " % where)
    else:
        assert h["verdict"] == "keep", h["verdict"]
    assert h["check"]["environments"][0]["torch"] == "2.8.0+cu128"
    assert all("no torch on this image" not in line for line in got["lines"])
    assert got["lines"][-1].startswith("1 host(s): 1 keep, 0 fix here, 0 to give back")


def test_the_double_answers_as_real_torch_on_a_gpu_it_covers_and_on_one_it_does_not(tmp_path):
    """The double itself: the arch list of the build's row in torchcompat, is_available() True on both GPUs, and
    a kernel that fails only where the arch list lacks the GPU."""
    site = tmp_path / "site"
    torch_double.install(site, "2.7.1+cu126", gpus=GPUS + [{"name": "NVIDIA H100 PCIe", "compute_capability": "9.0"}])
    probe = "\n".join([
        "import torch, json",
        "out = {'v': torch.__version__, 'cuda': torch.version.cuda, 'avail': torch.cuda.is_available(),",
        "       'n': torch.cuda.device_count(), 'arches': torch.cuda.get_arch_list()}",
        "for d in ('cuda:1', 'cuda:0'):",
        "    try:",
        "        (torch.ones(4, device=d) * 2).sum().item(); out[d] = 'ran'",
        "    except RuntimeError as e:",
        "        out[d] = str(e).splitlines()[0]",
        "print(json.dumps(out))"])
    got = json.loads(subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": str(site)}, check=True,
                                    capture_output=True, text=True).stdout)
    assert got == {"v": "2.7.1+cu126", "cuda": "12.6", "avail": True, "n": 2,
                   "arches": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], "cuda:1": "ran",
                   "cuda:0": "CUDA error: no kernel image is available for execution on the device"}


def test_no_torch_on_this_image_only_when_no_environment_has_torch():
    """A record whose judged Python is missing (a find-python that stopped short) while its environments list one
    with torch: the line must not say there is none."""
    envs = [{"python": "/venv/main/bin/python", "kind": "venv", "version": "3.12.3", "torch": "2.5.1+cu121",
             "nvml": False}]
    for environments, said in ((envs, False), ([dict(envs[0], torch=None)], True)):
        check = {"deadline_s": 60, "steps": STEPS, "torch_python": "", "environments": environments, "judged": None}
        (h,) = report.summarize([{"host": "box", "reachable": True, "failed": False, "check": check,
                                  "gpu": {"source": "nvml", "gpu_count": 1, "health": {"status": "ok", "findings": []},
                                          "gpus": [{"index": 0, "name": "NVIDIA H100 PCIe"}]}}])["hosts"]
        assert ("no torch on this image" in h["verdict"]) is said, h["verdict"]


def test_gpufleets_own_venv_is_judged_without_naming_it():
    """A provisioned host: torch in /opt/gpufleet/venv (site.yml's), none in the login shell's python3. Judged, listed
    in the record, not named in the line (the demo's host 01 reads "keep")."""
    envs = [{"python": "/usr/bin/python3", "kind": "login_shell", "version": "3.11.2", "torch": None, "nvml": False},
            {"python": "/opt/gpufleet/venv/bin/python", "kind": "gpufleet", "version": "3.11.2",
             "torch": "2.13.0+cpu", "nvml": True}]
    check = {"deadline_s": 60, "steps": STEPS, "torch_python": "/opt/gpufleet/venv/bin/python", "environments": envs,
             "judged": {"python": "/opt/gpufleet/venv/bin/python", "why": "..."}}
    (h,) = report.summarize([{"host": "box", "reachable": True, "failed": False, "check": check,
                              "gpu": {"source": "nvml", "gpu_count": 0, "gpus": [], "health": {"status": "ok",
                                                                                          "findings": []}},
                              "expected_gpu_count": 0}])["hosts"]
    assert h["verdict"] == "keep", h["verdict"]
    assert h["check"]["judged"]["where"] == "/opt/gpufleet/venv" and h["check"]["judged"]["named"] is False


def test_the_count_counts_each_host_once():
    """A host listed twice in a summary (two result files for one box) is one line and one count."""
    h = {"host": "box", "action": j.ACTION_FIX, "verdict": "fix here: torch 2.7.1+cu126 has no sm_120 kernels"}
    lines, bad = j.check_lines({"hosts": [h, dict(h)]})
    assert bad == [] and len(lines) == 2
    assert lines[-1] == "1 host(s): 0 keep, 1 fix here, 0 to give back, restart, reboot or check again"
