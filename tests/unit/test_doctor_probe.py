"""The doctor's evidence gathering, on a recorded host (no GPU needed), and CPU-host semantics."""

import json
import subprocess
import sys

import pytest
from gpufleet.host.doctor import childprobe as doctor_childprobe
from gpufleet.host.doctor import diagnose as doctor
from gpufleet.host.doctor import hostprobe as doctor_hostprobe
from gpufleet.host.doctor import loginenv as doctor_loginenv
from gpufleet.host.doctor import probe as doctor_probe
from gpufleet.host.system import kmsg
from test_doctor import PROC_MODULES, healthy, text


class FakeHost(doctor_probe.Host):
    """A host made of a dict of files, a list of process names and canned command results."""

    def __init__(self, files=None, procs=(), commands=None, environ=None):
        self.files = dict(files or {})
        self.procs = set(procs)
        self.commands = commands or {}
        self.env = dict(environ or {})
        self.calls = []
        super().__init__(self._run)

    def _run(self, argv, env=None, timeout=None):
        self.calls.append((list(argv), dict(env or {}), timeout))
        for prefix, result in self.commands.items():
            if tuple(argv[:len(prefix)]) == prefix:
                return result(argv, env) if callable(result) else result
        return None

    def read(self, path, limit=1 << 20, tail=False):
        value = self.files.get(path, "")
        return value[-limit:] if tail else value[:limit] if value is not None else None

    def glob(self, pattern):
        import fnmatch
        return sorted(p for p in self.files if fnmatch.fnmatch(p, pattern))

    def exists(self, path):
        return path in self.files

    def environ(self):
        return dict(self.env)

    def proc_comms(self):
        return set(self.procs)


def run_python(argv, env):
    """Run a probe script for real with this interpreter (torch is not installed in the test venv)."""
    res = subprocess.run([sys.executable] + argv[1:], capture_output=True, env=dict(env or {}, PATH="/usr/bin:/bin"))
    return res.returncode, res.stdout, res.stderr


def test_environment_file_parsing():
    env = doctor_loginenv.parse_environment_file(
        '# comment\nPATH="/usr/local/sbin:/usr/bin"\nCUDA_VISIBLE_DEVICES=""\n'
        "export LD_LIBRARY_PATH=/usr/local/cuda/lib64\n"
        "junk line\nNAME='x y'\n")
    assert env == {"PATH": "/usr/local/sbin:/usr/bin", "CUDA_VISIBLE_DEVICES": "", "LD_LIBRARY_PATH":
                   "/usr/local/cuda/lib64", "NAME": "x y"}


def test_login_environment_process_wins_and_sources_named():
    env, sources = doctor_loginenv.login_environment(
        {"LD_LIBRARY_PATH": "/opt/x"}, 'CUDA_VISIBLE_DEVICES=""\nLD_LIBRARY_PATH=/usr/local/cuda-11.8/lib64\n')
    assert env == {"CUDA_VISIBLE_DEVICES": "", "LD_LIBRARY_PATH": "/opt/x"}
    assert sources == {"CUDA_VISIBLE_DEVICES": "/etc/environment", "LD_LIBRARY_PATH": "process environment"}


def gpu_host(**files):
    base = {
        "/dev/nvidia0": "", "/dev/nvidiactl": "", "/dev/nvidia-uvm": "",
        "/proc/modules": PROC_MODULES,
        "/proc/driver/nvidia/version": healthy()["proc_driver_version"],
        "/proc/1/cgroup": "0::/\n",
        "/opt/gpufleet/venv/bin/python": "",
    }
    base.update(files)
    return base


GPU_FACTS = {"source": "nvml", "error": None, "error_code": None, "gpu_count": 1, "driver_version": "550.90.07",
             "cuda_driver_version": "12.4",
             "gpus": [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "persistence_mode": True,
                       "remapped_rows": {"failure": False}}]}


