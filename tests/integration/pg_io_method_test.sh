#!/usr/bin/env bash
# PostgreSQL 18+: asynchronous I/O (io_method) with pg_wal on a walfs mount. For each of
# io_method = worker and io_uring: the server starts, pgbench runs, committed-id loggers
# run under load, kill -9 of every server process, crash recovery, every acknowledged
# commit is there, pg_stat_io counts WAL writes and fsyncs, and the pool ends clean.
# io_uring can be refused by the kernel or a seccomp filter (io_uring_setup fails): that
# case is then skipped with the server's reason, logged as "SKIP (io_uring): ...", and the
# test passes on the worker case alone; that the refusal is recognized is checked with
# io_uring_setup made to fail (strace fault injection).
# Registered for PostgreSQL 18 and later (WALFS_PG_SINCE_pg_io_method_test in CMake).
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require
((WALFS_PG_VERSION >= 18)) || skip "io_method needs PostgreSQL 18 or later, not $WALFS_PG_VERSION"
[ -x "$PG_ROOT/usr/bin/strace" ] || fail "strace is missing in ${PG_ROOT:-the host} (tools/pg-chroot installs it)"

# PostgreSQL 18 adds no setting to the WRITE-AHEAD LOG section of postgresql.conf.sample
# (17 -> 18: io_method, io_workers, io_max_concurrency, io_max_combine_limit,
# idle_replication_slot_timeout, file_copy_method, ... elsewhere). What changes for WAL:
# initdb turns data checksums on by default (hint-bit changes are WAL-logged then, as
# with wal_log_hints), checked below; and WAL I/O is counted in pg_stat_io.

IO_RAN=()
IO_SKIPPED=()

# uring_refusal LOG: the line of a server log saying io_uring was refused (by the kernel,
# a seccomp filter or the build), or nothing.
uring_refusal() {
  grep -E 'io_uring.*(Operation not permitted|Function not implemented|not supported|Cannot allocate memory|Permission denied)' \
    "$1" | tail -n 1
}

# refusal_recognized W: with the server of W stopped, a start with io_method = io_uring
# while io_uring_setup fails (strace fault injection, EPERM as a seccomp filter or
# kernel.io_uring_disabled give) must fail with a reason uring_refusal recognizes, so the
# skip above is taken for what it is meant for only. Leaves io_method = worker.
refusal_recognized() {
  local w=$1 log=$1/run/pg-refused.log lib=()
  if [ "$WALFS_PG_DIRECT" = 1 ]; then lib=(env "LD_PRELOAD=$WALFS_DIRECT_LIB"); fi
  pg_conf "$w" "io_method = io_uring"
  if as_postgres strace -f -qq -o /dev/null -e trace=io_uring_setup \
    -e inject=io_uring_setup:error=EPERM ${lib[@]+"${lib[@]}"} \
    "$PG_BIN/pg_ctl" -D "$w/data" -l "$log" -w -t 60 start >/dev/null 2>&1; then
    fail "the server started with io_method = io_uring while io_uring_setup failed"
  fi
  pg_kill "$w"
  [ -n "$(uring_refusal "$log")" ] || {
    tail -n 20 "$log" >&2
    fail "a refused io_uring is not recognized in the server log: the io_uring case would fail, not skip"
  }
  log "io_uring refusal recognized: $(uring_refusal "$log")"
  pg_conf "$w" "io_method = worker"
}

# start_or_refused W METHOD: starts the server; returns 1 (and sets REFUSED) when it
# cannot start because io_uring is refused, fails on any other start failure.
start_or_refused() {
  local w=$1 method=$2
  REFUSED=
  if as_postgres_server "$PG_BIN/pg_ctl" -D "$w/data" -l "$w/run/pg.log" -w -t 120 start \
    >/dev/null 2>&1; then
    if [ ! -e "$w/run/.stop_registered" ]; then
      on_exit "pg_kill '$w'"
      touch "$w/run/.stop_registered"
    fi
    return 0
  fi
  pg_kill "$w"
  if [ "$method" = io_uring ]; then
    REFUSED=$(uring_refusal "$w/run/pg.log")
    if [ -n "$REFUSED" ]; then return 1; fi
  fi
  tail -n 30 "$w/run/pg.log" >&2
  fail "the server did not start with io_method = $method"
}

run_case() {
  local mode=$1 method=$2 w mnt pool redos io
  log "=== mode $mode, io_method = $method"
  pg_workdir
  w=$W
  mnt=$w/wal
  pool=$(pg_pool_path "$w" "$mode" 512)
  pg_mkpool "$pool" 512
  pg_mount "$pool" "$mnt" "$mode"
  pg_initdb "$w"
  pg_conf "$w" "io_method = $method" "io_workers = 3" "track_wal_io_timing = on" \
    "max_wal_size = 128MB" "min_wal_size = 64MB"
  if ! start_or_refused "$w" "$method"; then
    log "SKIP (io_uring, mode $mode): the server cannot use io_uring here: $REFUSED"
    IO_SKIPPED+=("$mode/$method: $REFUSED")
    pg_umount "$mnt"
    return 0
  fi
  [ "$(pg_sql "$w" 'SHOW io_method')" = "$method" ] || fail "io_method is not $method"
  [ "$(pg_sql "$w" 'SHOW data_checksums')" = on ] || fail "initdb of 18 made no data checksums"
  pg_sql "$w" 'CREATE TABLE committed (id bigint PRIMARY KEY)'
  pg_bench "$w" -i -s 2 -q >"$w/run/init.client.log" 2>&1 ||
    { cat "$w/run/init.client.log" >&2; fail "pgbench -i failed"; }
  pg_bench_run "$w" bench -n -c 2 -j 1 -T 3 >/dev/null
  # A sequential scan larger than shared_buffers goes through the AIO read path.
  pg_sql "$w" 'SELECT count(*) FROM pgbench_accounts' >/dev/null
  pg_load_start "$w" 1
  sleep 4
  redos=$(grep -c 'redo done' "$w/run/pg.log" || true)
  pg_crash "$w"
  pg_load_wait
  pg_start "$w"
  (($(grep -c 'redo done' "$w/run/pg.log") > redos)) || fail "no crash recovery (redo) after kill -9"
  pg_verify_committed "$w"
  pg_bench_run "$w" after -n -c 2 -j 1 -T 2 >/dev/null
  io=$(pg_sql "$w" "SELECT coalesce(sum(writes), 0) || ' ' || coalesce(sum(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal'")
  ((${io% *} > 0)) || fail "pg_stat_io counts no WAL write with io_method = $method ($io)"
  log "io_method = $method: pgbench, kill -9 and recovery passed; pg_stat_io WAL writes/fsyncs: $io"
  IO_RAN+=("$mode/$method")
  if [ "$method" = worker ]; then
    pg_stop "$w" fast
    refusal_recognized "$w"
    pg_start "$w"
  fi
  pg_finish "$w" "$pool"
}

for mode in $WALFS_PG_MODES; do
  for method in worker io_uring; do
    run_case "$mode" "$method"
  done
done
((${#IO_RAN[@]} > 0)) || fail "no io_method case ran"
log "ran: ${IO_RAN[*]}"
for s in ${IO_SKIPPED[@]+"${IO_SKIPPED[@]}"}; do log "SKIP (case) $s"; done
log "PASS"
