"""Assemble the gpufleet GPU facts: NVML or nvidia-smi, host context, Xid events, health summary.

``collect`` never raises. Its inputs are injected (pynvml module, an nvidia-smi runner, file
readers, the kernel log text) so the whole path runs in tests on recorded data.
"""

import os
import time

from ..system import hostctx, hostenv, hostnet, hostready, kmsg
from . import nvml, nvsmi

SCHEMA = 1

# Error codes that mean "the GPU stack is broken here" (CUDA cannot work): health failed.
BROKEN_CODES = {
    "driver_library_mismatch", "driver_not_reachable", "driver_not_loaded", "no_devices",
    "device_handle_error", "gpu_lost", "gpu_reset_required", "corrupted_inforom", "no_gpu_stack",
}
# Error codes after which nothing is known about the GPUs: health unknown.
# (anything not in BROKEN_CODES is treated this way)

# Throttle reasons that point at hardware protection kicking in (gpu-performance.md section 3.2:
# gpud flags HW slowdown; DCGM targeted_power fails on clock drops).
THROTTLE_WARN = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")

# A GPU this hot at rest or under a short check is near its slowdown point (most data-centre and
# GeForce parts start slowing down between 87 and 95 C; nvidia-smi -q "GPU Slowdown Temp").
HIGH_TEMPERATURE_C = 85

# A throttled box sold as full. An enforced power limit under 90 % of the board's default (NVML
# nvmlDeviceGetPowerManagementDefaultLimit, nvidia-smi <default_power_limit>): the floor the lium.io
# validator enforces on rented GPUs (Datura-ai/lium-io PR 1071: raised from 80 % to 90 % of the NVML
# default because "a 20 % reduction measurably degrades renter performance"; a trim of up to 10 % is
# tolerated). Seen for real: tests/fixtures/nvidia_smi_xml/telegraf_rtx-3090-v12.xml, an RTX 3090 at 200 W of
# its 350 W default (57 %); every other capture has enforced == default, or above (an RTX 3080 at 336 of 320 W).
POWER_LIMIT_MIN_RATIO = 0.9
# Clocks held low by a clocks setting: the SM application clock (nvidia-smi -ac) under 90 % of the board's
# default application clock, or, with the clocks event reason "applications_clocks_setting" active, the SM
# clock under 90 % of the default application clock (the max SM clock where that is not reported). The
# same 10 % margin as the power limit; no board's default is below it (the A100 SXM4's default application
# clock is 90.4 % of its max: 1275 of 1410 MHz, tests/fixtures/nvidia_smi_xml/telegraf_a100-sxm4-v12.xml).
# Sources for what the event reason means: NVML API reference, nvmlClocksEventReasonApplicationsClocksSetting
# ("GPU clocks are limited by current setting of applications clocks", see nvmlDeviceSetApplicationsClocks;
# https://docs.nvidia.com/deploy/archive/R550/nvml-api/group__nvmlClocksEventReasons.html; the current
# reference words it "Clocks are set to application-specific values") and nvidia-smi --help-query-gpu
# ("clocks_event_reasons.applications_clocks_setting: GPU clocks are limited by applications clocks setting.
# E.g. can be changed by nvidia-smi --applications-clocks=", as quoted in netdata/netdata issue 10362).
# Locked clocks (nvidia-smi -lgc, nvmlDeviceSetGpuLockedClocks) have no getter that we found in the NVML
# reference, and NVIDIA's documentation does not say which event reason they raise; we found no capture of a
# -lgc box. So -lgc is caught when the driver reports it through that reason (the one reason that names a
# clocks setting), otherwise only by the gate's measured TFLOPS. Drivers from R590 on report applications
# clocks as deprecated (590.44 .. 610.57 in the captures): None here, and only the event reason is left.
CLOCKS_MIN_RATIO = 0.9

_XID_SEVERITY = {"critical": "critical", "warning": "warning", "app": "info", "unknown": "info"}


