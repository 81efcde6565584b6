"""scripts/find-python: the renter's own Python with torch, found as the renter's login shell finds it.

Each test builds a host's layout under tmp_path: real venvs (python -m venv, no pip) whose site-packages hold a
fake torch (its __init__ raises: the script must find it without importing it), a fake HOME whose startup files
are those of the images (Ubuntu's root .profile sourcing .bashrc, an interactive-only .bashrc), and the script's
absolute search paths moved under tmp_path by GPUFLEET_FIND_PYTHON_ROOT. The login shell is the real /bin/bash,
so the machine's own /etc/profile and /usr/bin/python3 take part, as on a rented host.

FIND_PYTHON=/path/to/another/copy runs the same tests against another version of the script (the old one, say).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(os.environ.get("FIND_PYTHON") or Path(__file__).resolve().parents[2] / "scripts" / "find-python")
BASH = "/bin/bash"

pytestmark = pytest.mark.skipif(not Path(BASH).exists(), reason="needs bash as the login shell")

# Ubuntu's /root/.profile: a login bash reads it (not ~/.bashrc), and it sources ~/.bashrc.
UBUNTU_ROOT_PROFILE = """\
if [ "$BASH" ]; then
  if [ -f ~/.bashrc ]; then
    . ~/.bashrc
  fi
fi
mesg n 2> /dev/null || true
"""
# The top of Ubuntu's ~/.bashrc: nothing below it runs in a non-interactive shell.
INTERACTIVE_ONLY = "case $- in\n    *i*) ;;\n      *) return;;\nesac\n"


class Host:
    """A rented host's layout under tmp_path."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.root = tmp_path / "root"
        self.home = tmp_path / "home"
        self.root.mkdir()
        self.home.mkdir()
        (self.home / ".profile").write_text(UBUNTU_ROOT_PROFILE)

    def path(self, absolute):
        """Where the host's /absolute/path lies in this layout."""
        return self.root / absolute.lstrip("/")

    def env(self, where, torch=None, nvml=False, version_py=True):
        """A real venv at `where` (host path or Path), with a fake torch of that version and pynvml if asked."""
        prefix = where if isinstance(where, Path) else self.path(where)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
        site = next(prefix.glob("lib/python3*/site-packages"))
        if torch:
            (site / "torch").mkdir()
            (site / "torch" / "__init__.py").write_text("raise RuntimeError('find-python imported torch')\n")
            if version_py:
                (site / "torch" / "version.py").write_text(
                    f"from typing import Optional\n__version__ = '{torch}'\ncuda: Optional[str] = '12.4'\n"
                )
            dist = site / f"torch-{torch}.dist-info"
            dist.mkdir()
            (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch}\n")
        if nvml:
            (site / "pynvml.py").write_text("raise RuntimeError('find-python imported pynvml')\n")
        return prefix

    def bashrc(self, text):
        (self.home / ".bashrc").write_text(INTERACTIVE_ONLY + text)

    def run(self, timeout=120, **env):
        environ = {
            "HOME": str(self.home),
            "SHELL": BASH,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "GPUFLEET_FIND_PYTHON_ROOT": str(self.root),
            **env,
        }
        started = time.monotonic()
        proc = subprocess.run(
            ["sh", str(SCRIPT)], env=environ, cwd=self.tmp, capture_output=True, text=True, timeout=timeout
        )
        self.seconds = time.monotonic() - started
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""  # under Ansible's ssh -tt, stderr would mix into the JSON
        return json.loads(proc.stdout)


def by_python(out):
    return {env["python"]: env for env in out["envs"]}


def foreign_torch(out, host):
    """Pythons outside the layout (this machine's own) that have torch: they would change what is judged."""
    return [e["python"] for e in out.get("envs", []) if e["torch"] and not e["python"].startswith(str(host.tmp))]


def assert_torch_in(out, python, kind):
    """find-python judged ``python`` the one with torch, and found it as ``kind``."""
    assert out["torch"] == python
    assert by_python(out)[python]["kind"] == kind


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path)


def test_vast_venv_activated_only_by_bashrc_is_the_renters_torch(host):
    # vast.ai: /venv/main, activated by a line root's ~/.bashrc gets at boot (interactive shells only), with a
    # banner on stdout; /etc/environment's PATH lacks it. The base conda in /opt/miniforge3 has no torch.
    venv = host.env("/venv/main", torch="2.5.1+cu124", nvml=True)
    host.env("/opt/miniforge3")
    host.bashrc(
        "cd /\n"
        'echo -e "\\e[91m>>>\\e[0m Instance provisioning is not yet complete."\n'
        f"[[ ${{CONDA_SHLVL:-0}} = 0 && -f {venv}/bin/activate ]] && . {venv}/bin/activate\n"
        'printf "Activated conda/uv virtual environment at %s" "$VIRTUAL_ENV"\n'  # no newline before our marker
    )
    out = host.run()
    assert out["torch"] == f"{venv}/bin/python3"
    assert out["login_shell"] == {"user": out["login_shell"]["user"], "shell": BASH, "status": "ok"}
    assert out["judged"]["python"] == out["torch"]
    assert "interactive login shell" in out["judged"]["why"] and "2.5.1+cu124" in out["judged"]["why"]
    envs = by_python(out)
    assert envs[out["torch"]] == {
        "python": out["torch"],
        "kind": "login_shell",
        "version": envs[out["torch"]]["version"],
        "torch": "2.5.1+cu124",
        "nvml": True,
    }
    assert out["nvml"] == out["torch"] and out["any"] == out["torch"]
    # python and python3 of the one venv are one environment; the base conda is listed, without torch.
    assert f"{venv}/bin/python" in out["tried"] and f"{venv}/bin/python" not in envs
    assert envs[str(host.path("/opt/miniforge3/bin/python"))]["torch"] is None


