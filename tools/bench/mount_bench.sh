#!/usr/bin/env bash
# What a mount costs before segment creation is fast again, and the CPU the daemon
# spends meanwhile.
#
#   tools/bench/mount_bench.sh --pool PATH --size SIZE [--build-dir DIR] [--walfs BIN]
#       [--prepare-walfs BIN] [--secs N] [--steady-us US] [--mode pmem|msync]
#       [--sparse] [--idle] [--keep-pool]
#
# Makes a pool at PATH (mkfs.walfs --size SIZE on a new file, which mkfs allocates;
# --sparse then punches out its whole data area, which mkfs left zero), mounts it
# once and writes and removes a few segments so the pool has been used, unmounts it
# cleanly, then measures the next mount:
#   - for SECS seconds (default 60) from the moment the daemon starts, one 16 MiB
#     segment is created every 100 ms as PostgreSQL's XLogFileInit does (open O_CREAT,
#     32 x 8 KiB zero pwritev until full, fsync, close; wal_init_zero=on), the oldest
#     one removed when more than four exist;
#   - steady_us: the median creation time of the window's last ten segments, or
#     --steady-us (give a figure measured with no free-space work in flight when the
#     window is too short for that work to end);
#   - first_fast_s: seconds from the daemon's start to the end of the first segment
#     created in under twice steady_us; settled_s: to the first of five consecutive
#     segments whose median is under twice steady_us; mounted_s: daemon start to mount
#     point ready;
#   - daemon_cpu_s: user+system CPU of the daemon at the end of the window;
#   - seg_median_first10_us: median of the window's first ten creations.
# --idle creates no segment in the window: daemon_cpu_s is then what the mount alone
# costs.
# pmem mode (the default) sets PMEM_IS_PMEM_FORCE=1. The pool is deleted at exit unless
# --keep-pool. --walfs runs another daemon binary (another build); --prepare-walfs runs
# the first mount with another one (an older walfs leaves a pool whose free space the
# next mount does not trust).
# Run as root (FUSE mount) from a built tree; needs python3.
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
PREPARE_WALFS=
POOL=
SIZE=
SECS=60
STEADY_US=
MODE=pmem
KEEP_POOL=0
SPARSE=0
IDLE=0
while [ $# -gt 0 ]; do
  case $1 in
    --pool) POOL=$2; shift ;;
    --size) SIZE=$2; shift ;;
    --build-dir) BUILD_DIR=$2; shift ;;
    --walfs) WALFS=$2; shift ;;
    --prepare-walfs) PREPARE_WALFS=$2; shift ;;
    --secs) SECS=$2; shift ;;
    --steady-us) STEADY_US=$2; shift ;;
    --mode) MODE=$2; shift ;;
    --keep-pool) KEEP_POOL=1 ;;
    --sparse) SPARSE=1 ;;
    --idle) IDLE=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "mount_bench.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
  shift
done
[ -n "$POOL" ] && [ -n "$SIZE" ] || { echo "mount_bench.sh: --pool and --size are required" >&2; exit 1; }
[ ! -e "$POOL" ] || { echo "mount_bench.sh: $POOL exists; give a new path" >&2; exit 1; }
case $MODE in
  pmem) export PMEM_IS_PMEM_FORCE=1 ;;
  msync) unset PMEM_IS_PMEM_FORCE ;;
  *) echo "mount_bench.sh: --mode is pmem or msync" >&2; exit 1 ;;
esac
WALFS=${WALFS:-$BUILD_DIR/fs/walfs}
MKFS=$BUILD_DIR/tools/mkfs.walfs
for b in "$WALFS" "$MKFS"; do [ -x "$b" ] || { echo "mount_bench.sh: not built: $b" >&2; exit 1; }; done

MNT=$(mktemp -d /tmp/walfs-mount-bench.XXXXXX)
LOG=$(mktemp /tmp/walfs-mount-bench.XXXXXX.log)
PID=
cleanup() {
  set +e
  if mountpoint -q "$MNT"; then fusermount3 -u -z "$MNT" || true; fi
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    sleep 1
    kill "$PID" 2>/dev/null || true
  fi
  rmdir "$MNT" 2>/dev/null || true
  rm -f "$LOG"
  [ "$KEEP_POOL" = 1 ] || rm -f "$POOL"
}
trap cleanup EXIT

