#!/usr/bin/env bash
# Backup and point-in-time recovery as documented (docs/operations.md, "Backup and
# point-in-time recovery"; lib/docs.sh takes the blocks out of the page), on the cluster
# of the documented Debian setup (docs/install.md, doc-test: debian-setup, its pool made
# with a --size of 256M):
#   1. doc-test: archive: archiving into /var/backups/wal-archive, the cluster restarted;
#   2. doc-test: base-backup: pg_basebackup in tar format of 15/pmem;
#   3. rows committed after the backup, their segment switched and archived;
#   4. doc-test: pitr (its pool made with a --size of 256M): a new cluster 15/restore with
#      its WAL on a pool of its own, the base backup put in its place, restore_command
#      from the archive, started.
# Then 15/restore is promoted (not in recovery) and holds every row committed before
# the last archived segment, its pg_wal is a symlink into its walfs mount, it restored
# segments from the archive into that mount, and its new timeline's history file is
# there; both pools are clean once the clusters and mounts stop.
#
# Runs in pkg_docs_test.sh's sandbox (lib/docs.sh: private namespaces, empty directories
# bound over Debian's paths and over /var/backups, a systemctl stand-in).
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/docs.sh"

require_fuse
require_postgres
[ -x "$MKFS" ] && [ -x "$FSCK" ] && [ -x "$WALFSCTL" ] || fail "tools not built in $WALFS_BUILD_DIR"
for tool in pg_createcluster pg_ctlcluster pg_lsclusters pg_basebackup; do
  command -v $tool >/dev/null || skip "postgresql-common is missing ($tool)"
done
for tool in unshare setpriv ip tar; do
  command -v $tool >/dev/null || skip "$tool is missing"
done

reexec_in_debian_sandbox "$@"

SRC=$WALFS_SOURCE_DIR
POOL_SIZE=256M
WORK=$(make_workdir)
on_exit "rm -rf '$WORK'"
debian_sandbox "$WORK"
debian_programs "$WORK"
[ -d /var/backups ] || install -d -m 0755 /var/backups
backups=$(mktemp -d "$WORK/backups.XXXXXX")
chmod 0755 "$backups"
mount --bind "$backups" /var/backups

RESTORE_MNT=/var/lib/postgresql/15/restore-wal

# cluster_field CLUSTER N: field N of pg_lsclusters' line for 15/CLUSTER (3 port, 4 status).
cluster_field() { pg_lsclusters -h | awk -v c="$1" -v n="$2" '$1 == 15 && $2 == c { print $n }'; }
# sql CLUSTER QUERY
sql() {
  as_postgres psql -X -q -A -t -v ON_ERROR_STOP=1 -h /run/postgresql -p "$(cluster_field "$1" 3)" \
    -d postgres -c "$2"
}
# with_pool_size BLOCK: the block with its one 'mkfs.walfs --size SIZE' line made small.
with_pool_size() {
  local mkfs_re='^mkfs\.walfs --size [^ ]+ '
  [ "$(grep -cE "$mkfs_re" <<<"$1")" = 1 ] || fail "no single 'mkfs.walfs --size SIZE' line in: $1"
  sed -E "s/^(mkfs\.walfs --size )[^ ]+ /\1$POOL_SIZE /" <<<"$1"
}

# --- the documented cluster
run_block "install.md debian-setup (pool --size $POOL_SIZE)" \
  "$(with_pool_size "$(doc_block_readme "$SRC/docs/install.md" debian-setup)")" "$WORK"
[ "$(cluster_field pmem 4)" = online ] || fail "15/pmem is not online after the setup: $(pg_lsclusters)"

# --- 1. archiving
run_block "operations.md archive" "$(doc_block_readme "$SRC/docs/operations.md" archive)" "$WORK"
[ "$(sql pmem 'SHOW archive_mode')" = on ] || fail "archive_mode is not on after the archive block"

