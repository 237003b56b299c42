#!/usr/bin/env bash
# The test command of the README and docs/hacking.md, and what CI runs (.ci/run). tools/run-tests.sh --help says
# what it does; the stages are in order below.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: tools/run-tests.sh [--quick] [CTEST-ARGUMENTS...]
Installs the dependencies (as root: tools/install-deps.sh, apt-get), builds walfs in
./build (RelWithDebInfo, warnings are errors, with the test facilities the power-cut
tests need: -DWALFS_TEST_FACILITIES=ON) and runs, in order:
  1. the whole suite with ctest (unit, crash, tools, integration with real FUSE mounts
     and a real PostgreSQL run as postgres, packaging, benchmark smoke). PostgreSQL 15
     is the host's; 17 and 18 run in Debian chroots made once by tools/pg-chroot
     (debootstrap from deb.debian.org, cached in /var/cache/walfs/pg-chroots; their
     tests skip when the archive is unreachable). For 17 and 18 the suite runs the
     crash, kill-loop (2 cycles) and version-specific tests with the direct library and
     the library's coverage check; WALFS_PG_MATRIX=full runs every PostgreSQL test for
     every version, with and without the library;
  2. a build with Debian's dpkg-buildflags (Release, hardening=+all: CPPFLAGS, CXXFLAGS
     and LDFLAGS) in ./build-dpkg, built only, so that it stays warning-free; like the
     package (whose cpack builds it without them) it has no test facilities;
  3. the unit and crash tests and the fast mount tests under AddressSanitizer + UBSan
     (./build-asan), and the daemon under ThreadSanitizer with a concurrent load
     (./build-tsan);
  4. a 60 s libFuzzer run over pool open, recovery and fsck, then 60 s of random
     operation sequences against a model (ops_fuzz) (./build-fuzz).
All of it takes under an hour on 2 cores (50 minutes measured), stage 2 about 5 of it.

  --quick          stage 1 only (the same as WALFS_BUILDFLAGS_RUN=0 WALFS_SANITIZE_RUN=0
                   WALFS_FUZZ_RUN=0)
  -h, --help       show this help and exit
Other arguments go to the ctest run of stage 1, e.g. -L unit, -R '^tools\.'.

The whole PostgreSQL matrix (15, 17, 18; every test with and without the library):
  WALFS_PG_MATRIX=full tools/run-tests.sh --quick -L 'pg1[578]'
One version: ... --quick -L pg17 (labels pg15, pg17, pg18; direct = with the library).

Environment: BUILD_DIR (build), WALFS_SKIP_DEPS=1 (no apt-get as root),
WALFS_PG_MATRIX (ci: the PostgreSQL 17/18 subset above; full: all of it),
WALFS_BUILDFLAGS_RUN=0, WALFS_SANITIZE_RUN=0, WALFS_FUZZ_RUN=0 (skip stage 2, 3, 4),
WALFS_STRESS_SECS (10), WALFS_FUZZ_SECONDS (60).
Exit status: 0 when every stage run passed, non-zero otherwise.
EOF
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --quick)
    shift
    export WALFS_BUILDFLAGS_RUN=0 WALFS_SANITIZE_RUN=0 WALFS_FUZZ_RUN=0
    ;;
esac

cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ] && [ "${WALFS_SKIP_DEPS:-0}" != 1 ]; then
  tools/install-deps.sh
fi
BUILD_DIR=${BUILD_DIR:-build}
JOBS=$(nproc)
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALFS_WERROR=ON \
  -DWALFS_PG_MATRIX="${WALFS_PG_MATRIX:-ci}" -DWALFS_TEST_FACILITIES=ON
cmake --build "$BUILD_DIR" -j"$JOBS"
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 1200 "$@")

