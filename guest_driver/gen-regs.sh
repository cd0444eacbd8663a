#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Generate the Linux-kernel variant of <mprdma/regs.h> from the SystemRDL map.
#
# Arguments: PEAKRDL RDL OUTPUT
#
# A kernel build has no libc headers (-nostdinc): the header must include
# <linux/types.h> and <linux/build_bug.h> instead of <stdint.h> and
# <assert.h>. PeakRDL-cheader 1.1.0 (pinned in tools/requirements.txt)
# accepts --linux-kernel but does not hand it to its exporter, so the two
# include lines are rewritten here; with a PeakRDL that honours the flag the
# rewrite matches nothing. Everything else is the generator's output, the
# same register definitions the C++ build uses.
set -eu

if [ $# -ne 3 ]; then
	echo "usage: $0 PEAKRDL RDL OUTPUT" >&2
	exit 2
fi
peakrdl=$1
rdl=$2
out=$3

# Generate under the final file name (PeakRDL derives the include guard from
# it) in a scratch folder, so that an interrupted run never leaves a partial
# header that make would take as up to date.
tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/mprdma-regs.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT
"$peakrdl" c-header --linux-kernel "$rdl" -o "$tmpdir/regs.h"
sed -i -e 's|^#include <stdint.h>$|#include <linux/types.h>|' \
	-e 's|^#include <assert.h>$|#include <linux/build_bug.h>|' "$tmpdir/regs.h"
if grep -q -e '<stdint.h>' -e '<assert.h>' "$tmpdir/regs.h"; then
	echo "$0: $tmpdir/regs.h still includes a libc header" >&2
	exit 1
fi
mkdir -p "$(dirname "$out")"
mv "$tmpdir/regs.h" "$out"
