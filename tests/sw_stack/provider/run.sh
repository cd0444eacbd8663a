#!/usr/bin/env bash
# Builds the rdma-core provider against rdma-core v55 and tests it without a
# device:
#   1. the module as the guest image builds it (sw_stack/provider/CMakeLists.txt);
#   2. its dynamic symbol table: nothing defined, as for rdma-core's own providers;
#   3. provider_load_test: dlopen(RTLD_NOW) next to this libibverbs;
#   4. provider_fake_kernel_test: the provider's code end to end through
#      libibverbs' public API over a fake kernel driver.
#
#   run.sh [BUILD_DIR]
#
# rdma-core comes from $RDMA_CORE_SRC / $RDMA_CORE_BUILD when both are set
# (a source tree and a build tree with lib/libibverbs.so). Otherwise it is
# fetched once from crates.io (crate ibverbs-sys =0.3.2+55.0, which vendors
# the rdma-core v55 source), built with "ninja ibverbs", and kept in
# ${XDG_CACHE_HOME:-$HOME/.cache}/mprdma-vp/rdma-core-55.0/. Exits 77
# (ctest: skipped) when rdma-core cannot be had (no cargo, no registry).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$(mktemp -d /tmp/mprdma-provider-test.XXXXXX)}"
CRATE_VERSION="0.3.2+55.0"
mkdir -p "$OUT"
LOG="$OUT/build.log"
: >"$LOG"

say() { printf '[provider-test] %s\n' "$*"; }
run_logged() {
  if ! "$@" >>"$LOG" 2>&1; then
    say "failed: $*"
    tail -n 60 "$LOG"
    exit 1
  fi
}
skip() { say "SKIPPED: $*"; exit 77; }

obtain_rdma_core() {
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/mprdma-vp/rdma-core-55.0"
  RDMA_CORE_SRC="$cache/src"
  RDMA_CORE_BUILD="$cache/build"
  mkdir -p "$cache"
  # One builder at a time (ctest -j, or the image build sharing the cache).
  exec 9>"$cache/.lock"
  flock 9

  if [[ ! -f "$RDMA_CORE_SRC/CMakeLists.txt" ]]; then
    command -v cargo >/dev/null || skip "no cargo to fetch rdma-core with"
    local crate="$cache/fetch"
    mkdir -p "$crate/src"
    cat >"$crate/Cargo.toml" <<TOML
[package]
name = "mprdma-rdma-core-fetch"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
ibverbs-sys = "=$CRATE_VERSION"
TOML
    echo 'fn main() {}' >"$crate/src/main.rs"
    say "fetching rdma-core v55 (crate ibverbs-sys $CRATE_VERSION)"
    cargo fetch --manifest-path "$crate/Cargo.toml" >>"$LOG" 2>&1 ||
      skip "cargo fetch failed (no registry?): see $LOG"
    local vendored
    vendored="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"ibverbs-sys-$CRATE_VERSION"/vendor/rdma-core 2>/dev/null | head -n1)"
    [[ -n "$vendored" ]] || skip "ibverbs-sys $CRATE_VERSION has no vendor/rdma-core"
    rm -rf "$RDMA_CORE_SRC.tmp"
    cp -a "$vendored" "$RDMA_CORE_SRC.tmp"
    mv "$RDMA_CORE_SRC.tmp" "$RDMA_CORE_SRC"
  fi
  if [[ ! -e "$RDMA_CORE_BUILD/lib/libibverbs.so" ]]; then
    say "building rdma-core's libibverbs"
    rm -rf "$RDMA_CORE_BUILD"
    run_logged cmake -S "$RDMA_CORE_SRC" -B "$RDMA_CORE_BUILD" -G Ninja \
      -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DENABLE_RESOLVE_NEIGH=0
    run_logged ninja -C "$RDMA_CORE_BUILD" ibverbs
  fi
  flock -u 9
}

if [[ -z "${RDMA_CORE_SRC:-}" || -z "${RDMA_CORE_BUILD:-}" ]]; then
  obtain_rdma_core
fi
say "rdma-core source $RDMA_CORE_SRC, build $RDMA_CORE_BUILD"

run_logged cmake -S "$HERE" -B "$OUT" -G Ninja -Wno-dev \
  -DRDMA_CORE_SRC="$RDMA_CORE_SRC" -DRDMA_CORE_BUILD="$RDMA_CORE_BUILD"
run_logged ninja -C "$OUT"

passed=0
failed=0
check() {
  local name="$1"
  shift
  if "$@"; then
    say "ok     $name"
    passed=$((passed + 1))
  else
    say "FAILED $name"
    failed=$((failed + 1))
  fi
}

module="$(ls "$OUT"/provider/libmprdma-rdmav*.so)"
say "module $module"
no_defined_dynamic_symbols() {
  local defined
  defined="$(nm -D --defined-only "$module")"
  [[ -z "$defined" ]] || { echo "$defined"; return 1; }
}
needs_only_libibverbs_and_libc() {
  local needed
  needed="$(readelf -d "$module" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')"
  [[ "$needed" == "libc.so.6 libibverbs.so.1 " ]] || { echo "NEEDED: $needed"; return 1; }
}
driver_file_names_the_install_dir() {
  grep -qx "driver /usr/lib/x86_64-linux-gnu/libibverbs/libmprdma" "$OUT/provider/mprdma.driver"
}
check "exports nothing" no_defined_dynamic_symbols
check "needs only libibverbs and libc" needs_only_libibverbs_and_libc
check "mprdma.driver" driver_file_names_the_install_dir
check "load test" "$OUT/provider_load_test" "$module"
check "fake-kernel test" "$OUT/provider_fake_kernel_test"
echo "$passed passed, $failed failed"
((failed == 0))
