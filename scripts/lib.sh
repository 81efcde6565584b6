# Shared shell helpers for gpufleet scripts. Source it; do not run it.
# shellcheck shell=bash

GPUFLEET_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GPUFLEET_ROOT
# What set-up makes once per machine, outside the checkout (the controller venv, the wheelhouse copy, ansible-test's
# home; the Makefile's CPU torch venv too): a clean clone on a machine that made them reuses them. Empty: no cache.
GPUFLEET_CACHE=${GPUFLEET_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet}
export GPUFLEET_CACHE

log() { printf '[gpufleet] %s\n' "$*" >&2; }
die() { printf '[gpufleet] error: %s\n' "$*" >&2; exit 1; }

# ensure_docker: make sure a Docker engine answers. As root on Debian with no engine,
# install docker.io and start dockerd by hand (there may be no systemd).
ensure_docker() {
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
    die "no Docker engine answers ('docker info' failed). Start one (or run as root on Debian, where gpufleet installs docker.io and starts dockerd itself)."
  fi
  if ! command -v dockerd >/dev/null 2>&1; then
    log "no Docker engine: installing docker.io from Debian"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  fi
  if ! docker info >/dev/null 2>&1; then
    log "starting dockerd (log: /var/log/dockerd.log)"
    nohup dockerd >/var/log/dockerd.log 2>&1 &
    local i
    for i in $(seq 1 60); do
      docker info >/dev/null 2>&1 && return 0
      sleep 1
    done
    die "dockerd did not answer within 60 s; see /var/log/dockerd.log"
  fi
}

# The tools the test suites run, as command:Debian-package pairs. make test (and .ci/run before it) calls
# ensure_test_tools so that no suite meets a missing tool and skips (tests/skips.py lists the only skips allowed).
#   promtool, prometheus  the exporter's and the report's metrics checked, rules run by a live Prometheus
#   chromium              the HTML report rendered headless (fonts-dejavu-core: its text, checked below)
#   gcc, nm, objdump      the fake NVML library built and inspected; openssl: a test certificate
#   docker, dockerd, debootstrap, ssh  the test images, container hosts and SSH tunnels; make, git: the runner
GPUFLEET_TEST_TOOLS=(promtool:prometheus prometheus:prometheus chromium:chromium gcc:gcc nm:binutils
                     objdump:binutils openssl:openssl docker:docker.io dockerd:docker.io debootstrap:debootstrap
                     ssh:openssh-client make:make git:git)

# ensure_test_tools: every tool of GPUFLEET_TEST_TOOLS on PATH. As root on Debian, install the missing ones from
# Debian's archive; elsewhere, fail naming the packages to install.
ensure_test_tools() {
  local pair need=()
  for pair in "${GPUFLEET_TEST_TOOLS[@]}"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
  done
  [ -d /usr/share/fonts/truetype/dejavu ] || need+=(fonts-dejavu-core)
  [ ${#need[@]} -gt 0 ] || return 0
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
    die "the tests need these Debian packages, missing here: ${need[*]}. Install them (apt-get install ${need[*]}), or run as root on Debian, where make test installs them itself."
  fi
  log "installing what the tests run: ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  for pair in "${GPUFLEET_TEST_TOOLS[@]}"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || die "${pair%%:*} is still missing after apt-get install ${pair#*:}"
  done
}
