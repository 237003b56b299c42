#!/usr/bin/env bash
# Where pg_test_fsync's time goes with direct access, next to tmpfs, in one run.
#
#   tools/bench/fsync_profile.sh [--build-dir DIR] [--secs N] [--freq HZ] [--out DIR]
#
# pg_test_fsync (PostgreSQL 15's own tool) runs twice under `perf record` (no call
# graphs: self time is what is split): once on a walfs mount in true-PMEM mode (pool on
# tmpfs, PMEM_IS_PMEM_FORCE=1) with libwalfs-direct.so preloaded, once on a plain tmpfs
# directory. Every one of its tests is a write of 8 KiB (or 2 x 8 KiB, 16 x 1 KiB...) at
# the start of its file followed by a flush, so the profile is the commit path itself.
# For each run it prints the ops/s of "one 8kB write" with fdatasync, and the share of
# pg_test_fsync's CPU samples by where they were spent:
#   kernel        system calls (tmpfs: pwrite's copy into the page cache, fdatasync;
#                 direct: the client's identity fstat; both: the timer and exit paths)
#   libpmem       the durable copy (non-temporal stores) and its drain
#   walfs client  libwalfs-direct.so's own code (fd table, lease checks, wrappers)
#   libc          libc's wrappers and memset/memcpy
#   pg_test_fsync the tool's own loop
# and the top symbols. Samples are CPU time of the pg_test_fsync process only, so the
# split is not moved by other load on the machine (the ops/s are). Results go to OUT
# (default /var/tmp/walfs-fsync-profile-TIME): profile.txt, the perf data, the reports.
# Run as root from a built tree; needs perf (Debian: linux-perf) and PostgreSQL 15.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
SOURCE_DIR=$(cd "$BENCH_DIR/../.." && pwd)
SECS=3
FREQ=4000
OUT_DIR=
BUILD_DIR_ARG=
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR_ARG=$2; shift ;;
    --secs) SECS=$2; shift ;;
    --freq) FREQ=$2; shift ;;
    --out) OUT_DIR=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *)
      echo "fsync_profile.sh: unknown option '$1'" >&2
      echo "Try 'fsync_profile.sh --help' for more information." >&2
      exit 1
      ;;
  esac
  shift
done
[[ $SECS =~ ^[1-9][0-9]*$ ]] || { echo "fsync_profile.sh: --secs needs a positive integer, got '$SECS'" >&2; exit 1; }
[[ $FREQ =~ ^[1-9][0-9]*$ ]] || { echo "fsync_profile.sh: --freq needs a positive integer, got '$FREQ'" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "fsync_profile.sh: run as root (it mounts walfs)" >&2; exit 1; }
if [ -n "$BUILD_DIR_ARG" ]; then
  WALFS_BUILD_DIR=$(cd "$BUILD_DIR_ARG" && pwd)
  export WALFS_BUILD_DIR
fi
export WALFS_SOURCE_DIR=${WALFS_SOURCE_DIR:-$SOURCE_DIR}
# shellcheck source=../../tests/integration/lib/common.sh
source "$SOURCE_DIR/tests/integration/lib/common.sh"
unset PMEM_IS_PMEM_FORCE
command -v perf >/dev/null || skip "perf is needed (apt-get install linux-perf)"
PG_TEST_FSYNC=/usr/lib/postgresql/15/bin/pg_test_fsync
[ -x "$PG_TEST_FSYNC" ] || skip "PostgreSQL 15's pg_test_fsync is missing"
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
[ -f "$LIB" ] || fail "libwalfs-direct.so is not built ($LIB)"
[ -c /dev/fuse ] || skip "/dev/fuse is missing"

OUT_DIR=${OUT_DIR:-/var/tmp/walfs-fsync-profile-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
: >"$OUT_DIR/profile.txt"
say() { echo "$*" | tee -a "$OUT_DIR/profile.txt"; }

SHM=$(mktemp -d /dev/shm/walfs-fsync-profile.XXXXXX)
on_exit "rm -rf '$SHM'"
"$MKFS" --size 256M "$SHM/pool" >/dev/null 2>&1 || fail "mkfs.walfs failed"
mkdir -p "$SHM/mnt" "$SHM/tmpfs"
export PMEM_IS_PMEM_FORCE=1
mount_walfs "$SHM/pool" "$SHM/mnt"
[ "$(walfs_status_field "$SHM/mnt" mode)" = pmem ] || fail "the daemon is not in pmem mode"

# profile NAME DIR [env...]: pg_test_fsync in DIR under perf; prints the report lines.
profile() {
  local name=$1 dir=$2
  shift 2
  perf record -q -F "$FREQ" -o "$OUT_DIR/$name.perf.data" -- \
    env "$@" "$PG_TEST_FSYNC" -s "$SECS" -f "$dir/pg_test_fsync.out" \
    >"$OUT_DIR/$name.pg_test_fsync.txt" 2>&1 || fail "$name: pg_test_fsync failed"
  perf report -q -i "$OUT_DIR/$name.perf.data" --comm pg_test_fsync --sort dso,sym \
    --stdio 2>/dev/null >"$OUT_DIR/$name.report.txt" || fail "$name: perf report failed"
  local ops
  ops=$(awk '/^Compare file sync methods using one 8kB write/ { one = 1 }
             one && /^[ \t]+fdatasync/ { print $2; exit }' "$OUT_DIR/$name.pg_test_fsync.txt")
  say "== $name: one 8kB write + fdatasync: ${ops:-?} ops/s"
  # Self-time shares by where the samples fall; the report's lines are
  # "  PCT%  DSO  [k|.] SYMBOL".
  awk '
    { pct = $1; sub(/%/, "", pct); dso = $2
      if (dso ~ /kernel/) k = "kernel"; else if (dso ~ /libpmem/) k = "libpmem";
      else if (dso ~ /libwalfs-direct/) k = "walfs client"; else if (dso ~ /^libc/) k = "libc";
      else if (dso ~ /pg_test_fsync/) k = "pg_test_fsync"; else k = "other (" dso ")"
      share[k] += pct }
    END { for (k in share) printf "  %-14s %6.2f%%\n", k, share[k] }' \
    "$OUT_DIR/$name.report.txt" | sort -k2 -rn | tee -a "$OUT_DIR/profile.txt"
  say "  top symbols:"
  head -8 "$OUT_DIR/$name.report.txt" | sed 's/^ */    /' | tee -a "$OUT_DIR/profile.txt"
}

profile walfs-direct "$SHM/mnt" LD_PRELOAD="$LIB" PMEM_IS_PMEM_FORCE=1
profile tmpfs "$SHM/tmpfs"
umount_walfs "$SHM/mnt"
say "results in $OUT_DIR"
