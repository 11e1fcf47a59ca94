#!/usr/bin/env bash
# ThreadSanitizer run of the test suites that start threads (ring stress, the queue event
# loops, the daemon, xensim and its clients...): builds BUILD_DIR (default build-tsan) with
# -Db_sanitize=thread -Dbuildtype=debug (line tables only, -g1) and runs the suite 'threaded'
# (and, as root, 'threaded-root'): the tests of code that runs threads, every process with TSan — the tests and the
# xensim / unetbackd / netfront-shim processes they start. Any TSan report fails the run, even
# one from a child process whose exit the test did not check: reports are written to
# BUILD_DIR/tsan-reports/ (TSAN_OPTIONS log_path) and printed at the end.
#
#   tools/lab/tsan.sh [--suite NAME]... [--soak MINUTES] [--build-only]
#
# --suite NAME      default: threaded [threaded-root as root]
# --build-only      build what the run needs and stop (CI builds it early, in the idle class)
# --soak MINUTES    also run the soak (unetlab soak) on the TSan build (root): the whole xensim
#                   world (xensim, unetbackd, guests, iperf3, vif churn) under TSan
# Environment: BUILD_DIR (default build-tsan), JOBS (default nproc).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BUILD_DIR=${BUILD_DIR:-build-tsan}
SUITES=()
SOAK=
BUILD_ONLY=0
while (($#)); do
  case $1 in
    --suite) SUITES+=("$2"); shift 2 ;;
    --soak) SOAK=$2; shift 2 ;;
    --build-only) BUILD_ONLY=1; shift ;;
    *) echo "usage: $0 [--suite NAME]... [--soak MINUTES] [--build-only]" >&2; exit 2 ;;
  esac
done
log() { printf '[tsan] %s\n' "$*" >&2; }

if ((${#SUITES[@]} == 0)); then
  SUITES=(threaded)
  if [[ $(id -u) -eq 0 ]]; then SUITES+=(threaded-root); else log "not root: skipping threaded-root"; fi
fi

"$ROOT/tools/lab.sh" deps
if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  # -g1: line tables, which is all a report uses (file and line), at an eighth less compile time;
  # a unity build, as build-san (tools/lab.sh, UNITY_OPTS).
  meson setup "$BUILD_DIR" -Db_sanitize=thread -Dbuildtype=debug -Dcpp_args=-g1 -Dunity=on \
    -Dunity_size=8 >/dev/null
fi

REPORTS=$ROOT/$BUILD_DIR/tsan-reports
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
# halt_on_error: the first race ends the process (and fails its test); log_path: reports of
# child processes land in files we can check, whatever the test does with their stderr.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 exitcode=66 log_path=$REPORTS/report ${TSAN_OPTIONS:-}"

args=() present=()
for s in "${SUITES[@]}"; do
  meson test -C "$BUILD_DIR" --no-rebuild --list --suite "$s" >/dev/null 2>&1 && { args+=(--suite "$s"); present+=("$s"); }
done
# Only what these suites' tests need (and, for the soak, the programs of the demo's world).
"$ROOT/tools/lab.sh" build-suites "$BUILD_DIR" "${present[@]}"
[[ -z $SOAK ]] || ninja -C "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
((BUILD_ONLY)) && exit 0
rc=0
# TSan slows everything ~5-15x: give the tests' own meson timeouts room.
meson test -C "$BUILD_DIR" --no-rebuild --print-errorlogs --timeout-multiplier 6 \
  --num-processes "${JOBS:-$(nproc)}" "${args[@]}" || rc=$?

if [[ -n $SOAK ]]; then
  # TSan makes everything slower and bigger: the RSS bound is for the instrumented daemon.
  PYTHONPATH=$ROOT/tools/lab python3 -m unetlab soak "$BUILD_DIR" --minutes "$SOAK" --rss-bound-mb 512 ||
    rc=1
fi

reports=("$REPORTS"/report*)
if [[ -e ${reports[0]} ]]; then
  log "${#reports[@]} ThreadSanitizer report file(s):"
  for r in "${reports[@]}"; do
    echo "==== $r" >&2
    head -n 60 "$r" >&2
  done
  rc=1
fi
"$ROOT/tools/lab.sh" summary "$BUILD_DIR" || rc=1
((rc == 0)) && log "no ThreadSanitizer reports"
exit $rc
