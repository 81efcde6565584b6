"""scripts/device-smoke, rehearsed: the command meant for a lent GPU machine, run in a container that
looks like one to it (docs/gate.md, "Checking it on a GPU machine").

The lent machine's python3 has torch, nvidia-ml-py, Jinja2, PyYAML and packaging, and no Ansible; the
machine has no network and comes back with at most 8 files, at most two folders below $OUT. The
container here: the project's test image with no network, the checkout's tracked files plus
.wheelhouse/device (what the device tool carries), a venv made like that python3 (CPU torch), no
locale set. The only differences from the real run: --device cpu, and small time budgets.
"""

import json
import os
import subprocess

import fleetlib as fl
import pytest

NAME = "%s-device-smoke-%d" % (fl.PREFIX, os.getpid())
VENV = "/opt/torch/.venv"
# the device image's Python packages that gpu-smoke's modules and ansible-core use
DEVICE_PACKAGES = ["torch", "nvidia-ml-py", "jinja2", "pyyaml", "packaging"]
# _device_image(): tagged <this>-<key of what it was made from>
DEVICE_IMAGE = "gpufleet/ft-device:12"


def _device_image():
    """IMAGE plus the venv made like the lent machine's python3 (CPU torch and DEVICE_PACKAGES from the
    wheelhouse, no Ansible), built once per content and reused: the pip install of a 200 MB torch wheel is a
    third of this file's time. Its tag holds a key of what it was made from (IMAGE's id, VENV, the packages,
    each wheel's name and size): when any of them changes, a new one is built and the older ones removed."""
    image = fl.sh("docker", "image", "inspect", "--format", "{{.Id}}", fl.IMAGE).stdout.strip()
    wheels = sorted("%s:%d" % (w.name, w.stat().st_size) for folder in ("torch", "jupyter")
                    for w in (fl.WHEELHOUSE / folder).glob("*.whl"))
    key = fl.sha(json.dumps([image, VENV, DEVICE_PACKAGES, wheels]))[:16]
    tag = "%s-%s" % (DEVICE_IMAGE, key)
    if fl.sh("docker", "image", "inspect", tag, check=False).returncode == 0:
        return tag
    name = "%s-build-%d" % (NAME, os.getpid())
    fl.sh("docker", "run", "-d", "--name", name, "--network", "none", fl.IMAGE, "sleep", "infinity")
    try:
        fl.sh("docker", "exec", name, "mkdir", "-p", "/wheels")
        for folder in ("torch", "jupyter"):  # torch and its needs; pyyaml and packaging
            fl.sh("docker", "cp", str(fl.WHEELHOUSE / folder) + "/.", "%s:/wheels/" % name)
        fl.sh("docker", "exec", name, "sh", "-c",
              "python3 -m venv %s && %s/bin/pip install -q --no-index --find-links /wheels %s && rm -rf /wheels"
              % (VENV, VENV, " ".join(DEVICE_PACKAGES)), timeout=900)
        fl.sh("docker", "commit", name, tag)
    finally:
        fl.sh("docker", "rm", "-f", name, check=False)
    repo = DEVICE_IMAGE.split(":")[0]
    older = [t for t in fl.sh("docker", "images", repo, "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
             if t.startswith(DEVICE_IMAGE + "-") and t != tag]
    if older:
        fl.sh("docker", "rmi", *older, check=False)  # one a neighbouring session still runs stays
    return tag


@pytest.fixture(scope="module")
def machine(ft_workdir):
    image = _device_image()
    fl.sh("docker", "rm", "-f", NAME, check=False)
    fl.sh("docker", "run", "-d", "--name", NAME, "--network", "none", "--label", "gpufleet.ft=device-smoke",
          image, "sleep", "infinity")
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=fl.ROOT, capture_output=True, check=True).stdout
        # Only what is there now: a file deleted but still in the index, or written and removed again by a suite
        # running beside this one (make test's lanes share the checkout), would make tar stop.
        there = b"".join(p + b"\0" for p in listed.split(b"\0") if p and os.path.lexists(fl.ROOT / p.decode()))
        tar = ft_workdir / "device-tree.tar"
        with open(tar, "wb") as out:
            subprocess.run(["tar", "-C", str(fl.ROOT), "--ignore-failed-read", "--warning=no-file-removed",
                            "--null", "-T", "-", "-cf", "-", ".wheelhouse/device"], input=there, stdout=out, check=True)
        fl.sh("docker", "exec", NAME, "mkdir", "-p", "/repo", "/out")
        fl.sh("docker", "cp", str(tar), "%s:/repo/tree.tar" % NAME)
        fl.sh("docker", "exec", NAME, "tar", "-C", "/repo", "-xf", "/repo/tree.tar")
        fl.sh("docker", "exec", NAME, "rm", "/repo/tree.tar")
        yield NAME
    finally:
        fl.sh("docker", "rm", "-f", NAME, check=False)