def test_gather_reads_every_source_and_passes_etc_environment_to_the_probes():
    host = FakeHost(gpu_host(**{"/etc/environment": 'CUDA_VISIBLE_DEVICES=""\n'}), commands={
        ("/opt/gpufleet/venv/bin/python",): run_python})
    ev = doctor_probe.gather(host, python="/opt/gpufleet/venv/bin/python", gpu_facts=GPU_FACTS,
                             kernel_log={"text": "", "source": "dmesg"}, expected_gpu_count=1)
    assert ev["device_nodes"] == ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"]
    assert ev["nvml"]["gpu_count"] == 1 and ev["gpus"][0]["compute_capability"] == "9.0"
    assert ev["env"] == {"CUDA_VISIBLE_DEVICES": ""} and ev["env_sources"]["CUDA_VISIBLE_DEVICES"] == "/etc/environment"
    # the probes ran with the login environment: CUDA_VISIBLE_DEVICES="" reached them
    assert all(call[1] == {"CUDA_VISIBLE_DEVICES": ""} for call in host.calls)
    # torch is not installed in the test interpreter: reported as not installed, not as an error
    assert ev["torch"] is None and "not installed" in ev["torch_skipped"]
    # cuInit ran for real: this machine has no libcuda.so.1
    assert ev["cuinit"]["result"] is None and "libcuda.so.1" in ev["cuinit"]["error"]
    assert ev["in_container"] is False and ev["fabric_manager"] == "not_installed"
    r = doctor_probe.examine(ev)
    assert "cuda_visible_devices_empty_or_invalid" in r["fixable"]


def test_torch_probe_output_is_parsed_and_a_dead_probe_is_evidence():
    out = {"importable": True, "version": "2.13.0+cpu", "cuda": None, "is_available": False, "device_count": 0,
           "arch_list": [], "warning": None, "error": None, "cudnn_version": None, "nccl_version": None}
    host = FakeHost({"/py": ""}, commands={("/py",): (0, b"noise\n" + json.dumps(out).encode() + b"\n", b"")})
    errors = []
    data, skipped = doctor_childprobe.probe_torch(host, "/py", {}, 5, errors)
    assert data["version"] == "2.13.0+cpu" and skipped is None and errors == []
    host = FakeHost({"/py": ""}, commands={("/py",): (-11, b"", b"Segmentation fault")})
    data, _ = doctor_childprobe.probe_torch(host, "/py", {}, 5, errors)
    assert "died" in data["error"] and "Segmentation fault" in data["error"] and errors


def test_torch_probe_script_runs_without_torch():
    res = subprocess.run([sys.executable, "-c", doctor_childprobe.TORCH_PROBE], capture_output=True, text=True)
    data = json.loads(res.stdout)
    assert data["importable"] is False and "No module named" in data["import_error"]


def test_cuinit_probe_script_runs_without_libcuda():
    res = subprocess.run([sys.executable, "-c", doctor_childprobe.CUINIT_PROBE], capture_output=True, text=True)
    data = json.loads(res.stdout)
    assert data["result"] is None and "libcuda.so.1" in data["error"]


@pytest.mark.parametrize("files,procs,systemd,state", [
    ({}, (), False, "not_installed"),
    ({"/usr/bin/nv-fabricmanager": ""}, (), False, "stopped"),
    ({"/usr/bin/nv-fabricmanager": ""}, ("nv-fabricmanage",), False, "running"),  # comm is cut at 15 chars
])
def test_fabric_manager_state(files, procs, systemd, state):
    assert doctor_hostprobe.probe_fabric_manager(FakeHost(files, procs), systemd) == state


def test_fabric_manager_state_from_systemd():
    host = FakeHost({"/lib/systemd/system/nvidia-fabricmanager.service": ""},
                    commands={("systemctl",): (3, b"inactive\n", b"")})
    assert doctor_hostprobe.probe_fabric_manager(host, True) == "stopped"


def test_nvswitch_from_nodes_and_pci_bridges():
    assert doctor_hostprobe.probe_nvswitch(FakeHost({"/dev/nvidia-nvswitchctl": ""})) is True
    pci = {"/sys/bus/pci/devices/0000:05:00.0": "", "/sys/bus/pci/devices/0000:05:00.0/vendor": "0x10de\n",
           "/sys/bus/pci/devices/0000:05:00.0/class": "0x068000\n"}
    assert doctor_hostprobe.probe_nvswitch(FakeHost(pci)) is True
    pci["/sys/bus/pci/devices/0000:05:00.0/class"] = "0x030200\n"
    assert doctor_hostprobe.probe_nvswitch(FakeHost(pci)) is False
    assert doctor_hostprobe.probe_nvswitch(FakeHost({})) is None


