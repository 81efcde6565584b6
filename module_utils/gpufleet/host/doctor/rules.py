"""The doctor's rules, as data: one row per finding code, each with its source.

A row: ``code``, ``severity`` ("critical" = CUDA cannot be used or the hardware needs attention, "warning" = works
but will bite, "info"), ``remedy_class`` (``fixable`` here, ``reboot``, ``provider``, ``unknown``), ``blocks_cuda``
(the finding alone explains why CUDA is unusable), ``meaning`` and ``remedy`` in plain words, ``source`` (reference
section or fixture) and ``match``: a function over the doctor's *view* (the evidence with the raw texts already
parsed, built by ``diagnose.view``) that returns the raw values that matched, or None. ``severity_of`` (optional)
refines the severity from the matched values.

Every row's matcher is in ``match_cuda`` (the CUDA stack and the GPU) or ``match_renter`` (the renter's checks, with
their thresholds); the torch / CUDA error texts and cuInit codes are in ``texts``. A new rule is its row here (and
its matcher). Nothing in these files reads the host.
"""

from .match_cuda import (
    m_arch_missing_from_wheel,
    m_container_without_gpus,
    m_cpu_only_wheel,
    m_cuda_link_wrong_target,
    m_cuda_visible_devices,
    m_device_nodes_missing,
    m_driver_library_mismatch,
    m_ecc,
    m_error_802_fabric_manager,
    m_error_804_forward_compat,
    m_fewer_gpus,
    m_ld_library_path_shadowing,
    m_libcudart_not_found,
    m_no_driver,
    m_nvidia_uvm_not_loaded,
    m_persistence_off,
    m_wrong_variant_for_driver,
    m_xid_79,
    sev_ecc,
)
from .match_renter import (
    m_container_lost_gpus,
    m_cpu_quota,
    m_gpu_partitioned,
    m_other_tenant,
    m_pids_low,
    m_provider_claim,
    m_recovery_action,
    m_shm_small,
    sev_claim,
)
from .texts import REF, TE

DESIGN = "shared/DESIGN.md 'The doctor'"

SEVERITIES = ("critical", "warning", "info")
# fixable: software on this host can fix it; restart_container: the renter recreates / restarts the container
# (the provider's console or API), nothing inside it can; reboot: the machine must restart; provider: the
# machine's owner must act, or the rental goes back.
REMEDY_CLASSES = ("fixable", "restart_container", "reboot", "provider", "unknown")


def host_side_in_container(v):
    """Remedy class of a fix that needs the machine's kernel or services: a container cannot apply it."""
    return "provider" if v.get("in_container") else "fixable"


host_side_in_container.doc = "provider in a container"


def uvm_remedy_class(v):
    """Remedy class of a missing nvidia_uvm: a container gets /dev/nvidia-uvm when it is started with its devices
    (the runtime loads the module on the machine first), so it is restarted; elsewhere it is loaded here."""
    return "restart_container" if v.get("in_container") else "fixable"


uvm_remedy_class.doc = "restart_container in a container"


def container_setting(v):
    """Remedy class of a limit the container was started with (--shm-size, --pids-limit): a new container fixes
    it; on a VM or bare metal it is this host's own setting."""
    return "restart_container" if v.get("in_container") else "fixable"


container_setting.doc = "restart_container in a container"


def machine_restart(v):
    """Remedy class of a GPU reset or reboot: the renter of a VM or a machine does it, a container's renter cannot."""
    return "provider" if v.get("in_container") else "reboot"


machine_restart.doc = "provider in a container"


ECOSYSTEM = "shared/reference/ecosystem.md 'Rented-host checks'"
CTK_48 = "https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"


def _rule(**kw):
    row = {"code": None, "severity": None, "remedy_class": None, "blocks_cuda": False, "meaning": None,
           "remedy": None, "source": None, "match": None, "severity_of": None, "remedy_class_of": None}
    unknown = set(kw) - set(row)
    if unknown:
        raise ValueError("unknown rule fields: %s" % sorted(unknown))
    row.update(kw)
    if row["severity"] not in SEVERITIES or row["remedy_class"] not in REMEDY_CLASSES:
        raise ValueError("bad severity / remedy class in rule %s" % row["code"])
    return row


