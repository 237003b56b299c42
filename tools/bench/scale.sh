#!/usr/bin/env bash
# Start-up cost against pool size: mount time of pools of several sizes holding
# PostgreSQL's usual file count, mkfs time of a large pool (a new file, --force over a
# populated pool, and a sparse file mkfs cannot fallocate, as on device-DAX), and fsck
# time per GiB. Prints one table; run as root from a built tree.
#
#   tools/bench/scale.sh [options]
#     --sizes "1G 16G 64G"  pool sizes for the mount figures (default as shown)
#     --mkfs-size SIZE      pool size for the mkfs figures (default 64G; "" skips them)
#     --locations LIST      comma-separated: disk (sparse pool file in --disk-dir, msync
#                           mode) and/or tmpfs (in --tmpfs-dir, PMEM_IS_PMEM_FORCE=1, pmem
#                           mode) (default disk,tmpfs)
#     --segments N          16 MiB WAL segments per pool (default 70, as many as fit in
#                           90% of a smaller pool), plus archive_status/ with a few
#                           .ready/.done files, a .history file and a few small files
#     --reps N              mounts timed per pool (default 5); the median is reported
#     --disk-dir DIR        default /var/tmp
#     --tmpfs-dir DIR       default /dev/shm
#     --build-dir DIR       CMake build dir (default ./build)
#     --out DIR             results (default /var/tmp/walfs-scale-YYYYmmdd-HHMMSS):
#                           results.txt (what is printed), raw.tsv
#
# Mount time is the wall time of `walfs POOL DIR` without -f, which returns once the
# pool is open, recovered and mounted (the parent waits for the child's verdict). Page
# cache is warm (the pool was just populated or mounted). The new-file mkfs needs the
# whole size free on the disk (posix_fallocate); it is skipped when it is not.
set -euo pipefail
COMMAND_LINE="tools/bench/scale.sh $*"
SOURCE_DIR=$(cd "$(dirname "$0")/../.." && pwd)

SIZES="1G 16G 64G"
MKFS_SIZE=64G
LOCATIONS=disk,tmpfs
SEGMENTS=70
REPS=5
DISK_DIR=/var/tmp
TMPFS_DIR=/dev/shm
BUILD_DIR=$SOURCE_DIR/build
OUT_DIR=
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --sizes) SIZES=$2; shift ;;
    --mkfs-size) MKFS_SIZE=$2; shift ;;
    --locations) LOCATIONS=$2; shift ;;
    --segments) SEGMENTS=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --disk-dir) DISK_DIR=$2; shift ;;
    --tmpfs-dir) TMPFS_DIR=$2; shift ;;
    --build-dir) BUILD_DIR=$(cd "$2" && pwd); shift ;;
    --out) OUT_DIR=$2; shift ;;
    -h | --help) usage 0 ;;
    *) echo "scale.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "scale.sh: run as root (mounts)" >&2; exit 2; }
MKFS=$BUILD_DIR/tools/mkfs.walfs
FSCK=$BUILD_DIR/tools/fsck.walfs
WALFS=$BUILD_DIR/fs/walfs
for b in "$MKFS" "$FSCK" "$WALFS"; do
  [ -x "$b" ] || { echo "scale.sh: not built: $b (cmake --build $BUILD_DIR)" >&2; exit 2; }
