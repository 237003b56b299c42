#!/usr/bin/env bash
# What one 8 KiB O_DSYNC WAL write costs through walfs, and where the time goes.
#
#   tools/bench/write_profile.sh [--build-dir DIR] [--walfs BIN] [--writes N] [--out DIR]
#                                [--no-callgrind]
# (--walfs: another daemon binary to measure, e.g. an older build, with this tree's
# mkfs.walfs.)
#
# A small client (python3) makes one WAL segment on the mount and writes N 8 KiB pages
# of non-zero bytes into it with pwrite on an O_DSYNC descriptor, cycling through the
# segment, as PostgreSQL's walwriter does with wal_sync_method=open_datasync. The pool
# is on tmpfs and the daemon runs in true-PMEM mode (PMEM_IS_PMEM_FORCE=1).
#  1. Timing, daemon with its default options: wall time per write, and the CPU time
#     per write of the daemon (user, system) and of the client (user, system), from
#     /proc/PID/stat and os.times(); the same client on a plain tmpfs directory for
#     comparison. CPU times are in clock ticks, so N should give each a few hundred.
#  2. Instructions (valgrind --tool=callgrind, threads=1): the daemon's user-space
#     instructions per write, as the difference of two runs with N/5 and N writes
#     divided by the difference in writes (mount, recovery and unmount cancel out).
#     Instruction counts do not depend on the load of the machine. The profile of the
#     larger run is kept (callgrind.out) with its top functions (callgrind.top.txt).
# Prints "key value" lines and writes them to OUT/profile.txt. Run as root.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
SOURCE_DIR=$(cd "$BENCH_DIR/../.." && pwd)
WRITES=20000
OUT_DIR=
CALLGRIND=1
BUILD_DIR_ARG=
WALFS_BIN_ARG=
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR_ARG=$2; shift ;;
    --walfs) WALFS_BIN_ARG=$2; shift ;;
    --writes) WRITES=$2; shift ;;
    --out) OUT_DIR=$2; shift ;;
    --no-callgrind) CALLGRIND=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "write_profile.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "write_profile.sh: run as root" >&2; exit 2; }
if [ -n "$BUILD_DIR_ARG" ]; then
  WALFS_BUILD_DIR=$(cd "$BUILD_DIR_ARG" && pwd)
  export WALFS_BUILD_DIR
fi
export WALFS_SOURCE_DIR=${WALFS_SOURCE_DIR:-$SOURCE_DIR}
# shellcheck source=../../tests/integration/lib/common.sh
source "$SOURCE_DIR/tests/integration/lib/common.sh"
unset PMEM_IS_PMEM_FORCE WALFS_EXPERIMENT
if [ -n "$WALFS_BIN_ARG" ]; then WALFS=$(realpath "$WALFS_BIN_ARG"); fi
command -v python3 >/dev/null || skip "python3 is needed for the client"
[ -c /dev/fuse ] || skip "/dev/fuse is missing"

