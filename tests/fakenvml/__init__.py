"""Fake ``libnvidia-ml.so.1``: a test double for GPU hardware, loaded by the real ``pynvml``.

Tests build the library from ``fake_nvml.c`` into a temporary folder and run code that
uses NVML in a subprocess with ``env_for(profile, libdir)`` merged into its environment.
Nothing here is ever installed by a role outside a test. See README.md in this folder.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fake_nvml.c"
PROFILES_DIR = HERE / "profiles"
LIBRARY_NAME = "libnvidia-ml.so.1"
PROFILE_ENV = "GPUFLEET_FAKE_NVML_PROFILE"
# Why a test that loads the fake library is skipped where ``usable`` is False (pytest's skipif reason).
NEEDS = "needs Linux, a C compiler and nvidia-ml-py in the project venv"

CFLAGS = [
    "-std=c99",
    "-O2",
    "-Wall",
    "-Wextra",
    "-shared",
    "-fPIC",
    "-fvisibility=hidden",
    "-Wl,-soname," + LIBRARY_NAME,
]

# Keys the C library reads; validate_profile() flags anything else (typos would
# otherwise silently turn into NVML_ERROR_NOT_SUPPORTED).
PROFILE_KEYS = frozenset(
    [
        "name",
        "simulated",
        "description",
        "sources",
        "notes",
        "init_error",
        "driver_version",
        "nvml_version",
        "cuda_driver_version",
        "errors",
        "unsupported",
        "gpus",
    ]
)
GPU_KEYS = frozenset(
    [
        "lost",
        "errors",
        "unsupported",
        "name",
        "uuid",
        "serial",
        "minor_number",
        "vbios_version",
        "pci",
        "compute_capability",
        "pcie",
        "memory_mib",
        "clocks_mhz",
        "max_clocks_mhz",
        "temperature_c",
        "fan_speed_pct",
        "power_usage_mw",
        "power_limit_mw",
        "enforced_power_limit_mw",
        "default_power_limit_mw",
        "applications_clocks_mhz",
        "default_applications_clocks_mhz",
        "clocks_event_reasons",
        "performance_state",
        "persistence_mode",
        "mig_mode",
        "ecc_mode",
        "ecc_errors",
        "retired_pages",
        "remapped_rows",
        "nvlink",
        "utilization_pct",
        "processes",
        "recovery_action",
    ]
)
SUB_KEYS = {
    "pci": {"bus_id", "device_id", "subsystem_id"},
    "pcie": {"curr_gen", "max_gen", "gpu_max_gen", "curr_width", "max_width", "replay_counter"},
    "memory_mib": {"total", "reserved", "used"},
    "clocks_mhz": {"graphics", "sm", "mem", "video"},
    "max_clocks_mhz": {"graphics", "sm", "mem", "video"},
    "applications_clocks_mhz": {"graphics", "sm", "mem", "video"},
    "default_applications_clocks_mhz": {"graphics", "sm", "mem", "video"},
    "mig_mode": {"current", "pending", "max_devices"},
    "ecc_mode": {"current", "pending"},
    "ecc_errors": {"volatile", "aggregate"},
    "retired_pages": {"single_bit_ecc", "double_bit_ecc", "pending"},
    "remapped_rows": {"correctable", "uncorrectable", "pending", "failure"},
    "nvlink": {"count", "inactive"},
    "utilization_pct": {"gpu", "memory"},
}


def _compiler(cc=None):
    return cc or os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")


def usable(python):
    """Whether the fake library can be built here and loaded by ``python``'s pynvml: Linux, a C compiler (the one
    ``build`` takes) and nvidia-ml-py importable by ``python``."""
    if not sys.platform.startswith("linux") or not _compiler():
        return False
    proc = subprocess.run([str(python), "-c", "import pynvml"], capture_output=True, timeout=30, check=False)
    return proc.returncode == 0


def build(outdir, cc=None):
    """Compile fake_nvml.c into OUTDIR/libnvidia-ml.so.1 and return that path.

    ``cc`` defaults to $CC, then gcc, then cc. Raises RuntimeError with the compiler
    output if the build fails.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    compiler = _compiler(cc)
    if not compiler:
        raise RuntimeError("no C compiler found (set CC or install gcc)")
    target = outdir / LIBRARY_NAME
    cmd = [compiler, *CFLAGS, "-o", str(target), str(SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError("building the fake NVML failed:\n" + " ".join(cmd) + "\n" + proc.stderr)
    return target


def list_profiles():
    """Names of the bundled profiles (file stems under profiles/)."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.json"))


def profile_path(profile):
    """Path of a bundled profile name (``"h200-1x"``) or of a JSON file path."""
    candidate = Path(profile)
    if candidate.suffix == ".json" or os.sep in str(profile):
        if not candidate.is_file():
            raise FileNotFoundError(f"fake NVML profile not found: {candidate}")
        return candidate.resolve()
    bundled = PROFILES_DIR / f"{profile}.json"
    if not bundled.is_file():
        raise FileNotFoundError(f"no bundled fake NVML profile {profile!r}; have: {', '.join(list_profiles())}")
    return bundled


def load_profile(profile):
    """The parsed JSON of a bundled profile name or a profile path."""
    return json.loads(profile_path(profile).read_text())


def env_for(profile, libdir=None, base=None):
    """Environment variables that make pynvml load the fake library with PROFILE.

    Returns only the variables to set: GPUFLEET_FAKE_NVML_PROFILE, and, when LIBDIR
    (the folder holding the built library) is given, LD_LIBRARY_PATH with LIBDIR
    first, followed by the LD_LIBRARY_PATH of BASE (default: os.environ). Merge the
    result into a subprocess environment: ``{**os.environ, **env_for(...)}``.
    """
    env = {PROFILE_ENV: str(profile_path(profile))}
    if libdir is not None:
        base = os.environ if base is None else base
        rest = base.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = str(Path(libdir).resolve()) + (os.pathsep + rest if rest else "")
    return env


def validate_profile(data):
    """Problems found in a profile dict (unknown keys, missing labels); empty if fine."""
    problems = []
    if not isinstance(data, dict):
        return ["profile is not a JSON object"]
    if data.get("simulated") is not True:
        problems.append('profile must be labelled "simulated": true')
    if not isinstance(data.get("description"), str) or not data["description"]:
        problems.append("profile needs a one-line description")
    problems += [f"unknown profile key {k!r}" for k in sorted(set(data) - PROFILE_KEYS)]
    gpus = data.get("gpus", [])
    if not isinstance(gpus, list):
        return [*problems, "gpus must be a list"]
    for i, gpu in enumerate(gpus):
        if not isinstance(gpu, dict):
            problems.append(f"gpus[{i}] is not an object")
            continue
        problems += [f"gpus[{i}]: unknown key {k!r}" for k in sorted(set(gpu) - GPU_KEYS)]
        for key, allowed in SUB_KEYS.items():
            value = gpu.get(key)
            if isinstance(value, dict):
                problems += [f"gpus[{i}].{key}: unknown key {k!r}" for k in sorted(set(value) - allowed)]
        if "lost" not in gpu:
            for key in ("name", "uuid", "pci"):
                if key not in gpu:
                    problems.append(f"gpus[{i}] has no {key}")
    return problems
