#!/usr/bin/env bash
# A full pool: PostgreSQL fills a small walfs pool with WAL until a new segment finds no
# room. In PostgreSQL (xlog.c) any WAL write, fsync or open error inside a segment is a
# PANIC, so walfs may refuse space only at allocation time, and it allocates a segment's
# whole extent when the file is created (xlogtemp.PID). Asserted, in each mode:
#   - the only ENOSPC PostgreSQL reports is `could not create file "pg_wal/xlogtemp.N"`
#     (XLogFileInit's open), as ERROR or PANIC (PANIC: creation inside XLogWrite); no
#     write, fsync or open of an existing segment ever fails, no xlogtemp file is left and
#     every segment has exactly the segment size;
#   - every commit acknowledged before the pool filled is present after restart;
#   - `df` on the mount tells the truth at every step: its size/used/avail equal the
#     daemon's own figures (walfsctl status: avail is free space less the reserve only
#     WAL segments may take) and used equals the sum of the blocks the files hold; when
#     PostgreSQL gives up, free space is below one segment;
#   - once space is freed (a ballast file placed in the pool beforehand is removed) the
#     cluster recovers and commits again, and fsck.walfs finds the pool clean.
#
# Default 16 MiB segments (the configuration users run; filling a few takes seconds) in a
# pool sized at run time: after initdb, a ballast file leaves room for FREE_SEGMENTS more
# segments plus half a segment, so the pool fills after ~64 MiB of WAL and the half
# segment left shows df reporting free space that cannot hold a segment.
#
# restart_after_crash = off: after the PANIC the postmaster exits instead of restarting
# into crash recovery, so the full state can be examined before anything frees space.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require
[ "$WALFS_TEST_NO_MOUNT" != 1 ] || skip "needs a real walfs pool to fill"

POOL_MIB=160
FREE_SEGMENTS=4
FILL_TIMEOUT=180

# df_check W WHAT: df on the mount agrees with the daemon's own figures (walfsctl status,
# read before and after df: a pair that changed in between is read again) and, with the
# server down, used space is exactly what the files hold. Space of an unlinked file comes
# back when the kernel forgets the inode (FORGET, just after unlink returns), so the
# figures are given up to 10 s to settle; the wait is logged. Sets DF_AVAIL and DF_FREE
# (bytes: what ordinary files may still take, and all free space, reserve included).
df_check() {
  local w=$1 what=$2 mnt=$1/wal size used avail bs total free s1 s2 files reads=0 reserved
  local deadline=$((SECONDS + 10))
  bs=$(pg_walfs_counter "$mnt" block_size)
  total=$(pg_walfs_counter "$mnt" total_blocks)
  while :; do
    reads=$((reads + 1))
    s1=$(pg_walfs_counter "$mnt" free_blocks)
    read -r size used avail < <(df -B1 --output=size,used,avail "$mnt" | tail -n 1)
    s2=$(pg_walfs_counter "$mnt" free_blocks)
    reserved=$(pg_walfs_counter "$mnt" reserved_blocks)
    files=$(find "$mnt" -xdev -type f -printf '%b\n' | awk '{ s += $1 * 512 } END { print s + 0 }')
    free=$s2
    if ((s1 == s2)) && { [ -n "$(pg_postmaster_pid "$w")" ] || ((files == used)); }; then
      break
    fi
    ((SECONDS < deadline)) || break
    sleep 0.02
  done
  log "df $what: size=$size used=$used avail=$avail;" \
    "walfs: total=$((total * bs)) free=$((free * bs)) reserved=$((reserved * bs)); files hold $files" \
    "$( ((reads == 1)) || echo "(settled after $reads reads)")"
  ((s1 == s2)) || fail "walfs free space keeps changing with the server down ($what)"
  ((size == total * bs)) || fail "df size $size != walfs total $((total * bs)) ($what)"
  ((avail == (free - reserved) * bs)) ||
    fail "df avail $avail != walfs free less the reserve $(((free - reserved) * bs)) ($what)"
  ((used == (total - free) * bs)) || fail "df used $used != walfs used $(((total - free) * bs)) ($what)"
  if [ -z "$(pg_postmaster_pid "$w")" ]; then
    ((files == used)) || fail "files hold $files bytes but df says $used are used ($what)"
  fi
  DF_AVAIL=$avail
  DF_FREE=$((free * bs))
}

