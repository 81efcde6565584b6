"""scripts/test-images on a fresh machine (issue 39), without a fresh machine.

The real script runs with a PATH of stand-ins: no debootstrap anywhere on it (the system one, if any, is out of
reach: the system tools the script needs are linked one by one into a folder of their own), an apt-get that fails
the way Debian's does when two installs overlap ("Could not get lock /var/lib/dpkg/lock-frontend", exit 100) and
that "installs" debootstrap by writing a stand-in of it, a debootstrap that makes a root file system of one file,
and a docker with no registry (every pull fails, as here) that keeps its images in a state folder. On the code
before the fix, the three side-by-side builds each ran apt-get install debootstrap and two of them failed on the
lock, as `scripts/bootstrap && make demo` did on a fresh Debian 12 machine.
"""

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test-images"
RECIPE = re.search(r"^RECIPE=(\S+)$", SCRIPT.read_text(), re.M).group(1)
CODENAMES = {"11": "bullseye", "12": "bookworm", "13": "trixie"}

# What scripts/test-images, scripts/lib.sh and the stand-ins below run, besides the stand-ins and shell builtins.
SYSTEM_TOOLS = ("bash", "awk", "cat", "chmod", "cp", "dirname", "flock", "mkdir", "mktemp", "rm", "seq", "sleep",
                "tail", "tar", "timeout", "tr")

# Each stand-in appends what it was asked to $STATE/events, one line a call, in the order they happened.
APT_GET = r"""#!/bin/bash
# apt-get stand-in: installs hold the dpkg frontend lock for 2 s; an overlapping one fails as Debian's does.
echo "apt-get $*" >>"$STATE/events"
case " $* " in
  *" install "*) ;;
  *) exit 0 ;;
esac
exec 9>>"$STATE/dpkg-lock-frontend"
if ! flock -n 9; then
  echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 1 (apt-get)" >&2
  echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
  exit 100
fi
sleep 2
case " $* " in
  *" debootstrap "*) cp "$STATE/debootstrap.standin" "$STANDIN_BIN/debootstrap"
                     chmod +x "$STANDIN_BIN/debootstrap" ;;
esac
"""

DEBOOTSTRAP = r"""#!/bin/bash
# debootstrap stand-in: debootstrap [--options] SUITE DIR [MIRROR]: DIR gets etc/apt/ and a file naming SUITE.
args=()
for a in "$@"; do
  case "$a" in --*) ;; *) args+=("$a") ;; esac
done
echo "debootstrap ${args[0]}" >>"$STATE/events"
mkdir -p "${args[1]}/etc/apt"
echo "${args[0]}" >"${args[1]}/etc/standin-release"
"""

DOCKER = r"""#!/bin/bash
# docker stand-in: an engine that answers and has no registry. $STATE/images/<tag> holds the image's
# gpufleet.recipe label (empty: none); $STATE/containers/<id> the image a container was created from.
key() { printf '%s' "$1" | tr '/:' '__'; }
img="$STATE/images"; ctr="$STATE/containers"
mkdir -p "$img" "$ctr" "$STATE/imported"
case "$1" in
  info) exit 0 ;;
  pull) echo "docker pull ${!#}" >>"$STATE/events"
        echo "Error response from daemon: Get \"https://registry-1.docker.io/v2/\": no registry here" >&2; exit 1 ;;
  image)
    [ "$2" = inspect ] || { echo "stand-in docker: unexpected: $*" >&2; exit 2; }
    tag=${!#}
    [ -e "$img/$(key "$tag")" ] || { echo "Error: No such image: $tag" >&2; exit 1; }
    cat "$img/$(key "$tag")" ;;
  import)  # import - TAG
    [ "$2" = - ] || { echo "stand-in docker: unexpected: $*" >&2; exit 2; }
    cat >"$STATE/imported/$(key "$3").tar"
    : >"$img/$(key "$3")"
    echo "docker import $3" >>"$STATE/events" ;;
  create)  # create [--entrypoint X] IMAGE CMD...
    shift
    [ "$1" != --entrypoint ] || shift 2
    [ -e "$img/$(key "$1")" ] || { echo "Unable to find image '$1' locally" >&2; exit 125; }
    id="c$$"
    echo "$1" >"$ctr/$id"
    echo "$id" ;;
  cp|start)
    [ -e "$ctr/${!#}" ] || [ -e "$ctr/${3%%:*}" ] || { echo "No such container" >&2; exit 1; } ;;
  commit)  # commit [--change C]... ID TAG
    shift; label=""; pos=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --change) case "$2" in "LABEL gpufleet.recipe="*) label=${2#LABEL gpufleet.recipe=} ;; esac; shift 2 ;;
        *) pos+=("$1"); shift ;;
      esac
    done
    [ -e "$ctr/${pos[0]}" ] || { echo "No such container: ${pos[0]}" >&2; exit 1; }
    printf '%s' "$label" >"$img/$(key "${pos[1]}")"
    echo "docker commit ${pos[1]} recipe=$label" >>"$STATE/events" ;;
  rm) rm -f "$ctr/$2" ;;
  rmi) rm -f "$img/$(key "$2")" ;;
  *) echo "stand-in docker: unexpected: $*" >&2; exit 2 ;;
esac
"""


