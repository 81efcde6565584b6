"""module_utils/gpufleet/host/cuda/toolkit.py and the modules split from it (read, find, links, layout) on
real temporary trees (real files, real symlinks) and recorded outputs.

Layouts mirror what the vendors install: NVIDIA's packages put /usr/local/cuda-X.Y/targets/x86_64-linux/lib
with lib64 -> targets/x86_64-linux/lib and /usr/local/cuda -> /etc/alternatives/cuda -> /usr/local/cuda-X.Y;
Debian's nvidia-cuda-toolkit has /usr/lib/cuda and libcudart.so.11.0 -> libcudart.so.11.8.89 in the multiarch
dir; pip's nvidia-cuda-runtime-cu12 has nvidia/cuda_runtime/lib/libcudart.so.12.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from gpufleet.host.cuda import find as cudafind
from gpufleet.host.cuda import layout as cudalayout
from gpufleet.host.cuda import links as cudalinks
from gpufleet.host.cuda import read as cudaread
from gpufleet.host.cuda import toolkit as cudatk

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "cuda"


# ---------------------------------------------------------------- tree builders

def write(root, path, text=""):
    p = Path(str(root) + path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def link(root, path, target):
    p = Path(str(root) + path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_symlink():
        p.unlink()
    os.symlink(target, str(p))


def local_toolkit(root, mm, full, cudart, version_file="json"):
    base = "/usr/local/cuda-%s" % mm
    lib = base + "/targets/x86_64-linux/lib"
    major = cudart.split(".")[0]
    soname = "libcudart.so.%s" % ("11.0" if major == "11" else major)
    write(root, "%s/libcudart.so.%s" % (lib, cudart), "ELF")
    link(root, "%s/%s" % (lib, soname), "libcudart.so.%s" % cudart)
    link(root, "%s/libcudart.so" % lib, soname)
    write(root, "%s/libnvJitLink.so.%s" % (lib, major), "ELF") if major != "11" else None
    link(root, base + "/lib64", "targets/x86_64-linux/lib")
    write(root, base + "/bin/nvcc", "#!/bin/sh\n")
    if version_file == "json":
        write(root, base + "/version.json", json.dumps({"cuda": {"name": "CUDA SDK", "version": full}}))
    elif version_file == "txt":
        write(root, base + "/version.txt", "CUDA Version %s\n" % full)
    return base


def alternatives(root, target, mode="manual", choices=()):
    link(root, "/etc/alternatives/cuda", target)
    link(root, "/usr/local/cuda", "/etc/alternatives/cuda")
    body = "%s\n/usr/local/cuda\n\n" % mode
    for path, prio in choices:
        body += "%s\n%d\n" % (path, prio)
    write(root, "/var/lib/dpkg/alternatives/cuda", body + "\n")


def debian_toolkit(root, cudart="11.8.89", version_txt=None, with_root=True, nvcc=True):
    lib = "/usr/lib/x86_64-linux-gnu"
    major = cudart.split(".")[0]
    soname = "libcudart.so.%s" % ("11.0" if major == "11" else major)
    write(root, "%s/libcudart.so.%s" % (lib, cudart), "ELF")
    link(root, "%s/%s" % (lib, soname), "libcudart.so.%s" % cudart)
    if with_root:
        (Path(str(root) + "/usr/lib/cuda/bin")).mkdir(parents=True, exist_ok=True)
        link(root, "/usr/lib/cuda/include", "../../include")
    if version_txt:
        write(root, "/usr/lib/cuda/version.txt", version_txt)
    if nvcc:
        write(root, "/usr/bin/nvcc", "#!/bin/sh\n")


def pip_runtime(root, site, dist_version, soname="libcudart.so.12", suffix="cu12"):
    write(root, "%s/nvidia/cuda_runtime/lib/%s" % (site, soname), "ELF")
    write(root, "%s/nvidia/__init__.py" % site)
    write(root, "%s/nvidia_cuda_runtime_%s-%s.dist-info/METADATA" % (site, suffix, dist_version),
          "Metadata-Version: 2.1\nName: nvidia-cuda-runtime-%s\nVersion: %s\nSummary: CUDA Runtime native "
          "Libraries\n" % (suffix, dist_version))


def two_toolkits_wrong_link(root):
    """11.8 and 12.4 from NVIDIA's packages, /usr/local/cuda left at 11.8 (manual alternative)."""
    local_toolkit(root, "11.8", "11.8.0", "11.8.89")
    local_toolkit(root, "12.4", "12.4.1", "12.4.127")
    link(root, "/usr/local/cuda-12", "/etc/alternatives/cuda-12")
    link(root, "/etc/alternatives/cuda-12", "/usr/local/cuda-12.4")
    alternatives(root, "/usr/local/cuda-11.8", "manual", [("/usr/local/cuda-11.8", 118), ("/usr/local/cuda-12.4", 124)])
    cuda_conf(root)