OUT_DIR=${OUT_DIR:-/var/tmp/walfs-profile-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
: >"$OUT_DIR/profile.txt"
say() { echo "$1 $2" | tee -a "$OUT_DIR/profile.txt"; }
work=$(mktemp -d /dev/shm/walfs-profile.XXXXXX)
on_exit "rm -rf '$work'"

# client DIR N [PID]: N O_DSYNC 8 KiB writes into DIR/<segment>; prints wall, client
# user/sys seconds, and PID's user/sys seconds (from /proc, when given).
cat >"$work/client.py" <<'EOF'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
pid = sys.argv[3] if len(sys.argv) > 3 else None
tick = os.sysconf("SC_CLK_TCK")
def cpu(p):
    if p is None:
        return (0.0, 0.0)
    f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
    return (int(f[11]) / tick, int(f[12]) / tick)
seg = 16 << 20
page = bytes((i * 7 + 1) & 0xFF or 1 for i in range(8192))
fd = os.open(os.path.join(d, "000000010000000000000001"), os.O_RDWR | os.O_CREAT | os.O_DSYNC, 0o600)
for off in range(0, seg, 8192):  # the segment exists and is full, as after wal_init_zero
    os.pwrite(fd, page, off)
c0, d0, t0 = os.times(), cpu(pid), time.perf_counter()
for i in range(n):
    os.pwrite(fd, page, (i * 8192) % seg)
t1, c1, d1 = time.perf_counter(), os.times(), cpu(pid)
os.close(fd)
os.unlink(os.path.join(d, "000000010000000000000001"))
print(t1 - t0, c1.user - c0.user, c1.system - c0.system, d1[0] - d0[0], d1[1] - d0[1])
EOF

us() { awk -v s="$1" -v n="$WRITES" 'BEGIN { printf "%.2f", s * 1e6 / n }'; }

# 1. Timing.
pool=$work/pool
make_pool "$pool" 128M
PMEM_IS_PMEM_FORCE=1 mount_walfs "$pool" "$work/mnt" -o allow_other,default_permissions
read -r wall cu cs du ds < <(python3 "$work/client.py" "$work/mnt" "$WRITES" "$WALFS_PID")
umount_walfs "$work/mnt"
mkdir -p "$work/tmpfs"
read -r twall _ tcs _ _ < <(python3 "$work/client.py" "$work/tmpfs" "$WRITES")
say walfs "$WALFS"
say writes "$WRITES"
say walfs_wall_us_per_write "$(us "$wall")"
say walfs_ops_per_s "$(awk -v w="$wall" -v n="$WRITES" 'BEGIN { printf "%.0f", n / w }')"
say daemon_user_us_per_write "$(us "$du")"
say daemon_sys_us_per_write "$(us "$ds")"
say client_user_us_per_write "$(us "$cu")"
say client_sys_us_per_write "$(us "$cs")"
say tmpfs_wall_us_per_write "$(us "$twall")"
say tmpfs_client_sys_us_per_write "$(us "$tcs")"

# 2. Instructions.
if [ "$CALLGRIND" = 1 ]; then
  command -v valgrind >/dev/null || skip "valgrind is missing"
  small=$((WRITES / 5))
  total() { awk '/^(summary|totals):/ {print $2; exit}' "$1"; }
  declare -A IR=()
  for n in "$small" "$WRITES"; do
    rm -f "$pool"
    make_pool "$pool" 128M
    mnt=$work/cg.$n
    mkdir -p "$mnt"
    PMEM_IS_PMEM_FORCE=1 valgrind --tool=callgrind --callgrind-out-file="$OUT_DIR/callgrind.$n.out" \
      "$WALFS" "$pool" "$mnt" -f -o allow_other,default_permissions,threads=1 \
      >"$OUT_DIR/valgrind.$n.log" 2>&1 &
    vpid=$!
    on_exit "fusermount3 -u -z '$mnt' 2>/dev/null; kill $vpid 2>/dev/null"
    for ((i = 0; i < 1200; i++)); do
      mountpoint -q "$mnt" && break
      kill -0 "$vpid" 2>/dev/null || { cat "$OUT_DIR/valgrind.$n.log" >&2; fail "walfs under valgrind exited"; }
      sleep 0.1
    done
    mountpoint -q "$mnt" || fail "walfs under valgrind did not mount within 120 s"
    python3 "$work/client.py" "$mnt" "$n" >/dev/null
    fusermount3 -u "$mnt"
    wait "$vpid" || fail "walfs under valgrind failed: $(tail -3 "$OUT_DIR/valgrind.$n.log")"
    IR[$n]=$(total "$OUT_DIR/callgrind.$n.out")
  done
  say daemon_instructions_per_write \
    "$(awk -v a="${IR[$small]}" -v b="${IR[$WRITES]}" -v n=$((WRITES - small)) 'BEGIN { printf "%.0f", (b - a) / n }')"
  callgrind_annotate --inclusive=yes "$OUT_DIR/callgrind.$WRITES.out" 2>/dev/null |
    head -60 >"$OUT_DIR/callgrind.top.txt" || true
  callgrind_annotate --inclusive=no "$OUT_DIR/callgrind.$WRITES.out" 2>/dev/null |
    head -45 >"$OUT_DIR/callgrind.self.txt" || true
fi
echo "profile: $OUT_DIR/profile.txt, callgrind.*.out, callgrind.top.txt, callgrind.self.txt"
