"""Gathering the doctor's evidence on a host (the schema is in ``doctor.py``).

Every probe is cheap, reads only, and never raises: a probe that cannot run leaves its key None
("not gathered") and says why in ``probe_errors``. Host access goes through a small ``Host``
object so the logic is tested with recorded data; ``Host`` itself reads the real machine.
Programs that could hang or crash (libcuda's cuInit, importing torch) run in child processes
under a timeout.
"""

import errno
import glob
import json
import os
import re
import time

from . import cudatk, doctor, facts, hostenv, hostres, kmsg, nvml
from .doctor_match_renter import HELD_MEMORY_MIB, THREAD_ENV_KEYS

DEV_GLOB = "/dev/nvidia*"
PROC_MODULES = "/proc/modules"
PROC_DRIVER = "/proc/driver/nvidia/version"
ETC_ENVIRONMENT = cudatk.ETC_ENVIRONMENT  # the file pam_env applies to every login
ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PATH", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES") + THREAD_ENV_KEYS
# What a login shell reads, in order (pam_env's file first): the last file that assigns a variable set it.
# Per-user files are those of the login user's home (~ stands for it).
LOGIN_FILES = ("/etc/environment", "/etc/profile", "/etc/profile.d/*.sh", "/etc/bash.bashrc",
               "~/.bash_profile", "~/.bash_login", "~/.profile", "~/.bashrc")
LOGIN_SHELL_TIMEOUT = 10
_PRINT_ENV = "env -0"
NVSWITCH_DEV_GLOB = "/dev/nvidia-nvswitch*"
NVSWITCH_PROC_GLOB = "/proc/driver/nvidia-nvswitch/devices/*"
PCI_GLOB = "/sys/bus/pci/devices/*"
NVIDIA_PCI_VENDOR = "0x10de"
PCI_CLASS_BRIDGE_OTHER = "0x0680"  # NVSwitch shows as "Bridge: NVIDIA Corporation ..." (class 0680)
PCI_CLASS_DISPLAY = "0x03"  # VGA (0300) and 3D (0302) controllers: the GPUs
FM_UNITS = ("/lib/systemd/system/nvidia-fabricmanager.service", "/usr/lib/systemd/system/nvidia-fabricmanager.service",
            "/etc/systemd/system/nvidia-fabricmanager.service")
FM_BINARIES = ("/usr/bin/nv-fabricmanager", "/usr/sbin/nv-fabricmanager")
FM_PROCESS = "nv-fabricmanager"
SHM_PATH = "/dev/shm"  # noqa: S108 - its size is read, no file is made
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_SELF_CGROUP = "/proc/self/cgroup"
UVM_NODE = "/dev/nvidia-uvm"
# Seconds between the two looks at each GPU's processes and memory: a job of the renter's that was starting at
# the first look holds the GPU (and shows as ours) at the second, so it is not taken for another tenant.
SAMPLE_INTERVAL_S = 3

# Run in the target interpreter: what torch itself says about CUDA. Prints one JSON object.
TORCH_PROBE = r'''
import json, os, sys, traceback, warnings
out = {"importable": False, "import_error": None, "version": None, "cuda": None, "hip": None,
       "is_available": None, "device_count": None, "arch_list": None, "warning": None, "error": None,
       "cudnn_version": None, "nccl_version": None, "torchrun": None, "executable": sys.executable}
try:
    import torch
except BaseException:
    out["import_error"] = traceback.format_exc()[-4000:]
    print(json.dumps(out))
    sys.exit(0)
out.update(importable=True, version=str(torch.__version__), cuda=torch.version.cuda,
           hip=getattr(torch.version, "hip", None))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        out["is_available"] = bool(torch.cuda.is_available())
        out["device_count"] = int(torch.cuda.device_count())
        out["arch_list"] = list(torch.cuda.get_arch_list())
        if out["is_available"]:
            (torch.ones(4, device="cuda") * 2).sum().item()  # a kernel runs: catches "no kernel image"
    except BaseException:
        out["error"] = traceback.format_exc()[-4000:]
out["warning"] = "\n".join(str(w.message) for w in caught)[-4000:] or None
try:
    out["cudnn_version"] = torch.backends.cudnn.version()
except BaseException:
    pass
try:
    nccl = torch.cuda.nccl.version()
    out["nccl_version"] = ".".join(str(x) for x in nccl) if isinstance(nccl, tuple) else str(nccl)
except BaseException:
    pass
torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
out["torchrun"] = torchrun if os.path.exists(torchrun) else None
print(json.dumps(out))
'''

