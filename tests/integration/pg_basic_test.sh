#!/usr/bin/env bash
# PostgreSQL 15 with pg_wal on a walfs mount: initdb -X onto the mount, pgbench, many
# segment switches and checkpoints (segments recycled by rename and removed), a clean
# restart, pg_waldump through the mount, and pg_test_fsync on the mount (every method,
# O_DIRECT ones included). Runs in both durability modes (WALFS_PG_MODES) and with WAL
# segment sizes 16 MiB, 1 MiB and 64 MiB, on pools made for that size and on a pool
# whose segment size does not match.
#
# WALFS_PG_LONG=1 runs every variant in every mode with a longer pgbench.
# WALFS_PG_DIRECT=1 (lib/pg.sh) also checks that commits no longer reach the daemon.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require

# name  wal-segsize pool-segsize  max_wal min_wal pool  switches ckpt_every  (sizes in MiB;
# pool-segsize 0 = mkfs's default) full=1: pgbench -T 10 and pg_test_fsync.
VARIANTS=(
  "seg16 16 16 128 64 512 40 8 1"
  "seg1 1 1 32 8 128 40 8 0"
  "seg64 64 64 256 128 1024 12 4 0"
  "seg1-on-default-pool 1 0 32 8 768 40 8 0"
)
# Which variants each mode runs by default (all of them with WALFS_PG_LONG=1).
declare -A DEFAULT_VARIANTS=([pmem]="seg16 seg1 seg64" [msync]="seg16 seg1-on-default-pool")

# check_test_fsync W FILE: pg_test_fsync -s 1 on the mount must run every test with a
# result; "n/a" is allowed only for fsync_writethrough (not a Linux method).
check_test_fsync() {
  local w=$1 file=$2 out=$1/run/test_fsync.client.log bad n
  as_postgres "$PG_BIN/pg_test_fsync" -s 1 -f "$file" >"$out" 2>&1 ||
    { cat "$out" >&2; fail "pg_test_fsync -f $file failed"; }
  bad=$(grep -E 'n/a|[Ee]rror|could not|failed' "$out" | grep -v '^ *fsync_writethrough  *n/a$' || true)
  [ -z "$bad" ] || { cat "$out" >&2; fail "pg_test_fsync on the mount: $bad"; }
  n=$(grep -cE '[0-9.]+ ops/sec +[0-9]+ usecs/op' "$out" || true)
  ((n >= 14)) || { cat "$out" >&2; fail "pg_test_fsync printed only $n results"; }
  as_postgres rm -f "$file"
  log "pg_test_fsync: $n results on the mount, O_DIRECT included"
}

