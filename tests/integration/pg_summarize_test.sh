#!/usr/bin/env bash
# PostgreSQL 17+: WAL summaries and incremental backups with pg_wal on a walfs mount.
#   1. summarize_wal = on: the WAL summarizer reads WAL from the mount and writes its
#      summaries into pg_wal/summaries (on the mount too). Under committed-id load the
#      cluster is killed -9; after crash recovery every acknowledged commit is there, the
#      summaries made before the crash are still listed by pg_available_wal_summaries(),
#      pg_walsummary decodes their files, and the summarizer goes on summarizing WAL
#      written after the recovery.
#   2. A full backup, more load, an incremental backup (pg_basebackup --incremental,
#      which needs those summaries), pg_combinebackup of the two, and the combined backup
#      restored as a cluster whose pg_wal is on the mount: it starts, holds exactly the
#      rows committed before the incremental backup, and writes its own WAL there.
# Registered for PostgreSQL 17 and later (WALFS_PG_SINCE_pg_summarize_test in CMake).
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require
((WALFS_PG_VERSION >= 17)) || skip "WAL summaries need PostgreSQL 17 or later, not $WALFS_PG_VERSION"
for b in pg_walsummary pg_combinebackup pg_basebackup; do
  [ -x "$PG_ROOT$PG_BIN/$b" ] || fail "$b is missing ($PG_ROOT$PG_BIN)"
done

wait_for() {
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  while ((SECONDS < deadline)); do
    if "$@"; then return 0; fi
    sleep 0.2
  done
  fail "timed out waiting for $what"
}

# summarized_past W LSN: the summarizer has summarized WAL up to LSN or later.
summarized_past() {
  [ "$(pg_sql "$1" "SELECT summarized_lsn >= '$2'::pg_lsn FROM pg_get_wal_summarizer_state()")" = t ]
}

# summary_count W: how many summaries pg_available_wal_summaries() lists.
summary_count() { pg_sql "$1" 'SELECT count(*) FROM pg_available_wal_summaries()'; }

