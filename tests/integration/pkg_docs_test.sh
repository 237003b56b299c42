#!/usr/bin/env bash
# The documented Debian setup, run as written (tests/integration/lib/docs.sh takes the
# commands out of the docs, so they cannot go stale):
#   0. every code block of README.md and docs/ is run by a test or marked illustrative
#      (lib/docs.sh, check_doc_blocks);
#   1. docs/install.md "A new Debian cluster with its WAL on walfs" (doc-test:
#      debian-setup): a pool
#      made with --owner, an empty mount point, /etc/walfs/15-pmem.conf,
#      user_allow_other, walfs@15-pmem (the daemon as postgres), pg_createcluster with
#      --waldir on the mount, the postgresql@ drop-in, pg_ctlcluster start;
#   2. walfs(8) POSTGRESQL (doc-test: pg-setup): the same with walfs run by root;
#   3. walfsctl(8)'s status example on the cluster's pg_wal symlink;
#   4. the pg_wal mover on a Debian cluster (pg_createcluster, WAL on local disk):
#      it names the cluster's units in the lines it prints, and its fstab line passes
#      systemd-fstab-generator's check (lib/docs.sh, check_fstab_line).
# After 1 and 2: pg_lsclusters lists 15/pmem online, its pg_wal is a symlink into the
# walfs mount, commits land in WAL segments on walfs, fsck.walfs is clean after the
# cluster is dropped.
#
# Everything runs in private mount and network namespaces, over empty directories
# bound on Debian's paths (/etc/postgresql, /var/lib/postgresql, /var/log/postgresql,
# /run/postgresql, /var/lib/walfs, /etc/walfs, /etc/systemd/system, /etc/fuse.conf),
# so the machine's clusters, ports and settings are neither seen nor touched. The
# built programs stand in for the package's (a bind over /usr/local/sbin, first on
# PATH; /usr/share/walfs/ in a command is read as the source tree's packaging/), and
# `systemctl` is a stand-in (lib/docs.sh, debian_programs).
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/docs.sh"

# 0. Before anything that may skip: the docs' code blocks are each run or marked.
if [ -z "${WALFS_IN_DEBIAN_NS:-}" ]; then
  check_doc_blocks "$WALFS_SOURCE_DIR"
fi

require_fuse
require_postgres
[ -x "$MKFS" ] && [ -x "$FSCK" ] && [ -x "$WALFSCTL" ] || fail "tools not built in $WALFS_BUILD_DIR"
for tool in pg_createcluster pg_ctlcluster pg_lsclusters pg_dropcluster; do
  command -v $tool >/dev/null || skip "postgresql-common is missing ($tool)"
done
for tool in unshare setpriv ip; do
  command -v $tool >/dev/null || skip "$tool is missing"
done

reexec_in_debian_sandbox "$@"

SRC=$WALFS_SOURCE_DIR
PKG=$SRC/packaging
WORK=$(make_workdir)
on_exit "rm -rf '$WORK'"

debian_sandbox "$WORK"

debian_programs "$WORK"

POOL=/var/lib/walfs/15-pmem.pool
MNT=/var/lib/postgresql/15/pmem-wal
DATA=/var/lib/postgresql/15/pmem

# check_cluster DAEMON_USER: the cluster of the docs runs with its WAL on walfs.
check_cluster() {
  local user=$1 line port seg
  line=$(pg_lsclusters -h | awk '$1 == 15 && $2 == "pmem"')
  [ -n "$line" ] || fail "pg_lsclusters does not list 15/pmem: $(pg_lsclusters)"
  [ "$(awk '{print $4}' <<<"$line")" = online ] || fail "15/pmem is not online: $line"
  [ "$(awk '{print $6}' <<<"$line")" = "$DATA" ] || fail "15/pmem data directory: $line"
  port=$(awk '{print $3}' <<<"$line")
  [ "$(readlink "$DATA/pg_wal")" = "$MNT/pg_wal" ] || fail "$DATA/pg_wal is $(ls -ld "$DATA/pg_wal")"
  [ "$(findmnt -n -o FSTYPE --mountpoint "$MNT")" = fuse.walfs ] || fail "$MNT is not a walfs mount"
  [ "$(findmnt -n -o SOURCE --mountpoint "$MNT")" = "$POOL" ] || fail "$MNT is not $POOL"
  [ "$(stat -c '%U %a' "$POOL")" = "postgres 600" ] || fail "pool is $(stat -c '%U %a' "$POOL")"
  [ "$(stat -c %U "$MNT")" = postgres ] || fail "the mount root belongs to $(stat -c %U "$MNT")"
  [ "$(ps -o user= -p "$(walfs_status_field "$MNT" pid)")" = "$user" ] ||
    fail "the daemon does not run as $user"
  psql_() { as_postgres psql -X -q -A -t -v ON_ERROR_STOP=1 -h /run/postgresql -p "$port" -d postgres -c "$1"; }
  psql_ "CREATE TABLE doc (id int PRIMARY KEY, v text)"
  psql_ "INSERT INTO doc SELECT g, md5(g::text) FROM generate_series(1, 20000) g"
  seg=$(psql_ "SELECT pg_walfile_name(pg_current_wal_lsn())")
  psql_ "SELECT pg_switch_wal()" >/dev/null
  [ "$(stat -c %s "$MNT/pg_wal/$seg")" = $((16 << 20)) ] || fail "WAL segment $seg is not on walfs"
  [ "$(walfs_status_field "$MNT" writes)" -gt 0 ] || fail "the daemon served no writes"
  # The cluster restarts with its data (crash recovery reads the WAL from walfs).
  pg_ctlcluster -m immediate 15 pmem stop
  pg_ctlcluster 15 pmem start
  [ "$(psql_ "SELECT count(*) FROM doc")" = 20000 ] || fail "rows lost across a crash of 15/pmem"
}