def _default_read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(1 << 20)
    except OSError:
        return None


def _default_statvfs(path):
    try:
        return os.statvfs(path)
    except OSError:
        return None


def _default_getrlimit():
    import resource

    return resource.getrlimit(resource.RLIMIT_MEMLOCK)


def _rlim_infinity():
    try:
        import resource

        return resource.RLIM_INFINITY
    except ImportError:  # pragma: no cover - non-POSIX
        return -1


def _default_listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return None


def _default_readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def _default_stat(path):
    try:
        return os.stat(path)
    except OSError:
        return None


def run_smi(run_nvidia_smi, include_processes):
    """Run nvidia-smi through the injected callable and parse; never raises."""
    if run_nvidia_smi is None:
        return nvsmi.empty_facts(source="none", error="nvidia-smi runner not given", error_code="nvidia_smi_missing")
    try:
        result = run_nvidia_smi()
    except Exception as exc:
        return nvsmi.empty_facts(error="running nvidia-smi failed: %s" % exc, error_code="nvidia_smi_failed")
    if result is None:
        return nvsmi.empty_facts(source="none", error="nvidia-smi not found", error_code="nvidia_smi_missing")
    rc, out, err = result
    if rc == 127:
        return nvsmi.empty_facts(source="none", error="nvidia-smi not found: %s" % nvsmi.decode(err)[0].strip(),
                                 error_code="nvidia_smi_missing")
    if rc == 124:
        return nvsmi.empty_facts(error="nvidia-smi timed out", error_code="nvidia_smi_timeout")
    return nvsmi.parse_output(rc, out, err, include_processes=include_processes)


def gpu_facts(pynvml=None, run_nvidia_smi=None, prefer="auto", include_processes=False):
    """GPU part of the facts: NVML first (unless prefer="nvidia-smi"), the other as fallback."""
    order = ["nvidia-smi", "nvml"] if prefer == "nvidia-smi" else ["nvml", "nvidia-smi"]
    attempts = []
    results = []
    for method in order:
        if method == "nvml":
            result = nvml.collect(pynvml, include_processes=include_processes)
        else:
            result = run_smi(run_nvidia_smi, include_processes)
        attempts.append({"source": method, "error_code": result["error_code"], "error": result["error"]})
        results.append(result)
        if not result["error"]:
            break
    chosen = next((r for r in results if not r["error"]), None)
    if chosen is None:
        # Prefer a result that says something about the GPU (driver mismatch) over "tool missing".
        informative = [r for r in results if r["error_code"] not in (
            "pynvml_missing", "nvml_library_not_found", "nvidia_smi_missing")]
        chosen = informative[0] if informative else results[0]
        if not informative:
            chosen["source"] = "none"
    chosen["attempts"] = attempts
    if len(attempts) > 1 and chosen is results[-1] and not chosen["error"]:
        chosen["warnings"].append("%s failed (%s), facts came from %s" % (
            attempts[0]["source"], attempts[0]["error_code"], attempts[-1]["source"]))
    return chosen


# Errors that NVML and nvidia-smi give when nothing better is known. Seen for real: Debian's
# libnvidia-ml1 in a container with no kernel driver fails nvmlInit with "Unknown Error" (999).
VAGUE_CODES = ("nvml_unknown_error", "nvml_error", "unknown")
DRIVER_PROC_FILE = "/proc/driver/nvidia/version"


TOOL_MISSING_CODES = ("pynvml_missing", "nvml_library_not_found", "nvidia_smi_missing")
GPU_TRACES = (DRIVER_PROC_FILE, "/dev/nvidiactl", "/dev/nvidia0")


