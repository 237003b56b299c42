# PostgreSQL helpers for walfs integration tests (sourced after lib/common.sh).
#
# A test cluster lives in a work dir W (make_workdir):
#   W/wal          the walfs mount point, chowned to postgres once mounted
#   W/wal/pg_wal   PostgreSQL's WAL directory (initdb -X), created by initdb inside the mount
#   W/data         PGDATA
#   W/run          owned by postgres: the unix socket (no TCP at all), the server log,
#                  client-side files
# Servers run as the postgres user and are stopped (immediate, then SIGKILL of the
# postmaster's process group) on any exit. On a failing exit, the server logs and daemon
# logs are printed to stderr before the cleanup runs, so CI failures are diagnosable.
#
# Environment:
#   WALFS_TEST_NO_MOUNT=1  development aid only (ignored under ctest): W/wal is a plain
#                          directory and no daemon, mkfs or fsck runs.
#   WALFS_PG_MODES         durability modes to run, default "pmem msync":
#                            pmem   PMEM_IS_PMEM_FORCE=1 for the daemon, pool on /dev/shm
#                            msync  no forcing, pool in the work dir (the msync path)
#   WALFS_PG_LONG=1        longer variants (more load, more switches, more rounds).
#   WALFS_PG_DIRECT=1      direct access: initdb and the server run with
#                          libwalfs-direct.so preloaded (WALFS_DIRECT_LIB), so WAL writes
#                          go straight into the pool under leases. Modes default to
#                          "pmem" (msync mode grants no lease), and pg_finish requires
#                          that the daemon granted leases. ctest runs every pg_*_test
#                          this way too, as integration.pg_*_test_direct.
#   WALFS_PG_VERSION       PostgreSQL major version, default 15 (the host's). 17 and 18
#                          run in a Debian chroot (tools/pg-chroot, cached): see "Other
#                          versions" below. ctest runs them as integration.*_pg17/_pg18.
#   WALFS_PG_PRIVATE=1     only the mount visible (L8 in docs/design/lease.md): pmem pools
#                          go to a tmpfs of their own (W/pooldir), and initdb and the server
#                          run in a private mount namespace (unshare -m) where fresh tmpfs
#                          cover /dev/shm and W/pooldir; pg_start checks that the server
#                          sees neither. fs_direct_private_test.sh runs the kill loop so.
#
# Other versions: the test re-runs itself in a private mount namespace (so no mount it
# makes can outlive it) and pg_require enters the chroot PG_ROOT of WALFS_PG_VERSION (made
# once by tools/pg-chroot; the test skips when Debian's archive is unreachable to make
# it, and only then). The daemon, mkfs, fsck and walfsctl run on the host as for 15; every
# as_postgres command runs chrooted, as the chroot's postgres user (the host's uid and
# gid). Paths are the same inside and out: the test's scratch root (work dirs: W/data,
# W/run, W/wal) is bound at its own path in the chroot as a shared mount, so the walfs
# mount made outside at W/wal appears inside, and its unmount (or a daemon's death)
# reaches both. Inside also: /proc, /dev (without its submounts), a private /dev/shm for
# PostgreSQL's shared memory; nothing of the pool: the direct library gets its
# descriptors through the mount alone (L8 in docs/design/lease.md).
# The library is copied into the scratch root and preloaded from there.

WALFS_TEST_NO_MOUNT=${WALFS_TEST_NO_MOUNT:-0}
if [ "$WALFS_TEST_NO_MOUNT" = 1 ] && [ -n "${DASHBOARD_TEST_FROM_CTEST:-}${CTEST_INTERACTIVE_DEBUG_MODE:-}" ]; then
  log "WALFS_TEST_NO_MOUNT=1 ignored: ctest runs always use a real walfs mount"
  WALFS_TEST_NO_MOUNT=0
fi
if [ "$WALFS_PG_VERSION" != 15 ]; then
  reexec_in_mount_namespace "$@"
fi
WALFS_PG_DIRECT=${WALFS_PG_DIRECT:-0}
WALFS_DIRECT_LIB=${WALFS_DIRECT_LIB:-$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so}
if [ "$WALFS_PG_DIRECT" = 1 ]; then
  WALFS_PG_MODES=${WALFS_PG_MODES:-pmem}
else
  WALFS_PG_MODES=${WALFS_PG_MODES:-pmem msync}
fi
WALFS_PG_LONG=${WALFS_PG_LONG:-0}
WALFS_PG_PRIVATE=${WALFS_PG_PRIVATE:-0}

_PG_CLUSTERS=()     # work dirs whose server log is reported on failure
_PG_DAEMON_LOGS=()  # every daemon log of this test, reported on failure