def cuda_conf(root):
    """NVIDIA's cuda-toolkit-config-common: the loader finds the toolkit behind /usr/local/cuda."""
    write(root, "/etc/ld.so.conf.d/000_cuda.conf", "/usr/local/cuda/targets/x86_64-linux/lib\n")


def collect(root, **kw):
    return cudalayout.collect(cudaread.HostFS(str(root)), **kw)


def codes(facts):
    return [p["code"] for p in facts["problems"]]


def by_kind(facts, kind):
    return [t for t in facts["toolkits"] if t["kind"] == kind]


# ---------------------------------------------------------------- HostFS

def test_hostfs_resolves_absolute_links_inside_root(tmp_path):
    two_toolkits_wrong_link(tmp_path)
    fs = cudaread.HostFS(str(tmp_path))
    assert fs.realpath("/usr/local/cuda") == "/usr/local/cuda-11.8"
    assert fs.realpath("/usr/local/cuda/lib64/libcudart.so.11.0") == \
        "/usr/local/cuda-11.8/targets/x86_64-linux/lib/libcudart.so.11.8.89"
    assert fs.link_chain("/usr/local/cuda") == ["/usr/local/cuda", "/etc/alternatives/cuda", "/usr/local/cuda-11.8"]
    assert fs.is_link("/usr/local/cuda") and fs.is_dir("/usr/local/cuda") and fs.exists("/usr/local/cuda/bin/nvcc")
    assert fs.glob("/usr/local/cuda-*/version.json") == ["/usr/local/cuda-11.8/version.json",
                                                         "/usr/local/cuda-12.4/version.json",
                                                         "/usr/local/cuda-12/version.json"]  # alias link
    # the host's own /etc/alternatives is never consulted
    assert not fs.exists("/nonexistent/x")


def test_hostfs_link_loop_and_dangling(tmp_path):
    link(tmp_path, "/a", "/b")
    link(tmp_path, "/b", "/a")
    link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-12.1")
    fs = cudaread.HostFS(str(tmp_path))
    assert fs.realpath("/a") is None and not fs.exists("/a") and fs.lexists("/a")
    assert fs.realpath("/usr/local/cuda") == "/usr/local/cuda-12.1"
    assert fs.is_link("/usr/local/cuda") and not fs.exists("/usr/local/cuda")


def test_hostfs_root_slash_maps_to_itself():
    fs = cudaread.HostFS("/")
    assert fs.host_to_os("/etc/environment") == "/etc/environment"
    assert fs.realpath("/") == "/"


# ---------------------------------------------------------------- recorded outputs

@pytest.mark.parametrize("path", sorted(FIX.glob("nvcc-version_*.txt")), ids=lambda p: p.name)
def test_parse_nvcc_version_recorded(path):
    expected = re.match(r"nvcc-version_(\d+\.\d+\.\d+)_", path.name).group(1)
    parsed = cudaread.parse_nvcc_version(path.read_text())
    assert parsed["version"] == expected
    assert parsed["release"] == cudatk.major_minor(expected)


def test_parse_version_json_windows_fixture():
    # real version.json of a CUDA 12.8.2 install: "cuda" is the SDK; cuda_cudart 12.8.90 is not the toolkit
    assert cudaread.parse_version_json((FIX / "cuda-12.8.2_windows_version.json").read_text()) == "12.8.2"
    assert cudaread.parse_version_json("{not json") is None
    assert cudaread.parse_version_json('{"cuda_cudart": {"version": "12.8.90"}}') is None


def test_version_json_fixture_in_tree(tmp_path):
    base = "/usr/local/cuda-12.8"
    write(tmp_path, base + "/version.json", (FIX / "cuda-12.8.2_windows_version.json").read_text())
    write(tmp_path, base + "/bin/nvcc")
    tk = by_kind(collect(tmp_path), "local")[0]
    assert (tk["version"], tk["major_minor"], tk["source_of_version"]) == ("12.8.2", "12.8", "version.json")
    assert tk["nvcc"] == base + "/bin/nvcc" and tk["libcudart"] is None


def test_parse_ldconfig_p_recorded_fixture():
    entries = cudaread.parse_ldconfig_p((FIX / "ldconfig-p-grep-cuda_cuda-12.0_Netflix-vmaf-1176.txt").read_text())
    assert len(entries) == 13  # the "ldconfig -p | grep cuda" prompt line is not an entry
    nvrtc = [e for e in entries if e["soname"] == "libnvrtc.so.12"][0]
    assert nvrtc == {"soname": "libnvrtc.so.12", "arch": "libc6,x86-64",
                     "path": "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.12"}
    assert cudalinks._libcudart_map(entries) == {}


def test_parse_ldconfig_links_recorded_fixture():
    links = cudaread.parse_ldconfig_links(
        (FIX / "neuropoly_nvverify_cuda-toolkit-ldconfig-links_510.73.05.txt").read_text())
    assert links["libcudart.so.11.0"] == "libcudart.so.11.5.117"
    assert links["libcuda.so.1"] == "libcuda.so.510.73.05"
    # Ubuntu's libcudart11.0 package: the soname says 11.0, the file says 11.5
    assert cudaread.libcudart_version("libcudart.so.11.0") == "11"
    assert cudaread.libcudart_version(links["libcudart.so.11.0"]) == "11.5.117"
    assert cudatk.major_minor(cudaread.libcudart_version(links["libcudart.so.11.0"])) == "11.5"


