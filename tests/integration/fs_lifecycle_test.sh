#!/usr/bin/env bash
# The walfs daemon's life: refusals before mounting (bad options, missing, damaged or
# busy pool, a mount point that is a regular file or a non-empty directory, and
# -o nonempty), foreground and detached runs, mount(8) through mount.fuse3, sd_notify
# READY=1 (path and abstract sockets), SIGTERM and fusermount3 -u, read-only mounts,
# and recovery after kill -9 with fsynced data intact (forced-PMEM and msync pools),
# including a remount over the dead mount the killed daemon left.
source "$(dirname "$0")/lib/common.sh"

require_fuse
[ -x "$MKFS" ] || fail "mkfs not built: $MKFS"
command -v cc >/dev/null || skip "no C compiler for the test helper (cc)"

WORK=$(make_workdir)
HELPER=$WORK/fshelper

# getxattr and a sd_notify listener have no front end in Debian 12's base tools.
cc -O1 -o "$HELPER" -x c - <<'EOF' || fail "cannot build the test helper"
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>
int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "xattr")) {
    static char buf[65536];
    ssize_t n = getxattr(argv[2], argv[3], buf, sizeof(buf));
    if (n < 0) { printf("%s\n", strerrorname_np(errno)); return 1; }
    fwrite(buf, 1, (size_t)n, stdout);
    putchar('\n');
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "notify-listen")) {
    /* Binds NAME (a path, or @abstract), creates READY_FILE once bound, prints
       the first datagram. */
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t len = strlen(argv[2]);
    memcpy(addr.sun_path, argv[2], len);
    socklen_t alen = offsetof(struct sockaddr_un, sun_path) + len;
    if (argv[2][0] == '@') addr.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, alen) != 0) { perror("bind"); return 1; }
    FILE *ready = fopen(argv[3], "w");
    if (ready) fclose(ready);
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) { perror("recv"); return 1; }
    fwrite(buf, 1, (size_t)n, stdout);
    putchar('\n');
    return 0;
  }
  fprintf(stderr, "usage: fshelper xattr PATH NAME | notify-listen NAME READY_FILE\n");
  return 2;
}
EOF

status_field() {
  "$HELPER" xattr "$1" user.walfs.status |
    sed -n "s/.*\"$2\":\(\"[^\"]*\"\|[0-9a-z]*\).*/\1/p" | tr -d '"'
}

