#!/usr/bin/env bash
# Runs pjdfstest (a checkout where `autoreconf -ifs && ./configure && make pjdfstest` was
# run beforehand: it is not part of walfs) on a walfs mount, in each requested durability
# mode. Opt-in; not part of ctest.
#
#   tools/conformance/run-pjdfstest.sh [options] PJDFSTEST_DIR
#
# For each mode: a fresh pool, mounted with allow_other,default_permissions (pjdfstest
# switches users and expects the kernel to check permissions); `prove -r` of the
# checkout's tests/ runs as root with the mount as its working directory; unmount;
# fsck.walfs must find the pool clean. Mounts are made in a private mount namespace and
# removed on any exit.
#
# Options:
#   --mode MODE       pmem, msync or both (default both): pmem puts the pool on /dev/shm
#                     with PMEM_IS_PMEM_FORCE=1, msync puts it under /var/tmp
#   --pool-size SIZE  pool size, mkfs.walfs syntax (default 4G)
#   --tests SUBDIR    run only tests/SUBDIR (e.g. chmod), for a quick look
#   --log-dir DIR     where prove's output goes (default: a new directory under /var/tmp,
#                     kept and printed)
#   --build-dir DIR   the walfs CMake build directory (default ./build of the checkout)
#   -h, --help        this text
# Exit status: 0 when no test file failed in any mode and every pool is clean, 1 otherwise.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=options.sh
source "$SRC/tools/conformance/options.sh"
MODES=(pmem msync)
POOL_SIZE=4G
TESTS=
LOG_DIR=
BUILD_DIR=${WALFS_BUILD_DIR:-$SRC/build}
PJD=
ARGS=("$@")
while (($#)); do
  case $1 in
    --mode) conformance_modes "${2:-}"; shift ;;
    --pool-size) POOL_SIZE=${2:-}; [ -n "$POOL_SIZE" ] || usage_error "--pool-size needs a size"; shift ;;
    --tests) TESTS=${2:-}; [[ $TESTS =~ ^[a-z0-9_]+$ ]] || usage_error "--tests needs a directory name under tests/"; shift ;;
    --log-dir) LOG_DIR=${2:-}; [ -n "$LOG_DIR" ] || usage_error "--log-dir needs a directory"; shift ;;
    --build-dir) BUILD_DIR=${2:-}; [ -n "$BUILD_DIR" ] || usage_error "--build-dir needs a directory"; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) usage_error "unknown option '$1'" ;;
    *) [ -z "$PJD" ] || usage_error "one PJDFSTEST_DIR only"; PJD=$1 ;;
  esac
  shift
done
[ -n "$PJD" ] || usage_error "the path of a built pjdfstest checkout is required"
[ -x "$PJD/pjdfstest" ] && [ -d "$PJD/tests" ] ||
  usage_error "$PJD is not a built pjdfstest checkout (no pjdfstest binary or tests/)"
PJD=$(readlink -f "$PJD")
TEST_DIR=$PJD/tests${TESTS:+/$TESTS}
[ -d "$TEST_DIR" ] || usage_error "no such test directory: $TEST_DIR"
command -v prove >/dev/null || usage_error "prove (perl) is missing"
[ "$(id -u)" -eq 0 ] || usage_error "run as root (it mounts, and pjdfstest switches users)"
[[ $BUILD_DIR = /* ]] || BUILD_DIR=$PWD/$BUILD_DIR
export WALFS_BUILD_DIR=$BUILD_DIR
conformance_log_dir WALFS_PJD_LOG_DIR walfs-pjdfstest

source "$SRC/tools/conformance/lib.sh"
reexec_in_mount_namespace "${ARGS[@]}"
require_fuse
[ -x "$MKFS" ] || fail "mkfs not built: $MKFS"

log "pjdfstest $TEST_DIR, logs in $LOG_DIR"
failed=0
for mode in "${MODES[@]}"; do
  mnt=$(make_workdir)/mnt
  conformance_mount "$mode" "$POOL_SIZE" "$mnt" -o allow_other,default_permissions
  out=$LOG_DIR/$mode.out
  log "[$mode] prove -r $TEST_DIR (output: $out)"
  start=$(date +%s)
  rc=0
  (cd "$mnt" && prove -r "$TEST_DIR") >"$out" 2>&1 || rc=$?
  secs=$(($(date +%s) - start))
  # prove's summary: "Files=N, Tests=..." and, under "Test Summary Report", one line
  # per failing file starting with its path.
  files=$(sed -n 's/^Files=\([0-9]*\),.*/\1/p' "$out")
  bad=$(sed -n '/^Test Summary Report/,$p' "$out" | grep -c '^/' || true)
  if ((rc != 0)); then
    log "[$mode] FAILED in ${secs}s: $bad of $files test files failing:"
    sed -n '/^Test Summary Report/,$p' "$out" | grep -E '^/' | sed "s/^/[$mode]   /" >&2 || true
    failed=1
  else
    log "[$mode] ok in ${secs}s: $files test files, none failing"
  fi
  tail -n 2 "$out" | sed "s/^/[$mode] /" >&2
  conformance_unmount_and_check "$mnt"
  log "[$mode] pool clean after unmount (fsck.walfs)"
done
((failed == 0)) || fail "pjdfstest failed (output in $LOG_DIR)"
log "pjdfstest: no test file failed"
