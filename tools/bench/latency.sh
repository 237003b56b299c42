#!/usr/bin/env bash
# Latency of WAL writes while other files are created, fsynced, renamed and unlinked,
# of durable create/rename/unlink, and how soon an unlinked file's space shows free in
# statfs, on walfs in msync mode with the pool on the local
# disk, against the same disk's file system directly (walfs_latbench, in one run,
# repetitions interleaved). Several walfs daemons can be compared side by side (a build
# of another commit as "before"). Run as root from a built tree.
#
#   tools/bench/latency.sh [options]
#     --walfs NAME=BINARY  a walfs daemon to measure (repeatable; default
#                          walfs=BUILD/fs/walfs)
#     --build-dir DIR      CMake build dir (default ./build): walfs_latbench, mkfs.walfs
#     --disk-dir DIR       where the pools and the direct target live (default /var/tmp)
#     --reps N             repetitions per target (default 3)
#     --seconds N          each phase of the interference run (default 5)
#     --ops N              operations of each kind in the metadata run (default 200)
#     --free-mib N         size of the file whose space must show free after unlink
#                          (default 256)
#     --pool-size SIZE     pool size for mkfs.walfs (default 1G)
# Prints per target and figure the median of the repetitions and min..max. Every pool,
# mount and file it makes is removed on exit.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
SOURCE_DIR=$(cd "$BENCH_DIR/../.." && pwd)
BUILD_DIR=$SOURCE_DIR/build
DISK_DIR=/var/tmp
REPS=3
SECONDS_ARG=5
OPS=200
POOL_SIZE=1G
FREE_MIB=256
declare -a WALFS_SPECS=()
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --walfs) WALFS_SPECS+=("$2"); shift ;;
    --build-dir) BUILD_DIR=$(cd "$2" && pwd); shift ;;
    --disk-dir) DISK_DIR=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --seconds) SECONDS_ARG=$2; shift ;;
    --ops) OPS=$2; shift ;;
    --pool-size) POOL_SIZE=$2; shift ;;
    --free-mib) FREE_MIB=$2; shift ;;
    -h | --help) usage 0 ;;
    *) echo "latency.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "latency.sh: run as root (mounts)" >&2; exit 2; }
LATBENCH=$BUILD_DIR/tools/bench/walfs_latbench
MKFS=$BUILD_DIR/tools/mkfs.walfs
for f in "$LATBENCH" "$MKFS"; do
  [ -x "$f" ] || { echo "latency.sh: $f is not built" >&2; exit 2; }
done
[ ${#WALFS_SPECS[@]} -gt 0 ] || WALFS_SPECS=("walfs=$BUILD_DIR/fs/walfs")
unset PMEM_IS_PMEM_FORCE  # msync mode: the pool is an ordinary file on the disk

WORK=$(mktemp -d "$DISK_DIR/walfs-latency.XXXXXX")
MNT=$(mktemp -d /tmp/walfs-latency-mnt.XXXXXX)
DAEMON_PID=
cleanup() {
  if mountpoint -q "$MNT"; then fusermount3 -u -z "$MNT" || true; fi
  if [ -n "$DAEMON_PID" ]; then kill "$DAEMON_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
  rmdir "$MNT" 2>/dev/null || true
}
trap cleanup EXIT
RAW=$WORK/raw.tsv
: >"$RAW"

# run_target NAME DIR: both workloads on DIR, every "key value" line into RAW.
run_target() {
  local name=$1 dir=$2 key value
  while read -r key value; do
    printf '%s\t%s\t%s\n' "$name" "$key" "$value" >>"$RAW"
  # The metadata run first: on walfs the interference run's files are zeroed after
  # their unlink (hundreds of MiB written back to the disk), which a metadata run just
  # after would wait behind; ext4 frees without writing.
  done < <("$LATBENCH" meta "$dir" --ops "$OPS"
           "$LATBENCH" interference "$dir" --seconds "$SECONDS_ARG"
           "$LATBENCH" free "$dir" --mib "$FREE_MIB")
}

# run_walfs NAME BINARY: a fresh pool on the disk, mounted, measured, unmounted.
run_walfs() {
  local name=$1 bin=$2 pool=$WORK/pool i
  rm -f "$pool"
  # A benchmark pool, not a cluster's: no sizing advice (mkfs.walfs --max-wal-size).
  "$MKFS" --size "$POOL_SIZE" --max-wal-size 64MB "$pool" >/dev/null
  "$bin" "$pool" "$MNT" -f >"$WORK/$name.log" 2>&1 &
  DAEMON_PID=$!
  for ((i = 0; i < 200; i++)); do
    mountpoint -q "$MNT" && break
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$WORK/$name.log" >&2; exit 1; }
    sleep 0.05
  done
  mountpoint -q "$MNT" || { echo "latency.sh: $bin did not mount" >&2; exit 1; }
  grep -q "msync" "$WORK/$name.log" || echo "latency.sh: note: $name's log does not say msync mode" >&2
  run_target "$name" "$MNT"
  fusermount3 -u "$MNT"
  wait "$DAEMON_PID" || true
  DAEMON_PID=
  rm -f "$pool"
}

run_direct() {
  local dir=$WORK/direct
  mkdir -p "$dir"
  run_target "$(stat -f -c %T "$DISK_DIR")-direct" "$dir"
  rm -rf "$dir"
}

TARGETS=("${WALFS_SPECS[@]}" direct)
for ((rep = 0; rep < REPS; rep++)); do
  n=${#TARGETS[@]}
  for ((k = 0; k < n; k++)); do
    t=${TARGETS[$(((rep + k) % n))]}
    if [ "$t" = direct ]; then
      run_direct
    else
      run_walfs "${t%%=*}" "${t#*=}"
    fi
  done
done

echo "walfs_latbench, $REPS repetitions, interference phases of ${SECONDS_ARG} s, $OPS metadata ops;"
echo "pools on $DISK_DIR ($(stat -f -c %T "$DISK_DIR")), msync mode; medians of the repetitions (min..max), microseconds"
awk -F'\t' '
  { v[$1 SUBSEP $2] = v[$1 SUBSEP $2] " " $3; if (!($1 in seen)) { seen[$1] = 1; order[++nt] = $1 }
    if (!($2 in kseen)) { kseen[$2] = 1; korder[++nk] = $2 } }
  function stats(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return sprintf("%s (%s..%s)", a[int((n + 1) / 2)], a[1], a[n])
  }
  END {
    printf "%-20s", "figure"; for (t = 1; t <= nt; t++) printf " | %-26s", order[t]; printf "\n"
    for (k = 1; k <= nk; k++) {
      printf "%-20s", korder[k]
      for (t = 1; t <= nt; t++) printf " | %-26s", stats(v[order[t] SUBSEP korder[k]])
      printf "\n"
    }
  }' "$RAW"