@pytest.mark.parametrize("where, torch, line", [
    # No search list holds ~/work/.env: only the login shell can name it.
    ("~/work/.env", "2.4.0", "source {env}/bin/activate\n"),
    # `conda init` writes its block into ~/.bashrc: /opt/conda/bin is on the PATH of interactive shells only.
    ("/opt/conda", "2.3.1+cu121", 'export PATH="{env}/bin:$PATH"\n'),
], ids=["a_venv_anywhere_that_bashrc_activates", "conda_initialised_in_bashrc_puts_opt_conda_on_the_login_path"])
def test_an_environment_only_bashrc_names_is_found_on_the_login_path(host, where, torch, line):
    env = host.env(host.home / where[2:] if where.startswith("~/") else where, torch=torch)
    host.bashrc(line.format(env=env))
    out = host.run()
    assert_torch_in(out, f"{env}/bin/python3", "login_shell")


def test_pytorch_image_opt_conda_that_no_login_path_holds(host):
    # pytorch/pytorch: /opt/conda/bin is on the image's ENV PATH, which an SSH login does not get.
    conda = host.env("/opt/conda", torch="2.5.1+cu124")
    out = host.run()
    assert_torch_in(out, f"{conda}/bin/python", "conda")
    assert "the first environment with torch in the search order is the conda Python" in out["judged"]["why"]


def test_conda_env_list_names_envs_outside_the_usual_places(host):
    conda = host.env("/opt/conda")
    train = host.env(host.tmp / "data" / "envs" / "train", torch="2.6.0+cu126")
    (conda / "bin" / "conda").write_text(
        "#!/bin/sh\n"
        '[ "$*" = "env list --json" ] || exit 2\n'
        f'printf \'{{\\n  "envs": [\\n    "{conda}",\\n    "{train}"\\n  ],\\n'
        f'  "envs_details": {{\\n    "{conda}": {{"base": true}}\\n  }}\\n}}\\n\'\n'
    )
    (conda / "bin" / "conda").chmod(0o755)
    out = host.run()
    assert_torch_in(out, f"{train}/bin/python", "conda")


def test_system_python_with_torch(host):
    # RunPod: torch pip-installed into the system Python. Here the login PATH's python3 (this machine's
    # /usr/bin/python3) has none, so the system entry of the search list is judged.
    system = host.env("/usr/local", torch="2.8.0+cu128")
    out = host.run()
    if foreign_torch(out, host):
        pytest.skip(f"this machine's own Python has torch: {foreign_torch(out, host)}")
    assert_torch_in(out, f"{system}/bin/python3", "system")


def test_login_path_python_is_the_system_python_with_torch(host):
    # RunPod as a login sees it: the login PATH's python3 is the system Python, torch in its site-packages.
    system = host.env("/usr/local", torch="2.8.0+cu128")
    (host.home / ".profile").write_text(f'PATH="{system}/bin:$PATH"\n' + UBUNTU_ROOT_PROFILE)
    host.bashrc('cat /etc/hostname\necho -e "For detailed documentation and guides, please visit"\n')
    out = host.run()
    assert_torch_in(out, f"{system}/bin/python3", "login_shell")


def test_no_torch_anywhere(host):
    host.env("/venv/main", nvml=True)
    host.env("/opt/conda")
    out = host.run()
    if foreign_torch(out, host):
        pytest.skip(f"this machine's own Python has torch: {foreign_torch(out, host)}")
    assert out["torch"] == ""
    assert out["judged"]["python"] is None and out["judged"]["why"].startswith("no torch in any of the")
    assert out["nvml"] == str(host.path("/venv/main/bin/python"))
    assert out["any"]  # this machine's python3, as the login shell finds it
    assert {e["kind"] for e in out["envs"]} >= {"venv", "conda"}


def test_torch_version_from_dist_info_when_version_py_is_missing(host):
    venv = host.env("/venv/main", torch="2.7.1", version_py=False)
    out = host.run()
    assert out["torch"] == f"{venv}/bin/python"
    assert by_python(out)[out["torch"]]["torch"] == "2.7.1"


def test_a_python_that_does_not_run_is_tried_not_listed(host):
    broken = host.path("/venv/broken/bin/python")
    broken.parent.mkdir(parents=True)
    broken.write_text("#!/bin/sh\necho 'error while loading shared libraries' >&2\nexit 127\n")
    broken.chmod(0o755)
    out = host.run()
    assert str(broken) in out["tried"] and str(broken) not in by_python(out)


def test_a_bashrc_that_hangs_costs_the_time_limit_and_leaves_nothing_running(host):
    # A startup file that never returns (and leaves a child holding its output open): the login shell is given
    # up after GPUFLEET_LOGIN_TIMEOUT, its processes killed, and the search list still finds the venv.
    venv = host.env("/venv/main", torch="2.5.1+cu124")
    pids = host.tmp / "pids"
    (host.home / ".profile").write_text(
        f"sleep 40 & echo $! >> {pids}\nwhile :; do sleep 1 & echo $! >> {pids}; wait $!; done\n" + UBUNTU_ROOT_PROFILE
    )
    out = host.run(GPUFLEET_LOGIN_TIMEOUT="2")
    assert host.seconds < 15, f"took {host.seconds:.1f} s"
    assert out["torch"] == f"{venv}/bin/python"
    assert out["login_shell"]["status"] == "timed out"
    assert "gave no answer within 2 s" in out["judged"]["why"]
    time.sleep(0.5)
    alive = []
    for pid in pids.read_text().split():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state != "Z":
            alive.append(pid)
    assert not alive, f"left running: {alive}"
