#!/usr/bin/env bash
# tools/quickstart.sh makes a real Debian cluster and undoes exactly that:
#   start   the cluster 15/quickstart is listed by pg_lsclusters and online, its data in
#           /var/lib/postgresql/15/quickstart, its pg_wal a symlink into the walfs mount
#           /var/lib/postgresql/15/quickstart-wal, the pool 0600 and postgres's;
#           pgbench ran; the cluster's max_wal_size is what the 256M pool fits;
#           a second start is refused;
#   --stop  the cluster is down (still listed), nothing is mounted, the files are kept;
#   again   resumes: the same cluster starts with its pgbench tables;
#   --purge pg_lsclusters lists nothing, and the pool, the mount point, the cluster's
#           directories, settings and log, and the directory --dir named (which the
#           quick start made) are gone; nothing else in the sandbox was left behind.
# It runs with --no-deps --no-build on the built programs, in the private namespaces of
# lib/docs.sh (debian_sandbox), so the machine's clusters are not touched.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/docs.sh"

require_fuse
require_postgres
[ -x "$MKFS" ] && [ -x "$WALFSCTL" ] || fail "tools not built in $WALFS_BUILD_DIR"
for tool in pg_createcluster pg_ctlcluster pg_lsclusters pg_dropcluster unshare ip; do
  command -v $tool >/dev/null || skip "$tool is missing"
done
reexec_in_debian_sandbox "$@"

WORK=$(make_workdir)
on_exit "rm -rf '$WORK'"
debian_sandbox "$WORK"
QS=$WALFS_SOURCE_DIR/tools/quickstart.sh
DIR=$WORK/qs-dir # absent: the quick start makes it, and --purge removes it
quickstart() { "$QS" --no-deps --no-build --build-dir "$WALFS_BUILD_DIR" --dir "$DIR" --size 256M "$@"; }
on_exit "pg_ctlcluster -m immediate 15 quickstart stop; fusermount3 -u -z /var/lib/postgresql/15/quickstart-wal; kill_if_walfs \$(cat '$DIR/quickstart/quickstart/walfs.pid' 2>/dev/null)"

MNT=/var/lib/postgresql/15/quickstart-wal
DATA=/var/lib/postgresql/15/quickstart
status_of() { pg_lsclusters -h | awk '$1 == 15 && $2 == "quickstart" {print $4}'; }
port_of() { pg_lsclusters -h | awk '$1 == 15 && $2 == "quickstart" {print $3}'; }
sql() { as_postgres psql -X -A -t -q -h /run/postgresql -p "$(port_of)" -d postgres -c "$1"; }
before=$(cd / && find /etc/postgresql /var/lib/postgresql /var/log/postgresql /var/lib/walfs | sort)

log "start"
quickstart --seconds 2 --scale 1 >"$WORK/start.log" 2>&1 || { cat "$WORK/start.log" >&2; fail "quickstart failed"; }
[ "$(status_of)" = online ] || fail "15/quickstart is not online: $(pg_lsclusters)"
[ "$(readlink "$DATA/pg_wal")" = "$MNT/pg_wal" ] || fail "pg_wal is $(ls -ld "$DATA/pg_wal")"
[ "$(findmnt -n -o FSTYPE --mountpoint "$MNT")" = fuse.walfs ] || fail "$MNT is not a walfs mount"
[ "$(stat -c '%U %a' "$DIR/15-quickstart.pool")" = "postgres 600" ] || fail "pool: $(stat -c '%U %a' "$DIR/15-quickstart.pool")"
grep -q "pgbench .* tps" "$WORK/start.log" || fail "no pgbench result: $(cat "$WORK/start.log")"
[ "$(sql "SELECT count(*) FROM pgbench_branches")" = 1 ] || fail "pgbench tables missing"
# A 256M pool cannot hold PostgreSQL's default max_wal_size (1GB): the cluster gets what
# mkfs.walfs says the pool fits (docs/operations.md "Sizing a pool").
fits=$(sed -n 's/^ *fits *max_wal_size = \([0-9]*\)MB.*/\1/p' "$WORK/start.log" | head -n 1)
[[ $fits =~ ^[0-9]+$ ]] && ((fits >= 32 && fits < 256)) || fail "no max_wal_size fit in: $(cat "$WORK/start.log")"
[ "$(sql "SELECT setting FROM pg_settings WHERE name = 'max_wal_size'")" = "$fits" ] ||
  fail "max_wal_size is $(sql 'SHOW max_wal_size'), not the ${fits}MB the pool fits"
if quickstart --seconds 0 >"$WORK/twice.log" 2>&1; then fail "a second start was not refused"; fi
grep -q "already running" "$WORK/twice.log" || fail "second start: $(cat "$WORK/twice.log")"

log "--stop"
quickstart --stop >"$WORK/stop.log" 2>&1 || { cat "$WORK/stop.log" >&2; fail "--stop failed"; }
[ "$(status_of)" = down ] || fail "15/quickstart is not down after --stop: $(pg_lsclusters)"
! mountpoint -q "$MNT" || fail "$MNT still mounted after --stop"
[ -f "$DIR/15-quickstart.pool" ] || fail "--stop removed the pool"

log "again: resumes"
quickstart --seconds 0 >"$WORK/resume.log" 2>&1 || { cat "$WORK/resume.log" >&2; fail "resume failed"; }
grep -q "reusing the cluster 15/quickstart" "$WORK/resume.log" || fail "did not reuse the cluster: $(cat "$WORK/resume.log")"
[ "$(status_of)" = online ] || fail "not online after resuming"
[ "$(sql "SELECT count(*) FROM pgbench_branches")" = 1 ] || fail "data lost across --stop and resume"

log "--purge"
quickstart --purge >"$WORK/purge.log" 2>&1 || { cat "$WORK/purge.log" >&2; fail "--purge failed"; }
[ -z "$(pg_lsclusters -h)" ] || fail "clusters left after --purge: $(pg_lsclusters)"
! mountpoint -q "$MNT" 2>/dev/null || fail "still mounted after --purge"
[ ! -e "$DIR" ] || fail "--purge left $DIR: $(find "$DIR")"
after=$(cd / && find /etc/postgresql /var/lib/postgresql /var/log/postgresql /var/lib/walfs | sort)
[ "$after" = "$before" ] || fail "--purge left: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
log "PASS"
