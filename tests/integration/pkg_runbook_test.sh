#!/usr/bin/env bash
# The full-pool runbook as written (docs/operations.md "When the pool is full", step 2,
# doc-test: full-pool; lib/docs.sh takes it out of the page) on the cluster of the
# documented Debian setup (docs/install.md, doc-test: debian-setup), in pkg_docs_test.sh's sandbox (lib/docs.sh:
# private mount and network namespaces, Debian's paths bound on empty directories, the
# built programs and a systemctl stand-in on PATH):
#   1. the setup block, its mkfs line given --size 128M in place of the docs' size (the
#      one change: 128 MiB of WAL fill the pool in seconds, the docs' 4 GiB would take
#      minutes);
#   2. test settings in the cluster's conf.d: max_wal_size far above the pool (no
#      checkpoint frees WAL), restart_after_crash = off (the cluster stays down after
#      the PANIC, as one whose crash recovery cannot create a segment does), and a
#      second socket directory, where lib/pg.sh's clients connect;
#   3. committed-id loggers (lib/pg.sh: an id is logged once its COMMIT returned) and a
#      filler until the server PANICs at segment creation;
#   4. the runbook block, as written;
#   5. pg_lsclusters lists 15/pmem online, the server log shows crash recovery completed
#      after the PANIC, every commit acknowledged before the PANIC is there, and new
#      commits succeed and survive a restart; once the cluster and walfs@15-pmem are
#      stopped, fsck.walfs finds the pool clean.
# walfs(8)'s full-pool block must give docs/operations.md's commands (comments aside). That the
# grow is refused while the pool is mounted is pg_grow_test.sh's to check. About 35 s.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pg.sh"
source "$(dirname "$0")/lib/docs.sh"

pg_require
[ -x "$FSCK" ] && [ -x "$WALFSCTL" ] || fail "tools not built in $WALFS_BUILD_DIR"
for tool in pg_createcluster pg_ctlcluster pg_lsclusters; do
  command -v $tool >/dev/null || skip "postgresql-common is missing ($tool)"
done
for tool in unshare setpriv ip numfmt; do
  command -v $tool >/dev/null || skip "$tool is missing"
done

reexec_in_debian_sandbox "$@"

SRC=$WALFS_SOURCE_DIR
POOL_SIZE=128M
FILL_TIMEOUT=120
WORK=$(make_workdir)
on_exit "rm -rf '$WORK'"
debian_sandbox "$WORK"
debian_programs "$WORK"

POOL=/var/lib/walfs/15-pmem.pool
MNT=/var/lib/postgresql/15/pmem-wal
DATA=/var/lib/postgresql/15/pmem

# cluster_field N: field N of pg_lsclusters' line for 15/pmem (3 port, 4 status, 7 log).
cluster_field() { pg_lsclusters -h | awk -v n="$1" '$1 == 15 && $2 == "pmem" { print $n }'; }

# --- the runbook, read first: walfs(8) gives the same commands, and the grow is of the
# setup's pool, to a size this machine has room for (walfsctl grow allocates it).
runbook=$(doc_block_readme "$SRC/docs/operations.md" full-pool)
uncommented() { sed -e 's/[[:space:]]*#.*$//' -e 's/[[:space:]]*$//'; }
[ "$(uncommented <<<"$runbook")" = "$(doc_block_man "$SRC/packaging/man/walfs.8" full-pool | uncommented)" ] ||
  fail "walfs(8)'s full-pool block is not docs/operations.md's"
read -r grow_pool grow_size < <(awk '$1 == "walfsctl" && $2 == "grow" { print $3, $4 }' <<<"$runbook") ||
  fail "the runbook has no 'walfsctl grow POOL SIZE' line"
[ "$grow_pool" = "$POOL" ] || fail "the runbook grows '$grow_pool', not the setup's pool $POOL"
grow_bytes=$(numfmt --from=iec "$grow_size") || fail "the runbook's grow size '$grow_size'"
avail=$(df -B1 --output=avail "$WORK" | tail -n 1)
((avail > grow_bytes + (1 << 30))) ||
  skip "the runbook grows the pool to $grow_size; $WORK's file system has $avail bytes free"

# --- 1. the documented setup, with a small pool
setup=$(doc_block_readme "$SRC/docs/install.md" debian-setup)
mkfs_re='^mkfs\.walfs --size [^ ]+ '
[ "$(grep -cE "$mkfs_re" <<<"$setup")" = 1 ] ||
  fail "docs/install.md's debian-setup block has no single 'mkfs.walfs --size SIZE' line: $setup"
