"""Bad-input suite: wrong inputs to every role and module are refused with a clear message, before
anything changes on the host.

Role inputs: one ansible-playbook run applies tests/fleet/playbooks/apply_role.yml to many inventory
aliases of one container, each alias with one wrong input as host vars (host vars override role
defaults exactly as -e does, and one run instead of fifty keeps the suite fast). Module inputs: one
generated playbook the same way, an alias per case and one task per case calling the module with the wrong
arguments on its alias only. For every case: the run fails for that input, with a message holding the
expected fragment, changed=0, and the checksums of every file the roles write are the same before and after.
"""

import json
from pathlib import Path

import fleetlib as fl
import pytest

HERE = Path(__file__).resolve().parent

# Files and folders the roles (and the modules) write: checksummed before and after.
WATCHED = [
    "/etc/gpufleet", "/opt/gpufleet", "/var/lib/gpufleet", "/var/log/gpufleet", "/etc/docker", "/etc/containerd",
    "/etc/ld.so.conf.d", "/etc/ld.so.cache", "/usr/local/cuda", "/etc/apt/sources.list.d", "/etc/apt/keyrings",
    "/etc/environment", "/etc/profile.d", "/etc/ssh", "/etc/systemd/system", "/usr/local/bin", "/var/lib/dpkg/status",
    "/etc/cdi", "/etc/udev/rules.d",
]

CTK_OK = {"nvidia_container_toolkit_force": True}
INET = {"supervisord_inet_http_server_enabled": True, "supervisord_inet_http_server_username": "ops",
        "supervisord_inet_http_server_password": "s3cret-ft"}
TORCH = {"torch_extra_packages": []}

