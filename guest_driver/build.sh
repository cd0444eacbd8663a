#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# CI build check of mprdma.ko, no guest needed.
#
# Arguments: KDIR OUT
#   KDIR  kernel build folder (e.g. the extracted linux-headers-6.1.0-50-amd64)
#   OUT   output folder for objects, the generated regs.h, mprdma.ko and
#         build.log
#
# Builds with W=1 and fails on any compiler, kbuild or modpost warning, and
# when the module's vermagic is not the kernel release of KDIR (a module
# built against other headers would be refused by the guest kernel).
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 KDIR OUT" >&2
	exit 2
fi
kdir=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
log="$out/build.log"

# KCFLAGS=-Werror stops at the first compiler warning; the log scan also
# catches what the compiler does not own (modpost, kernel-doc, make).
if ! make -C "$here" KDIR="$kdir" OUT="$out" W=1 KCFLAGS=-Werror \
	>"$log" 2>&1; then
	cat "$log"
	echo "$0: build failed (log: $log)" >&2
	exit 1
fi
cat "$log"
if grep -n -i -E 'warning|error' "$log" | grep -v 'Skipping BTF generation'; then
	echo "$0: the build printed warnings (log: $log)" >&2
	exit 1
fi

ko="$out/mprdma.ko"
# vermagic comes from UTS_RELEASE (Debian's include/config/kernel.release
# holds the upstream version instead).
release=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"$/\1/p' \
	"$kdir/include/generated/utsrelease.h")
vermagic=$(modinfo -F vermagic "$ko" | cut -d' ' -f1)
if [ "$vermagic" != "$release" ]; then
	echo "$0: vermagic $vermagic, kernel release $release" >&2
	exit 1
fi
echo "$0: $ko built cleanly for $release"
