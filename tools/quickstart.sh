#!/usr/bin/env bash
# walfs quick start: from a fresh Debian 12 machine (as root, from the checkout) to a
# running PostgreSQL 15 cluster, made the Debian way, whose pg_wal lives on a walfs
# mount, in one command.
#
#   tools/quickstart.sh              install what is missing, build, create a pool, mount it,
#                                    create the cluster 15/quickstart with pg_createcluster
#                                    (listed by pg_lsclusters, run by pg_ctlcluster) with its
#                                    WAL on the mount, start it, run a short pgbench, print
#                                    where everything is
#   tools/quickstart.sh --stop       stop that cluster (pg_ctlcluster) and unmount (files are
#                                    kept; running tools/quickstart.sh again resumes them)
#   tools/quickstart.sh --purge      --stop, then drop the cluster (pg_dropcluster) and
#                                    delete the pool, the mount point and the daemon's files
#
# Options:
#   --dir DIR        where the pool and the daemon's log go (default /var/lib/walfs):
#                    DIR/15-CLUSTER.pool and DIR/quickstart/
#   --cluster NAME   the cluster's name (default quickstart): data in
#                    /var/lib/postgresql/15/NAME, settings in /etc/postgresql/15/NAME, the
#                    mount at /var/lib/postgresql/15/NAME-wal
#   --size SIZE      pool size for a new pool (mkfs.walfs syntax). Default: what a
#                    cluster with PostgreSQL's default max_wal_size (1GB) needs (docs/
#                    operations.md "Sizing a pool", about 1.1 GiB). With a smaller SIZE, the new
#                    cluster's max_wal_size is set to what the pool fits
#   --seconds N      pgbench duration (default 10; 0 skips pgbench)
#   --scale N        pgbench scale (default 10)
#   --build-dir DIR  CMake build directory (default ./build)
#   --no-build       use the programs already built in --build-dir
#   --no-deps        do not install missing packages
#   --force-pmem     run the daemon with PMEM_IS_PMEM_FORCE=1 (pmem mode on a pool that
#                    is not PMEM: to try direct access; put the pool on tmpfs with --dir,
#                    it is then durable only as long as the machine stays up)
# In pmem mode the cluster's environment file (/etc/postgresql/15/NAME/environment)
# preloads libwalfs-direct.so (direct access: WAL writes go straight into the pool, no
# FUSE round trip); in msync mode it does not.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
PG_VERSION=15
PG_BIN=/usr/lib/postgresql/$PG_VERSION/bin
DIR=/var/lib/walfs
CLUSTER=quickstart
SIZE=
SECONDS_BENCH=10
SCALE=10
BUILD_DIR=$SRC/build
BUILD=1
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
    --cluster) CLUSTER=${2:?--cluster needs a name}; shift ;;
    --size) SIZE=${2:?--size needs a size}; shift ;;
    --seconds) SECONDS_BENCH=${2:?--seconds needs a number}; shift ;;
    --scale) SCALE=${2:?--scale needs a number}; shift ;;
    --build-dir) BUILD_DIR=${2:?--build-dir needs a directory}; shift ;;
    --no-build) BUILD=0 ;;
    --no-deps) DEPS=0 ;;
    --force-pmem) FORCE_PMEM=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done
