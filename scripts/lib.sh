# Shared shell helpers for gpufleet scripts. Source it; do not run it.
# shellcheck shell=bash

GPUFLEET_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GPUFLEET_ROOT

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
