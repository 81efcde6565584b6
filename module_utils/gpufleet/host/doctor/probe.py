"""Gathering the doctor's evidence on a host (the schema is in ``diagnose.py``).

Every probe is cheap, reads only, and never raises: a probe that cannot run leaves its key None ("not gathered") and
says why in ``probe_errors``. Host access goes through a small ``Host`` object so the logic is tested with recorded
data; ``Host`` itself reads the real machine. Programs that could hang or crash (libcuda's cuInit, importing torch)
run in child processes under a timeout. The collectors: ``childprobe`` (torch, cuInit), ``loginenv`` (the login
environment), ``hostprobe`` (PCI, NVSwitch, fabric manager, cgroup limits, device nodes), ``nvmlprobe`` (NVML).
"""

import errno
import glob
import os
import time

from ..gpu import facts
from ..system import hostctx, hostres, kmsg
from . import diagnose as doctor
from .childprobe import probe_cuinit, probe_torch
from .hostprobe import (
    cgroup_limits,
    device_open_errors,
    in_container,
    nvidia_pci_devices,
    pci_gpus,
    probe_fabric_manager,
    probe_nvswitch,
)
from .loginenv import ETC_ENVIRONMENT, login_environment, login_shell_env, setting_file
from .nvmlprobe import _gpus, nvml_evidence

DEV_GLOB = "/dev/nvidia*"
PROC_MODULES = "/proc/modules"
PROC_DRIVER = "/proc/driver/nvidia/version"
SHM_PATH = "/dev/shm"  # noqa: S108 - its size is read, no file is made


class Host:
    """The real machine. ``run(argv, env=None, timeout=None)`` -> (rc, out, err) or None when not installed."""

    def __init__(self, run):
        self.run = run

    @staticmethod
    def read(path, limit=1 << 20, tail=False):
        """Text of ``path`` (its last ``limit`` bytes with ``tail``); "" when it does not exist; None when
        it exists but cannot be read."""
        return hostctx.read_limited(path, limit, tail)

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


def gather(host, python=None, gpu_facts=None, kernel_log=None, cudatk_facts=None, expected_gpu_count=None,
           gpu_expected=None, timeout=120, device_nodes=None, login_user=None, renter_nvml=None, provider_claims=None):
    """The doctor's evidence for this host. ``gpu_facts``: facts.gpu_facts() output (NVML / nvidia-smi).

    ``device_nodes``: the /dev/nvidia* nodes listed before NVML or libcuda were called - run as root, the
    driver's user-space libraries create missing nodes themselves (mknod, or nvidia-modprobe); the nodes that
    appeared while probing are listed in ``device_nodes_created_by_probes``. ``renter_nvml``: the
    (gpu_state, gpu_usage) pair of ``nvml_renter_evidence``, taken before any probe started a CUDA program.
    ``provider_claims``: what the provider's listing says of the host (diagnose.py, ``provider_claims``).
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
