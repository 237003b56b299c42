#!/usr/bin/env bash
# WAL archiving out of a walfs mount: archive_mode=on with an archive_command that cp's
# each segment from pg_wal (on the mount) to an archive directory. While the command is
# held back, finished segments wait as archive_status/*.ready; once released, every one
# becomes .done, the archived copies are byte-identical to the segments still in pg_wal,
# the archive decodes with pg_waldump as one contiguous WAL stream, and a checkpoint
# removes the .done files together with their segments. Around it, the other WAL tools
# write into the mount: pg_basebackup -X stream (--waldir on the mount), pg_receivewal
# (segments identical to the archive; with WALFS_PG_DIRECT=1 in pmem mode it preloads the
# library too, and must have streamed into write leases), and a point-in-time recovery
# of the base backup from the archive (restore_command copying into the mount,
# promotion to timeline 2).
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require

# wait_for DESCRIPTION SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  while ((SECONDS < deadline)); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  fail "timed out after ${secs}s waiting for $what"
}

count_status() { find "$1/wal/pg_wal/archive_status" -name "*.$2" | wc -l; }
archiver_failed() { (($(pg_sql "$1" 'SELECT failed_count FROM pg_stat_archiver') > 0)); }
archived_up_to() {
  [ "$(pg_sql "$1" 'SELECT last_archived_wal FROM pg_stat_archiver')" = "$2" ] &&
    (($(count_status "$1" ready) == 0))
}

promoted() { [ "$(pg_sql "$1" 'SELECT pg_is_in_recovery()')" = f ]; }