# A failing exit prints the server and daemon logs (before the cleanup removes them).
on_failure _pg_report

_pg_report() {
  local w f
  for w in "${_PG_CLUSTERS[@]}"; do
    for f in "$w"/run/pg.log "$w"/run/*.client.log; do
      [ -f "$f" ] || continue
      echo "===== $f (last 150 lines) ====="
      tail -n 150 "$f"
    done
    if [ -d "$w/wal/pg_wal" ]; then
      echo "===== ls -l $w/wal/pg_wal ====="
      ls -la "$w/wal/pg_wal" "$w/wal/pg_wal/archive_status" 2>&1 | tail -n 80
    fi
  done
  for f in "${_PG_DAEMON_LOGS[@]}"; do
    [ -f "$f" ] || continue
    echo "===== walfs daemon log $f (last 150 lines) ====="
    tail -n 150 "$f"
  done
}

# _pg_chroot_mount MOUNT-ARGS... TARGET: mount(8), undone at exit. Registered before any
# mount of the test's own, so undone after every one of them; lazy and recursive, so
# nothing stays mounted inside the shared cache.
_pg_chroot_mount() {
  mount "$@" || fail "mount $* failed"
  on_exit "umount -R -l '${*: -1}'"
}

# _pg_chroot_enter: makes (or finds) the chroot of WALFS_PG_VERSION, sets PG_ROOT, and
# mounts into it what a test needs (see "Other versions" above); every mount is undone
# at exit. Skips when Debian's archive is unreachable (tools/pg-chroot's exit 3).
_pg_chroot_enter() {
  local rc=0 root m
  [ -n "${WALFS_IN_MOUNT_NS:-}" ] || fail "chroot runs need the private mount namespace"
  command -v debootstrap >/dev/null ||
    skip "debootstrap is missing (tools/install-deps.sh): no chroot for PostgreSQL $WALFS_PG_VERSION"
  root=$("$WALFS_SOURCE_DIR/tools/pg-chroot" ensure "$WALFS_PG_VERSION") || rc=$?
  case $rc in
    0) ;;
    3) skip "no chroot for PostgreSQL $WALFS_PG_VERSION: Debian's archive is unreachable (tools/pg-chroot above)" ;;
    *) fail "tools/pg-chroot ensure $WALFS_PG_VERSION failed (exit $rc)" ;;
  esac
  PG_ROOT=$root
  _pg_chroot_mount -t tmpfs -o mode=1777,size=64m walfs-tmp "$root/tmp"
  mkdir -p "$root$_WALFS_SCRATCH"
  # The scratch root becomes a shared mount, and its bind inside is its peer: mounts made
  # below it later (walfs at W/wal) propagate in, and so do their unmounts.
  _pg_chroot_mount --bind "$_WALFS_SCRATCH" "$_WALFS_SCRATCH"
  mount --make-shared "$_WALFS_SCRATCH" || fail "mount --make-shared $_WALFS_SCRATCH failed"
  _pg_chroot_mount --bind "$_WALFS_SCRATCH" "$root$_WALFS_SCRATCH"
  _pg_chroot_mount -t proc proc "$root/proc"
  _pg_chroot_mount --bind /dev "$root/dev"
  _pg_chroot_mount -t tmpfs -o mode=1777,size=256m walfs-shm "$root/dev/shm"
  if [ "$WALFS_PG_DIRECT" = 1 ]; then
    [ -f "$WALFS_DIRECT_LIB" ] || fail "direct-access library not built: $WALFS_DIRECT_LIB"
    mkdir -p "$_WALFS_SCRATCH/lib"
    cp "$WALFS_DIRECT_LIB" "$_WALFS_SCRATCH/lib/libwalfs-direct.so"
    chmod 0755 "$_WALFS_SCRATCH/lib" "$_WALFS_SCRATCH/lib/libwalfs-direct.so"
    WALFS_DIRECT_LIB=$_WALFS_SCRATCH/lib/libwalfs-direct.so
  fi
  log "PostgreSQL $WALFS_PG_VERSION in the chroot $root ($(chroot "$root" "$PG_BIN/postgres" --version))"
}

# pg_require: skips (77) without PostgreSQL WALFS_PG_VERSION (its chroot for 17 and 18)
# or /dev/fuse; fails if walfs is not built.
pg_require() {
  if [ "$WALFS_PG_VERSION" != 15 ]; then _pg_chroot_enter; fi
  require_postgres
  [ -x "$PG_ROOT$PG_BIN/pgbench" ] || skip "pgbench is missing ($PG_ROOT$PG_BIN)"
  if [ "$WALFS_TEST_NO_MOUNT" = 1 ]; then
    log "WALFS_TEST_NO_MOUNT=1: plain directory instead of a walfs mount (development only)"
    return 0
  fi
  require_fuse
  [ -x "$MKFS" ] || fail "mkfs not built: $MKFS"
  if [ "$WALFS_PG_DIRECT" = 1 ]; then
    [ -f "$WALFS_DIRECT_LIB" ] || fail "direct-access library not built: $WALFS_DIRECT_LIB"
    log "direct access: PostgreSQL preloads $WALFS_DIRECT_LIB"
  fi
}

# as_postgres CMD...: runs a command as the postgres user (chrooted into PG_ROOT when set;
# the working directory is then the chroot's /).
as_postgres() {
  if [ -n "$PG_ROOT" ]; then
    chroot --userspec=postgres:postgres "$PG_ROOT" \
      env HOME=/var/lib/postgresql USER=postgres LOGNAME=postgres "$@"
  else
    runuser -u postgres -- "$@"
  fi
}

# as_postgres_server CMD...: as_postgres, with the direct-access library preloaded when
# WALFS_PG_DIRECT=1 (for initdb and the server; clients never touch pg_wal).
as_postgres_server() {
  local preload=()
  if [ "$WALFS_PG_DIRECT" = 1 ]; then preload=(env LD_PRELOAD="$WALFS_DIRECT_LIB"); fi
  if [ "$WALFS_PG_PRIVATE" = 1 ]; then
    # The server's processes inherit this namespace: the pool and the host's /dev/shm
    # stay out of their sight for as long as they live.
    unshare -m --propagation private -- bash -c '
      mount -t tmpfs -o size=64M,mode=1777 walfs-private-shm /dev/shm &&
        mount -t tmpfs -o size=1M,mode=0755 walfs-private-pooldir "$1" || exit 1
      shift
      exec runuser -u postgres -- "$@"' private "$W_POOLDIR" "${preload[@]}" "$@"
  else
    as_postgres "${preload[@]}" "$@"
  fi
}

# pg_private_check W POOL: with WALFS_PG_PRIVATE=1, the running server of W lives in
# another mount namespace and sees neither POOL nor anything of this namespace's
# /dev/shm; otherwise nothing.
pg_private_check() {
  [ "$WALFS_PG_PRIVATE" = 1 ] || return 0
  local w=$1 pool=$2 pm root
  pm=$(pg_postmaster_pid "$w")
  [ -n "$pm" ] || fail "private: no running postmaster in $w/data"
  [ "$(readlink "/proc/$pm/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] ||
    fail "private: the server runs in this mount namespace"
  root=/proc/$pm/root
  [ ! -e "$root$pool" ] || fail "private: the server sees the pool $pool"
  [ -d "$root$w/wal/pg_wal" ] || fail "private: the server does not see its pg_wal"
  local f
  [ -e "$W_SHM_MARK" ] && [ ! -e "$root$W_SHM_MARK" ] ||
    fail "private: the server sees the host's $W_SHM_MARK"
  for f in /dev/shm/*; do
    [ -e "$f" ] || continue
    [ ! -e "$root$f" ] || fail "private: the server sees the host's $f"
  done
}

# pg_direct_bypass W [COMMITS]: with WALFS_PG_DIRECT=1, COMMITS (default 500) autocommit
# INSERTs into a table of their own must reach the daemon as (almost) no FUSE WRITE: each
# is one WAL flush, a WRITE request each through FUSE, stored by the server itself with
# direct access (at most a new segment's zero-fill goes through the daemon), and the
# postmaster has libpmem loaded.
pg_direct_bypass() {
  [ "$WALFS_PG_DIRECT" = 1 ] || return 0
  local w=$1 commits=${2:-500} sql=$1/run/bypass.sql writes0 writes1 i
  pg_sql "$w" 'CREATE TABLE IF NOT EXISTS direct_bypass (i int)'
  for ((i = 0; i < commits; i++)); do echo "INSERT INTO direct_bypass VALUES ($i);"; done >"$sql"
  chmod 0644 "$sql"
  writes0=$(pg_walfs_counter "$w/wal" writes)
  pg_sql_file "$w" "$sql" >/dev/null
  writes1=$(pg_walfs_counter "$w/wal" writes)
  log "direct access: $commits commits made $((writes1 - writes0)) FUSE writes"
  (((writes1 - writes0) * 5 < commits)) ||
    fail "direct access: $commits commits made $((writes1 - writes0)) FUSE writes"
  # The server loads libpmem at start, so that its backends inherit it.
  grep -q libpmem "/proc/$(pg_postmaster_pid "$w")/maps" ||
    fail "direct access: the postmaster has not loaded libpmem"
}

# pg_direct_check MNT: with WALFS_PG_DIRECT=1, the daemon at MNT has granted leases (so
# the library really wrote WAL into the pool); otherwise nothing.
pg_direct_check() {
  [ "$WALFS_PG_DIRECT" = 1 ] || return 0
  local granted
  granted=$(pg_walfs_counter "$1" leases_granted)
  ((granted > 0)) || fail "direct access: the daemon at $1 granted no lease"
  log "direct access: $granted write leases and $(pg_walfs_counter "$1" read_leases_granted)" \
    "read leases granted, $(pg_walfs_counter "$1" leases_refused) refused"
}

# pg_workdir: sets W to a fresh work dir laid out as above (W/run owned by postgres),
# removed at exit.
pg_workdir() {
  W=$(make_workdir)
  mkdir -p "$W/run" "$W/data"
  chown postgres: "$W/run" "$W/data"
  chmod 0700 "$W/data"
}

# pg_pool_path W MODE MIB: where a pool of MIB MiB for MODE goes. pmem: /dev/shm (memory,
# as close to PMEM as this machine gets) when it has room, else the work dir (containers
# often have a 64 MiB /dev/shm; PMEM_IS_PMEM_FORCE still selects the pmem code path);
# msync: the work dir.
pg_pool_path() {
  local w=$1 mode=$2 mib=$3 avail
  case $mode in
    pmem)
      if [ "$WALFS_PG_PRIVATE" = 1 ]; then
        echo "$w/pooldir/walfs.pool"  # pg_mkpool mounts its tmpfs
        return 0
      fi
      avail=$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
      if [ -n "$avail" ] && ((avail >= mib + 256)); then
        echo "/dev/shm/walfs-pg.$(basename "$w").pool"
      else
        log "/dev/shm has ${avail:-no} MiB free: the pmem-mode pool goes to $w"
        echo "$w/walfs.pool"
      fi
      ;;
    msync) echo "$w/walfs.pool" ;;
    *) fail "unknown durability mode '$mode' (pmem|msync)" ;;
  esac
}

# _pg_private_pooldir W MIB: W/pooldir, a tmpfs of its own with room for a pool of MIB
# MiB (unmounted at exit); W_POOLDIR names it for as_postgres_server.
_pg_private_pooldir() {
  local w=$1 mib=$2
  mkdir -p "$w/pooldir"
  mount -t tmpfs -o size=$((mib + 16))M,mode=0755 walfs-test-pooldir "$w/pooldir" ||
    fail "cannot mount a tmpfs on $w/pooldir"
  on_exit "umount -l '$w/pooldir'"
  W_POOLDIR=$w/pooldir
  # Something of this namespace's /dev/shm the server must not see.
  W_SHM_MARK=$(mktemp /dev/shm/walfs-private-mark.XXXXXX)
  on_exit "rm -f '$W_SHM_MARK'"
}

# pg_mkpool POOL SIZE_MIB [mkfs args...]: a fresh pool (removed at exit).
pg_mkpool() {
  local pool=$1 mib=$2
  shift 2
  [ "$WALFS_TEST_NO_MOUNT" = 1 ] && return 0
  if [ "$WALFS_PG_PRIVATE" = 1 ] && [ "$(dirname "$pool")" = "$W/pooldir" ] &&
    ! mountpoint -q "$W/pooldir"; then
    _pg_private_pooldir "$W" "$mib"
  fi
  on_exit "rm -f '$pool'"
  # Direct access: the server opens the pool itself, so (as in the packaged setup) the
  # pool belongs to the user it runs as.
  if [ "$WALFS_PG_DIRECT" = 1 ]; then set -- --owner postgres:postgres "$@"; fi
  make_pool "$pool" $((mib << 20)) "$@" || fail "mkfs.walfs --size $((mib << 20)) $* $pool failed"
}

# pg_mount POOL MNT MODE [daemon args...]: mounts POOL at MNT for postgres (allow_other,
# default_permissions) and hands the root directory to postgres. MODE pmem runs the
# daemon with PMEM_IS_PMEM_FORCE=1. Sets WALFS_PID / WALFS_LOG like mount_walfs.
pg_mount() {
  local pool=$1 mnt=$2 mode=$3
  shift 3
  if [ "$WALFS_TEST_NO_MOUNT" = 1 ]; then
    mkdir -p "$mnt"
  else
    if [ "$mode" = pmem ]; then
      export PMEM_IS_PMEM_FORCE=1
    else
      unset PMEM_IS_PMEM_FORCE
    fi
    mount_walfs "$pool" "$mnt" -o allow_other,default_permissions "$@"
    unset PMEM_IS_PMEM_FORCE
    _PG_DAEMON_LOGS+=("$WALFS_LOG")
    local got
    got=$(pg_walfs_status_string "$mnt" mode)
    [ "$got" = "$mode" ] || fail "the daemon runs in mode '$got', the test wanted '$mode'"
    log "mounted $pool at $mnt (mode $mode, daemon pid $WALFS_PID)"
  fi
  # Root owns the root inode, so root may chown it through default_permissions.
  chown postgres: "$mnt" || fail "chown postgres: $mnt (the mount root) failed"
  [ "$(stat -c %U "$mnt")" = postgres ] || fail "$mnt is not owned by postgres after chown"
  as_postgres test -w "$mnt" || fail "postgres cannot write to $mnt"
}

# pg_umount MNT: clean unmount; waits for the daemon to exit.
pg_umount() {
  [ "$WALFS_TEST_NO_MOUNT" = 1 ] && return 0
  umount_walfs "$1"
  log "unmounted $1"
}

# pg_initdb W [initdb args...]: a cluster in W/data with its WAL in W/wal/pg_wal,
# configured for unix-socket-only access in W/run.
pg_initdb() {
  local w=$1
  shift
  _PG_CLUSTERS+=("$w")
  as_postgres_server "$PG_BIN/initdb" -D "$w/data" -X "$w/wal/pg_wal" -U postgres \
    --auth=trust "$@" >"$w/run/initdb.log" 2>&1 ||
    { cat "$w/run/initdb.log" >&2; fail "initdb -X $w/wal/pg_wal $* failed"; }
  [ -L "$w/data/pg_wal" ] || fail "initdb did not make $w/data/pg_wal a symlink"
  [ "$(readlink "$w/data/pg_wal")" = "$w/wal/pg_wal" ] || fail "pg_wal symlink points elsewhere"
  pg_conf "$w" "listen_addresses = ''" \
    "unix_socket_directories = '$w/run'" \
    "max_connections = 20" \
    "shared_buffers = 32MB" \
    "log_checkpoints = on" \
    "log_min_messages = warning"
}

# pg_conf W LINE...: appends settings to postgresql.conf (later lines win).
pg_conf() {
  local w=$1
  shift
  printf '%s\n' "$@" >>"$w/data/postgresql.conf"
}

# pg_start W: starts the server (pg_ctl -w); registers its stop at exit once.
pg_start() {
  local w=$1
  if [ ! -e "$w/run/.stop_registered" ]; then
    on_exit "pg_kill '$w'"
    touch "$w/run/.stop_registered"
  fi
  as_postgres_server "$PG_BIN/pg_ctl" -D "$w/data" -l "$w/run/pg.log" -w -t 300 start >/dev/null ||
    fail "pg_ctl start failed for $w/data"
  [ -z "${PG_POOL:-}" ] || pg_private_check "$w" "$PG_POOL"
}

# pg_stop W [MODE]: pg_ctl stop -m MODE (default fast), waiting for the server to exit.
pg_stop() {
  local w=$1 mode=${2:-fast}
  as_postgres "$PG_BIN/pg_ctl" -D "$w/data" -m "$mode" -w -t 300 stop >/dev/null ||
    fail "pg_ctl stop -m $mode failed for $w/data"
}

# pg_postmaster_pid W: the running postmaster's pid (from postmaster.pid), or nothing.
pg_postmaster_pid() {
  local pid
  pid=$(head -n 1 "$1/data/postmaster.pid" 2>/dev/null) || return 0
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
  return 0
}

# pg_server_pids W: every process of the cluster in W (the postmaster and its children,
# also children orphaned by a killed postmaster): those whose cwd is W/data (seen from
# the host as PG_ROOT/W/data in a chroot).
pg_server_pids() {
  { find /proc -mindepth 2 -maxdepth 2 -name cwd \( -lname "$1/data" -o -lname "$PG_ROOT$1/data" \) \
    2>/dev/null || true; } | cut -d/ -f3
}

# pg_kill W: stops the server however it can: pg_ctl -m immediate, then SIGKILL of every
# server process left. Used at exit.
pg_kill() {
  local w=$1
  if [ -n "$(pg_postmaster_pid "$w")" ]; then
    as_postgres "$PG_BIN/pg_ctl" -D "$w/data" -m immediate -w -t 20 stop >/dev/null 2>&1
  fi
  pg_crash "$w" quiet
  return 0
}

# pg_crash W: SIGKILL of the postmaster and every server process (a power cut for
# PostgreSQL); waits until all of them are gone. (Server children are session leaders
# of their own, so a process group kill would miss them.)
pg_crash() {
  local w=$1 quiet=${2:-} pm pids i
  pm=$(pg_postmaster_pid "$w")
  if [ -z "$pm" ] && [ -z "$quiet" ]; then
    fail "no running postmaster in $w/data to kill"
  fi
  for ((i = 0; i < 600; i++)); do
    # The postmaster first, in the same call as its children, so it forks no more.
    pids=$(
      if [ -n "$pm" ] && kill -0 "$pm" 2>/dev/null; then echo "$pm"; fi
      pg_server_pids "$w"
    )
    pids=$(echo "$pids" | sort -u | tr '\n' ' ')
    # Done when no process is left, the postmaster included: until it is reaped, a new
    # postmaster would take it for a live one holding postmaster.pid.
    if [ -z "${pids// /}" ]; then
      [ -n "$quiet" ] || log "killed -9 the postmaster ($pm) and every server process"
      return 0
    fi
    kill -9 $pids 2>/dev/null || true
    sleep 0.05
  done
  fail "server processes of $w/data still alive 30s after SIGKILL: $pids"
}

# pg_sql W SQL [psql args...]: runs SQL as the superuser, prints unaligned tuples only.
pg_sql() {
  local w=$1 sql=$2
  shift 2
  as_postgres "$PG_BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$w/run" -d postgres \
    -c "$sql" "$@"
}

# pg_sql_file W FILE: runs a file of SQL statements, each in its own transaction.
pg_sql_file() {
  as_postgres "$PG_BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$1/run" -d postgres -f "$2"
}

# pg_bench W ARGS...: pgbench against the cluster; output to stdout.
pg_bench() {
  local w=$1
  shift
  as_postgres "$PG_BIN/pgbench" -h "$w/run" "$@" postgres
}

# pg_bench_run W LOGNAME ARGS...: a pgbench run (not -i) that must succeed; logs its
# output to W/run/LOGNAME.client.log and prints "TXNS TPS" (transactions processed,
# tps without initial connection time).
pg_bench_run() {
  local w=$1 name=$2 out txns tps
  shift 2
  out=$w/run/$name.client.log
  pg_bench "$w" "$@" >"$out" 2>&1 || { cat "$out" >&2; fail "pgbench $* failed"; }
  if grep -q '^number of failed transactions: [1-9]' "$out"; then
    cat "$out" >&2
    fail "pgbench $* reported failed transactions"
  fi
  txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$out")
  [ -n "$txns" ] && [ -n "$tps" ] || { cat "$out" >&2; fail "cannot parse pgbench output"; }
  ((txns > 0)) || { cat "$out" >&2; fail "pgbench $* processed no transactions"; }
  echo "$txns $tps"
}

# Committed-id load: client loops that each insert ids one transaction at a time into
# table `committed` (CREATE TABLE committed (id bigint PRIMARY KEY)) and log an id
# client-side only after its COMMIT returned, i.e. after the server acknowledged it; plus a
# pgbench run for WAL volume (needs pgbench -i). Used by the crash tests: after any crash,
# every logged id must be in the table.
PG_LOAD_LOGGERS=${PG_LOAD_LOGGERS:-3}
PG_LOAD_PIDS=()

# pg_load_cluster MODE [PG_MOUNT_ARGS...]: a cluster ready for pg_load_start: a fresh work
# dir W, a 512 MiB pool PG_POOL in MODE mounted at W/wal (extra args go to pg_mount),
# initdb -X onto it, checkpoints and segment recycling within seconds of load
# (max_wal_size 128MB), the server started, table `committed` and pgbench -i -s 1 made.
pg_load_cluster() {
  local mode=$1
  shift
  pg_workdir
  PG_POOL=$(pg_pool_path "$W" "$mode" 512)
  pg_mkpool "$PG_POOL" 512
  pg_mount "$PG_POOL" "$W/wal" "$mode" "$@"
  pg_initdb "$W"
  pg_conf "$W" "max_wal_size = 128MB" "min_wal_size = 64MB"
  pg_start "$W"
  pg_sql "$W" 'CREATE TABLE committed (id bigint PRIMARY KEY)'
  pg_bench "$W" -i -s 1 -q >"$W/run/init.client.log" 2>&1 ||
    { cat "$W/run/init.client.log" >&2; fail "pgbench -i failed"; }
}

# pg_load_start W ROUND: starts the loggers and pgbench in the background. Ids of logger c
# in round r are r*10^8 + c*10^6 + n, logged to W/run/ids.r.c.
pg_load_start() {
  local w=$1 round=$2 c
  PG_LOAD_PIDS=()
  for ((c = 1; c <= PG_LOAD_LOGGERS; c++)); do
    as_postgres bash -c '
      run=$1 log=$2 base=$3 psql=$4 err=$5
      for ((n = 1; ; n++)); do
        id=$((base + n))
        "$psql" -X -q -h "$run" -d postgres -v ON_ERROR_STOP=1 \
          -c "INSERT INTO committed VALUES ($id)" >/dev/null 2>>"$err" || exit 0
        echo "$id" >>"$log"
      done' logger "$w/run" "$w/run/ids.$round.$c" $((round * 100000000 + c * 1000000)) \
      "$PG_BIN/psql" "$w/run/logger.$round.$c.client.log" &
    PG_LOAD_PIDS+=($!)
  done
  pg_bench "$w" -n -c 2 -j 1 -T 600 >"$w/run/load.$round.client.log" 2>&1 &
  PG_LOAD_PIDS+=($!)
}

# pg_load_wait: waits for the loggers and pgbench to notice the server is gone and stop.
pg_load_wait() {
  local p
  for p in "${PG_LOAD_PIDS[@]}"; do
    wait "$p" || true
  done
  PG_LOAD_PIDS=()
}

# pg_verify_committed W [MIN]: with the server running, every id logged by any round is in
# table `committed`; fails unless at least MIN (default 20) ids were logged. Prints
# nothing; logs how many were checked and sets PG_IDS_CHECKED.
pg_verify_committed() {
  local w=$1 min=${2:-20} logged present missing n
  logged=$w/run/logged.sorted
  present=$w/run/present.sorted
  cat "$w"/run/ids.* 2>/dev/null | sort -u >"$logged"
  pg_sql "$w" 'SELECT id FROM committed' | sort -u >"$present"
  n=$(wc -l <"$logged")
  ((n >= min)) || fail "only $n ids were logged as committed: the load did not run"
  missing=$(comm -23 "$logged" "$present" | head -n 20)
  [ -z "$missing" ] ||
    fail "$(comm -23 "$logged" "$present" | wc -l) of $n committed ids lost after the crash, e.g. $(echo $missing)"
  PG_IDS_CHECKED=$n
  log "all $n committed ids present ($(wc -l <"$present") rows)"
}

# pg_fill_wal W: a client inserting ~20 MiB of WAL per statement into table `filler`
# (CREATE TABLE filler (id int, pad text)) until the server refuses; returns then. For
# filling a pool: with max_wal_size far above it, no checkpoint frees WAL meanwhile.
pg_fill_wal() {
  as_postgres bash -c '
    while "$1" -X -q -h "$2" -d postgres -v ON_ERROR_STOP=1 -c \
      "INSERT INTO filler SELECT g, repeat(md5(g::text), 30) FROM generate_series(1, 20000) g"
    do :; done' filler "$PG_BIN/psql" "$1/run" >/dev/null 2>>"$1/run/filler.client.log"
}

# pg_fill_until_panic W SECONDS LOG: with committed-id loggers running (pg_load_start,
# round 1), fills the pool with WAL (tables `committed` and `filler` must exist) until
# the server PANICs at segment creation and stops; fails when it still runs after
# SECONDS, or stopped without that PANIC in LOG (its server log).
pg_fill_until_panic() {
  local w=$1 secs=$2 pglog=$3 fill_pid
  pg_load_start "$w" 1
  sleep 2
  pg_fill_wal "$w" &
  fill_pid=$!
  pg_wait_exit "$w" "$secs" || fail "the server still runs ${secs}s into the fill"
  wait "$fill_pid" || true
  pg_load_wait
  grep -q 'PANIC:  could not create file "pg_wal/xlogtemp.*No space left on device' "$pglog" ||
    fail "the server stopped without the PANIC at segment creation"
}

# pg_wait_exit W SECONDS: waits until the postmaster of W is gone (its postmaster.pid
# removed, or its pid dead); fails (returns 1) after SECONDS.
pg_wait_exit() {
  local w=$1 i
  for ((i = 0; i < $2 * 10; i++)); do
    [ -n "$(pg_postmaster_pid "$w")" ] || return 0
    sleep 0.1
  done
  return 1
}

# pg_wal_dir W: the WAL directory (inside the mount).
pg_wal_dir() { echo "$1/wal/pg_wal"; }

# pg_segments W: the WAL segment names in pg_wal, sorted.
pg_segments() {
  local f
  for f in "$1"/wal/pg_wal/*; do
    f=${f##*/}
    if [[ $f =~ ^[0-9A-F]{24}$ ]]; then echo "$f"; fi
  done | sort
}

