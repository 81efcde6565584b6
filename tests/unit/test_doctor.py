"""The doctor's pure part: recorded error texts and kernel logs in, findings out."""

import copy
import pathlib

import pytest
from gpufleet.controller import doctor_page
from gpufleet.host.doctor import diagnose as doctor
from gpufleet.host.doctor import rules as doctor_rules
from gpufleet.host.doctor import texts as doctor_texts
from gpufleet.host.system import kmsg

FIX = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "doctor"


def text(*parts):
    return FIX.joinpath(*parts).read_text(encoding="utf-8", errors="replace")


PROC_MODULES = (
    "nvidia_uvm 4956160 0 - Live 0x0000000000000000 (POE)\n"
    "nvidia_drm 122880 0 - Live 0x0000000000000000 (POE)\n"
    "nvidia_modeset 1355776 1 nvidia_drm, Live 0x0000000000000000 (POE)\n"
    "nvidia 54312960 2 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n"
    "ext4 1089536 1 - Live 0x0000000000000000\n"
)


def healthy():
    """A constructed healthy 2-GPU host: every layer fine, torch sees CUDA."""
    return {
        "device_nodes": ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm",
                         "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"],
        "proc_modules": PROC_MODULES,
        "proc_driver_version": text("proc_driver", "version_550.90.07_proprietary_pytorch-131312.txt"),
        "nvml": {"ok": True, "error_code": None, "error_text": None, "gpu_count": 2, "driver_version": "550.90.07"},
        "cuinit": {"result": 0, "libcuda_path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "stub": False,
                   "forward_compat": False, "error": None},
        "torch": {"importable": True, "import_error": None, "version": "2.5.1+cu124", "cuda": "12.4",
                  "is_available": True, "device_count": 2,
                  "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
                  "warning": None, "error": None},
        "gpus": [{"index": 0, "name": "NVIDIA RTX A6000", "compute_capability": "8.6", "persistence_mode": True,
                  "remapped_rows_failure": False},
                 {"index": 1, "name": "NVIDIA RTX A6000", "compute_capability": "8.6", "persistence_mode": True,
                  "remapped_rows_failure": False}],
        "env": {},
        "cudatk": {"ld_library_path": {"entries": [], "shadowing": False}, "problems": [],
                   "cuda_symlink": {"target": "/usr/local/cuda-12.4", "resolved": "/usr/local/cuda-12.4"}},
        "nvswitch_present": False,
        "fabric_manager": "not_installed",
        "kernel_log": kmsg.parse_kernel_log("", "dmesg"),
        "expected_gpu_count": 2,
        "in_container": False,
    }


def codes(result):
    return [f["code"] for f in result["findings"]]


def test_healthy_baseline_has_no_findings():
    r = doctor.diagnose(healthy())
    assert r["status"] == "healthy"
    assert r["cuda_usable"] is True
    assert r["findings"] == [] and r["unknown"] == []


def test_no_evidence_is_unknown_not_healthy():
    r = doctor.diagnose({})
    assert r["status"] == "unknown" and r["cuda_usable"] is None and r["findings"] == []


