#!/usr/bin/env bash
# Kill loops: PostgreSQL under load (committed-id loggers and pgbench, lib/pg.sh) with
# pg_wal on a walfs mount, killed again and again. Each cycle waits a random moment, then
# kills -9 at random one of:
#   postgres  the postmaster and every server process;
#   daemon    the walfs daemon alone: PostgreSQL sees its WAL fail under it (it PANICs
#             or its restart fails) and is given a second to stop by itself before the
#             rest of it is killed, since nothing can revive a dead FUSE connection;
#   both      the daemon and PostgreSQL, in random order;
# then checks the unmounted pool (fsck.walfs: no error; after a daemon kill, warnings for
# what the next mount recovers are allowed), mounts it again (pool recovery), restarts
# PostgreSQL (crash recovery) and asserts: every commit acknowledged in any cycle is in
# the table, and pg_waldump through the mount decodes every record from the redo point
# the crash recovery started at up to the flushed LSN. A final clean unmount and fsck end
# each mode.
#
# Environment:
#   WALFS_KILL_CYCLES  cycles per durability mode (default 4, CI size; the soak target
#                      runs 200)
#   WALFS_KILL_SEED    seed of the random choices (default: from the clock, logged, so a
#                      failing run can be repeated with the same kills and delays)
#   WALFS_KILL_MAX_MS  longest load before a kill, in ms (default 3000)
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require
[ "$WALFS_TEST_NO_MOUNT" != 1 ] || skip "needs a real walfs daemon to kill"

CYCLES=${WALFS_KILL_CYCLES:-4}
SEED=${WALFS_KILL_SEED:-$(($(date +%s%N) % 32768))}
MAX_MS=${WALFS_KILL_MAX_MS:-3000}
[[ $CYCLES =~ ^[1-9][0-9]*$ ]] || fail "WALFS_KILL_CYCLES must be a positive integer, not '$CYCLES'"
[[ $SEED =~ ^[0-9]+$ ]] || fail "WALFS_KILL_SEED must be a non-negative integer, not '$SEED'"
[[ $MAX_MS =~ ^[1-9][0-9]*$ ]] || fail "WALFS_KILL_MAX_MS must be a positive integer, not '$MAX_MS'"
RANDOM=$SEED
log "kill loop: $CYCLES cycles per mode, seed $SEED (WALFS_KILL_SEED=$SEED repeats the run)"

SUMMARY=()
# Logged by the startup process when it finds the cluster crashed (with or without WAL
# to redo after the last checkpoint).
RECOVERY='database system was not properly shut down; automatic recovery in progress'

# kill_daemon MNT: kill -9 of the walfs daemon; waits for it and detaches the dead mount.
kill_daemon() {
  local mnt=$1
  kill -9 "$WALFS_PID"
  wait "$WALFS_PID" 2>/dev/null || true
  fusermount3 -u -z "$mnt" || fail "cannot detach the dead mount $mnt"
}

# redo_segment W: the segment holding the latest checkpoint's redo point, where crash
# recovery would start reading.
redo_segment() {
  pg_sql "$1" 'SELECT pg_walfile_name(redo_lsn) FROM pg_control_checkpoint()'
}

run_mode() {
  local mode=$1 w mnt pool cycle victim ms redos from daemon_dead t0 outcome i lines panic
  local -A kills=([postgres]=0 [daemon]=0 [both]=0)
  local self_stops=0 panics=0
  log "=== mode $mode"
  pg_load_cluster "$mode"
  w=$W
  mnt=$w/wal
  pool=$PG_POOL

  t0=$SECONDS
  for ((cycle = 1; cycle <= CYCLES; cycle++)); do
    case $((RANDOM % 3)) in
      0) victim=postgres ;;
      1) victim=daemon ;;
      2) victim=both ;;
    esac
    ms=$((200 + RANDOM % MAX_MS))
    from=$(redo_segment "$w")
    redos=$(grep -c "$RECOVERY" "$w/run/pg.log" || true)
    lines=$(wc -l <"$w/run/pg.log")
    pg_load_start "$w" "$cycle"
    sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
    outcome=killed
    case $victim in
      postgres)
        [ -n "$(pg_postmaster_pid "$w")" ] || fail "cycle $cycle: the server stopped before the kill"
        pg_crash "$w" quiet
        daemon_dead=0
        ;;
      daemon)
        kill_daemon "$mnt"
        daemon_dead=1
        for ((i = 0; i < 10; i++)); do
          [ -n "$(pg_postmaster_pid "$w")" ] || break
          sleep 0.1
        done
        if [ -z "$(pg_postmaster_pid "$w")" ]; then
          outcome="stopped by itself"
          self_stops=$((self_stops + 1))
        fi
        pg_crash "$w" quiet
        ;;
      both)
        if ((RANDOM % 2)); then
          kill_daemon "$mnt"
          pg_crash "$w" quiet
        else
          pg_crash "$w" quiet
          kill_daemon "$mnt"
        fi
        daemon_dead=1
        ;;
    esac
    kills[$victim]=$((kills[$victim] + 1))
    pg_load_wait
    # What PostgreSQL said about its WAL failing under it, if anything.
    panic=$(tail -n +$((lines + 1)) "$w/run/pg.log" | grep -m 1 -o 'PANIC: .*' || true)
    if [ -n "$panic" ]; then
      panics=$((panics + 1))
      outcome="$outcome; $panic"
    fi
    log "cycle $cycle/$CYCLES: kill -9 of $victim after ${ms} ms of load (PostgreSQL $outcome)"

    ((daemon_dead)) || pg_umount "$mnt"
    pg_fsck "$pool"
    pg_mount "$pool" "$mnt" "$mode"
    pg_start "$w"
    (($(grep -c "$RECOVERY" "$w/run/pg.log") > redos)) ||
      fail "cycle $cycle: the restart after the kill ran no crash recovery"
    # A short cycle on a busy machine may see no commit acknowledged; the whole run must.
    pg_verify_committed "$w" 0
    # The redo segment read before the load may have been removed by a checkpoint during
    # it; then everything left is checked.
    [ -f "$mnt/pg_wal/$from" ] || from=$(pg_segments "$w" | sed -n 1p)
    pg_waldump_check "$w" "$from"
  done
  ((PG_IDS_CHECKED >= 20)) || fail "only $PG_IDS_CHECKED ids were acknowledged in $CYCLES cycles: the load did not run"

  SUMMARY+=("mode $mode: $CYCLES cycles in $((SECONDS - t0)) s (kill -9 of postgres \
${kills[postgres]}, daemon ${kills[daemon]} (PostgreSQL stopped by itself $self_stops), \
both ${kills[both]}; $panics cycles with a PANIC); $PG_IDS_CHECKED acknowledged ids checked, none lost")
  pg_finish "$w" "$pool"
}

for mode in $WALFS_PG_MODES; do
  run_mode "$mode"
done
log "kill loop, seed $SEED:"
for line in "${SUMMARY[@]}"; do log "  $line"; done
log "PASS"