# (role, wrong input, fragment of the message that refuses it). Role variables are documented in
# roles/<role>/README.md; '{debs}' is replaced by the four valid local .debs, '{old_debs}' by the
# same four built at a version below the floor.
ROLE_CASES = [
    # supervisord
    ("supervisord", {"supervisord_version": "latest"}, "supervisord_version must be an exact release"),
    ("supervisord", {"supervisord_version": ">=4.2"}, "supervisord_version must be an exact release"),
    ("supervisord", {"supervisord_pip_index_url": "http://pypi.example/simple"}, "must be https"),
    ("supervisord", dict(INET, supervisord_inet_http_server_bind="0.0.0.0"),  # noqa: S104
     "needs a loopback bind"),
    ("supervisord", dict(INET, supervisord_inet_http_server_password=""), "a username, a password"),
    ("supervisord", dict(INET, supervisord_inet_http_server_username=""), "a username, a password"),
    ("supervisord", dict(INET, supervisord_inet_http_server_port=70000), "a valid port"),
    ("supervisord", {"supervisord_service_manager": "upstart"}, "supervisord_service_manager"),
    ("supervisord", {"supervisord_programs": [{"name": "bad name", "command": "/bin/true"}]}, "is not valid"),
    ("supervisord", {"supervisord_programs": [{"name": "nocmd"}]}, "missing required arguments: command"),
    ("supervisord", {"supervisord_programs": [{"name": "two", "command": "/bin/true\nrm -rf /"}]}, "is not valid"),
    ("supervisord", {"supervisord_programs": [{"name": "st", "command": "/bin/true", "state": "restarted"}]},
     "value of state must be one of"),
    ("supervisord", {"supervisord_programs": [{"name": "ar", "command": "/bin/true", "autorestart": "sometimes"}]},
     "value of autorestart must be one of"),
    ("supervisord", {"supervisord_programs": [{"name": "dup", "command": "/bin/true"},
                                              {"name": "dup", "command": "/bin/false"}]}, "names must be unique"),
    # cuda_links
    ("cuda_links", {"cuda_links_version": "12"}, "cuda_links_version must be empty or a CUDA major.minor"),
    ("cuda_links", {"cuda_links_version": "12.4; rm -rf /"}, "cuda_links_version must be empty or a CUDA major.minor"),
    ("cuda_links", {"cuda_links_driver_cuda_version": "twelve"}, "driver's CUDA version"),
    ("cuda_links", {"cuda_links_version": "11.8"}, "cuda_links_version to one of them"),
    ("cuda_links", {"cuda_links_ld_so_conf_file": "/etc/ld.so.conf"}, "must be a *.conf file directly in"),
    ("cuda_links", {"cuda_links_ld_so_conf_file": "/etc/ld.so.conf.d/../passwd.conf"}, "must be a *.conf file"),
    ("cuda_links", {"cuda_links_backup_dir": "/"}, "at least three levels deep"),
    ("cuda_links", {"cuda_links_backup_dir": "/var/lib/../../etc"}, "at least three levels deep"),
    ("cuda_links", {"cuda_links_rollback": True}, "there is no saved state"),
    ("cuda_links", {"cuda_links_ld_library_path_cleanup_enabled": "perhaps"},
     "cuda_links_ld_library_path_cleanup_enabled"),
    # nvidia_container_toolkit
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_version="1.17.7-1"), "security floor"),
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_version="latest"), "exact Debian version"),
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_version="1.17.8"), "exact Debian version"),
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_repo_url="http://nvidia.example/deb"),
     "must be served over https"),
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_repo_key_url="ftp://nvidia.example/key"),
     "must be served over https"),
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_local_debs="{three_debs}"),
     "must list the four files"),
    ("nvidia_container_toolkit",
     dict(CTK_OK, nvidia_container_toolkit_local_debs=["/nonexistent/a_1.17.8-1_amd64.deb"] * 4),
     "must list the four files"),
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_local_debs="{old_debs}"),
     "must list the four files"),
    ("nvidia_container_toolkit", dict(CTK_OK), "must be pinned"),
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_repo_key_checksum="sha256:abc"),
     "must be pinned"),
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_local_debs="{debs}",
                                      nvidia_container_toolkit_docker_daemon_json="/etc/passwd"), "/etc/passwd"),
    ("nvidia_container_toolkit", dict(CTK_OK, nvidia_container_toolkit_set_as_default="maybe"),
     "nvidia_container_toolkit_set_as_default"),
    # torch
    ("torch", dict(TORCH, torch_version="2.5"), "torch_version"),
    ("torch", dict(TORCH, torch_version=">=2.0"), "is not pinned exactly"),
    ("torch", dict(TORCH, torch_cuda_variant="cu999"), "torch_cuda_variant"),
    ("torch", dict(TORCH, torch_version="2.5.1+cu118"), "cu118"),
    ("torch", dict(TORCH, torch_pip_index_url="http://download.pytorch.org/whl/cu121"), "https"),
    ("torch", {"torch_extra_packages": ["torchvision"]}, "torchvision"),
    ("torch", dict(TORCH, torch_pip_hashes={"torch==2.5.1+cu121": ["md5:0123"]}), "torch_pip_hashes"),
    ("torch", dict(TORCH, torch_driver_policy="loose"), "torch_driver_policy"),
    ("torch", dict(TORCH, torch_version="2.13.0", torch_cuda_variant="cpu", torch_pip_wheelhouse="{empty_dir}"),
     "wheelhouse"),
    # ssh_hardening
    ("ssh_hardening", {"ssh_hardening_port": 0}, "ssh_hardening_port must be 1-65535"),
    ("ssh_hardening", {"ssh_hardening_max_auth_tries": 1}, "max_auth_tries 2-10"),
    ("ssh_hardening", {"ssh_hardening_ciphers": ["aes256-cbc"]}, "refused as weak"),
    ("ssh_hardening", {"ssh_hardening_macs": ["hmac-md5"]}, "refused as weak"),
    ("ssh_hardening", {"ssh_hardening_extra_config": {"PasswordAuthentication": "yes"}},
     "keys must be plain sshd keywords other than the ones the role sets itself"),
    ("ssh_hardening", {"ssh_hardening_extra_config": {"Banner": "/etc/issue\nPermitRootLogin yes"}},
     "values one non-empty line"),
    # gpu_monitoring
    ("gpu_monitoring", {"gpu_monitoring_http_port": 9400, "gpu_monitoring_http_bind": "0.0.0.0"},  # noqa: S104
     "a loopback address"),
    ("gpu_monitoring", {"gpu_monitoring_http_port": 70000}, "gpu_monitoring_http_port must be 0 (off) or 1-65535"),
    ("gpu_monitoring", {"gpu_monitoring_interval": 0}, "gpu_monitoring_interval must be a number of seconds > 0"),
    ("gpu_monitoring", {"gpu_monitoring_textfile_dir": "textfile"}, "must be absolute paths"),
    ("gpu_monitoring", {"gpu_monitoring_user": "root; rm -rf /"}, "must be plain user/group names"),
    ("gpu_monitoring", {"gpu_monitoring_nvitop_version": "latest"}, "exact releases"),
]

