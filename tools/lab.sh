#!/usr/bin/env bash
# unetback lab driver: installs what it needs (Debian 12 packages), builds, and runs things.
#
#   tools/lab.sh demo [--seconds N] [--json FILE] [--one-guest]  iperf3 between xensim domains
#   tools/lab.sh test [--no-lab] [--build-only]   what CI runs: install deps, build build-san
#                                (clang ASan+UBSan, fuzz-instrumented) and build-tsan, run every
#                                functional suite, the threaded ones under TSan, the fuzz targets
#                                5 s each; as root also the Debian packages (lintian) and the
#                                real-Xen smoke test (xenlab --smoke, in the background; --no-lab
#                                leaves it out); prints one summary over every step
#   tools/lab.sh flakes [--runs N] [--load N] [--suite S]...   the functional suites N times
#                                beside N busy loops; per test, how often it failed
#   tools/lab.sh configure-san DIR   configure DIR as the tests' build (build-san)
#   tools/lab.sh build           install deps and build (build/)
#   tools/lab.sh deps [PKG...]   install the Debian packages only (plus PKG...)
#   tools/lab.sh bench [--quick] [--json FILE] [--plot FILE.png]   veth / user hop / unetback
#   tools/lab.sh bench --experiments [--quick] [--json FILE]   seeds 000/002/003 on the switch
#   tools/lab.sh xenlab [--quick|--smoke] [--json FILE] [--host-hog N]   real Xen 4.17 in QEMU:
#                                kernel netback vs unetbackd (--smoke: unetbackd's package only,
#                                one guest; --host-hog: N busy loops on this host)
#   tools/lab.sh fuzz [--seconds N]   libFuzzer targets (on build-san)
#   tools/lab.sh tsan            ThreadSanitizer build (build-tsan) of the threaded suites
#   tools/lab.sh soak [--minutes N]   iperf3 on several guests while vifs come and go
#   tools/lab.sh format          clang-format every C++ file in place
#   tools/lab.sh format-check    fail if any C++ file is not clang-formatted
#   tools/lab.sh tidy [--all] [--base REV]   clang-tidy (.clang-tidy) on the C++ sources changed
#                                since REV (default: the merge base with main), or on all of them;
#                                fails on any warning
#   tools/lab.sh bench-xensim    grant-copy cost vs memcpy and event round trips on xensim
#   tools/lab.sh summary DIR...  one "N passed, N failed" line over the given build dirs' test logs
#   tools/lab.sh build-suites DIR SUITE...   build (configured) DIR's programs those suites' tests need
#   tools/lab.sh package         the Debian packages (dpkg-buildpackage -b) in build-package/,
#                                checked by lintian (no error, no warning)
#
# Environment: BUILD_DIR (default build; build-san for test, flakes and fuzz), JOBS (default nproc).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

PACKAGES=(
  build-essential g++ meson ninja-build pkg-config
  libxen-dev xenstore-utils
  # The worker sandbox's seccomp filter (backend/worker).
  libseccomp-dev
  libboost-dev libboost-system-dev
  libgtest-dev libgmock-dev googletest
  iperf3 iproute2 ethtool bridge-utils iputils-ping strace
  clang-format clang-tidy python3
  # The man pages (scdoc sources) and unetbackd's sd_notify.
  scdoc libsystemd-dev
  # The e2e suite's stock-script tests: Debian's vif-route needs ifconfig; vif-openvswitch
  # needs OVS (run privately by the test). xen-utils-common itself is fetched at test time
  # with `apt-get download` (apt and dpkg-deb only), never installed.
  net-tools openvswitch-switch
)

# tools/lab.sh package: what dpkg-buildpackage and lintian need on top (the build
# dependencies themselves are in PACKAGES, and dpkg-checkbuilddeps checks debian/control).
PACKAGE_TOOLS=(dpkg-dev debhelper lintian)

log() { printf '[lab] %s\n' "$*" >&2; }
die() { printf '[lab] error: %s\n' "$*" >&2; exit 1; }