run_mode() {
  local mode=$1 w mnt pool arch nswitch=8 i last f n ready done_n first c rows recv size
  [ "$WALFS_PG_LONG" = 1 ] && nswitch=40
  log "=== mode $mode"
  pg_workdir
  w=$W
  mnt=$w/wal
  arch=$w/archive
  mkdir "$arch"
  chown postgres: "$arch"
  pool=$(pg_pool_path "$w" "$mode" $((nswitch * 48 + 512)))
  pg_mkpool "$pool" $((nswitch * 48 + 512))
  pg_mount "$pool" "$mnt" "$mode"
  pg_initdb "$w"
  # The gate file holds archiving back until the test has seen the .ready files.
  pg_conf "$w" "archive_mode = on" \
    "archive_command = 'test -f $w/run/archive.gate && test ! -f $arch/%f && cp %p $arch/%f'" \
    "checkpoint_timeout = 1h" "max_wal_size = 1GB" "min_wal_size = 256MB"
  pg_start "$w"
  pg_sql "$w" 'CREATE TABLE t (i int)'
  pg_bench "$w" -i -s 1 -q >"$w/run/init.client.log" 2>&1 ||
    { cat "$w/run/init.client.log" >&2; fail "pgbench -i failed"; }
  # A base backup whose WAL directory is on the mount too (pg_basebackup -X stream writes
  # .partial segments, pads, fsyncs and renames them there); restored below.
  c=$w/clone
  mkdir -p "$c/data" "$c/run"
  chown postgres: "$c/data" "$c/run"
  chmod 0700 "$c/data"
  as_postgres "$PG_BIN/pg_basebackup" -h "$w/run" -D "$c/data" -X stream \
    --waldir="$mnt/clone_wal" -c fast >"$w/run/basebackup.client.log" 2>&1 ||
    { cat "$w/run/basebackup.client.log" >&2; fail "pg_basebackup -X stream onto the mount failed"; }
  # pg_receivewal streams into the mount as well (.partial, padded, fsynced, renamed).
  # (The pool holds pg_wal, the clone's WAL with its restored segments and these.)
  as_postgres mkdir "$mnt/recv"
  local recv_env=()
  if [ "$WALFS_PG_DIRECT" = 1 ]; then
    recv_env=(env LD_PRELOAD="$WALFS_DIRECT_LIB" WALFS_DIRECT_DEBUG=1)
  fi
  as_postgres "${recv_env[@]}" "$PG_BIN/pg_receivewal" -h "$w/run" -D "$mnt/recv" --synchronous -n \
    >"$w/run/receivewal.client.log" 2>&1 &
  recv=$!
  on_exit "kill $recv"
  for ((i = 1; i <= nswitch; i++)); do
    last=$(pg_sql "$w" "INSERT INTO t VALUES ($i); SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
    pg_sql "$w" 'SELECT pg_switch_wal()' >/dev/null
  done
  wait_for "a failed archive attempt" 30 archiver_failed "$w"
  ready=$(count_status "$w" ready)
  ((ready >= nswitch)) || fail "$ready .ready files after $nswitch switches with archiving held back"
  (($(count_status "$w" done) == 0)) || fail ".done files while archive_command could not succeed"
  [ -z "$(ls -A "$arch")" ] || fail "archive not empty while held back"
  log "$ready segments waiting as .ready, archive_command failing as intended"

  touch "$w/run/archive.gate"
  # A switch wakes the archiver up at once instead of after its 60 s nap.
  last=$(pg_sql "$w" "INSERT INTO t VALUES (0); SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
  pg_sql "$w" 'SELECT pg_switch_wal()' >/dev/null
  wait_for "archiving up to $last" 60 archived_up_to "$w" "$last"
  done_n=$(count_status "$w" done)
  n=$(find "$arch" -type f | wc -l)
  ((n >= nswitch + 1)) || fail "only $n segments archived after $((nswitch + 1)) switches"
  ((done_n == n)) || fail "$done_n .done files for $n archived segments"
  local compared=0
  for f in "$arch"/*; do
    f=${f##*/}
    [ -e "$mnt/pg_wal/archive_status/$f.done" ] || fail "archived $f has no .done"
    if [ -e "$mnt/pg_wal/$f" ]; then
      cmp "$arch/$f" "$mnt/pg_wal/$f" || fail "archived $f differs from pg_wal/$f"
      compared=$((compared + 1))
    fi
  done
  ((compared >= nswitch)) || fail "only $compared archived segments were still in pg_wal to compare"
  log "$n segments archived, $done_n .done, $compared byte-identical with pg_wal"

  first=$(find "$arch" -type f -printf '%f\n' | sort | sed -n 1p)
  as_postgres "$PG_BIN/pg_waldump" -p "$arch" "$first" "$last" >"$w/run/archdump.client.log" 2>&1 ||
    { tail -n 20 "$w/run/archdump.client.log" >&2; fail "pg_waldump over the archive $first..$last failed"; }
  log "archive decodes from $first to $last"

  # What pg_receivewal wrote into the mount matches the archive.
  wait_for "pg_receivewal to finish $last" 30 test -f "$mnt/recv/$last"
  kill -TERM $(pgrep -P "$recv") 2>/dev/null || true
  wait "$recv" || true
  n=0
  for f in "$mnt"/recv/*; do
    f=${f##*/}
    if [[ $f =~ ^[0-9A-F]{24}$ ]]; then
      cmp "$mnt/recv/$f" "$arch/$f" || fail "pg_receivewal's $f differs from the archived one"
      n=$((n + 1))
    elif [[ $f =~ ^[0-9A-F]{24}\.partial$ ]]; then
      # pg_receivewal pads a new .partial to the segment size before streaming into it; a
      # stop that lands inside the padding leaves it short, and then it holds only zeros.
      size=$(stat -c %s "$mnt/recv/$f")
      if ((size != 16 << 20)); then
        cmp -s -n "$size" "$mnt/recv/$f" /dev/zero ||
          fail "$f is $size bytes, neither padded to 16 MiB nor a padding in progress"
        log "$f: pg_receivewal stopped while padding it ($size bytes, all zero)"
      fi
    else
      fail "unexpected file $f left by pg_receivewal"
    fi
  done
  ((n >= nswitch)) || fail "pg_receivewal completed only $n segments"
  log "pg_receivewal: $n segments in the mount identical to the archive"
  if [ "$WALFS_PG_DIRECT" = 1 ] && [ "$mode" = pmem ]; then
    # Each segment: opened empty, padded, a seek back to 0, then write(2) into the lease.
    n=$(grep -c "write lease granted" "$w/run/receivewal.client.log" || true)
    ((n >= nswitch)) || fail "pg_receivewal took $n write leases for $nswitch segments"
    log "pg_receivewal: $n write leases (its write(2) calls stored directly)"
    # The walsenders that served pg_basebackup -X stream and pg_receivewal read the
    # primary's WAL through read leases.
    n=$(pg_walfs_counter "$mnt" read_leases_granted)
    ((n >= nswitch)) || fail "only $n read leases for the walsenders' $nswitch+ segments"
  fi

  # Point-in-time recovery of the base backup from the archive, its WAL on the mount:
  # restore_command copies segments in as RECOVERYXLOG, then promotion starts timeline 2
  # (a .history file written with xlogtemp + rename).
  _PG_CLUSTERS+=("$c")
  # With the library, each cp into pg_wal logs its lease decisions (copy_file_range into
  # an empty walfs file: sized, then leased).
  pg_conf "$c" "unix_socket_directories = '$c/run'" "archive_mode = off" \
    "restore_command = 'WALFS_DIRECT_DEBUG=1 cp $arch/%f %p 2>>$c/run/restore.log'"
  as_postgres touch "$c/data/recovery.signal"
  pg_start "$c"
  # pg_ctl -w returns once hot standby accepts connections; promotion follows at the end
  # of the archive.
  wait_for "the restored clone to promote" 60 promoted "$c"
  rows=$(pg_sql "$c" 'SELECT count(*), sum(i) FROM t')
  [ "$rows" = "$((nswitch + 1))|$((nswitch * (nswitch + 1) / 2))" ] ||
    fail "clone restored from the archive has '$rows' in t, expected $((nswitch + 1))|$((nswitch * (nswitch + 1) / 2))"
  [ -f "$mnt/clone_wal/00000002.history" ] || fail "no timeline history file on the mount after promotion"
  # Written as xlogtemp.<pid> (a segment name, given a whole segment) and renamed: the
  # rename gives the segment back, leaving one 4 KiB block.
  size=$(stat -c %b "$mnt/clone_wal/00000002.history")
  ((size <= 8)) || fail "00000002.history holds $size sectors: its xlogtemp segment was kept"
  grep -q 'restored log file' "$c/run/pg.log" || fail "the clone restored nothing from the archive"
  if [ "$WALFS_PG_DIRECT" = 1 ] && [ "$mode" = pmem ]; then
    restored=$(grep -cE 'restored log file "[0-9A-F]{24}"' "$c/run/pg.log" || true)
    n=$(grep -c "write lease granted" "$c/run/restore.log" || true)
    ((restored > 0 && n >= restored)) ||
      fail "restore_command's cp took $n write leases for $restored restored segments: $(tail -5 "$c/run/restore.log")"
    log "restore_command: $n write leases for $restored restored segments (copied into the pool)"
  fi
  log "clone restored from the archive to the last archived commit, promoted to timeline 2"
  pg_stop "$c" fast

  # A checkpoint removes (or recycles) archived segments and drops their .done files.
  pg_sql "$w" 'CHECKPOINT' >/dev/null
  pg_sql "$w" 'CHECKPOINT' >/dev/null
  [ ! -e "$mnt/pg_wal/$first" ] || fail "$first still in pg_wal after checkpoints"
  [ ! -e "$mnt/pg_wal/archive_status/$first.done" ] || fail "$first.done left after its segment went"
  (($(count_status "$w" done) < done_n)) || fail "checkpoints removed no .done file"

  # Archiving keeps working across a restart.
  pg_stop "$w" fast
  pg_start "$w"
  last=$(pg_sql "$w" "INSERT INTO t VALUES (-1); SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
  pg_sql "$w" 'SELECT pg_switch_wal()' >/dev/null
  wait_for "archiving of $last after restart" 60 archived_up_to "$w" "$last"
  cmp "$arch/$last" "$mnt/pg_wal/$last" || fail "archived $last differs after restart"

  pg_finish "$w" "$pool"
}

for mode in $WALFS_PG_MODES; do
  run_mode "$mode"
done
log "PASS"