# --- 2. a base backup, with rows before it
sql pmem 'CREATE TABLE pitr (id int PRIMARY KEY, v text)'
sql pmem "INSERT INTO pitr SELECT g, md5(g::text) FROM generate_series(1, 5000) g"
run_block "operations.md base-backup" "$(doc_block_readme "$SRC/docs/operations.md" base-backup)" "$WORK"
[ -s /var/backups/base/1/base.tar ] && [ -s /var/backups/base/1/pg_wal.tar ] ||
  fail "the base backup wrote no base.tar and pg_wal.tar: $(ls -la /var/backups/base/1 2>&1)"

# --- 3. rows after it, archived
sql pmem "INSERT INTO pitr SELECT g, md5(g::text) FROM generate_series(5001, 10000) g"
seg=$(sql pmem "SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
sql pmem 'SELECT pg_switch_wal()' >/dev/null
for ((i = 0; i < 600; i++)); do
  [ -f "/var/backups/wal-archive/$seg" ] && break
  sleep 0.1
done
[ -f "/var/backups/wal-archive/$seg" ] ||
  fail "segment $seg was not archived: $(sql pmem 'SELECT * FROM pg_stat_archiver')"
cmp "/var/backups/wal-archive/$seg" "/var/lib/postgresql/15/pmem-wal/pg_wal/$seg" ||
  fail "archived $seg differs from the one on walfs"
log "rows 1..10000 committed, 5001..10000 after the base backup; $seg archived"

# --- 4. the restore
run_block "operations.md pitr (pool --size $POOL_SIZE)" \
  "$(with_pool_size "$(doc_block_readme "$SRC/docs/operations.md" pitr)")" "$WORK"
for ((i = 0; i < 600; i++)); do
  [ "$(sql restore 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && break
  sleep 0.1
done
[ "$(sql restore 'SELECT pg_is_in_recovery()')" = f ] ||
  fail "15/restore was not promoted: $(tail -n 20 /var/log/postgresql/postgresql-15-restore.log)"
[ "$(sql restore 'SELECT count(*), sum(id) FROM pitr')" = "10000|50005000" ] ||
  fail "15/restore holds $(sql restore 'SELECT count(*), sum(id) FROM pitr'), want 10000|50005000"
[ "$(readlink /var/lib/postgresql/15/restore/pg_wal)" = "$RESTORE_MNT/pg_wal" ] ||
  fail "15/restore's pg_wal is $(ls -ld /var/lib/postgresql/15/restore/pg_wal)"
[ "$(findmnt -n -o FSTYPE --mountpoint "$RESTORE_MNT")" = fuse.walfs ] || fail "$RESTORE_MNT is not a walfs mount"
grep -q 'restored log file' /var/log/postgresql/postgresql-15-restore.log ||
  fail "15/restore restored nothing from the archive"
tli=$(sql restore 'SELECT timeline_id FROM pg_control_checkpoint()')
((tli >= 2)) || fail "15/restore is on timeline $tli after its promotion"
history=$(printf '%08X.history' "$tli")
[ -f "$RESTORE_MNT/pg_wal/$history" ] || fail "no $history on the restore's walfs mount"
sql restore "INSERT INTO pitr VALUES (10001, 'after the restore')"
log "15/restore promoted with rows 1..10000, WAL restored into $RESTORE_MNT, accepts commits"

# --- both pools clean
pg_ctlcluster 15 restore stop
pg_ctlcluster 15 pmem stop
systemctl stop walfs@15-restore
systemctl stop walfs@15-pmem
! mountpoint -q "$RESTORE_MNT" || fail "$RESTORE_MNT still mounted"
"$FSCK" /var/lib/walfs/15-restore.pool >/dev/null || fail "fsck.walfs: the restore's pool is not clean"
"$FSCK" /var/lib/walfs/15-pmem.pool >/dev/null || fail "fsck.walfs: the setup's pool is not clean"
log "PASS"