# check_enospc_reaction W: the server log shows ENOSPC only at segment creation, and no
# failed I/O on an existing WAL file.
check_enospc_reaction() {
  local w=$1 logf=$1/run/pg.log nospc other
  nospc=$(grep 'No space left on device' "$logf" || true)
  [ -n "$nospc" ] || fail "the server log reports no ENOSPC"
  other=$(printf '%s\n' "$nospc" |
    grep -Ev '(ERROR|PANIC):  could not create file "pg_wal/xlogtemp\.[0-9]+": No space left on device$' ||
    true)
  [ -z "$other" ] || fail "ENOSPC outside segment creation: $other"
  # Any other failed operation on a WAL file ("pg_wal/...", a bare segment name as in
  # fdatasync's message, or XLogWrite's "log file <segment>").
  other=$(grep -E 'could not [a-z ]+("pg_wal/|"[0-9A-F]{24}|log file [0-9A-F]{24})' "$logf" |
    grep -Ev 'could not create file "pg_wal/xlogtemp\.[0-9]+": No space left on device$' || true)
  [ -z "$other" ] || fail "a WAL file operation other than creation failed: $other"
  grep -q 'PANIC:  could not create file "pg_wal/xlogtemp' "$logf" ||
    fail "the server stopped without the documented PANIC at segment creation"
  log "PostgreSQL's reaction to the full pool (server log):"
  grep -E 'No space left on device|terminated by signal|shutting down because restart_after_crash' \
    "$logf" | sed 's/^/    /' >&2
}

run_mode() {
  local mode=$1 w mnt pool seg f size ballast free_full round2 n
  log "=== mode $mode"
  pg_workdir
  w=$W
  mnt=$w/wal
  pool=$(pg_pool_path "$w" "$mode" "$POOL_MIB")
  pg_mkpool "$pool" "$POOL_MIB"
  pg_mount "$pool" "$mnt" "$mode"
  pg_initdb "$w"
  # No checkpoint frees WAL during the fill: its size bound is far above the pool.
  pg_conf "$w" "max_wal_size = 4GB" "min_wal_size = 32MB" "checkpoint_timeout = 1h" \
    "restart_after_crash = off"
  seg=$(pg_walfs_counter "$mnt" segment_size)
  df_check "$w" "after initdb"
  ballast=$((DF_AVAIL - FREE_SEGMENTS * seg - seg / 2))
  ((ballast > 0)) || fail "pool of $POOL_MIB MiB too small for $FREE_SEGMENTS free segments"
  fallocate -l "$ballast" "$mnt/ballast" || fail "cannot place a $ballast-byte ballast file"
  df_check "$w" "with the ballast"
  ((DF_AVAIL == FREE_SEGMENTS * seg + seg / 2)) ||
    fail "avail $DF_AVAIL after a $ballast-byte ballast, expected $((FREE_SEGMENTS * seg + seg / 2))"

  pg_start "$w"
  pg_sql "$w" 'CREATE TABLE committed (id bigint PRIMARY KEY);
               CREATE TABLE filler (id int, pad text)'
  pg_bench "$w" -i -s 1 -q >"$w/run/init.client.log" 2>&1 ||
    { cat "$w/run/init.client.log" >&2; fail "pgbench -i failed"; }
  pg_load_start "$w" 1
  sleep 2
  log "filling the pool with WAL"
  pg_fill_wal "$w" &
  local fill_pid=$!
  pg_wait_exit "$w" "$FILL_TIMEOUT" ||
    fail "the server still runs ${FILL_TIMEOUT}s into the fill (avail $(df -B1 --output=avail "$mnt" | tail -n 1))"
  wait "$fill_pid" || true
  pg_load_wait
  pg_crash "$w" quiet  # children that outlive the postmaster, if any

  check_enospc_reaction "$w"
  for f in "$mnt"/pg_wal/*; do
    [ -f "$f" ] || continue
    case ${f##*/} in
      xlogtemp.*) fail "a temporary segment was left: $f ($(stat -c %s "$f") bytes)" ;;
      [0-9A-F]*) size=$(stat -c %s "$f")
        ((size == seg)) || fail "segment ${f##*/} has $size bytes, not $seg" ;;
    esac
  done
  log "pg_wal when full: $(pg_segments "$w" | wc -l) segments of $seg bytes, no xlogtemp file"
  df_check "$w" "when PostgreSQL gave up"
  free_full=$DF_FREE
  ((free_full < seg)) || fail "PostgreSQL failed to create a segment but $free_full bytes are free"

  # Free space, restart: crash recovery replays the WAL, the cluster runs on.
  rm "$mnt/ballast"
  df_check "$w" "without the ballast"
  ((DF_FREE == free_full + ballast)) ||
    fail "removing the $ballast-byte ballast raised free space from $free_full to $DF_FREE"
  pg_start "$w"
  grep -q 'redo done' "$w/run/pg.log" || fail "no crash recovery after the PANIC"
  pg_verify_committed "$w"  # the ids acknowledged before the pool filled

  pg_load_start "$w" 2
  sleep 3
  pg_sql "$w" 'CHECKPOINT'
  pg_stop "$w" fast
  pg_load_wait
  round2=$(cat "$w"/run/ids.2.* 2>/dev/null | wc -l)
  ((round2 > 0)) || fail "no commit succeeded after the ballast was removed"
  df_check "$w" "after more commits and a checkpoint"
  pg_start "$w"
  pg_verify_committed "$w"
  n=$(pg_sql "$w" 'SELECT count(*) FROM filler')
  log "$round2 commits after space was freed; filler holds $n rows"
  pg_finish "$w" "$pool"
}

for mode in $WALFS_PG_MODES; do
  run_mode "$mode"
done
log "PASS"