# refused WHAT EXPECTED_MESSAGE MNT walfs-args...: the daemon exits non-zero, says
# EXPECTED_MESSAGE, and MNT is not a mount point afterwards.
refused() {
  local what=$1 want=$2 mnt=$3 out rc=0
  shift 3
  out=$(timeout 20 "$WALFS" "$@" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || { fusermount3 -u "$mnt" 2>/dev/null; fail "$what: walfs succeeded"; }
  [ "$rc" -ne 124 ] || fail "$what: walfs hung"
  [[ "$out" == *"$want"* ]] || fail "$what: message lacks '$want': $out"
  ! mountpoint -q "$mnt" || fail "$what: $mnt was mounted anyway"
  log "refused as expected ($what): $out"
}

MNT=$WORK/mnt
POOL=$WORK/pool
make_pool "$POOL" 64M
mkdir -p "$MNT" "$WORK/mnt2"

# --- refusals before mounting
refused "unknown option" "unknown mount option 'frobnicate'" "$MNT" \
  "$POOL" "$MNT" -f -o allow_other,frobnicate
refused "bad threads value" "threads=N" "$MNT" "$POOL" "$MNT" -f -o threads=0
refused "missing pool" "No such file" "$MNT" "$WORK/no-such-pool" "$MNT" -f
refused "missing pool, detached" "No such file" "$MNT" "$WORK/no-such-pool" "$MNT"
head -c 8M /dev/urandom >"$WORK/garbage"
chmod 0600 "$WORK/garbage" # a pool others may read is refused before it is read
refused "not a pool" "superblock" "$MNT" "$WORK/garbage" "$MNT" -f
cp "$POOL" "$WORK/damaged"
dd if=/dev/urandom of="$WORK/damaged" bs=4096 count=2 conv=notrunc status=none
refused "both superblocks damaged" "superblock" "$MNT" "$WORK/damaged" "$MNT" -f
refused "missing mount point" "mount point $WORK/no-such-dir/x does not exist (create it: mkdir" \
  "$WORK/no-such-dir/x" "$POOL" "$WORK/no-such-dir/x" -f

# --- mount points that are mistakes: a regular file (the kernel would mount there, and
# every access would fail with EIO), a directory that holds files (the mount would hide
# them: for a pg_wal, WAL written while the mount was missing). Refused with mount(8)'s
# status for a failed mount (32), in the foreground and detached, with nothing mounted.
mount_refused() {
  local what=$1 want=$2 target=$3 out rc
  shift 3
  for fg in -f ""; do
    rc=0
    out=$(timeout 20 "$WALFS" "$POOL" "$target" $fg "$@" 2>&1) || rc=$?
    [ "$rc" = 32 ] || { umount -l "$target" 2>/dev/null; fail "$what ${fg:-detached}: exit status $rc, not 32: $out"; }
    [[ "$out" == *"$want"* ]] || fail "$what ${fg:-detached}: message lacks '$want': $out"
    [ -z "$(findmnt -n --mountpoint "$target")" ] || fail "$what: $target was mounted anyway"
  done
  log "refused as expected ($what): $out"
}
echo "a file" >"$WORK/file-mnt"
mount_refused "a regular file as mount point" \
  "mount point $WORK/file-mnt is a regular file, not a directory: walfs mounts a directory" \
  "$WORK/file-mnt"
mount_refused "a regular file, even with nonempty" "is a regular file" "$WORK/file-mnt" -o nonempty
[ "$(cat "$WORK/file-mnt")" = "a file" ] || fail "the refused file mount point changed"
mkdir -m 0700 "$WORK/full"
echo "written while unmounted" >"$WORK/full/000000010000000000000007"
mount_refused "a non-empty mount point" \
  "mount point $WORK/full is not empty (it holds '000000010000000000000007'): the mount would hide those files. Move them away, or mount over them anyway with -o nonempty" \
  "$WORK/full" -o allow_other
# -o nonempty: mounted over the file, which is hidden while the mount lasts and there
# again afterwards. Also through mount(8), which hands the option to walfs.
mount_walfs "$POOL" "$WORK/full" -o nonempty
[ ! -e "$WORK/full/000000010000000000000007" ] || fail "-o nonempty: the file shows through the mount"
[ "$(findmnt -n -o FSTYPE --mountpoint "$WORK/full")" = fuse.walfs ] || fail "-o nonempty did not mount walfs"
umount_walfs "$WORK/full"
[ "$(cat "$WORK/full/000000010000000000000007")" = "written while unmounted" ] ||
  fail "the file under the nonempty mount is gone"
if [ -x /sbin/mount.fuse3 ] || [ -x /usr/sbin/mount.fuse3 ]; then
  if mount -t fuse "$WALFS#$POOL" "$WORK/full" -o allow_other,default_permissions 2>"$WORK/mount.err"; then
    umount -l "$WORK/full"
    fail "mount(8) mounted over a non-empty directory"
  fi
  grep -q "is not empty" "$WORK/mount.err" || fail "mount(8) over a non-empty directory: $(cat "$WORK/mount.err")"
  mount -t fuse "$WALFS#$POOL" "$WORK/full" -o allow_other,default_permissions,nonempty ||
    fail "mount(8) -o nonempty failed"
  on_exit "umount -l '$WORK/full'"
  [ "$(findmnt -n -o FSTYPE --mountpoint "$WORK/full")" = fuse.walfs ] || fail "mount(8) -o nonempty mounted no walfs"
  mpid=$(status_field "$WORK/full" pid)
  umount "$WORK/full" || fail "umount of the nonempty mount"
  for ((i = 0; i < 100; i++)); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.05; done
  ! kill -0 "$mpid" 2>/dev/null || fail "daemon still running after umount"
fi
"$WALFS" --help | grep -q "durability=strict" || fail "--help does not document durability"

# --- one daemon per pool
mount_walfs "$POOL" "$MNT" -o allow_other
refused "second daemon on the pool" "in use by another walfs (pid $WALFS_PID)" \
  "$WORK/mnt2" "$POOL" "$WORK/mnt2" -f
mountpoint -q "$MNT" || fail "the first mount went away"
[ -z "$(ls -A "$MNT")" ] || fail "fresh root not empty"

# --- SIGTERM unmounts cleanly
echo kept >"$MNT/kept"
sync "$MNT/kept"
pid=$WALFS_PID
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 0 ] || fail "daemon exit status $rc after SIGTERM"
! mountpoint -q "$MNT" || fail "still mounted after SIGTERM"
grep -q "unmounted $MNT" "$WALFS_LOG" || fail "no unmount log line: $(cat "$WALFS_LOG")"
grep -q 'allow_other without default_permissions: default_permissions is enforced' \
  "$WALFS_LOG" || fail "no notice that default_permissions was forced: $(cat "$WALFS_LOG")"
# A log file is not the journal: no sd-daemon priority prefix (tests/tools/cli_test.sh
# checks the prefix when JOURNAL_STREAM names stderr).
grep -q '^walfs: mounted .*mode msync' "$WALFS_LOG" ||
  fail "mount log line has a priority prefix or lacks the durability mode: $(cat "$WALFS_LOG")"

