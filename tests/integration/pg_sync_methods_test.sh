#!/usr/bin/env bash
# Every wal_sync_method on a walfs mount: fdatasync, fsync, open_datasync, open_sync,
# wal_init_zero on and off (with wal_recycle=off so segments are really created, sparse),
# and wal_level=minimal + max_wal_senders=0 + open_datasync, which opens WAL with
# O_DIRECT|O_DSYNC in PostgreSQL 15 (16 and later: O_DSYNC; debug_io_direct = wal adds
# O_DIRECT, a case of its own there). For each: a short pgbench with segment switches,
# the open flags of the server's WAL fds checked in /proc, an immediate stop (crash
# recovery replays WAL from the mount), and every committed pgbench transaction present.
#
# WALFS_PG_LONG=1 runs longer pgbench rounds and adds open_sync with wal_level=minimal.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

pg_require

readonly O_DSYNC=$((8#10000)) O_SYNC_ONLY=$((8#4000000)) O_DIRECT=$((8#40000))

# PostgreSQL 16 stopped opening WAL with O_DIRECT for wal_level = minimal; it does so for
# debug_io_direct = wal instead (checked below, 16 and later).
MINIMAL_DIRECT=1
((WALFS_PG_VERSION < 16)) || MINIMAL_DIRECT=0

# name | settings (;-separated) | expected flags: dsync, sync, direct (1/0)
CONFIGS=(
  "fdatasync|wal_sync_method = fdatasync|0 0 0"
  "fsync|wal_sync_method = fsync|0 0 0"
  "open_datasync|wal_sync_method = open_datasync|1 0 0"
  "open_sync|wal_sync_method = open_sync|1 1 0"
  "init_zero_off|wal_sync_method = fdatasync;wal_init_zero = off;wal_recycle = off|0 0 0"
  "minimal_open_datasync|wal_level = minimal;max_wal_senders = 0;wal_sync_method = open_datasync;wal_init_zero = on;wal_recycle = on|1 0 $MINIMAL_DIRECT"
)
if ((WALFS_PG_VERSION >= 16)); then
  CONFIGS+=("io_direct_wal|wal_sync_method = open_datasync;debug_io_direct = wal|1 0 1")
fi
if [ "$WALFS_PG_LONG" = 1 ]; then
  CONFIGS+=("minimal_open_sync|wal_level = minimal;max_wal_senders = 0;wal_sync_method = open_sync|1 1 $MINIMAL_DIRECT")
fi

# check_wal_fd_flags W DSYNC SYNC DIRECT: every WAL segment fd held by the server's
# processes has exactly the expected O_DSYNC / O_SYNC / O_DIRECT bits; at least one exists.
check_wal_fd_flags() {
  local w=$1 want_dsync=$2 want_sync=$3 want_direct=$4 p fd target flags n=0 try
  for ((try = 0; try < 60 && n == 0; try++)); do
    ((try == 0)) || sleep 0.1
    for p in $(pg_server_pids "$w"); do
      for fd in /proc/"$p"/fd/*; do
        target=$(readlink "$fd" 2>/dev/null) || continue
        # A chrooted server's files show with the chroot's path in front.
        [[ $target =~ ^$PG_ROOT$w/wal/pg_wal/[0-9A-F]{24}( \(deleted\))?$ ]] || continue
        flags=$(sed -n 's/^flags:[[:space:]]*//p' "/proc/$p/fdinfo/${fd##*/}" 2>/dev/null) || continue
        [ -n "$flags" ] || continue
        flags=$((8#$flags))
        n=$((n + 1))
        if [ $(((flags & O_DSYNC) != 0)) != "$want_dsync" ] ||
          [ $(((flags & O_SYNC_ONLY) != 0)) != "$want_sync" ] ||
          [ $(((flags & O_DIRECT) != 0)) != "$want_direct" ]; then
          fail "pid $p fd ${fd##*/} on $target has flags $(printf '0%o' "$flags"), expected dsync=$want_dsync sync=$want_sync direct=$want_direct"
        fi
      done
    done
  done
  ((n > 0)) || fail "no server process held a WAL segment open for 6s"
  log "open flags of $n WAL fds: dsync=$want_dsync sync=$want_sync direct=$want_direct"
}

run_mode() {
  local mode=$1 w mnt pool cfg name settings flags redos bench_pid total=0 seconds=3 res txns tps rows
  local -a lines
  [ "$WALFS_PG_LONG" = 1 ] && seconds=20
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
  pg_bench "$w" -i -s 1 -q >"$w/run/init.client.log" 2>&1 ||
    { cat "$w/run/init.client.log" >&2; fail "pgbench -i failed"; }

  for cfg in "${CONFIGS[@]}"; do
    IFS='|' read -r name settings flags <<<"$cfg"
    IFS=';' read -r -a lines <<<"$settings"
    pg_conf "$w" "# $name" "${lines[@]}"
    pg_stop "$w" fast
    pg_start "$w"
    for s in "${lines[@]}"; do
      local key=${s%% =*} want=${s#*= } got
      got=$(pg_sql "$w" "SHOW $key")
      [ "$got" = "$want" ] || fail "$name: $key is '$got', expected '$want'"
    done
    # Switches make the server create (or recycle) segments under this configuration.
    # The WAL fds' flags are read while pgbench runs (backends hold segments open).
    pg_bench_run "$w" "$name" -n -c 2 -j 2 -T "$seconds" >"$w/run/$name.result" &
    bench_pid=$!
    # shellcheck disable=SC2086
    check_wal_fd_flags "$w" $flags
    wait "$bench_pid" || fail "$name: pgbench failed"
    read -r txns tps <"$w/run/$name.result"
    pg_sql "$w" 'SELECT pg_switch_wal()' >/dev/null
    res=$(pg_bench_run "$w" "$name.2" -n -c 2 -j 2 -t 100)
    read -r rows _ <<<"$res"
    txns=$((txns + rows))
    pg_sql "$w" 'SELECT pg_switch_wal()' >/dev/null
    res=$(pg_bench_run "$w" "$name.3" -n -c 1 -t 100)
    read -r rows _ <<<"$res"
    txns=$((txns + rows))
    total=$((total + txns))
    log "$mode/$name: $txns transactions ($tps tps)"
    echo "TPS mode=$mode config=$name clients=2 seconds=$seconds tps=$tps" >&2
    # An immediate stop leaves the commits only in WAL: recovery reads them back.
    redos=$(grep -c 'redo starts at' "$w/run/pg.log" || true)
    pg_stop "$w" immediate
    pg_start "$w"
    (($(grep -c 'redo starts at' "$w/run/pg.log") == redos + 1)) ||
      fail "$name: no crash recovery (redo) after the immediate stop"
    rows=$(pg_sql "$w" 'SELECT count(*) FROM pgbench_history')
    [ "$rows" = "$total" ] ||
      fail "$name: pgbench_history has $rows rows after crash recovery, $total were committed"
  done

  pg_finish "$w" "$pool"
}

for mode in $WALFS_PG_MODES; do
  run_mode "$mode"
done
log "PASS"
