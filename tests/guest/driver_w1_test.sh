#!/bin/bash
# The kernel driver builds warning-free with W=1 against the guest image's
# pinned kernel headers (guest_driver/build.sh does the checking).
set -euo pipefail
src="$MPRDMA_SOURCE_DIR"
eval "$("$src/guest/build-image" --env 2>/dev/null | grep '^MPRDMA_GUEST_HEADERS=')"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
PEAKRDL="$src/.venv/bin/peakrdl" "$src/guest_driver/build.sh" "$MPRDMA_GUEST_HEADERS" "$out"