def run_smoke(machine, *args):
    script = ("cd /repo && env -i HOME=/root OUT=/out PATH=%s/bin:/usr/sbin:/usr/bin:/sbin:/bin "
              "scripts/device-smoke --device cpu --budget 30 --repetitions 5 %s" % (VENV, " ".join(args)))
    return fl.sh("docker", "exec", machine, "sh", "-c", script, check=False, timeout=900)


def test_the_rehearsal_machine_has_no_ansible(machine):
    # otherwise the carried wheels would not be what the run below used
    res = fl.sh("docker", "exec", machine, "%s/bin/python" % VENV, "-c", "import ansible", check=False)
    assert res.returncode != 0


def test_device_smoke_runs_facts_doctor_and_the_gate_twice(machine):
    res = run_smoke(machine)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "installing ansible_core-" in res.stderr
    assert "torch 2.13.0+cpu" in res.stdout
    summary = json.loads(fl.sh("docker", "exec", machine, "cat", "/out/smoke/summary.json").stdout)
    modules = summary["modules"]
    assert sorted(modules) == ["gpu_doctor", "gpu_facts", "gpu_gate", "gpu_gate-2"]
    assert not any(m.get("failed") for m in modules.values()), modules
    assert modules["gpu_facts"]["gpu_count"] == 0  # no GPU here: facts say so instead of failing
    assert modules["gpu_doctor"]["cuda_usable"] is False
    assert modules["gpu_gate"]["passed"] is True and modules["gpu_gate-2"]["passed"] is True
    rerun = {r["test"]: r for r in summary["rerun"]}
    assert "bf16_gemm" in rerun and "memory_bandwidth" in rerun
    for row in rerun.values():
        assert len(row["medians"]) == 2 and all(m > 0 for m in row["medians"])
    gate = json.loads(fl.sh("docker", "exec", machine, "cat", "/out/smoke/gpu_gate-2.json").stdout)
    assert {e["test"] for e in gate["ansible_facts"]["gpu_gate"]} == set(rerun)
    # then the renter's pre-check on the same machine: no GPU here, so check.yml's verdict is to give it back
    # (exit status 2, which is a verdict, not a failure of the script), from the report's judgement
    check = json.loads(fl.sh("docker", "exec", machine, "cat", "/out/smoke/check.json").stdout)
    assert check["rc"] == 2 and "error" not in check, check
    assert check["verdict"].startswith("return to provider: no GPU"), check["verdict"]
    assert set(check["check"]["steps"]) >= {"connect", "environment"} and check["check"]["deadline_s"] == 60
    assert "check.yml: exit 2 in" in res.stdout


def test_what_comes_back_fits_the_device_tools_limits(machine):
    # at most 8 files, each at most two folders below $OUT, names of letters, digits, '.', '_', '-'
    files = fl.sh("docker", "exec", machine, "find", "/out", "-type", "f").stdout.split()
    assert 0 < len(files) <= 8, files
    for path in files:
        rel = path[len("/out/"):].split("/")
        assert len(rel) <= 3, path
        assert all(part.replace(".", "").replace("_", "").replace("-", "").isalnum() for part in rel), path