# --- detached: returns once mounted, keeps serving, exits on fusermount3 -u
on_exit "fusermount3 -u -z '$MNT'"
"$WALFS" "$POOL" "$MNT" -o allow_other || fail "detached walfs failed"
mountpoint -q "$MNT" || fail "detached walfs returned before the mount was up"
[ "$(cat "$MNT/kept")" = kept ] || fail "data lost across a clean unmount"
dpid=$(status_field "$MNT" pid)
[ -n "$dpid" ] && kill -0 "$dpid" || fail "detached daemon pid '$dpid' not running"
[ "$(cat /proc/"$dpid"/comm)" = walfs ] || fail "status pid is not walfs"
[ "$(readlink /proc/"$dpid"/cwd)" = / ] || fail "detached daemon did not chdir /"
on_exit "kill -9 $dpid"
fusermount3 -u "$MNT"
for ((i = 0; i < 100; i++)); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.05; done
! kill -0 "$dpid" 2>/dev/null || fail "detached daemon still running after fusermount3 -u"

# --- mount(8) -> mount.fuse3 -> walfs, with the options fstab and systemd add.
# Installed, `mount -t fuse.walfs POOL DIR` finds walfs on mount.fuse3's PATH; the
# build tree is not on it, so the "PROGRAM#SOURCE" form names the binary instead
# (mount.fuse3 runs it with the same argv: POOL DIR -o OPTIONS).
if [ -x /sbin/mount.fuse3 ] || [ -x /usr/sbin/mount.fuse3 ]; then
  mount -t fuse "$WALFS#$POOL" "$MNT" \
    -o allow_other,default_permissions,nodev,nosuid,noatime,nofail,_netdev,threads=2 ||
    fail "mount -t fuse PROGRAM#POOL failed"
  on_exit "umount -l '$MNT'"
  mountpoint -q "$MNT" || fail "mount -t fuse.walfs did not mount"
  mount | grep -q "^$POOL on $MNT type fuse.walfs" || fail "mount table: $(mount | grep "$MNT")"
  [ "$(status_field "$MNT" threads)" = 2 ] || fail "threads=2 not applied through mount(8)"
  mpid=$(status_field "$MNT" pid)
  umount "$MNT" || fail "umount"
  for ((i = 0; i < 100; i++)); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.05; done
  ! kill -0 "$mpid" 2>/dev/null || fail "daemon still running after umount"
else
  log "mount.fuse3 missing: mount(8) path not tested"
fi

# --- sd_notify READY=1, to a path and to an abstract socket
for name in "$WORK/notify.sock" "@walfs-test-$$"; do
  rm -f "$WORK/listening" "$WORK/notify.out"
  "$HELPER" notify-listen "$name" "$WORK/listening" >"$WORK/notify.out" &
  lpid=$!
  on_exit "kill $lpid"
  for ((i = 0; i < 100; i++)); do [ -e "$WORK/listening" ] && break; sleep 0.05; done
  NOTIFY_SOCKET=$name mount_walfs "$POOL" "$MNT"
  for ((i = 0; i < 100; i++)); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.05; done
  grep -qx "READY=1" "$WORK/notify.out" || fail "no READY=1 on $name: $(cat "$WORK/notify.out")"
  grep -qx "MAINPID=$WALFS_PID" "$WORK/notify.out" || fail "MAINPID wrong on $name"
  umount_walfs "$MNT"
done

# --- read-only mount
mount_walfs "$POOL" "$MNT" -o ro
[ "$(cat "$MNT/kept")" = kept ] || fail "ro: cannot read"
if (echo x >"$MNT/new") 2>/dev/null; then fail "ro: create succeeded"; fi
[ "$(status_field "$MNT" read_only)" = true ] || fail "ro: status read_only"
umount_walfs "$MNT"

# --- kill -9, then the next mount recovers with fsynced data intact
# Forced-PMEM pools live on tmpfs (/dev/shm) when it has room (containers often give
# it 64M); PMEM_IS_PMEM_FORCE works on any file, so the work directory is the fallback.
if [ -d /dev/shm ] && [ "$(df -k --output=avail /dev/shm | tail -1)" -ge 400000 ]; then
  SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
  on_exit "rm -rf '$SHM'"
else
  SHM=$WORK
