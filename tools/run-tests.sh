#!/usr/bin/env bash
# Installs dependencies (as root), builds walfs and runs the whole test suite with ctest.
# This is the README's test command and what CI runs.
#   tools/run-tests.sh            # build in ./build and run every test
#   BUILD_DIR=/tmp/b tools/run-tests.sh -L unit   # extra args go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ] && [ "${WALFS_SKIP_DEPS:-0}" != 1 ]; then
  tools/install-deps.sh
fi
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j"$(nproc)"
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 1200 "$@"