# pg_waldump_check W FROM_SEG: with the server running, pg_waldump through the mount from
# segment FROM_SEG up to pg_current_wal_flush_lsn() must decode every record. With
# WALFS_PG_DIRECT=1 it runs with the library, as the server does: it reads WAL the server
# stored through leases, through read leases of its own, while the server goes on writing.
pg_waldump_check() {
  local w=$1 seg=$2 out=$1/run/waldump.client.log n end endseg try
  IFS='|' read -r end endseg < <(pg_sql "$w" \
    'SELECT pg_current_wal_flush_lsn(), pg_walfile_name(pg_current_wal_flush_lsn())')
  [ -n "$endseg" ] || fail "cannot read the flush position"
  # A checkpoint still running after the load may remove or recycle segments while they
  # are read (the oldest, or with small segments one in the middle): start again from the
  # oldest one left (a segment gone is not a decoding error).
  local gone
  for ((try = 1; ; try++)); do
    as_postgres_server "$PG_BIN/pg_waldump" -p "$w/wal/pg_wal" -e "$end" "$seg" "$endseg" >"$out" 2>&1 &&
      break
    gone=$(grep -oE 'could not (locate WAL|find) file "[0-9A-F]{24}"' "$out" | grep -oE '[0-9A-F]{24}' |
      head -n 1 || true)
    if ((try < 5)) && [ -n "$gone" ] && [ ! -e "$w/wal/pg_wal/$gone" ]; then
      log "pg_waldump: $gone was removed by a checkpoint meanwhile; starting from the oldest left"
      seg=$(pg_segments "$w" | sed -n 1p)
      continue
    fi
    tail -n 20 "$out" >&2
    fail "pg_waldump from $seg to $end failed"
  done
  n=$(grep -c '^rmgr:' "$out" || true)
  ((n > 0)) || { tail -n 20 "$out" >&2; fail "pg_waldump from $seg to $end decoded no records"; }
  log "pg_waldump: $n records from $seg to $end ($endseg)"
}

