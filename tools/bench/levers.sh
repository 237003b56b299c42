#!/usr/bin/env bash
# walfs lever matrix: each tuning lever of the daemon measured on against off, side by
# side in one run. Every setting is its own walfs mount (pool on tmpfs, true-PMEM mode
# with PMEM_IS_PMEM_FORCE=1, unless the lever only exists in msync mode); repetitions
# are interleaved (each one visits every setting, starting from a different one), and
# the table gives per setting the median, min..max and the ratio of medians to the
# lever's baseline (the defaults, or msync's defaults for the msync-only lever).
# Run as root from a built tree.
#
#   tools/bench/levers.sh [options]
#     --levers LIST        comma-separated setting ids (default: all; see --list);
#                          the baselines they need are added
#     --workloads LIST     comma-separated (default fsync,pgbench,inserts,bulk,segments)
#     --reps N             repetitions per setting (default 3)
#     --duration SECS      pgbench/insert run length -T (default 5)
#     --fsync-secs SECS    pg_test_fsync -s (default 1)
#     --scale N            pgbench scale (default 10)
#     --clients "1 4"      pgbench TPC-B client counts (default "1 4")
#     --insert-clients N   clients of the 1 KiB insert workload (default 8)
#     --bulk-segments N    WAL segments the bulk load writes, wal_init_zero=on (default 10)
#     --seg-count N        segments per walfs_segbench run (default 16)
#     --pool-size SIZE     pool size per setting (default 512M; mkfs.walfs writes all of it)
#     --out DIR            results dir (default /var/tmp/walfs-levers-YYYYmmdd-HHMMSS):
#                          levers.txt, levers.md, raw.tsv, machine.txt, logs/
#     --build-dir DIR      CMake build dir (default ./build)
#     --smoke              tiny sizes for CI: 1 rep, settings default,th1,maxw128k,nozero,
#                          workloads fsync,segments
#     --list               print the settings and exit
#
# Settings marked "experiment" are not mount options (no deployment should use them):
# they need a build configured with -DWALFS_BENCH_EXPERIMENTS=ON, which lets the daemon
# read WALFS_EXPERIMENT (fs/options.h). In other builds they are reported as skipped.
set -euo pipefail
COMMAND_LINE="tools/bench/levers.sh $*"
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
SOURCE_DIR=$(cd "$BENCH_DIR/../.." && pwd)

# id|lever|setting|baseline id|pmem (1) or msync (0)|mount options|WALFS_EXPERIMENT
LEVER_TABLE='default|(baseline)|all defaults (walfs(8))|default|1||
page_cache|direct_io|off: page cache, write-through (experiment)|default|1||page_cache
strict|fsync/fsyncdir ENOSYS|off: durability=strict (each fsync served)|default|1|durability=strict|
msync|O_DSYNC honoured (msync)|on: msync mode defaults (baseline of this lever)|msync|0||
nodsync|O_DSYNC honoured (msync)|off: O_DSYNC ignored (experiment, not durable)|msync|0||ignore_dsync
maxw128k|max_write|128K (libfuse default)|default|1|max_write=128K|
t0|entry/attr timeout|0 s|default|1|entry_timeout=0,attr_timeout=0|
t1|entry/attr timeout|1 s|default|1|entry_timeout=1,attr_timeout=1|
th1|threads|1 (single-threaded loop)|default|1|threads=1|
th2|threads|2|default|1|threads=2|
th8|threads|8|default|1|threads=8|
noclone|clone_fd|off (noclone_fd)|default|1|noclone_fd|
idle1|max_idle_threads|1|default|1|max_idle_threads=1|
nozero|zero elision|off (experiment)|default|1||no_zero_elision'

LEVERS_ARG=
WORKLOADS_ARG=fsync,pgbench,inserts,bulk,segments
REPS=3
PGBENCH_SECS=5
FSYNC_SECS=1
PGBENCH_SCALE=10
PGBENCH_CLIENTS="1 4"
INSERT_CLIENTS=8
BULK_SEGMENTS=10
SEG_COUNT=16
POOL_SIZE=512M
OUT_DIR=
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
    --levers) LEVERS_ARG=$2; shift ;;
    --smoke)
      REPS=1 FSYNC_SECS=1 SEG_COUNT=2 POOL_SIZE=256M
      LEVERS_ARG=${LEVERS_ARG:-default,th1,maxw128k,nozero}
      WORKLOADS_ARG=fsync,segments ;;
    --list)
      printf '%s\n' "$LEVER_TABLE" | awk -F'|' '{printf "%-9s %-26s %s%s%s\n", $1, $2, $3,
        ($6 != "" ? "  [-o " $6 "]" : ""), ($7 != "" ? "  [WALFS_EXPERIMENT=" $7 "]" : "")}'
      exit 0 ;;
    -h | --help) usage 0 ;;
    *) echo "levers.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done

