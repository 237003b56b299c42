#!/usr/bin/env bash
# Direct access the Debian way: a cluster made by pg_createcluster with its WAL on a
# pmem-mode walfs mount, started by pg_ctlcluster (what postgresql@.service runs). The
# docs/direct-access.md's and walfs(8)'s one line in /etc/postgresql/15/NAME/environment turns direct
# access on (leases granted, commits reach the daemon as no FUSE WRITE); removing it and
# restarting turns it off (commits are FUSE WRITEs again, no new lease). The cluster is
# dropped and the pool checked at the end.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"

require_fuse
require_postgres
command -v pg_createcluster >/dev/null || skip "postgresql-common is missing (pg_createcluster)"
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
[ -f "$LIB" ] || fail "direct-access library not built: $LIB"
reexec_in_mount_namespace "$@"

W=$(make_workdir)
mkdir -p "$W/run"
chown postgres: "$W/run"
NAME=walfsdirect$$
PORT=$(free_port)
CONF=/etc/postgresql/15/$NAME
POOL=$(pg_pool_path "$W" pmem 256)
on_exit "rm -f '$POOL'"
make_pool "$POOL" 256M --owner postgres:postgres
pg_mount "$POOL" "$W/wal" pmem

pg_createcluster 15 "$NAME" -p "$PORT" -- --waldir="$W/wal/pg_wal" >"$W/run/create.log" 2>&1 ||
  { cat "$W/run/create.log" >&2; fail "pg_createcluster 15 $NAME -- --waldir=... failed"; }
on_exit "pg_dropcluster --stop 15 '$NAME'"
pg_lsclusters | grep -q "^15 *$NAME " || fail "pg_lsclusters does not list 15/$NAME"
[ "$(readlink "/var/lib/postgresql/15/$NAME/pg_wal")" = "$W/wal/pg_wal" ] ||
  fail "pg_wal of 15/$NAME is not on the mount"
printf "listen_addresses = ''\nunix_socket_directories = '%s'\n" "$W/run" >>"$CONF/postgresql.conf"

sql() {
  as_postgres "$PG_BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$W/run" -p "$PORT" \
    -d postgres -c "$1"
}
# commits N: N autocommit INSERTs; prints the FUSE WRITEs they made.
commits() {
  local n=$1 i w0 w1 f=$W/run/commits.sql
  for ((i = 0; i < n; i++)); do echo "INSERT INTO t VALUES ($i);"; done >"$f"
  chmod 0644 "$f"
  w0=$(pg_walfs_counter "$W/wal" writes)
  as_postgres "$PG_BIN/psql" -X -q -h "$W/run" -p "$PORT" -d postgres -f "$f" >/dev/null ||
    fail "INSERTs failed"
  w1=$(pg_walfs_counter "$W/wal" writes)
  echo $((w1 - w0))
}

log "on: LD_PRELOAD in $CONF/environment"
echo "LD_PRELOAD = '$LIB'" >>"$CONF/environment"
pg_ctlcluster 15 "$NAME" start || fail "pg_ctlcluster 15 $NAME start failed"
pm=$(head -n 1 "/var/lib/postgresql/15/$NAME/postmaster.pid")
tr '\0' '\n' <"/proc/$pm/environ" | grep -qx "LD_PRELOAD=$LIB" ||
  fail "the postmaster was not started with the environment file's LD_PRELOAD"
sql 'CREATE TABLE t (i int)'
fuse=$(commits 300)
granted=$(pg_walfs_counter "$W/wal" leases_granted)
log "300 commits: $fuse FUSE writes, $granted leases granted"
((granted > 0)) || fail "no lease granted with the library in the environment file"
((fuse * 5 < 300)) || fail "300 commits made $fuse FUSE writes with direct access on"

log "off: the line removed, the cluster restarted"
sed -i '/^LD_PRELOAD = /d' "$CONF/environment"
pg_ctlcluster 15 "$NAME" restart || fail "pg_ctlcluster 15 $NAME restart failed"
granted=$(pg_walfs_counter "$W/wal" leases_granted)
fuse=$(commits 300)
log "300 commits: $fuse FUSE writes"
((fuse >= 300)) || fail "300 commits made only $fuse FUSE writes with direct access off"
[ "$(pg_walfs_counter "$W/wal" leases_granted)" = "$granted" ] || fail "a lease was granted with direct access off"
[ "$(sql 'SELECT count(*) FROM t')" = 600 ] || fail "rows lost"

pg_ctlcluster 15 "$NAME" stop || fail "pg_ctlcluster 15 $NAME stop failed"
pg_umount "$W/wal"
pg_fsck "$POOL"
log "pkg_direct_env: all checks passed"