# ----------------------------------------------------------------------------- torch error texts
TORCH_ERRORS = {
    "all-devices-busy-or-unavailable_legacy-thcudacheck_pytorch-3871.txt": "devices_busy_or_unavailable",
    "busy-or-unavailable_runtimeerror_InstantCharacter-21.txt": "devices_busy_or_unavailable",
    "cuda-unknown-error_runtimeerror-traceback_Bringing-Old-Photos-Back-to-Life-52.txt": "cuda_unknown_error",
    "cuda-unknown-error_userwarning-then-traceback_PyTorch-Encoding-368.txt": "cuda_unknown_error",
    "driver-too-old_found-10010_assertionerror-traceback_ai4d-iasc-trixie-9.txt": "driver_too_old",
    "driver-too-old_found-10010_runtimeerror_colabtools-1685.txt": "driver_too_old",
    "driver-too-old_found-10010_userwarning_yolov5-2389.txt": "driver_too_old",
    "driver-too-old_found-11000_userwarning_IEIT-Yuan-2.0-65.txt": "driver_too_old",
    "error-802_runtimeerror_LLaVA-683.txt": "error_802",
    "error-802_system-not-yet-initialized_userwarning_LlamaFactory-7888.txt": "error_802",
    "error-802_thcudacheck-traceback_pytorch-35710.txt": "error_802",
    "error-804_forward-compat_tensorrt-llm-traceback_TensorRT-LLM-1806.txt": "error_804",
    "error-804_forward-compat_userwarning-and-runtimeerror_Video-LLaVA-22.txt": "error_804",
    "found-no-nvidia-driver_assertionerror-traceback_GaitSet-95.txt": "no_nvidia_driver",
    "found-no-nvidia-driver_cudawarning-fallback_topaz-154.txt": "no_nvidia_driver",
    "found-no-nvidia-driver_userwarning-partial_HIT-SCIR-ltp-468.txt": "no_nvidia_driver",
    "libcudart-so-12-cannot-open_flash-attn-import_autotrain-advanced-292.txt": "libcudart_not_found",
    "no-kernel-image_runtimeerror_nails-segmentation-8.txt": "no_kernel_image",
    "no-kernel-image_sm86-not-compatible-userwarning_GOAE-16.txt": "no_kernel_image",
    "nvjitlink-shadowed-by-LD_LIBRARY_PATH-cuda-12.1_ldd_ragflow-4466.txt": "cuda_library_shadowed",
    "nvjitlink-undefined-symbol-12_4_import-torch_pytorch-131312.txt": "nvjitlink_symbol_mismatch",
}


def test_every_torch_error_fixture_is_in_the_table():
    assert sorted(p.name for p in (FIX / "torch_errors").iterdir()) == sorted(TORCH_ERRORS)


@pytest.mark.parametrize("name,code", sorted(TORCH_ERRORS.items()))
def test_classify_torch_error(name, code):
    assert doctor.classify_torch_error(text("torch_errors", name)) == code


def test_classify_torch_error_nothing():
    assert doctor.classify_torch_error("") is None
    assert doctor.classify_torch_error(None) is None
    assert doctor.classify_torch_error("Segmentation fault (core dumped)") is None
    assert doctor.classify_torch_error(b"RuntimeError: CUDA error: unknown error") == "cuda_unknown_error"


@pytest.mark.parametrize("name,number,cuda", [
    ("driver-too-old_found-10010_runtimeerror_colabtools-1685.txt", 10010, "10.1"),
    ("driver-too-old_found-10010_userwarning_yolov5-2389.txt", 10010, "10.1"),
    ("driver-too-old_found-10010_assertionerror-traceback_ai4d-iasc-trixie-9.txt", 10010, "10.1"),
    ("driver-too-old_found-11000_userwarning_IEIT-Yuan-2.0-65.txt", 11000, "11.0"),
])
def test_found_version_parsed(name, number, cuda):
    t = text("torch_errors", name)
    assert doctor.found_version(t) == number
    assert doctor.cuda_from_int(number) == cuda


def test_cuda_from_int_edges():
    assert doctor.cuda_from_int(12040) == "12.4"
    assert doctor.cuda_from_int(0) is None and doctor.cuda_from_int("x") is None


# ----------------------------------------------------------------------------- /proc/driver/nvidia/version
@pytest.mark.parametrize("name,version,flavor,arch", [
    ("version_384.98_proprietary_neofetch-876.txt", "384.98", "proprietary", "x86_64"),
    ("version_470.223.02_proprietary_weaviate-Verba-72.txt", "470.223.02", "proprietary", "x86_64"),
    ("version_550.90.07_proprietary_pytorch-131312.txt", "550.90.07", "proprietary", "x86_64"),
    ("version_580.173.02_proprietary_truenas-nvidia-drivers-19.txt", "580.173.02", "proprietary", "x86_64"),
    ("version_open-515.57_self-built_ogkm-326.txt", "515.57", "open", "x86_64"),
    ("version_open-525.60.11_archlinux_nixGL-121.txt", "525.60.11", "open", "x86_64"),
    ("version_open-555.58_gentoo-localized-date_Hyprland-6715.txt", "555.58", "open", "x86_64"),
    ("version_open-565.57.01_ubuntu24.04_nixGL-186.txt", "565.57.01", "open", "x86_64"),
    ("version_open-aarch64-jetson-35.3.1_nixGL-139.txt", "35.3.1", "open", "aarch64"),
])
def test_parse_proc_driver_version(name, version, flavor, arch):
    assert doctor.parse_proc_driver_version(text("proc_driver", name)) == {
        "version": version, "flavor": flavor, "arch": arch}


