#!/usr/bin/env bash
# libFuzzer run of every fuzz target (fuzz/*_fuzz.cpp): builds them with clang, ASan and
# UBSan in build-san (the tests' build), runs each for N seconds on a copy of its checked-in seed corpus
# (fuzz/corpus/<target>/), prints the executions per target, and fails if any target found
# a crash, a sanitizer report, a leak or a violated property.
#
#   tools/lab/fuzz.sh [--seconds N] [--target NAME]... [--keep-corpus] [--build-only]
#
# --seconds N     time per target (default 10)
# --target NAME   only this target (repeatable); names: fuzz/*_fuzz.cpp without _fuzz.cpp
# --keep-corpus   grow BUILD_DIR/fuzz-work/<target> across runs instead of starting afresh
# --build-only    build the targets and stop (CI builds them early, in the idle class)
# Environment: BUILD_DIR (default build-san), JOBS (default nproc).
# Crash inputs land in BUILD_DIR/fuzz-artifacts/<target>/; replay one with
#   BUILD_DIR/fuzz/<target>_fuzz FILE
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BUILD_DIR=${BUILD_DIR:-build-san}
SECONDS_PER_TARGET=10
KEEP=0
BUILD_ONLY=0
TARGETS=()
while (($#)); do
  case $1 in
    --seconds) SECONDS_PER_TARGET=$2; shift 2 ;;
    --target) TARGETS+=("$2"); shift 2 ;;
    --keep-corpus) KEEP=1; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    *) echo "usage: $0 [--seconds N] [--target NAME]... [--keep-corpus] [--build-only]" >&2; exit 2 ;;
  esac
done
log() { printf '[fuzz] %s\n' "$*" >&2; }

if ((${#TARGETS[@]} == 0)); then
  for f in fuzz/*_fuzz.cpp; do
    t=${f#fuzz/}
    TARGETS+=("${t%_fuzz.cpp}")
  done
fi

# clang and its runtime libraries (libclang_rt.fuzzer*, asan, ubsan) on Debian 12.
"$ROOT/tools/lab.sh" deps clang libclang-rt-14-dev

# The tests' sanitizer build (tools/lab.sh configure-san): clang, ASan+UBSan, and
# -fsanitize=fuzzer-no-link everywhere, since the libraries under test need coverage
# instrumentation too; the targets themselves link libFuzzer (fuzz/meson.build).
"$ROOT/tools/lab.sh" configure-san "$BUILD_DIR"
# shellcheck disable=SC2046  # one ninja target per word
ninja -C "$BUILD_DIR" -j "${JOBS:-$(nproc)}" $(printf 'fuzz/%s_fuzz ' "${TARGETS[@]}") >&2
((BUILD_ONLY)) && exit 0

# A UBSan report is a finding, not a warning: stop on the first one.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}

failed=()
summary=()
for t in "${TARGETS[@]}"; do
  exe=$BUILD_DIR/fuzz/${t}_fuzz
  seeds=$ROOT/fuzz/corpus/$t
  work=$BUILD_DIR/fuzz-work/$t
  art=$BUILD_DIR/fuzz-artifacts/$t
  [[ -x $exe ]] || { log "$t: $exe not built"; failed+=("$t"); continue; }
  ((KEEP)) || rm -rf "$work"
  mkdir -p "$work" "$art"
  if [[ -d $seeds ]]; then cp -n "$seeds"/* "$work"/; fi
  out=$BUILD_DIR/fuzz-artifacts/$t.log
  log "$t: ${SECONDS_PER_TARGET}s on $(find "$work" -type f | wc -l) inputs"
  rc=0
  "$exe" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$art/" "$work" >"$out" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$out" | tail -1 | cut -d' ' -f2)
  if ((rc != 0)); then
    log "$t: FAILED (exit $rc); log: $out; inputs: $art/"
    grep -E 'ERROR: |property violated|runtime error|SUMMARY' "$out" | head -5 >&2 || true
    failed+=("$t")
    summary+=("$(printf '%-20s %12s execs  cov %-6s FAILED' "$t" "${execs:-?}" "${cov:-?}")")
  else
    summary+=("$(printf '%-20s %12s execs  cov %-6s ok' "$t" "${execs:-?}" "${cov:-?}")")
  fi
done

printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
  log "targets with findings: ${failed[*]}"
  exit 1
fi
log "no findings in ${#TARGETS[@]} targets (${SECONDS_PER_TARGET}s each)"
