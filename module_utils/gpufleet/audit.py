"""The renter's checklist: eleven answers per host, the security audit (item 10) and torch's advisories (item 11).

``checklist(result)`` reads one per-host result of the report (``gpu`` = gpu_facts with
``readiness``, ``doctor`` = the doctor's result with its evidence, ``check`` = the pre-check's) and
answers the questions renters ask before they pay (docs/checklist.md). Each item is ``{"status": ok|warn|fail|unknown,
"summary": text, "reason": text|None}``; "unknown" always says which fact was missing. Nothing
is guessed: a value the host did not report is never read as good or bad. A CPU host by intent
(``expected_gpu_count`` 0 in the result, inventory ``gpufleet_expected_gpu_count: 0``) is judged as
one: a CPU torch build is right there, and what only GPUs need (cuDNN, NCCL, a GPU exporter) is
"ok" with a summary that says it is not needed.

``security(readiness, container, os_release)`` is item 10: installed versions against fixed floors with
their sources (shared/reference/security-reliability.md), Jupyter listening publicly without TLS,
password SSH login; each finding names the gpufleet role and variable that fixes it. Package versions
are compared in dpkg's order (``deb_compare``); where the distro backports fixes (Debian 12/13, Ubuntu
22.04/24.04) the floor is the distro's fixed package version for the host's release, and upstream
version ranges apply only where no distro row (or the package's changelog) decides.

``torch_advisories_item(result)`` is item 11: the host's torch version (``torch_version_of``: the doctor's probe of
the target Python, else the pre-check's judged environment, else the gpufleet venv's packages) against the sourced
advisory table in ``torch_advisories``: warn (never fail) with each open advisory and its fixed release.
Plain Python >= 3.8, stdlib only.
"""

import math
import re

from . import capacity, features, torchcompat
from . import ctk as _ctk
from . import torch_advisories as _torch_advisories
from .doctor_rules import SHM_MIN_MIB  # the /dev/shm floor, a doctor threshold (host side)
from .hostctx import GPUFLEET_VENV  # where gpu_facts lists packages unless told another environment

REFERENCE = "shared/reference/security-reliability.md"

ITEMS = (
    ("torch_cuda", "torch / CUDA match"),
    ("cudnn", "cuDNN"),
    ("capacity", "GPU memory vs model sizes"),
    ("features", "compute capability features"),
    ("access", "Jupyter / SSH access"),
    ("image", "image quality"),
    ("multi_gpu", "NCCL / multi-GPU readiness"),
    ("packages", "Python packages"),
    ("monitoring", "monitoring"),
    ("security", "security audit"),
    ("torch_advisories", "torch security advisories"),
)
STATUSES = ("ok", "warn", "fail", "unknown")
_WORST = {"ok": 0, "unknown": 1, "warn": 2, "fail": 3}

# --- thresholds, each with where it comes from --------------------------------------------------
# SHM_MIN_MIB, the /dev/shm floor, comes from doctor_rules: the doctor checks the same floor on the host.
MEMLOCK_SOURCE = "NVIDIA NGC PyTorch container docs: docker run --shm-size=1g --ulimit memlock=-1"
ROOT_FREE_MIN_GIB = 50     # room for one 70B checkpoint in 4 bits or a 13B one in 16 bits, plus caches
CPU_PER_GPU_MIN = 4        # data loading workers per GPU; fewer starves the GPU on image/text pipelines
TEXTFILE_MAX_AGE_S = 300   # the exporter rewrites the file every few seconds; five minutes is stale
WANTED_PACKAGES = ("torch", "transformers", "datasets", "accelerate", "tqdm")

# --- security floors (each with its source) -------------------------------------------------------
# Package versions are compared in dpkg's order (deb_compare). The toolkit comes from NVIDIA's own
# repository, not a distro that backports, so its floor is one package version for every release.
CTK_FLOOR = "1.17.8"
CTK_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                "libnvidia-container1")
CTK_SOURCE = REFERENCE + " 4.1: CVE-2025-23266 (NVIDIAScape) and CVE-2025-23267 fixed in 1.17.8"
# CVE-2024-6387 (regreSSHion), glibc Linux sshd. Where the distro backports fixes, the floor is the distro's
# fixed *package* version (dpkg order, ``deb_compare``): {(os-release ID, VERSION_ID): row}. A package below
# the row's floor whose upstream part is outside SSH_UPSTREAM_AFFECTED is still not affected ("vulnerable
# code introduced later", as the Debian tracker says of bullseye's 8.4p1).
SSH_CVE = "CVE-2024-6387"
_DEBIAN_TRACKER = "https://security-tracker.debian.org/tracker/CVE-2024-6387"
_USN = "USN-6859-1 (https://ubuntu.com/security/notices/USN-6859-1; https://ubuntu.com/security/CVE-2024-6387)"
SSH_DISTRO_FIXED = {
    ("debian", "12"): {"name": "Debian 12 (bookworm)", "fixed": "1:9.2p1-2+deb12u3", "ref": "DSA-5724-1",
                       "source": "DSA-5724-1 (https://security-tracker.debian.org/tracker/DSA-5724-1; "
                                 "shared/reference/ecosystem.md, SSH audits)"},
    ("debian", "13"): {"name": "Debian 13 (trixie)", "fixed": "1:9.7p1-7", "ref": "Debian security tracker",
                       "source": "Debian security tracker %s: fixed in unstable 1:9.7p1-7 before trixie's "
                                 "release (trixie ships 1:10.0p1)" % _DEBIAN_TRACKER},
    ("ubuntu", "22.04"): {"name": "Ubuntu 22.04 (jammy)", "fixed": "1:8.9p1-3ubuntu0.10", "ref": "USN-6859-1",
                          "source": _USN},
    ("ubuntu", "24.04"): {"name": "Ubuntu 24.04 (noble)", "fixed": "1:9.6p1-3ubuntu13.3", "ref": "USN-6859-1",
                          "source": _USN},
}
# Upstream (portable OpenSSH) ranges, used only where no distro row decides: [low, high), low None = any.
SSH_UPSTREAM_AFFECTED = ((None, "4.4p1"), ("8.5p1", "9.8p1"))
SSH_SOURCE = (REFERENCE + " 1.4: regreSSHion CVE-2024-6387 affects 8.5p1 up to (not including) 9.8p1; "
              "Qualys' advisory (2024-07-01): also < 4.4p1 unless patched for CVE-2006-5051 and CVE-2008-4109")