def test_parse_proc_driver_version_garbage():
    assert doctor.parse_proc_driver_version("") is None
    assert doctor.parse_proc_driver_version(None) is None
    assert doctor.parse_proc_driver_version("NVRM version: something else") is None


# ----------------------------------------------------------------------------- every rule fires
def _torch(ev, **kw):
    ev["torch"].update(kw)
    return ev


def ev_no_driver():
    ev = healthy()
    ev.update(device_nodes=[], proc_modules="ext4 1089536 1 - Live 0x0\n", proc_driver_version="",
              nvml={"ok": False, "error_code": "driver_not_loaded", "error_text": "Driver Not Loaded"},
              cuinit={"result": 100, "libcuda_path": None}, gpus=[])
    return _torch(ev, is_available=False, device_count=0,
                  warning=text("torch_errors", "found-no-nvidia-driver_userwarning-partial_HIT-SCIR-ltp-468.txt"))


def ev_container_without_gpus():
    ev = ev_no_driver()
    ev.update(in_container=True, device_nodes=[], proc_modules=PROC_MODULES,
              proc_driver_version=healthy()["proc_driver_version"])
    return ev


def ev_uvm():
    ev = healthy()
    ev["proc_modules"] = "\n".join(line for line in PROC_MODULES.splitlines() if not line.startswith("nvidia_uvm"))
    ev["device_nodes"] = [n for n in ev["device_nodes"] if "uvm" not in n]
    ev["cuinit"]["result"] = 999
    return _torch(ev, is_available=False, device_count=0)


def ev_nodes():
    ev = healthy()
    ev["device_nodes"] = ["/dev/nvidiactl"]
    return _torch(ev, is_available=False, device_count=0)


def ev_cvd():
    ev = healthy()
    ev["env"] = {"CUDA_VISIBLE_DEVICES": ""}
    return _torch(ev, is_available=False, device_count=0)


def ev_cpu():
    return _torch(healthy(), version="2.13.0+cpu", cuda=None, is_available=False, device_count=0, arch_list=[])


def ev_wrong_variant():
    ev = healthy()
    ev["proc_driver_version"] = text("proc_driver", "version_470.223.02_proprietary_weaviate-Verba-72.txt")
    ev["nvml"]["driver_version"] = "470.223.02"
    return _torch(ev, version="2.5.1+cu121", cuda="12.1", is_available=False, device_count=0,
                  warning=text("torch_errors", "driver-too-old_found-11000_userwarning_IEIT-Yuan-2.0-65.txt"))


def ev_arch():
    ev = healthy()
    ev["gpus"] = [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0",
                   "persistence_mode": True}]
    ev["nvml"]["gpu_count"] = 1
    ev["expected_gpu_count"] = 1
    ev["device_nodes"] = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    # torch 2.5 cu121 arch list (torchcompat WHEELS): no Blackwell
    return _torch(ev, version="2.5.1+cu121", cuda="12.1", is_available=True, device_count=1,
                  arch_list=["sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_90a"])


def ev_mismatch():
    ev = healthy()
    ev["nvml"] = {"ok": False, "error_code": "driver_library_mismatch",
                  "error_text": "Failed to initialize NVML: Driver/library version mismatch"}
    ev["kernel_log"] = kmsg.parse_kernel_log(
        text("kernel_logs", "dalle-playground-104_api-mismatch_515.48.07-vs-510.73.05.log"), "dmesg")
    ev["cuinit"]["result"] = 803
    return _torch(ev, is_available=False, device_count=0)