def test_kernel_log_falls_back_to_kern_log_and_says_why():
    log = text("kernel_logs", "bumblebee-554_gpu-fallen-off-bus-legacy-format_dmesg.log")
    host = FakeHost({"/var/log/kern.log": log}, commands={("dmesg",): (1, b"", b"Operation not permitted")})
    got = doctor_probe.read_kernel_log(host)
    assert got["source"] == "/var/log/kern.log"
    assert 79 in {int(x) for x in kmsg.parse_kernel_log(got["text"])["counts"]}
    got = doctor_probe.read_kernel_log(FakeHost({}, commands={("dmesg",): (1, b"", b"Operation not permitted")}))
    assert got["text"] is None and "Operation not permitted" in got["reason"]
    assert "journalctl: not installed" in got["reason"]


# ------------------------------------------------------------------ CPU hosts and containers
def cpu_host_evidence():
    return {"device_nodes": [], "proc_modules": "ext4 1 1 - Live 0x0\n", "proc_driver_version": "",
            "nvml": {"ok": False, "error_code": "no_gpu_stack", "error_text": "no NVIDIA ..."},
            "gpus": [], "torch": {"importable": True, "version": "2.13.0+cpu", "cuda": None, "is_available": False,
                                  "device_count": 0, "arch_list": [], "warning": None, "error": None},
            "cuinit": {"result": None, "error": "libcuda.so.1: cannot open shared object file"},
            "env": {}, "in_container": True, "kernel_log": None}


def test_cpu_host_with_cpu_torch_is_healthy():
    r = doctor.diagnose(cpu_host_evidence())
    assert r["gpu_expected"] is False and r["status"] == "healthy" and r["findings"] == [] and r["unknown"] == []


def test_cpu_torch_on_a_host_rented_with_gpus_is_a_finding():
    ev = cpu_host_evidence()
    ev["expected_gpu_count"] = 1
    r = doctor.diagnose(ev)
    assert {"cpu_only_wheel", "container_without_gpus"} <= {f["code"] for f in r["findings"]}
    assert r["status"] == "broken" and r["cuda_usable"] is False


def test_nvml_without_driver_in_a_container_means_gpus_were_expected():
    ev = cpu_host_evidence()
    ev["nvml"] = {"ok": False, "error_code": "driver_not_loaded", "error_text": "Unknown Error; ... not loaded"}
    ev["torch"] = None
    r = doctor.diagnose(ev)
    assert r["gpu_expected"] is True
    f = next(f for f in r["findings"] if f["code"] == "container_without_gpus")
    assert f["remedy_class"] == "provider"


def test_fabric_manager_down_is_fixable_on_a_vm_and_provider_in_a_container():
    from test_doctor import ev_802
    vm = doctor.diagnose(ev_802())
    ev = ev_802()
    ev["in_container"] = True
    ct = doctor.diagnose(ev)
    pick = lambda r: next(f for f in r["findings"] if f["code"] == "error_802_fabric_manager")  # noqa: E731
    assert pick(vm)["remedy_class"] == "fixable" and pick(ct)["remedy_class"] == "provider"


def test_pci_walk_finds_gpus_and_nvswitches_once():
    files = gpu_host(**{
        "/sys/bus/pci/devices/0000:17:00.0/vendor": "0x10de\n", "/sys/bus/pci/devices/0000:17:00.0/class": "0x030200\n",
        "/sys/bus/pci/devices/0000:65:00.0/vendor": "0x10de\n", "/sys/bus/pci/devices/0000:65:00.0/class": "0x030000\n",
        "/sys/bus/pci/devices/0000:05:00.0/vendor": "0x10de\n", "/sys/bus/pci/devices/0000:05:00.0/class": "0x068000\n",
        "/sys/bus/pci/devices/0000:00:1f.0/vendor": "0x8086\n", "/sys/bus/pci/devices/0000:00:1f.0/class": "0x030000\n",
    })
    host = FakeHost(files)
    host.glob = lambda pattern: sorted({p.rsplit("/", 1)[0] for p in files if p.startswith("/sys/bus/pci/devices/")}
                                       if pattern == doctor_hostprobe.PCI_GLOB else FakeHost.glob(host, pattern))
    pci = doctor_hostprobe.nvidia_pci_devices(host)
    assert doctor_hostprobe.pci_gpus(pci) == ["0000:17:00.0", "0000:65:00.0"]
    assert doctor_hostprobe.probe_nvswitch(host, pci) is True
    assert doctor_hostprobe.pci_gpus(doctor_hostprobe.nvidia_pci_devices(FakeHost(gpu_host()))) is None


