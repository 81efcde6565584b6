#!/usr/bin/env python3
"""gpufleet GPU exporter: NVML readings in Prometheus text format for node_exporter's textfile collector.

Every ``--interval`` seconds it reads each GPU through NVML (the ``pynvml`` module of nvidia-ml-py)
and replaces ``<textfile-dir>/gpufleet_gpu.prom`` atomically (prometheus_client's textfile writer: a
temporary file in the same folder, then rename). With ``--http-port`` it also serves the same
readings on a loopback address only (prometheus_client's HTTP server). A scrape returns the last
pass; it never waits for NVML.

It never dies of an NVML failure: a missing library, no driver or a lost GPU give
``gpufleet_gpu_up 0`` / ``gpufleet_gpu_scrape_error 1`` with the error code, logged once per
change, and the next pass tries again. Xid counts come from the kernel log (``/dev/kmsg`` or a log
file) where it is readable; where not, ``gpufleet_gpu_kernel_log_readable 0`` says so and no Xid
series is written. Metric names and labels are the exporter's half of the schema in docs/metrics.md.
Part of the gpufleet ``gpu_monitoring`` role; stdlib + nvidia-ml-py + prometheus_client.
"""

import argparse
import errno
import ipaddress
import os
import re
import signal
import sys
import threading
import time

try:
    from prometheus_client import CollectorRegistry, generate_latest, start_http_server, write_to_textfile
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
except ImportError as _exc:  # reported by main() with the fix; the module still imports for --help
    PROMETHEUS_CLIENT_ERROR = str(_exc)
else:
    PROMETHEUS_CLIENT_ERROR = None

VERSION = "1.1.0"
PREFIX = "gpufleet_gpu_"
FILE_NAME = "gpufleet_gpu.prom"
MAX_LOG_BYTES = 32 * 1024 * 1024  # a kernel log file is read from its last 32 MiB at most
XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?\): (\d+)")
GPU_LABELS = ("gpu", "uuid", "name")
G = GPU_LABELS

# The plain per-GPU gauges (labels GPU_LABELS), name -> help, in the order METRICS writes them.
GPU_GAUGES = {
    "device_up": "1 when the GPU answered NVML, 0 when it did not (e.g. fallen off the bus).",
    "utilization_ratio": "Share of the last sample period a kernel ran on the GPU (0-1).",
    "memory_utilization_ratio": "Share of the last sample period device memory was read or written (0-1).",
    "memory_used_bytes": "GPU memory in use, reserved memory included, in bytes.",
    "memory_total_bytes": "GPU memory installed, in bytes.",
    "temperature_celsius": "GPU core temperature in degrees Celsius.",
    "power_draw_watts": "Power the board draws now, in watts.",
    "power_limit_watts": "Power limit the driver enforces, in watts.",
    "sm_clock_hertz": "Current SM clock in hertz.",
    "sm_clock_max_hertz": "Maximum SM clock in hertz.",
    "memory_clock_hertz": "Current memory clock in hertz.",
    "pcie_link_generation": "Current PCIe link generation (drops at idle to save power).",
    "pcie_link_max_generation": "Highest PCIe link generation this GPU and its slot allow.",
    "pcie_link_width": "Current PCIe link width in lanes.",
    "pcie_link_max_width": "Widest PCIe link this GPU and its slot allow, in lanes.",
}

# name -> (type, labels, help). Every metric the exporter can write, with its whole label set (the
# exporter's rows of the table in docs/metrics.md; a test compares the two). A family is written
# only when it has samples, with HELP/TYPE once per name.
METRICS = {
    "up": ("gauge", (), "1 when NVML answered and every GPU was read in the last pass, else 0."),
    "scrape_error": ("gauge", (), "1 when the last pass failed in part or whole (see gpufleet_gpu_scrape_error_info)."),
    "scrape_error_info": ("gauge", ("code", "message"),
                          "Error of the last pass, by code (snake_case) and message; 1 while it lasts."),
    "last_scrape_timestamp_seconds": ("gauge", (), "Unix time the last pass finished."),
    "scrape_duration_seconds": ("gauge", (), "Seconds the last pass took."),
    "exporter_info": ("gauge", ("version", "driver_version", "nvml_version", "cuda_driver_version"),
                      "Exporter, driver and NVML versions as labels; always 1."),
    "exporter_interval_seconds": ("gauge", (), "Seconds between two passes (--interval); staleness is judged by it."),
    "devices": ("gauge", (), "GPUs NVML counts, lost ones included."),
    "expected_devices": ("gauge", (), "GPUs rented on this host (--expected-gpus); absent when not given."),
    **{name: ("gauge", G, help_text) for name, help_text in GPU_GAUGES.items()},
    "clock_event_reason": ("gauge", G + ("reason",), "1 when this clocks event (throttle) reason is active, else 0."),
    "ecc_errors_total": ("counter", G + ("error_type", "counter"),
                         "ECC errors, by error_type (corrected, uncorrected) and counter (volatile, aggregate)."),
    "retired_pages": ("gauge", G + ("cause",), "Memory pages retired, by cause (single_bit_ecc, double_bit_ecc)."),
    "retired_pages_pending": ("gauge", G, "1 when a page retirement waits for the next reset."),
    "remapped_rows": ("gauge", G + ("kind",), "Memory rows remapped, by kind (correctable, uncorrectable)."),
    "remapped_rows_pending": ("gauge", G, "1 when a row remap waits for the next reset."),
    "remapped_rows_failure": ("gauge", G, "1 when a row remap has failed (the GPU needs service)."),
    "kernel_log_readable": ("gauge", ("source",),
                            "1 when the kernel log was read for Xid errors, else 0 (no Xid series then)."),
    "xid_errors_total": ("counter", G + ("xid", "pci_bus_id"),
                         "NVRM Xid errors seen in the kernel log, by xid and the PCI address it names."),
}