SSH_TEXT_RANGES = "< 4.4p1 or 8.5p1 <= v < 9.8p1"
JUPYTER_ADVISORIES = (  # (fixed in, advisory) from REFERENCE 2.2
    ("1.0.6", "GHSA-grfj-wjv9-4f9v / CVE-2020-26232 open redirect"),
    ("1.15.4", "GHSA-p737-p57g-4cpr / CVE-2022-24757 tokens in log files"),
    ("1.17.1", "GHSA-q874-g24w-4q9g / CVE-2022-29241 hidden files reachable"),
    ("2.7.2", "GHSA-r726-vmfq-j9j3 / CVE-2023-39968 open redirect"),
    ("2.7.2", "GHSA-64x5-55rw-9974 / CVE-2023-40170 XSSI"),
    ("2.11.2", "GHSA-h56g-gq9v-vc8r / CVE-2023-49080 tracebacks in JSON errors"),
    ("2.14.1", "GHSA-hrw6-wg82-cm62 / CVE-2024-35178 (Windows only)"),
    ("2.18.0", "CVE-2026-40110 allow_origin_pat prefix match (CORS bypass)"),
    ("2.18.0", "GHSA-5mrq-x3x5-8v8f / CVE-2026-40934 cookie secret never rotated"),
    ("2.20.0", "GHSA-fcw5-x6j4-ccmp stored XSS via nbconvert handler"),
)
JUPYTER_UNRELEASED = "GHSA-c3mw-737p-c7g2 (token leak via Referer) is fixed in no release yet"
JUPYTER_PROXY_FIXED = (("3.2.3", "4.0.0"), ("4.1.1", None))  # CVE-2024-28179: fixed 3.2.3 and 4.1.1

FIX = {
    "ctk": "role nvidia_container_toolkit: nvidia_container_toolkit_version >= 1.17.8-1 "
           "(default) with nvidia_container_toolkit_enforce_floor: true",
    "openssh": "not upgraded by gpufleet: apt-get install --only-upgrade openssh-server from the distro's "
               "security archive (interim: LoginGraceTime 0 through role ssh_hardening)",
    "jupyter_server": "role jupyter: its pinned jupyter_server (>= 2.20.0) replaces the image's",
    "jupyter_proxy": "remove jupyter-server-proxy or upgrade it to >= 4.1.1 (role jupyter does not install it)",
    "extra_index": "role torch installs from one index or the wheelhouse (torch_pip_index_url / "
                   "torch_pip_wheelhouse) with PIP_CONFIG_FILE=/dev/null; remove extra-index-url from %s",
    "jupyter_public": "role jupyter: binds to loopback (reach it through an SSH tunnel) or serves TLS",
    "password_ssh": "role ssh_hardening: PasswordAuthentication no, KbdInteractiveAuthentication no "
                    "(checked with sshd -T)",
}


# ----------------------------------------------------------------------------- small helpers
def _d(value):
    return value if isinstance(value, dict) else {}


def _l(value):
    return value if isinstance(value, list) else []


def version_key(text):
    """"9.2p1" -> (9, 2, 0, 1); "1.17.8-1" -> (1, 17, 8, 0, 1); "2.5.1+cu121" -> (2, 5, 1). None if unreadable."""
    if not isinstance(text, str):
        return None
    text = text.split(":", 1)[-1] if re.match(r"^\d+:", text) else text
    m = re.match(r"^(\d+(?:\.\d+)*)(?:p(\d+))?(?:[-~](\d+))?", text.strip())
    if not m:
        return None
    nums = [int(x) for x in m.group(1).split(".")]
    while len(nums) < 3:
        nums.append(0)
    return tuple(nums) + (int(m.group(2) or 0), int(m.group(3) or 0))


def deb_compare(a, b):
    """``dpkg --compare-versions`` as -1, 0 or 1: epoch:upstream-revision, "~" before anything (even the end),
    so "1:9.2p1-2+deb12u10" > "1:9.2p1-2+deb12u3" and "1:8.9p1-3ubuntu0.10" > "1:8.9p1-3ubuntu0.7".
    None when either is not a Debian version string. The one comparison for package versions here
    (gpufleet.ctk's implementation of dpkg's algorithm)."""
    try:
        return _ctk.compare_versions(a, b)
    except _ctk.VersionError:
        return None


def ssh_upstream(text):
    """The portable OpenSSH version in ``ssh -V`` text or a package version: "1:9.2p1-2+deb12u10" -> "9.2p1".
    An OpenBSD-style "9.2" (``sshd -V`` on Debian) reads as its first portable release, "9.2p1". None if none."""
    m = re.match(r"^(?:\d+:)?(\d+\.\d+(?:\.\d+)?)(p\d+)?", text.strip()) if isinstance(text, str) else None
    return m.group(1) + (m.group(2) or "p1") if m else None


def expected_gpu_count(result):
    """The GPU count the host was rented with (the result's ``expected_gpu_count``, from the inventory's
    gpufleet_expected_gpu_count): a number, also from numeric text; None when unset or unreadable."""
    value = _d(result).get("expected_gpu_count")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return value


def is_cpu_host(result):
    """True for a CPU host by intent: expected_gpu_count is 0."""
    return expected_gpu_count(result) == 0


def _worst(statuses):
    statuses = list(statuses)
    return max(statuses, key=lambda s: _WORST[s]) if statuses else "unknown"


def _item(status, summary, reason=None, **extra):
    out = {"status": status, "summary": summary, "reason": reason}
    out.update(extra)
    return out


def _unknown(reason):
    return _item("unknown", reason, reason)


# Answers shared by every host that lacks the same fact (read only: the report never changes them).
_NO_DOCTOR = _unknown("no doctor evidence about torch (run the doctor)")
_NO_READINESS = {
    "access": _unknown("readiness probes not run (gpu_facts readiness: false or an older gpufleet)"),
    "packages": _unknown("no venv facts (readiness probes not run)"),
    "monitoring": _unknown("no monitoring facts (readiness probes not run)"),
    "security": _unknown("readiness probes not run"),
}


def _doctor_torch(doctor):
    doctor = _d(doctor)
    torch = _d(doctor.get("evidence")).get("torch")
    if torch is None:
        torch = doctor.get("torch")
    return torch if isinstance(torch, dict) else None


def _no_torch(doctor):
    """The answer where there is no torch evidence: the doctor's own word when it ran and found none."""
    skipped = _d(_d(doctor).get("evidence")).get("torch_skipped")
    if isinstance(skipped, str) and skipped:
        return _unknown("no torch to check: %s" % skipped)
    return _NO_DOCTOR


