#!/usr/bin/env bash
# Hostile requests on a real mount, forced-PMEM and msync pools: over-long names, odd
# name bytes, paths through files, renames into a directory's own subtree or over
# non-empty directories, writes/truncates/fallocates far beyond EOF and the pool, invalid
# open flags, device nodes, hard links to directories, symlink targets up to PATH_MAX,
# inode and directory-entry exhaustion, extended-attribute abuse, read-only mounts.
# The exact errno of each is checked by hostile_requests.py (one group per run). After
# every group: the daemon still serves, files written before it are intact, and the
# unmounted pool is fsck.walfs clean (the pool is remounted for the next group).
# WALFS_BUILD_DIR may point at a sanitizer build: the daemon's log is then checked for
# reports and its exit status must be 0.
source "$(dirname "$0")/lib/common.sh"

require_fuse
[ -x "$MKFS" ] && [ -x "$FSCK" ] || fail "mkfs/fsck not built in $WALFS_BUILD_DIR"
command -v python3 >/dev/null || skip "python3 is missing (tools/install-deps.sh)"
CHECKS=$(dirname "$0")/hostile_requests.py

WORK=$(make_workdir)
head -c $((1024 * 1024 + 17)) /dev/urandom >"$WORK/before"

# daemon_clean: the running daemon logged no sanitizer report, assertion or crash.
daemon_clean() {
  if grep -qE 'ERROR: (Address|Leak|Thread|Undefined)Sanitizer|runtime error:|SUMMARY: |Assertion|terminate called' "$WALFS_LOG"; then
    cat "$WALFS_LOG" >&2
    fail "[$1] the daemon reported an error (log above)"
  fi
}

# unmount_and_check LABEL POOL MNT: clean unmount, exit status 0, fsck clean.
unmount_and_check() {
  local label=$1 pool=$2 mnt=$3 pid=$WALFS_PID rc=0
  umount_walfs "$mnt"
  wait "$pid" || rc=$?
  daemon_clean "$label"
  [ "$rc" = 0 ] || { cat "$WALFS_LOG" >&2; fail "[$label] daemon exited with status $rc"; }
  "$FSCK" "$pool" >"$WORK/fsck.out" 2>&1 || { cat "$WORK/fsck.out" >&2; fail "[$label] fsck.walfs is not clean"; }
}

# run_group LABEL POOL MNT GROUP: one group of checks, then the after-group invariants.
run_group() {
  local label=$1 pool=$2 mnt=$3 group=$4
  log "[$label] $group"
  python3 "$CHECKS" "$group" "$mnt" || fail "[$label] $group: checks failed (above)"
  kill -0 "$WALFS_PID" 2>/dev/null || { cat "$WALFS_LOG" >&2; fail "[$label] $group: daemon died"; }
  stat "$mnt" >/dev/null || fail "[$label] $group: mount no longer serves"
  cmp "$WORK/before" "$mnt/before" || fail "[$label] $group: earlier file damaged"
  [ "$(cat "$mnt/dir/small")" = small ] || fail "[$label] $group: earlier small file damaged"
  daemon_clean "$label"
  unmount_and_check "$label" "$pool" "$mnt"
  mount_walfs "$pool" "$mnt" -o allow_other,default_permissions
  cmp "$WORK/before" "$mnt/before" || fail "[$label] $group: earlier file damaged after remount"
}

run_suite() {
  local label=$1 pool=$2 mnt=$WORK/mnt-$1
  # Few inodes, so that exhausting them (group nodes) is quick.
  make_pool "$pool" 64M --inodes 256
  mount_walfs "$pool" "$mnt" -o allow_other,default_permissions
  cp "$WORK/before" "$mnt/before"
  mkdir "$mnt/dir"
  echo small >"$mnt/dir/small"
  local group
  for group in names persisted_names paths renames sizes flags nodes xattrs; do
    run_group "$label" "$pool" "$mnt" "$group"
  done

  # A read-only mount refuses every change with EROFS and keeps the files.
  unmount_and_check "$label" "$pool" "$mnt"
  mount_walfs "$pool" "$mnt" -o ro,allow_other,default_permissions
  python3 - "$mnt" <<'PY' || fail "[$label] read-only mount: checks failed (above)"
import errno, os, sys
m = sys.argv[1]
bad = []
def refused(what, fn):
    try:
        fn()
        bad.append(f"{what}: succeeded")
    except OSError as e:
        if e.errno != errno.EROFS:
            bad.append(f"{what}: {errno.errorcode[e.errno]}, want EROFS")
f = os.path.join(m, "before")
refused("O_TRUNC", lambda: os.open(f, os.O_RDONLY | os.O_TRUNC))
refused("O_WRONLY", lambda: os.open(f, os.O_WRONLY))
refused("create", lambda: os.open(os.path.join(m, "new"), os.O_CREAT | os.O_WRONLY, 0o644))
refused("mkdir", lambda: os.mkdir(os.path.join(m, "newdir")))
refused("unlink", lambda: os.unlink(f))
refused("rename", lambda: os.rename(f, f + ".moved"))
refused("truncate", lambda: os.truncate(f, 0))
refused("chmod", lambda: os.chmod(f, 0o600))
refused("utime", lambda: os.utime(f, (0, 0)))
refused("symlink", lambda: os.symlink("x", os.path.join(m, "sym")))
for b in bad:
    print("  ro:", b)
sys.exit(1 if bad else 0)
PY
  cmp "$WORK/before" "$mnt/before" || fail "[$label] file changed on a read-only mount"
  unmount_and_check "$label" "$pool" "$mnt"
  log "[$label] ok"
}

if [ -d /dev/shm ] && [ "$(df -k --output=avail /dev/shm | tail -1)" -ge 200000 ]; then
  SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
  on_exit "rm -rf '$SHM'"
else
  SHM=$WORK
fi

PMEM_IS_PMEM_FORCE=1 run_suite pmem "$SHM/pool"
run_suite msync "$WORK/pool-msync"
log "fs_hostile: all checks passed"
