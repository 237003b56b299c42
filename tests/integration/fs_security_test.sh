#!/usr/bin/env bash
# Who may do what through a walfs mount, and the documented unprivileged setup.
#  1. allow_other + default_permissions, a daemon run by root: in a tree owned by
#     postgres, uid 65534 (nobody) cannot list, read, write, create, unlink, rename,
#     link, truncate, chmod, chown or set times where the mode bits say no, and can
#     where they say yes; new files belong to their creator (postgres, nobody), and a
#     set-group-ID directory hands its group on. (fs_basic_test.sh covers root-owned
#     files, the sticky root and umask.)
#  2. Pools: mkfs.walfs makes them 0600 (owned by --owner); the daemon refuses a pool
#     writable or readable by group or others, naming the mode and the fix, and one it
#     cannot open; fsck.walfs still reads a readable one.
#  3. The daemon as postgres without root (docs/security.md, running without root): pool owned by
#     postgres 0600, `walfs POOL MNT` run by postgres (no allow_other, so no
#     user_allow_other needed), mounted through the setuid fusermount3, no capabilities;
#     root itself is kept out; PostgreSQL as postgres runs initdb -X onto it, starts,
#     commits, stops; postgres unmounts with fusermount3 -u; fsck.walfs is clean.
#     Part 3 runs in a private mount namespace (the script re-runs itself under
#     `unshare -m`), where a 0666 /dev/fuse stands in if this machine's is 0600.
source "$(dirname "$0")/lib/common.sh"

require_fuse
require_postgres
[ -x "$MKFS" ] && [ -x "$FSCK" ] || fail "mkfs/fsck not built in $WALFS_BUILD_DIR"
id nobody >/dev/null 2>&1 || skip "no user nobody"
command -v python3 >/dev/null || skip "python3 is missing (tools/install-deps.sh)"

PG_UID=$(id -u postgres)
PG_GID=$(id -g postgres)
NOBODY_UID=$(id -u nobody)
NOBODY_GID=$(id -g nobody)

