#!/usr/bin/env bash
# The C++ of the simulator and its tests against .clang-format (Google style,
# 100 columns), with the clang-format pinned in tools/requirements.txt.
#   check_format.sh CLANG_FORMAT SOURCE_DIR          lists the files that differ
#   check_format.sh CLANG_FORMAT SOURCE_DIR --fix    rewrites them in place
# The C of the kernel driver, the provider and the guest programs follows
# the kernel's style instead and is not checked here.
set -euo pipefail
clang_format="$1" src="$2" mode="${3:-}"
cd "$src"
mapfile -t files < <(find vp tests \( -name '*.cc' -o -name '*.h' \) \
  -not -path 'tests/guest/*' -not -path 'tests/sw_stack/provider/*' | LC_ALL=C sort)
if [ "$mode" = "--fix" ]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
status=0
for f in "${files[@]}"; do
  if ! "$clang_format" --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "$f: not formatted as .clang-format says" >&2
    status=1
  fi
done
if [ $status -ne 0 ]; then
  echo "run: tools/check_format.sh .venv/bin/clang-format . --fix" >&2
fi
exit $status
