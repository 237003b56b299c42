#!/usr/bin/env bash
# Reads through FUSE: a segment written through leases (libwalfs-direct.so) against one
# written through FUSE, and walfs against libfuse's passthrough_ll over tmpfs.
#
#   tools/bench/read_bench.sh [--build-dir DIR] [--walfs BIN] [--passthrough BIN]
#       [--rounds N] [--dir DIR] [--fuse-first]
#
# Mounts a 256 MiB pmem-mode pool (on --dir, default /dev/shm, PMEM_IS_PMEM_FORCE=1)
# and creates two 16 MiB segments in it: "direct" written with 8 KiB pwrites by a
# client with libwalfs-direct.so preloaded (a lease from its first pwrite), "fuse" by
# the same client without it. Then, for each file, reads it as pg_waldump does (8 KiB
# preads from offset 0 to the end) N times (default 3, the first is "cold": the first
# read of what the client wrote), then once with `cat` (128 KiB reads) and once with
# `dd bs=8k`, printing per pass the microseconds per 8 KiB pread, the MB/s of cat and
# dd, the daemon's CPU time (all its threads, schedstat) and the minor page faults it
# took (/proc/PID/stat minflt). With
# --passthrough (libfuse's example/passthrough_ll, built elsewhere) the same reads of a
# 16 MiB file on a tmpfs directory it serves (-o cache=never: every read a FUSE
# request, as walfs's direct_io) are printed too. The direct file is read first unless
# --fuse-first (the first reads of a mount also pay for starting worker threads).
# Run as root from a built tree; needs cc.
set -euo pipefail
# In a mount namespace of its own: a namespace another process creates while a mount
# exists keeps a copy of it, and the daemon then outlives its unmount until that
# namespace ends.
if [ -z "${WALFS_BENCH_NAMESPACE:-}" ]; then
  WALFS_BENCH_NAMESPACE=1 exec unshare -m --propagation private "$0" "$@"
fi
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
SOURCE_DIR=$(cd "$BENCH_DIR/../.." && pwd)
BUILD_DIR=$SOURCE_DIR/build
WALFS=
PASSTHROUGH=
ROUNDS=3
DIR=/dev/shm
ORDER="direct fuse"
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR=$2; shift ;;
    --walfs) WALFS=$2; shift ;;
    --passthrough) PASSTHROUGH=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --dir) DIR=$2; shift ;;
    --fuse-first) ORDER="fuse direct" ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "read_bench.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
  shift
done
WALFS=${WALFS:-$BUILD_DIR/fs/walfs}
MKFS=$BUILD_DIR/tools/mkfs.walfs
LIB=$BUILD_DIR/fs/direct/libwalfs-direct.so
for b in "$WALFS" "$MKFS" "$LIB"; do [ -e "$b" ] || { echo "read_bench.sh: not built: $b" >&2; exit 1; }; done

WORK=$(mktemp -d /tmp/walfs-read-bench.XXXXXX)
POOL=$DIR/walfs-read-bench.$$.pool
MNT=$WORK/mnt
PT_MNT=$WORK/pt
PT_SRC=$DIR/walfs-read-bench.$$.pt
PID=
PT_PID=
cleanup() {
  set +e
  for m in "$MNT" "$PT_MNT"; do
    if mountpoint -q "$m" 2>/dev/null; then fusermount3 -u -z "$m"; fi
  done
  sleep 0.5
  for p in "$PID" "$PT_PID"; do
    if [ -n "$p" ]; then kill "$p" 2>/dev/null; fi
  done
  rm -rf "$WORK" "$PT_SRC"
  rm -f "$POOL"
}
trap cleanup EXIT
mkdir -p "$MNT" "$PT_MNT"

cc -O2 -o "$WORK/client" -x c - <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  const char *cmd = argv[1], *path = argv[2];
  long size = atol(argv[3]);
  char buf[8192];
  if (!strcmp(cmd, "write")) {  /* write FILE SIZE: 8 KiB pwrites into a segment */
    int fd = open(path, O_RDWR);
    if (fd < 0) { perror("open"); return 1; }
    for (long off = 0; off < size; off += sizeof(buf)) {
      memset(buf, 'a' + (off >> 13) % 26, sizeof(buf));
      if (pwrite(fd, buf, sizeof(buf), off) != sizeof(buf)) { perror("pwrite"); return 1; }
    }
    if (fdatasync(fd) != 0) { perror("fdatasync"); return 1; }
    return close(fd) != 0;
  }
  if (!strcmp(cmd, "pread")) {  /* pread FILE SIZE: us per 8 KiB pread over the file */
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror("open"); return 1; }
    const double t0 = now();
    long n = 0;
    for (long off = 0; off < size; off += sizeof(buf), ++n) {
      if (pread(fd, buf, sizeof(buf), off) != sizeof(buf)) { perror("pread"); return 1; }
      if (buf[0] != 'a' + (off >> 13) % 26 && buf[0] != 'p') { fprintf(stderr, "bad byte at %ld\n", off); return 1; }
    }
    printf("%.2f\n", (now() - t0) * 1e6 / n);
    return close(fd) != 0;
  }
  return 2;
}
EOF

