#!/usr/bin/env bash
# Committed transactions survive power cuts with pg_wal on a walfs mount.
#
# The daemon runs with -o powercut_sim (tests/support/power_cut_region.h): the pool file receives
# only bytes walfs flushed and drained (pmem mode) or msynced (msync mode); everything
# else lives in the daemon's private memory. So kill -9 of the daemon is a power cut: the
# pool keeps exactly its persisted image. Each cycle, under the committed-id load of
# lib/pg.sh (client loops logging ids only after COMMIT returned, plus pgbench):
#   1. at a random moment once the load runs, kill -9 the daemon (the cut), then every
#      PostgreSQL process;
#   2. fsck.walfs on the unmounted pool finds no error (a cut leaves only states that
#      recovery handles: warnings at most);
#   3. remount (pool recovery), restart PostgreSQL (crash recovery from the WAL on the
#      mount), and check: every logged id is in the table, pg_amcheck --heapallindexed
#      finds nothing, and a canary written without fsync just before the cut is there
#      in pmem mode (writes are durable on return) and gone in msync mode (proof that the
#      simulation cut something);
# and finally fsck.walfs reports the cleanly unmounted pool clean.
#
# Environment:
#   WALFS_POWERCUT_CYCLES  power cuts per mode (default 3: the CI smoke; try 50)
#   WALFS_POWERCUT_SEED    seed of the cut delays (default: from the clock; logged)
#   WALFS_PG_MODES         as in lib/pg.sh (default "pmem msync")
#   WALFS_PG_DIRECT=1      as in lib/pg.sh: the server writes WAL through
#                          libwalfs-direct.so, into the daemon's written image (so reads
#                          through the mount see it) and durably into the pool
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require
[ "$WALFS_TEST_NO_MOUNT" = 1 ] && skip "a power cut needs the walfs daemon (WALFS_TEST_NO_MOUNT=1)"
require_test_facilities
[ -x "$PG_ROOT$PG_BIN/pg_amcheck" ] || skip "pg_amcheck is missing ($PG_ROOT$PG_BIN)"

CYCLES=${WALFS_POWERCUT_CYCLES:-3}
[[ $CYCLES =~ ^[1-9][0-9]*$ ]] || fail "WALFS_POWERCUT_CYCLES must be a positive number, got '$CYCLES'"
SEED=${WALFS_POWERCUT_SEED:-$(($(date +%s%N) % 32768))}
RANDOM=$SEED
# Each cycle's cut comes 0 to 3 s after its loggers have logged IDS_BEFORE_CUT ids (so
# every cut hits a running load, however slow the machine).
IDS_BEFORE_CUT=5
CUT_SPAN_MS=3000
log "power cuts: $CYCLES per mode, seed $SEED (rerun with WALFS_POWERCUT_SEED=$SEED)"

TOTAL_CUTS=0
TOTAL_CHECKS=0

# amcheck W: pg_amcheck --heapallindexed over every database (tables and their btree
# indexes) must report nothing. Corruption goes to stdout; stderr only has notices such as
# "extension amcheck already exists".
amcheck() {
  local w=$1 out=$1/run/amcheck.client.log
  as_postgres "$PG_BIN/pg_amcheck" -h "$w/run" -U postgres --all --install-missing \
    --heapallindexed >"$out" 2>"$out.stderr" ||
    { cat "$out" "$out.stderr" >&2; fail "pg_amcheck failed"; }
  [ ! -s "$out" ] || { cat "$out" >&2; fail "pg_amcheck reported corruption"; }
}

# wait_for_ids W CYCLE N: waits until cycle CYCLE's loggers have logged N ids.
wait_for_ids() {
  local w=$1 cycle=$2 n=$3 i got
  for ((i = 0; i < 1200; i++)); do
    got=$({ cat "$w"/run/ids."$cycle".* 2>/dev/null || true; } | wc -l)
    ((got >= n)) && return 0
    sleep 0.05
  done
  fail "cycle $cycle: the load logged only $got committed ids in 60 s"
}