# Run in a child: cuInit(0) through libcuda.so.1, and which file that libcuda is.
CUINIT_PROBE = r'''
import ctypes, json
out = {"result": None, "libcuda_path": None, "stub": None, "forward_compat": None, "error": None}
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out["error"] = str(exc)
else:
    out["result"] = int(lib.cuInit(0))
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "/libcuda.so" in path:
                out["libcuda_path"] = path
                break
    path = out["libcuda_path"] or ""
    out["stub"] = "/stubs/" in path or out["result"] == 34
    out["forward_compat"] = "/compat/" in path
print(json.dumps(out))
'''


class Host:
    """The real machine. ``run(argv, env=None, timeout=None)`` -> (rc, out, err) or None when not installed."""

    def __init__(self, run):
        self.run = run

    @staticmethod
    def read(path, limit=1 << 20, tail=False):
        """Text of ``path`` (its last ``limit`` bytes with ``tail``); "" when it does not exist; None when
        it exists but cannot be read."""
        try:
            with open(path, "rb") as fh:
                if tail:
                    size = os.fstat(fh.fileno()).st_size
                    fh.seek(max(0, size - limit))
                return fh.read(limit).decode("utf-8", "replace")
        except FileNotFoundError:
            return ""
        except OSError:
            return None

    @staticmethod
    def glob(pattern):
        return sorted(glob.glob(pattern))

    @staticmethod
    def exists(path):
        return os.path.exists(path)

    @staticmethod
    def environ():
        return dict(os.environ)

    @staticmethod
    def shm_mib():
        """Size of /dev/shm in MiB, or None when it cannot be read."""
        try:
            return hostres.shm_mib(os.statvfs(SHM_PATH))
        except OSError:
            return None

    @staticmethod
    def visible_cpus():
        """CPUs this process may run on (what torch and OpenMP size their thread pools by), or None."""
        try:
            return len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return os.cpu_count()

    @staticmethod
    def open_error(path):
        """errno name of opening ``path`` read-only (EPERM: the cgroup device rules deny it), None when it opens."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))
        os.close(fd)
        return None

    @staticmethod
    def gpu_holders():
        """{pid: {"comm", "nodes": [/dev/nvidia* paths it has open]}} of the processes this namespace shows, without
        this process; None when /proc cannot be listed. A process whose descriptors cannot be read is left out."""
        me = os.getpid()
        try:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        except OSError:
            return None
        out = {}
        for pid in pids:
            if pid == me:
                continue
            fd_dir = "/proc/%d/fd" % pid
            try:
                fds = os.listdir(fd_dir)
            except OSError:
                continue
            nodes = set()
            for fd in fds:
                try:
                    target = os.readlink(os.path.join(fd_dir, fd))
                except OSError:
                    continue
                if target.startswith("/dev/nvidia"):
                    nodes.add(target)
            if nodes:
                try:
                    with open("/proc/%d/comm" % pid) as fh:
                        comm = fh.read().strip()
                except OSError:
                    comm = None
                out[pid] = {"comm": comm, "nodes": sorted(nodes)}
        return out

    @staticmethod
    def proc_comms():
        """Names of the running processes (from /proc/*/comm), or None when /proc is not readable."""
        names = set()
        try:
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
        except OSError:
            return None
        for pid in pids:
            try:
                with open("/proc/%s/comm" % pid) as fh:
                    names.add(fh.read().strip())
            except OSError:
                continue
        return names


_ASSIGN_RE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def parse_environment_file(text):
    """KEY=VALUE lines of /etc/environment (pam_env's simple format) -> dict; quotes removed."""
    out = {}
    for line in (text or "").splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = _ASSIGN_RE.match(line)
        if not m:
            continue
        value = m.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[m.group(1)] = value
    return out


def login_shell_env(host, user=None, timeout=LOGIN_SHELL_TIMEOUT, account=None):
    """(env, error): what ``user``'s login shell gets (pam_env's /etc/environment applied first, as at an SSH
    login, then the shell's own profile files). Ansible's exec session reads no profile file, so a variable
    exported from /etc/profile.d is invisible to the module's own environment; this reads it the way the
    renter's ``ssh host`` does. ``user`` defaults to the account the module runs as."""
    if account is None:
        import pwd
        try:
            entry = pwd.getpwnam(user) if user else pwd.getpwuid(os.geteuid())
        except (KeyError, OSError) as exc:
            return None, "login user %r unknown: %s" % (user, exc)
        account = (entry.pw_name, entry.pw_dir, entry.pw_shell or "/bin/sh")
    name, home, shell = account
    if not host.exists(shell) or os.path.basename(shell) in ("nologin", "false"):
        return None, "login user %s has no login shell (%s)" % (name, shell)
    start = {"HOME": home, "USER": name, "LOGNAME": name, "SHELL": shell,
             "PATH": "/usr/local/bin:/usr/bin:/bin", "TERM": "dumb"}
    start.update(parse_environment_file(host.read(ETC_ENVIRONMENT)))  # pam_env, before the shell starts
    argv = ["env", "-i"] + ["%s=%s" % kv for kv in sorted(start.items())] + [shell, "-l", "-c", _PRINT_ENV]
    res = host.run(argv, timeout=timeout)
    if res is None:
        return None, "env(1) not found"
    rc, out, err = res
    if isinstance(out, bytes):
        out = out.decode("utf-8", "replace")
    if rc != 0:
        return None, "login shell %s of %s exited %s: %s" % (shell, name, rc, str(err)[-300:])
    env = dict(item.split("=", 1) for item in out.split("\0") if "=" in item)
    return env, None


_LOGIN_ASSIGN = {}


def setting_file(host, key, home):
    """The last login file (LOGIN_FILES order) that assigns ``key``, or None."""
    pattern = _LOGIN_ASSIGN.get(key)
    if pattern is None:
        pattern = _LOGIN_ASSIGN[key] = re.compile(r"^[ \t]*(?:export[ \t]+)?%s=" % re.escape(key), re.M)
    found = None
    for entry in LOGIN_FILES:
        path = home + entry[1:] if entry.startswith("~") else entry
        for name in (host.glob(path) if "*" in path else [path]):
            if pattern.search(host.read(name) or ""):
                found = name
    return found


def login_environment(process_env, etc_environment_text, login_env=None, setting=None):
    """(env, sources) of the keys the doctor reads, as a login session gets them.

    pam_env applies /etc/environment to SSH and console logins; the module's own process may or may
    not have it (docker exec does not), so the file is read directly. A value in the process
    environment wins, as it does for the programs started from it. ``login_env`` (login_shell_env) adds
    what a login shell gets from the profile files; ``setting(key)`` names the file that set a key.
    """
    env, sources = {}, {}
    from_file = parse_environment_file(etc_environment_text)
    for key in ENV_KEYS:
        if key in process_env:
            env[key], sources[key] = process_env[key], "process environment"
        elif login_env is not None and key in login_env:
            env[key] = login_env[key]
            sources[key] = (setting(key) if setting else None) or (
                ETC_ENVIRONMENT if from_file.get(key) == login_env[key] else "login shell")
        elif key in from_file:
            env[key], sources[key] = from_file[key], ETC_ENVIRONMENT
    return env, sources


def _json_from(res, what, errors):
    if res is None:
        errors.append("%s: interpreter not found" % what)
        return None
    rc, out, err = res
    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else (out or "")
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    err = err.decode("utf-8", "replace") if isinstance(err, bytes) else (err or "")
    why = "timed out" if rc in (124, 137) else "rc=%s" % rc
    errors.append("%s: %s %s" % (what, why, (err.strip() or text.strip())[-500:]))
    return {"crashed": True, "rc": rc, "stderr": err.strip()[-2000:]}


def probe_torch(host, python, env_update, timeout, errors):
    """torch evidence from ``python``, or None when that interpreter or torch is not installed."""
    if not python or not host.exists(python):
        return None, "interpreter %s not found" % python
    res = host.run([python, "-c", TORCH_PROBE], env=env_update, timeout=timeout)
    data = _json_from(res, "torch probe", errors)
    if data is None:
        return None, "torch probe could not run"
    if data.get("crashed"):
        # The interpreter died while importing torch or touching CUDA (a segfault, a hang): that is evidence.
        # timed_out: killed by the timeout (timeout(1)'s 124, or 137 after its -k): `import torch` never returned.
        return {"importable": None, "import_error": None, "version": None, "cuda": None, "is_available": None,
                "timed_out": data.get("rc") in (124, 137), "timeout_s": timeout,
                "error": "torch probe died (%s): %s" % (data.get("rc"), data.get("stderr"))}, None
    import_error = (data.get("import_error") or "").strip()
    if not data.get("importable") and re.search(r"No module named '?torch'?$", import_error):
        return None, "torch is not installed in %s" % python
    return data, None


def probe_cuinit(host, python, env_update, timeout, errors):
    res = host.run([python, "-c", CUINIT_PROBE], env=env_update, timeout=timeout)
    data = _json_from(res, "cuInit probe", errors)
    if data is not None and data.get("crashed"):
        return {"result": None, "libcuda_path": None, "stub": None, "forward_compat": None,
                "error": "cuInit probe died (%s): %s" % (data.get("rc"), data.get("stderr"))}
    return data


def nvidia_pci_devices(host):
    """{address: class} of the NVIDIA devices on the PCI bus (one walk of /sys/bus/pci), None if unreadable."""
    devices = host.glob(PCI_GLOB)
    if not devices:
        return None
    out = {}
    for dev in devices:
        if (host.read(dev + "/vendor") or "").strip().lower() == NVIDIA_PCI_VENDOR:
            out[os.path.basename(dev)] = (host.read(dev + "/class") or "").strip().lower()
    return out


def pci_gpus(pci):
    """PCI addresses of the display / 3D controllers (class 03xx) among ``nvidia_pci_devices``."""
    return None if pci is None else sorted(a for a, klass in pci.items() if klass.startswith(PCI_CLASS_DISPLAY))


def probe_nvswitch(host, pci=None):
    """True/False from NVSwitch device nodes, the nvswitch driver's proc entries or PCI bridges; None if unknown."""
    if host.glob(NVSWITCH_DEV_GLOB) or host.glob(NVSWITCH_PROC_GLOB):
        return True
    pci = nvidia_pci_devices(host) if pci is None else pci
    if pci is None:
        return None
    return any(klass.startswith(PCI_CLASS_BRIDGE_OTHER) for klass in pci.values())


def probe_fabric_manager(host, systemd):
    """running | stopped | failed | not_installed, or None when it cannot be told."""
    unit = any(host.exists(u) for u in FM_UNITS)
    binary = any(host.exists(b) for b in FM_BINARIES)
    if unit and systemd:
        res = host.run(["systemctl", "is-active", "nvidia-fabricmanager"])
        if res is not None:
            state = (res[1].decode() if isinstance(res[1], bytes) else res[1] or "").strip()
            return {"active": "running", "failed": "failed"}.get(state, "stopped")
    if not unit and not binary:
        return "not_installed"
    comms = host.proc_comms()
    if comms is None:
        return None
    return "running" if FM_PROCESS in comms or FM_PROCESS[:15] in comms else "stopped"


def _cgroup_v2_dirs(host):
    """The cgroup v2 folders of this process, leaf first, up to the root (limits of every ancestor apply)."""
    text = host.read(PROC_SELF_CGROUP) or ""
    path = next((line[3:].strip() for line in text.splitlines() if line.startswith("0::")), None)
    if path is None:
        return []
    parts = [p for p in path.split("/") if p and p != ".."]
    dirs = [CGROUP_ROOT + "/" + "/".join(parts[:i]) for i in range(len(parts), 0, -1)]
    return dirs + [CGROUP_ROOT]


def _int_or_none(text):
    text = (text or "").strip()
    return int(text) if re.match(r"^-?\d+$", text) else None


def cgroup_limits(host):
    """CPU quota (in CPUs) and pids.max that apply to this process, from cgroup v2 (every level up to the root,
    the tightest wins) or v1; with the CPUs the process sees. A missing file or "max" is no limit (None)."""
    out = {"version": None, "cpu_quota": None, "cpu_max": None, "pids_max": None, "pids_max_at": None,
           "cpu_max_at": None, "visible_cpus": host.visible_cpus()}
    dirs = _cgroup_v2_dirs(host)
    if dirs and host.exists(CGROUP_ROOT + "/cgroup.controllers"):
        out["version"] = 2
        for d in dirs:
            text = (host.read(d + "/cpu.max") or "").strip()
            quota = hostres.parse_cpu_max(text)
            if quota is not None and (out["cpu_quota"] is None or quota < out["cpu_quota"]):
                out.update(cpu_quota=quota, cpu_max=text, cpu_max_at=d + "/cpu.max")
            pids = _int_or_none(host.read(d + "/pids.max"))
            if pids is not None and (out["pids_max"] is None or pids < out["pids_max"]):
                out.update(pids_max=pids, pids_max_at=d + "/pids.max")
        return out
    quota = _int_or_none(host.read(CGROUP_ROOT + "/cpu/cpu.cfs_quota_us"))
    period = _int_or_none(host.read(CGROUP_ROOT + "/cpu/cpu.cfs_period_us"))
    pids = _int_or_none(host.read(CGROUP_ROOT + "/pids/pids.max"))
    if quota is not None or pids is not None:
        out["version"] = 1
    if quota is not None and quota > 0 and period:
        out.update(cpu_quota=round(quota / float(period), 2), cpu_max="%d %d" % (quota, period),
                   cpu_max_at=CGROUP_ROOT + "/cpu/cpu.cfs_quota_us")
    if pids is not None:
        out.update(pids_max=pids, pids_max_at=CGROUP_ROOT + "/pids/pids.max")
    return out


def device_open_errors(host, nodes):
    """{node: errno name} for the GPU nodes and /dev/nvidiactl that do not open; {} when all open."""
    want = [n for n in nodes or () if re.match(r"^/dev/nvidia(?:\d+|ctl)$", n)]
    errors = {}
    for node in want:
        err = host.open_error(node)
        if err:
            errors[node] = err
    return errors


def cuda_processes(holders):
    """The processes of ``gpu_holders`` that are CUDA programs (they hold /dev/nvidia-uvm, which NVML clients such
    as nvidia-smi or an exporter never open), each with the minor numbers of the /dev/nvidiaN they hold."""
    if holders is None:
        return None
    out = []
    for pid, h in sorted(holders.items()):
        nodes = h.get("nodes") or ()
        if UVM_NODE not in nodes:
            continue
        minors = sorted(int(n[len("/dev/nvidia"):]) for n in nodes if re.match(r"^/dev/nvidia\d+$", n))
        out.append({"pid": pid, "comm": h.get("comm"), "minors": minors})
    return out


_MIB = 1024 * 1024


class _Nvml:
    """pynvml calls that never raise: an absent function or field is None, other errors are kept by name."""

    def __init__(self, nv):
        self.nv = nv
        self.errors = {}

    def __call__(self, what, fn_name, *args, **kwargs):
        fn = getattr(self.nv, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # pynvml raises NVMLError subclasses
            code = nvml_error_code(exc)
            if code not in ("not_supported", "nvml_function_not_found", "not_found", "invalid_argument"):
                self.errors[what] = code
            return None


def nvml_error_code(exc):
    value = getattr(exc, "value", None)
    return {2: "invalid_argument", 3: "not_supported", 6: "not_found", 13: "nvml_function_not_found"}.get(
        value) or nvml.error_code_for(exc)


def _mib(value):
    return int(value) // _MIB if isinstance(value, int) else None


def _gpu_state(call, nv, index, handle):
    name = call("name", "nvmlDeviceGetName", handle)
    state = {"index": index, "name": name.decode() if isinstance(name, bytes) else name,
             "minor_number": call("minor_number", "nvmlDeviceGetMinorNumber", handle),
             "memory_total_mib": None, "mig_mode": None, "mig_devices": None, "recovery_action": None}
    mem = call("memory", "nvmlDeviceGetMemoryInfo", handle)
    if mem is not None:
        state["memory_total_mib"] = _mib(getattr(mem, "total", None))
    mig = call("mig_mode", "nvmlDeviceGetMigMode", handle)
    if mig:
        state["mig_mode"] = "enabled" if int(mig[0]) else "disabled"
        if int(mig[0]):
            devices = []
            for i in range(int(call("mig_devices", "nvmlDeviceGetMaxMigDeviceCount", handle) or 0)):
                mh = call("mig_devices", "nvmlDeviceGetMigDeviceHandleByIndex", handle, i)
                if mh is None:
                    continue
                mname = call("mig_devices", "nvmlDeviceGetName", mh)
                mmem = call("mig_devices", "nvmlDeviceGetMemoryInfo", mh)
                devices.append({"name": mname.decode() if isinstance(mname, bytes) else mname,
                                "memory_total_mib": _mib(getattr(mmem, "total", None)) if mmem is not None else None})
            state["mig_devices"] = devices
    field = getattr(nv, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", 230)
    values = call("recovery_action", "nvmlDeviceGetFieldValues", handle, [field])
    if values:
        v = values[0]
        if getattr(v, "nvmlReturn", None) == 0:
            state["recovery_action"] = int(v.value.uiVal)
    return state


def _usage(call, nv, index, handle):
    used = reserved = None
    v2 = getattr(nv, "nvmlMemory_v2", None)
    mem = call("memory_v2", "nvmlDeviceGetMemoryInfo", handle, version=v2) if v2 else None
    if mem is not None:
        used, reserved = _mib(getattr(mem, "used", None)), _mib(getattr(mem, "reserved", None))
    v1_used = None
    if mem is None:
        mem1 = call("memory", "nvmlDeviceGetMemoryInfo", handle)
        v1_used = _mib(getattr(mem1, "used", None)) if mem1 is not None else None
    procs = call("processes", "nvmlDeviceGetComputeRunningProcesses", handle)
    return {"index": index, "memory_used_mib": used, "memory_reserved_mib": reserved,
            "memory_used_v1_mib": v1_used,
            "processes": None if procs is None else [
                {"pid": getattr(p, "pid", None), "used_memory_mib": _mib(getattr(p, "usedGpuMemory", None))}
                for p in procs]}


def _worth_a_second_look(sample):
    """Whether the first look shows a process or memory in use on some GPU: only then can the second look find
    another tenant, so an idle host does not wait ``interval`` seconds for nothing."""
    for g in sample.get("gpus") or ():
        used = g.get("memory_used_mib") if g.get("memory_used_mib") is not None else g.get("memory_used_v1_mib")
        if g.get("processes") or g.get("processes") is None or used is None or used >= HELD_MEMORY_MIB:
            return True
    return False


def nvml_renter_evidence(nv, host, interval=SAMPLE_INTERVAL_S, sleep=time.sleep):
    """(gpu_state, gpu_usage) through NVML, for the renter's checks; never raises.

    ``gpu_state``: per GPU its name, minor number, total memory, MIG mode and instances, and NVML's recovery
    action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION). ``gpu_usage``: two looks ``interval`` seconds apart at each
    GPU's compute processes and memory (v2: used without the driver's reservation), each with the CUDA
    processes of this PID namespace (``cuda_processes``). NVML does not know PID namespaces: in a container it
    lists every process on the GPU by its host PID (NVIDIA/nvidia-docker #1483), so a process is told ours by
    its PID only where the namespaces agree, else by counting our own CUDA processes on that GPU.
    """
    usage = {"interval_s": interval, "samples": [], "error": None}
    if nv is None:
        usage["error"] = "pynvml is not available"
        return None, usage
    try:
        nv.nvmlInit()
    except Exception as exc:
        usage["error"] = "nvmlInit failed: %s" % nvml_error_code(exc)
        return None, usage
    call = _Nvml(nv)
    try:
        count = int(call("gpu_count", "nvmlDeviceGetCount") or 0)
        handles = [(i, call("handle", "nvmlDeviceGetHandleByIndex", i)) for i in range(count)]
        handles = [(i, h) for i, h in handles if h is not None]
        state = [_gpu_state(call, nv, i, h) for i, h in handles]
        looks = 2 if interval and interval > 0 else 1
        for n in range(looks):
            if n:
                if not _worth_a_second_look(usage["samples"][0]):
                    usage["second_look"] = "skipped: the first look found no process and no memory in use"
                    break
                sleep(interval)
            gpus = [_usage(call, nv, i, h) for i, h in handles]
            usage["samples"].append({"gpus": gpus, "cuda_processes": cuda_processes(host.gpu_holders())})
    except Exception as exc:  # defensive: the renter's checks must not lose the rest of the evidence
        usage["error"] = "NVML query failed: %r" % exc
        state = None
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: S110 - shutting down is best effort
            pass
    if call.errors:
        usage["nvml_errors"] = dict(call.errors)
    return state, usage


def _gpus(gpu_facts):
    out = []
    for g in gpu_facts.get("gpus") or ():
        rows = g.get("remapped_rows") or {}
        out.append({"index": g.get("index"), "name": g.get("name"), "compute_capability": g.get("compute_capability"),
                    "persistence_mode": g.get("persistence_mode"), "remapped_rows_failure": rows.get("failure")})
    return out


def nvml_evidence(gpu_facts):
    ok = not gpu_facts.get("error")
    return {"ok": ok, "source": gpu_facts.get("source"), "error_code": gpu_facts.get("error_code"),
            "error_text": gpu_facts.get("error"), "gpu_count": gpu_facts.get("gpu_count") if ok else None,
            "driver_version": gpu_facts.get("driver_version"),
            "cuda_driver_version": gpu_facts.get("cuda_driver_version")}


def in_container(host):
    environ = host.read("/proc/1/environ")
    found, _kind = hostenv.detect_container(
        dockerenv=host.exists("/.dockerenv"), containerenv=host.exists("/run/.containerenv"),
        cgroup=host.read("/proc/1/cgroup"), environ=environ or None)
    return found


def gather(host, python=None, gpu_facts=None, kernel_log=None, cudatk_facts=None, expected_gpu_count=None,
           gpu_expected=None, timeout=120, device_nodes=None, login_user=None, renter_nvml=None, provider_claims=None):
    """The doctor's evidence for this host. ``gpu_facts``: facts.gpu_facts() output (NVML / nvidia-smi).

    ``device_nodes``: the /dev/nvidia* nodes listed before NVML or libcuda were called - run as root, the
    driver's user-space libraries create missing nodes themselves (mknod, or nvidia-modprobe); the nodes that
    appeared while probing are listed in ``device_nodes_created_by_probes``. ``renter_nvml``: the
    (gpu_state, gpu_usage) pair of ``nvml_renter_evidence``, taken before any probe started a CUDA program.
    ``provider_claims``: what the provider's listing says of the host (doctor.py, ``provider_claims``).
    """
    errors = []
    ev = {"expected_gpu_count": expected_gpu_count, "gpu_expected": gpu_expected}
    ev["device_nodes"] = device_nodes if device_nodes is not None else host.glob(DEV_GLOB)
    ev["proc_modules"] = host.read(PROC_MODULES) or None
    ev["proc_driver_version"] = host.read(PROC_DRIVER)
    if gpu_facts is not None:
        ev["nvml"] = nvml_evidence(gpu_facts)
        ev["gpus"] = _gpus(gpu_facts)
    login_env, why = login_shell_env(host, login_user)
    if why:
        errors.append("login environment: %s (only the module's environment and /etc/environment read)" % why)
    home = (login_env or {}).get("HOME") or os.path.expanduser("~" + (login_user or ""))
    env, sources = login_environment(host.environ(), host.read(ETC_ENVIRONMENT), login_env,
                                     lambda key: setting_file(host, key, home))
    ev["env"], ev["env_sources"] = env, sources
    ev["login_user"] = (login_env or {}).get("USER") or login_user
    env_update = {k: v for k, v in env.items() if sources.get(k) != "process environment" and k != "PATH"}
    target = python if python and host.exists(python) else None
    started = time.monotonic()
    ev["torch"], ev["torch_skipped"] = probe_torch(host, target or python, env_update, timeout, errors)
    # cuInit gets what the torch probe left of ``timeout`` (at most 30 s, at least 5): a hung torch import must not
    # stretch the doctor past the budget its caller gave it (check.yml's deadline).
    left = timeout - (time.monotonic() - started)
    ev["cuinit"] = probe_cuinit(host, target or "python3", env_update, int(max(5, min(left, 30))), errors)
    ev["cudatk"] = cudatk_facts
    systemd = host.exists("/run/systemd/system")
    try:
        pci = nvidia_pci_devices(host)
        ev["pci_gpus"] = pci_gpus(pci)
        ev["nvswitch_present"] = probe_nvswitch(host, pci)
        ev["fabric_manager"] = probe_fabric_manager(host, systemd)
    except Exception as exc:  # defensive: never lose the other evidence
        errors.append("nvswitch/fabric manager probe failed: %r" % exc)
    ev["kernel_log"] = facts.kernel_log_facts(kernel_log) if kernel_log is not None else None
    ev["in_container"] = in_container(host)
    ev["device_open_errors"] = device_open_errors(host, ev["device_nodes"])
    ev["shm_size_mib"] = host.shm_mib()
    ev["cgroup"] = cgroup_limits(host)
    if renter_nvml is not None:
        ev["gpu_state"], ev["gpu_usage"] = renter_nvml
    ev["provider_claims"] = {k: v for k, v in (provider_claims or {}).items() if v not in (None, "")} or None
    ev["device_nodes_created_by_probes"] = sorted(set(host.glob(DEV_GLOB)) - set(ev["device_nodes"]))
    ev["probe_errors"] = errors
    return ev


def examine(evidence):
    """diagnose() plus the evidence itself, as the module returns it."""
    result = doctor.diagnose(evidence)
    result["evidence"] = evidence
    result["fixable"] = sorted({f["code"] for f in result["findings"] if f["remedy_class"] == "fixable"})
    return result


def read_kernel_log(host):
    """{"text", "source"} from dmesg, journalctl -k or /var/log/kern.log, else {"text": None, "reason"}:
    kmsg's reader (the one gpu_facts uses) over the doctor's Host."""
    return kmsg.read_kernel_log(host.run, lambda path, limit: host.read(path, limit, tail=True))
