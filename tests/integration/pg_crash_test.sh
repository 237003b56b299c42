#!/usr/bin/env bash
# Committed transactions survive crashes with pg_wal on a walfs mount. Client loops insert
# ids one transaction at a time and log an id client-side only after its COMMIT returned,
# while pgbench adds WAL volume. Then:
#   1. kill -9 of the postmaster and every server process; restart (crash recovery reads
#      WAL from the mount); every logged id must be in the table;
#   2. the same with the walfs daemon killed -9 as well: the pool is remounted by a new
#      daemon (pool recovery), PostgreSQL restarts, every logged id must be there;
# and finally fsck.walfs reports the unmounted pool clean.
#
# WALFS_PG_LONG=1 runs three rounds of each with a longer load.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require

LOGGERS=3
LOAD_SECONDS=5
ROUNDS=1
if [ "$WALFS_PG_LONG" = 1 ]; then
  LOAD_SECONDS=20
  ROUNDS=3
fi

# start_load W ROUND: starts the id loggers and a pgbench in the background.
start_load() {
  local w=$1 round=$2 c
  LOAD_PIDS=()
  for ((c = 1; c <= LOGGERS; c++)); do
    # ids of logger c in round r: r*10^8 + c*10^6 + n; the log line is written only after
    # psql returned success, i.e. after the server acknowledged the COMMIT.
    as_postgres bash -c '
      run=$1 log=$2 base=$3 psql=$4 err=$5
      for ((n = 1; ; n++)); do
        id=$((base + n))
        "$psql" -X -q -h "$run" -d postgres -v ON_ERROR_STOP=1 \
          -c "INSERT INTO committed VALUES ($id)" >/dev/null 2>>"$err" || exit 0
        echo "$id" >>"$log"
      done' logger "$w/run" "$w/run/ids.$round.$c" $((round * 100000000 + c * 1000000)) \
      "$PG_BIN/psql" "$w/run/logger.$round.$c.client.log" &
    LOAD_PIDS+=($!)
  done
  pg_bench "$w" -n -c 2 -j 1 -T 600 >"$w/run/load.$round.client.log" 2>&1 &
  LOAD_PIDS+=($!)
}

# wait_load: waits for the loggers and pgbench to notice the crash and stop.
wait_load() {
  local p
  for p in "${LOAD_PIDS[@]}"; do
    wait "$p" || true
  done
}

# verify W: every logged id is in the table; prints how many were checked.
verify() {
  local w=$1 logged present missing n
  logged=$w/run/logged.sorted
  present=$w/run/present.sorted
  cat "$w"/run/ids.* 2>/dev/null | sort -u >"$logged"
  pg_sql "$w" 'SELECT id FROM committed' | sort -u >"$present"
  n=$(wc -l <"$logged")
  ((n >= 20)) || fail "only $n ids were logged as committed: the load did not run"
  missing=$(comm -23 "$logged" "$present" | head -n 20)
  [ -z "$missing" ] ||
    fail "$(comm -23 "$logged" "$present" | wc -l) of $n committed ids lost after the crash, e.g. $(echo $missing)"
  log "all $n committed ids present ($(wc -l <"$present") rows)"
}

run_mode() {
  local mode=$1 w mnt pool round daemon redos
  log "=== mode $mode"
  pg_workdir
  w=$W
  mnt=$w/wal
  pool=$(pg_pool_path "$w" "$mode" 512)
  pg_mkpool "$pool" 512
  pg_mount "$pool" "$mnt" "$mode"
  pg_initdb "$w"
  pg_conf "$w" "max_wal_size = 128MB" "min_wal_size = 64MB"
  pg_start "$w"
  pg_sql "$w" 'CREATE TABLE committed (id bigint PRIMARY KEY)'
  pg_bench "$w" -i -s 1 -q >"$w/run/init.client.log" 2>&1 ||
    { cat "$w/run/init.client.log" >&2; fail "pgbench -i failed"; }

  for ((round = 1; round <= 2 * ROUNDS; round++)); do
    daemon=0
    if ((round > ROUNDS)); then daemon=1; fi
    redos=$(grep -c 'redo done' "$w/run/pg.log" || true)
    start_load "$w" "$round"
    sleep "$LOAD_SECONDS"
    if ((daemon)) && [ "$WALFS_TEST_NO_MOUNT" != 1 ]; then
      log "round $round: kill -9 of the walfs daemon ($WALFS_PID) and of PostgreSQL"
      kill -9 "$WALFS_PID"
      # The server may already be going down on its own (PANIC on a dead mount).
      pg_crash "$w" quiet
      wait "$WALFS_PID" 2>/dev/null || true
      wait_load
      fusermount3 -u -z "$mnt" || fail "cannot detach the dead mount $mnt"
      pg_mount "$pool" "$mnt" "$mode"
      log "remounted after the kill: journal_replays=$(pg_walfs_counter "$mnt" journal_replays)" \
        "orphans_reclaimed=$(pg_walfs_counter "$mnt" orphans_reclaimed)"
    else
      log "round $round: kill -9 of PostgreSQL"
      pg_crash "$w"
      wait_load
    fi
    pg_start "$w"
    (($(grep -c 'redo done' "$w/run/pg.log") > redos)) ||
      fail "round $round: no crash recovery (redo) after kill -9"
    verify "$w"
  done

  pg_stop "$w" fast
  pg_umount "$mnt"
  pg_fsck "$pool"
}

for mode in $WALFS_PG_MODES; do
  run_mode "$mode"
done
log "PASS"