done
OUT_DIR=${OUT_DIR:-/var/tmp/walfs-scale-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
RAW=$OUT_DIR/raw.tsv
printf 'what\tlocation\tsize\tseconds\n' >"$RAW"
WORK=$(mktemp -d /var/tmp/walfs-scale-work.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
POOLS=()
cleanup() {
  mountpoint -q "$MNT" && fusermount3 -u -z "$MNT"
  rm -f "${POOLS[@]}" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

bytes() { numfmt --from=iec "${1%B}"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RAW"; }

# The daemon, without -f: returns once mounted. pmem mode on tmpfs.
run_walfs() {
  if [ "$1" = tmpfs ]; then
    PMEM_IS_PMEM_FORCE=1 "$WALFS" "$2" "$MNT" >/dev/null
  else
    "$WALFS" "$2" "$MNT" >/dev/null
  fi
}
dir_of() { if [ "$1" = tmpfs ]; then echo "$TMPFS_DIR"; else echo "$DISK_DIR"; fi; }

unmount() {
  fusermount3 -u "$MNT"
  local i
  for ((i = 0; i < 3000; i++)); do
    # The daemon holds the pool's lock until it exits (msync mode syncs the pool first).
    flock -n "$1" true 2>/dev/null && return 0
    sleep 0.05
  done
  echo "scale.sh: the daemon of $1 did not exit" >&2
  exit 1
}

mount_timed() {  # location pool -> prints seconds
  local t0 t1
  t0=$(now)
  run_walfs "$1" "$2"
  t1=$(now)
  mountpoint -q "$MNT" || { echo "scale.sh: $2 did not mount" >&2; exit 1; }
  elapsed "$t0" "$t1"
}

SEGMENT_SOURCE=$WORK/segment
head -c $((16 << 20)) /dev/urandom >"$SEGMENT_SOURCE"

populate() {  # location pool size
  local n=$SEGMENTS max i
  max=$(($(bytes "$3") * 9 / 10 / (16 << 20)))
  ((n > max)) && n=$max
  run_walfs "$1" "$2"
  mkdir "$MNT/archive_status"
  for ((i = 1; i <= n; i++)); do
    cp "$SEGMENT_SOURCE" "$MNT/$(printf '0000000100000000%08X' "$i")"
  done
  for i in 1 2 3; do
    touch "$MNT/archive_status/$(printf '0000000100000000%08X' "$i").done"
  done
  touch "$MNT/archive_status/$(printf '0000000100000000%08X' 4).ready"
  printf '1\t0/3000028\tno recovery target specified\n' >"$MNT/00000002.history"
  head -c 300 /dev/urandom >"$MNT/backup_label.old"
  mkdir "$MNT/summaries"
  sync "$MNT"
  unmount "$2"
  echo "$n"
}

IFS=, read -r -a LOCS <<<"$LOCATIONS"
declare -A MOUNT FILES FSCKT
for loc in "${LOCS[@]}"; do
  for size in $SIZES; do
    pool=$(dir_of "$loc")/walfs-scale-$size.pool
    POOLS+=("$pool")
    rm -f "$pool"
    truncate -s "$size" "$pool"
    chmod 600 "$pool"
    "$MKFS" --force -q "$pool"
    n=$(populate "$loc" "$pool" "$size")
    FILES[$loc/$size]=$((n + 8))
    for ((r = 0; r < REPS; r++)); do
      t=$(mount_timed "$loc" "$pool")
      record mount "$loc" "$size" "$t"
      echo "$t" >>"$WORK/mount-$loc-$size"
      unmount "$pool"
    done
    MOUNT[$loc/$size]=$(median <"$WORK/mount-$loc-$size")
    t0=$(now)
    "$FSCK" "$pool" >/dev/null
    t1=$(now)
    FSCKT[$loc/$size]=$(elapsed "$t0" "$t1")
    record fsck "$loc" "$size" "${FSCKT[$loc/$size]}"
    rm -f "$pool"
  done
done

declare -A MKFST
if [ -n "$MKFS_SIZE" ]; then
  pool=$DISK_DIR/walfs-scale-mkfs.pool
  POOLS+=("$pool")
  rm -f "$pool"
  need=$(bytes "$MKFS_SIZE")
  avail=$(($(stat -f -c '%a * %S' "$DISK_DIR")))
  if ((avail > need + (4 << 30))); then
    t0=$(now); "$MKFS" -q --size "$MKFS_SIZE" "$pool"; t1=$(now)
    MKFST[new]=$(elapsed "$t0" "$t1")
    populate disk "$pool" "$MKFS_SIZE" >/dev/null
    t0=$(now); "$MKFS" -q --force "$pool"; t1=$(now)
    MKFST[force]=$(elapsed "$t0" "$t1")
    rm -f "$pool"
  else
    MKFST[new]="skipped (needs $MKFS_SIZE free on $DISK_DIR)"
    MKFST[force]=${MKFST[new]}
  fi
  truncate -s "$MKFS_SIZE" "$pool"
  chmod 600 "$pool"
  t0=$(now); "$MKFS" -q --force "$pool"; t1=$(now)
  MKFST[nofallocate]=$(elapsed "$t0" "$t1")
  rm -f "$pool"
  for k in new force nofallocate; do record "mkfs-$k" disk "$MKFS_SIZE" "${MKFST[$k]}"; done
fi

{
  echo "# $COMMAND_LINE"
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
  echo
  echo "mount time (median of $REPS, warm), files in the pool, and fsck time:"
  printf '%-6s %-6s %8s %6s %9s %10s\n' location size mount_s files fsck_s fsck_s/GiB
  for loc in "${LOCS[@]}"; do
    for size in $SIZES; do
      gib=$(awk -v b="$(bytes "$size")" 'BEGIN { print b / 2^30 }')
      printf '%-6s %-6s %8s %6s %9s %10.3f\n' "$loc" "$size" "${MOUNT[$loc/$size]}" \
        "${FILES[$loc/$size]}" "${FSCKT[$loc/$size]}" \
        "$(awk -v t="${FSCKT[$loc/$size]}" -v g="$gib" 'BEGIN { print t / g }')"
    done
  done
  if [ -n "$MKFS_SIZE" ]; then
    echo
    echo "mkfs.walfs of a $MKFS_SIZE pool on $DISK_DIR, seconds:"
    echo "  new file (ftruncate + posix_fallocate):     ${MKFST[new]}"
    echo "  --force over a populated pool:               ${MKFST[force]}"
    echo "  --force on a sparse file, no fallocate:      ${MKFST[nofallocate]}"
  fi
} | tee "$OUT_DIR/results.txt"
