# shellcheck shell=bash
# PostgreSQL clusters for the benchmarks (sourced by tools/bench/run.sh).
#
# The data directory lives on tmpfs (SHM_ROOT) and only pg_wal is on the target, so the
# WAL location is the one thing that differs between targets. Servers run as postgres,
# listen on no TCP address, and put their socket in PG_SOCK_DIR. Every started server is
# registered for an immediate stop at exit.

PG_PORT=5432

# pg_init DATADIR WALDIR: initdb with pg_wal in WALDIR (an empty dir owned by postgres).
# --no-sync: initdb's own durability is not what is measured.
pg_init() {
  local data=$1 wal=$2
  rm -rf "$data"
  mkdir -p "$data"
  chown postgres:postgres "$data"
  chmod 0700 "$data"
  on_exit "rm -rf '$data'"
  as_postgres "$PG_BIN/initdb" -D "$data" -X "$wal" -A trust -U postgres --no-sync \
    --no-instructions >"$data.initdb.log" 2>&1 || {
    log "initdb -D $data -X $wal failed:"
    tail -5 "$data.initdb.log" >&2
    return 1
  }
}

# pg_start DATADIR [-c name=value ...]: starts the server and waits until it accepts
# connections. synchronous_commit=on and the default wal_sync_method (fdatasync) are
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
  on_exit "runuser -u postgres -- '$PG_BIN/pg_ctl' -D '$data' -m immediate stop"
  as_postgres "$PG_BIN/pg_ctl" -D "$data" -l "$data.server.log" -w -t 120 -o "$opts" \
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

# pgbench_run ARGS...: pgbench against the running server; prints its tps (without
# initial connection time), fails if pgbench fails or reports none.
pgbench_run() {
  local out
  out=$(as_postgres "$PG_BIN/pgbench" -h "$PG_SOCK_DIR" -p "$PG_PORT" -U postgres "$@" \
    postgres 2>&1) || {
    log "pgbench $* failed:"
    echo "$out" | tail -5 >&2
    return 1
  }
  echo "$out" | awk '/^tps = / {print $3; found = 1} END {exit !found}'
}
