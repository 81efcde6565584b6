"""A small fleet of real SSH hosts for the reliability suites (tests/fleet).

Each host is a container of the project's test image (gpufleet/debian:12: tini, then sshd -D) with
port 22 published on 127.0.0.1:PORT and a key generated for the test session, the same way
scripts/demo-fleet builds the demo fleet. Names start with gpufleet-ft- and carry the label
gpufleet.ft=<session id>, so several engineers' runs and the demo fleet never collide.

Playbook runs are isolated from everything else that runs in the same checkout: their own
run-status file, fact cache, ssh control sockets, log file and report folder.
"""

import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
IMAGE = os.environ.get("GPUFLEET_FT_IMAGE", "gpufleet/debian:12")
# IMAGE plus downloaded apt lists and python3-packaging (what the roles would otherwise fetch on
# every fresh host, minutes each on a busy 2-core machine); rebuilt when older than a day.
BASE_IMAGE = "gpufleet/ft-base:12"
BASE_IMAGE_MAX_AGE_S = 86400
PREFIX = "gpufleet-ft"
BASE_PORT = int(os.environ.get("GPUFLEET_FT_BASE_PORT", "2420"))
WHEELHOUSE = ROOT / ".wheelhouse"

RECAP_RE = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.M,
)


# supervisord programs of the partial-failure fleet: pf-01 lacks the user 'trainer' (conftest.fleet_run).
TRAINER = {"name": "trainer", "command": "/bin/sleep infinity", "user": "trainer"}
HEARTBEAT = {"name": "heartbeat", "command": "/bin/sleep infinity"}


def asked_for(config, folder, env_name):
    """True when pytest was asked for the suite in ``folder`` by name (a path inside it on the command
    line) or with the environment variable ``env_name`` set to 1: the container suites run only then."""
    if os.environ.get(env_name) == "1":
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == folder or folder in path.parents:
            return True
    return False


def suite_runs(config, items, folder, env_name, why):
    """True when the collected ``items`` hold tests of the suite in ``folder`` and it was asked for
    (``asked_for``); its tests are deselected, and the run says ``why``, when it was not."""
    from tests import skips

    mine = [item for item in items if folder in Path(str(item.fspath)).resolve().parents]
    if not mine:
        return False
    if not asked_for(config, folder, env_name):
        skips.deselect(config, items, mine, why)
        return False
    return True


def sh(*argv, check=True, input=None, timeout=300):
    """Run a command, return its CompletedProcess (text)."""
    return subprocess.run(
        [str(a) for a in argv], check=check, capture_output=True, text=True, input=input, timeout=timeout
    )


