# shellcheck shell=bash
# PostgreSQL clusters for the benchmarks (sourced by tools/bench/run.sh).
#
# The data directory lives on tmpfs (SHM_ROOT) and only pg_wal is on the target, so the
# WAL location is the one thing that differs between targets. Servers run as postgres,
# listen on no TCP address, and put their socket in PG_SOCK_DIR. Every started server is
# registered for an immediate stop at exit.

PG_PORT=5432

# With PG_ROOT set (run.sh --pg-version), PostgreSQL's programs run in that chroot as its
# postgres user (the host's uid and gid, tools/pg-chroot); paths are the same inside and
# out for what bench_chroot_mounts binds.
if [ -n "${PG_ROOT:-}" ]; then
  as_postgres() {
    chroot --userspec=postgres:postgres "$PG_ROOT" \
      env HOME=/var/lib/postgresql USER=postgres LOGNAME=postgres "$@"
  }
fi

# bench_chroot_mounts DIR...: what PostgreSQL in PG_ROOT needs, undone at exit (lazily and
# recursively, so nothing stays mounted in the shared cache): a /tmp, /proc, /dev and a
# /dev/shm of its own; each DIR at its own path, as a shared mount whose mounts made later
# (the walfs targets' mounts) appear inside; and the direct-access library copied under
# the first DIR (DIRECT_LIB then names the copy, the same file for host programs).
bench_chroot_mounts() {
  local root=$PG_ROOT d
  _bench_mount() {
    mount "$@" || fail "mount $* failed"
    on_exit "umount -R -l '${*: -1}'"
  }
  _bench_mount -t tmpfs -o mode=1777,size=64m walfs-bench-tmp "$root/tmp"
  _bench_mount -t proc proc "$root/proc"
  _bench_mount --bind /dev "$root/dev"
  _bench_mount -t tmpfs -o mode=1777,size=512m walfs-bench-shm "$root/dev/shm"
  for d in "$@"; do
    mkdir -p "$root$d"
    _bench_mount --bind "$d" "$d"
    mount --make-shared "$d" || fail "mount --make-shared $d failed"
    _bench_mount --bind "$d" "$root$d"
  done
  if [ -f "$DIRECT_LIB" ]; then
    mkdir -p "$1/lib"
    cp "$DIRECT_LIB" "$1/lib/libwalfs-direct.so"
    chmod 0755 "$1/lib" "$1/lib/libwalfs-direct.so"
    DIRECT_LIB=$1/lib/libwalfs-direct.so
  fi
}

# pg_init DATADIR WALDIR: a fresh cluster with pg_wal in WALDIR (an empty dir owned by
# postgres). initdb runs once per suite (on tmpfs, --no-sync: its own durability is not
# what is measured); every cluster is a copy of that template, which costs a fraction of
# an initdb and leaves the same files in WALDIR as initdb -X would.
PG_TEMPLATE=
pg_init() {
  local data=$1 wal=$2
  if [ -z "$PG_TEMPLATE" ]; then
    local t=$SHM_ROOT/pgdata/template
    mkdir -p "$t.wal"
    chown postgres:postgres "$t.wal"
    on_exit "rm -rf '$t' '$t.wal'"
    as_postgres "$PG_BIN/initdb" -D "$t" -X "$t.wal" -A trust -U postgres --no-sync \
      --no-instructions >"$t.initdb.log" 2>&1 || {
      log "initdb -D $t -X $t.wal failed:"
      tail -5 "$t.initdb.log" >&2
      return 1
    }
    PG_TEMPLATE=$t
  fi
  rm -rf "$data"
  on_exit "rm -rf '$data'"
  cp -a "$PG_TEMPLATE" "$data" &&
    cp -a "$PG_TEMPLATE.wal/." "$wal/" &&
    ln -sfn "$wal" "$data/pg_wal" &&
    chown -h postgres:postgres "$data/pg_wal" || {
    log "copying the template cluster to $data (WAL in $wal) failed"
    return 1
  }
}

