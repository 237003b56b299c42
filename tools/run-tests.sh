#!/usr/bin/env bash
# Installs dependencies (as root), builds walfs and runs the whole test suite with ctest,
# then runs the unit and crash tests again under AddressSanitizer + UBSan.
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
  SAN_DIR=${BUILD_DIR}-asan
  cmake -S . -B "$SAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALFS_SANITIZE=ON
  cmake --build "$SAN_DIR" -j"$JOBS" --target walfs_unit_tests walfs_crash_tests
  (cd "$SAN_DIR" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure --timeout 1800 -L 'unit|crash')
fi

# libFuzzer smoke over pool open + recovery + fsck + repair: builds tests/fuzz with clang
# in build-fuzz/ and fuzzes for WALFS_FUZZ_SECONDS (60). WALFS_FUZZ_RUN=0 skips it.
if [ "${WALFS_FUZZ_RUN:-1}" = 1 ]; then
  WALFS_FUZZ_JOBS=$JOBS tests/fuzz/fuzz_smoke.sh
fi
