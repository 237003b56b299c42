#!/usr/bin/env bash
# Committed transactions survive crashes with pg_wal on a walfs mount. Client loops insert
# ids one transaction at a time and log an id client-side only after its COMMIT returned,
# while pgbench adds WAL volume. Then:
#   1. kill -9 of the postmaster and every server process; restart (crash recovery reads
#      WAL from the mount); every logged id must be in the table;
#   2. the same with the walfs daemon killed -9 as well: the pool is remounted by a new
#      daemon (pool recovery), PostgreSQL restarts, every logged id must be there;
#      with direct access (WALFS_PG_DIRECT=1) the daemon dies while the (stopped) server
#      still maps its leased segments, and a new daemon must refuse the pool, naming a
#      server process, until the server is killed;
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

# holders_keep_pool W POOL MODE: the daemon dies while the server still maps leased
# segments. Left running, PostgreSQL PANICs at its next request to the dead mount and
# lets go within milliseconds, so the server is stopped (SIGSTOP) first: its mappings
# and pool lock stay exactly as a live server's would. Then a new daemon must refuse
# the pool and name a server process, every time it is tried, until pg_crash kills them;
# the commits acknowledged before the stop are checked after the remount.
holders_keep_pool() {
  local w=$1 pool=$2 mode=$3 out i pids probe=$1/run/refused-mnt
  pids=$( (pg_postmaster_pid "$w"; pg_server_pids "$w") | sort -u | tr '\n' ' ')
  kill -STOP $pids
  [ "$(walfs_pool_lock "$pool")" = locked ] ||
    fail "the stopped server holds no lock on the pool: its leases are not direct"
  kill -9 "$WALFS_PID"
  wait "$WALFS_PID" 2>/dev/null || true
  mkdir -p "$probe"
  if [ "$mode" = pmem ]; then export PMEM_IS_PMEM_FORCE=1; fi
  for ((i = 0; i < 3; i++)); do
    # Not -f: a daemon that did mount would detach and return.
    if out=$("$WALFS" "$pool" "$probe" 2>&1); then
      fusermount3 -u "$probe" 2>/dev/null || true
      fail "a new daemon mounted the pool while server processes map it"
    fi
    [[ "$out" == *"still mapped by direct-access clients"*"(postgres)"* ]] ||
      fail "refusal while server processes map the pool: $out"
    ! mountpoint -q "$probe" || fail "mounted anyway while clients map the pool"
    sleep 0.2
  done
  unset PMEM_IS_PMEM_FORCE
  rmdir "$probe"
  log "daemon dead, server holding its leases: a new daemon refused the pool 3 times"
}

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
      if [ "$WALFS_PG_DIRECT" = 1 ]; then
        holders_keep_pool "$w" "$pool" "$mode"
      else
        kill -9 "$WALFS_PID"
      fi
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