# pg_start DATADIR [-c name=value ...]: starts the server and waits until it accepts
# connections; the server preloads PG_PRELOAD when that is set (the walfs-direct target). synchronous_commit=on and the default wal_sync_method (fdatasync) are
# what is measured; checkpoints are spaced out so a run seldom contains one.
pg_start() {
  local data=$1
  shift
  local opts="-c listen_addresses='' -c unix_socket_directories='$PG_SOCK_DIR' -p $PG_PORT"
  opts+=" -c shared_buffers=256MB -c max_connections=30 -c synchronous_commit=on"
  opts+=" -c fsync=on -c full_page_writes=on -c checkpoint_timeout=30min"
  opts+=" -c max_wal_size=${PG_MAX_WAL_SIZE:-1GB} -c min_wal_size=80MB"
  opts+=" -c log_checkpoints=on"
  while [ $# -gt 0 ]; do
    [ "$1" = -c ] || { log "pg_start: expected -c, got $1"; return 1; }
    opts+=" -c $2"
    shift 2
  done
  on_exit "as_postgres '$PG_BIN/pg_ctl' -D '$data' -m immediate stop"
  as_postgres ${PIN_SERVER:+taskset -c "$PIN_SERVER"} env ${PG_PRELOAD:+LD_PRELOAD="$PG_PRELOAD"} \
    "$PG_BIN/pg_ctl" -D "$data" -l "$data.server.log" -w -t 120 -o "$opts" \
    start >/dev/null || {
    log "server in $data did not start:"
    tail -20 "$data.server.log" >&2
    return 1
  }
}

pg_stop() {
  as_postgres "$PG_BIN/pg_ctl" -D "$1" -m fast -w -t 120 stop >/dev/null
}

# psql_q SQL...: runs SQL on the running server, prints unaligned tuples only.
psql_q() {
  as_postgres "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$PG_SOCK_DIR" -p "$PG_PORT" \
    -U postgres -d postgres "$@"
}

# pgbench_init LOG: pgbench -i at PGBENCH_SCALE on the running server, its output in
# OUT_DIR/logs/LOG.
pgbench_init() {
  as_postgres "$PG_BIN/pgbench" -h "$PG_SOCK_DIR" -p "$PG_PORT" -U postgres -i -q \
    -s "$PGBENCH_SCALE" postgres >"$OUT_DIR/logs/$1" 2>&1
}

# pgbench_run ARGS...: pgbench against the running server; prints its tps (without
# initial connection time) and the number of transactions it processed, fails if
# pgbench fails or reports neither.
pgbench_run() {
  local out
  out=$(as_postgres ${PIN_CLIENT:+taskset -c "$PIN_CLIENT"} "$PG_BIN/pgbench" -h "$PG_SOCK_DIR" -p "$PG_PORT" -U postgres "$@" \
    postgres 2>&1) || {
    log "pgbench $* failed:"
    echo "$out" | tail -5 >&2
    return 1
  }
  echo "$out" | awk '/^tps = / {tps = $3}
    /^number of transactions actually processed:/ {n = $NF; sub(/\/.*/, "", n)}
    END {if (tps == "" || n == "") exit 1; print tps, n}'
}

# cpu_ticks DATADIR [PID...]: CPU time (user + system, clock ticks) used so far by the
# server of DATADIR and the children it reaped (its exited backends), by its live
# children, and by the given processes (a walfs daemon). The difference across a run is
# the CPU the run cost the server side, which a shared machine's load (steal time, other
# sessions) moves far less than throughput: on a guest the kernel charges stolen time to
# steal, not to the process.
cpu_ticks() {
  local data=$1 pm
  shift
  pm=$(head -1 "$data/postmaster.pid" 2>/dev/null) || return 1
  [ -n "$pm" ] || return 1
  {
    # Fields after the command (which may hold spaces): 14 utime, 15 stime, 16 cutime,
    # 17 cstime of proc(5).
    cat "/proc/$pm/stat" | sed 's/^.*) //' | awk '{print $12 + $13 + $14 + $15}'
    for p in $(pgrep -P "$pm") "$@"; do
      sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}'
    done
  } | awk '{s += $1} END {print s + 0}'
}