@pytest.mark.skipif(not (shutil.which("ldconfig") or os.path.exists("/sbin/ldconfig")), reason="no ldconfig")
def test_parse_ldconfig_p_of_this_machine():
    exe = shutil.which("ldconfig") or "/sbin/ldconfig"
    out = subprocess.run([exe, "-p"], capture_output=True, text=True, check=True).stdout
    header = re.match(r"(\d+) libs found", out)
    entries = cudaread.parse_ldconfig_p(out)
    assert header and len(entries) == int(header.group(1))
    assert all(e["path"].startswith("/") and ".so" in e["soname"] for e in entries)


def test_ldconfig_fixture_through_runner_flags_missing_libcudart(tmp_path):
    local_toolkit(tmp_path, "12.0", "12.0.1", "12.0.146")
    link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-12.0")
    text = (FIX / "ldconfig-p-grep-cuda_cuda-12.0_Netflix-vmaf-1176.txt").read_text()
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, text, ""

    facts = collect(tmp_path, run=run)
    assert ["ldconfig", "-p"] in calls
    cache = facts["ldconfig"]["cache"]
    assert cache["source"] == "ldconfig -p" and cache["libs"] == 13 and cache["libcudart"] == {}
    assert codes(facts) == ["libcudart_unresolved"]


def test_ldconfig_runner_maps_sonames_to_toolkits(tmp_path):
    two_toolkits_wrong_link(tmp_path)
    out = ("2 libs found in cache `/etc/ld.so.cache'\n"
           "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda-12/targets/x86_64-linux/lib/libcudart.so.12\n"
           "\tlibcudart.so.11.0 (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.11.0\n")
    facts = collect(tmp_path, run=lambda argv: (0, out, ""), driver_cuda="12.4")
    res = {r["soname"]: r for r in facts["ldconfig"]["libcudart"]}
    assert res["libcudart.so.12"]["toolkit_version"] == "12.4.1"
    assert res["libcudart.so.12"]["resolved"].endswith("cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127")
    assert res["libcudart.so.11.0"]["toolkit_root"] == "/usr/local/cuda-11.8"
    assert "libcudart_unresolved" not in codes(facts)


def test_ldconfig_runner_failure_falls_back_to_scan(tmp_path):
    local_toolkit(tmp_path, "12.4", "12.4.1", "12.4.127")
    link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-12.4")
    write(tmp_path, "/etc/ld.so.conf.d/000_cuda.conf", "/usr/local/cuda/targets/x86_64-linux/lib\n")
    facts = collect(tmp_path, run=lambda argv: None)
    cache = facts["ldconfig"]["cache"]
    assert cache["error"] == "ldconfig not found" and cache["source"] == "ld.so.conf scan"
    assert cache["libcudart"] == {"libcudart.so.12": ["/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.12"]}
    assert facts["problems"] == []


# ---------------------------------------------------------------- layouts

def test_two_local_toolkits_link_at_old_one_driver_supports_newer(tmp_path):
    two_toolkits_wrong_link(tmp_path)
    facts = collect(tmp_path, driver_cuda="12.4")
    local = {t["major_minor"]: t for t in by_kind(facts, "local")}
    assert sorted(local) == ["11.8", "12.4"]  # /usr/local/cuda-12 is an alias link, not a toolkit
    t12 = local["12.4"]
    assert t12["version"] == "12.4.1" and t12["source_of_version"] == "version.json"
    assert t12["libcudart"] == "/usr/local/cuda-12.4/lib64/libcudart.so.12"
    assert t12["libcudart_real"] == "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127"
    assert t12["nvcc"] == "/usr/local/cuda-12.4/bin/nvcc"
    assert local["11.8"]["libcudart"].endswith("libcudart.so.11.0")

    link_ = facts["cuda_symlink"]
    assert link_["is_link"] and link_["exists"] and not link_["dangling"] and link_["via_alternatives"]
    assert link_["target"] == "/etc/alternatives/cuda" and link_["resolved"] == "/usr/local/cuda-11.8"
    assert link_["version"] == "11.8.0"
    alt = facts["alternatives"]["cuda"]
    assert alt["mode"] == "manual" and alt["target"] == "/usr/local/cuda-11.8"
    assert alt["alternatives"] == [{"path": "/usr/local/cuda-11.8", "priority": 118},
                                   {"path": "/usr/local/cuda-12.4", "priority": 124}]
    assert facts["alternatives"]["cuda-12"]["resolved"] == "/usr/local/cuda-12.4"

    assert facts["chosen"]["root"] == "/usr/local/cuda-12.4" and facts["chosen"]["rule"] == "driver_compatible"
    assert "section 3.2 rule 1" in facts["chosen"]["reasons"][0]
    # while /usr/local/cuda is 11.8, the loader has no libcudart.so.12 (000_cuda.conf follows the link)
    assert codes(facts) == ["cuda_link_wrong_target", "libcudart_unresolved"]
    wrong, unresolved = facts["problems"]
    assert wrong["expected"] == "/usr/local/cuda-12.4" and "11.8.0" in wrong["message"]
    assert unresolved["soname"] == "libcudart.so.12"
    assert facts["ldconfig"]["cache"]["libcudart"] == {
        "libcudart.so.11.0": ["/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.11.0"]}


