#!/usr/bin/env bash
# walfs quick start: from a fresh Debian 12 machine (as root, from the checkout) to a
# running PostgreSQL 15 whose pg_wal lives on a walfs mount, in one command.
#
#   tools/quickstart.sh              install what is missing, build, create a pool, mount it,
#                                    create and start a cluster with its WAL on the mount,
#                                    run a short pgbench, print where everything is
#   tools/quickstart.sh --stop       stop that cluster and unmount (files are kept; running
#                                    tools/quickstart.sh again resumes them)
#   tools/quickstart.sh --purge      --stop, then delete the pool, the cluster and the dirs
#
# Options:
#   --dir DIR        where everything goes (default /var/lib/walfs): DIR/quickstart.pool and
#                    DIR/quickstart/{wal,data,run}
#   --size SIZE      pool size for a new pool (default 1G; mkfs.walfs syntax)
#   --seconds N      pgbench duration (default 10; 0 skips pgbench)
#   --build-dir DIR  CMake build directory (default ./build)
#   --no-deps        do not install missing packages
#   --force-pmem     run the daemon with PMEM_IS_PMEM_FORCE=1 (pmem mode on a pool that
#                    is not PMEM: to try direct access; put the pool on tmpfs with --dir,
#                    it is then durable only as long as the machine stays up)
# In pmem mode PostgreSQL runs with libwalfs-direct.so preloaded (direct access: WAL
# writes go straight into the pool, no FUSE round trip); in msync mode it runs without.
# The server listens on a unix socket in DIR/quickstart/run only (no TCP), so it does not
# collide with another PostgreSQL on the machine.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
PG_BIN=/usr/lib/postgresql/15/bin
DIR=/var/lib/walfs
SIZE=1G
SECONDS_BENCH=10
BUILD_DIR=$SRC/build
DEPS=1
FORCE_PMEM=0
ACTION=start

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() {
  echo "quickstart: $*" >&2
  exit 1
}
say() { echo "quickstart: $*"; }

while (($#)); do
  case $1 in
    --stop) ACTION=stop ;;
    --purge) ACTION=purge ;;
    --dir) DIR=${2:?--dir needs a directory}; shift ;;
    --size) SIZE=${2:?--size needs a size}; shift ;;
    --seconds) SECONDS_BENCH=${2:?--seconds needs a number}; shift ;;
    --build-dir) BUILD_DIR=${2:?--build-dir needs a directory}; shift ;;
    --no-deps) DEPS=0 ;;
    --force-pmem) FORCE_PMEM=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done