def ev_libcudart():
    return _torch(healthy(), error=text(
        "torch_errors", "libcudart-so-12-cannot-open_flash-attn-import_autotrain-advanced-292.txt"))


def ev_shadow():
    ev = healthy()
    ev["env"] = {"LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib64"}
    ev["cudatk"]["ld_library_path"] = {"shadowing": True, "entries": [
        {"path": "/usr/local/cuda-12.1/lib64", "source": "environment", "shadowing": True}]}
    return ev


def ev_shadow_text():
    return _torch(healthy(), importable=False, is_available=None, import_error=text(
        "torch_errors", "nvjitlink-undefined-symbol-12_4_import-torch_pytorch-131312.txt"))


def ev_link():
    ev = healthy()
    ev["cudatk"]["problems"] = [{"code": "cuda_link_wrong_target", "severity": "error",
                                 "message": "/usr/local/cuda resolves to /usr/local/cuda-11.8 (CUDA 11.8); it should "
                                            "point at /usr/local/cuda-12.4 (CUDA 12.4)",
                                 "expected": "/usr/local/cuda-12.4"}]
    ev["cudatk"]["cuda_symlink"] = {"target": "/usr/local/cuda-11.8", "resolved": "/usr/local/cuda-11.8"}
    return ev


def ev_802():
    ev = healthy()
    ev.update(nvswitch_present=True, fabric_manager="stopped")
    ev["cuinit"]["result"] = 802
    return _torch(ev, is_available=False, device_count=0, warning=text(
        "torch_errors", "error-802_system-not-yet-initialized_userwarning_LlamaFactory-7888.txt"))


def ev_804():
    ev = healthy()
    ev["cuinit"] = {"result": 804, "libcuda_path": "/usr/local/cuda/compat/libcuda.so.1", "forward_compat": True}
    return _torch(ev, is_available=False, device_count=0, warning=text(
        "torch_errors", "error-804_forward-compat_userwarning-and-runtimeerror_Video-LLaVA-22.txt"))


def ev_xid79():
    ev = healthy()
    ev["kernel_log"] = kmsg.parse_kernel_log(
        text("kernel_logs", "bumblebee-554_gpu-fallen-off-bus-legacy-format_dmesg.log"), "dmesg")
    return ev


def ev_ecc():
    ev = healthy()
    ev["kernel_log"] = kmsg.parse_kernel_log(
        text("kernel_logs", "gpud_xid48-63-94_peermem_dmesg-iso.log"), "dmesg")
    return ev


def ev_fewer():
    ev = healthy()
    ev["expected_gpu_count"] = 8
    return ev


def ev_persistence():
    ev = healthy()
    ev["gpus"][1]["persistence_mode"] = False
    return ev


CASES = {
    "no_driver": ev_no_driver,
    "container_without_gpus": ev_container_without_gpus,
    "nvidia_uvm_not_loaded": ev_uvm,
    "device_nodes_missing": ev_nodes,
    "cuda_visible_devices_empty_or_invalid": ev_cvd,
    "cpu_only_wheel": ev_cpu,
    "wrong_variant_for_driver": ev_wrong_variant,
    "arch_missing_from_wheel": ev_arch,
    "driver_library_mismatch": ev_mismatch,
    "libcudart_not_found": ev_libcudart,
    "ld_library_path_shadowing": ev_shadow,
    "cuda_link_wrong_target": ev_link,
    "error_802_fabric_manager": ev_802,
    "error_804_forward_compat": ev_804,
    "xid_79_fallen_off_bus": ev_xid79,
    "ecc_or_row_remap_failure": ev_ecc,
    "fewer_gpus_than_rented": ev_fewer,
    "persistence_mode_off": ev_persistence,
}