# ---------------------------------------------------------------------------------------
# 3. (in its own mount namespace; see the end of the script for how it is started)
unprivileged_daemon() {
  source "$WALFS_SOURCE_DIR/tests/integration/lib/pg.sh"
  pg_workdir
  if ! as_postgres test -r /dev/fuse -a -w /dev/fuse; then
    log "/dev/fuse is $(stat -c %a /dev/fuse) here: a 0666 node stands in (this namespace only)"
    mknod -m 0666 "$W/fuse-dev" c "$((16#$(stat -c %t /dev/fuse)))" \
      "$((16#$(stat -c %T /dev/fuse)))" || skip "cannot make a /dev/fuse node"
    mount --bind "$W/fuse-dev" /dev/fuse
  fi
  [ -u "$(command -v fusermount3)" ] || skip "fusermount3 is not setuid root"
  local pool=$W/pg.pool mnt=$W/wal pid i
  install -d -o postgres -g postgres -m 0700 "$W/pooldir" "$mnt"
  pool=$W/pooldir/pg.pool
  as_postgres "$MKFS" --size 96M "$pool" >/dev/null || fail "mkfs.walfs as postgres"
  [ "$(stat -c '%U:%G %a' "$pool")" = "postgres:postgres 600" ] ||
    fail "pool made by postgres is $(stat -c '%U:%G %a' "$pool")"

  log "[unprivileged] walfs POOL MNT as postgres (detached, no allow_other)"
  on_exit "runuser -u postgres -- fusermount3 -u -z '$mnt'"
  as_postgres "$WALFS" "$pool" "$mnt" >"$W/run/walfs.out" 2>&1 ||
    { cat "$W/run/walfs.out" >&2; fail "walfs as postgres failed"; }
  # (mountpoint(1) stats the directory, which root may not do on this mount.)
  findmnt -n --mountpoint "$mnt" >/dev/null || fail "not mounted after walfs returned"
  pid=$(as_postgres python3 -c '
import json, os, sys
print(json.loads(os.getxattr(sys.argv[1], "user.walfs.status"))["pid"])' "$mnt") ||
    fail "postgres cannot read the status of its own mount"
  on_exit "kill_if_walfs $pid"
  [ "$(stat -c %U "/proc/$pid")" = postgres ] || fail "daemon runs as $(stat -c %U "/proc/$pid")"
  awk '/^(Uid|Gid):/ { for (i = 2; i <= 5; i++) print $i }' "/proc/$pid/status" | sort -u |
    grep -qvx -e "$PG_UID" -e "$PG_GID" && fail "daemon has a non-postgres uid/gid: $(grep -E '^(Uid|Gid)' "/proc/$pid/status")"
  [ "$(awk '/^CapEff:/ { print $2 }' "/proc/$pid/status")" = 0000000000000000 ] ||
    fail "daemon has capabilities: $(grep CapEff "/proc/$pid/status")"
  findmnt -n -o OPTIONS --mountpoint "$mnt" | grep -q "user_id=$PG_UID" ||
    fail "mount is not postgres's: $(findmnt -n -o OPTIONS --mountpoint "$mnt")"
  # Without allow_other the kernel lets only the mounting user in, root included.
  if ls "$mnt" >/dev/null 2>"$W/root.err"; then fail "root could list a mount without allow_other"; fi
  grep -q "Permission denied" "$W/root.err" || fail "root: $(cat "$W/root.err")"
  if runuser -u nobody -- ls "$mnt" >/dev/null 2>&1; then fail "nobody could list the mount"; fi

  log "[unprivileged] PostgreSQL: initdb -X, start, commit, stop"
  pg_initdb "$W"
  pg_start "$W"
  pg_sql "$W" "CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 1000);" ||
    fail "commit on the unprivileged mount"
  pg_sql "$W" "SELECT pg_switch_wal(); CHECKPOINT;" >/dev/null
  [ "$(pg_sql "$W" "SELECT count(*) FROM t")" = 1000 ] || fail "rows after commit"
  pg_stop "$W"
  [ "$(as_postgres stat -c %U "$mnt/pg_wal")" = postgres ] || fail "pg_wal not owned by postgres"
  as_postgres sh -c "ls '$mnt/pg_wal' | grep -qE '^[0-9A-F]{24}\$'" || fail "no WAL segment on the mount"

  log "[unprivileged] fusermount3 -u as postgres"
  as_postgres fusermount3 -u "$mnt" || fail "postgres cannot unmount its mount"
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  ! kill -0 "$pid" 2>/dev/null || fail "daemon still running after fusermount3 -u"
  ! findmnt -n --mountpoint "$mnt" >/dev/null || fail "still mounted after fusermount3 -u"
  "$FSCK" "$pool" >"$W/fsck.out" 2>&1 || { cat "$W/fsck.out" >&2; fail "fsck after the unprivileged run"; }
  # The cluster's WAL is still there for a restart on a fresh mount (as postgres again).
  as_postgres "$WALFS" "$pool" "$mnt" >/dev/null 2>&1 || fail "remount as postgres"
  pg_start "$W"
  [ "$(pg_sql "$W" "SELECT count(*) FROM t")" = 1000 ] || fail "rows after remount"
  pg_stop "$W"
  as_postgres fusermount3 -u "$mnt" || fail "second unmount"
  log "[unprivileged] ok"
}

if [ "${1:-}" = --unprivileged-daemon ]; then
  unprivileged_daemon
  exit 0
fi

WORK=$(make_workdir)

# as USER PYTHON...: runs a python snippet as USER; prints what it printed.
as() {
  local user=$1
  shift
  runuser -u "$user" -- python3 -c "$@"
}

# denied USER WHAT PYTHON-STATEMENT: the statement fails with EACCES or EPERM as USER.
denied() {
  local user=$1 what=$2 stmt=$3 out
  out=$(as "$user" "
import errno, os, sys
try:
    $stmt
except OSError as e:
    print(errno.errorcode[e.errno]); sys.exit(0)
print('succeeded')") || fail "$what: python failed"
  [ "$out" = EACCES ] || [ "$out" = EPERM ] || fail "$user $what: $out, want EACCES/EPERM"
}

# allowed USER WHAT PYTHON-STATEMENT: the statement succeeds as USER.
allowed() {
  local user=$1 what=$2 stmt=$3
  as "$user" "
import os
$stmt" || fail "$user $what: refused"
}

# ---------------------------------------------------------------------------------------
log "1. permissions through allow_other,default_permissions"
make_pool "$WORK/pool" 64M
M=$WORK/mnt
mount_walfs "$WORK/pool" "$M" -o allow_other,default_permissions
chown postgres:postgres "$M"
chmod 0755 "$M"
as postgres "
import os
m = '$M'
os.mkdir(m + '/private', 0o700)
with open(m + '/private/wal', 'w') as f: f.write('secret')
os.mkdir(m + '/open', 0o755)
for name, mode in (('0600', 0o600), ('0644', 0o644), ('0666', 0o666)):
    with open(m + '/open/' + name, 'w') as f: f.write(name)
    os.chmod(m + '/open/' + name, mode)
os.mkdir(m + '/drop', 0o777)
os.chmod(m + '/drop', 0o777)
os.mkdir(m + '/sgid', 0o2777)
os.chmod(m + '/sgid', 0o2777)
" || fail "postgres cannot build its tree"
[ "$(stat -c %u:%g "$M/private/wal")" = "$PG_UID:$PG_GID" ] ||
  fail "file made by postgres is $(stat -c %u:%g "$M/private/wal")"
[ "$(stat -c %u:%g "$M/open")" = "$PG_UID:$PG_GID" ] || fail "directory made by postgres"

P=$M/private
O=$M/open
denied nobody "lists a 0700 directory" "os.listdir('$P')"
denied nobody "stats a file in a 0700 directory" "os.stat('$P/wal')"
denied nobody "reads a file in a 0700 directory" "open('$P/wal').read()"
denied nobody "creates in a 0700 directory" "open('$P/new', 'w')"
denied nobody "unlinks in a 0700 directory" "os.unlink('$P/wal')"
denied nobody "reads a 0600 file" "open('$O/0600').read()"
denied nobody "writes a 0644 file" "open('$O/0644', 'a').write('x')"
denied nobody "truncates a 0644 file (O_RDONLY|O_TRUNC)" "os.open('$O/0644', os.O_RDONLY | os.O_TRUNC)"
denied nobody "truncate(2)s a 0644 file" "os.truncate('$O/0644', 0)"
denied nobody "creates in a 0755 directory" "open('$O/new', 'w')"
denied nobody "unlinks in a 0755 directory" "os.unlink('$O/0666')"
denied nobody "renames in a 0755 directory" "os.rename('$O/0666', '$O/moved')"
denied nobody "renames out of a 0755 directory" "os.rename('$O/0666', '$M/drop/moved')"
denied nobody "hard-links into a 0755 directory" "os.link('$O/0666', '$O/link')"
denied nobody "makes a directory in a 0755 directory" "os.mkdir('$O/d')"
denied nobody "chmods postgres's file" "os.chmod('$O/0666', 0o777)"
denied nobody "chowns postgres's file" "os.chown('$O/0666', $NOBODY_UID, -1)"
denied nobody "sets explicit times on postgres's file" "os.utime('$O/0666', (0, 0))"
denied nobody "rmdirs postgres's directory" "os.rmdir('$M/drop')"
denied postgres "chowns its file to nobody" "os.chown('$O/0644', $NOBODY_UID, -1)"
[ "$(cat "$P/wal"):$(cat "$O/0644"):$(stat -c %a "$O/0666")" = "secret:0644:666" ] ||
  fail "a refused request changed something"
[ "$(ls "$O" | tr '\n' ' ')" = "0600 0644 0666 " ] || fail "open/ changed: $(ls "$O")"

allowed nobody "reads a 0644 file" "assert open('$O/0644').read() == '0644'"
allowed nobody "writes a 0666 file" "open('$O/0666', 'a').write('+nobody')"
[ "$(cat "$O/0666")" = "0666+nobody" ] || fail "nobody's write to a 0666 file: $(cat "$O/0666")"
allowed nobody "lists a 0755 directory" "assert sorted(os.listdir('$O')) == ['0600', '0644', '0666']"
allowed nobody "creates in a 0777 directory" "open('$M/drop/n', 'w').write('n'); os.mkdir('$M/drop/nd')"
[ "$(stat -c %u:%g "$M/drop/n"):$(stat -c %u:%g "$M/drop/nd")" = \
  "$NOBODY_UID:$NOBODY_GID:$NOBODY_UID:$NOBODY_GID" ] ||
  fail "entries made by nobody: $(stat -c %u:%g "$M/drop/n") $(stat -c %u:%g "$M/drop/nd")"
allowed nobody "chmods its own file" "os.chmod('$M/drop/n', 0o600)"
denied postgres "reads nobody's 0600 file" "open('$M/drop/n').read()"
allowed nobody "renames its file in a 0777 directory" "os.rename('$M/drop/n', '$M/drop/m')"
allowed nobody "unlinks its file" "os.unlink('$M/drop/m'); os.rmdir('$M/drop/nd')"
allowed nobody "creates in a set-group-ID directory" "open('$M/sgid/f', 'w'); os.mkdir('$M/sgid/d')"
[ "$(stat -c %u:%g "$M/sgid/f")" = "$NOBODY_UID:$PG_GID" ] ||
  fail "file in a setgid directory is $(stat -c %u:%g "$M/sgid/f"), want $NOBODY_UID:$PG_GID"
[ "$(stat -c %g:%A "$M/sgid/d")" = "$PG_GID:drwxr-sr-x" ] ||
  fail "directory in a setgid directory is $(stat -c %g:%A "$M/sgid/d")"
pid=$WALFS_PID
umount_walfs "$M"
wait "$pid" || fail "daemon exit status $?"
"$FSCK" "$WORK/pool" >/dev/null || fail "fsck after the permission checks"

# ---------------------------------------------------------------------------------------
log "2. pool modes and refusals"
"$MKFS" --size 48M --owner postgres:postgres "$WORK/owned.pool" >/dev/null || fail "mkfs --owner"
[ "$(stat -c '%U:%G %a' "$WORK/owned.pool")" = "postgres:postgres 600" ] ||
  fail "mkfs.walfs --owner made $(stat -c '%U:%G %a' "$WORK/owned.pool")"
(umask 000 && "$MKFS" --size 48M "$WORK/umask.pool" >/dev/null) || fail "mkfs with umask 000"
[ "$(stat -c %a "$WORK/umask.pool")" = 600 ] ||
  fail "mkfs.walfs under umask 000 made a $(stat -c %a "$WORK/umask.pool") pool"
mkdir -p "$WORK/refuse"
for mode in 0666 0620 0602; do
  chmod "$mode" "$WORK/umask.pool"
  if timeout 20 "$WALFS" "$WORK/umask.pool" "$WORK/refuse" -f >"$WORK/refuse.out" 2>&1; then
    fail "walfs mounted a pool of mode $mode"
  fi
  grep -q "writable by others (mode $mode)" "$WORK/refuse.out" ||
    fail "refusal of a $mode pool does not name the mode: $(cat "$WORK/refuse.out")"
  ! mountpoint -q "$WORK/refuse" || fail "mounted after refusing a $mode pool"
done
# Readable by its group or others: every committed row is in the WAL. Refused with the
# fix named, as a mount failure (32); the tools still read it (fsck, for the record).
for mode in 0644 0640 0604; do
  chmod "$mode" "$WORK/umask.pool"
  rc=0
  timeout 20 "$WALFS" "$WORK/umask.pool" "$WORK/refuse" -f >"$WORK/refuse.out" 2>&1 || rc=$?
  [ "$rc" = 32 ] || fail "walfs on a pool of mode $mode: exit status $rc, not 32: $(cat "$WORK/refuse.out")"
  grep -q "pool $WORK/umask.pool is readable by others (mode $mode), and it holds every committed row: chmod 600" \
    "$WORK/refuse.out" || fail "refusal of a $mode pool: $(cat "$WORK/refuse.out")"
  ! mountpoint -q "$WORK/refuse" || fail "mounted after refusing a $mode pool"
  "$FSCK" "$WORK/umask.pool" >/dev/null || fail "fsck.walfs refused to read a $mode pool"
done
chmod 0600 "$WORK/umask.pool"
mount_walfs "$WORK/umask.pool" "$WORK/refuse"
umount_walfs "$WORK/refuse"
chown root:root "$WORK/umask.pool"
install -d -o nobody -m 0755 "$WORK/refuse-nobody"
if runuser -u nobody -- timeout 20 "$WALFS" "$WORK/umask.pool" "$WORK/refuse-nobody" -f \
  >"$WORK/refuse.out" 2>&1; then
  fail "nobody mounted root's 0600 pool"
fi
grep -q "cannot open pool $WORK/umask.pool.*Permission denied" "$WORK/refuse.out" ||
  fail "refusal of an unreadable pool: $(cat "$WORK/refuse.out")"
"$FSCK" "$WORK/umask.pool" >/dev/null || fail "a refused pool is no longer clean"

# ---------------------------------------------------------------------------------------
log "3. the daemon as postgres, without root"
command -v unshare >/dev/null || skip "unshare is missing (util-linux)"
unshare -m --propagation private -- env WALFS_BUILD_DIR="$WALFS_BUILD_DIR" \
  WALFS_SOURCE_DIR="$WALFS_SOURCE_DIR" bash "$0" --unprivileged-daemon ||
  fail "the unprivileged daemon part failed (above)"
log "fs_security: all checks passed"