# (module, args, fragment): the module called with args on the host (as `ansible -m MODULE -a ARGS` would).
MODULE_CASES = [
    ("torch_variant", {"torch_version": "latest", "variant": "cpu"}, "latest"),
    ("torch_variant", {"torch_version": "2.5.1", "variant": "cu999"}, "cu999"),
    ("torch_variant", {"torch_version": "2.5.1", "variant": "cu121", "driver_policy": "loose"}, "driver_policy"),
    ("torch_variant", {"torch_version": "2.5.1", "variant": "cu121", "index_url": "http://example.org/simple"},
     "https"),
    ("ctk_config", {"path": "/etc/passwd"}, "/etc/passwd"),
    ("ctk_config", {"mode": "abc"}, "octal file mode"),
    ("ctk_packages", {"floor": "not-a-version"}, "not-a-version"),
    ("cuda_toolkits", {"no_such_option": "x"}, "Unsupported parameters"),
    ("cuda_toolkits", {"run_ldconfig": "sometimes"}, "run_ldconfig"),
    ("gpu_facts", {"prefer": "magic"}, "prefer"),
    ("gpu_facts", {"expected_gpu_count": "eight"}, "expected_gpu_count"),
    ("gpu_facts", {"no_such_option": 1}, "no_such_option"),
    ("gpu_gate", {"device": "tpu"}, "device"),
    ("gpu_gate", {"device": "cpu", "repetitions": "many"}, "repetitions"),
    ("gpu_doctor", {"timeout": "forever"}, "timeout"),
]


def _checksums(host):
    """host.checksums(WATCHED) as a real listing: the command succeeded (fleetlib raises otherwise) and it names
    files every seeded host has, so ``before == after`` cannot hold on two empty or truncated listings."""
    listing = host.checksums(WATCHED)
    names = {line.split()[-1] for line in listing.splitlines() if line.strip()}
    assert {"/var/lib/dpkg/status", "/etc/ssh/sshd_config"} <= names, "no usable listing of %s:\n%s" % (
        host.name, listing[:2000])
    return listing


def _fill(value, subst):
    if isinstance(value, str) and value in subst:
        return subst[value]
    return value


@pytest.fixture(scope="module")
def bad_host(ft_workdir, request):
    return fl.one_seeded_host(ft_workdir / "bad-input", "bad", fl.BASE_PORT + 15, request.addfinalizer)