def test_every_rule_has_a_case():
    from test_doctor_renter import RENTER_CASES  # the renter's checks have their own file
    assert sorted({**CASES, **RENTER_CASES}) == sorted(r["code"] for r in doctor_rules.RULES)


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_fires(code):
    r = doctor.diagnose(CASES[code]())
    assert code in codes(r), r
    f = next(f for f in r["findings"] if f["code"] == code)
    rule = next(x for x in doctor_rules.RULES if x["code"] == code)
    assert f["remedy_class"] == rule["remedy_class"] and f["evidence"]
    assert f["meaning"] == rule["meaning"] and f["remedy"] == rule["remedy"]
    if rule["blocks_cuda"]:
        assert r["cuda_usable"] is False and r["status"] == "broken"


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_is_quiet_on_healthy_baseline(code):
    rule = next(x for x in doctor_rules.RULES if x["code"] == code)
    assert rule["match"](doctor.view(healthy())) is None


def test_rules_are_well_formed():
    for r in doctor_rules.RULES:
        assert r["code"] and r["meaning"] and r["remedy"] and r["source"] and callable(r["match"])
        assert r["remedy_class"] in ("fixable", "restart_container", "reboot", "provider", "unknown")
        assert r["remedy_class"] in doctor_rules.REMEDY_CLASSES
    assert len({r["code"] for r in doctor_rules.RULES}) == len(doctor_rules.RULES)


def test_a_new_rule_is_its_row():
    """Issue 38: a new doctor rule is one row appended to doctor_rules.RULES (its matcher with it); no other edit.
    The doctor reports its finding with the row's severity, remedy class, meaning and remedy, the reference page
    lists it, and the report's judgement turns it into an action and a verdict line (the meaning's first sentence:
    no BRIEFS entry needed; OUTRANKS only if it should hide or be hidden by another code, which a new code is not)."""
    from gpufleet.controller.judgement import findings as report_findings
    from gpufleet.controller.judgement import judge as judgement

    row = doctor_rules._rule(
        code="test_new_rule_row", severity="critical", remedy_class="provider",
        match=lambda v: {"gpus": v["gpu_count"]} if (v.get("env") or {}).get("GPUFLEET_TEST_RULE") else None,
        meaning="A test rule fired. It has a second sentence.", remedy="Return the rental.",
        source="tests/unit/test_doctor.py")
    ev = healthy()
    ev["env"] = {"GPUFLEET_TEST_RULE": "1"}
    assert doctor.diagnose(ev)["status"] == "healthy"  # before the row: nothing to say
    doctor_rules.RULES.append(row)
    try:
        r = doctor.diagnose(ev)
        page = doctor_page.render_rules_markdown()
        quiet = doctor.diagnose(healthy())
    finally:
        doctor_rules.RULES.remove(row)
    assert codes(r) == ["test_new_rule_row"] and r["status"] == "broken", r
    f = r["findings"][0]
    assert (f["severity"], f["remedy_class"], f["meaning"], f["remedy"]) == (
        "critical", "provider", "A test rule fired. It has a second sentence.", "Return the rental.")
    assert f["evidence"] == {"gpus": 2}
    assert "`test_new_rule_row`" in page
    assert quiet["status"] == "healthy"
    got = judgement.decide(report_findings.doctor(r, None))
    assert got["action"] == judgement.ACTION_RETURN
    assert got["verdict"] == "return to provider: A test rule fired"


# ----------------------------------------------------------------------------- details
def test_wrong_variant_evidence_names_the_driver_cuda():
    f = next(f for f in doctor.diagnose(ev_wrong_variant())["findings"] if f["code"] == "wrong_variant_for_driver")
    assert f["evidence"]["found_version"] == 11000 and f["evidence"]["driver_supports_cuda"] == "11.0"
    assert f["evidence"]["driver_below_floor"] == "525.60.13"


