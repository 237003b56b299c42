#!/usr/bin/env bash
# walfs benchmark suite: runs PostgreSQL WAL workloads against several WAL locations side
# by side in one run and prints, per workload, the median of repeated runs, min..max and
# ratios to the baselines (tmpfs, ext4, passthrough_ll). Targets are interleaved: each
# repetition visits every target, starting from a different one, so drift on a shared
# machine spreads over all of them. Run as root from a built tree (cmake --build build).
#
#   tools/bench/run.sh [options]
#     --out DIR            results dir (default /var/tmp/walfs-bench-YYYYmmdd-HHMMSS):
#                          results.txt (what is printed), results.md, summary.tsv,
#                          raw.tsv (every figure), machine.txt, logs/
#     --targets LIST       comma-separated (default: all) of
#                          walfs-pmem,walfs-direct,walfs-direct-b,walfs-msync-tmpfs,
#                          walfs-msync-disk,walfs-msync-reads,tmpfs,ext4,passthrough_ll
#                          (walfs-direct-b preloads DIRECT_LIB_B: a second library
#                          build to compare)
#     --workloads LIST     comma-separated (default: all) of
#                          fsync,pgbench,inserts,bulk,segments,core,floor,recovery,
#                          syncrep (the default), profile (TPC-B under `perf record`,
#                          needs linux-perf) and summarize (TPC-B with summarize_wal =
#                          on, PostgreSQL 17 and later)
#     --reps N             repetitions per target (default 3)
#     --duration SECS      pgbench/insert run length -T (default 20)
#     --fsync-secs SECS    pg_test_fsync -s (default 2)
#     --scale N            pgbench scale (default 10)
#     --clients "1 4 8"    pgbench TPC-B client counts (default "1 4 8")
#     --insert-clients N   clients of the 1 KiB insert workload (default 8)
#     --profile-clients L  TPC-B client counts of the profile workload (default "1 8")
#     --profile-freq HZ    perf sampling frequency of the profile workload (default 250)
#     --bulk-segments N    WAL segments the bulk load writes (default 42)
#     --recovery-segments N  WAL segments replayed by the recovery workload (default 64)
#     --syncrep-clients N  TPC-B clients of the synchronous replication workload (default 4)
#     --seg-count N        segments per walfs_segbench run (default 16)
#     --pool-size SIZE     walfs pool size given to mkfs.walfs (default 2G)
#     --disk-dir DIR       where the disk targets live (default /var/tmp)
#     --huge-pool          put the pools of the tmpfs-backed walfs targets on a private
#                          tmpfs mounted huge=always (2 MiB pages, as fsdax/device-DAX
#                          PMEM with 2 MiB alignment gives); data directories and the
#                          tmpfs target stay on /dev/shm (docs/direct-access.md)
#     --pin-server CPUS    run the PostgreSQL servers under `taskset -c CPUS`
#     --pin-client CPUS    run pgbench under `taskset -c CPUS`: with both, how far a
#                          one-client figure is the scheduler's placement
#                          (tools/bench/results/2026-12-03-amd-epyc-pvm.md)
#     --pg-version N       PostgreSQL major version (default 15, the host's); 17 and 18
#                          run in the cached Debian chroot of tools/pg-chroot (made on
#                          first use), with the suite's directories bound in at their
#                          own paths; fsync (pg_test_fsync on the host) is refused then
#     --summarize-clients N  TPC-B clients of the summarize workload (default 4)
#     --build-dir DIR      CMake build dir (default ./build)
#     --smoke              tiny sizes for CI: 1 rep, 1 s runs, scale 1, 2 bulk segments
set -euo pipefail
COMMAND_LINE="tools/bench/run.sh $*"
ORIG_ARGS=("$@")
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
SOURCE_DIR=$(cd "$BENCH_DIR/../.." && pwd)

OUT_DIR=
TARGETS_ARG=
WORKLOADS_ARG=fsync,pgbench,inserts,bulk,segments,core,floor,recovery,syncrep
REPS=3
PGBENCH_SECS=20
FSYNC_SECS=2
PGBENCH_SCALE=10
PGBENCH_CLIENTS="1 4 8"
INSERT_CLIENTS=8
PROFILE_CLIENTS="1 8"
PROFILE_FREQ=250
BULK_SEGMENTS=42
RECOVERY_SEGMENTS=64
SYNCREP_CLIENTS=4
SUMMARIZE_CLIENTS=4
PG_VERSION=15
SEG_COUNT=16
POOL_SIZE=2G
DISK_PARENT=/var/tmp
HUGE_POOL=0
PIN_SERVER=
PIN_CLIENT=
CORE_MIN_TIME=0.5
BUILD_DIR_ARG=
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
# shellcheck source=lib/options.sh
source "$BENCH_DIR/lib/options.sh"
while [ $# -gt 0 ]; do
  if bench_shared_option "$@"; then
    shift 2
    continue
  fi
  case $1 in
    --targets) TARGETS_ARG=$2; shift ;;
    --profile-clients) PROFILE_CLIENTS=$2; shift ;;
    --profile-freq) PROFILE_FREQ=$2; shift ;;
    --recovery-segments) RECOVERY_SEGMENTS=$2; shift ;;
    --syncrep-clients) SYNCREP_CLIENTS=$2; shift ;;
    --summarize-clients) SUMMARIZE_CLIENTS=$2; shift ;;
    --pg-version) PG_VERSION=$2; shift ;;
    --disk-dir) DISK_PARENT=$2; shift ;;
    --huge-pool) HUGE_POOL=1 ;;
    --pin-server) PIN_SERVER=$2; shift ;;
    --pin-client) PIN_CLIENT=$2; shift ;;
    --smoke)
      REPS=1 PGBENCH_SECS=1 FSYNC_SECS=1 PGBENCH_SCALE=1 BULK_SEGMENTS=2 SEG_COUNT=2
      RECOVERY_SEGMENTS=2
      POOL_SIZE=512M CORE_MIN_TIME=0.01 ;;
    -h | --help) usage 0 ;;
    *) echo "run.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done