[[ $SECONDS_BENCH =~ ^[0-9]+$ ]] || die "--seconds needs a whole number"
[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages, mounts, and runs PostgreSQL as postgres)"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
[[ $BUILD_DIR = /* ]] || BUILD_DIR=$PWD/$BUILD_DIR

POOL=$DIR/quickstart.pool
BASE=$DIR/quickstart
MNT=$BASE/wal
DATA=$BASE/data
RUN=$BASE/run
PGLOG=$RUN/postgresql.log
WALFS_LOG=$RUN/walfs.log
WALFS_PIDFILE=$RUN/walfs.pid
WALFS=$BUILD_DIR/fs/walfs
MKFS=$BUILD_DIR/tools/mkfs.walfs
WALFSCTL=$BUILD_DIR/tools/walfsctl
DIRECT_LIB=$BUILD_DIR/fs/direct/libwalfs-direct.so

as_postgres() { runuser -u postgres -- "$@"; }

server_running() {
  [ -f "$DATA/postmaster.pid" ] && kill -0 "$(head -n 1 "$DATA/postmaster.pid")" 2>/dev/null
}

stop_all() {
  local i pid
  if server_running; then
    say "stopping PostgreSQL ($DATA)"
    as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 120 stop >/dev/null ||
      die "pg_ctl stop failed; see $PGLOG"
  fi
  if mountpoint -q "$MNT" 2>/dev/null; then
    say "unmounting $MNT"
    fusermount3 -u "$MNT" || die "fusermount3 -u $MNT failed (still in use? see fuser -vm $MNT)"
  fi
  pid=$(cat "$WALFS_PIDFILE" 2>/dev/null || true)
  if [ -n "$pid" ]; then
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    ! kill -0 "$pid" 2>/dev/null || die "walfs daemon $pid still running after unmount"
    rm -f "$WALFS_PIDFILE"
  fi
}

case $ACTION in
  stop)
    stop_all
    say "stopped. Files kept: $POOL, $BASE (run tools/quickstart.sh again to resume, --purge to delete)"
    exit 0
    ;;
  purge)
    stop_all
    rm -rf "$BASE"
    rm -f "$POOL"
    rmdir "$DIR" 2>/dev/null || true
    say "stopped and deleted $POOL and $BASE"
    exit 0
    ;;
esac

# Refuse to start twice.
if server_running || mountpoint -q "$MNT" 2>/dev/null; then
  die "already running (mount $MNT, data $DATA). Stop it first: $SRC/tools/quickstart.sh --stop${DIR:+ --dir $DIR}"
fi
if [ -e "$DATA/PG_VERSION" ] && [ ! -e "$POOL" ]; then
  die "$DATA holds a cluster but its pool $POOL is gone; remove it with $0 --purge --dir $DIR"
fi

# 1. Dependencies: only when something is missing.
missing=()
for f in /usr/bin/cmake /usr/bin/g++ /usr/bin/pkg-config /usr/include/libpmem.h \
  /usr/include/fuse3/fuse_lowlevel.h /usr/include/absl/status/status.h /usr/bin/fusermount3 \
  "$PG_BIN/initdb" "$PG_BIN/pgbench"; do
  [ -e "$f" ] || missing+=("$f")
done
if ((${#missing[@]})); then
  ((DEPS)) || die "missing: ${missing[*]} (run tools/install-deps.sh, or drop --no-deps)"
  say "installing dependencies (missing: ${missing[*]})"
  "$SRC/tools/install-deps.sh"
fi
[ -c /dev/fuse ] || die "/dev/fuse is missing (load the fuse module: modprobe fuse)"
id postgres >/dev/null 2>&1 || die "no postgres user (is postgresql-15 installed?)"

# 2. Build the daemon and the tools.
say "building walfs in $BUILD_DIR"
cmake -S "$SRC" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD_DIR.quickstart-cmake.log" 2>&1 ||
  { tail -n 30 "$BUILD_DIR.quickstart-cmake.log" >&2; die "cmake configure failed"; }
cmake --build "$BUILD_DIR" -j"${JOBS:-$(nproc)}" --target walfs mkfs_walfs fsck_walfs walfsctl \
  walfs_direct \
  >"$BUILD_DIR.quickstart-build.log" 2>&1 ||
  { tail -n 30 "$BUILD_DIR.quickstart-build.log" >&2; die "build failed"; }
rm -f "$BUILD_DIR.quickstart-cmake.log" "$BUILD_DIR.quickstart-build.log"
[ -x "$WALFS" ] && [ -x "$MKFS" ] || die "build produced no $WALFS / $MKFS"

# 3. The pool (0600, root's) and the directories postgres needs.
mkdir -p "$BASE" "$MNT" "$RUN"
chmod 0755 "$DIR" "$BASE"
chown postgres: "$RUN"
if [ -e "$POOL" ]; then
  say "reusing pool $POOL"
else
  say "creating a $SIZE pool at $POOL"
  "$MKFS" --size "$SIZE" "$POOL" || die "mkfs.walfs failed"
fi
chmod 0600 "$POOL"

# 4. Mount (the daemon stays in the foreground of its own session, logging to a file).
say "mounting $POOL at $MNT"
if ((FORCE_PMEM)); then
  PMEM_IS_PMEM_FORCE=1 setsid "$WALFS" "$POOL" "$MNT" -f -o allow_other,default_permissions \
    </dev/null >"$WALFS_LOG" 2>&1 &
else
  setsid "$WALFS" "$POOL" "$MNT" -f -o allow_other,default_permissions </dev/null >"$WALFS_LOG" 2>&1 &
fi
echo $! >"$WALFS_PIDFILE"
for ((i = 0; i < 200; i++)); do
  mountpoint -q "$MNT" && break
  kill -0 "$(cat "$WALFS_PIDFILE")" 2>/dev/null || { cat "$WALFS_LOG" >&2; die "walfs exited"; }
  sleep 0.05
done
mountpoint -q "$MNT" || { cat "$WALFS_LOG" >&2; die "walfs did not mount $MNT"; }
chown postgres: "$MNT"
MODE=$("$WALFSCTL" status "$MNT" --json | sed -n 's/.*"mode":"\([a-z]*\)".*/\1/p')
# Direct access needs pmem mode: only there is a store the server persists itself durable.
SERVER_ENV=()
if [ "$MODE" = pmem ] && [ -f "$DIRECT_LIB" ]; then
  SERVER_ENV=(env LD_PRELOAD="$DIRECT_LIB")
  DIRECT_NOTE="on: PostgreSQL preloads $DIRECT_LIB, WAL writes go straight into the pool"
else
  DIRECT_NOTE="off: the pool runs in $MODE mode (direct access needs pmem mode: a pool on PMEM, or --force-pmem to try it)"
fi
say "direct access $DIRECT_NOTE"

# 5. The cluster, WAL on the mount.
if [ -e "$DATA/PG_VERSION" ]; then
  say "reusing cluster $DATA"
else
  say "creating a PostgreSQL 15 cluster in $DATA with pg_wal on $MNT"
  mkdir -p "$DATA"
  chown postgres: "$DATA"
  chmod 0700 "$DATA"
  as_postgres "${SERVER_ENV[@]}" "$PG_BIN/initdb" -D "$DATA" -X "$MNT/pg_wal" -U postgres --auth=trust \
    >"$RUN/initdb.log" 2>&1 || { cat "$RUN/initdb.log" >&2; die "initdb failed"; }
  cat >>"$DATA/postgresql.conf" <<EOF
# walfs quick start
listen_addresses = ''
unix_socket_directories = '$RUN'
EOF
fi
as_postgres "${SERVER_ENV[@]}" "$PG_BIN/pg_ctl" -D "$DATA" -l "$PGLOG" -w -t 300 start >/dev/null ||
  { tail -n 30 "$PGLOG" >&2; die "PostgreSQL did not start"; }

# 6. A short pgbench.
tps=
if ((SECONDS_BENCH > 0)); then
  say "pgbench: initializing (scale 10), then ${SECONDS_BENCH}s with 4 clients"
  as_postgres "$PG_BIN/pgbench" -h "$RUN" -i -s 10 -q postgres >"$RUN/pgbench-init.log" 2>&1 ||
    { cat "$RUN/pgbench-init.log" >&2; die "pgbench -i failed"; }
  as_postgres "$PG_BIN/pgbench" -h "$RUN" -c 4 -j 2 -T "$SECONDS_BENCH" postgres >"$RUN/pgbench.log" 2>&1 ||
    { cat "$RUN/pgbench.log" >&2; die "pgbench failed"; }
  tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$RUN/pgbench.log")
fi

cat <<EOF

walfs quick start is running.
  pool        $POOL
  mount       $MNT  (walfs, mode $MODE, daemon pid $(cat "$WALFS_PIDFILE"), log $WALFS_LOG)
  direct      $DIRECT_NOTE
  WAL         $MNT/pg_wal  (symlinked from $DATA/pg_wal)
  data dir    $DATA
  socket      $RUN/.s.PGSQL.5432  (no TCP)
  server log  $PGLOG
${tps:+  pgbench     $tps tps (4 clients, ${SECONDS_BENCH}s; details in $RUN/pgbench.log)
}
Connect:
  runuser -u postgres -- psql -h $RUN postgres
Status of the mount:
  $BUILD_DIR/tools/walfsctl status $MNT
Stop it:
  runuser -u postgres -- $PG_BIN/pg_ctl -D $DATA stop
  fusermount3 -u $MNT
or simply: $SRC/tools/quickstart.sh --stop --dir $DIR   (--purge also deletes everything)
EOF