run_variant() {
  local mode=$1 name=$2 walseg=$3 poolseg=$4 maxwal=$5 minwal=$6 poolmib=$7 nswitch=$8
  local every=$9 full=${10}
  local w pool mnt seconds res txns tps first cur cur_no n i seg max_seg sql rows
  log "=== mode $mode, variant $name: wal-segsize ${walseg}MiB, pool segment ${poolseg}MiB"
  pg_workdir
  w=$W
  mnt=$w/wal
  pool=$(pg_pool_path "$w" "$mode" "$poolmib")
  if ((poolseg > 0)); then
    pg_mkpool "$pool" "$poolmib" --segment-size $((poolseg << 20))
  else
    pg_mkpool "$pool" "$poolmib"
  fi
  pg_mount "$pool" "$mnt" "$mode"

  pg_initdb "$w" --wal-segsize="$walseg"
  [ -d "$mnt/pg_wal/archive_status" ] || fail "initdb did not create pg_wal/archive_status"
  pg_conf "$w" "max_wal_size = ${maxwal}MB" "min_wal_size = ${minwal}MB"
  pg_start "$w"
  [ "$(pg_sql "$w" 'SHOW wal_segment_size')" = "${walseg}MB" ] ||
    fail "wal_segment_size is $(pg_sql "$w" 'SHOW wal_segment_size'), expected ${walseg}MB"
  for seg in $(pg_segments "$w"); do
    [ "$(stat -c %s "$mnt/pg_wal/$seg")" = $((walseg << 20)) ] ||
      fail "segment $seg has size $(stat -c %s "$mnt/pg_wal/$seg"), expected $((walseg << 20))"
  done

  pg_bench "$w" -i -s 2 -q >"$w/run/init.client.log" 2>&1 ||
    { cat "$w/run/init.client.log" >&2; fail "pgbench -i -s 2 failed"; }
  seconds=3
  ((full)) && seconds=10
  [ "$WALFS_PG_LONG" = 1 ] && seconds=60
  res=$(pg_bench_run "$w" bench -c 4 -j 2 -T "$seconds")
  read -r txns tps <<<"$res"
  log "pgbench ($mode, $name, -c 4 -T $seconds): $txns transactions, $tps tps"
  echo "TPS mode=$mode variant=$name clients=4 seconds=$seconds tps=$tps" >&2
  # pg_waldump decodes everything pgbench wrote, from the oldest segment, through the mount.
  pg_waldump_check "$w" "$(pg_segments "$w" | sed -n 1p)"

  # Many switches with checkpoints in between: old segments are recycled (renamed to
  # future names) or removed while the server keeps writing.
  first=$(pg_segments "$w" | sed -n 1p)
  pg_sql "$w" 'CREATE TABLE switches (i int)'
  sql=$w/run/switches.sql
  for ((i = 1; i <= nswitch; i++)); do
    echo "INSERT INTO switches VALUES ($i);"
    echo "SELECT pg_switch_wal();"
    if ((i % every == 0)); then echo "CHECKPOINT;"; fi
  done >"$sql"
  echo "CHECKPOINT;" >>"$sql"
  pg_sql_file "$w" "$sql" >/dev/null
  cur=$(pg_sql "$w" 'SELECT pg_walfile_name(pg_current_wal_lsn())')
  [ -n "$cur" ] || fail "no current WAL file name"
  if pg_segments "$w" | grep -qx "$first"; then
    fail "first segment $first is still in pg_wal after $nswitch switches and checkpoints"
  fi
  ! [ -e "$mnt/pg_wal/$first" ] || fail "$first can still be opened after its removal"
  # PostgreSQL 15 creates at most the next segment ahead (PreallocXlogFiles); a name two
  # or more ahead can only come from recycling an old segment by rename.
  cur_no=$((16#${cur:8:16}))
  max_seg=$(pg_segments "$w" | tail -n 1)
  (((16#${max_seg:8:16}) >= cur_no + 2)) ||
    fail "no recycled segment ahead of $cur (highest is $max_seg): $(pg_segments "$w" | tr '\n' ' ')"
  n=$(pg_segments "$w" | wc -l)
  ((n <= maxwal / walseg + every + 4)) ||
    fail "$n segments in pg_wal after checkpoints (max_wal_size ${maxwal}MB): not removed"
  for seg in $(pg_segments "$w"); do
    [ "$(stat -c %s "$mnt/pg_wal/$seg")" = $((walseg << 20)) ] ||
      fail "segment $seg has size $(stat -c %s "$mnt/pg_wal/$seg") after recycling"
  done
  log "switches: $first gone, current $cur, highest $max_seg, $n segments in pg_wal"

  # A clean restart, then everything committed is there.
  pg_stop "$w" fast
  pg_start "$w"
  rows=$(pg_sql "$w" 'SELECT count(*) FROM pgbench_history')
  [ "$rows" = "$txns" ] || fail "pgbench_history has $rows rows after restart, pgbench committed $txns"
  rows=$(pg_sql "$w" 'SELECT count(*), sum(i) FROM switches')
  [ "$rows" = "$nswitch|$((nswitch * (nswitch + 1) / 2))" ] ||
    fail "switches table has '$rows' after restart"

  # pg_waldump reads the mount from the oldest segment up to the flush position.
  pg_waldump_check "$w" "$(pg_segments "$w" | sed -n 1p)"

  if ((full)); then
    check_test_fsync "$w" "$mnt/test_fsync.file"
  fi

  [ "$WALFS_TEST_NO_MOUNT" = 1 ] || pg_direct_bypass "$w"

  if [ "$mode" = msync ] && [ "$WALFS_TEST_NO_MOUNT" != 1 ]; then
    local fs fsd
    fs=$(pg_walfs_counter "$mnt" fuse_fsync)
    fsd=$(pg_walfs_counter "$mnt" fuse_fsyncdir)
    log "daemon counters (msync): fuse_fsync=$fs fuse_fsyncdir=$fsd"
    ((fs > 0)) || fail "msync mode: the daemon received no FSYNC request (fuse_fsync=$fs)"
    ((fsd > 0)) || fail "msync mode: the daemon received no FSYNCDIR request (fuse_fsyncdir=$fsd)"
  fi

  pg_finish "$w" "$pool"
}

for mode in $WALFS_PG_MODES; do
  for v in "${VARIANTS[@]}"; do
    read -r name rest <<<"$v"
    if [ "$WALFS_PG_LONG" != 1 ] && ! [[ " ${DEFAULT_VARIANTS[$mode]:-} " == *" $name "* ]]; then
      continue
    fi
    # shellcheck disable=SC2086
    run_variant "$mode" $v
  done
done
log "PASS"