def snake(name):
    """CamelCase -> snake_case (pynvml's class and constant names)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def error_code(exc):
    """A short snake_case code for an exception: NVMLError_DriverNotLoaded -> driver_not_loaded."""
    name = type(exc).__name__
    if name.startswith("NVMLError_"):
        return snake(name[len("NVMLError_"):])
    if name == "NVMLError":
        return "nvml_error_%s" % getattr(exc, "value", "unknown")
    return snake(name)


def clock_event_reasons(nv):
    """(bit, name) of each single clocks event reason pynvml knows, e.g. (0x4, 'sw_power_cap')."""
    found = {}
    for attr in sorted(dir(nv)):
        for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
            if not attr.startswith(prefix):
                continue
            name = attr[len(prefix):]
            bit = getattr(nv, attr)
            if name in ("All", "None", "UserDefinedClocks") or not isinstance(bit, int) or bit & (bit - 1) or not bit:
                continue
            found.setdefault(bit, snake(name))
    return sorted(found.items())


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _pci_key(bus_id):
    """'00000000:19:00.0' or '0000:19:00' -> '19:00' with the domain as a number: '0:19:00'."""
    parts = _text(bus_id).strip().lower().split(":")
    if len(parts) < 3:
        return _text(bus_id).lower()
    return "%x:%s:%s" % (int(parts[0] or "0", 16), parts[1], parts[2].split(".")[0])


class Sample:
    __slots__ = ("name", "labels", "value")

    def __init__(self, name, labels, value):
        self.name, self.labels, self.value = name, labels, value


class KernelLog:
    """Xid counts from /dev/kmsg (read on, record by record) or from a log file (read whole each pass)."""

    def __init__(self, path):
        self.path = path
        self.counts = {}  # (xid, pci) -> count
        self.readable = False
        self.reason = "not read yet"
        self._fd = None

    def poll(self):
        if not self.path:
            self.readable, self.reason = False, "disabled"
            return
        try:
            if self.path == "/dev/kmsg" or self.path.startswith("/dev/"):
                self._poll_kmsg()
            else:
                self._poll_file()
            self.readable, self.reason = True, None
        except OSError as exc:
            self.readable, self.reason = False, "%s: %s" % (self.path, exc.strerror or exc)
            self._close()

    def _close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _count(self, line, counts):
        m = XID_RE.search(line)
        if m:
            key = (int(m.group(2)), m.group(1).lower())
            counts[key] = counts.get(key, 0) + 1

    def _poll_kmsg(self):
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        while True:
            try:
                record = os.read(self._fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    return
                if exc.errno == errno.EPIPE:  # records were overwritten before we read them: go on
                    continue
                raise
            if not record:
                return
            self._count(_text(record).split(";", 1)[-1], self.counts)

    def _poll_file(self):
        counts = {}
        with open(self.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_LOG_BYTES:
                fh.seek(size - MAX_LOG_BYTES)
            for line in fh.read().decode("utf-8", "replace").splitlines():
                if "NVRM" in line:
                    self._count(line, counts)
        self.counts = counts


class Collector:
    """One NVML pass -> a list of Samples. Keeps NVML initialised between passes while it works."""

    def __init__(self, nv, nv_error, kernel_log, interval=15.0, expected_gpus=0):
        self.nv = nv                    # the pynvml module, or None when it cannot be imported
        self.nv_error = nv_error        # why pynvml is missing
        self.kernel_log = kernel_log
        self.interval = interval        # written out, so that a stale-file alert knows what "late" is
        self.expected_gpus = expected_gpus  # GPUs rented here; 0: not known, no series
        self.initialised = False
        self.reasons = clock_event_reasons(nv) if nv is not None else []

    def collect(self):
        started = time.time()
        samples, errors = [], []
        info = {"version": VERSION, "driver_version": "", "nvml_version": "", "cuda_driver_version": ""}
        gpus_by_pci = {}
        if self.nv is None:
            errors.append(("pynvml_missing", self.nv_error))
        else:
            self._collect_nvml(samples, errors, info, gpus_by_pci)
        samples.append(Sample("exporter_info", info, 1))
        samples.append(Sample("exporter_interval_seconds", {}, self.interval))
        if self.expected_gpus:
            samples.append(Sample("expected_devices", {}, self.expected_gpus))
        self._collect_xids(samples, gpus_by_pci)
        samples.append(Sample("up", {}, 0 if errors else 1))
        samples.append(Sample("scrape_error", {}, 1 if errors else 0))
        for code, message in sorted(set(errors)):
            samples.append(Sample("scrape_error_info", {"code": code, "message": message}, 1))
        finished = time.time()
        samples.append(Sample("scrape_duration_seconds", {}, round(finished - started, 6)))
        samples.append(Sample("last_scrape_timestamp_seconds", {}, round(finished, 3)))
        return samples, errors

    def _collect_nvml(self, samples, errors, info, gpus_by_pci):
        nv = self.nv
        try:
            if not self.initialised:
                nv.nvmlInit()
                self.initialised = True
            count = nv.nvmlDeviceGetCount()
        except nv.NVMLError as exc:
            self._shutdown()
            errors.append((error_code(exc), str(exc)))
            return
        for key, call in (("driver_version", "nvmlSystemGetDriverVersion"),
                          ("nvml_version", "nvmlSystemGetNVMLVersion"),
                          ("cuda_driver_version", "nvmlSystemGetCudaDriverVersion")):
            value = self._call(call)
            if value is not None:
                info[key] = _text(value)
        samples.append(Sample("devices", {}, count))
        for index in range(count):
            try:
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                labels = {"gpu": str(index), "uuid": _text(nv.nvmlDeviceGetUUID(handle)),
                          "name": _text(nv.nvmlDeviceGetName(handle))}
            except nv.NVMLError as exc:
                errors.append((error_code(exc), "GPU %d: %s" % (index, exc)))
                samples.append(Sample("device_up", {"gpu": str(index), "uuid": "", "name": ""}, 0))
                continue
            samples.append(Sample("device_up", labels, 1))
            pci = self._call("nvmlDeviceGetPciInfo", handle)
            if pci is not None:
                gpus_by_pci[_pci_key(pci.busId)] = labels
            samples.extend(self._gpu(handle, labels))

    def _call(self, name, *args):
        """pynvml.name(*args), or None when the GPU has no such reading (not supported, no function...)."""
        try:
            return getattr(self.nv, name)(*args)
        except (self.nv.NVMLError, AttributeError):
            return None

    def _gpu(self, handle, labels):
        nv, out = self.nv, []

        def put(name, value, scale=1, **extra):
            if value is not None:
                out.append(Sample(name, dict(labels, **extra), value * scale if scale != 1 else value))

        util = self._call("nvmlDeviceGetUtilizationRates", handle)
        if util is not None:
            put("utilization_ratio", util.gpu / 100.0)
            put("memory_utilization_ratio", util.memory / 100.0)
        mem = self._call("nvmlDeviceGetMemoryInfo", handle)
        if mem is not None:
            put("memory_used_bytes", mem.used)
            put("memory_total_bytes", mem.total)
        put("temperature_celsius", self._call("nvmlDeviceGetTemperature", handle, nv.NVML_TEMPERATURE_GPU))
        put("power_draw_watts", self._call("nvmlDeviceGetPowerUsage", handle), 0.001)
        put("power_limit_watts", self._call("nvmlDeviceGetEnforcedPowerLimit", handle), 0.001)
        put("sm_clock_hertz", self._call("nvmlDeviceGetClockInfo", handle, nv.NVML_CLOCK_SM), 1000000)
        put("sm_clock_max_hertz", self._call("nvmlDeviceGetMaxClockInfo", handle, nv.NVML_CLOCK_SM), 1000000)
        put("memory_clock_hertz", self._call("nvmlDeviceGetClockInfo", handle, nv.NVML_CLOCK_MEM), 1000000)
        # The link the slot and the card allow together (not the card's own maximum): below it means
        # a riser, a bad slot or a link that trained down.
        put("pcie_link_generation", self._call("nvmlDeviceGetCurrPcieLinkGeneration", handle))
        put("pcie_link_max_generation", self._call("nvmlDeviceGetMaxPcieLinkGeneration", handle))
        put("pcie_link_width", self._call("nvmlDeviceGetCurrPcieLinkWidth", handle))
        put("pcie_link_max_width", self._call("nvmlDeviceGetMaxPcieLinkWidth", handle))
        mask = self._call("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if mask is None:
            mask = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        if mask is not None:
            for bit, reason in self.reasons:
                put("clock_event_reason", 1 if mask & bit else 0, reason=reason)
        for error_type, etype in (("corrected", nv.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                                  ("uncorrected", nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
            for counter, ctype in (("volatile", nv.NVML_VOLATILE_ECC), ("aggregate", nv.NVML_AGGREGATE_ECC)):
                put("ecc_errors_total", self._call("nvmlDeviceGetTotalEccErrors", handle, etype, ctype),
                    error_type=error_type, counter=counter)
        for cause, ctype in (("single_bit_ecc", nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
                             ("double_bit_ecc", nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)):
            pages = self._call("nvmlDeviceGetRetiredPages", handle, ctype)
            put("retired_pages", None if pages is None else len(pages), cause=cause)
        pending = self._call("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        put("retired_pages_pending", None if pending is None else int(bool(pending)))
        rows = self._call("nvmlDeviceGetRemappedRows", handle)
        if rows is not None:
            put("remapped_rows", rows[0], kind="correctable")
            put("remapped_rows", rows[1], kind="uncorrectable")
            put("remapped_rows_pending", int(bool(rows[2])))
            put("remapped_rows_failure", int(bool(rows[3])))
        return out

    def _collect_xids(self, samples, gpus_by_pci):
        log = self.kernel_log
        log.poll()
        samples.append(Sample("kernel_log_readable", {"source": log.path or ""}, 1 if log.readable else 0))
        if not log.readable:
            return
        for (xid, pci), n in sorted(log.counts.items()):
            gpu = gpus_by_pci.get(_pci_key(pci), {"gpu": "", "uuid": "", "name": ""})
            samples.append(Sample("xid_errors_total", dict(gpu, xid=str(xid), pci_bus_id=pci), n))

    def _shutdown(self):
        if self.initialised:
            try:
                self.nv.nvmlShutdown()
            except self.nv.NVMLError:
                pass
            self.initialised = False


def families(samples):
    """Samples -> prometheus_client metric families, in METRICS order; names without samples are left out.

    A sample whose labels are not exactly its metric's label set in METRICS is a bug here, not
    something to write: it raises ValueError (one name must carry one label set).
    """
    by_name = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s)
    out = []
    for name, (kind, labels, help_text) in METRICS.items():
        if name not in by_name:
            continue
        if kind == "counter":  # prometheus_client adds the _total suffix back to counter samples
            family = CounterMetricFamily(PREFIX + name[:-len("_total")], help_text, labels=labels)
        else:
            family = GaugeMetricFamily(PREFIX + name, help_text, labels=labels)
        for s in by_name[name]:
            if set(s.labels) != set(labels):
                raise ValueError("%s%s: labels %s, expected %s" % (PREFIX, name, sorted(s.labels), list(labels)))
            family.add_metric([str(s.labels[k]) for k in labels], float(s.value))
        out.append(family)
    unknown = sorted(set(by_name) - set(METRICS))
    if unknown:
        raise ValueError("metrics not in METRICS: %s" % ", ".join(unknown))
    return out


class Snapshot:
    """The registry's only collector: the families of the last finished pass. A scrape (file or
    HTTP) reads them as they are, so it never waits for NVML or sees half a pass."""

    def __init__(self, fams=()):
        self.families = list(fams)

    def collect(self):
        return list(self.families)  # one reference read: a pass replaces the whole list at once


def registry_with(snapshot):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(snapshot)
    return registry


def render(samples):
    """Prometheus text exposition format (version 0.0.4), as prometheus_client writes it."""
    return generate_latest(registry_with(Snapshot(families(samples)))).decode("utf-8")


def write_textfile(directory, registry):
    """Replace directory/gpufleet_gpu.prom in one rename (prometheus_client's writer: a temporary file
    named gpufleet_gpu.prom.<pid>.<thread>, which node_exporter skips, then rename); readers never
    see half a file."""
    write_to_textfile(os.path.join(directory, FILE_NAME), registry)


def check_bind(address):
    """Refuse anything but a loopback address: the endpoint has no authentication."""
    if address == "localhost":
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(address).is_loopback:
            return address
    except ValueError:
        pass
    raise ValueError("--http-bind must be a loopback address (127.0.0.0/8, ::1 or localhost), got %r" % address)


def serve(bind, port, registry):
    """Serve REGISTRY on bind:port (prometheus_client's HTTP server, a daemon thread); returns the server."""
    server, _thread = start_http_server(port, addr=bind, registry=registry)
    return server


def load_pynvml():
    try:
        import pynvml
    except ImportError as exc:
        return None, str(exc)
    return pynvml, None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--textfile-dir", default="/var/lib/gpufleet/textfile",
                   help="folder node_exporter's textfile collector reads (absolute)")
    p.add_argument("--interval", type=float, default=15.0, help="seconds between passes (> 0)")
    p.add_argument("--http-port", type=int, default=0, help="serve /metrics on this port too; 0: off")
    p.add_argument("--http-bind", default="127.0.0.1", help="loopback address of the endpoint")
    p.add_argument("--kernel-log", default="/dev/kmsg", help="Xid source: /dev/kmsg or a log file; '' off")
    p.add_argument("--expected-gpus", type=int, default=0,
                   help="GPUs rented on this host (gpufleet_gpu_expected_devices); 0: not known, no series")
    p.add_argument("--once", action="store_true", help="one pass: write the file (or stdout with --stdout), then exit")
    p.add_argument("--stdout", action="store_true", help="with --once, print the text instead of writing the file")
    args = p.parse_args(argv)
    if not args.interval > 0:
        p.error("--interval must be > 0, got %s" % args.interval)
    if not os.path.isabs(args.textfile_dir):
        p.error("--textfile-dir must be an absolute path, got %r" % args.textfile_dir)
    if not 0 <= args.expected_gpus <= 64:
        p.error("--expected-gpus must be 0 (not known) to 64, got %d" % args.expected_gpus)
    if not 0 <= args.http_port < 65536:
        p.error("--http-port must be 0 (off) or 1-65535, got %d" % args.http_port)
    try:
        args.http_bind = check_bind(args.http_bind)
    except ValueError as exc:
        p.error(str(exc))
    return args


