#!/usr/bin/env bash
# unetback lab driver: installs what it needs (Debian 12 packages), builds, and runs things.
#
#   tools/lab.sh demo [--seconds N] [--json FILE] [--one-guest]  iperf3 between xensim domains
#   tools/lab.sh test [--asan]   install deps, build, run every test suite, print a summary
#                                (--asan: ASan+UBSan build, the unit and, as root, hostile suites;
#                                as root also the Debian packages and their install test)
#   tools/lab.sh build           install deps and build (build/)
#   tools/lab.sh deps [PKG...]   install the Debian packages only (plus PKG...)
#   tools/lab.sh bench [--quick] [--json FILE] [--plot FILE.png]   veth / user hop / unetback
#   tools/lab.sh bench --experiments [--quick] [--json FILE]   seeds 000/002/003 on the switch
#   tools/lab.sh xenlab [--quick] [--json FILE] [--host-hog N]   real Xen 4.17 in QEMU: kernel
#                                netback vs unetbackd (--host-hog: N busy loops on this host)
#   tools/lab.sh fuzz [--seconds N]   libFuzzer targets (clang build in build-fuzz)
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
# Environment: BUILD_DIR (default build, or build-asan with --asan), JOBS (default nproc).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

PACKAGES=(
  build-essential g++ meson ninja-build pkg-config
  libxen-dev xenstore-utils
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

cmd_test() {
  local asan=0 build_only=0
  [[ ${1:-} == --asan ]] && asan=1
  # --asan --build-only: the build alone (CI builds it beside the test stage, in the idle scheduling class).
  [[ ${2:-} == --build-only ]] && build_only=1
  deps
  if ((asan)); then
    local dir=${BUILD_DIR:-build-asan}
    # -g1: line tables, which is all a sanitizer report uses (file and line); full debug info
    # was about an eighth of this build's compile time.
    configure "$dir" -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug -Dcpp_args=-g1
    local rc=0
    # As root also the hostile suite: a malicious frontend against the daemon's own code,
    # where a memory error matters most.
    local suites=(unit)
    if [[ $(id -u) -eq 0 ]]; then suites+=(hostile); else log "not root: skipping hostile under ASan"; fi
    build_suites "$dir" "${suites[@]}"
    ((build_only)) && return 0
    rm -f "$dir"/meson-logs/testlog-*.json
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      run_tests --no-rebuild "$dir" unit || rc=$?
    if [[ $(id -u) -eq 0 ]]; then
      mv "$dir/meson-logs/testlog.json" "$dir/meson-logs/testlog-unit.json" 2>/dev/null || true
      # Memory errors only: LeakSanitizer reports ~26 KB in ~360 blocks allocated inside
      # libxenstore.so at this suite's exit (the library has no frame pointers: no caller is
      # shown; not traced yet). The daemon's own leaks are checked by the suite itself (fds,
      # mappings, TAPs) and by e2e and soak (mapped grants, RSS).
      ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        run_tests --no-rebuild "$dir" hostile || rc=$?
    fi
    summarise asan "$dir" || rc=1
    return $rc
  fi
  local dir=${BUILD_DIR:-build}
  build "$dir"
  local suites=(unit integration) package_rc=0
  if [[ $(id -u) -eq 0 ]]; then
    suites+=(root-netns e2e hostile root-package)
    # root-package installs, removes and purges the .debs built here (issue 17); a failed
    # build or lintian fails the run, and the suite then finds no .deb and fails too.
    (cmd_package) || package_rc=1
    export UNETBACK_DEB_DIR=${PACKAGE_DIR:-$ROOT/build-package}
  else
    log "not root: skipping the root-netns, e2e, hostile and root-package suites"
  fi
  # Only suites that have tests: meson fails on an unknown suite name.
  local present=()
  for s in "${suites[@]}"; do
    meson test -C "$dir" --list --suite "$s" >/dev/null 2>&1 && present+=("$s")
  done
  local rc=$package_rc
  run_tests "$dir" "${present[@]}" || rc=$?
  summarise tests "$dir" || rc=1
  return $rc
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
  *) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