# ----------------------------------------------------------------------------- the login environment (issue 17 item 1)
def _login_output(**env):
    return 0, "".join("%s=%s\0" % kv for kv in env.items()).encode(), b""


def test_a_variable_exported_from_profile_d_is_seen_with_its_file():
    """CUDA_VISIBLE_DEVICES=-1 in /etc/profile.d: invisible to Ansible's exec session, seen by a login shell."""
    import pwd
    me = pwd.getpwuid(__import__("os").geteuid())
    files = gpu_host(**{me.pw_shell: "", "/etc/environment": "LANG=C.UTF-8\n",
                        "/etc/profile.d/zz-gpu.sh": "export CUDA_VISIBLE_DEVICES=-1\n"})
    host = FakeHost(files, commands={
        ("/opt/gpufleet/venv/bin/python",): run_python,
        ("env", "-i"): lambda argv, env: _login_output(HOME=me.pw_dir, USER=me.pw_name, PATH="/usr/bin:/bin",
                                                        CUDA_VISIBLE_DEVICES="-1")})
    ev = doctor_probe.gather(host, python="/opt/gpufleet/venv/bin/python", gpu_facts=GPU_FACTS,
                             kernel_log={"text": "", "source": "dmesg"}, expected_gpu_count=1)
    login = next(c[0] for c in host.calls if c[0][:2] == ["env", "-i"])
    assert "LANG=C.UTF-8" in login and login[-3:] == ["-l", "-c", "env -0"]  # pam_env's file first, a login shell
    assert ev["env"]["CUDA_VISIBLE_DEVICES"] == "-1"
    assert ev["env_sources"]["CUDA_VISIBLE_DEVICES"] == "/etc/profile.d/zz-gpu.sh"
    assert ev["login_user"] == me.pw_name
    r = doctor_probe.examine(ev)
    f = next(f for f in r["findings"] if f["code"] == "cuda_visible_devices_empty_or_invalid")
    assert f["evidence"]["CUDA_VISIBLE_DEVICES"] == "-1"
    # the probes (torch, cuInit) ran with it, as the user's programs do
    assert all(c[1].get("CUDA_VISIBLE_DEVICES") == "-1" for c in host.calls if c[0][:2] != ["env", "-i"])


def test_the_process_environment_still_wins_and_keeps_its_source():
    env, sources = doctor_loginenv.login_environment(
        {"CUDA_VISIBLE_DEVICES": "0"}, "", {"CUDA_VISIBLE_DEVICES": "-1", "CUDA_HOME": "/usr/local/cuda"},
        lambda key: None)
    assert env == {"CUDA_VISIBLE_DEVICES": "0", "CUDA_HOME": "/usr/local/cuda"}
    assert sources == {"CUDA_VISIBLE_DEVICES": "process environment", "CUDA_HOME": "login shell"}


def test_a_real_login_shell_reads_the_users_profile(tmp_path):
    """bash -l for real, with a home of the test's own: ~/.profile's export reaches the environment read."""
    import shutil
    bash = shutil.which("bash")
    if not bash:
        pytest.skip("no bash")
    (tmp_path / ".profile").write_text("export CUDA_VISIBLE_DEVICES=-1\nexport CUDA_HOME=/usr/local/cuda-12.4\n")

    def run(argv, env=None, timeout=None):
        res = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        return res.returncode, res.stdout, res.stderr

    host = doctor_probe.Host(run)
    got, why = doctor_loginenv.login_shell_env(host, account=("gpufleet-test", str(tmp_path), bash))
    assert why is None, why
    assert got["CUDA_VISIBLE_DEVICES"] == "-1" and got["HOME"] == str(tmp_path) and got["USER"] == "gpufleet-test"
    assert doctor_loginenv.setting_file(host, "CUDA_VISIBLE_DEVICES", str(tmp_path)) == str(tmp_path / ".profile")
    assert doctor_loginenv.setting_file(host, "NVIDIA_VISIBLE_DEVICES", str(tmp_path)) is None
    got, why = doctor_loginenv.login_shell_env(host, account=("nobody", str(tmp_path), "/usr/sbin/nologin"))
    assert got is None and "no login shell" in why