minflt() { awk '{print $10}' "/proc/$1/stat"; }
# cpu_ns PID: on-CPU nanoseconds of all of the process's threads (schedstat), which the
# load of other processes on the machine does not inflate as it does wall time.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d", s}'; }
# mbs CMD...: MB/s of a command that reads 16 MiB (its wall time).
mbs() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  awk -v ns=$((t1 - t0)) 'BEGIN {printf "%.0f", 16.777216e6 / (ns / 1e9) / 1e6}'
}
# passes LABEL FILE DAEMON_PID
passes() {
  local label=$1 file=$2 pid=$3 i before cpu us
  for ((i = 1; i <= ROUNDS; i++)); do
    before=$(minflt "$pid")
    cpu=$(cpu_ns "$pid")
    us=$("$WORK/client" pread "$file" $((16 << 20)))
    cpu=$(( $(cpu_ns "$pid") - cpu ))
    echo "$label pread8k pass$i us_per_read $us daemon_cpu_us_per_read" \
      "$(awk -v ns="$cpu" 'BEGIN {printf "%.2f", ns / 2048 / 1000}')" \
      "daemon_minflt $(( $(minflt "$pid") - before ))"
  done
  local what
  for what in cat dd8k; do
    before=$(minflt "$pid")
    cpu=$(cpu_ns "$pid")
    if [ $what = cat ]; then
      us=$(mbs cat "$file")
    else
      us=$(mbs dd if="$file" of=/dev/null bs=8k)
    fi
    echo "$label $what MB_per_s $us daemon_cpu_ms $(( ($(cpu_ns "$pid") - cpu) / 1000000 ))" \
      "daemon_minflt $(( $(minflt "$pid") - before ))"
  done
}

"$MKFS" --size 256M "$POOL" >/dev/null
PMEM_IS_PMEM_FORCE=1 "$WALFS" "$POOL" "$MNT" -f >"$WORK/walfs.log" 2>&1 &
PID=$!
for ((i = 0; i < 200; i++)); do mountpoint -q "$MNT" && break; sleep 0.05; done
mountpoint -q "$MNT" || { cat "$WORK/walfs.log" >&2; exit 1; }
SEG=$((16 << 20))
for f in direct fuse; do
  # A segment as PostgreSQL makes it (zero-filled through FUSE: the daemon elides the
  # zeros), then written with 8 KiB pwrites.
  head -c $SEG /dev/zero >"$MNT/00000001000000000000000$([ $f = direct ] && echo 1 || echo 2)"
done
LD_PRELOAD=$LIB "$WORK/client" write "$MNT/000000010000000000000001" $SEG
"$WORK/client" write "$MNT/000000010000000000000002" $SEG
python3 -c 'import json, os, sys
s = json.loads(os.getxattr(sys.argv[1], "user.walfs.status"))
def find(d, k):
    if isinstance(d, dict):
        for kk, v in d.items():
            if kk == k: return v
            r = find(v, k)
            if r is not None: return r
print("leases_granted", find(s, "leases_granted"))' "$MNT"
for f in $ORDER; do
  case $f in
    direct) passes direct "$MNT/000000010000000000000001" "$PID" ;;
    fuse) passes fuse "$MNT/000000010000000000000002" "$PID" ;;
  esac
done

if [ -n "$PASSTHROUGH" ]; then
  mkdir -p "$PT_SRC"
  python3 -c "
import sys
with open(sys.argv[1], 'wb') as f:
    for i in range(2048):
        f.write(bytes([ord('a') + i % 26]) * 8192)
" "$PT_SRC/file"
  "$PASSTHROUGH" -f -o source="$PT_SRC" -o cache=never "$PT_MNT" >"$WORK/pt.log" 2>&1 &
  PT_PID=$!
  for ((i = 0; i < 200; i++)); do mountpoint -q "$PT_MNT" && break; sleep 0.05; done
  mountpoint -q "$PT_MNT" || { cat "$WORK/pt.log" >&2; exit 1; }
  passes passthrough_ll "$PT_MNT/file" "$PT_PID"
fi