[[ $SECONDS_BENCH =~ ^[0-9]+$ ]] || die "--seconds needs a whole number"
[[ $SCALE =~ ^[1-9][0-9]*$ ]] || die "--scale needs a positive whole number"
[[ $CLUSTER =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]*$ ]] || die "--cluster: '$CLUSTER' is not a cluster name pg_createcluster accepts"
[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages, mounts, and creates a PostgreSQL cluster)"
[[ $BUILD_DIR = /* ]] || BUILD_DIR=$PWD/$BUILD_DIR
[[ $DIR = /* ]] || DIR=$PWD/$DIR

POOL=$DIR/$PG_VERSION-$CLUSTER.pool
BASE=$DIR/quickstart
RUN=$BASE/$CLUSTER
WALFS_LOG=$RUN/walfs.log
WALFS_PIDFILE=$RUN/walfs.pid
CREATED_DIR=$RUN/created-dir  # names DIR when the quick start made it, for --purge
MNT=/var/lib/postgresql/$PG_VERSION/$CLUSTER-wal
DATA=/var/lib/postgresql/$PG_VERSION/$CLUSTER
CONF=/etc/postgresql/$PG_VERSION/$CLUSTER
WALFS=$BUILD_DIR/fs/walfs
MKFS=$BUILD_DIR/tools/mkfs.walfs
WALFSCTL=$BUILD_DIR/tools/walfsctl
DIRECT_LIB=$BUILD_DIR/fs/direct/libwalfs-direct.so
ENV_MARK="# walfs quick start: direct access"

as_postgres() { runuser -u postgres -- "$@"; }

# The cluster's line in pg_lsclusters (Ver Cluster Port Status Owner Data Log), if any.
cluster_line() {
  command -v pg_lsclusters >/dev/null || return 0
  pg_lsclusters -h 2>/dev/null | awk -v v="$PG_VERSION" -v c="$CLUSTER" '$1 == v && $2 == c'
}
cluster_exists() { [ -n "$(cluster_line)" ]; }
cluster_online() { [ "$(cluster_line | awk '{print $4}')" = online ]; }

stop_all() {
  local i pid
  if cluster_online; then
    say "stopping the cluster $PG_VERSION/$CLUSTER"
    pg_ctlcluster "$PG_VERSION" "$CLUSTER" stop || die "pg_ctlcluster $PG_VERSION $CLUSTER stop failed"
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

# A cluster of that name that is not the quick start's is never touched.
if cluster_exists && [ "$(readlink "$DATA/pg_wal" 2>/dev/null)" != "$MNT/pg_wal" ]; then
  die "a cluster $PG_VERSION/$CLUSTER exists whose pg_wal is not on $MNT: not the quick start's; choose another name with --cluster"
fi

case $ACTION in
  stop)
    stop_all
    say "stopped. Kept: the cluster $PG_VERSION/$CLUSTER, $POOL, $MNT (run tools/quickstart.sh again to resume, --purge to delete)"
    exit 0
    ;;
  purge)
    stop_all
    if cluster_exists; then
      say "dropping the cluster $PG_VERSION/$CLUSTER"
      pg_dropcluster "$PG_VERSION" "$CLUSTER" || die "pg_dropcluster $PG_VERSION $CLUSTER failed"
    fi
    made_dir=$(cat "$CREATED_DIR" 2>/dev/null || true)
    rm -f "$POOL"
    [ ! -d "$MNT" ] || rmdir "$MNT" || die "$MNT is not empty: left in place"
    rm -rf "$RUN"
    rmdir "$BASE" 2>/dev/null || true
    if [ "$made_dir" = "$DIR" ]; then rmdir "$DIR" 2>/dev/null || true; fi
    say "dropped $PG_VERSION/$CLUSTER and deleted $POOL, $MNT and $RUN"
    exit 0
    ;;
esac

# Refuse to start twice.
if cluster_online || mountpoint -q "$MNT" 2>/dev/null; then
  die "already running (cluster $PG_VERSION/$CLUSTER, mount $MNT). Stop it first: $SRC/tools/quickstart.sh --stop --dir $DIR --cluster $CLUSTER"
fi
if cluster_exists && [ ! -e "$POOL" ]; then
  die "the cluster $PG_VERSION/$CLUSTER exists but its pool $POOL is gone; remove it with $0 --purge --dir $DIR --cluster $CLUSTER"
fi

# 1. Dependencies: only when something is missing.
missing=()
for f in /usr/bin/fusermount3 "$PG_BIN/initdb" "$PG_BIN/pgbench" /usr/bin/pg_createcluster; do
  [ -e "$f" ] || missing+=("$f")
done
if ((BUILD)); then
  for f in /usr/bin/cmake /usr/bin/g++ /usr/bin/pkg-config /usr/include/libpmem.h \
    /usr/include/fuse3/fuse_lowlevel.h /usr/include/absl/status/status.h; do
    [ -e "$f" ] || missing+=("$f")
  done
fi
if ((${#missing[@]})); then
  ((DEPS)) || die "missing: ${missing[*]} (run tools/install-deps.sh, or drop --no-deps)"
  say "installing dependencies (missing: ${missing[*]})"
  "$SRC/tools/install-deps.sh"
fi
[ -c /dev/fuse ] || die "/dev/fuse is missing (load the fuse module: modprobe fuse)"
id postgres >/dev/null 2>&1 || die "no postgres user (is postgresql-15 installed?)"

# 2. Build the daemon and the tools.
if ((BUILD)); then
  say "building walfs in $BUILD_DIR"
  mkdir -p "$BUILD_DIR"
  cmake -S "$SRC" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD_DIR.quickstart-cmake.log" 2>&1 ||
    { tail -n 30 "$BUILD_DIR.quickstart-cmake.log" >&2; die "cmake configure failed"; }
  cmake --build "$BUILD_DIR" -j"${JOBS:-$(nproc)}" --target walfs mkfs_walfs fsck_walfs walfsctl \
    walfs_direct \
    >"$BUILD_DIR.quickstart-build.log" 2>&1 ||
    { tail -n 30 "$BUILD_DIR.quickstart-build.log" >&2; die "build failed"; }
  rm -f "$BUILD_DIR.quickstart-cmake.log" "$BUILD_DIR.quickstart-build.log"
fi
[ -x "$WALFS" ] && [ -x "$MKFS" ] && [ -x "$WALFSCTL" ] || die "no $WALFS, $MKFS or $WALFSCTL (build them, or drop --no-build)"

# 3. The pool (0600, postgres's, so that a direct-access server can open it) and the
# mount point (empty, postgres's).
if [ ! -d "$DIR" ]; then
  install -d -m 0755 "$DIR"
  mkdir -p "$RUN"
  echo "$DIR" >"$CREATED_DIR"
fi
mkdir -p "$RUN"
if [ -e "$POOL" ]; then
  say "reusing pool $POOL"
else
  # Sized for the cluster (docs/operations.md "Sizing a pool"): by default for PostgreSQL's
  # max_wal_size; with --size, the cluster's max_wal_size follows the pool (below).
  if [ -n "$SIZE" ]; then
    say "creating a $SIZE pool at $POOL"
    "$MKFS" --size "$SIZE" --owner postgres:postgres "$POOL" >"$RUN/mkfs.log" ||
      die "mkfs.walfs failed"
  else
    say "creating a pool at $POOL sized for max_wal_size = 1GB (PostgreSQL's default)"
    "$MKFS" --max-wal-size 1GB --owner postgres:postgres "$POOL" >"$RUN/mkfs.log" ||
      die "mkfs.walfs failed"
  fi
  cat "$RUN/mkfs.log"
  # What the pool fits, for the cluster made below ("fits  max_wal_size = NMB ...").
  sed -n 's/.*fits *max_wal_size = \([0-9]*\)MB.*/\1/p' "$RUN/mkfs.log" >"$RUN/max_wal_size"
fi
install -d -o postgres -g postgres -m 0700 "$MNT"

# 4. Mount (the daemon, run by root, stays in the foreground of its own session, logging
# to a file).
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
MODE=$("$WALFSCTL" status "$MNT" --json | sed -n 's/.*"mode":"\([a-z]*\)".*/\1/p')

# 5. The cluster, made the Debian way, WAL on the mount.
if cluster_exists; then
  say "reusing the cluster $PG_VERSION/$CLUSTER"
else
  say "creating the cluster $PG_VERSION/$CLUSTER (pg_createcluster) with pg_wal on $MNT"
  # A pool smaller than PostgreSQL's max_wal_size (1GB) needs a smaller one, or the
  # WAL fills it and the cluster stops (docs/operations.md "Sizing a pool").
  WAL_OPTS=()
  fits=$(cat "$RUN/max_wal_size" 2>/dev/null || true)
  if [[ $fits =~ ^[0-9]+$ ]] && ((fits < 1024)); then
    ((fits >= 32)) || die "the pool $POOL is too small for a cluster (it fits max_wal_size ${fits}MB); make it bigger with --size"
    WAL_OPTS=(-o "max_wal_size=${fits}MB" -o "min_wal_size=$((fits < 80 ? 32 : 80))MB")
    say "the pool fits max_wal_size = ${fits}MB: the cluster gets that, not PostgreSQL's 1GB"
  fi
  pg_createcluster "$PG_VERSION" "$CLUSTER" "${WAL_OPTS[@]}" -- --waldir="$MNT/pg_wal" \
    >"$RUN/pg_createcluster.log" 2>&1 ||
    { cat "$RUN/pg_createcluster.log" >&2; die "pg_createcluster failed"; }
fi
# Direct access needs pmem mode: only there is a store the server persists itself
# durable. The line goes into the cluster's environment file, which pg_ctlcluster and
# postgresql@15-NAME.service read, and out again when the mode is not pmem.
if [ -f "$CONF/environment" ]; then
  sed -i "/^$ENV_MARK\$/,+1d" "$CONF/environment"
fi
if [ "$MODE" = pmem ] && [ -f "$DIRECT_LIB" ]; then
  printf '%s\n%s\n' "$ENV_MARK" "LD_PRELOAD = '$DIRECT_LIB'" >>"$CONF/environment"
  DIRECT_NOTE="on: $CONF/environment preloads $DIRECT_LIB, WAL writes go straight into the pool"
else
  DIRECT_NOTE="off: the pool runs in $MODE mode (direct access needs pmem mode: a pool on PMEM, or --force-pmem to try it)"
fi
say "direct access $DIRECT_NOTE"
pg_ctlcluster "$PG_VERSION" "$CLUSTER" start ||
  { tail -n 30 "/var/log/postgresql/postgresql-$PG_VERSION-$CLUSTER.log" >&2; die "the cluster did not start"; }
PORT=$(cluster_line | awk '{print $3}')
LOG=$(cluster_line | awk '{print $7}')

# 6. A short pgbench.
tps=
if ((SECONDS_BENCH > 0)); then
  say "pgbench: initializing (scale $SCALE), then ${SECONDS_BENCH}s with 4 clients"
  as_postgres "$PG_BIN/pgbench" -h /var/run/postgresql -p "$PORT" -i -s "$SCALE" -q postgres \
    >"$RUN/pgbench-init.log" 2>&1 || { cat "$RUN/pgbench-init.log" >&2; die "pgbench -i failed"; }
  as_postgres "$PG_BIN/pgbench" -h /var/run/postgresql -p "$PORT" -c 4 -j 2 -T "$SECONDS_BENCH" postgres \
    >"$RUN/pgbench.log" 2>&1 || { cat "$RUN/pgbench.log" >&2; die "pgbench failed"; }
  tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$RUN/pgbench.log")
fi

cat <<EOF

walfs quick start is running.
  pool        $POOL
  mount       $MNT  (walfs, mode $MODE, daemon pid $(cat "$WALFS_PIDFILE"), log $WALFS_LOG)
  direct      $DIRECT_NOTE
  cluster     $PG_VERSION/$CLUSTER (pg_lsclusters), port $PORT, settings in $CONF
  WAL         $MNT/pg_wal  (symlinked from $DATA/pg_wal)
  server log  $LOG
${tps:+  pgbench     $tps tps (4 clients, ${SECONDS_BENCH}s; details in $RUN/pgbench.log)
}
Connect:
  runuser -u postgres -- psql -p $PORT
Status of the mount:
  $WALFSCTL status $DATA/pg_wal
Stop it:
  pg_ctlcluster $PG_VERSION $CLUSTER stop
  fusermount3 -u $MNT
or simply: $SRC/tools/quickstart.sh --stop --dir $DIR --cluster $CLUSTER   (--purge also deletes everything)
EOF