def log(message):
    sys.stderr.write("gpufleet-gpu-exporter: %s\n" % message)
    sys.stderr.flush()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if PROMETHEUS_CLIENT_ERROR:
        log("cannot start: prometheus_client is missing (%s); install the pinned prometheus-client into this "
            "venv (the gpu_monitoring role does: gpu_monitoring_prometheus_client_version)" % PROMETHEUS_CLIENT_ERROR)
        return 1
    os.umask(0o022)  # the textfile must be world-readable for node_exporter, whatever umask supervisord gives
    nv, nv_error = load_pynvml()
    collector = Collector(nv, nv_error, KernelLog(args.kernel_log), args.interval, args.expected_gpus)
    snapshot = Snapshot()
    registry = registry_with(snapshot)
    if args.once:
        samples, errors = collector.collect()
        snapshot.families = families(samples)
        if args.stdout:
            sys.stdout.write(generate_latest(registry).decode("utf-8"))
        else:
            write_textfile(args.textfile_dir, registry)
        for code, message in errors:
            log("%s: %s" % (code, message))
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    last_errors, last_log_reason = None, None
    endpoint = ", http://%s:%d/metrics" % (args.http_bind, args.http_port) if args.http_port else ""
    log("started: every %gs into %s/%s%s" % (args.interval, args.textfile_dir, FILE_NAME, endpoint))
    server = None
    while not stop.is_set():
        samples, errors = collector.collect()
        snapshot.families = families(samples)
        try:
            write_textfile(args.textfile_dir, registry)
        except OSError as exc:
            errors = errors + [("textfile_write_failed", str(exc))]
        if server is None and args.http_port:  # after the first pass: never an empty scrape
            server = serve(args.http_bind, args.http_port, registry)
        # Log a failure once when it starts and once when it ends: no log flood while it lasts.
        if errors != last_errors:
            for code, message in errors:
                log("%s: %s (retrying every %gs)" % (code, message, args.interval))
            if not errors and last_errors:
                log("recovered: every GPU read")
            last_errors = errors
        if collector.kernel_log.reason != last_log_reason:
            if collector.kernel_log.reason:
                log("no Xid counts: kernel log %s" % collector.kernel_log.reason)
            last_log_reason = collector.kernel_log.reason
        stop.wait(args.interval)
    if server is not None:
        server.shutdown()
        server.server_close()
    collector._shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