# deps [PKG...]: the project's packages plus those a subcommand needs on top.
deps() {
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    log "all Debian packages present"
    return
  fi
  [[ $(id -u) -eq 0 ]] || die "missing packages (${missing[*]}); run as root or install them"
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

configure() {
  local dir=$1
  shift
  if [[ ! -f $dir/build.ninja ]]; then
    meson setup "$dir" "$@" >/dev/null || { meson setup "$dir" "$@"; die "meson setup failed"; }
  fi
}

build() {
  configure "$@"
  ninja -C "$1" -j "${JOBS:-$(nproc)}"
}

# build_suites DIR SUITE...: builds only what the tests of those suites need (each test's
# program and the targets it declares with depends:, from meson introspect). The sanitizer
# builds run a few suites and CI builds them from scratch: the other suites' programs would be
# about a fifth of their compile time. Their tests then run with meson test --no-rebuild.
build_suites() {
  local dir=$1
  shift
  local -a targets
  mapfile -t targets < <(
    meson introspect "$dir" --tests --targets | python3 -c '
import json, os, sys
build_dir, want = sys.argv[1], set(sys.argv[2:])
info = json.load(sys.stdin)
outputs = {t["id"]: t["filename"] for t in info["targets"]}
needed = set()
for test in info["tests"]:
    if want & {s.split(":", 1)[-1] for s in test["suite"]}:
        for dep in test["depends"]:
            needed.update(outputs.get(dep, []))
for f in sorted(needed):
    print(os.path.relpath(f, build_dir))
' "$(cd "$dir" && pwd)" "$@")
  ((${#targets[@]})) || die "no test of the suites $* in $dir"
  (cd "$dir" && ninja -j "${JOBS:-$(nproc)}" "${targets[@]}")
}

# Prints the plain "N passed, N failed" line from meson's JSON test log, and returns
# non-zero if anything failed.
summarise() {
  local label=$1
  shift
  local logs=()
  # testlog.json of the last meson test run, and the saved logs of earlier runs of the same
  # build (test --asan runs two: unit, then hostile with other sanitizer options).
  local f
  for d in "$@"; do
    for f in "$d"/meson-logs/testlog.json "$d"/meson-logs/testlog-*.json; do
      [[ -f $f ]] && logs+=("$f")
    done
  done
  python3 - "$label" "${logs[@]}" <<'PY'
import json, sys
label, paths = sys.argv[1], sys.argv[2:]
passed = failed = skipped = 0
for line in (l for p in paths for l in open(p)):
    r = json.loads(line)
    res = r.get("result")
    if res in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif res == "SKIP":
        skipped += 1
    else:
        failed += 1
        print(f"[lab] FAILED: {r.get('name')} ({res}, {r.get('duration', 0):.0f} s)",
              file=sys.stderr)
        # What failed, where only the end of a long CI log is kept: GoogleTest's failure
        # lines with their context, then the last lines of the test's output.
        out = ((r.get("stdout") or "") + (r.get("stderr") or "")).splitlines()
        marks = [i for i, l in enumerate(out)
                 if "Failure" in l or "[  FAILED  ]" in l or "ERROR: " in l or "runtime error" in l]
        shown = sorted({j for i in marks[:8] for j in range(max(0, i - 2), min(len(out), i + 6))})
        for j in shown:
            print(f"[lab]   | {out[j][:300]}", file=sys.stderr)
        for l in out[-25:]:
            print(f"[lab]   $ {l[:300]}", file=sys.stderr)
print(f"{label}: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
}

# record_result DIR NAME STATUS SECONDS: a step that is not a meson test (the packages and
# lintian, the fuzz run, the real-Xen smoke test) as one line of DIR's test logs, so that the
# closing "N passed, N failed" line counts it.
record_result() {
  python3 -c 'import json, sys; print(json.dumps({"name": sys.argv[1], "result": "OK" if sys.argv[2] == "0" else "FAIL", "duration": float(sys.argv[3])}))' \
    "$2" "$3" "$4" >>"$1/meson-logs/testlog-steps.json"
}

# run_tests [--no-rebuild] DIR SUITE...
run_tests() {
  local args=()
  [[ $1 == --no-rebuild ]] && { args+=(--no-rebuild); shift; }
  local dir=$1
  shift
  local suites=("$@")
  for s in "${suites[@]}"; do args+=(--suite "$s"); done
  local rc=0
  meson test -C "$dir" --print-errorlogs --num-processes "${JOBS:-$(nproc)}" "${args[@]}" || rc=$?
  return $rc
}

# The tests' build (build-san): clang with ASan and UBSan, and with libFuzzer's coverage
# instrumentation, so that one build runs every functional suite and links the fuzz targets
# (fuzz/meson.build). -O0 with line tables only (-g1): a report still names file and line.
# UBSan's vptr check is left out: it tests an object's readability through a pipe(2), so in the
# suites that exhaust the daemon's descriptor table on purpose (hostile_faults) a caught
# exception's vptr "is invalid" whenever the type cache misses while the table is full.
SAN_PACKAGES=(clang libclang-rt-14-dev)
# It also compiles unetbackd's fault-injection hooks in (-Dfault_injection=true), which the
# adoption tests need; a package or a default build has none.
# The test builds are unity builds (UNITY_OPTS: meson compiles a target's sources 8 to a
# file), which takes about 40 % less compile time than one file at a time: the same headers
# (GoogleTest, Asio, the standard library) are parsed once per 8 files. So names private to a
# file (its anonymous namespace, its statics) must differ from those of the other files of
# its target. The package and a developer's build/ compile one file at a time.
UNITY_OPTS=(-Dunity=on -Dunity_size=8)
configure_san() {
  CC=clang CXX=clang++ configure "$1" -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debug "-Dcpp_args=-g1 -fsanitize=fuzzer-no-link -fno-sanitize=vptr" \
    "-Dcpp_link_args=-fno-sanitize=vptr" -Dfuzz=true -Dfault_injection=true "${UNITY_OPTS[@]}"
  # A tests' build set up before an option existed (configure sets a build up only once):
  # --reconfigure reads the options anew and keeps the others.
  grep -q '"name": "fault_injection", "value": true' "$1/meson-info/intro-buildoptions.json" ||
    meson setup --reconfigure "$1" -Dfault_injection=true >/dev/null
  grep -q '"name": "unity", "value": "on"' "$1/meson-info/intro-buildoptions.json" ||
    meson setup --reconfigure "$1" "${UNITY_OPTS[@]}" >/dev/null
}
# A sanitizer report ends the process that made it (and so fails its test). Leaks are checked in
# the unit suite; elsewhere LeakSanitizer would report the ~26 KB that libxenstore.so leaves at
# exit (no frames: the library has no frame pointers). The daemon's own resources are checked
# by the suites themselves (fds, mappings, TAPs, grants).
san_env() {
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} "$@"
}
# The functional suites this user can run (root-package aside: it needs the built packages).
functional_suites() {
  echo unit integration
  [[ $(id -u) -eq 0 ]] && echo root-netns e2e hostile
  return 0
}
# The real-Xen smoke test's packages (tools/lab/xenlab.sh and the images it boots).
LAB_PACKAGES=(qemu-system-x86 busybox-static debootstrap e2fsprogs cpio kmod)

# test [--no-lab] [--build-only]: every test, as CI runs it (.ci/run calls this).
#   every functional suite (unit, integration; as root root-netns, e2e, hostile) on build-san;
#   the suites of threaded code under ThreadSanitizer (tools/lab/tsan.sh, build-tsan);
#   the fuzz targets, 5 s each (tools/lab/fuzz.sh, build-san);
#   as root also: the Debian packages, lintian-clean, and their install/remove/purge test
#   (root-package), and the real-Xen smoke test (tools/lab.sh xenlab --smoke: Xen 4.17 in QEMU
#   with the package in a systemd dom0), which boots in the background beside the suites.
# --no-lab leaves the smoke test out; --build-only builds what the run needs and stops.
cmd_test() {
  local lab=1 build_only=0
  while (($#)); do
    case $1 in
      --no-lab) lab=0 ;;
      --build-only) build_only=1 ;;
      *) die "test: unknown option $1 (--no-lab, --build-only)" ;;
    esac
    shift
  done
  local root=0
  [[ $(id -u) -eq 0 ]] && root=1
  ((root)) || { lab=0; log "not root: the unit and integration suites only"; }
  local extra=("${SAN_PACKAGES[@]}")
  ((root)) && extra+=("${PACKAGE_TOOLS[@]}")
  ((lab)) && extra+=("${LAB_PACKAGES[@]}")
  deps "${extra[@]}"
  local dir=${BUILD_DIR:-build-san} tsan_dir=${TSAN_BUILD_DIR:-build-tsan} rc=0 t0=$SECONDS
  mkdir -p "$dir/meson-logs"
  rm -f "$dir"/meson-logs/testlog*.json
  # The lab's images (Xen, dom0's root by debootstrap) need nothing of this build: they are
  # made from the start, beside the package build (mostly downloads and dpkg; at nice 5, so
  # that they are ready when the package is: in the idle class the builds starved them, and
  # the smoke test then booted only after the suites, at the end of the run).
  local cache=${XENLAB_CACHE:-$ROOT/.xenlab-cache} images_pid= lab_pid=
  if ((lab)); then
    nice -n 5 "$ROOT/tools/xenlab/build-images.sh" "$cache" >"$dir/xenlab-images.log" 2>&1 &
    images_pid=$!
  fi
  local package_rc=0
  if ((root)); then
    # The packages first: the smoke test boots with them (and root-package installs them).
    # Built without debug information (no -g, no -dbgsym packages): what the tests install is
    # the same code, without the time its debug information and the xz-compressed -dbgsym
    # packages take (both packages in 187 s on an idle 2-core machine; 401 s with them, beside
    # the lab's image build). `tools/lab.sh package` builds them in full.
    local p0=$SECONDS
    (export DEB_BUILD_OPTIONS="noautodbgsym ${DEB_BUILD_OPTIONS:-}" DEB_CXXFLAGS_STRIP="-g" DEB_CFLAGS_STRIP="-g"
     cmd_package) || package_rc=1
    record_result "$dir" packages-lintian "$package_rc" $((SECONDS - p0))
    log "test: packages built at $((SECONDS - t0)) s"
    export UNETBACK_DEB_DIR=${PACKAGE_DIR:-$ROOT/build-package}
  fi
  if ((lab && !build_only)); then
    if ((package_rc)); then
      log "test: no packages: no smoke test"
      lab=0
    else
      (
        # The images' own status is the lab's: xenlab.sh makes whatever is missing again.
        while kill -0 "$images_pid" 2>/dev/null; do sleep 2; done
        # Exit status 3 is an environment fault of the emulated machine (a dom0 process died
        # of memory corruption, or dom0's boot stalled; docs/testing.md): one boot again.
        for boot in 1 2; do
          XENLAB_CACHE=$cache "$ROOT/tools/lab/xenlab.sh" "$dir" --smoke --debs "$UNETBACK_DEB_DIR" \
            --json "$dir/xenlab-smoke.json"
          st=$?
          [[ $st == 3 && $boot == 1 ]] || exit $st
          echo "[lab] the smoke test's boot met an environment fault: booting again"
        done
      ) >"$dir/xenlab-smoke.log" 2>&1 &
      lab_pid=$!
      log "test: the real-Xen smoke test boots in the background (pid $lab_pid, log $dir/xenlab-smoke.log)"
    fi
  fi
  configure_san "$dir"
  local suites
  mapfile -t suites < <(functional_suites | tr ' ' '\n')
  # root-package's test program too (it runs with the rest, on the packages built above).
  if ((root)); then build_suites "$dir" "${suites[@]}" root-package; else build_suites "$dir" "${suites[@]}"; fi
  ninja -C "$dir" -j "${JOBS:-$(nproc)}" $(cd "$ROOT/fuzz" && ls ./*_fuzz.cpp | sed 's|^\./|fuzz/|; s|\.cpp$||')
  log "test: $dir built at $((SECONDS - t0)) s"
  BUILD_DIR=$tsan_dir "$ROOT/tools/lab/tsan.sh" --build-only >"$dir/tsan-build.log" 2>&1 ||
    { tail -30 "$dir/tsan-build.log" >&2; rc=1; }
  if ((build_only)); then
    [[ -z $images_pid ]] || wait "$images_pid" || rc=1
    return $rc
  fi
  # The unit suite with LeakSanitizer, then the rest (see san_env).
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 san_env run_tests --no-rebuild "$dir" unit || rc=1
  mv "$dir/meson-logs/testlog.json" "$dir/meson-logs/testlog-unit.json" 2>/dev/null
  local rest=() s
  for s in "${suites[@]}"; do [[ $s == unit ]] || rest+=("$s"); done
  ((root)) && rest+=(root-package)
  san_env run_tests --no-rebuild "$dir" "${rest[@]}" || rc=1
  log "test: functional suites done at $((SECONDS - t0)) s"
  BUILD_DIR=$tsan_dir "$ROOT/tools/lab/tsan.sh" || rc=1
  log "test: ThreadSanitizer run done at $((SECONDS - t0)) s"
  local f0=$SECONDS frc=0
  BUILD_DIR=$dir "$ROOT/tools/lab/fuzz.sh" --seconds "${FUZZ_SECONDS:-5}" || frc=1
  record_result "$dir" fuzz "$frc" $((SECONDS - f0))
  ((frc == 0)) || rc=1
  if [[ -n $lab_pid ]]; then
    local lab_rc=0 l0=$SECONDS
    wait "$lab_pid" || lab_rc=$?
    record_result "$dir" xenlab-smoke "$lab_rc" $((SECONDS - l0))
    log "test: the real-Xen smoke test ended (exit $lab_rc) at $((SECONDS - t0)) s; its log:"
    cat "$dir/xenlab-smoke.log" >&2
    ((lab_rc == 0)) || rc=1
  fi
  ((package_rc == 0)) || rc=1
  summarise tests "$dir" "$tsan_dir" || rc=1
  return $rc
}
# flakes [--runs N] [--load N] [--suite S]...: the functional suites N times (default 5) beside N
# CPU-bound busy loops (default 2: as many as this machine's cores, so every test runs on a
# loaded machine), then, per test, how often it failed. Uses the tests' build (BUILD_DIR,
# default build-san, built first). The busy loops are ended by their PIDs, also on Ctrl-C.
cmd_flakes() {
  local runs=5 load=2 suites=() dir=${BUILD_DIR:-build-san}
  while (($#)); do
    case $1 in
      --runs) runs=${2:?--runs needs a number}; shift ;;
      --load) load=${2:?--load needs a number}; shift ;;
      --suite) suites+=("${2:?--suite needs a name}"); shift ;;
      *) die "flakes: unknown option $1 (--runs N, --load N, --suite S)" ;;
    esac
    shift
  done
  [[ $runs =~ ^[1-9][0-9]*$ && $load =~ ^[0-9]+$ && $load -le 64 ]] || die "flakes: --runs 1.. and --load 0..64"
  ((${#suites[@]})) || suites=($(functional_suites))
  deps "${SAN_PACKAGES[@]}"
  configure_san "$dir"
  build_suites "$dir" "${suites[@]}"
  local logs=$dir/meson-logs/flakes
  rm -rf "$logs"
  mkdir -p "$logs"
  local hogs=() i
  # shellcheck disable=SC2317 # called by the trap
  stop_hogs() {
    local p
    # A busy loop ended by its signal makes wait return 143: not an error of this script.
    for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
    hogs=()
  }
  trap stop_hogs EXIT INT TERM
  for ((i = 0; i < load; i++)); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
  done
  log "flakes: ${suites[*]} x $runs beside $load busy loop(s) (pids ${hogs[*]:-none})"
  for ((i = 1; i <= runs; i++)); do
    local args=()
    for s in "${suites[@]}"; do args+=(--suite "$s"); done
    san_env meson test -C "$dir" --no-rebuild --num-processes "${JOBS:-$(nproc)}" --logbase "flakes-$i" \
      "${args[@]}" >"$logs/run-$i.txt" 2>&1 || true
    mv "$dir/meson-logs/flakes-$i.json" "$logs/" 2>/dev/null
    log "flakes: run $i of $runs done ($(grep -c '"result": "OK"' "$logs/flakes-$i.json" 2>/dev/null || echo 0) tests passed)"
  done
  stop_hogs
  trap - EXIT INT TERM
  python3 - "$runs" "$logs"/flakes-*.json <<'PY'
import collections, json, sys
runs, paths = int(sys.argv[1]), sys.argv[2:]
seen, failed = collections.Counter(), collections.Counter()
for p in paths:
    for line in open(p):
        r = json.loads(line)
        seen[r["name"]] += 1
        if r.get("result") not in ("OK", "EXPECTEDFAIL", "SKIP"):
            failed[r["name"]] += 1
print(f"{'test':48} {'failed':>8}")
for name in sorted(seen):
    print(f"{name:48} {failed[name]:>4} of {seen[name]}")
total = sum(failed.values())
print(f"flakes: {len(seen)} tests, {runs} runs, {total} failure(s) in {len(failed)} test(s)")
sys.exit(1 if total else 0)
PY
}

cmd_format() {
  git ls-files '*.cpp' '*.hpp' | xargs clang-format -i
}

cmd_format_check() {
  git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run --Werror
}

# clang-tidy over the sources the build compiles (compile_commands.json): those changed since
# --base REV (default: the merge base with main; on main itself, the last commit's), or every
# one with --all. Any warning is an error. Headers only as .clang-tidy's HeaderFilterRegex
# selects them: anchored at the source root, it matches none of the "../"-prefixed paths a
# build in build/ hands clang-tidy, so today the sources are checked and the headers are not.
cmd_tidy() {
  local dir=${BUILD_DIR:-build} all=0 base=""
  while [[ $# -gt 0 ]]; do
    case $1 in
      --all) all=1 ;;
      --base) base=$2; shift ;;
      *) die "tidy: unknown option $1" ;;
    esac
    shift
  done
  [[ -f $dir/compile_commands.json ]] || build "$dir"
  # A unity build's database names its generated unity files, not the sources: clang-tidy reads
  # the database of a build of the same options, one file at a time, set up beside it (never
  # built: the project generates no header).
  if grep -q '"name": "unity", "value": "on"' "$dir/meson-info/intro-buildoptions.json"; then
    [[ -f $dir-tidy/compile_commands.json ]] ||
      CC=clang CXX=clang++ meson setup "$dir-tidy" -Dbuildtype=debug -Dfuzz=true \
        -Dfault_injection=true -Dunity=off >/dev/null || die "tidy: meson setup $dir-tidy failed"
    dir=$dir-tidy
  fi
  local -a files
  if [[ $all = 1 ]]; then
    mapfile -t files < <(git ls-files '*.cpp')
  else
    if [[ -z $base ]]; then
      base=$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD~1)
      [[ $(git rev-parse "$base") = $(git rev-parse HEAD) ]] && base=$(git rev-parse HEAD~1)
    fi
    mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.cpp')
  fi
  # Only what this build compiles (the fuzz targets live in build-fuzz).
  local -a compiled=()
  local f
  for f in "${files[@]}"; do
    grep -q "\"file\": \"[^\"]*/${f}\"" "$dir/compile_commands.json" && compiled+=("$f")
  done
  [[ ${#compiled[@]} -gt 0 ]] || { echo "[tidy] no C++ source to check"; return 0; }
  echo "[tidy] clang-tidy on ${#compiled[@]} source(s)"
  local start=$SECONDS rc=0
  printf '%s\n' "${compiled[@]}" |
    xargs -r -P "${JOBS:-$(nproc)}" -n 1 clang-tidy -p "$dir" --quiet --warnings-as-errors='*' || rc=1
  echo "[tidy] ${#compiled[@]} source(s) in $((SECONDS - start)) s: $([[ $rc = 0 ]] && echo clean || echo WARNINGS)"
  return $rc
}

# The lab's Python commands (tools/lab/unetlab): `unetlab COMMAND BUILD_DIR ARGS...`.
unetlab() {
  PYTHONPATH=$ROOT/tools/lab${PYTHONPATH:+:$PYTHONPATH} exec python3 -m unetlab "$@"
}

# The demo: builds, then unetlab demo (xensim world, unetbackd in netns ubd<pid>-dom0 with
# bridge xenbr0, guests via unetback-xl, iperf3 both ways and guest to guest). Needs root.
cmd_demo() {
  [[ $(id -u) -eq 0 ]] || die "the demo needs root (network namespaces, TAPs, a bridge)"
  deps
  local dir=${BUILD_DIR:-build}
  build "$dir"
  unetlab demo "$dir" "$@"
}

# The Debian packages: a copy of the source tree (the files git knows, edited or new ones
# included) is built with dpkg-buildpackage -b in PACKAGE_DIR (default build-package/), so
# the .debs land in that directory and never beside the checkout. lintian must report no
# error and no warning (debian/*.lintian-overrides say why for each tag they hide).
cmd_package() {
  deps "${PACKAGE_TOOLS[@]}"
  local out=${PACKAGE_DIR:-$ROOT/build-package}
  local version
  version=$(dpkg-parsechangelog -S Version)
  local src=$out/unetback-$version
  rm -rf "$out"
  mkdir -p "$src"
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -C "$src" -xf -
  # debhelper 13 gives the build a private HOME: keep the shared compiler cache, and let it
  # hit from any checkout (paths relative to the copy; -ffile-prefix-map already keeps the
  # copy's path out of the debug info, so the working directory need not be hashed).
  local ccache_dir
  ccache_dir=$(ccache -k cache_dir 2>/dev/null || true)
  log "dpkg-buildpackage -b in $src"
  (cd "$src" && export CCACHE_DIR=${CCACHE_DIR:-$ccache_dir} CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1 \
    DEB_BUILD_OPTIONS="parallel=${JOBS:-$(nproc)} ${DEB_BUILD_OPTIONS:-}" &&
    dpkg-buildpackage -b -us -uc) >"$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log" >&2; die "dpkg-buildpackage failed (log: $out/build.log)"; }
  rm -rf "$src"
  local changes
  changes=$(ls "$out"/*.changes)
  log "lintian $changes"
  lintian --fail-on error,warning --info "$changes" || die "lintian reported errors or warnings"
  ls "$out"/*.deb
}

case ${1:-} in
  test) shift; cmd_test "$@" ;;
  build) deps; build "${BUILD_DIR:-build}" ;;
  deps) shift; deps "$@" ;;
  format) cmd_format ;;
  format-check) cmd_format_check ;;
  tidy) shift; cmd_tidy "$@" ;;
  summary) shift; summarise total "$@" ;;
  build-suites) shift; build_suites "$@" ;;
  package) cmd_package ;;
  bench-xensim)
    deps
    build "${BUILD_DIR:-build}"
    "${BUILD_DIR:-build}/tests/bench/grant_copy_bench" --xensim "${BUILD_DIR:-build}/tools/xensim/xensim"
    ;;
  demo) shift; cmd_demo "$@" ;;
  bench | xenlab | soak)
    # Each gets the build dir first; they need root. bench and soak are Python commands
    # (tools/lab/unetlab), xenlab is tools/lab/xenlab.sh.
    name=$1
    shift
    [[ $(id -u) -eq 0 ]] || die "$name needs root (network namespaces, TAPs, a bridge)"
    deps
    build "${BUILD_DIR:-build}"
    [[ $name == xenlab ]] && exec "$ROOT/tools/lab/xenlab.sh" "${BUILD_DIR:-build}" "$@"
    unetlab "$name" "${BUILD_DIR:-build}" "$@"
    ;;
  fuzz) shift; deps; exec "$ROOT/tools/lab/fuzz.sh" "$@" ;;
  tsan) shift; deps; exec "$ROOT/tools/lab/tsan.sh" "$@" ;;
  flakes) shift; cmd_flakes "$@" ;;
  configure-san) shift; configure_san "${1:?configure-san DIR}" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