def _cuda_tuple(text):
    m = re.match(r"^(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def cudnn_text(value):
    """torch.backends.cudnn.version(): 90100 -> "9.1.0", 8902 -> "8.9.2"."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return None
    if value >= 10000:
        return "%d.%d.%d" % (value // 10000, value // 100 % 100, value % 100)
    return "%d.%d.%d" % (value // 1000, value // 100 % 10, value % 100)


# ----------------------------------------------------------------------------- items 1, 2, 7 (doctor)
def torch_cuda(torch, facts, cpu_host=False):
    if torch is None:
        return _NO_DOCTOR
    if not torch.get("importable"):
        return _item("fail", "torch not importable: %s" % (torch.get("import_error") or torch.get("error") or "?"))
    version = torch.get("version") or "?"
    if cpu_host and not torch.get("cuda"):
        return _item("ok", "torch %s is a CPU build, as intended for a CPU host" % version)
    if cpu_host:
        return _item("warn", "torch %s is a CUDA build (CUDA %s) on a CPU host: it runs on the CPU and carries "
                             "unused CUDA libraries (role torch: torch_cuda_variant: cpu)" % (version, torch["cuda"]))
    if not torch.get("cuda"):
        return _item("fail", "torch %s is a CPU build (torch.version.cuda is None)" % version)
    driver_cuda = facts.get("cuda_driver_version")
    text = "torch %s (CUDA %s), driver %s supports CUDA %s" % (
        version, torch["cuda"], facts.get("driver_version") or "?", driver_cuda or "?")
    if torch.get("is_available") is False:
        return _item("fail", text + "; torch.cuda.is_available() is False: %s" % (
            torch.get("error") or torch.get("warning") or "see the doctor's findings"))
    built, drv = _cuda_tuple(torch["cuda"]), _cuda_tuple(driver_cuda)
    if built and drv and built[0] > drv[0]:
        return _item("fail", text + "; the driver is a major CUDA version behind the build")
    count = torch.get("device_count")
    gpus = facts.get("gpu_count")
    if isinstance(count, int) and isinstance(gpus, int) and count < gpus:
        return _item("warn", text + "; torch sees %d of %d GPUs (CUDA_VISIBLE_DEVICES?)" % (count, gpus))
    if built and drv and built > drv:
        return _item("warn", text + "; runs only through CUDA minor version compatibility (PTX JIT may fail)")
    if torch.get("is_available") is None:
        return _item("unknown", text + "; is_available not reported", "torch.cuda.is_available() not reported")
    return _item("ok", text + "; %s GPU(s) usable" % (count if count is not None else "?"))


_CPU_HOST = {  # the items that only GPUs need, on a CPU host by intent (read only)
    "cudnn": _item("ok", "not needed on a CPU host (cuDNN is a GPU library)"),
    "capacity": _item("ok", "CPU host: no GPU memory; models run in host memory"),
    "features": _item("ok", "CPU host: no GPU compute capability to check"),
    "monitoring": _item("ok", "CPU host: no GPU exporter needed"),
}


def cudnn(torch, cpu_host=False):
    if cpu_host:
        return _CPU_HOST["cudnn"]
    if torch is None:
        return _NO_DOCTOR
    if not torch.get("importable") or not torch.get("cuda"):
        return _item("fail", "no CUDA torch, so no cuDNN through torch")
    if "cudnn_version" not in torch:
        return _unknown("the doctor did not report torch.backends.cudnn.version()")
    text = cudnn_text(torch.get("cudnn_version"))
    if text is None:
        return _item("fail", "torch.backends.cudnn.version() is None: cuDNN not loadable by torch")
    if torch.get("is_available") is False:
        return _item("warn", "cuDNN %s ships with torch, but CUDA is not usable" % text)
    return _item("ok", "cuDNN %s loadable by torch" % text)


def multi_gpu(torch, facts, host, count, link=None, cpu_host=False):
    if cpu_host and not count:
        shm = host.get("shm_size_mib")
        return _item("ok", "CPU host: NCCL and multi-GPU not needed" + (
            "; /dev/shm %d MiB" % shm if isinstance(shm, int) else ""))  # noqa: S108 - report text
    parts, statuses = [], []
    shm = host.get("shm_size_mib")
    if isinstance(shm, int):
        ok = shm >= SHM_MIN_MIB
        parts.append("/dev/shm %d MiB%s" % (  # noqa: S108 - report text, no file is made
            shm, "" if ok else " (< %d MiB: NCCL and DataLoader fail)" % SHM_MIN_MIB))
        statuses.append("ok" if ok else ("fail" if count > 1 else "warn"))
    else:
        parts.append("/dev/shm size unknown")  # noqa: S108 - report text
        statuses.append("unknown")
    mem = host.get("memlock_limit_kib")
    if mem == "unlimited" or isinstance(mem, int) and mem < 0:
        parts.append("memlock unlimited")
        statuses.append("ok")
    elif isinstance(mem, int):
        parts.append("memlock %d KiB (NCCL/RDMA want unlimited)" % mem)
        statuses.append("warn")
    else:
        parts.append("memlock unknown")
        statuses.append("unknown")
    if torch is None:
        parts.append("NCCL/torchrun unknown (no doctor evidence)")
        statuses.append("unknown")
    else:
        nccl = torch.get("nccl_version")
        parts.append("NCCL %s" % nccl if nccl else "no NCCL in torch")
        parts.append("torchrun %s" % ("present" if torch.get("torchrun") else "missing"))
        statuses.append("ok" if nccl and torch.get("torchrun") else ("fail" if count > 1 else "warn"))
    if count > 1:
        link = link or capacity.interconnect_of(facts.get("gpus"))
        parts.append({"nvlink": "NVLink between all GPUs", "pcie": "PCIe only between GPUs (no NVLink)",
                      "unknown": "NVLink unknown"}.get(link, link))
        statuses.append({"nvlink": "ok", "pcie": "warn"}.get(link, "unknown"))
    else:
        parts.append("%d GPU" % count)
    status = _worst(statuses)
    if count <= 1 and status == "fail":
        status = "warn"
    return _item(status, "; ".join(parts), None if status != "unknown" else "some multi-GPU facts missing")


# ----------------------------------------------------------------------------- items 3 and 4
_CAPACITY_CACHE = {}


def capacity_item(facts, link=None):
    """(item, advice): advice is shared between hosts with the same GPUs (read only)."""
    gpus = [g for g in _l(facts.get("gpus")) if isinstance(g, dict)]
    mems = tuple(g.get("memory_total_mib") for g in gpus)
    key = (mems if len(set(mems)) > 1 else (mems[:1], len(mems)), link or capacity.interconnect_of(gpus))
    hit = _CAPACITY_CACHE.get(key)
    if hit is not None:
        return hit
    advice = capacity.for_host(gpus)
    if advice.get("status") != "ok":
        hit = (_unknown(advice["reason"]), None)
    else:
        hit = (_item("ok", capacity.summary_text(advice), largest={
            w["key"]: [w["max_b_one_gpu"], w["max_b_all_gpus"]] for w in advice["workloads"]}), advice)
    if len(_CAPACITY_CACHE) < 10000:
        _CAPACITY_CACHE[key] = hit
    return hit


def features_item(facts):
    texts = {}
    statuses = []
    seen = {}
    for g in _l(facts.get("gpus")):
        if not isinstance(g, dict):
            continue
        key = (g.get("name"), g.get("compute_capability"))
        try:
            if key in seen:
                statuses.append(seen[key])
                continue
        except TypeError:  # unhashable odd input
            key = repr(key)
        m = features.for_cc(g.get("compute_capability"))
        name = "%s (CC %s)" % (g.get("name") or "GPU", g.get("compute_capability") or "?")
        if name not in texts:
            texts[name] = features.cell(g.get("compute_capability"))
        if m.get("status") != "ok":
            statuses.append("unknown")
        elif m["pinned_wheel"]["kernels"] is False:
            statuses.append("warn")
        else:
            statuses.append("ok")
        seen[key] = statuses[-1]
    if not statuses:
        return _unknown("no GPU listed in the facts")
    status = _worst(statuses)
    return _item(status, "; ".join("%s: %s" % kv for kv in texts.items()),
                 "compute capability not reported" if status == "unknown" else None)


# ----------------------------------------------------------------------------- items 5, 6, 8, 9
def access(readiness, findings):
    listeners = _d(readiness.get("listeners"))
    sockets = [s for s in _l(listeners.get("sockets")) if isinstance(s, dict)]
    sshd = _d(readiness.get("sshd"))
    config = _d(sshd.get("config"))
    parts = []
    ssh_ports = {int(p) for p in _l(config.get("port")) if str(p).isdigit()} or {22}
    ssh_socks = [s for s in sockets if s.get("process") == "sshd" or s.get("port") in ssh_ports]
    if ssh_socks:
        pw = config.get("passwordauthentication")
        parts.append("SSH on %s (%s)" % (",".join(sorted({str(s["port"]) for s in ssh_socks})),
                                         "password login %s" % pw if pw else "auth settings unknown"))
    elif listeners.get("readable"):
        parts.append("no SSH listener seen")
    jup = [s for s in sockets if s.get("jupyter")]
    for s in jup:
        parts.append("Jupyter public on %s:%s (%s)" % (s.get("address"), s.get("port"),
                                                       {"tls": "TLS", "plain": "plain HTTP, no TLS"}.get(
                                                           s.get("tls"), "TLS unknown")))
    if listeners.get("readable") and not jup:
        parts.append("no public Jupyter" + ("" if listeners.get("owners_readable") else
                                            " (socket owners not readable: not root?)"))
    if not listeners.get("readable") and not sshd:
        return _unknown("no listening-socket facts (readiness probes not run)")
    codes = {f["code"]: f for f in findings}
    if "jupyter_public_plain" in codes:
        status = "fail"
    elif "password_ssh" in codes:
        status = "warn"
    elif ssh_socks or jup:
        status = "ok"
    else:
        status = "unknown"
    return _item(status, "; ".join(parts), None if status != "unknown" else "no SSH or Jupyter listener identified")


def image(facts, readiness, count):
    host = _d(facts.get("host"))
    if not host:
        return _unknown("no host context in the facts")
    os_ = _d(host.get("os"))
    venv = _d(readiness.get("venv"))
    where = host.get("container_kind") if host.get("container") else (host.get("virtualization") or "bare metal")
    parts = ["%s" % (os_.get("pretty_name") or os_.get("id") or "OS unknown"),
             "kernel %s" % (host.get("kernel") or "?"),
             "Python %s (venv)" % venv["python"] if venv.get("python") else "gpufleet venv Python unknown",
             "%s %s" % ("container" if host.get("container") else "host", where or ""),
             "init %s" % (host.get("init_system") or "?")]
    statuses = []
    cpu = _d(host.get("cpu"))
    cores = cpu.get("quota") or cpu.get("count")
    if isinstance(cores, (int, float)) and count:
        per = cores / float(count)
        parts.append("%.1f CPU cores per GPU" % per)
        statuses.append("ok" if per >= CPU_PER_GPU_MIN else "warn")
    for disk in _l(readiness.get("disks")):
        free = disk.get("free_gib")
        text = "%s %s GiB free" % (disk.get("path"), "?" if free is None else free)
        kind = {True: "local SSD", False: "not local SSD"}.get(disk.get("local_ssd"))
        text += " (%s%s)" % (disk.get("fstype") or "?", ", " + kind if kind else "")
        parts.append(text)
        if disk.get("path") == "/" and isinstance(free, (int, float)):
            statuses.append("ok" if free >= ROOT_FREE_MIN_GIB else "warn")
        if disk.get("network") or disk.get("local_ssd") is False and disk.get("path") != "/":
            statuses.append("warn")
    if not readiness:
        parts.append("disk facts unknown (readiness probes not run)")
    return _item(_worst(statuses) if statuses else "ok", "; ".join(parts))


def packages(readiness):
    """The packages of the environment the facts listed: gpufleet's venv, or the renter's environment the torch
    role acted on (playbooks/facts.yml hands gpu_facts torch_target's venv or conda prefix), named when it is not
    gpufleet's."""
    venv = _d(readiness.get("venv"))
    if not venv:
        return _unknown("no venv facts (readiness probes not run)")
    renter = venv.get("path") not in (None, GPUFLEET_VENV)
    if not venv.get("exists"):
        if renter:
            return _item("warn", "environment %s absent (the torch target of the last run)" % venv.get("path"))
        return _item("warn", "gpufleet venv %s absent: install it with the torch role" % venv.get("path"))
    pkgs = _d(venv.get("packages"))
    have = ["%s %s" % (n, pkgs[n]) for n in WANTED_PACKAGES if n in pkgs]
    missing = [n for n in WANTED_PACKAGES if n not in pkgs]
    text = ", ".join(have) or "none of %s" % ", ".join(WANTED_PACKAGES)
    if renter:
        text = "in %s: %s" % (venv["path"], text)
    if missing:
        text += "; missing: %s (role torch: torch_extra_packages)" % ", ".join(missing)
    return _item("ok" if not missing else ("warn" if "torch" in pkgs else "fail"), text)


def monitoring(readiness, cpu_host=False):
    if cpu_host:
        return _CPU_HOST["monitoring"]
    mon = _d(readiness.get("monitoring"))
    if not mon:
        return _unknown("no monitoring facts (readiness probes not run)")
    age = mon.get("textfile_age_s")
    prog = mon.get("program")
    parts = []
    if age is None:
        # What was seen, not why: the role may have run and its exporter failed to write (permissions ...).
        path = mon.get("textfile") or "?"
        why = str(mon.get("reason") or "not found")
        if why.startswith(path):
            why = why[len(path):].strip() or "not found"
        parts.append("no exporter textfile at %s (%s); the gpu_monitoring role writes it" % (path, why))
        status = "fail"
    elif age <= TEXTFILE_MAX_AGE_S:
        parts.append("textfile fresh (%d s old)" % age)
        status = "ok"
    else:
        parts.append("textfile stale (%d s old)" % age)
        status = "warn"
    if prog:
        parts.append("gpufleet-gpu-exporter %s" % prog)
        if prog != "RUNNING":
            status = _worst([status, "warn"])
    else:
        parts.append("exporter program not seen in supervisord")
    return _item(status, "; ".join(parts))


# ----------------------------------------------------------------------------- item 10: security
def _finding(code, severity, status, message, fix, source=None, evidence=None):
    out = {"code": code, "severity": severity, "status": status, "message": message, "fix": fix, "source": source}
    if evidence:
        out["evidence"] = evidence  # which evidence decided: distro table, package changelog, upstream version
    return out


def _ssh_release(os_release, package):
    """((ID, VERSION_ID), where from): os-release first; without it a Debian stable-update suffix
    ("+deb12u10") or an Ubuntu one ("ubuntu0.22.04.1") of the package names the release."""
    os_ = _d(os_release)
    if os_.get("id"):
        return (str(os_["id"]).lower(), str(os_.get("version_id") or "")), "os-release"
    m = re.search(r"\+deb(\d+)u\d+", package or "")
    if m:
        return ("debian", m.group(1)), "package suffix +deb%su" % m.group(1)
    m = re.search(r"ubuntu0\.(\d\d\.\d\d)\b", package or "")
    if m:
        return ("ubuntu", m.group(1)), "package suffix ubuntu0.%s" % m.group(1)
    return None, None


def _in_upstream_range(upstream):
    """True/False for a portable version against SSH_UPSTREAM_AFFECTED; None if unreadable."""
    hits = []
    for low, high in SSH_UPSTREAM_AFFECTED:
        above = 0 if low is None else deb_compare(upstream, low)
        below = deb_compare(upstream, high)
        if above is None or below is None:
            return None
        hits.append(above >= 0 and below < 0)
    return any(hits)


def regresshion(sshd, os_release=None):
    """The CVE-2024-6387 verdict for ``readiness["sshd"]`` on a host with this os-release.

    Returns {"verdict": fixed | not_affected | affected | unverified | unknown, "evidence": distro table |
    package changelog | upstream version | None, "text": one line, "source": where the floor comes from}.
    Order: the distro row for the host's release (SSH_DISTRO_FIXED, package version in dpkg order); else the
    package's changelog.Debian.gz naming the CVE (``sshd["changelog"]["cves"]``, when the facts carry it);
    else the upstream ranges, where a distro package in range is "unverified" (its changelog not naming
    the CVE does not prove it vulnerable: Debian's own fix, deb12u3, does not name it) and a build
    without a package is "affected".
    """
    sshd = _d(sshd)
    ver, pkg = sshd.get("version"), sshd.get("package_version")
    pkg = pkg if isinstance(pkg, str) and deb_compare(pkg, pkg) == 0 else None
    upstream = ssh_upstream(ver) or ssh_upstream(pkg)
    what = "OpenSSH %s" % (ver or upstream or "?") + (" (package %s)" % pkg if pkg else "")
    release, release_from = _ssh_release(os_release, pkg)
    row = SSH_DISTRO_FIXED.get(release) if release else None
    if row and pkg:
        where = "%s, %s" % (row["name"], row["ref"])
        if deb_compare(pkg, row["fixed"]) >= 0:
            return {"verdict": "fixed", "evidence": "distro table", "source": row["source"],
                    "text": "%s has the %s fix: >= %s (%s; release from %s)" % (
                        what, SSH_CVE, row["fixed"], where, release_from)}
        if _in_upstream_range(ssh_upstream(pkg)) is False:
            return {"verdict": "not_affected", "evidence": "upstream version", "source": SSH_SOURCE,
                    "text": "%s is below %s's fixed %s but its upstream %s is outside the %s ranges (%s)" % (
                        what, row["name"], row["fixed"], ssh_upstream(pkg), SSH_CVE, SSH_TEXT_RANGES)}
        return {"verdict": "affected", "evidence": "distro table", "source": row["source"],
                "text": "%s < %s, the first fixed package for %s (%s)" % (what, row["fixed"], SSH_CVE, where)}
    changelog = _d(sshd.get("changelog"))
    cves, cl_path, cl_version = changelog.get("cves"), changelog.get("path"), changelog.get("version")
    note = "no changelog.Debian.gz fact"
    if isinstance(cves, list):
        same = not (cl_version and pkg) or deb_compare(cl_version, pkg) == 0
        if SSH_CVE in cves and same:
            return {"verdict": "fixed", "evidence": "package changelog", "source": "%s (%s)" % (cl_path, SSH_CVE),
                    "text": "%s has the %s fix: its changelog %s names it (no distro row for %s)" % (
                        what, SSH_CVE, cl_path, "%s %s" % release if release else "an unknown release")}
        note = ("changelog %s is of %s, not of the installed package" % (cl_path, cl_version) if not same else
                "changelog %s does not name %s" % (cl_path, SSH_CVE))
    elif changelog.get("reason"):
        note = "changelog not read: %s" % changelog["reason"]
    in_range = _in_upstream_range(upstream) if upstream else None
    if in_range is None:
        return {"verdict": "unknown", "evidence": None, "source": SSH_SOURCE,
                "text": "OpenSSH version not known (%s)" % (ver or "not reported")}
    if not in_range:
        return {"verdict": "not_affected", "evidence": "upstream version", "source": SSH_SOURCE,
                "text": "%s outside the %s ranges (%s)" % (what, SSH_CVE, SSH_TEXT_RANGES)}
    if pkg:
        return {"verdict": "unverified", "evidence": "upstream version", "source": SSH_SOURCE,
                "text": "%s is in the %s range (%s); the package may carry a backported fix: no fixed-version "
                        "row for %s and %s; check the distro's advisory" % (
                            what, SSH_CVE, SSH_TEXT_RANGES,
                            "%s %s" % release if release else "an unknown release", note)}
    return {"verdict": "affected", "evidence": "upstream version", "source": SSH_SOURCE,
            "text": "%s is in the %s range (%s), not from a distro package" % (what, SSH_CVE, SSH_TEXT_RANGES)}


def security(readiness, container=None, os_release=None):
    """Security findings (affected, unverified or unknown) and the checks that passed.

    ``os_release`` is the host's ``host.os`` fact ({id, version_id, ...}): it picks the distro row of a floor."""
    findings, passed, unknown = [], [], []
    ctk = _d(readiness.get("container_toolkit"))
    if readiness.get("dpkg_readable") is False:
        unknown.append("package versions (dpkg-query not available)")
    elif not ctk:
        passed.append("NVIDIA container toolkit not installed%s" % (" (inside a container)" if container else ""))
    else:
        order = {p: deb_compare(v, CTK_FLOOR) for p, v in ctk.items()}
        low = {p: ctk[p] for p, c in order.items() if c is not None and c < 0}
        odd = sorted("%s %s" % (p, ctk[p]) for p, c in order.items() if c is None)
        if odd:
            unknown.append("container toolkit version not a Debian version: %s" % ", ".join(odd))
        if low:
            findings.append(_finding("ctk_below_floor", "critical", "affected", "NVIDIA container toolkit %s < %s" % (
                ", ".join("%s %s" % kv for kv in sorted(low.items())), CTK_FLOOR), FIX["ctk"], CTK_SOURCE))
        elif not odd:
            passed.append("NVIDIA container toolkit >= %s" % CTK_FLOOR)
        if len(set(ctk.values())) > 1:
            findings.append(_finding("ctk_versions_differ", "warning", "affected",
                                     "container toolkit packages at different versions: %s" % ", ".join(
                                         "%s %s" % kv for kv in sorted(ctk.items())), FIX["ctk"],
                                     REFERENCE + " 4.2 (all four packages at one version)"))
    sshd = _d(readiness.get("sshd"))
    ssh = regresshion(sshd, os_release)
    if ssh["verdict"] in ("fixed", "not_affected"):
        passed.append("%s [evidence: %s]" % (ssh["text"], ssh["evidence"]))
    elif ssh["verdict"] == "unknown":
        unknown.append("OpenSSH version")
    else:
        findings.append(_finding("openssh_regresshion", "critical" if ssh["verdict"] == "affected" else "warning",
                                 ssh["verdict"], "%s [evidence: %s]" % (ssh["text"], ssh["evidence"]),
                                 FIX["openssh"], ssh["source"], evidence=ssh["evidence"]))
    pkgs = _d(_d(readiness.get("venv")).get("packages"))
    js = pkgs.get("jupyter-server")
    if js:
        open_ = [adv for fixed, adv in JUPYTER_ADVISORIES if (version_key(js) or (0,)) < version_key(fixed)]
        if open_:
            findings.append(_finding("jupyter_server_advisories", "critical" if len(open_) > 2 else "warning",
                                     "affected", "jupyter_server %s: %d published advisories: %s" % (
                                         js, len(open_), "; ".join(open_)), FIX["jupyter_server"],
                                     REFERENCE + " 2.2"))
        else:
            passed.append("jupyter_server %s (%s)" % (js, JUPYTER_UNRELEASED))
    proxy = pkgs.get("jupyter-server-proxy")
    if proxy and version_key(proxy):
        pk = version_key(proxy)
        fixed = any(version_key(lo) <= pk and (hi is None or pk < version_key(hi)) for lo, hi in JUPYTER_PROXY_FIXED)
        if not fixed:
            findings.append(_finding("jupyter_server_proxy", "critical", "affected",
                                     "jupyter-server-proxy %s: CVE-2024-28179 (websocket proxy without auth)" % proxy,
                                     FIX["jupyter_proxy"], REFERENCE + " 2.2"))
    pip = _d(readiness.get("pip"))
    extra = [(f.get("path"), u) for f in _l(pip.get("files")) for u in _l(_d(f).get("extra_index_url"))]
    if _d(pip.get("env")).get("PIP_EXTRA_INDEX_URL"):
        extra.append(("PIP_EXTRA_INDEX_URL", pip["env"]["PIP_EXTRA_INDEX_URL"]))
    if extra and "torch" in pkgs:
        findings.append(_finding(
            "torch_extra_index", "warning", "unverified",
            "pip on this host adds an extra index (%s): torch %s and its dependencies may have come from either "
            "index (dependency confusion, torchtriton Dec 2022)" % (
                "; ".join("%s: %s" % e for e in extra), pkgs["torch"]),
            FIX["extra_index"] % ", ".join(sorted({e[0] for e in extra})), REFERENCE + " 5.1-5.2"))
    elif extra:
        passed.append("extra pip index configured, but no torch in the gpufleet venv")
    elif pip:
        passed.append("no extra pip index")
    listeners = _d(readiness.get("listeners"))
    for s in _l(listeners.get("sockets")):
        if not _d(s).get("jupyter"):
            continue
        where = "%s:%s" % (s.get("address"), s.get("port"))
        if s.get("tls") == "plain":
            findings.append(_finding("jupyter_public_plain", "critical", "affected",
                                     "Jupyter listens publicly on %s without TLS" % where, FIX["jupyter_public"],
                                     REFERENCE + " 2.1 (binding, TLS)"))
        elif s.get("tls") is None:
            findings.append(_finding("jupyter_public_tls_unknown", "warning", "unknown",
                                     "Jupyter listens publicly on %s; TLS not checked" % where,
                                     FIX["jupyter_public"], REFERENCE + " 2.1"))
    if not listeners.get("readable"):
        unknown.append("listening sockets")
    config = _d(sshd.get("config"))
    if config:
        pw = config.get("passwordauthentication")
        kbd = config.get("kbdinteractiveauthentication")
        if pw == "yes" or kbd == "yes":
            findings.append(_finding("password_ssh", "warning", "affected",
                                     "sshd -T: passwordauthentication %s, kbdinteractiveauthentication %s" % (pw, kbd),
                                     FIX["password_ssh"], REFERENCE + " 1.5 and 1.8"))
        else:
            passed.append("SSH password login off (sshd -T)")
    else:
        unknown.append("sshd effective config (%s)" % (sshd.get("reason") or "not read"))
    return {"findings": findings, "passed": passed, "unknown": unknown}


def security_item(audit):
    sev = {f["severity"] for f in audit["findings"]}
    affected = [f for f in audit["findings"] if f["status"] == "affected"]
    if "critical" in sev and affected:
        status = "fail"
    elif audit["findings"]:
        status = "warn"
    elif audit["unknown"] and not audit["passed"]:
        status = "unknown"
    else:
        status = "ok"
    parts = [f["message"] for f in audit["findings"]] or ["no finding"]
    if audit["unknown"]:
        parts.append("not checked: %s" % ", ".join(audit["unknown"]))
    return _item(status, "; ".join(parts), "nothing could be checked" if status == "unknown" else None,
                 findings=audit["findings"], passed=audit["passed"])


# ----------------------------------------------------------------------------- item 11: torch advisories
# Where a host result carries its torch version, best first: what the doctor imported in the target Python, the
# environment the pre-check judged (scripts/find-python reads torch/version.py without importing it), the gpufleet
# venv's dist-info (gpu_facts readiness). The gate's torch_version is in its module return, not in the facts the
# report reads, so it is not a source here.
TORCH_VERSION_SOURCES = ("doctor", "check", "venv")
_TORCH_SOURCE_TEXT = {"doctor": "the doctor's torch probe", "check": "the pre-check's environment",
                      "venv": "the gpufleet venv"}
_NO_TORCH_REASON = ("no torch version in the doctor's evidence, the pre-check's environments or the gpufleet venv's "
                    "packages")
_ADVISORY_CACHE = {}


def _torch_candidates(result):
    """(source, where, version text) for each place in the result that names a torch version, best first."""
    torch = _doctor_torch(result.get("doctor"))
    if torch is not None and torch.get("version") is not None:
        yield "doctor", None, torch.get("version")
    check = _d(result.get("check"))
    python = check.get("torch_python") or _d(check.get("judged")).get("python")
    if isinstance(python, str) and python:
        for env in _l(check.get("environments")):
            if isinstance(env, dict) and env.get("python") == python and env.get("torch") is not None:
                yield "check", python, env.get("torch")
                break
    venv = _d(_d(_d(result.get("gpu")).get("readiness")).get("venv"))
    version = _d(venv.get("packages")).get("torch")
    if version is not None:
        path = venv.get("path")
        yield "venv", path if isinstance(path, str) else "", version


def torch_version_of(result):
    """{"version", "source", "where", "unreadable"} of the host's torch: the first readable version of
    ``_torch_candidates`` (version None when there is none); ``unreadable`` lists the version texts that are not
    versions (a crashed probe's null is not one: it names no version)."""
    unreadable = []
    for source, where, version in _torch_candidates(_d(result)):
        if isinstance(version, str) and _torch_advisories.version_key(version) is not None:
            return {"version": version.strip(), "source": source, "where": where, "unreadable": unreadable}
        unreadable.append("%s: %r" % (_source_text(source, where), (version,)[0]))
    return {"version": None, "source": None, "where": None, "unreadable": unreadable}


def _source_text(source, where):
    return _TORCH_SOURCE_TEXT[source] + (" %s" % where if where else "")


def _torch_fix(fixed):
    default = torchcompat.DEFAULT_TORCH
    note = " (its default %s is affected)" % default if _torch_advisories.advisories(default) else ""
    return ("upgrade torch to >= %s where it is installed; for the gpufleet venv, role torch: torch_version >= %s "
            "with a torch_cuda_variant that release has%s" % (fixed, fixed, note))


def _advisory_answer(version, source, where):
    found = _torch_advisories.advisories(version)
    said = "version from %s" % _source_text(source, where)
    if not found:
        known = ", ".join("%s (fixed in %s)" % (a["id"], a["fixed"]) for a in _torch_advisories.ADVISORIES)
        return _item("ok", "torch %s: no open advisory among those checked: %s; %s" % (
            version, known, said), torch_version=version, version_from=source, advisories=[])
    fixed = max((a["fixed"] for a in found), key=_torch_advisories.version_key)
    risk = " torch.load of untrusted files;" if all("torch.load" in a["summary"] for a in found) else ""
    summary = "torch %s: %s:%s upgrade to >= %s; %s" % (
        version, ", ".join("%s (fixed in %s)" % (a["id"], a["fixed"]) for a in found), risk, fixed, said)
    return _item("warn", summary, torch_version=version, version_from=source, advisories=found,
                 fix=_torch_fix(fixed))


def torch_advisories_item(result):
    """Item 11: the host's torch (``torch_version_of``) against ``torch_advisories``. warn when an advisory is
    open (never fail: an advisory is a risk of loading untrusted files, not a broken box), ok when none is,
    unknown when no torch version is known ("no torch found to check", with the doctor's own word if it ran)."""
    got = torch_version_of(result)
    version = got["version"]
    if version is None:
        if got["unreadable"]:
            reason = "torch version not readable (%s)" % "; ".join(got["unreadable"])
            return _item("unknown", "no torch version to check: %s" % reason, reason)
        skipped = _d(_d(_d(result).get("doctor")).get("evidence")).get("torch_skipped")
        reason = _NO_TORCH_REASON + (" (doctor: %s)" % skipped if isinstance(skipped, str) and skipped else "")
        return _item("unknown", "no torch found to check: %s" % reason, reason)
    key = (version, got["source"], got["where"])
    hit = _ADVISORY_CACHE.get(key)
    if hit is None:
        hit = _advisory_answer(version, got["source"], got["where"])
        if len(_ADVISORY_CACHE) < 10000:
            _ADVISORY_CACHE[key] = hit
    return hit


# ----------------------------------------------------------------------------- doctor findings in the checklist
# The renter's-check findings of the doctor (doctor_rules.py) that answer a checklist question, by item. A finding
# turns its item to fail (critical) or warn (warning) and adds its message; the host's verdict comes from the same
# findings through the report's action. Other doctor findings (a broken CUDA stack, Xid, ECC) are the host's status.
DOCTOR_ITEMS = {
    "container_lost_gpus": "torch_cuda",
    "gpu_recovery_action": "torch_cuda",
    "gpu_used_by_another_tenant": "capacity",
    "gpu_partitioned": "capacity",
    "provider_claim_mismatch": "capacity",
    "cpu_quota_below_visible_cpus": "image",
    "pids_max_low": "image",
    "shm_too_small": "multi_gpu",
}
_DOCTOR_STATUS = {"critical": "fail", "error": "fail", "warning": "warn"}
_REMEDY_WORDS = {"fixable": "fix here", "restart_container": "restart the container", "reboot": "reboot",
                 "provider": "return to provider"}


def _gpus_text(ev, what):
    return ", ".join("GPU %s %s" % (g.get("gpu"), what(g)) for g in _l(ev.get("gpus")) if isinstance(g, dict))


def _share(g):
    if g.get("kind") == "mig":
        return "is a MIG slice"
    frac = g.get("fraction")
    return "has %s of its memory" % ("%d %%" % round(frac * 100) if isinstance(frac, (int, float)) else "a part")


def _claim(m):
    found = ", ".join(map(str, _l(m.get("found")))) or m.get("found")
    return "%s listed %s, found %s" % (m.get("what"), m.get("claimed"), found)


def _claims(ev):
    return ", ".join(_claim(m) for m in _l(ev.get("mismatches")) if isinstance(m, dict))


# One short line of evidence per code (the doctor's evidence; the finding's meaning and remedy are in its table).
_DOCTOR_TEXT = {
    "container_lost_gpus": lambda ev: "the container lost its GPUs (%s)" % (
        ev.get("nvml_error") or ", ".join("%s %s" % kv for kv in sorted(_d(ev.get("open_denied")).items()))),
    "gpu_recovery_action": lambda ev: "NVML recovery action: " + _gpus_text(
        ev, lambda g: "%s (%s)" % (g.get("name"), g.get("renter_action"))),
    "gpu_used_by_another_tenant": lambda ev: "another tenant: " + _gpus_text(ev, lambda g: g.get("why") or "in use"),
    "gpu_partitioned": lambda ev: "not a whole GPU: " + _gpus_text(ev, _share),
    "provider_claim_mismatch": lambda ev: "%s listing: %s" % (ev.get("provider") or "provider", _claims(ev)),
    "cpu_quota_below_visible_cpus": lambda ev: "CPU quota %s of %s visible CPUs; set OMP_NUM_THREADS=%s" % (
        ev.get("cpu_quota"), ev.get("visible_cpus"), ev.get("suggested_threads")),
    "pids_max_low": lambda ev: "pids.max %s (< %s)" % (ev.get("pids_max"), ev.get("threshold")),
    "shm_too_small": lambda ev: "/dev/shm %s MiB (< %s MiB)" % (ev.get("shm_size_mib"), ev.get("minimum_mib")),  # noqa: S108
}


def _doctor_text(f):
    try:
        return _DOCTOR_TEXT[f["code"]](_d(f.get("evidence")))
    except (TypeError, ValueError, AttributeError):  # odd evidence: the finding's own words
        return f.get("message") or f.get("meaning") or "no evidence"


def _doctor_findings(doctor):
    return [f for f in _l(_d(doctor).get("findings")) if isinstance(f, dict) and f.get("code") in DOCTOR_ITEMS]


def _fold_doctor(out, doctor):
    """Raise each item a renter's-check finding answers; the finding's text and remedy join its summary."""
    for f in _doctor_findings(doctor):
        key = DOCTOR_ITEMS[f["code"]]
        status = _DOCTOR_STATUS.get(f.get("severity"))
        item = out.get(key)
        if status is None or not isinstance(item, dict):
            continue
        text = "doctor %s: %s (%s)" % (f["code"], _doctor_text(f),
                                       _REMEDY_WORDS.get(f.get("remedy_class"), f.get("remedy_class") or "?"))
        said = "/dev/shm" in (item.get("summary") or "")  # noqa: S108 - report text
        if f["code"] == "shm_too_small" and said and _WORST.get(item.get("status"), 1) >= _WORST[status]:
            text = None  # the item already says it from the same fact (SHM_MIN_MIB)
        merged = dict(item)  # items may be shared read-only answers: never change one in place
        merged["status"] = _worst([item.get("status") if item.get("status") in _WORST else "unknown", status])
        if merged["status"] != "unknown":
            merged["reason"] = None
        merged["summary"] = "; ".join(x for x in (item.get("summary"), text) if x)
        merged["doctor_codes"] = list(item.get("doctor_codes", ())) + [f["code"]]
        out[key] = merged
    return out


# ----------------------------------------------------------------------------- the checklist
def checklist(result):
    """The eleven items for one per-host result (see the module docstring). Never raises on odd data."""
    cpu_host = is_cpu_host(result)
    facts = _d(result.get("gpu"))
    readiness = _d(facts.get("readiness"))
    torch = _doctor_torch(result.get("doctor"))
    host = _d(facts.get("host"))
    gpus = [g for g in _l(facts.get("gpus")) if isinstance(g, dict)]
    count = len(gpus) or (facts.get("gpu_count") if isinstance(facts.get("gpu_count"), int) else 0)
    if not facts:
        reason = "no GPU facts in the result"
        out = {key: _unknown(reason) for key, _unused in ITEMS}
        if torch is not None:
            out["torch_cuda"] = torch_cuda(torch, facts, cpu_host)
            out["cudnn"] = cudnn(torch, cpu_host)
        out["torch_advisories"] = torch_advisories_item(result)
        return _fold_doctor(out, result.get("doctor"))
    link = capacity.interconnect_of(gpus)
    no_gpu = cpu_host and not gpus  # a CPU host by intent that shows none: GPU questions do not apply
    out = {
        "torch_cuda": torch_cuda(torch, facts, cpu_host),
        "cudnn": cudnn(torch, cpu_host),
        "capacity": _CPU_HOST["capacity"] if no_gpu else capacity_item(facts, link)[0],
        "features": _CPU_HOST["features"] if no_gpu else features_item(facts),
        "access": None,
        "image": image(facts, readiness, count),
        "multi_gpu": multi_gpu(torch, facts, host, count, link, cpu_host),
    }
    if readiness:
        audit = security(readiness, host.get("container"), host.get("os"))
        out.update(access=access(readiness, audit["findings"]), packages=packages(readiness),
                   monitoring=monitoring(readiness, cpu_host), security=security_item(audit))
    else:
        out.update(_NO_READINESS)
        if cpu_host:
            out["monitoring"] = _CPU_HOST["monitoring"]
    if torch is None:
        out["torch_cuda"] = _no_torch(result.get("doctor"))
        if not cpu_host:
            out["cudnn"] = out["torch_cuda"]
    out["torch_advisories"] = torch_advisories_item(result)  # after security, in ITEMS' order
    return _fold_doctor(out, result.get("doctor"))