if [ "${WALFS_BUILDFLAGS_RUN:-1}" = 1 ]; then
  # Debian's flags as a package build gets them (hardening=+all adds -z now); CMake
  # reads CFLAGS, CXXFLAGS and LDFLAGS but not CPPFLAGS, so CPPFLAGS joins the compile
  # flags as debhelper does. The flags count only at the first configure of a build
  # dir, hence a fresh one.
  DPKG_DIR=${BUILD_DIR}-dpkg
  rm -rf "$DPKG_DIR"
  (
    eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)"
    export CFLAGS="$CFLAGS $CPPFLAGS" CXXFLAGS="$CXXFLAGS $CPPFLAGS" LDFLAGS
    cmake -S . -B "$DPKG_DIR" -DCMAKE_BUILD_TYPE=Release -DWALFS_WERROR=ON \
      -DWALFS_TEST_FACILITIES=OFF
    cmake --build "$DPKG_DIR" -j"$JOBS"
  )
fi

if [ "${WALFS_SANITIZE_RUN:-1}" = 1 ]; then
  # AddressSanitizer + UBSan: the unit and crash tests (in parallel: each is its own
  # process on its own temporary files, and ASan makes them CPU-bound), then the daemon
  # and the tools on real mounts (fs_basic, fs_lifecycle, fs_hostile; these scripts take
  # their binaries from WALFS_BUILD_DIR, which ctest sets to this build). Every
  # instrumented process writes its reports to SAN_LOGS: a daemon's report (a leak at
  # exit, say) can come after the checks its test makes, so the logs decide as well as
  # the exit statuses.
  SAN_DIR=${BUILD_DIR}-asan
  SAN_LOGS=$(cd "$(dirname "$SAN_DIR")" && pwd)/$(basename "$SAN_DIR")-reports
  rm -rf "$SAN_LOGS"
  mkdir -p "$SAN_LOGS"
  # Without the test facilities (none of these tests uses them), so that the unit tests
  # run a shipped build's option parsing too (stage 1 runs the test build's).
  cmake -S . -B "$SAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALFS_SANITIZE=ON -DWALFS_WERROR=ON \
    -DWALFS_TEST_FACILITIES=OFF
  cmake --build "$SAN_DIR" -j"$JOBS" --target walfs_unit_tests walfs_direct_unit_tests \
    walfs_crash_tests walfs mkfs_walfs fsck_walfs walfsctl walfs_damage
  san_status=0
  (cd "$SAN_DIR" &&
    export ASAN_OPTIONS="detect_leaks=1 log_path=$SAN_LOGS/asan" \
      UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1 log_path=$SAN_LOGS/ubsan" &&
    ctest --output-on-failure --timeout 1800 -j"$JOBS" -L 'unit|crash' &&
    ctest --output-on-failure --timeout 900 \
      -R '^integration\.fs_(basic|lifecycle|hostile)_test$') || san_status=1

  # ThreadSanitizer: the daemon under fs_stress_test's concurrent load (the test fails on
  # any report; tests/integration/tsan.supp lists what is suppressed and why).
  TSAN_DIR=${BUILD_DIR}-tsan
  cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALFS_TSAN=ON -DWALFS_WERROR=ON \
    -DWALFS_TEST_FACILITIES=OFF
  cmake --build "$TSAN_DIR" -j"$JOBS" --target walfs mkfs_walfs fsck_walfs walfsctl
  (cd "$TSAN_DIR" && WALFS_STRESS_SECS=${WALFS_STRESS_SECS:-10} \
    ctest --output-on-failure --timeout 900 -R '^integration\.fs_stress_test$') || san_status=1

  if compgen -G "$SAN_LOGS/*" >/dev/null; then
    for f in "$SAN_LOGS"/*; do
      echo "===== $f" >&2
      cat "$f" >&2
    done
    echo "run-tests.sh: sanitizer reports (above)" >&2
    san_status=1
  fi
  [ "$san_status" = 0 ] || exit 1
fi

# libFuzzer smoke over pool open + recovery + fsck + repair: builds tests/fuzz with clang
# in build-fuzz/ and fuzzes for WALFS_FUZZ_SECONDS (60). WALFS_FUZZ_RUN=0 skips it.
if [ "${WALFS_FUZZ_RUN:-1}" = 1 ]; then
  WALFS_FUZZ_JOBS=$JOBS tests/fuzz/fuzz_smoke.sh
fi