def test_link_already_right_has_no_problem(tmp_path):
    two_toolkits_wrong_link(tmp_path)
    alternatives(tmp_path, "/usr/local/cuda-12.4", "auto",
                 [("/usr/local/cuda-11.8", 118), ("/usr/local/cuda-12.4", 124)])
    facts = collect(tmp_path, driver_cuda="12.6")
    assert facts["chosen"]["major_minor"] == "12.4" and facts["problems"] == []


def test_dangling_link(tmp_path):
    local_toolkit(tmp_path, "12.4", "12.4.1", "12.4.127")
    link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-12.1")  # 12.1 was removed, the link stayed
    cuda_conf(tmp_path)
    facts = collect(tmp_path)
    link_ = facts["cuda_symlink"]
    assert link_["dangling"] and not link_["exists"] and link_["target"] == "/usr/local/cuda-12.1"
    assert link_["resolved"] is None and link_["version"] is None
    assert codes(facts) == ["cuda_link_dangling", "libcudart_unresolved"]
    assert facts["problems"][0]["expected"] == "/usr/local/cuda-12.4"


def test_missing_link(tmp_path):
    local_toolkit(tmp_path, "12.4", "12.4.1", "12.4.127")
    facts = collect(tmp_path)
    assert not facts["cuda_symlink"]["lexists"] and not facts["cuda_symlink"]["exists"]
    assert codes(facts) == ["cuda_link_missing", "libcudart_unresolved"]
    assert facts["chosen"]["rule"] == "highest"


def test_real_directory_at_usr_local_cuda(tmp_path):
    write(tmp_path, "/usr/local/cuda/version.txt", "CUDA Version 10.2.89\n")
    write(tmp_path, "/usr/local/cuda/bin/nvcc")
    facts = collect(tmp_path)
    tk = by_kind(facts, "local")[0]
    assert tk["root"] == "/usr/local/cuda" and tk["version"] == "10.2.89" and tk["source_of_version"] == "version.txt"
    assert facts["cuda_symlink"]["version"] == "10.2.89"
    # a toolkit with no libraries at all: the loader cannot find a CUDA runtime either
    assert codes(facts) == ["cuda_link_not_a_link", "libcudart_unresolved"]


def test_version_sources_txt_and_dir_name(tmp_path):
    local_toolkit(tmp_path, "10.2", "10.2.89", "10.2.89", version_file="txt")
    (tmp_path / "usr/local/cuda-9.0/bin").mkdir(parents=True)
    write(tmp_path, "/usr/local/cuda-9.0/bin/nvcc")
    facts = collect(tmp_path)
    got = {t["root"]: (t["version"], t["source_of_version"]) for t in facts["toolkits"]}
    assert got == {"/usr/local/cuda-10.2": ("10.2.89", "version.txt"), "/usr/local/cuda-9.0": ("9.0", "dir_name")}


def test_debian_packaged_11_8_only(tmp_path):
    debian_toolkit(tmp_path, "11.8.89")
    facts = collect(tmp_path, driver_cuda="12.2")
    [tk] = facts["toolkits"]
    assert tk["kind"] == "debian" and tk["root"] == "/usr/lib/cuda"
    assert tk["version"] == "11.8.89" and tk["major_minor"] == "11.8" and tk["source_of_version"] == "libcudart"
    assert tk["libcudart"] == "/usr/lib/x86_64-linux-gnu/libcudart.so.11.0" and tk["nvcc"] == "/usr/bin/nvcc"
    assert facts["chosen"]["root"] == "/usr/lib/cuda"
    assert codes(facts) == ["cuda_link_missing"]
    # the loader finds Debian's libcudart in the multiarch dir without any ld.so.conf entry
    assert facts["ldconfig"]["cache"]["libcudart"] == {
        "libcudart.so.11.0": ["/usr/lib/x86_64-linux-gnu/libcudart.so.11.0"]}