# shellcheck source=lib/suite.sh
source "$BENCH_DIR/lib/suite.sh"
unset PMEM_IS_PMEM_FORCE WALFS_EXPERIMENT
BULK_ZERO_MODES=on
[ -c /dev/fuse ] || skip "/dev/fuse is missing"

for w in ${WORKLOADS_ARG//,/ }; do
  case $w in fsync | pgbench | inserts | bulk | segments) ;;
    *) fail "unknown workload '$w' (levers.sh runs fsync, pgbench, inserts, bulk, segments)" ;; esac
done

# The chosen settings, their baselines first.
declare -A L_LEVER=() L_SETTING=() L_BASE=() L_FORCE=() L_OPTS=() L_EXP=()
ALL_IDS=()
while IFS='|' read -r id lever setting base force opts exp; do
  ALL_IDS+=("$id")
  L_LEVER[$id]=$lever L_SETTING[$id]=$setting L_BASE[$id]=$base
  L_FORCE[$id]=$force L_OPTS[$id]=$opts L_EXP[$id]=$exp
done <<<"$LEVER_TABLE"
declare -A WANT=()
LEVERS_LIST=${LEVERS_ARG//,/ }
for id in ${LEVERS_LIST:-${ALL_IDS[*]}}; do
  [ -n "${L_LEVER[$id]:-}" ] || fail "unknown setting '$id' (levers.sh --list)"
  WANT[$id]=1
  WANT[${L_BASE[$id]}]=1
done
SETTINGS=()
for id in "${ALL_IDS[@]}"; do [ -n "${WANT[$id]:-}" ] && SETTINGS+=("$id"); done

suite_results_dir walfs-levers
suite_scratch walfs-levers

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "command: $COMMAND_LINE"
  echo "settings: reps=$REPS duration=${PGBENCH_SECS}s fsync_secs=$FSYNC_SECS scale=$PGBENCH_SCALE" \
    "clients=\"$PGBENCH_CLIENTS\" insert_clients=$INSERT_CLIENTS bulk_segments=$BULK_SEGMENTS" \
    "seg_count=$SEG_COUNT pool_size=$POOL_SIZE"
  echo "nproc: $(nproc), kernel: $(uname -srm), cpu: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "walfs: $WALFS; pools on $(fs_desc "$SHM_ROOT")"
  echo "load before start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT_DIR/machine.txt"
cat "$OUT_DIR/machine.txt"

# setting_up ID: the setting's own walfs mount.
setting_up() {
  _walfs_up "$1" "$SHM_ROOT/lever-$1.pool" "${L_FORCE[$1]}" "${L_OPTS[$1]}" "${L_EXP[$1]}"
}
suite_bring_up setting setting_up "no setting could be mounted" "${SETTINGS[@]}"
if has_workload fsync; then
  run_interleaved "pg_test_fsync" wl_fsync
fi
if has_workload segments; then
  [ -x "$BENCH_BIN/walfs_segbench" ] || fail "walfs_segbench not built ($BENCH_BIN)"
  run_interleaved "walfs_segbench" wl_segments
fi
if has_workload pgbench || has_workload inserts; then
  run_pgbench_workloads
fi
if has_workload bulk; then
  run_interleaved "bulk load" wl_bulk
fi
for t in "${RUN_TARGETS[@]}"; do walfs_status "$t" "$OUT_DIR/logs/walfs-status.$t.txt"; done

printf '%s\n' "$LEVER_TABLE" >"$OUT_DIR/levers.def"
report() {
  awk -F'\t' -v fmt="$1" -v order="${RUN_TARGETS[*]}" \
    -f "$BENCH_DIR/lib/stats.awk" -f "$BENCH_DIR/lib/levers.awk" \
    "$OUT_DIR/levers.def" "$OUT_DIR/raw.tsv"
}
suite_write_results levers "ratio = median(setting) / median(its lever's baseline); each table says whether
higher or lower is better. n = successful runs (+kF failed)."