def test_arch_missing_names_blackwell_gpu():
    f = next(f for f in doctor.diagnose(ev_arch())["findings"] if f["code"] == "arch_missing_from_wheel")
    assert f["evidence"]["gpus"] == [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0"}]


def test_arch_covered_by_ptx():
    ev = ev_arch()
    ev["torch"]["arch_list"] = ["sm_80", "sm_90", "compute_120"]
    assert "arch_missing_from_wheel" not in codes(doctor.diagnose(ev))


def test_ecc_severity_from_xids():
    f = next(f for f in doctor.diagnose(ev_ecc())["findings"] if f["code"] == "ecc_or_row_remap_failure")
    assert f["severity"] == "critical" and set(f["evidence"]["xid_counts"]) == {48, 63, 94}
    ev = healthy()
    ev["kernel_log"] = {"counts": {"94": 2}, "events": [{"xid": 94, "severity": "warning", "line": "x"}]}
    r = doctor.diagnose(ev)
    assert [f["severity"] for f in r["findings"]] == ["warning"] and r["status"] == "degraded"


def test_remapped_rows_failure_without_xid():
    ev = healthy()
    ev["gpus"][0]["remapped_rows_failure"] = True
    f = doctor.diagnose(ev)["findings"][0]
    assert f["code"] == "ecc_or_row_remap_failure" and f["evidence"] == {"remapped_rows_failure_gpus": [0]}


@pytest.mark.parametrize("value,fires", [("", True), ("-1", True), ("0,5", True), ("GPU-abc", False),
                                         ("0,1", False), ("1", False), ("MIG-1234-5678", False), ("zero", True)])
def test_cuda_visible_devices(value, fires):
    ev = healthy()
    ev["env"] = {"CUDA_VISIBLE_DEVICES": value}
    assert ("cuda_visible_devices_empty_or_invalid" in codes(doctor.diagnose(ev))) is fires


def test_container_with_gpus_is_not_container_without_gpus():
    ev = healthy()
    ev["in_container"] = True
    ev["proc_modules"] = "ext4 1 1 - Live 0x0\n"  # what the container sees does not matter here
    assert doctor.diagnose(ev)["findings"] == []


def test_shadowing_from_torch_import_error_text():
    r = doctor.diagnose(ev_shadow_text())
    assert codes(r) == ["ld_library_path_shadowing"]
    assert r["cuda_usable"] is False and r["unknown"] == []


def test_persistence_off_alone_is_healthy():
    r = doctor.diagnose(ev_persistence())
    assert r["status"] == "healthy" and r["findings"][0]["severity"] == "info"


# ----------------------------------------------------------------------------- unknown stays unknown
def test_802_without_nvswitch_information_is_unknown():
    ev = ev_802()
    ev["nvswitch_present"] = None
    ev["fabric_manager"] = None
    r = doctor.diagnose(ev)
    assert r["findings"] == [] and r["status"] == "unknown"
    whats = {u["what"] for u in r["unknown"]}
    assert whats == {"torch_error_error_802", "cuinit_failed"}
    assert "Error 802" in next(u for u in r["unknown"] if u["what"] == "torch_error_error_802")["evidence"]["text"]


@pytest.mark.parametrize("name", ["cuda-unknown-error_userwarning-then-traceback_PyTorch-Encoding-368.txt",
                                  "busy-or-unavailable_runtimeerror_InstantCharacter-21.txt"])
def test_vague_cuda_errors_are_unknown(name):
    ev = _torch(healthy(), is_available=False, device_count=0, warning=text("torch_errors", name))
    ev["cuinit"]["result"] = 999
    r = doctor.diagnose(ev)
    assert r["findings"] == [] and r["status"] == "unknown" and r["cuda_usable"] is False
    assert r["unknown"][0]["what"].startswith("torch_error_")


def test_unrecognised_text_and_codes_are_kept_raw():
    ev = _torch(healthy(), is_available=False, device_count=0, warning="something new went wrong")
    ev["cuinit"]["result"] = 12345
    ev["kernel_log"] = kmsg.parse_kernel_log("[1.0] NVRM: Xid (PCI:0000:19:00): 777, weird", "dmesg")
    ev["proc_driver_version"] = "NVRM version: a format never seen"
    r = doctor.diagnose(ev)
    assert r["findings"] == [] and r["status"] == "unknown"
    got = {u["what"]: u["evidence"] for u in r["unknown"]}
    assert got["torch_warning_unrecognised"] == {"text": "something new went wrong"}
    assert got["cuinit_failed"]["result"] == 12345 and got["cuinit_failed"]["name"] is None
    assert got["xid_unclassified"] == {"xid": 777, "count": 1}
    assert "proc_driver_version_unparsed" in got


def test_unavailable_without_any_explanation_is_unknown():
    r = doctor.diagnose(_torch(healthy(), is_available=False, device_count=0))
    assert r["status"] == "unknown" and r["cuda_usable"] is False
    assert [u["what"] for u in r["unknown"]] == ["torch_cuda_unavailable_unexplained"]


def test_diagnose_does_not_mutate_evidence():
    ev = ev_ecc()
    before = copy.deepcopy(ev)
    doctor.diagnose(ev)
    assert ev == before


# ----------------------------------------------------------------------------- reference page
def test_render_rules_markdown_lists_every_code():
    md = doctor_page.render_rules_markdown()
    for r in doctor_rules.RULES:
        assert "`%s`" % r["code"] in md
    for code, _p, _s in doctor_texts.TORCH_ERROR_PATTERNS:
        assert "`%s`" % code in md
    assert md.startswith("# gpufleet doctor")


def test_docs_page_is_generated_from_the_rules():
    # Regenerate with: .venv/bin/python -c "import sys; sys.path.insert(0, 'module_utils');
    #   from gpufleet.controller import doctor_page; open('docs/doctor-rules.md',
    #   'w').write(doctor_page.render_rules_markdown())"
    from pathlib import Path
    page = Path(__file__).resolve().parents[2] / "docs" / "doctor-rules.md"
    assert page.read_text() == doctor_page.render_rules_markdown()


# ----------------------------------------------------------------------------- GPU count when NVML fails
def ev_mismatch_as_gathered():
    """A driver/library mismatch as doctor_probe.gather records it: NVML failed, so its GPU list is empty."""
    ev = ev_mismatch()
    ev["gpus"] = []
    ev["nvml"]["gpu_count"] = None
    return ev


def test_mismatch_counts_gpus_from_device_nodes_and_stays_a_reboot():
    v = doctor.view(ev_mismatch_as_gathered())
    assert (v["gpu_count"], v["gpu_count_source"]) == (2, "device_nodes")
    r = doctor.diagnose(ev_mismatch_as_gathered())
    assert "driver_library_mismatch" in codes(r) and "fewer_gpus_than_rented" not in codes(r)
    assert {f["remedy_class"] for f in r["findings"]} == {"reboot"}


def test_failed_nvml_without_nodes_counts_from_pci_outside_containers():
    ev = ev_mismatch_as_gathered()
    ev["device_nodes"] = ["/dev/nvidiactl"]
    ev["pci_gpus"] = ["0000:17:00.0", "0000:65:00.0"]
    assert doctor.count_gpus(ev, doctor.view(ev)) == (2, "pci")
    ev["pci_gpus"] = []  # a VM whose bus shows no NVIDIA GPU: a real count of 0
    r = doctor.diagnose(ev)
    f = next(f for f in r["findings"] if f["code"] == "fewer_gpus_than_rented")
    assert f["evidence"] == {"expected_gpu_count": 2, "gpu_count": 0, "counted_from": "pci"}


def test_failed_nvml_in_a_container_without_nodes_is_an_unknown_count_never_zero():
    ev = ev_mismatch_as_gathered()
    ev.update(device_nodes=["/dev/nvidiactl"], in_container=True,
              pci_gpus=["0000:%02x:00.0" % i for i in range(8)])  # the whole machine's GPUs, not ours
    v = doctor.view(ev)
    assert (v["gpu_count"], v["gpu_count_source"]) == (None, None)
    assert "fewer_gpus_than_rented" not in codes(doctor.diagnose(ev))
    ev["pci_gpus"] = None
    assert doctor.count_gpus(ev, doctor.view(ev)) == (None, None)


def test_nvml_that_works_still_counts_first():
    ev = healthy()
    ev["pci_gpus"] = ["0000:17:00.0"]
    ev["device_nodes"] = ev["device_nodes"] + ["/dev/nvidia2"]
    assert doctor.count_gpus(ev, doctor.view(ev)) == (2, "nvml")