def test_debian_version_txt_wins_and_nvcc_runner_fallback(tmp_path):
    debian_toolkit(tmp_path, "11.8.89", version_txt="CUDA Version 11.8.89\nCUDA Patch Version 11.8.89.1\n")
    assert by_kind(collect(tmp_path), "debian")[0]["source_of_version"] == "version.txt"

    other = tmp_path / "other"
    write(other, "/usr/lib/x86_64-linux-gnu/libcudart.so.12", "ELF")  # soname only, no versioned file
    write(other, "/usr/bin/nvcc")
    nvcc_out = (FIX / "nvcc-version_12.4.131_pytorch-134929.txt").read_text()
    seen = []

    def run(argv):
        seen.append(argv)
        return (0, nvcc_out, "") if argv[-1] == "--version" else None

    tk = by_kind(collect(other, run=run), "debian")[0]
    assert (tk["version"], tk["source_of_version"]) == ("12.4.131", "nvcc --version")
    assert seen[0] == [str(other) + "/usr/bin/nvcc", "--version"]
    assert tk["root"] == "/usr/lib/x86_64-linux-gnu"  # no /usr/lib/cuda: libcudart12 without the toolkit
    tk = by_kind(collect(other), "debian")[0]
    assert (tk["version"], tk["major_minor"], tk["source_of_version"]) == ("12", None, "libcudart soname (major only)")
    # Debian's libcudart12 alone (no /usr/lib/cuda) is a runtime, never a target for /usr/local/cuda
    write(other, "/usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127", "ELF")
    (other / "usr/lib/x86_64-linux-gnu/libcudart.so.12").unlink()
    link(other, "/usr/lib/x86_64-linux-gnu/libcudart.so.12", "libcudart.so.12.4.127")
    facts = collect(other, driver_cuda="12.4")
    assert by_kind(facts, "debian")[0]["major_minor"] == "12.4" and facts["chosen"] is None


def test_pip_runtime_cu12_only(tmp_path):
    site = "/opt/gpufleet/venv/lib/python3.11/site-packages"
    pip_runtime(tmp_path, site, "12.4.127")
    facts = collect(tmp_path, site_packages=cudafind.default_site_packages(["/usr/lib/python3/dist-packages"]))
    [tk] = facts["toolkits"]
    assert tk["kind"] == "pip" and tk["version"] == "12.4.127" and tk["major_minor"] == "12.4"
    assert tk["source_of_version"] == "METADATA" and tk["nvcc"] is None
    assert tk["libcudart"] == site + "/nvidia/cuda_runtime/lib/libcudart.so.12"
    assert tk["root"] == site + "/nvidia/cuda_runtime" and tk["site_packages"] == site
    # pip's runtime is no target for /usr/local/cuda, and nothing is wrong with the host
    assert facts["chosen"] is None and facts["problems"] == []


def test_pip_runtime_cu11_and_cu12_side_by_side(tmp_path):
    pip_runtime(tmp_path, "/venv11/site", "11.8.89", "libcudart.so.11.0", "cu11")
    pip_runtime(tmp_path, "/venv12/site", "12.1.105")
    link(tmp_path, "/venv12/alias", "/venv12/site")
    facts = collect(tmp_path, site_packages=["/venv11/site", "/venv12/site", "/venv12/alias", "/missing"])
    got = sorted((t["version"], os.path.basename(t["libcudart"])) for t in facts["toolkits"])
    assert got == [("11.8.89", "libcudart.so.11.0"), ("12.1.105", "libcudart.so.12")]


def test_ld_library_path_shadowing(tmp_path):
    local_toolkit(tmp_path, "11.8", "11.8.0", "11.8.89")
    link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-11.8")
    site = "/opt/gpufleet/venv/lib/python3.11/site-packages"
    pip_runtime(tmp_path, site, "12.4.127")
    cuda_conf(tmp_path)
    write(tmp_path, "/etc/environment", 'PATH="/usr/local/sbin:/usr/bin"\nLD_LIBRARY_PATH=/usr/local/cuda-11.8/lib64\n')
    write(tmp_path, "/etc/profile.d/cuda.sh",
          "# from NVIDIA's install guide\n"
          "# export LD_LIBRARY_PATH=/commented/out\n"
          "export PATH=/usr/local/cuda-11.8/bin${PATH:+:${PATH}}\n"
          "export LD_LIBRARY_PATH=/usr/local/cuda-11.8/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}\n")
    write(tmp_path, "/etc/bash.bashrc", 'export LD_LIBRARY_PATH="/usr/local/cuda/lib64:$LD_LIBRARY_PATH"\n')
    write(tmp_path, "/etc/profile.d/other.sh", "export EDITOR=vi\n")
    facts = collect(tmp_path, site_packages=[site],
                    environ_ld_library_path=site + "/nvidia/cudnn/lib:/opt/conda/lib")
    llp = facts["ld_library_path"]
    rows = [(e["source"], e["path"], e["cuda"], e["shadowing"]) for e in llp["entries"] if not e["inherited"]]
    assert rows == [
        ("environment", site + "/nvidia/cudnn/lib", True, False),  # pip's own libraries: fine
        ("environment", "/opt/conda/lib", False, False),
        ("/etc/environment:2", "/usr/local/cuda-11.8/lib64", True, True),
        ("/etc/bash.bashrc:1", "/usr/local/cuda/lib64", True, True),
        ("/etc/profile.d/cuda.sh:4", "/usr/local/cuda-11.8/lib64", True, True),
    ]
    assert llp["shadowing"] is True
    e = [x for x in llp["entries"] if x["source"] == "/etc/environment:2"][0]
    assert e["libcudart"] and e["toolkit_root"] == "/usr/local/cuda-11.8" and e["file"] == "/etc/environment"
    assert sum(1 for x in llp["entries"] if x["inherited"]) == 2
    assert codes(facts) == ["ld_library_path_shadowing"]
    assert "__nvJitLink" in facts["problems"][0]["message"] and "section 2.3" in facts["problems"][0]["message"]