# fsck_after_cut POOL CYCLE: the crashed, unmounted pool has no error (warnings are the
# states recovery completes at the next mount).
fsck_after_cut() {
  local pool=$1 cycle=$2 out
  out=$("$FSCK" "$pool" 2>&1) ||
    { printf '%s\n' "$out" >&2; fail "cycle $cycle: fsck.walfs finds errors in the cut pool"; }
  log "cycle $cycle: fsck of the cut pool: $(printf '%s\n' "$out" | tail -n 1)"
}

run_mode() {
  local mode=$1 w mnt pool cycle delay_ms recoveries canary ids
  log "=== mode $mode"
  pg_load_cluster "$mode" -o powercut_sim
  w=$W
  mnt=$w/wal
  pool=$PG_POOL
  grep -q 'POWER-CUT SIMULATION is on' "$WALFS_LOG" ||
    { cat "$WALFS_LOG" >&2; fail "the daemon did not report power-cut simulation"; }
  # With direct access the servers' stores go to the shared written image and the pool.
  pg_direct_bypass "$w" 200

  for ((cycle = 1; cycle <= CYCLES; cycle++)); do
    delay_ms=$((RANDOM % CUT_SPAN_MS))
    recoveries=$(grep -c 'automatic recovery in progress' "$w/run/pg.log" || true)
    pg_load_start "$w" "$cycle"
    wait_for_ids "$w" "$cycle" "$IDS_BEFORE_CUT"
    sleep "$((delay_ms / 1000)).$(printf '%03d' $((delay_ms % 1000)))"
    canary="canary $mode $cycle $RANDOM"
    printf '%s' "$canary" >"$mnt/canary.$cycle" || fail "cannot write the canary"
    log "cycle $cycle: power cut ${delay_ms} ms after the ${IDS_BEFORE_CUT}th id" \
      "(kill -9 of walfs $WALFS_PID)"
    if [ "$WALFS_PG_DIRECT" = 1 ]; then
      # With direct access the servers store WAL into the pool themselves and persist
      # each write before it returns: killed after the daemon, they would go on making
      # writes durable after the cut. Killed first, they stop where a cut would stop
      # them, and the daemon's unpersisted state is lost as before.
      pg_crash "$w" quiet
      kill -9 "$WALFS_PID"
    else
      kill -9 "$WALFS_PID"
      pg_crash "$w" quiet
    fi
    wait "$WALFS_PID" 2>/dev/null || true
    pg_load_wait
    fusermount3 -u -z "$mnt" || fail "cannot detach the dead mount $mnt"
    fsck_after_cut "$pool" "$cycle"

    pg_mount "$pool" "$mnt" "$mode" -o powercut_sim
    log "cycle $cycle: remounted: journal_replays=$(pg_walfs_counter "$mnt" journal_replays)" \
      "orphans_reclaimed=$(pg_walfs_counter "$mnt" orphans_reclaimed)"
    if [ "$mode" = pmem ]; then
      [ "$(cat "$mnt/canary.$cycle")" = "$canary" ] ||
        fail "cycle $cycle: pmem mode lost a write acknowledged before the cut"
    else
      [ ! -s "$mnt/canary.$cycle" ] ||
        fail "cycle $cycle: a write never fsynced survived the cut: the simulation is not in force"
    fi
    rm -f "$mnt/canary.$cycle"

    pg_start "$w"
    (($(grep -c 'automatic recovery in progress' "$w/run/pg.log") > recoveries)) ||
      fail "cycle $cycle: PostgreSQL did not run crash recovery after the cut"
    pg_verify_committed "$w" "$IDS_BEFORE_CUT"
    ids=$PG_IDS_CHECKED
    amcheck "$w"
    TOTAL_CUTS=$((TOTAL_CUTS + 1))
    TOTAL_CHECKS=$((TOTAL_CHECKS + ids))
    log "cycle $cycle: survived: $ids acknowledged ids present, pg_amcheck clean"
  done

  pg_direct_check "$mnt"
  pg_stop "$w" fast
  pg_umount "$mnt"
  pg_fsck "$pool"
  log "mode $mode: $CYCLES power cuts survived, $ids distinct acknowledged ids all present"
}

for mode in $WALFS_PG_MODES; do
  run_mode "$mode"
done
log "PASS: $TOTAL_CUTS power cuts survived, $TOTAL_CHECKS id checks (seed $SEED)"