def test_role_inputs_are_refused_before_any_change(bad_host):
    fleet, host = bad_host
    work = fleet.workdir
    debs = fl.build_ctk_debs(work)
    empty = work / "empty-wheelhouse"
    empty.mkdir(exist_ok=True)
    subst = {"{debs}": debs, "{three_debs}": debs[:3], "{old_debs}": fl.build_ctk_debs(work, "1.17.3-1"),
             "{empty_dir}": str(empty)}
    host_vars, expected = {}, {}
    for n, (role, wrong, fragment) in enumerate(ROLE_CASES):
        alias = "bad-%02d-%s" % (n, role)
        hv = {"ansible_host": "127.0.0.1", "ansible_port": host.port, "ft_role": role}
        hv.update({k: _fill(v, subst) for k, v in wrong.items()})
        host_vars[alias] = hv
        expected[alias] = (role, wrong, fragment)
    inventory = fleet.inventory(work / "roles.json", extra_hosts=host_vars, fleet_hosts=False)

    before = _checksums(host)
    runner = fl.Runner(work / "roles-run")
    # All aliases reach one sshd through one shared ssh connection: stay under sshd's MaxSessions (10).
    rc, out, rec = runner.playbook("tests/fleet/playbooks/apply_role.yml", inventory, args=["--forks", "8"])
    after = _checksums(host)
    status = json.loads(runner.status_file.read_text())["hosts"]

    problems = []
    for alias, (role, wrong, fragment) in expected.items():
        got = status.get(alias)
        counts = rec.get(alias, {})
        if got is None or got["state"] != "failed":
            problems.append("NOT REFUSED: %s %s (recap %s)" % (role, wrong, counts))
            continue
        # A loop's failure is recorded as "One or more items failed" (gpufleet_status keeps the first
        # message only); the item's own message is then in the run's output.
        if fragment not in got["reason"] and fragment not in " ".join(fl.failure_text(out, alias).split()):
            problems.append("unclear message: %s %s: expected %r in %r (task %r)"
                            % (role, wrong, fragment, got["reason"], got["task"]))
        if counts.get("changed", 1) != 0:
            problems.append("changed before refusing: %s %s (recap %s)" % (role, wrong, counts))
    assert rc != 0
    assert not problems, "\n".join(problems)
    assert before == after, "files changed on the host although every input was refused"
    assert len(ROLE_CASES) + len(MODULE_CASES) >= 40


def test_module_inputs_are_refused_before_any_change(bad_host):
    """One ansible-playbook for all module cases (as for the roles): an alias per case, one task per case
    calling the module with its arguments on that alias alone (no facts gathered, as `ansible -m` does not)."""
    fleet, host = bad_host
    work = fleet.workdir
    aliases, tasks = {}, []
    for n, (module, args, _fragment) in enumerate(MODULE_CASES):
        alias = "mod-%02d-%s" % (n, module)
        aliases[alias] = {"ansible_host": "127.0.0.1", "ansible_port": host.port}
        tasks.append({"name": "%s %s" % (module, json.dumps(args)), module: args,
                      "when": "inventory_hostname == %s" % json.dumps(alias)})
    playbook = work / "modules.yml"  # JSON is YAML
    playbook.write_text(json.dumps([{"name": "Call each module with its wrong arguments", "hosts": "all",
                                     "gather_facts": False, "become": True, "tasks": tasks}], indent=1))
    inventory = fleet.inventory(work / "modules.json", extra_hosts=aliases, fleet_hosts=False)
    runner = fl.Runner(work / "modules-run")
    before = _checksums(host)
    rc, out, rec = runner.playbook(playbook, inventory, args=["--forks", "8"])
    after = _checksums(host)
    status = json.loads(runner.status_file.read_text())["hosts"]
    problems = []
    for (module, args, fragment), alias in zip(MODULE_CASES, aliases):
        got, said = status.get(alias), fl.failure_text(out, alias)
        if got is None or got["state"] != "failed":
            problems.append("NOT REFUSED: %s %s (recap %s)" % (module, args, rec.get(alias)))
        elif fragment not in got["reason"] and fragment not in " ".join(said.split()):
            problems.append("unclear message: %s %s: expected %r in:\n%s" % (module, args, fragment, said[-600:]))
        elif rec.get(alias, {}).get("changed", 1) != 0:
            problems.append("changed before refusing: %s %s" % (module, args))
    assert rc != 0
    assert not problems, "\n".join(problems)
    assert before == after, "files changed on the host although every module call was refused"