def explain_without_driver(facts, exists):
    """Say what the absence of the driver means when NVML and nvidia-smi only say something vague.

    "Unknown Error" with no driver proc file: the kernel driver is not loaded. Nothing found at all
    (no bindings, library or nvidia-smi, and no device node or driver): there is no GPU stack here.
    """
    if not facts.get("error"):
        return
    if facts.get("error_code") in VAGUE_CODES and not exists(DRIVER_PROC_FILE):
        facts["error"] = "%s; %s is absent, so the NVIDIA kernel driver is not loaded" % (
            facts["error"], DRIVER_PROC_FILE)
        facts["error_code"] = "driver_not_loaded"
    elif facts.get("error_code") in TOOL_MISSING_CODES and not any(exists(p) for p in GPU_TRACES):
        facts["error"] = ("no NVIDIA device node, kernel driver or tools on this host "
                          "(a CPU-only host, or a container started without GPUs); %s" % facts["error"])
        facts["error_code"] = "no_gpu_stack"


def kernel_log_facts(kernel_log):
    """``kernel_log``: None (not read), or {"text", "source"}, or {"readable": False, "source", "reason"}, or a
    callable that returns one of those (read now: ``collect`` calls this after the GPU and host reads)."""
    if callable(kernel_log):
        kernel_log = kernel_log()
    if kernel_log is None:
        return kmsg.unreadable(None, "kernel log not read (kernel_log disabled)")
    if kernel_log.get("text") is None:
        return kmsg.unreadable(kernel_log.get("source"), kernel_log.get("reason") or "kernel log unreadable")
    return kmsg.parse_kernel_log(kernel_log["text"], kernel_log.get("source"))


def _finding(findings, code, severity, gpu_index, message, **extra):
    item = {"code": code, "severity": severity, "gpu_index": gpu_index, "message": message}
    item.update(extra)
    findings.append(item)


