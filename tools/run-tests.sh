#!/usr/bin/env bash
# Installs dependencies (as root), builds walfs and runs the whole test suite with ctest,
# then runs the unit and crash tests and the fast mount tests again under AddressSanitizer
# + UBSan, and the daemon under ThreadSanitizer with a concurrent load.
# This is the README's test command and what CI runs.
#   tools/run-tests.sh                  # everything
#   tools/run-tests.sh -L unit          # extra args go to the main ctest run
#   WALFS_SANITIZE_RUN=0 tools/run-tests.sh   # skip the sanitizer pass
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ] && [ "${WALFS_SKIP_DEPS:-0}" != 1 ]; then
  tools/install-deps.sh
fi
BUILD_DIR=${BUILD_DIR:-build}
JOBS=$(nproc)
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j"$JOBS"
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 1200 "$@")

if [ "${WALFS_SANITIZE_RUN:-1}" = 1 ]; then
  # AddressSanitizer + UBSan: the unit and crash tests, then the daemon and the tools on
  # real mounts (fs_basic, fs_lifecycle, fs_hostile; these scripts take their binaries
  # from WALFS_BUILD_DIR, which ctest sets to this build). Every instrumented process
  # writes its reports to SAN_LOGS: a daemon's report (a leak at exit, say) can come after
  # the checks its test makes, so the logs decide as well as the exit statuses.
  SAN_DIR=${BUILD_DIR}-asan
  SAN_LOGS=$(cd "$(dirname "$SAN_DIR")" && pwd)/$(basename "$SAN_DIR")-reports
  rm -rf "$SAN_LOGS"
  mkdir -p "$SAN_LOGS"
  cmake -S . -B "$SAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALFS_SANITIZE=ON
  cmake --build "$SAN_DIR" -j"$JOBS" --target walfs_unit_tests walfs_direct_unit_tests \
    walfs_crash_tests walfs mkfs_walfs fsck_walfs walfsctl
  san_status=0
  (cd "$SAN_DIR" &&
    export ASAN_OPTIONS="detect_leaks=1 log_path=$SAN_LOGS/asan" \
      UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1 log_path=$SAN_LOGS/ubsan" &&
    ctest --output-on-failure --timeout 1800 -L 'unit|crash' &&
    ctest --output-on-failure --timeout 900 \
      -R '^integration\.fs_(basic|lifecycle|hostile)_test$') || san_status=1

  # ThreadSanitizer: the daemon under fs_stress_test's concurrent load (the test fails on
  # any report; tests/integration/tsan.supp lists what is suppressed and why).
  TSAN_DIR=${BUILD_DIR}-tsan
  cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALFS_TSAN=ON
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