# teardown: what an administrator would do to remove it all again.
teardown() {
  pg_ctlcluster 15 pmem stop
  pg_dropcluster 15 pmem
  [ ! -e "$MNT/pg_wal" ] || fail "pg_dropcluster left $MNT/pg_wal"
  if [ -f "$STATE/walfs@15-pmem.pid" ]; then
    systemctl stop walfs@15-pmem
  else
    local pid
    pid=$(walfs_status_field "$MNT" pid)
    umount "$MNT"
    for ((i = 0; i < 400; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  fi
  ! mountpoint -q "$MNT" || fail "$MNT still mounted"
  "$FSCK" "$POOL" >/dev/null || fail "fsck.walfs: the pool is not clean after the cluster was dropped"
  rm -rf "$POOL" "$MNT" /etc/walfs/15-pmem.conf /etc/systemd/system/postgresql@15-pmem.service.d
}

# --- 1. docs/install.md
run_block "install.md debian-setup" "$(doc_block_readme "$SRC/docs/install.md" debian-setup)" "$WORK"
grep -q "^15  *pmem .* online " "$WORK/install.md debian-setup.log" ||
  fail "docs/install.md's pg_lsclusters line did not show 15/pmem online"
grep -qx "enable --now walfs@15-pmem" "$STATE/calls" || fail "docs/install.md did not start walfs@15-pmem"
grep -qx user_allow_other /etc/fuse.conf || fail "docs/install.md did not add user_allow_other"
check_cluster postgres
# The drop-in binds the cluster to walfs@: without it the cluster does not start.
pg_ctlcluster 15 pmem stop
systemctl stop walfs@15-pmem
if systemctl start postgresql@15-pmem 2>"$WORK/dep.err"; then fail "the cluster started without walfs@15-pmem"; fi
grep -q "dependency walfs@15-pmem.service is not active" "$WORK/dep.err" || fail "$(cat "$WORK/dep.err")"
systemctl start walfs@15-pmem
systemctl start postgresql@15-pmem

# --- 3. walfsctl(8)'s example, on the cluster's pg_wal
example=$(grep '^walfsctl status ' "$PKG/man/walfsctl.8" | sed 's/\\-/-/g')
[ -n "$example" ] || fail "walfsctl(8) has no status example"
out=$(bash -c "$example") || fail "walfsctl(8)'s example failed: $example"
case $example in
  *--latency*) want='^open  *[1-9][0-9]*  ' ;;  # the table: this mount served opens
  *--prometheus*) want='^walfs_build_info{' ;;
  *) want='^  health: *ok$' ;;
esac
grep -q "$want" <<<"$out" || fail "walfsctl(8)'s example printed: $out"
log "walfsctl(8) example ok: $example"
teardown

# --- 2. walfs(8)
run_block "walfs(8) pg-setup" "$(doc_block_man "$PKG/man/walfs.8" pg-setup)" "$WORK"
grep -q "^15  *pmem .* online " "$WORK/walfs(8) pg-setup.log" ||
  fail "walfs(8)'s pg_lsclusters line did not show 15/pmem online"
walfs_status_field "$MNT" pid >"$STATE/walfs-by-hand.pid"
check_cluster root
teardown

# --- 4. the mover on a Debian cluster
log "move-pg_wal-to-walfs.sh on the Debian cluster 15/moved"
pg_createcluster 15 moved >"$WORK/moved.log" 2>&1 || { cat "$WORK/moved.log" >&2; fail "pg_createcluster 15 moved"; }
pg_ctlcluster 15 moved start
pg_ctlcluster 15 moved stop
"$PKG/postgresql/move-pg_wal-to-walfs.sh" /var/lib/postgresql/15/moved /var/lib/walfs/15-moved.pool \
  /var/lib/postgresql/15/moved-wal 256M 2>"$WORK/mover.log" ||
  { cat "$WORK/mover.log" >&2; fail "the mover failed on 15/moved"; }
walfs_status_field /var/lib/postgresql/15/moved-wal pid >"$STATE/walfs-mover.pid"
grep -q "this is the Debian cluster 15/moved" "$WORK/mover.log" || { cat "$WORK/mover.log" >&2; fail "the mover did not find the cluster's name"; }
grep -q "systemctl enable --now walfs@15-moved" "$WORK/mover.log" || { cat "$WORK/mover.log" >&2; fail "the mover did not name walfs@15-moved"; }
! grep -q "NAME" "$WORK/mover.log" || { cat "$WORK/mover.log" >&2; fail "the mover left a NAME placeholder"; }
fstab_line=$(grep -E '^ +/var/lib/walfs/15-moved.pool ' "$WORK/mover.log" | sed 's/^ *//')
[ -n "$fstab_line" ] || { cat "$WORK/mover.log" >&2; fail "the mover printed no fstab line"; }
check_fstab_line "$fstab_line" postgresql@15-moved.service "$WORK" >/dev/null
pg_ctlcluster 15 moved start
[ "$(readlink /var/lib/postgresql/15/moved/pg_wal)" = /var/lib/postgresql/15/moved-wal/pg_wal ] ||
  fail "15/moved's pg_wal is not on walfs"
pg_ctlcluster 15 moved stop
pid=$(cat "$STATE/walfs-mover.pid")
umount /var/lib/postgresql/15/moved-wal
for ((i = 0; i < 400; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
"$FSCK" /var/lib/walfs/15-moved.pool >/dev/null || fail "fsck.walfs after the mover's cluster stopped"

log "PASS"