# mount: starts the daemon (foreground, in the background) and waits for the mount.
# Sets PID and START_NS (CLOCK_REALTIME when the daemon was started).
mount_pool() {
  local bin=${1:-$WALFS}
  START_NS=$(date +%s%N)
  "$bin" "$POOL" "$MNT" -f -o threads=2 >"$LOG" 2>&1 &
  PID=$!
  local i
  for ((i = 0; i < 400; i++)); do
    mountpoint -q "$MNT" && return 0
    kill -0 "$PID" 2>/dev/null || { cat "$LOG" >&2; echo "walfs exited" >&2; exit 1; }
    sleep 0.025
  done
  cat "$LOG" >&2
  echo "walfs did not mount within 10s" >&2
  exit 1
}
umount_pool() {
  fusermount3 -u "$MNT"
  local i
  for ((i = 0; i < 2400; i++)); do
    kill -0 "$PID" 2>/dev/null || { wait "$PID" 2>/dev/null || true; PID=; return 0; }
    [ "$i" != 200 ] || echo "walfs still running 10s after unmount; waiting" >&2
    sleep 0.05
  done
  echo "walfs still running 120s after unmount" >&2
  exit 1
}

"$MKFS" --size "$SIZE" "$POOL" >/dev/null
if [ "$SPARSE" = 1 ]; then
  # The data area (Superblock::data_offset, at byte 120) to the end becomes a hole.
  data_offset=$(python3 -c 'import struct, sys
with open(sys.argv[1], "rb") as f: print(struct.unpack_from("<Q", f.read(128), 120)[0])' "$POOL")
  fallocate --punch-hole --offset "$data_offset" --length $(( $(stat -c %s "$POOL") - data_offset )) "$POOL"
fi
echo "pool $POOL size $SIZE mode $MODE: $(du -h "$POOL" | cut -f1) allocated"

# segments MOUNT START_NS SECS COUNT: the creation loop; prints one line per segment,
# "seconds-since-start microseconds".
SEGMENTS_PY='
import os, sys, time
mnt, start_ns, secs, count = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
seg = 16 << 20
zeros = [bytes(8192)] * 32
names = []
n = 0
end = start_ns / 1e9 + secs
while (count > 0 and n < count) or (count == 0 and time.time() < end):
    name = os.path.join(mnt, "%024X" % n)
    t0 = time.perf_counter()
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    off = 0
    while off < seg:
        off += os.pwritev(fd, zeros, off)
    os.fsync(fd)
    os.close(fd)
    t1 = time.perf_counter()
    print("%.3f %.0f" % (time.time() - start_ns / 1e9, (t1 - t0) * 1e6), flush=True)
    names.append(name)
    if len(names) > 4:
        os.unlink(names.pop(0))
    n += 1
    time.sleep(0.1)
for name in names:
    os.unlink(name)
'

mount_pool "${PREPARE_WALFS:-$WALFS}"
python3 -c "$SEGMENTS_PY" "$MNT" "$START_NS" 0 8 >/dev/null
umount_pool

mount_pool
mounted_s=$(python3 -c "import sys; print('%.3f' % ((int(sys.argv[1]) - int(sys.argv[2])) / 1e9))" "$(date +%s%N)" "$START_NS")
SAMPLES=
[ "$IDLE" = 1 ] || SAMPLES=$(python3 -c "$SEGMENTS_PY" "$MNT" "$START_NS" "$SECS" 0)
# The rest of the window, if the loop ended early, then the daemon's CPU.
python3 -c "import time, sys; d = int(sys.argv[1]) / 1e9 + float(sys.argv[2]) - time.time(); time.sleep(max(0, d))" "$START_NS" "$SECS"
read -r utime stime < <(awk '{print $14, $15}' "/proc/$PID/stat")
ticks=$(getconf CLK_TCK)
umount_pool
grep -i "free space" "$LOG" || true
if [ "$IDLE" = 1 ]; then
  echo "mounted_s $mounted_s"
  awk -v u="$utime" -v s="$stime" -v t="$ticks" 'BEGIN {printf "daemon_cpu_s %.2f (idle)\n", (u + s) / t}'
  exit 0
fi

python3 - "$SAMPLES" "$mounted_s" "$utime" "$stime" "$ticks" "${STEADY_US:-}" <<'PY'
import statistics, sys
samples = [tuple(map(float, l.split())) for l in sys.argv[1].splitlines() if l.strip()]
mounted, utime, stime, ticks = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
times = [us for _, us in samples]
steady = float(sys.argv[6]) if sys.argv[6] else statistics.median(times[-10:])
first_fast = next((t for t, us in samples if us < 2 * steady), None)
# From where on five consecutive creations have a median under twice steady.
settled = next((samples[i][0] for i in range(len(samples) - 4)
                if statistics.median(times[i:i + 5]) < 2 * steady), None)
print("mounted_s %.3f" % mounted)
print("segments %d" % len(samples))
print("seg_median_first10_us %.0f" % statistics.median(times[:10]))
print("seg_max_us %.0f" % max(times))
print("steady_us %.0f%s" % (steady, " (given)" if sys.argv[6] else ""))
print("first_fast_s %s" % ("%.3f" % first_fast if first_fast is not None else "none"))
print("settled_s %s" % ("%.3f" % settled if settled is not None else "none"))
print("daemon_cpu_s %.2f" % ((utime + stime) / ticks))
PY
