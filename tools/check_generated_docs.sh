#!/usr/bin/env bash
# Fails if a generated document in docs/ differs from what its generator
# produces now. Run `./mprdma-vp docs` to regenerate.
#   check_generated_docs.sh SIM PEAKRDL SOURCE_DIR
set -euo pipefail
sim="$1" peakrdl="$2" src="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
"$sim" describe >"$tmp/scenario-reference.md"
if ! diff -u "$src/docs/scenario-reference.md" "$tmp/scenario-reference.md"; then
  echo "docs/scenario-reference.md is stale: run ./mprdma-vp docs" >&2
  status=1
fi
(cd "$src" && "$peakrdl" markdown sw_stack/regs/mprdma_regs.rdl -o "$tmp/registers.md")
if ! diff -u "$src/docs/registers.md" "$tmp/registers.md"; then
  echo "docs/registers.md is stale: run ./mprdma-vp docs" >&2
  status=1
fi
exit $status