# Another PostgreSQL than the host's runs in a chroot, which needs a mount namespace of
# the suite's own (nothing it binds may outlive it).
export WALFS_PG_VERSION=$PG_VERSION
BENCH_PG_ROOT=
if [ "$PG_VERSION" != 15 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "run.sh: run as root (mounts, runuser -u postgres)" >&2; exit 2; }
  if [ -z "${WALFS_BENCH_NAMESPACE:-}" ]; then
    WALFS_BENCH_NAMESPACE=1 exec unshare -m --propagation private "$0" "${ORIG_ARGS[@]}"
  fi
  BENCH_PG_ROOT=$("$SOURCE_DIR/tools/pg-chroot" ensure "$PG_VERSION") ||
    { echo "run.sh: no chroot for PostgreSQL $PG_VERSION (tools/pg-chroot above)" >&2; exit 1; }
fi

# shellcheck source=lib/suite.sh
source "$BENCH_DIR/lib/suite.sh"
unset PMEM_IS_PMEM_FORCE  # only the walfs-pmem daemon and core_bench get it
[ -c /dev/fuse ] || log "/dev/fuse is missing: FUSE targets will be skipped"

IFS=, read -r -a TARGETS <<<"${TARGETS_ARG:-$(IFS=,; echo "${ALL_TARGETS[*]}")}"
IFS=, read -r -a WORKLOADS <<<"$WORKLOADS_ARG"
for w in "${WORKLOADS[@]}"; do
  case $w in fsync | pgbench | inserts | bulk | segments | core | floor | recovery | syncrep | profile | summarize) ;;
    *) fail "unknown workload '$w'" ;; esac
  if [ "$w" = fsync ] && [ -n "$PG_ROOT" ]; then
    fail "fsync runs pg_test_fsync on the host: only with --pg-version 15"
  fi
  if [ "$w" = summarize ] && [ "$PG_VERSION" -lt 17 ]; then
    fail "summarize needs PostgreSQL 17 or later (summarize_wal): --pg-version 17"
  fi
done

suite_results_dir walfs-bench

# Scratch space: tmpfs for data directories, pools and the tmpfs targets; the local disk
# for the disk targets. Both removed at exit (registered first, so removed last).
suite_scratch walfs-bench
DISK_ROOT=$(mktemp -d "$DISK_PARENT/walfs-bench.XXXXXX")
chmod 0755 "$DISK_ROOT"
on_exit "rm -rf '$DISK_ROOT'"
POOL_ROOT=$SHM_ROOT
if [ "$HUGE_POOL" = 1 ]; then
  POOL_ROOT=$SHM_ROOT/pools
  mkdir -p "$POOL_ROOT"
  # Registered after the rm above, so it runs first: unmounted, then removed.
  mount -t tmpfs -o huge=always,mode=0755 walfs-bench-pools "$POOL_ROOT" ||
    fail "cannot mount a huge=always tmpfs on $POOL_ROOT"
  on_exit "umount '$POOL_ROOT'"
fi
if [ -n "$PG_ROOT" ]; then
  bench_chroot_mounts "$SHM_ROOT" "$DISK_ROOT"
fi