RULES = [
    _rule(code="no_driver", severity="critical", remedy_class="provider", blocks_cuda=True, match=m_no_driver,
          meaning="No NVIDIA kernel driver is loaded on this (non-container) host.",
          remedy="Install the NVIDIA driver the image is meant to carry, or ask the provider for a host with it.",
          source=DESIGN + " (driver not loaded); " + REF + " section 2.1; " + TE + "found-no-nvidia-driver_*"),
    _rule(code="container_without_gpus", severity="critical", remedy_class="provider", blocks_cuda=True,
          match=m_container_without_gpus,
          meaning="This is a container with no /dev/nvidia* GPU nodes: it was started without GPUs "
                  "(no --gpus / nvidia runtime / CDI device).",
          remedy="Recreate the container with GPUs attached (provider setting or --gpus all); nothing inside "
                 "the container can add them.",
          source=DESIGN + " (container started without GPUs); fixtures nvidia_smi_text/error_couldnt-communicate_*"),
    _rule(code="driver_library_mismatch", severity="critical", remedy_class="reboot", blocks_cuda=True,
          match=m_driver_library_mismatch, remedy_class_of=machine_restart,
          meaning="The loaded kernel module and the user-space driver libraries are different versions "
                  "(typically an upgrade without a reboot).",
          remedy="Reboot so the new kernel module loads (or reinstall the matching user-space driver); hold the "
                 "driver packages against unattended upgrades. In a container only the provider can reboot the "
                 "machine under it.",
          source=REF + " section 2.2; fixtures nvidia_smi_text/error_nvml-driver-library-mismatch_*, "
                       "kernel_logs/*api-mismatch*"),
    _rule(code="nvidia_uvm_not_loaded", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_nvidia_uvm_not_loaded, remedy_class_of=uvm_remedy_class,
          meaning="The nvidia module is loaded but nvidia_uvm is not, or (in a container) the GPU nodes are there "
                  "but /dev/nvidia-uvm is not; CUDA needs it.",
          remedy="modprobe nvidia-uvm (or nvidia-modprobe -u -c=0) and load it at boot; in a container, restart "
                 "(or recreate) it with its devices (--gpus / the nvidia runtime pass /dev/nvidia-uvm in), or ask "
                 "the provider to.",
          source=DESIGN + " (nvidia_uvm not loaded); " + REF + " section 2.1 (gpu-operator #2685)"),
    _rule(code="device_nodes_missing", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_device_nodes_missing,
          meaning="The driver is loaded but /dev/nvidiactl, /dev/nvidia-uvm or /dev/nvidiaN nodes are missing.",
          remedy="Create them with nvidia-modprobe -u -c=0 (and nvidia-ctk system create-dev-char-symlinks).",
          source=DESIGN + " (device nodes missing); " + REF + " sections 2.1, 2.4"),
    _rule(code="cuda_visible_devices_empty_or_invalid", severity="critical", remedy_class="fixable",
          blocks_cuda=True, match=m_cuda_visible_devices,
          meaning="CUDA_VISIBLE_DEVICES is empty or names GPUs that do not exist; CUDA then sees fewer or no GPUs.",
          remedy="Unset CUDA_VISIBLE_DEVICES or set it to valid indices / GPU UUIDs in the environment that sets it.",
          source=DESIGN + " (CUDA_VISIBLE_DEVICES empty/invalid); " + REF + " section 2.1 (pytorch #90543, #52675)"),
    _rule(code="cpu_only_wheel", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_cpu_only_wheel,
          meaning="The installed torch is a CPU-only build; it will never use a GPU.",
          remedy="Reinstall torch from the CUDA variant index the driver supports (torchcompat.solve picks it).",
          source=DESIGN + " (CPU-only torch wheel); " + REF + " section 3.3"),
    _rule(code="wrong_variant_for_driver", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_wrong_variant_for_driver,
          meaning="The torch wheel is built for a newer CUDA than the host driver supports "
                  "(\"found version NNNNN\" is the driver's CUDA version: 10010 = CUDA 10.1).",
          remedy="Install the torch variant the driver supports (torchcompat.solve), or a newer driver if the "
                 "host is yours to change.",
          source=REF + " sections 2.1, 3.2; " + TE + "driver-too-old_found-*"),
    _rule(code="arch_missing_from_wheel", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_arch_missing_from_wheel,
          meaning="The torch wheel carries no kernels for this GPU's architecture (e.g. Blackwell sm_120 with a "
                  "cu121 wheel): is_available() may be True but kernels fail.",
          remedy="Install a torch release/variant whose arch list covers the GPU (torcharch.first_covering).",
          source=REF + " sections 2.1, 3.1; " + TE + "no-kernel-image_*"),
    _rule(code="libcudart_not_found", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_libcudart_not_found,
          meaning="A CUDA extension could not load libcudart: the runtime for its CUDA major is not installed "
                  "or not on the loader path.",
          remedy="Install the matching nvidia-cuda-runtime-cuXX wheel in the venv (or the toolkit) instead of "
                 "adding paths to LD_LIBRARY_PATH.",
          source=REF + " section 2.3; " + TE + "libcudart-so-12-cannot-open_*"),
    _rule(code="ld_library_path_shadowing", severity="warning", remedy_class="fixable",
          match=m_ld_library_path_shadowing,
          meaning="LD_LIBRARY_PATH or ld.so.conf puts a system CUDA library directory where pip torch's own "
                  "nvidia-* libraries should be found (undefined symbol __nvJitLink*).",
          remedy="Remove the CUDA directories from the global LD_LIBRARY_PATH / extra ld.so.conf entries for "
                 "pip-wheel venvs.",
          source=REF + " section 2.3; " + TE + "nvjitlink-*"),
    _rule(code="cuda_link_wrong_target", severity="warning", remedy_class="fixable", match=m_cuda_link_wrong_target,
          meaning="/usr/local/cuda points at a toolkit other than the one that should be used (or at nothing).",
          remedy="Repoint /usr/local/cuda at the chosen toolkit (the cuda_links role).",
          source=DESIGN + " (/usr/local/cuda wrong toolkit); " + REF + " section 2.3"),
    _rule(code="error_802_fabric_manager", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_error_802_fabric_manager, remedy_class_of=host_side_in_container,
          meaning="An NVSwitch machine without a running fabric manager: CUDA init fails with Error 802 "
                  "\"system not yet initialized\".",
          remedy="Install nvidia-fabricmanager matching the driver branch and start it (only on NVSwitch hosts); "
                 "in a container the fabric manager runs on the machine, so the provider must start it.",
          source=REF + " section 2.7; " + TE + "error-802_*"),
    _rule(code="error_804_forward_compat", severity="critical", remedy_class="fixable", blocks_cuda=True,
          match=m_error_804_forward_compat,
          meaning="A forward-compatibility libcuda (cuda-compat) was loaded on a GPU that does not support it "
                  "(Error 804).",
          remedy="Take the cuda-compat directory off the loader path and install the torch variant the host "
                 "driver supports.",
          source=REF + " sections 2.2, 3.2; " + TE + "error-804_*"),
    _rule(code="xid_79_fallen_off_bus", severity="critical", remedy_class="provider", blocks_cuda=True,
          match=m_xid_79,
          meaning="A GPU has fallen off the PCIe bus (Xid 79): hardware, power or firmware fault.",
          remedy="Needs a host reboot at least; if it recurs, report the GPU to the provider.",
          source=REF + " section 2.5; fixtures kernel_logs/bumblebee-554_*"),
    _rule(code="ecc_or_row_remap_failure", severity="critical", remedy_class="provider",
          match=m_ecc, severity_of=sev_ecc,
          meaning="ECC errors or row-remapping events (Xid 48/63/64/94/95, or a failed row remap) on a GPU.",
          remedy="A pending remap needs a GPU reset or reboot; a failed remap or uncontained error is a provider "
                 "(RMA) matter.",
          source=REF + " sections 2.5, 2.6; fixtures kernel_logs/gpud_xid48-63-94_*"),
    _rule(code="fewer_gpus_than_rented", severity="critical", remedy_class="provider",
          match=m_fewer_gpus,
          meaning="Fewer GPUs are visible than were rented.",
          remedy="Ask the provider for the missing GPUs or a refund; check Xid 79 first.",
          source=DESIGN + " (GPU count lower than rented)"),
    _rule(code="persistence_mode_off", severity="info", remedy_class="fixable", match=m_persistence_off,
          remedy_class_of=host_side_in_container,
          meaning="Persistence mode is off: the driver state is torn down between jobs (slower start-up).",
          remedy="Enable nvidia-persistenced (not the deprecated nvidia-smi -pm); in a container the machine's "
                 "owner (the provider) must do it.",
          source=REF + " section 2.8"),
    _rule(code="container_lost_gpus", severity="critical", remedy_class="restart_container", blocks_cuda=True,
          match=m_container_lost_gpus,
          meaning="This container had its GPUs and lost them: the /dev/nvidia* nodes are there but opening them is "
                  "denied (EPERM) or NVML fails with \"Unknown Error\" - the cgroup device rules were rewritten, "
                  "typically when the host ran systemctl daemon-reload (cgroup v2, systemd cgroup driver).",
          remedy="Restart (or recreate) the container: it gets its GPUs back. Nothing inside the container can "
                 "restore them. The provider's fix on the machine: nvidia-ctk system create-dev-char-symlinks "
                 "--create-all (and its udev rule), or Docker's cgroupfs driver, or --device for every node.",
          source=CTK_48 + "; https://github.com/NVIDIA/nvidia-container-toolkit/issues/1227; " + ECOSYSTEM),
    _rule(code="gpu_used_by_another_tenant", severity="warning", remedy_class="provider", match=m_other_tenant,
          meaning="Someone else is on this GPU: compute processes that are not this host's, or memory held with "
                  "no process listed while none of ours uses it - the same in two looks seconds apart.",
          remedy="Ask the provider to clear the GPU, or return the rental; your jobs would share its memory and "
                 "compute. (A job of yours in another container on the same machine also looks like this.)",
          source=ECOSYSTEM + " (Datura-ai/lium-io PR #1242); https://github.com/NVIDIA/nvidia-docker/issues/1483 "
                 "(NVML lists host PIDs in a container); russellb/canhazgpu docs/features-unauthorized.md (100 MB)"),
    _rule(code="gpu_partitioned", severity="warning", remedy_class="provider", match=m_gpu_partitioned,
          meaning="A GPU is a MIG slice or a memory-limited share, not the whole GPU; the evidence gives the "
                  "fraction of the GPU's memory that is yours.",
          remedy="If a whole GPU was rented, ask the provider for it or return the rental; if a slice was rented, "
                 "size the jobs to the fraction.",
          source=ECOSYSTEM + "; NVML nvmlDeviceGetMigMode and nvmlDeviceGetMemoryInfo_v2; "
                 "https://github.com/Project-HAMi/HAMi/issues/235 (3000 MiB of a 16 GB V100 in a container)"),
    _rule(code="cpu_quota_below_visible_cpus", severity="warning", remedy_class="fixable", match=m_cpu_quota,
          meaning="The container may use far fewer CPUs (cgroup cpu.max) than it sees; torch, OpenMP and MKL start "
                  "one thread per visible CPU, and the quota then throttles them (oversubscription, slow data "
                  "loading).",
          remedy="Size the thread pools to the quota: set OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS "
                 "and NUMEXPR_NUM_THREADS to the evidence's suggested_threads (e.g. in /etc/environment) and keep "
                 "DataLoader num_workers near it.",
          source=ECOSYSTEM + " (vast-ai/base-image test 56-cpu-thread-limits)"),
    _rule(code="pids_max_low", severity="warning", remedy_class="fixable", match=m_pids_low,
          remedy_class_of=container_setting,
          meaning="The cgroup's pids.max (which counts threads) is low: DataLoader workers and thread pools fail "
                  "with \"can't start new thread\" / EAGAIN.",
          remedy="Start the container with a higher --pids-limit (a provider or template setting); on a VM, raise "
                 "the systemd TasksMax of the session or service.",
          source=ECOSYSTEM + " (vast-ai/base-image test 56-cpu-thread-limits)"),
    _rule(code="shm_too_small", severity="warning", remedy_class="fixable", match=m_shm_small,
          remedy_class_of=container_setting,
          meaning="/dev/shm is smaller than NCCL and DataLoader workers need (Docker's default is 64 MB); "  # noqa: S108
                  "multi-GPU NCCL and workers fail with bus errors.",
          remedy="Recreate the container with --shm-size=1g or more (or --ipc=host); on a VM, remount /dev/shm "
                 "larger (mount -o remount,size=1G /dev/shm).",
          source="NVIDIA NGC PyTorch container docs: docker run --shm-size=1g --ulimit memlock=-1 "
                 "(module_utils/gpufleet/host/doctor/match_renter.py SHM_MIN_MIB); " + ECOSYSTEM),
    _rule(code="provider_claim_mismatch", severity="critical", remedy_class="provider", match=m_provider_claim,
          severity_of=sev_claim,
          meaning="The provider's listing does not match the machine: another GPU model or less memory than "
                  "listed (critical), or another driver / CUDA version (warning).",
          remedy="Return the rental or ask the provider to correct it; the evidence lists what was claimed and "
                 "what NVML found.",
          source="shared/reference/provider-apis.md (vast.ai gpu_name, num_gpus, driver_version, cuda_max_good; "
                 "inventory plugin host vars gpufleet_claimed_gpu_model, gpufleet_provider_*)"),
    _rule(code="gpu_recovery_action", severity="critical", remedy_class="reboot", match=m_recovery_action,
          remedy_class_of=machine_restart,
          meaning="The driver says a GPU needs recovery (NVML recovery action: GPU reset, node reboot, drain, "
                  "bus reset ...); until then the GPU is not to be trusted.",
          remedy="Do what the evidence's renter_action says: on a VM or machine of yours reset the GPU or reboot; "
                 "in a container only the provider can, so ask them (or return the rental).",
          source="NVML NVML_FI_DEV_GET_GPU_RECOVERY_ACTION / nvmlGpuRecoveryAction_t (nvml.h, pynvml); "
                 "shared/reference/ecosystem.md 'GPU health tools'"),
]

# torch text codes that no rule can explain by themselves: reported as unknown with the raw text.
TEXT_CODES_NEEDING_CONTEXT = ("error_802", "devices_busy_or_unavailable", "cuda_unknown_error")
