#!/bin/sh
# Everything cuda_links may change on a host, printed so that two runs compare byte for byte: link targets,
# the names, modes, owners and sha256 of the files in the folders it touches, and what the loader resolves.
set -eu
for l in /usr/local/cuda /etc/alternatives/cuda; do
  printf 'link %s -> %s\n' "$l" "$(readlink "$l" || echo '(none)')"
done
ls -1 /usr/local
find /etc/ld.so.conf /etc/ld.so.conf.d /etc/environment /etc/profile /etc/bash.bashrc /etc/profile.d \
  /var/lib/dpkg/alternatives -maxdepth 1 -printf '%p %m %u:%g %y %l\n' 2>/dev/null | LC_ALL=C sort
find /etc/ld.so.conf /etc/ld.so.conf.d /etc/environment /etc/profile /etc/bash.bashrc /etc/profile.d \
  /var/lib/dpkg/alternatives -maxdepth 1 -type f -exec sha256sum {} + 2>/dev/null | LC_ALL=C sort -k2
ldconfig -p | grep -E 'libcudart' || echo 'no libcudart in the loader cache'