# pg_walfs_counter MNT NAME: the value of counter NAME in the daemon's status JSON
# (getxattr(MNT, "user.walfs.status"), printed by walfsctl status MNT --json).
pg_walfs_counter() {
  local mnt=$1 name=$2 json v
  [ -x "$WALFSCTL" ] || fail "walfsctl not built: $WALFSCTL"
  json=$("$WALFSCTL" status "$mnt" --json) || fail "walfsctl status $mnt --json failed"
  v=$(printf '%s' "$json" | tr -d '\n' | grep -o "\"$name\"[[:space:]]*:[[:space:]]*[0-9]*" |
    head -n 1 | grep -o '[0-9]*$') || true
  [ -n "$v" ] || { printf '%s\n' "$json" >&2; fail "no counter \"$name\" in walfs status of $mnt"; }
  echo "$v"
}

# pg_walfs_status_string MNT NAME: the value of string field NAME in the status JSON.
pg_walfs_status_string() {
  local mnt=$1 name=$2 json v
  [ -x "$WALFSCTL" ] || fail "walfsctl not built: $WALFSCTL"
  json=$("$WALFSCTL" status "$mnt" --json) || fail "walfsctl status $mnt --json failed"
  v=$(printf '%s' "$json" | tr -d '\n' | grep -o "\"$name\"[[:space:]]*:[[:space:]]*\"[^\"]*\"" |
    sed -n '1s/.*"\([^"]*\)"$/\1/p') || true
  [ -n "$v" ] || { printf '%s\n' "$json" >&2; fail "no field \"$name\" in walfs status of $mnt"; }
  echo "$v"
}

# pg_fsck POOL: fsck.walfs on an unmounted pool must find no error (exit 0). Warnings (a
# state a crash leaves and the next mount recovers) are allowed; the verdict is logged.
pg_fsck() {
  local pool=$1 out
  [ "$WALFS_TEST_NO_MOUNT" = 1 ] && return 0
  [ -x "$FSCK" ] || fail "fsck not built: $FSCK"
  out=$("$FSCK" "$pool" 2>&1) || { printf '%s\n' "$out" >&2; fail "fsck.walfs $pool is not clean"; }
  log "fsck.walfs ${out##*$'\n'}"
}

# pg_finish W POOL: the end of a test cluster: a fast stop of the server, a clean unmount
# of W/wal, and fsck.walfs must find POOL clean.
pg_finish() {
  local w=$1 pool=$2
  [ "$WALFS_TEST_NO_MOUNT" = 1 ] || pg_direct_check "$w/wal"
  pg_stop "$w" fast
  pg_umount "$w/wal"
  pg_fsck "$pool"
}
