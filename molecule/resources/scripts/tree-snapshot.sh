#!/bin/sh
# Print one line per file, link and folder under the folders a remediation could touch: path, type, mode,
# owner and content hash (or link target). Two snapshots that are equal mean nothing there changed.
# Python byte-code caches are left out (importing a module may write them).
set -eu
for root in /etc /usr/local /opt /var/lib/gpufleet; do
  [ -e "$root" ] || continue
  find "$root" -xdev -name __pycache__ -prune -o -printf '%p %y %m %u:%g %l\n' 2>/dev/null
  find "$root" -xdev -name __pycache__ -prune -o -type f -exec sha256sum {} + 2>/dev/null
done | LC_ALL=C sort