run_mode() {
  local mode=$1 w mnt pool lsn before after list files f n b r incr rows expect redos
  log "=== mode $mode"
  pg_workdir
  w=$W
  mnt=$w/wal
  pool=$(pg_pool_path "$w" "$mode" 768)
  pg_mkpool "$pool" 768
  pg_mount "$pool" "$mnt" "$mode"
  pg_initdb "$w"
  pg_conf "$w" "summarize_wal = on" "max_wal_size = 128MB" "min_wal_size = 64MB" \
    "wal_level = replica" "max_wal_senders = 4"
  pg_start "$w"
  [ "$(pg_sql "$w" 'SHOW summarize_wal')" = on ] || fail "summarize_wal is not on"
  pg_sql "$w" 'CREATE TABLE committed (id bigint PRIMARY KEY)'
  pg_bench "$w" -i -s 1 -q >"$w/run/init.client.log" 2>&1 ||
    { cat "$w/run/init.client.log" >&2; fail "pgbench -i failed"; }

  # 1. Summaries through a crash.
  pg_load_start "$w" 1
  sleep 4
  # A checkpoint ends a summary at its redo point; wait until one is summarized.
  pg_sql "$w" 'CHECKPOINT'
  lsn=$(pg_sql "$w" 'SELECT redo_lsn FROM pg_control_checkpoint()')
  wait_for "the summarizer to reach the redo point $lsn" 60 summarized_past "$w" "$lsn"
  before=$(summary_count "$w")
  ((before > 0)) || fail "no WAL summary after a checkpoint with summarize_wal = on"
  files=$(find "$mnt/pg_wal/summaries" -name '*.summary' | wc -l)
  ((files >= before)) ||
    fail "$before summaries listed, $files summary files in pg_wal/summaries on the mount"
  sleep 1
  redos=$(grep -c 'redo done' "$w/run/pg.log" || true)
  log "$before summaries before the crash; kill -9 of PostgreSQL"
  pg_crash "$w"
  pg_load_wait
  pg_start "$w"
  (($(grep -c 'redo done' "$w/run/pg.log") > redos)) || fail "no crash recovery (redo) after kill -9"
  pg_verify_committed "$w"
  # The summarizer goes on meanwhile: the list is read once and checked as read.
  list=$(pg_sql "$w" 'SELECT tli, start_lsn, end_lsn FROM pg_available_wal_summaries()')
  after=$(printf '%s\n' "$list" | grep -c . || true)
  ((after >= before)) || fail "$before summaries before the crash, $after after recovery"
  # Every listed summary decodes (pg_walsummary over its file, on the mount).
  n=0
  while IFS='|' read -r tli start end; do
    f=$(printf '%s/pg_wal/summaries/%08X%08X%08X%08X%08X.summary' "$mnt" "$tli" \
      $((16#${start%/*})) $((16#${start#*/})) $((16#${end%/*})) $((16#${end#*/})))
    [ -f "$f" ] || fail "summary $tli $start..$end listed but $f is missing"
    as_postgres "$PG_BIN/pg_walsummary" "$f" >"$w/run/walsummary.client.log" 2>&1 ||
      { tail -n 20 "$w/run/walsummary.client.log" >&2; fail "pg_walsummary $f failed"; }
    n=$((n + 1))
  done <<<"$list"
  ((n == after)) || fail "decoded $n of $after summaries"
  # The summarizer resumes after recovery: new WAL gets summarized too.
  pg_bench_run "$w" post-crash -n -c 2 -j 1 -T 3 >/dev/null
  pg_sql "$w" 'CHECKPOINT'
  lsn=$(pg_sql "$w" 'SELECT redo_lsn FROM pg_control_checkpoint()')
  wait_for "the summarizer to reach $lsn after recovery" 60 summarized_past "$w" "$lsn"
  (($(summary_count "$w") > after)) || fail "no new summary after recovery"
  log "summaries: $before before the crash, $after after recovery (all decode), $(summary_count "$w") now"

  # 2. Full backup, incremental backup, combine, restore with pg_wal on the mount.
  b=$w/backup
  mkdir -p "$b"
  chown postgres: "$b"
  as_postgres "$PG_BIN/pg_basebackup" -h "$w/run" -D "$b/full" -c fast -X stream \
    >"$w/run/basebackup-full.client.log" 2>&1 ||
    { cat "$w/run/basebackup-full.client.log" >&2; fail "full pg_basebackup failed"; }
  # A bounded change, so that most relation files are sent as incremental files.
  pg_bench_run "$w" between-backups -n -c 2 -j 1 -t 100 >/dev/null
  pg_sql "$w" 'CREATE TABLE marker AS SELECT g AS i FROM generate_series(1, 1000) g'
  expect=$(pg_sql "$w" "SELECT (SELECT count(*) FROM committed) || '|' || (SELECT sum(abalance) FROM pgbench_accounts) || '|' || (SELECT count(*) FROM marker)")
  as_postgres "$PG_BIN/pg_basebackup" -h "$w/run" -D "$b/incr" -c fast -X stream \
    --incremental="$b/full/backup_manifest" >"$w/run/basebackup-incr.client.log" 2>&1 ||
    { cat "$w/run/basebackup-incr.client.log" >&2; fail "pg_basebackup --incremental failed"; }
  # Rows written after the incremental backup must not be in the restored cluster.
  pg_sql "$w" 'INSERT INTO marker VALUES (-1)'
  n=$(find "$b/incr" -name 'INCREMENTAL.*' | wc -l)
  ((n > 0)) || fail "the incremental backup holds no incremental file"
  incr=$n
  r=$w/restored
  mkdir -p "$r/run"
  chown postgres: "$r" "$r/run"
  as_postgres "$PG_BIN/pg_combinebackup" -o "$r/data" "$b/full" "$b/incr" \
    >"$w/run/combinebackup.client.log" 2>&1 ||
    { cat "$w/run/combinebackup.client.log" >&2; fail "pg_combinebackup failed"; }
  # The restored cluster's pg_wal goes onto the mount.
  as_postgres mkdir "$mnt/restored_wal"
  as_postgres bash -c 'shopt -s dotglob nullglob; mv "$1"/* "$2"/ && rmdir "$1" && ln -s "$2" "$1"' \
    mv "$r/data/pg_wal" "$mnt/restored_wal" || fail "cannot move the restored pg_wal onto the mount"
  _PG_CLUSTERS+=("$r")
  pg_conf "$r" "unix_socket_directories = '$r/run'" "summarize_wal = off"
  pg_start "$r"
  rows=$(pg_sql "$r" "SELECT (SELECT count(*) FROM committed) || '|' || (SELECT sum(abalance) FROM pgbench_accounts) || '|' || (SELECT count(*) FROM marker)")
  [ "$rows" = "$expect" ] ||
    fail "the restored cluster holds '$rows' (committed|balance|marker), expected '$expect'"
  pg_bench_run "$r" restored -n -c 2 -j 1 -T 2 >/dev/null
  pg_sql "$r" 'CHECKPOINT'
  n=0
  for f in "$mnt"/restored_wal/*; do
    [[ ${f##*/} =~ ^[0-9A-F]{24}$ ]] && n=$((n + 1))
  done
  ((n > 0)) || fail "no WAL segment of the restored cluster on the mount"
  [ "$(readlink "$r/data/pg_wal")" = "$mnt/restored_wal" ] || fail "restored pg_wal is not the mount"
  pg_stop "$r" fast
  log "incremental backup ($incr incremental files) combined and restored ($rows), its pg_wal on the mount ($n segments)"

  pg_finish "$w" "$pool"
}

for mode in $WALFS_PG_MODES; do
  run_mode "$mode"
done
log "PASS"