setup=$(sed -E "s/^(mkfs\.walfs --size )[^ ]+ /\1$POOL_SIZE /" <<<"$setup")
run_block "install.md debian-setup (pool --size $POOL_SIZE)" "$setup" "$WORK"
[ "$(cluster_field 4)" = online ] || fail "15/pmem is not online after the setup: $(pg_lsclusters)"
[ "$(sed -n 's/^POOL=//p' /etc/walfs/15-pmem.conf)" = "$POOL" ] || fail "the setup's pool is not $POOL"
[ "$(findmnt -n -o SOURCE --mountpoint "$MNT")" = "$POOL" ] || fail "$POOL is not mounted at $MNT"
[ "$(readlink "$DATA/pg_wal")" = "$MNT/pg_wal" ] || fail "$DATA/pg_wal is $(ls -ld "$DATA/pg_wal")"
PG_LOG=$(cluster_field 7)
PGPORT=$(cluster_field 3)
export PGPORT

# W as lib/pg.sh lays it out, for its clients (W/run: the socket, client logs, ids) and
# its failure report (W/run/pg.log, W/wal/pg_wal); W/data for pg_postmaster_pid.
W=$WORK/pg
install -d -o postgres -g postgres "$W/run"
ln -s "$PG_LOG" "$W/run/pg.log"
ln -s "$MNT" "$W/wal"
ln -s "$DATA" "$W/data"
_PG_CLUSTERS+=("$W")
_PG_DAEMON_LOGS+=("$STATE/walfs@15-pmem.log")

# --- 2. settings for the fill
cat >/etc/postgresql/15/pmem/conf.d/runbook-test.conf <<EOF
max_wal_size = 4GB
min_wal_size = 32MB
checkpoint_timeout = 1h
restart_after_crash = off
unix_socket_directories = '/var/run/postgresql,$W/run'
EOF
pg_ctlcluster 15 pmem restart
[ "$(pg_sql "$W" 'SHOW restart_after_crash')" = off ] || fail "conf.d/runbook-test.conf was not read"
pg_sql "$W" 'CREATE TABLE committed (id bigint PRIMARY KEY);
             CREATE TABLE filler (id int, pad text)'

# --- 3. fill the pool until the PANIC
log "filling the $POOL_SIZE pool with WAL"
pg_fill_until_panic "$W" "$FILL_TIMEOUT" "$PG_LOG"
[ "$(cluster_field 4)" = down ] || fail "15/pmem is not down after the PANIC: $(pg_lsclusters)"
log "full: $(grep -c 'No space left on device' "$PG_LOG") ENOSPC line(s) in the server log," \
  "$(pg_segments "$W" | wc -l) segments"

# --- 4. the runbook
calls_before=$(wc -l <"$STATE/calls")
run_block "operations.md full-pool" "$runbook" "$WORK"

# --- 5. the cluster runs again, with every acknowledged commit
[ "$(tail -n +$((calls_before + 1)) "$STATE/calls" | tr '\n' ' ')" = \
  "stop postgresql@15-pmem stop walfs@15-pmem start walfs@15-pmem " ] ||
  fail "the runbook's systemctl calls: $(tail -n +$((calls_before + 1)) "$STATE/calls")"
grep -q '^walfsctl: .* grown from ' "$WORK/operations.md full-pool.log" || fail "walfsctl grow printed no 'grown from'"
log "$(grep '^walfsctl: .* grown from ' "$WORK/operations.md full-pool.log")"
[ "$(stat -c %s "$POOL")" = "$grow_bytes" ] ||
  fail "the pool is $(stat -c %s "$POOL") bytes after 'walfsctl grow $POOL $grow_size'"
[ "$(cluster_field 4)" = online ] || fail "15/pmem is not online after the runbook: $(pg_lsclusters)"
sed -n '/PANIC:  could not create file "pg_wal\/xlogtemp/,$p' "$PG_LOG" | grep -q 'redo done' ||
  fail "no crash recovery completed after the PANIC"
pg_verify_committed "$W"
pg_load_start "$W" 2
sleep 3
pg_sql "$W" 'CHECKPOINT'
pg_ctlcluster -m fast 15 pmem stop
pg_load_wait
(($(cat "$W"/run/ids.2.* 2>/dev/null | wc -l) > 0)) || fail "no commit succeeded after the runbook"
pg_ctlcluster 15 pmem start
pg_verify_committed "$W"

pg_ctlcluster 15 pmem stop
systemctl stop walfs@15-pmem
! mountpoint -q "$MNT" || fail "$MNT is still mounted after systemctl stop walfs@15-pmem"
pg_fsck "$POOL"
log "PASS"
