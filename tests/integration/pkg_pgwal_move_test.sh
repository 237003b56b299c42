#!/bin/bash
# packaging/postgresql/move-pg_wal-to-walfs.sh on a real cluster: initdb on a plain
# directory, data written, the mover refuses a running cluster, a crashed one, an
# existing pool and a non-empty mount point; after a clean stop it moves pg_wal onto a new walfs pool
# sized from the cluster's max_wal_size (SIZE auto);
# the cluster starts with its data, writes new WAL onto walfs, survives an unmount and
# remount of the pool (its WAL read back from walfs), and the mover refuses to run twice.
source "$(dirname "$0")/lib/common.sh"

require_fuse
require_postgres
[ -x "$MKFS" ] || fail "mkfs.walfs not built: $MKFS"
MOVER=$WALFS_SOURCE_DIR/packaging/postgresql/move-pg_wal-to-walfs.sh

WORK=$(make_workdir)
# make_workdir runs in the $(...) subshell, where its own cleanup entry is lost.
on_exit "rm -rf '$WORK'"
BIN=$WORK/bin
mkdir -p "$BIN"
ln -s "$WALFS" "$BIN/walfs"
ln -s "$MKFS" "$BIN/mkfs.walfs"
ln -s "$WALFSCTL" "$BIN/walfsctl"
export PATH=$BIN:$PATH

PGDATA=$WORK/data
POOL=$WORK/wal.pool
MNT=$WORK/walmnt
PORT=$(free_port)
SOCK=$WORK/run # the server's socket and log
install -d -o postgres -g postgres -m 0700 "$PGDATA"
install -d -o postgres -g postgres -m 0755 "$SOCK"

pg() { as_postgres "$PG_BIN/pg_ctl" -D "$PGDATA" -w -t 60 -l "$SOCK/pg.log" "$@" >/dev/null; }
sql() { as_postgres "$PG_BIN/psql" -h "$SOCK" -p "$PORT" -d postgres -X -A -t -q -v ON_ERROR_STOP=1 -c "$1"; }
start_pg() { pg -o "-p $PORT -k $SOCK -c listen_addresses=''" start || { cat "$SOCK/pg.log" >&2; fail "cluster did not start"; }; }
# The daemon the mover starts detaches; unmounting makes it exit.
on_exit "fusermount3 -u -z '$MNT'"
on_exit "as_postgres '$PG_BIN/pg_ctl' -D '$PGDATA' -m immediate stop"

log "initdb on a plain directory"
as_postgres "$PG_BIN/initdb" -D "$PGDATA" -A trust --no-sync >/dev/null
cat >>"$PGDATA/postgresql.conf" <<EOF
max_wal_size = 64MB
min_wal_size = 32MB
EOF
start_pg
sql "CREATE TABLE t (id int PRIMARY KEY, v text)"
sql "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 5000) g"
sql "SELECT pg_switch_wal()" >/dev/null
sql "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(5001, 6000) g"
before=$(sql "SELECT count(*), sum(id), max(v) FROM t")

mover() { "$MOVER" "$PGDATA" "$POOL" "$MNT" "${MOVER_SIZE:-256M}"; }
refused() {
  local what=$1 expect=$2 out
  if out=$(mover 2>&1); then fail "the mover ran with $what"; fi
  [[ $out == *"$expect"* ]] || fail "refusal of $what says: $out"
  [ -d "$PGDATA/pg_wal" ] && [ ! -L "$PGDATA/pg_wal" ] || fail "pg_wal changed by a refused run ($what)"
  ! mountpoint -q "$MNT" 2>/dev/null || fail "left a mount after refusing $what"
  log "refused $what"
}

refused "the cluster running" "is running"
[ ! -e "$POOL" ] || fail "a refused run created the pool"
pg -m immediate stop
refused "a cluster that crashed" "not shut down cleanly"
start_pg
pg -m fast stop

touch "$POOL"
refused "an existing pool" "refusing to overwrite"
rm -f "$POOL"
mkdir -p "$MNT"
touch "$MNT/stray"
refused "a non-empty mount point" "not empty"
rm -rf "$MNT"

log "moving pg_wal"
segments=$(cd "$PGDATA/pg_wal" && ls | grep -Ec '^[0-9A-F]{24}$')
# SIZE auto: the pool is sized from the cluster's settings (max_wal_size 64MB, wal_keep_size
# 0, 16 MiB segments: 64 MiB + 5 segments of data area, docs/operations.md "Sizing a pool").
MOVER_SIZE=auto mover 2>"$WORK/mover.log" || { cat "$WORK/mover.log" >&2; fail "the mover failed"; }
grep -q "sized for max_wal_size 64MB, wal_keep_size 0MB" "$WORK/mover.log" ||
  { cat "$WORK/mover.log" >&2; fail "the mover did not size the pool from the cluster"; }