def recap(output):
    """PLAY RECAP counters per host from ansible-playbook's output."""
    return {m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"} for m in RECAP_RE.finditer(output)}


class Host:
    def __init__(self, fleet, index):
        self.fleet = fleet
        self.index = index
        self.name = "%s-%02d" % (fleet.prefix, index)
        self.port = fleet.base_port + index

    def exec(self, script, check=True, timeout=120):
        """Run a shell script as root inside the host (docker exec, not through Ansible)."""
        return sh("docker", "exec", self.name, "sh", "-c", script, check=check, timeout=timeout)

    def read(self, path):
        return self.exec("cat %s" % shlex.quote(path)).stdout

    def checksums(self, paths):
        """sha256 of each file under the given paths (missing paths are simply absent), plus the list of names.
        A failed listing (docker exec, a checksum) raises: a comparison of two empty listings proves nothing."""
        quoted = " ".join(shlex.quote(p) for p in paths)
        out = self.exec("find %s -xdev \\( -type f -o -type l \\) 2>/dev/null | sort | "
                        "while read -r f; do if [ -L \"$f\" ]; then echo \"link $(readlink \"$f\") $f\"; "
                        "else sha256sum \"$f\"; fi; done" % quoted, check=True).stdout
        return out


def base_image():
    """BASE_IMAGE, built from IMAGE when missing or stale (the same tini + sshd -D command)."""
    res = sh("docker", "image", "inspect", "--format", "{{.Created}}", BASE_IMAGE, check=False)
    if res.returncode == 0:
        from datetime import datetime, timezone

        created = datetime.fromisoformat(res.stdout.strip()[:19]).replace(tzinfo=timezone.utc)
        if (datetime.now(timezone.utc) - created).total_seconds() < BASE_IMAGE_MAX_AGE_S:
            return BASE_IMAGE
    name = "%s-base-build-%d" % (PREFIX, os.getpid())
    sh("docker", "run", "-d", "--name", name, IMAGE)
    try:
        sh("docker", "exec", "-e", "DEBIAN_FRONTEND=noninteractive", name, "sh", "-c",
           "apt-get update -qq && apt-get install -y -qq python3-packaging >/dev/null", timeout=900)
        sh("docker", "commit", name, BASE_IMAGE)
    finally:
        sh("docker", "rm", "-f", name, check=False)
    return BASE_IMAGE


class Fleet:
    """Containers gpufleet-ft-<tag>-NN reached over SSH on 127.0.0.1:base_port+NN."""

    def __init__(self, workdir, tag, base_port=BASE_PORT):
        self.workdir = Path(workdir)
        self.prefix = "%s-%s" % (PREFIX, tag)
        self.label = "gpufleet.ft=%s-%d" % (tag, os.getpid())
        self.base_port = base_port
        self.key = self.workdir / "id_ed25519"
        self.hosts = []
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.key.exists():
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-ft", "-f", self.key)

    def start(self, count):
        self.remove()
        image = base_image()
        for i in range(1, count + 1):
            host = Host(self, i)
            sh("docker", "run", "-d", "--name", host.name, "--hostname", host.name, "--label", self.label,
               "-p", "127.0.0.1:%d:22" % host.port, image)
            sh("docker", "cp", "%s.pub" % self.key, "%s:/root/authorized_keys.pub" % host.name)
            host.exec("install -d -m 700 /root/.ssh && install -m 600 /root/authorized_keys.pub "
                      "/root/.ssh/authorized_keys && rm /root/authorized_keys.pub")
            self.hosts.append(host)
        for host in self.hosts:
            self.wait_ssh(host)
        return self.hosts

    def wait_ssh(self, host, tries=30):
        for _ in range(tries):
            res = sh("ssh", "-q", "-i", self.key, "-p", host.port, "-o", "BatchMode=yes",
                     "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                     "-o", "ConnectTimeout=2", "root@127.0.0.1", "true", check=False)
            if res.returncode == 0:
                return
            time.sleep(1)
        raise RuntimeError("%s does not answer SSH on port %d" % (host.name, host.port))

    def remove(self):
        ids = sh("docker", "ps", "-aq", "--filter", "name=^%s-" % self.prefix, check=False).stdout.split()
        if ids:
            sh("docker", "rm", "-f", *ids, check=False)
        self.hosts = []

    def inventory(self, path, host_vars=None, group_vars=None, extra_hosts=None, fleet_hosts=True):
        """Write an inventory (YAML's JSON subset) of the fleet's hosts plus extra_hosts (name -> vars) to path."""
        hosts = {}
        for host in self.hosts if fleet_hosts else []:
            hv = {"ansible_host": "127.0.0.1", "ansible_port": host.port}
            hv.update((host_vars or {}).get(host.name, {}))
            hosts[host.name] = hv
        for name, hv in (extra_hosts or {}).items():
            hosts[name] = dict(hv)
        gv = {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
        }
        gv.update(group_vars or {})
        Path(path).write_text(json.dumps({"rented": {"hosts": hosts, "vars": gv}}, indent=1))
        return Path(path)


class Runner:
    """ansible-playbook with the project's ansible.cfg, isolated per test run."""

    def __init__(self, workdir):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.status_file = self.workdir / "run-status.json"
        self.log_file = self.workdir / "ansible.log"
        self.report_dir = self.workdir / "reports"
        self.cache_dir = self.workdir / "facts"
        self.runs = 0

    def env(self):
        env = dict(os.environ)
        env.update({
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "GPUFLEET_STATUS_FILE": str(self.status_file),
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(self.cache_dir),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.workdir / "cp"),
            "ANSIBLE_LOG_PATH": str(self.log_file),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "PATH": "%s:%s" % (BIN, os.environ.get("PATH", "")),
        })
        env.pop("ANSIBLE_STDOUT_CALLBACK", None)
        return env

    def _argv(self, playbook, inventory, extra_vars, args):
        argv = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(ROOT / playbook)]
        ev = {"gpufleet_report_dir": str(self.report_dir)}
        ev.update(extra_vars or {})
        argv += ["-e", json.dumps(ev)]
        return argv + list(args)

    def playbook(self, playbook, inventory, extra_vars=None, args=(), timeout=1800):
        """Run a playbook to its end; returns (returncode, output, recap)."""
        self.runs += 1
        res = subprocess.run(self._argv(playbook, inventory, extra_vars, args), env=self.env(), cwd=ROOT,
                             capture_output=True, text=True, timeout=timeout)
        out = res.stdout + res.stderr
        (self.workdir / ("run-%02d.out" % self.runs)).write_text(out)
        return res.returncode, out, recap(out)

    def playbook_killed_at(self, playbook, inventory, task, sig, extra_vars=None, args=(), delay=0.0, timeout=1800):
        """Start a playbook and send sig to ansible-playbook when the line 'TASK [<task>]' appears
        (delay seconds later: 0 kills at the task's start, more lands inside it). Returns
        (killed, output): killed is False when the task never started."""
        self.runs += 1
        proc = subprocess.Popen(self._argv(playbook, inventory, extra_vars, args), env=self.env(), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        lines, killed = [], False
        marker = "TASK [%s]" % task
        deadline = time.monotonic() + timeout
        try:
            for line in proc.stdout:
                lines.append(line)
                if not killed and marker in line:
                    if delay:
                        time.sleep(delay)
                    # the whole process group, as a closed terminal (SIGKILL of everything on a dead
                    # laptop) or Ctrl-C (SIGINT to the foreground group) hits it: ansible-playbook,
                    # its forked workers and their ssh clients. (ControlPersist masters detach
                    # into their own session and survive, as they would on the laptop.)
                    os.killpg(proc.pid, sig)
                    killed = True
                if time.monotonic() > deadline:
                    break
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out = "".join(lines)
        (self.workdir / ("run-%02d.out" % self.runs)).write_text(out)
        return killed, out

    def close_connections(self):
        """End this runner's ssh ControlPersist masters (ssh -O exit), as a connection that is gone would be.
        A module that a kill caught while its code was still being sent otherwise waits for the rest of it
        on the host for as long as the master lives (ControlPersist, 30 min)."""
        for sock in (self.workdir / "cp").glob("*"):
            sh("ssh", "-o", "ControlPath=%s" % sock, "-O", "exit", "gpufleet-ft", check=False, timeout=30)

    def latest_report(self):
        return json.loads((self.report_dir / "latest" / "fleet.json").read_text())


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def ctk_default_version():
    """The toolkit version the role installs by default (roles/nvidia_container_toolkit/defaults/main.yml)."""
    import yaml

    defaults = ROOT / "roles" / "nvidia_container_toolkit" / "defaults" / "main.yml"
    return yaml.safe_load(defaults.read_text())["nvidia_container_toolkit_version"]


def build_ctk_debs(workdir, version=None):
    """The four local stand-in toolkit packages (tests/debs/build-ctk-debs) at ``version`` (default: the role's);
    returns their paths."""
    version = version or ctk_default_version()
    out = Path(workdir) / "ctk-debs" / version
    if not out.exists():
        sh(ROOT / "tests" / "debs" / "build-ctk-debs", out, version)
    return sorted(str(p) for p in out.glob("*.deb"))


def seed_gpu_host(host, workdir):
    """Give a host what a rented GPU VM has for the roles to work on: a Docker daemon.json with keys of
    its own, a containerd config importing conf.d, and a CUDA 12.4 toolkit laid out as NVIDIA's
    installer does (the real libcudart from the cu12 runtime wheel of the wheelhouse)."""
    import zipfile

    unpacked = Path(workdir) / "cu12"
    if not unpacked.exists():
        wheel = next((WHEELHOUSE / "cuda-runtimes").glob("nvidia_cuda_runtime_cu12-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            zf.extract("nvidia/cuda_runtime/lib/libcudart.so.12", unpacked)
    lib = "/usr/local/cuda-12.4/targets/x86_64-linux/lib"
    host.exec("mkdir -p %s /etc/docker /etc/containerd" % lib)
    sh("docker", "cp", unpacked / "nvidia/cuda_runtime/lib/libcudart.so.12",
       "%s:%s/libcudart.so.12.4.127" % (host.name, lib))
    host.exec(
        "cd %s && ln -sf libcudart.so.12.4.127 libcudart.so.12 && ln -sf libcudart.so.12 libcudart.so && "
        "ln -sfn targets/x86_64-linux/lib /usr/local/cuda-12.4/lib64 && "
        "printf '%%s\\n' '{\"cuda\": {\"name\": \"CUDA SDK\", \"version\": \"12.4.1\"}, "
        "\"cuda_cudart\": {\"name\": \"CUDA Runtime (cudart)\", \"version\": \"12.4.127\"}}' "
        "> /usr/local/cuda-12.4/version.json && "
        "printf '%%s' '{\"log-driver\": \"json-file\", \"data-root\": \"/var/lib/docker\"}' "
        "> /etc/docker/daemon.json && "
        "printf 'version = 2\\nimports = [\"/etc/containerd/conf.d/*.toml\"]\\n' > /etc/containerd/config.toml"
        % lib
    )


def one_seeded_host(workdir, tag, base_port, addfinalizer):
    """A fleet of one seeded host (seed_gpu_host), removed by the finalizer; returns (fleet, host)."""
    fleet = Fleet(workdir, tag, base_port=base_port)
    addfinalizer(fleet.remove)
    (host,) = fleet.start(1)
    seed_gpu_host(host, fleet.workdir)
    return fleet, host


def role_vars(workdir, torch=False, ctk=True):
    """Variables that make the provisioning roles do real work on a seeded container host (torch:
    also install torch, minutes; ctk: also run the toolkit role, which skips container hosts unless forced)."""
    return {
        "supervisord_pip_wheelhouse": str(WHEELHOUSE / "supervisord"),
        "supervisord_programs": [{"name": "heartbeat", "command": "/bin/sleep infinity"}],
        "nvidia_container_toolkit_local_debs": build_ctk_debs(workdir),
        "cuda_links_driver_cuda_version": "12.4",
        "gpufleet_torch_enabled": torch,
        "nvidia_container_toolkit_force": ctk,
        # The stand-in packages' nvidia-ctk does nothing: no CDI spec to generate, no container to start. The role's
        # CDI, check and rollback are molecule/nvidia_container_toolkit's (its own stand-ins act them out).
        "nvidia_container_toolkit_cdi_enabled": False,
        "nvidia_container_toolkit_verify_enabled": False,
        "torch_version": "2.13.0",
        "torch_cuda_variant": "cpu",
        "torch_extra_packages": [],
        "torch_pip_wheelhouse": str(WHEELHOUSE / "torch"),
        # gpu_monitoring runs on hosts whose facts show GPUs (these have none) or with gpufleet_monitoring_enabled
        "gpu_monitoring_pip_wheelhouse": str(WHEELHOUSE / "gpufleet"),
        "gpu_monitoring_tools_pip_wheelhouse": str(WHEELHOUSE / "monitoring"),
        "jupyter_pip_wheelhouse": str(WHEELHOUSE / "jupyter"),
    }


def failure_text(output, host):
    """The lines ansible-playbook printed for host's failures ('fatal: [host]' / 'failed: [host]' and the
    indented lines under them)."""
    keep, grab = [], False
    for line in output.splitlines():
        if line.startswith(("fatal: [%s]" % host, "failed: [%s]" % host)):
            grab = True
        elif line and not line[0].isspace():
            grab = False
        if grab:
            keep.append(line)
    return "\n".join(keep)


def provisioned_roles():
    """Role names playbooks/provision.yml applies, in order (suites cover roles as they are added there)."""
    import yaml

    plays = yaml.safe_load((ROOT / "playbooks" / "provision.yml").read_text())
    names = []
    for play in plays:
        for role in play.get("roles", []):
            names.append(role["role"] if isinstance(role, dict) else role)
    return names


def closed_port(start):
    """A loopback port from start on that nothing listens on: an inventory entry there is unreachable."""
    import socket

    for port in range(start, start + 50):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no closed port from %d" % start)


def secret_vars(secret):
    """Every password the provisioning roles take, set to secret (the roles not in provision.yml yet are left out)."""
    roles = provisioned_roles()
    out = {}
    if "supervisord" in roles:
        out.update({"supervisord_inet_http_server_enabled": True, "supervisord_inet_http_server_username": "ops",
                    "supervisord_inet_http_server_password": secret})
    if "jupyter" in roles:
        out.update({"jupyter_password": secret})
    return out


class ProcessWatcher:
    """Records every command line seen on the hosts while a run is going on: one loop inside each
    host (ps twice a second) streaming to the controller, cheaper than a docker exec per reading."""

    STOP = "/run/gpufleet-ft-watch-stop"  # inside the test container

    def __init__(self, containers, interval=0.5):
        self.containers = containers
        self.interval = interval
        self.seen = set()
        self._procs = []
        self._threads = []

    def _read(self, proc):
        for line in proc.stdout:
            self.seen.add(line.rstrip("\n"))

    def __enter__(self):
        import threading

        loop = "rm -f {stop}; while [ ! -e {stop} ]; do ps -eo args --no-headers; sleep {i}; done; rm -f {stop}"
        for name in self.containers:
            proc = subprocess.Popen(["docker", "exec", name, "sh", "-c", loop.format(stop=self.STOP, i=self.interval)],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
            thread.start()
            self._procs.append(proc)
            self._threads.append(thread)
        return self

    def __exit__(self, *exc):
        for name in self.containers:
            sh("docker", "exec", name, "touch", self.STOP, check=False)
        for proc, thread in zip(self._procs, self._threads):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            thread.join(timeout=30)


def extra_role_checks(host):
    """Read-back checks for roles added to provision.yml after the first ones (empty until they are)."""
    roles = provisioned_roles()
    checks = []
    if "ssh_hardening" in roles:
        checks.append(lambda: host.exec("/usr/sbin/sshd -t", check=False).returncode == 0)
    if "jupyter" in roles:
        config = "/etc/gpufleet-jupyter/jupyter_server_config.json"  # roles/jupyter/vars/main.yml
        checks.append(lambda: host.exec("test -f %s" % config, check=False).returncode == 0)
    return checks