def _script(path, text):
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def machine(tmp_path):
    """A fresh machine's PATH: the stand-ins, the system tools linked one by one, no debootstrap."""
    bin_dir, tools, state = tmp_path / "bin", tmp_path / "tools", tmp_path / "state"
    for d in (bin_dir, tools, state):
        d.mkdir()
    for name in SYSTEM_TOOLS:
        real = shutil.which(name)
        assert real, "%s is not on this machine's PATH" % name
        (tools / name).symlink_to(real)
    _script(bin_dir / "apt-get", APT_GET)
    _script(bin_dir / "docker", DOCKER)
    (state / "debootstrap.standin").write_text(DEBOOTSTRAP)
    (state / "events").touch()
    path = "%s:%s" % (bin_dir, tools)
    assert shutil.which("debootstrap", path=path) is None

    def run(*releases, uid=0):
        _script(bin_dir / "id", '#!/bin/bash\n[ "$1" = -u ] && echo %d\n' % uid)
        env = {"PATH": path, "HOME": str(tmp_path), "LC_ALL": "C", "STATE": str(state), "STANDIN_BIN": str(bin_dir)}
        proc = subprocess.run([str(SCRIPT), *releases], env=env, capture_output=True, text=True, timeout=120)
        return proc, (state / "events").read_text().splitlines()

    run.state = state
    run.bin = bin_dir
    return run


def test_fresh_root_machine_installs_debootstrap_once_before_the_parallel_builds(machine):
    proc, events = machine("11", "12", "13")

    assert proc.returncode == 0, proc.stderr
    installs = [e for e in events if e.startswith("apt-get") and " install " in e + " "]
    assert installs == ["apt-get install -y -qq debootstrap"], events
    assert "Could not get lock" not in proc.stderr
    # Installed before the first build began: every pull and debootstrap comes after it.
    first_build = min(i for i, e in enumerate(events) if e.startswith(("docker pull", "debootstrap")))
    assert events.index(installs[0]) < first_build, events
    assert sorted(e for e in events if e.startswith("debootstrap")) == [
        "debootstrap bookworm", "debootstrap bullseye", "debootstrap trixie"]
    assert sorted(e for e in events if e.startswith("docker import")) == [
        "docker import gpufleet/debian:%s-base" % n for n in ("11", "12", "13")]
    for n, code in CODENAMES.items():
        # The imported root file system is the one debootstrap made for that release, apt pointed at a mirror.
        with tarfile.open(machine.state / "imported" / ("gpufleet_debian_%s-base.tar" % n)) as tar:
            assert tar.extractfile("./etc/standin-release").read().decode().strip() == code
            assert (" %s main" % code) in tar.extractfile("./etc/apt/sources.list").read().decode()
        assert (machine.state / "images" / ("gpufleet_debian_%s" % n)).read_text() == RECIPE
        assert "gpufleet/debian:%s is ready" % n in proc.stderr


def test_second_run_uses_the_cache_and_installs_nothing(machine):
    machine("11", "12", "13")
    (machine.state / "events").write_text("")

    proc, events = machine("11", "12", "13")

    assert proc.returncode == 0, proc.stderr
    assert events == []
    assert proc.stderr.count("is cached") == 3


def test_cached_images_need_no_debootstrap(machine):
    images = machine.state / "images"
    images.mkdir()
    for n in CODENAMES:
        (images / ("gpufleet_debian_%s" % n)).write_text(RECIPE)

    proc, events = machine("11", "12", "13")

    assert proc.returncode == 0, proc.stderr
    assert events == []
    assert not (machine.bin / "debootstrap").exists()


def test_not_root_fails_naming_the_package_and_installs_nothing(machine):
    proc, events = machine("12", uid=1000)

    assert proc.returncode != 0
    assert "debootstrap is missing; install it (apt-get install debootstrap)" in proc.stderr
    assert not [e for e in events if e.startswith("apt-get")]