# ------------------------------------------------------------------ machine
pkgver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"; }
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "command: $COMMAND_LINE"
  echo "settings: reps=$REPS duration=${PGBENCH_SECS}s fsync_secs=$FSYNC_SECS scale=$PGBENCH_SCALE" \
    "clients=\"$PGBENCH_CLIENTS\" insert_clients=$INSERT_CLIENTS bulk_segments=$BULK_SEGMENTS" \
    "recovery_segments=$RECOVERY_SEGMENTS syncrep_clients=$SYNCREP_CLIENTS" \
    "summarize_clients=$SUMMARIZE_CLIENTS pg_version=$PG_VERSION" \
    "seg_count=$SEG_COUNT pool_size=$POOL_SIZE" \
    "pin_server=${PIN_SERVER:-none} pin_client=${PIN_CLIENT:-none}"
  echo "nproc: $(nproc)"
  echo "kernel: $(uname -srm)"
  echo "cpu: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "memory: $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "tmpfs dir: $SHM_ROOT on $(fs_desc "$SHM_ROOT")"
  echo "tmpfs pools: $POOL_ROOT on $(fs_desc "$POOL_ROOT") $(findmnt -n -f -o OPTIONS -T "$POOL_ROOT" | grep -o "huge=[a-z_]*" || echo "huge=never")"
  echo "disk dir: $DISK_ROOT on $(findmnt -n -o FSTYPE,SOURCE,OPTIONS -T "$DISK_ROOT")"
  dev=$(findmnt -n -o SOURCE -T "$DISK_ROOT" | sed 's|^/dev/||; s|[0-9]*$||')
  [ -r "/sys/block/$dev/queue/rotational" ] &&
    echo "disk $dev: rotational=$(cat "/sys/block/$dev/queue/rotational")" \
      "model=$(cat "/sys/block/$dev/device/model" 2>/dev/null || echo virtual)"
  echo "postgresql: $(${PG_ROOT:+chroot "$PG_ROOT"} "$PG_BIN/postgres" --version)${PG_ROOT:+ (chroot $PG_ROOT)}"
  echo "libfuse3: $(pkgver libfuse3-3) libpmem: $(pkgver libpmem1)"
  echo "load before start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT_DIR/machine.txt"
cat "$OUT_DIR/machine.txt"

# ------------------------------------------------------------------ targets
# target_up, except FUSE targets without /dev/fuse.
up_unless_no_fuse() {
  if [ ! -c /dev/fuse ] && [[ $1 == walfs-* || $1 == passthrough_ll ]]; then
    TARGET_SKIP[$1]="/dev/fuse is missing"
  else
    target_up "$1"
  fi
}
suite_bring_up target up_unless_no_fuse "no target could be set up" "${TARGETS[@]}"

# ------------------------------------------------------------------ workloads
if has_workload fsync; then
  run_interleaved "pg_test_fsync" wl_fsync
fi

if has_workload segments; then
  if [ -x "$BENCH_BIN/walfs_segbench" ]; then
    run_interleaved "walfs_segbench" wl_segments
  else
    log "walfs_segbench not built ($BENCH_BIN): segment lifecycle skipped"
    echo "segment lifecycle: SKIPPED (walfs_segbench not built)" >>"$OUT_DIR/machine.txt"
  fi
fi

if has_workload pgbench || has_workload inserts || has_workload profile; then
  run_pgbench_workloads
fi

if has_workload bulk; then
  run_interleaved "bulk load" wl_bulk
fi

if has_workload recovery; then
  run_interleaved "crash recovery" wl_recovery
fi

if has_workload syncrep; then
  run_interleaved "synchronous replication" wl_syncrep
fi

if has_workload summarize; then
  run_interleaved "WAL summarizer" wl_summarize
fi

if has_workload core; then
  if [ -x "$BENCH_BIN/walfs_core_bench" ]; then
    for ((rep = 1; rep <= REPS; rep++)); do
      log "walfs_core_bench rep $rep/$REPS"
      wl_core "$rep"
    done
  else
    log "walfs_core_bench not built ($BENCH_BIN): core microbenchmarks skipped"
    echo "core microbenchmarks: SKIPPED (walfs_core_bench not built)" >>"$OUT_DIR/machine.txt"
  fi
fi

if has_workload floor; then
  if [ -x "$BENCH_BIN/walfs_direct_bench" ]; then
    for ((rep = 1; rep <= REPS; rep++)); do
      log "walfs_direct_bench rep $rep/$REPS"
      wl_floor "$rep"
    done
  else
    log "walfs_direct_bench not built ($BENCH_BIN): direct-path floor skipped"
    echo "direct-path floor: SKIPPED (walfs_direct_bench not built)" >>"$OUT_DIR/machine.txt"
  fi
fi

# Final memory figure of each daemon after everything ran.
for t in "${RUN_TARGETS[@]}"; do
  if [ -n "${WALFS_PIDS[$t]:-}" ]; then
    r=$(walfs_rss "$t") || r=
    [ -n "$r" ] && echo "walfs daemon $t at end: VmRSS/RSS outside pool (KiB): $r" >>"$OUT_DIR/machine.txt"
    walfs_status "$t" "$OUT_DIR/logs/walfs-status.$t.txt"
  fi
done

# ------------------------------------------------------------------ report
report() { awk -F'\t' -v fmt="$1" -v targets="${RUN_TARGETS[*]}" -f "$BENCH_DIR/lib/stats.awk" -f "$BENCH_DIR/lib/report.awk" "$OUT_DIR/raw.tsv"; }
goals() { awk -F'\t' -v fmt="$1" -f "$BENCH_DIR/lib/goals.awk" "$OUT_DIR/summary.tsv"; }
suite_write_results results "Ratios are median(target) / median(baseline), for every metric; the heading of
each table says whether higher or lower is better. n = successful runs (+kF failed)." goals