fi
head -c $((5 * 1024 * 1024)) /dev/urandom >"$WORK/rand"
for mode in pmem msync; do
  if [ $mode = pmem ]; then
    export PMEM_IS_PMEM_FORCE=1
    pool=$SHM/pool-kill-pmem
  else
    unset PMEM_IS_PMEM_FORCE
    pool=$WORK/pool-kill
  fi
  make_pool "$pool" 128M
  mount_walfs "$pool" "$MNT"
  [ "$(status_field "$MNT" mode)" = $mode ] || fail "[$mode] pool mode"
  mkdir "$MNT/archive_status"
  cp "$WORK/rand" "$MNT/xlogtemp.123"
  sync "$MNT/xlogtemp.123"
  mv "$MNT/xlogtemp.123" "$MNT/000000010000000000000001"
  sync "$MNT"
  dd if="$WORK/rand" of="$MNT/000000010000000000000002" bs=8192 count=16 \
    oflag=dsync status=none
  echo ready >"$MNT/archive_status/000000010000000000000001.ready"
  sync "$MNT/archive_status/000000010000000000000001.ready" "$MNT/archive_status"
  exec 3<>"$MNT/000000010000000000000001"  # an open file at the time of the crash
  kill -9 "$WALFS_PID"
  wait "$WALFS_PID" 2>/dev/null || true
  exec 3<&-
  if [ $mode = pmem ]; then
    # The dead mount is left in place: the next walfs on this pool detaches it itself.
    if ls "$MNT" 2>/dev/null; then fail "[$mode] the killed mount still answers"; fi
    mount_walfs "$pool" "$MNT"  # returns at once: the dead mount is a mount point too
    for ((i = 0; i < 200; i++)); do grep -q "walfs: mounted" "$WALFS_LOG" && break; sleep 0.05; done
    ls "$MNT" >/dev/null || fail "[$mode] remount over the dead mount does not answer"
    grep -q "detached the dead mount of $pool at $MNT" "$WALFS_LOG" ||
      fail "[$mode] no log line about the dead mount: $(cat "$WALFS_LOG")"
  else
    fusermount3 -u -z "$MNT"
    mount_walfs "$pool" "$MNT"
  fi
  cmp "$WORK/rand" "$MNT/000000010000000000000001" || fail "[$mode] fsynced segment after kill -9"
  cmp -n $((16 * 8192)) "$WORK/rand" "$MNT/000000010000000000000002" ||
    fail "[$mode] O_DSYNC data after kill -9"
  [ "$(cat "$MNT/archive_status/000000010000000000000001.ready")" = ready ] ||
    fail "[$mode] small file after kill -9"
  [ ! -e "$MNT/xlogtemp.123" ] || fail "[$mode] renamed-away name came back"
  umount_walfs "$MNT"
  log "[$mode] kill -9 recovery ok"
done

# --- allow_root and auto_unmount, accepted as sshfs accepts them (libfuse acts on both):
# with allow_root only root and the daemon's user get in (the same uid 65534 that
# allow_other lets in is refused); with auto_unmount, fusermount3 unmounts after kill -9.
pool=$WORK/opts.pool
make_pool "$pool" 64M
if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
  mount_walfs "$pool" "$MNT" -o allow_other
  as_nobody ls "$MNT" >/dev/null || fail "allow_other did not let uid 65534 in"
  umount_walfs "$MNT"
  mount_walfs "$pool" "$MNT" -o allow_root
  ls "$MNT" >/dev/null || fail "allow_root: root cannot enter"
  if as_nobody ls "$MNT" >/dev/null 2>&1; then fail "allow_root let uid 65534 in"; fi
  umount_walfs "$MNT"
fi
mount_walfs "$pool" "$MNT" -o auto_unmount
pgrep -f "fusermount3 .*auto_unmount.* $MNT\$" >/dev/null ||
  fail "auto_unmount: no fusermount3 waiting to unmount $MNT"
kill -9 "$WALFS_PID"
wait "$WALFS_PID" 2>/dev/null || true
for ((i = 0; i < 200; i++)); do mountpoint -q "$MNT" || break; sleep 0.05; done
if mountpoint -q "$MNT"; then
  # fusermount3 unmounts only a connection it finds dead (ENOTCONN), and sees the
  # daemon's socket close before the daemon's /dev/fuse descriptor does when the exit
  # closes them in that order: a race of libfuse's design (its "risks of auto_unmount").
  # The mount left behind must then be dead, and the next start releases it.
  if stat "$MNT/." >/dev/null 2>"$WORK/stat.err" || ! grep -q 'not connected' "$WORK/stat.err"; then
    fail "auto_unmount left a live mount in place after kill -9"
  fi
  log "auto_unmount: fusermount3 lost libfuse's exit race; the dead mount is released by the next start"
  mount_walfs "$pool" "$MNT"  # returns at once: the dead mount is a mount point too
  for ((i = 0; i < 200; i++)); do ls "$MNT" >/dev/null 2>&1 && break; sleep 0.05; done
  ls "$MNT" >/dev/null || fail "remount over the dead auto_unmount mount failed"
  umount_walfs "$MNT"
fi
log "allow_root and auto_unmount ok"

log "fs_lifecycle: all checks passed"
