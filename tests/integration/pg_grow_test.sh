#!/usr/bin/env bash
# The steps of the full-pool runbook (docs/operations.md "When the pool is full", walfs(8)), with
# this test's own commands on an initdb cluster, in each durability mode (the docs'
# commands, on a Debian cluster, are pkg_runbook_test.sh's): PostgreSQL 15 fills a small
# pool with WAL until it PANICs at segment creation (no checkpoint can free WAL:
# max_wal_size is far above the pool), then
#   1. the cluster is down (restart_after_crash = off: it stays down, as a cluster whose
#      crash recovery cannot create a segment would),
#   2. the mount is stopped (the daemon's unmount; walfs@ in the packaged setup),
#   3. walfsctl grow POOL SIZE (refused while the mount runs: tried first),
#   4. the mount and the cluster are started again: crash recovery completes, every
#      commit acknowledged before the PANIC is there, and new commits succeed.
# fsck.walfs is clean at the end. Each mode in WALFS_PG_MODES; about 30 s a mode.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require
[ "$WALFS_TEST_NO_MOUNT" != 1 ] || skip "needs a real walfs pool to fill and grow"

POOL_MIB=128
GROWN_MIB=256
FILL_TIMEOUT=120

run_mode() {
  local mode=$1 w mnt pool out rc=0 before after
  log "=== mode $mode"
  pg_workdir
  w=$W
  mnt=$w/wal
  pool=$(pg_pool_path "$w" "$mode" "$GROWN_MIB")
  pg_mkpool "$pool" "$POOL_MIB"
  pg_mount "$pool" "$mnt" "$mode"
  pg_initdb "$w"
  pg_conf "$w" "max_wal_size = 4GB" "min_wal_size = 32MB" "checkpoint_timeout = 1h" \
    "restart_after_crash = off"
  pg_start "$w"
  pg_sql "$w" 'CREATE TABLE committed (id bigint PRIMARY KEY);
               CREATE TABLE filler (id int, pad text)'
  log "filling the $POOL_MIB MiB pool with WAL"
  pg_fill_until_panic "$w" "$FILL_TIMEOUT" "$w/run/pg.log"
  pg_crash "$w" quiet  # children that outlive the postmaster, if any
  log "full: $(grep -c 'No space left on device' "$w/run/pg.log") ENOSPC line(s) in the server log," \
    "$(pg_segments "$w" | wc -l) segments"

  # The runbook. The grow is refused while the mount runs, and changes nothing.
  before=$(stat -c %s "$pool")
  out=$("$WALFSCTL" grow "$pool" "${GROWN_MIB}M" 2>&1) && rc=0 || rc=$?
  [ "$rc" = 1 ] && grep -q "grow is offline" <<<"$out" ||
    fail "grow of a mounted pool was not refused (exit $rc): $out"
  [ "$(stat -c %s "$pool")" = "$before" ] || fail "a refused grow changed the pool file"
  pg_umount "$mnt"
  "$WALFSCTL" grow "$pool" "${GROWN_MIB}M" >"$w/run/grow.log" 2>&1 ||
    { cat "$w/run/grow.log" >&2; fail "walfsctl grow failed"; }
  log "$(cat "$w/run/grow.log")"
  after=$(stat -c %s "$pool")
  ((after == GROWN_MIB << 20)) || fail "the pool file is $after bytes after the grow"
  pg_mount "$pool" "$mnt" "$mode"
  pg_start "$w"
  grep -q 'redo done' "$w/run/pg.log" || fail "no crash recovery after the PANIC"
  pg_verify_committed "$w"  # every id acknowledged before the pool filled
  pg_load_start "$w" 2
  sleep 3
  pg_sql "$w" 'CHECKPOINT'
  pg_stop "$w" fast
  pg_load_wait
  (($(cat "$w"/run/ids.2.* 2>/dev/null | wc -l) > 0)) || fail "no commit succeeded after the grow"
  pg_start "$w"
  pg_verify_committed "$w"
  pg_finish "$w" "$pool"
}

for mode in $WALFS_PG_MODES; do
  run_mode "$mode"
done
log "PASS"