def test_ld_library_path_dir_without_cuda_in_name_but_with_libnvjitlink(tmp_path):
    write(tmp_path, "/opt/libs/libnvJitLink.so.12", "ELF")
    facts = collect(tmp_path, environ_ld_library_path="/opt/libs")
    [e] = facts["ld_library_path"]["entries"]
    assert e["nvjitlink"] and e["shadowing"]


def test_ld_so_conf_d_two_cuda_files_for_different_toolkits(tmp_path):
    two_toolkits_wrong_link(tmp_path)
    write(tmp_path, "/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    write(tmp_path, "/etc/ld.so.conf.d/000_cuda.conf", "/usr/local/cuda/targets/x86_64-linux/lib\n")
    write(tmp_path, "/etc/ld.so.conf.d/988_cuda-12.conf", "# cuda-12\n/usr/local/cuda-12/targets/x86_64-linux/lib\n")
    write(tmp_path, "/etc/ld.so.conf.d/x86_64-linux-gnu.conf", "/usr/local/lib/x86_64-linux-gnu\n")
    write(tmp_path, "/etc/ld.so.conf.d/cuda.conf.bak", "/usr/local/cuda-11.8/lib64\n")
    facts = collect(tmp_path, driver_cuda="12.4")
    files = {f["file"]: f for f in facts["ldconfig"]["conf_files"]}
    assert sorted(files) == ["/etc/ld.so.conf.d/000_cuda.conf", "/etc/ld.so.conf.d/988_cuda-12.conf",
                             "/etc/ld.so.conf.d/cuda.conf.bak"]
    assert files["/etc/ld.so.conf.d/cuda.conf.bak"]["active"] is False  # ldconfig reads *.conf only
    assert files["/etc/ld.so.conf.d/988_cuda-12.conf"]["lines"] == ["/usr/local/cuda-12/targets/x86_64-linux/lib"]
    assert files["/etc/ld.so.conf.d/000_cuda.conf"]["entries"][0]["toolkit_version"] == "11.8.0"
    assert sorted(codes(facts)) == ["cuda_link_wrong_target", "ldconfig_cuda_entries_multiple"]
    multi = [p for p in facts["problems"] if p["code"] == "ldconfig_cuda_entries_multiple"][0]
    assert multi["toolkits"] == ["/usr/local/cuda-11.8", "/usr/local/cuda-12.4"]
    # scan order: /usr/local/cuda (-> 11.8) first, then cuda-12
    assert facts["ldconfig"]["cache"]["libcudart"] == {
        "libcudart.so.11.0": ["/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.11.0"],
        "libcudart.so.12": ["/usr/local/cuda-12/targets/x86_64-linux/lib/libcudart.so.12"]}


def test_ld_so_conf_d_two_files_same_toolkit_is_fine(tmp_path):
    # NVIDIA's packages: 000_cuda.conf (/usr/local/cuda) and 988_cuda-12.conf (/usr/local/cuda-12), both 12.4
    local_toolkit(tmp_path, "12.4", "12.4.1", "12.4.127")
    alternatives(tmp_path, "/usr/local/cuda-12.4", "auto", [("/usr/local/cuda-12.4", 124)])
    link(tmp_path, "/usr/local/cuda-12", "/etc/alternatives/cuda-12")
    link(tmp_path, "/etc/alternatives/cuda-12", "/usr/local/cuda-12.4")
    write(tmp_path, "/etc/ld.so.conf.d/000_cuda.conf", "/usr/local/cuda/targets/x86_64-linux/lib\n")
    write(tmp_path, "/etc/ld.so.conf.d/988_cuda-12.conf", "/usr/local/cuda-12/targets/x86_64-linux/lib\n")
    write(tmp_path, "/etc/ld.so.conf.d/gpu.conf", "/usr/local/nvidia/lib64\n")  # driver dir, not there
    facts = collect(tmp_path, driver_cuda="12.4")
    assert len(facts["ldconfig"]["conf_files"]) == 3
    assert facts["problems"] == []


def test_pinned_not_installed(tmp_path):
    two_toolkits_wrong_link(tmp_path)
    facts = collect(tmp_path, pinned="12.6", driver_cuda="12.8")
    assert facts["chosen"] is None
    assert codes(facts) == ["pinned_not_installed"]
    assert "12.6" in facts["problems"][0]["message"] and "11.8, 12.4" in facts["problems"][0]["message"]
    with pytest.raises(cudatk.CudaTkError) as err:
        cudatk.choose_target(facts["toolkits"], pinned="12.6")
    assert err.value.code == "pinned_not_installed"


def test_pinned_installed_overrides_driver(tmp_path):
    two_toolkits_wrong_link(tmp_path)
    alternatives(tmp_path, "/usr/local/cuda-12.4", "auto")
    facts = collect(tmp_path, pinned="11.8", driver_cuda="12.4")
    assert facts["chosen"]["rule"] == "pinned" and facts["chosen"]["root"] == "/usr/local/cuda-11.8"
    assert codes(facts) == ["cuda_link_wrong_target", "libcudart_unresolved"]


# ---------------------------------------------------------------- choose_target (plain data)

def tk(kind, version, root=None):
    return {"kind": kind, "version": version, "major_minor": cudatk.major_minor(version),
            "root": root or "/usr/local/cuda-%s" % cudatk.major_minor(version), "libcudart": None}


TKS = [tk("local", "11.8.0"), tk("local", "12.1.1"), tk("local", "12.4.1"), tk("pip", "12.8.90", "/site/nvidia")]


@pytest.mark.parametrize("driver, root, rule", [
    ("12.4", "/usr/local/cuda-12.4", "driver_compatible"),
    ("12.2", "/usr/local/cuda-12.1", "driver_compatible"),      # rule 1: not newer than the driver
    ("13.0", "/usr/local/cuda-12.4", "driver_compatible"),
    ("11.4", "/usr/local/cuda-11.8", "minor_version_compat"),   # rule 2: same major, limited features
    ("10.2", "/usr/local/cuda-12.4", "highest"),                # nothing fits: highest, says so
    (None, "/usr/local/cuda-12.4", "highest"),
])
def test_choose_target_rules(driver, root, rule):
    chosen = cudatk.choose_target(TKS, driver_cuda=driver)
    assert (chosen["root"], chosen["rule"]) == (root, rule)
    assert chosen["reasons"]


def test_choose_target_minor_compat_cites_reference():
    chosen = cudatk.choose_target([tk("local", "12.4.1")], driver_cuda="12.0")
    assert chosen["rule"] == "minor_version_compat" and "section 3.2 rule 2" in chosen["reasons"][0]
    assert "PTX" in chosen["reasons"][0]


def test_choose_target_prefers_local_over_debian_and_ignores_pip():
    deb = tk("debian", "12.4.131", "/usr/lib/cuda")
    assert cudatk.choose_target([deb, tk("local", "12.4.1")], pinned="12.4")["kind"] == "local"
    assert cudatk.choose_target([deb, tk("local", "11.8.0")], driver_cuda="12.4")["root"] == "/usr/lib/cuda"
    assert cudatk.choose_target([tk("pip", "12.4.127", "/s")]) is None
    assert cudatk.choose_target([]) is None


# ---------------------------------------------------------------- small parsers

def test_parse_dpkg_alternatives_with_slaves():
    text = ("auto\n/usr/local/cuda\ncuda-bin\n/usr/local/bin/cuda-bin\n\n"
            "/usr/local/cuda-12.4\n124\n/usr/local/cuda-12.4/bin\n/usr/local/cuda-11.8\n118\n\n\n")
    alt = cudaread.parse_dpkg_alternatives(text)
    assert alt["mode"] == "auto" and alt["slaves"] == [{"name": "cuda-bin", "link": "/usr/local/bin/cuda-bin"}]
    assert alt["alternatives"] == [{"path": "/usr/local/cuda-12.4", "priority": 124},
                                   {"path": "/usr/local/cuda-11.8", "priority": 118}]
    assert cudaread.parse_dpkg_alternatives("") is None


@pytest.mark.parametrize("line, value", [
    ("LD_LIBRARY_PATH=/usr/local/cuda/lib64", "/usr/local/cuda/lib64"),
    ('export LD_LIBRARY_PATH="/a:/b:$LD_LIBRARY_PATH"', "/a:/b:$LD_LIBRARY_PATH"),
    ("  export LD_LIBRARY_PATH='/a' # comment", "/a"),
    ("declare -x LD_LIBRARY_PATH=/x;", "/x"),
])
def test_parse_ld_library_path_assignments(line, value):
    assert cudaread.parse_ld_library_path_assignments(line) == [(1, value)]


def test_parse_ld_library_path_ignores_other_lines():
    text = "# LD_LIBRARY_PATH=/no\nMY_LD_LIBRARY_PATH=/no\necho $LD_LIBRARY_PATH\n"
    assert cudaread.parse_ld_library_path_assignments(text) == []


def test_ld_so_conf_d_two_toolkits_of_one_major_clash(tmp_path):
    local_toolkit(tmp_path, "12.1", "12.1.1", "12.1.105")
    local_toolkit(tmp_path, "12.4", "12.4.1", "12.4.127")
    link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-12.4")
    write(tmp_path, "/etc/ld.so.conf.d/cuda-12-1.conf", "/usr/local/cuda-12.1/lib64\n")
    write(tmp_path, "/etc/ld.so.conf.d/cuda-12-4.conf", "/usr/local/cuda-12.4/lib64\n")
    facts = collect(tmp_path, driver_cuda="12.4")
    [multi] = facts["problems"]
    assert multi["code"] == "ldconfig_cuda_entries_multiple" and multi["severity"] == "error"
    assert multi["same_major"] == ["/usr/local/cuda-12.1", "/usr/local/cuda-12.4"]
    # the scan sees 12.1 first: that is the libcudart.so.12 programs get
    assert facts["ldconfig"]["cache"]["libcudart"]["libcudart.so.12"][0] == "/usr/local/cuda-12.1/lib64/libcudart.so.12"


# ---------------------------------------------------------------- is the layout already right (issue 17 item 3)

def tidy_host(root, conf_name, entry):
    """One toolkit (12.4), /usr/local/cuda right, one ld.so.conf.d file naming it, no LD_LIBRARY_PATH."""
    local_toolkit(root, "12.4", "12.4.1", "12.4.127")
    link(root, "/usr/local/cuda", "/usr/local/cuda-12.4")
    write(root, "/etc/ld.so.conf.d/" + conf_name, entry + "\n")


@pytest.mark.parametrize("conf_name,entry", [
    ("000_cuda.conf", "/usr/local/cuda/targets/x86_64-linux/lib"),  # NVIDIA's cuda-toolkit-config-common
    ("cuda.conf", "/usr/local/cuda/lib64"),  # the usual hand-made one
    ("cuda-12-4.conf", "/usr/local/cuda-12.4/targets/x86_64-linux/lib"),  # versioned, as cuda_links writes it
])
def test_a_tidy_layout_is_right_whatever_the_spelling(tmp_path, conf_name, entry):
    tidy_host(tmp_path, conf_name, entry)
    facts = collect(tmp_path, driver_cuda="12.4")
    assert facts["problems"] == []
    assert facts["layout"] == {"link_ok": True, "loader_ok": True, "right": True}


def test_layout_is_not_right_when_the_loader_finds_another_toolkit_first(tmp_path):
    tidy_host(tmp_path, "cuda.conf", "/usr/local/cuda/lib64")
    local_toolkit(tmp_path, "12.1", "12.1.1", "12.1.105")
    write(tmp_path, "/etc/ld.so.conf.d/000-old.conf", "/usr/local/cuda-12.1/lib64\n")  # same soname, read first
    facts = collect(tmp_path, driver_cuda="12.4")
    assert facts["layout"]["link_ok"] is True and facts["layout"]["loader_ok"] is False
    assert "ldconfig_cuda_entries_multiple" in codes(facts)


def test_layout_with_a_wrong_link_or_shadowing_is_not_right(tmp_path):
    two_toolkits_wrong_link(tmp_path)
    facts = collect(tmp_path, driver_cuda="12.4")
    assert facts["layout"]["link_ok"] is False and facts["layout"]["right"] is False
    tidy = tmp_path / "tidy"
    tidy_host(tidy, "cuda.conf", "/usr/local/cuda/lib64")
    pip_runtime(tidy, "/venv", "12.4.127")  # pip's CUDA libraries, which the toolkit dir then shadows
    facts = collect(tidy, driver_cuda="12.4", environ_ld_library_path="/usr/local/cuda/lib64", site_packages=["/venv"])
    assert codes(facts) == ["ld_library_path_shadowing"]
    assert facts["layout"] == {"link_ok": True, "loader_ok": True, "right": False}


def test_no_toolkit_no_verdict(tmp_path):
    write(tmp_path, "/etc/ld.so.conf.d/libc.conf", "/usr/local/lib\n")
    assert collect(tmp_path)["layout"] == {"link_ok": None, "loader_ok": None, "right": None}


def test_path_naming_the_old_toolkit_is_found_and_the_link_is_not(tmp_path):
    """NVIDIA's install-guide lines for 11.8 in profile.d while /usr/local/cuda is 12.4: nvcc is 11.8's."""
    two_toolkits_wrong_link(tmp_path)
    write(tmp_path, "/etc/profile.d/cuda.sh", "export PATH=/usr/local/cuda-11.8/bin${PATH:+:${PATH}}\n")
    write(tmp_path, "/etc/environment", 'PATH="/usr/local/cuda/bin:/usr/bin:/bin"\n')
    facts = collect(tmp_path, driver_cuda="12.4")
    assert facts["path_stale"] == [{"path": "/usr/local/cuda-11.8/bin", "file": "/etc/profile.d/cuda.sh", "line": 1,
                                    "toolkit_root": "/usr/local/cuda-11.8"}]
    p = next(p for p in facts["problems"] if p["code"] == "path_names_other_toolkit")
    assert p["severity"] == "warning" and "CUDA 11.8's" in p["message"]
    write(tmp_path, "/etc/profile.d/cuda.sh", "export PATH=/usr/local/cuda-12.4/bin:$PATH\n")  # the chosen one
    assert collect(tmp_path, driver_cuda="12.4")["path_stale"] == []