def health(facts, expected_gpu_count=None):
    """Health summary from assembled facts: status and findings."""
    findings = []
    error_code = facts.get("error_code")
    if facts.get("error"):
        if error_code in BROKEN_CODES:
            _finding(findings, "gpu_stack_broken", "critical", None,
                     "GPU stack broken (%s): %s" % (error_code, facts["error"]), error_code=error_code)
        else:
            _finding(findings, "gpu_facts_unavailable", "unknown", None,
                     "GPU facts unavailable (%s): %s" % (error_code, facts["error"]), error_code=error_code)
    elif facts.get("gpu_count", 0) == 0:
        _finding(findings, "no_gpus", "critical", None, "no GPU visible to %s" % facts.get("source"))
    if expected_gpu_count is not None and not facts.get("error") and facts.get("gpu_count", 0) < expected_gpu_count:
        _finding(findings, "gpu_count_low", "critical", None,
                 "%d GPU(s) visible, %d expected" % (facts.get("gpu_count", 0), expected_gpu_count))

    by_pci = {}
    for gpu in facts.get("gpus", []):
        idx = gpu.get("index")
        by_pci[kmsg.normalize_pci(gpu.get("pci_bus_id"))] = idx
        _gpu_findings(findings, gpu, idx)

    xid = facts.get("xid") or {}
    if xid and not xid.get("readable", True):
        _finding(findings, "kernel_log_unreadable", "info", None,
                 "kernel log not checked for Xid errors: %s" % xid.get("reason"))
    grouped = {}
    for ev in xid.get("events", []):
        key = (ev["xid"], ev.get("pci"))
        grouped.setdefault(key, []).append(ev)
    for (code, pci), events in sorted(grouped.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        sev = _XID_SEVERITY.get(events[0]["severity"], "info")
        total = xid.get("counts_by_pci", {}).get("%d@%s" % (code, pci), len(events))
        _finding(findings, "xid_%d" % code, sev, by_pci.get(pci),
                 "Xid %d (%s) on PCI %s, %d line(s); last: %s" % (code, events[0]["name"], pci, total,
                                                                  events[-1]["text"][:160]),
                 pci=pci, count=total)

    severities = {f["severity"] for f in findings}
    if "critical" in severities:
        status = "failed"
    elif "unknown" in severities:
        status = "unknown"
    elif "warning" in severities:
        status = "degraded"
    else:
        status = "ok"
    return {"status": status, "findings": findings}


def _gpu_findings(findings, gpu, idx):
    name = gpu.get("name") or "GPU"
    if gpu.get("lost"):
        _finding(findings, "gpu_lost", "critical", idx, "%s %d is lost (NVML)" % (name, idx))
    if gpu.get("reset_required"):
        _finding(findings, "gpu_reset_required", "critical", idx, "%s %d reports reset required" % (name, idx))
    pcie = gpu.get("pcie") or {}
    if pcie.get("width_current") is not None and pcie.get("width_max") is not None \
            and pcie["width_current"] < pcie["width_max"]:
        _finding(findings, "pcie_width_below_max", "warning", idx, "PCIe link x%d, device supports x%d" % (
            pcie["width_current"], pcie["width_max"]))
    if pcie.get("gen_current") is not None and pcie.get("gen_max") is not None \
            and pcie["gen_current"] < pcie["gen_max"]:
        _finding(findings, "pcie_gen_below_max", "info", idx,
                 "PCIe gen %d of max %d (idle GPUs downtrain the link; check again under load)" % (
                     pcie["gen_current"], pcie["gen_max"]))
    ecc = gpu.get("ecc") or {}
    if (ecc.get("volatile_uncorrected") or 0) > 0:
        _finding(findings, "ecc_uncorrectable_volatile", "critical", idx,
                 "%d uncorrectable ECC error(s) since the last driver load" % ecc["volatile_uncorrected"])
    elif (ecc.get("aggregate_uncorrected") or 0) > 0:
        _finding(findings, "ecc_uncorrectable_aggregate", "warning", idx,
                 "%d uncorrectable ECC error(s) over the GPU's lifetime" % ecc["aggregate_uncorrected"])
    pages = gpu.get("retired_pages") or {}
    if pages.get("pending"):
        _finding(findings, "retired_pages_pending", "warning", idx, "page retirement pending: the GPU needs a reset")
    rows = gpu.get("remapped_rows") or {}
    if rows.get("failure"):
        _finding(findings, "row_remap_failure", "critical", idx, "row remapping failed: the GPU needs replacing")
    if rows.get("pending"):
        _finding(findings, "row_remap_pending", "warning", idx,
                 "row remapping pending (%s uncorrectable): the GPU needs a reset" % rows.get("uncorrectable"))
    active = [r for r in gpu.get("throttle_reasons") or [] if r in THROTTLE_WARN]
    if active:
        _finding(findings, "clocks_throttled_hw", "warning", idx, "clock slowdown active (%s): %s" % (
            _held_at(gpu), ", ".join(active)), reasons=active)
    temperature = gpu.get("temperature_c")
    if isinstance(temperature, (int, float)) and temperature >= HIGH_TEMPERATURE_C:
        _finding(findings, "high_temperature", "warning", idx,
                 "GPU at %s C (>= %d C): check cooling before trusting benchmark figures" % (
                     temperature, HIGH_TEMPERATURE_C))
    if gpu.get("persistence_mode") is False:
        _finding(findings, "persistence_mode_off", "info", idx, "persistence mode is off")
    nvlink = gpu.get("nvlink") or {}
    active_links = nvlink.get("links_active") or 0
    # PCIe cards without the optional NVLink bridge show every link inactive: that is no fault.
    bridgeless = active_links == 0 and (gpu.get("spec") or {}).get("form_factor") != "SXM"
    if nvlink.get("links_total") and active_links < nvlink["links_total"] and not bridgeless:
        _finding(findings, "nvlink_links_down", "warning", idx, "%s of %s NVLink links active" % (
            nvlink.get("links_active"), nvlink["links_total"]))
    lowered = _power_limit_lowered(findings, gpu, idx)
    spec = gpu.get("spec") or {}
    # Against the spec table only where the board's own default is unknown (the spec row may be another
    # board of the same name): information, since the default is the better evidence.
    if not lowered and spec.get("power_w") and gpu.get("power_limit_w") \
            and gpu["power_limit_w"] < 0.9 * spec["power_w"]:
        _finding(findings, "power_limit_below_spec", "info", idx, "power limit %.0f W, spec %s W" % (
            gpu["power_limit_w"], spec["power_w"]))
    _clocks_locked_low(findings, gpu, idx)


def _held_at(gpu):
    """The temperature and the SM clock a slowed-down GPU is held at, in numbers: "89 C, SM 1100 of 2520 MHz"."""
    parts = []
    temperature = _number(gpu.get("temperature_c"))
    if temperature is not None:
        parts.append("%.0f C" % temperature)
    clocks = gpu.get("clocks") or {}
    sm, sm_max = _number(clocks.get("sm_mhz")), _number(clocks.get("sm_max_mhz"))
    if sm is not None:
        parts.append("SM %.0f of %.0f MHz" % (sm, sm_max) if sm_max is not None else "SM %.0f MHz" % sm)
    return ", ".join(parts) or "temperature and clocks not read"


def _number(value):
    """A positive number, or None (missing, zero, or not a number: never a finding)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return value


def _power_limit_lowered(findings, gpu, idx):
    """Warn when the enforced power limit is under POWER_LIMIT_MIN_RATIO of the board's default."""
    limit, default = _number(gpu.get("power_limit_w")), _number(gpu.get("power_default_limit_w"))
    if limit is None or default is None or limit >= POWER_LIMIT_MIN_RATIO * default:
        return False
    _finding(findings, "power_limit_lowered", "warning", idx,
             "power limit %.0f W, default %.0f W (%.0f%%)" % (limit, default, 100.0 * limit / default),
             power_limit_w=limit, power_default_limit_w=default)
    return True


def _clocks_locked_low(findings, gpu, idx):
    """Warn when a clocks setting holds the SM clock under CLOCKS_MIN_RATIO of its default."""
    clocks = gpu.get("clocks")
    clocks = clocks if isinstance(clocks, dict) else {}
    applications = gpu.get("applications_clocks")
    applications = applications if isinstance(applications, dict) else {}
    app, default_app = _number(applications.get("sm_mhz")), _number(applications.get("sm_default_mhz"))
    if app is not None and default_app is not None and app < CLOCKS_MIN_RATIO * default_app:
        _finding(findings, "clocks_locked_low", "warning", idx,
                 "SM application clock %d MHz, default %d MHz" % (app, default_app),
                 sm_application_mhz=app, sm_default_application_mhz=default_app)
        return
    # Applications clocks at their default (or not reported) and yet the clock held by a clocks setting:
    # a lock that does not change them (nvidia-smi -lgc leaves applications clocks as they are).
    if "applications_clocks_setting" not in (gpu.get("throttle_reasons") or []):
        return
    current = _number(clocks.get("sm_mhz"))
    reference = default_app if default_app is not None else _number(clocks.get("sm_max_mhz"))
    if current is not None and reference is not None and current < CLOCKS_MIN_RATIO * reference:
        _finding(findings, "clocks_locked_low", "warning", idx,
                 "SM clock %d MHz held by a clocks setting (applications clocks setting active), %s %d MHz" % (
                     current, "default" if default_app is not None else "max", reference),
                 sm_mhz=current, reference_mhz=reference)


def planned_commands(kernel_log=True, readiness=None, exists=os.path.exists):
    """The commands a gathering will run, slowest first, for ``hostctx.Prefetch`` to start together.

    The readiness probes' (when ``readiness`` is given: the ``collect(readiness=...)`` dict), then
    dmesg (the module reads the kernel log when ``kernel_log``) and systemd-detect-virt. Fallbacks
    (journalctl when dmesg fails, /usr/sbin/sshd -T, nvidia-smi) run only when asked for.
    """
    cmds = hostready.readiness_commands(exists, readiness.get("geteuid")) if readiness is not None else []
    if kernel_log:
        cmds.append(list(kmsg.DMESG))
    cmds += [list(argv) for argv in hostenv.HOST_COMMANDS]
    return cmds


def iso_utc(seconds):
    """Epoch seconds -> "2026-12-01T20:51:03Z" (ISO 8601, UTC, whole seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(seconds)))


def default_readiness(venv=hostctx.GPUFLEET_VENV, data_dirs=hostready.DATA_DIRS, tls=True):
    """Keyword arguments for ``collect(readiness=...)`` that read this machine."""
    return {"listdir": _default_listdir, "readlink": _default_readlink, "stat": _default_stat,
            "environ": dict(os.environ), "geteuid": os.geteuid, "probe_tls": hostnet.tls_probe if tls else None,
            "now": time.time, "venv": venv, "data_dirs": tuple(data_dirs)}


def collect(pynvml=None, run_nvidia_smi=None, read_file=_default_read, exists=os.path.exists, run=None,
            statvfs=_default_statvfs, getrlimit=_default_getrlimit, kernel_log=None, prefer="auto",
            include_processes=False, expected_gpu_count=None, uname_release=None, clock=time.monotonic,
            readiness=None, wall_clock=time.time):
    """All GPU facts for one host. Never raises; problems end up in ``error``/``warnings``.

    ``collected_at`` is when the reading started, from ``wall_clock()`` (epoch seconds), as
    ``iso_utc`` writes it. ``run(argv)`` runs the host and readiness commands (``hostctx.Prefetch``
    over ``hostctx.command_runner`` in the module: see ``planned_commands``).

    ``kernel_log``: see ``kernel_log_facts``; a callable (the module's reader) runs after NVML,
    so that dmesg has run alongside it.

    ``readiness``: None skips the readiness probes (``facts["readiness"]`` is then None), or a dict
    of keyword arguments for ``hostready.collect_readiness`` beyond the readers given here (listdir,
    readlink, stat, environ, geteuid, probe_tls, now, venv, data_dirs); see ``default_readiness``.
    """
    start = clock()
    try:
        collected_at = iso_utc(wall_clock())
    except Exception:  # defensive: a broken clock must not cost the facts
        collected_at = None
    try:
        facts = gpu_facts(pynvml, run_nvidia_smi, prefer, include_processes)
    except Exception as exc:  # defensive
        facts = nvsmi.empty_facts(source="none", error="gpu facts failed: %r" % exc, error_code="internal_error")
    facts["schema"] = SCHEMA
    facts["collected_at"] = collected_at
    try:
        explain_without_driver(facts, exists)
    except Exception as exc:  # defensive
        facts["warnings"].append("driver check failed: %r" % exc)
    try:
        facts["host"] = hostenv.collect_host(read_file, exists, run=run, statvfs=statvfs, getrlimit=getrlimit,
                                             rlim_infinity=_rlim_infinity(), uname_release=uname_release)
    except Exception as exc:  # defensive
        facts["host"] = None
        facts["warnings"].append("host context failed: %r" % exc)
    facts["readiness"] = None
    if readiness is not None:
        try:
            facts["readiness"] = hostready.collect_readiness(read_file, exists, run=run, statvfs=statvfs, **readiness)
        except Exception as exc:  # defensive
            facts["warnings"].append("readiness probes failed: %r" % exc)
    try:
        facts["xid"] = kernel_log_facts(kernel_log)
    except Exception as exc:  # defensive
        facts["xid"] = kmsg.unreadable(None, "kernel log parse failed: %r" % exc)
    try:
        facts["health"] = health(facts, expected_gpu_count)
    except Exception as exc:  # defensive
        facts["health"] = {"status": "unknown", "findings": [
            {"code": "health_failed", "severity": "unknown", "gpu_index": None, "message": repr(exc)}]}
    facts["duration_s"] = round(clock() - start, 3)
    return facts
