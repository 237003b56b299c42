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

LOAD_SECONDS=5
ROUNDS=1
if [ "$WALFS_PG_LONG" = 1 ]; then
  LOAD_SECONDS=20
  ROUNDS=3
fi

run_mode() {
  local mode=$1 w mnt pool round daemon redos
  log "=== mode $mode"
  pg_load_cluster "$mode"
  w=$W
  mnt=$w/wal
  pool=$PG_POOL

  for ((round = 1; round <= 2 * ROUNDS; round++)); do
    daemon=0
    if ((round > ROUNDS)); then daemon=1; fi
    redos=$(grep -c 'redo done' "$w/run/pg.log" || true)
    pg_load_start "$w" "$round"
    sleep "$LOAD_SECONDS"
    if ((daemon)) && [ "$WALFS_TEST_NO_MOUNT" != 1 ]; then
      log "round $round: kill -9 of the walfs daemon ($WALFS_PID) and of PostgreSQL"
      kill -9 "$WALFS_PID"
      # The server may already be going down on its own (PANIC on a dead mount).
      pg_crash "$w" quiet
      wait "$WALFS_PID" 2>/dev/null || true
      pg_load_wait
      fusermount3 -u -z "$mnt" || fail "cannot detach the dead mount $mnt"
      pg_mount "$pool" "$mnt" "$mode"
      log "remounted after the kill: journal_replays=$(pg_walfs_counter "$mnt" journal_replays)" \
        "orphans_reclaimed=$(pg_walfs_counter "$mnt" orphans_reclaimed)"
    else
      log "round $round: kill -9 of PostgreSQL"
      pg_crash "$w"
      pg_load_wait
    fi
    pg_start "$w"
    (($(grep -c 'redo done' "$w/run/pg.log") > redos)) ||
      fail "round $round: no crash recovery (redo) after kill -9"
    pg_verify_committed "$w"
  done

  pg_finish "$w" "$pool"
}

for mode in $WALFS_PG_MODES; do
  run_mode "$mode"
done
log "PASS"
