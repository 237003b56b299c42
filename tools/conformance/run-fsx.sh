#!/usr/bin/env bash
# Runs fsx from xfstests (ltp/fsx.c, built beforehand: it is not part of walfs) on a walfs
# mount, in each requested durability mode and flag set. Opt-in; not part of ctest.
#
#   tools/conformance/run-fsx.sh [options] FSX
#
# FSX is the fsx binary, or an xfstests checkout where it was built (FSX/ltp/fsx).
# For each mode and flag set: a fresh pool, mounted; fsx runs on one file in the mount
# with its logs outside it; unmount; fsck.walfs must find the pool clean. Mounts are made
# in a private mount namespace and removed on any exit.
#
# Options:
#   --mode MODE       pmem, msync or both (default both): pmem puts the pool on /dev/shm
#                     with PMEM_IS_PMEM_FORCE=1, msync puts it under /var/tmp
#   --flags SET       wr, direct or both (default both): wr runs fsx -W -R (no mmap:
#                     every walfs file is direct_io), direct runs fsx -Z -W -R (O_DIRECT)
#   --ops N           operations per run (default 1000000)
#   --progress N      fsx prints a line every N operations (default 100000)
#   --seed N          fsx's random seed (default: a new one, printed; pass it to replay)
#   --pool-size SIZE  pool size, mkfs.walfs syntax (default 256M)
#   --log-dir DIR     where fsx's output, .fsxlog and .fsxgood go (default: a new
#                     directory under /var/tmp, kept and printed)
#   --build-dir DIR   the walfs CMake build directory (default ./build of the checkout)
#   -h, --help        this text
# Exit status: 0 when every run completed its operations and left a clean pool, 1 otherwise.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=options.sh
source "$SRC/tools/conformance/options.sh"
MODES=(pmem msync)
FLAG_SETS=(wr direct)
OPS=1000000
PROGRESS=100000
SEED=
POOL_SIZE=256M
LOG_DIR=
BUILD_DIR=${WALFS_BUILD_DIR:-$SRC/build}
FSX=
ARGS=("$@")
while (($#)); do
  case $1 in
    --mode) conformance_modes "${2:-}"; shift ;;
    --flags)
      case ${2:-} in
        wr | direct) FLAG_SETS=("$2") ;;
        both) FLAG_SETS=(wr direct) ;;
        *) usage_error "--flags takes wr, direct or both" ;;
      esac
      shift ;;
    --ops) OPS=${2:-}; [[ $OPS =~ ^[1-9][0-9]*$ ]] || usage_error "--ops needs a positive number"; shift ;;
    --progress) PROGRESS=${2:-}; [[ $PROGRESS =~ ^[1-9][0-9]*$ ]] || usage_error "--progress needs a positive number"; shift ;;
    --seed) SEED=${2:-}; [[ $SEED =~ ^[1-9][0-9]*$ ]] || usage_error "--seed needs a positive number"; shift ;;
    --pool-size) POOL_SIZE=${2:?}; shift ;;
    --log-dir) LOG_DIR=${2:-}; [ -n "$LOG_DIR" ] || usage_error "--log-dir needs a directory"; shift ;;
    --build-dir) BUILD_DIR=${2:-}; [ -n "$BUILD_DIR" ] || usage_error "--build-dir needs a directory"; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) usage_error "unknown option '$1'" ;;
    *) [ -z "$FSX" ] || usage_error "one FSX only"; FSX=$1 ;;
  esac
  shift
done
[ -n "$FSX" ] || usage_error "the path of a built fsx is required"
[ -d "$FSX" ] && FSX=$FSX/ltp/fsx
[ -x "$FSX" ] && [ -f "$FSX" ] || usage_error "$FSX is not an executable fsx"
FSX=$(readlink -f "$FSX")
[ "$(id -u)" -eq 0 ] || usage_error "run as root (it mounts)"
[[ $BUILD_DIR = /* ]] || BUILD_DIR=$PWD/$BUILD_DIR
export WALFS_BUILD_DIR=$BUILD_DIR
conformance_log_dir WALFS_FSX_LOG_DIR walfs-fsx
# One seed for every run of this invocation, so that a failure can be replayed; chosen
# before the re-exec into a mount namespace so that both runs of the script agree.
[ -n "$SEED" ] || SEED=$((RANDOM * 32768 + RANDOM + 1))
export WALFS_FSX_SEED=${WALFS_FSX_SEED:-$SEED}

source "$SRC/tools/conformance/lib.sh"
reexec_in_mount_namespace "${ARGS[@]}"
SEED=$WALFS_FSX_SEED
LOG_DIR=$WALFS_FSX_LOG_DIR
require_fuse
[ -x "$MKFS" ] || fail "mkfs not built: $MKFS"

log "fsx $FSX, $OPS operations, seed $SEED, logs in $LOG_DIR"
failed=0
FSX_PID=  # the fsx running now, stopped by the exit cleanup (before the unmount)
on_exit '[ -z "$FSX_PID" ] || kill "$FSX_PID"'
for mode in "${MODES[@]}"; do
  for flag_set in "${FLAG_SETS[@]}"; do
    case $flag_set in
      wr) flags=(-W -R) ;;
      direct) flags=(-Z -W -R) ;;
    esac
    label=$mode-$flag_set
    mnt=$(make_workdir)/mnt
    conformance_mount "$mode" "$POOL_SIZE" "$mnt"
    out=$LOG_DIR/$label.out
    mkdir -p "$LOG_DIR/$label"
    log "[$label] fsx ${flags[*]} -N $OPS -S $SEED (output: $out)"
    start=$(date +%s)
    # In the background, waited for: a signal to this script is then handled at once
    # (bash runs traps only between commands), and the exit cleanup stops fsx before it
    # unmounts. -p prints a line every PROGRESS operations, to watch a long run.
    (cd "$mnt" && exec "$FSX" "${flags[@]}" -N "$OPS" -S "$SEED" -p "$PROGRESS" \
      -P "$LOG_DIR/$label" fsx.file) >"$out" 2>&1 &
    FSX_PID=$!
    rc=0
    wait "$FSX_PID" || rc=$?
    FSX_PID=
    secs=$(($(date +%s) - start))
    tail -n 3 "$out" | sed "s/^/[$label] /" >&2
    if ((rc != 0)) || ! grep -q "All $OPS operations completed A-OK" "$out"; then
      log "[$label] FAILED: fsx exit status $rc after ${secs}s; see $out and $LOG_DIR/$label"
      failed=1
    else
      log "[$label] ok: $OPS operations in ${secs}s"
    fi
    conformance_unmount_and_check "$mnt"
    log "[$label] pool clean after unmount (fsck.walfs)"
  done
done
((failed == 0)) || fail "fsx failed (logs in $LOG_DIR)"
log "fsx: every run passed"
