#!/bin/sh
# Build the fake libnvidia-ml.so.1 (a test double; see README.md) with the local C compiler.
# Usage: tests/fakenvml/build.sh OUTDIR      (CC overrides the compiler; default gcc, then cc)
# Needs only a C99 compiler and libc, so it also builds inside a bare Debian 12/13 container
# that has gcc: copy fake_nvml.c and this script in, or run the one cc line below by hand.
set -eu
out=${1:?usage: build.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-$(command -v gcc || command -v cc)}
mkdir -p "$out"
"$cc" -std=c99 -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden \
    -Wl,-soname,libnvidia-ml.so.1 -o "$out/libnvidia-ml.so.1" "$here/fake_nvml.c"
echo "$out/libnvidia-ml.so.1"