pool_mib=$(($(stat -c %s "$POOL") >> 20))
((pool_mib >= 144 && pool_mib < 160)) || fail "an auto-sized pool of $pool_mib MiB for 144 MiB of WAL"
grep -q "fits *max_wal_size = 64MB" "$WORK/mover.log" ||
  { cat "$WORK/mover.log" >&2; fail "mkfs.walfs does not say the pool fits max_wal_size 64MB"; }
# The pool is an ordinary file (msync mode): the mover says direct access does not apply.
grep -q "msync mode (not on PMEM): direct access (libwalfs-direct.so) does not apply" \
  "$WORK/mover.log" || { cat "$WORK/mover.log" >&2; fail "the mover did not report the mode"; }
[ "$(readlink "$PGDATA/pg_wal")" = "$MNT/pg_wal" ] ||
  fail "pg_wal is not a symlink to $MNT/pg_wal: $(ls -ld "$PGDATA/pg_wal")"
[ "$(stat -c %U "$PGDATA/pg_wal")" = postgres ] || fail "pg_wal symlink not owned by postgres"
[ -d "$PGDATA/pg_wal.pre-walfs" ] || fail "the old pg_wal was not kept"
[ "$(findmnt -n -o FSTYPE --mountpoint "$MNT")" = fuse.walfs ] || fail "$MNT is not a walfs mount"
[ "$(stat -c '%U %a' "$POOL")" = "postgres 600" ] || fail "pool is $(stat -c '%U %a' "$POOL")"
[ "$(stat -c '%U %a' "$MNT/pg_wal")" = "postgres 700" ] || fail "pg_wal on walfs is $(stat -c '%U %a' "$MNT/pg_wal")"
[ "$(cd "$MNT/pg_wal" && ls | grep -Ec '^[0-9A-F]{24}$')" = "$segments" ] ||
  fail "segment count differs after the move"
[ -d "$MNT/pg_wal/archive_status" ] || fail "archive_status not copied"
grep -q "fstab" "$WORK/mover.log" || fail "the mover did not print how to make the mount permanent"
# An initdb cluster is no Debian cluster: no postgresql@ unit is named (pkg_docs_test.sh
# moves a pg_createcluster cluster and checks the lines printed for it).
grep -q "$PGDATA is not a Debian cluster (pg_lsclusters does not list it)" "$WORK/mover.log" ||
  { cat "$WORK/mover.log" >&2; fail "the mover took an initdb cluster for a Debian one"; }
! grep -q "postgresql@[0-9]" "$WORK/mover.log" || { cat "$WORK/mover.log" >&2; fail "the mover named a postgresql@ unit for an initdb cluster"; }

log "starting the cluster on walfs"
touch "$WORK/moved"
sleep 1 # mtimes after this are later than the marker's
start_pg
[ "$(sql "SELECT count(*), sum(id), max(v) FROM t")" = "$before" ] || fail "data differs after the move"
sql "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(6001, 9000) g"
new_seg=$(sql "SELECT pg_walfile_name(pg_current_wal_lsn())")
sql "SELECT pg_switch_wal()" >/dev/null
sql "INSERT INTO t VALUES (9001, 'after switch')"
[ -f "$MNT/pg_wal/$new_seg" ] || fail "new WAL segment $new_seg is not on walfs"
[ "$MNT/pg_wal/$new_seg" -nt "$WORK/moved" ] || fail "the current WAL segment on walfs was not written"
touched=$(find "$PGDATA/pg_wal.pre-walfs" -newer "$WORK/moved")
[ -z "$touched" ] || fail "WAL written to the old directory: $touched"
after=$(sql "SELECT count(*), sum(id) FROM t")
pg -m immediate stop # a crash: recovery must replay WAL from walfs

log "unmount, remount, crash recovery from walfs"
fusermount3 -u "$MNT"
! mountpoint -q "$MNT" || fail "could not unmount"
# With the mount gone, pg_wal dangles: PostgreSQL must not start on an empty directory.
if pg -o "-p $PORT -k $SOCK -c listen_addresses=''" start 2>/dev/null; then
  fail "the cluster started without its WAL mount"
fi
walfs "$POOL" "$MNT" -o allow_other,default_permissions || fail "remount failed"
start_pg
[ "$(sql "SELECT count(*), sum(id) FROM t")" = "$after" ] || fail "data lost across crash and remount"
pg -m fast stop

fusermount3 -u "$MNT"
if out=$(mover 2>&1); then fail "the mover ran twice"; fi
[[ $out == *"already a symlink"* ]] || fail "second run says: $out"
[ "$(readlink "$PGDATA/pg_wal")" = "$MNT/pg_wal" ] || fail "a refused second run changed pg_wal"
! mountpoint -q "$MNT" || fail "a refused second run mounted something"
log "refused a second run"
log "PASS"
