#!/usr/bin/env bash
# The walfs daemon behaves like a local file system for everything PostgreSQL and the
# usual tools do on pg_wal, in both durability modes:
#   pmem  - pool on /dev/shm with PMEM_IS_PMEM_FORCE=1: FSYNC answered ENOSYS once
#   msync - pool on an ordinary file: every fsync/fsyncdir reaches the daemon
#   strict - forced PMEM with -o durability=strict: every fsync reaches the daemon
# Checks: empty fresh root, the status xattr, file and directory operations (coreutils,
# util-linux), O_EXCL, rename NOREPLACE/EXCHANGE, fallocate, O_DIRECT|O_DSYNC writes,
# open-unlinked files, long directories, umask, caller uid/gid, permission bits for an
# unprivileged user, df capacity, fsync counters, clean unmount, and that free space is
# read only in a pool an older walfs left (once, in the background in pmem mode).
source "$(dirname "$0")/lib/common.sh"

require_fuse
[ -x "$MKFS" ] || fail "mkfs not built: $MKFS"
DAMAGE=$WALFS_BUILD_DIR/tests/tools/walfs_damage
[ -x "$DAMAGE" ] || fail "not built: $DAMAGE"
command -v cc >/dev/null || skip "no C compiler for the test helper (cc)"
id nobody >/dev/null 2>&1 || skip "no user nobody"

WORK=$(make_workdir)
HELPER=$WORK/fshelper

# renameat2 flags, O_EXCL and getxattr have no coreutils front end in Debian 12.
cc -O1 -o "$HELPER" -x c - <<'EOF' || fail "cannot build the test helper"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>
static int err(void) { printf("%s\n", strerrorname_np(errno)); return 1; }
int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "xattr")) {
    static char buf[65536];
    ssize_t n = getxattr(argv[2], argv[3], buf, sizeof(buf));
    if (n < 0) return err();
    fwrite(buf, 1, (size_t)n, stdout);
    putchar('\n');
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "listxattr")) {
    char buf[4096];
    ssize_t n = listxattr(argv[2], buf, sizeof(buf));
    if (n < 0) return err();
    printf("%zd\n", n);
    return 0;
  }
  if (argc == 5 && !strcmp(argv[1], "rename")) {
    unsigned flags = !strcmp(argv[2], "noreplace") ? RENAME_NOREPLACE
                   : !strcmp(argv[2], "exchange")  ? RENAME_EXCHANGE : 0;
    if (renameat2(AT_FDCWD, argv[3], AT_FDCWD, argv[4], flags) != 0) return err();
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "excl")) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return err();
    close(fd);
    return 0;
  }
  fprintf(stderr, "usage: fshelper xattr PATH NAME | listxattr PATH | "
                  "rename noreplace|exchange OLD NEW | excl PATH\n");
  return 2;
}
EOF

# status_field MOUNT KEY: one number or string from the status document.
status_field() {
  "$HELPER" xattr "$1" user.walfs.status |
    sed -n "s/.*\"$2\":\(\"[^\"]*\"\|[0-9a-z]*\).*/\1/p" | tr -d '"'
}

expect_fail() {  # expect_fail WHAT ERRNO_NAME CMD...: CMD fails and prints ERRNO_NAME
  local what=$1 want=$2 out
  shift 2
  if out=$("$@" 2>&1); then fail "$what: succeeded"; fi
  [ -z "$want" ] || [[ "$out" == *"$want"* ]] || fail "$what: expected $want, got: $out"
}

POOL_SIZE_MB=128
head -c $((3 * 1024 * 1024 + 123)) /dev/urandom >"$WORK/rand"

# run_suite LABEL POOL EXPECTED_MODE [daemon args...]
run_suite() {
  local label=$1 pool=$2 want_mode=$3
  shift 3
  local M=$WORK/mnt-$label
  log "[$label] mkfs + mount"
  make_pool "$pool" "${POOL_SIZE_MB}M"
  mount_walfs "$pool" "$M" -o allow_other,default_permissions "$@"

  # --- fresh pool, status document, statfs
  [ -z "$(ls -A "$M")" ] || fail "[$label] fresh root is not empty: $(ls -A "$M")"
  local mode
  mode=$(status_field "$M" mode)
  [ "$mode" = "$want_mode" ] || fail "[$label] status mode '$mode', want $want_mode"
  [ "$(status_field "$M" pid)" = "$WALFS_PID" ] || fail "[$label] status pid"
  [ "$(status_field "$M" pool)" = "$pool" ] || fail "[$label] status pool"
  [ "$("$HELPER" listxattr "$M")" = 0 ] || fail "[$label] listxattr of the root is not empty"
  expect_fail "[$label] status xattr on a file-less name" ENODATA \
    "$HELPER" xattr "$M" user.other
  local size_kb
  size_kb=$(df -k --output=size "$M" | tail -1 | tr -d ' ')
  [ "$size_kb" -le $((POOL_SIZE_MB * 1024)) ] && [ "$size_kb" -ge $((POOL_SIZE_MB * 1024 * 8 / 10)) ] ||
    fail "[$label] df size ${size_kb}K is not the pool's ${POOL_SIZE_MB}M"
  df -i "$M" >/dev/null || fail "[$label] df -i"
  mount | grep -q "^$pool on $M type fuse.walfs" || fail "[$label] mount table: $(mount | grep "$M")"

  # --- files
  echo hello >"$M/a"
  [ "$(cat "$M/a")" = hello ] || fail "[$label] read back"
  echo world >>"$M/a"
  [ "$(cat "$M/a")" = $'hello\nworld' ] || fail "[$label] append"
  cp "$WORK/rand" "$M/rand"
  cmp "$WORK/rand" "$M/rand" || fail "[$label] cp round trip"
  [ "$(stat -c %s "$M/rand")" = $((3 * 1024 * 1024 + 123)) ] || fail "[$label] st_size"
  [ "$(du -k "$M/rand" | cut -f1)" -ge 3072 ] || fail "[$label] du: $(du -k "$M/rand")"
  mv "$M/rand" "$M/rand2"
  [ ! -e "$M/rand" ] || fail "[$label] mv left the old name"
  cmp "$WORK/rand" "$M/rand2" || fail "[$label] data after mv"
  ln "$M/rand2" "$M/hard"
  [ "$(stat -c %h "$M/rand2")" = 2 ] || fail "[$label] nlink after ln"
  [ "$(stat -c %i "$M/rand2")" = "$(stat -c %i "$M/hard")" ] || fail "[$label] hard link inode"
  ln -s rand2 "$M/sym"
  [ "$(readlink "$M/sym")" = rand2 ] || fail "[$label] readlink"
  [ "$(stat -c %F "$M/sym")" = "symbolic link" ] || fail "[$label] symlink type"
  cmp "$WORK/rand" "$M/sym" || fail "[$label] read through symlink"
  rm "$M/sym"
  cp -a "$M/a" "$M/a.copy" 2>/dev/null || fail "[$label] cp -a"
  cmp "$M/a" "$M/a.copy" || fail "[$label] cp -a content"

  # --- attributes
  touch -d '2001-02-03 04:05:06 UTC' "$M/a"
  [ "$(stat -c %Y "$M/a")" = "$(date -d '2001-02-03 04:05:06 UTC' +%s)" ] || fail "[$label] touch -d"
  touch -a -d '2002-01-01 00:00:00 UTC' "$M/a"
  [ "$(stat -c %Y "$M/a")" = "$(date -d '2001-02-03 04:05:06 UTC' +%s)" ] ||
    fail "[$label] touch -a changed mtime (UTIME_OMIT)"
  [ "$(stat -c %X "$M/a")" = "$(date -d '2002-01-01 00:00:00 UTC' +%s)" ] || fail "[$label] atime"
  touch "$M/a"
  local now mtime
  now=$(date +%s)
  mtime=$(stat -c %Y "$M/a")
  [ $((now - mtime)) -le 5 ] && [ $((mtime - now)) -le 5 ] || fail "[$label] touch (UTIME_NOW)"
  chmod 640 "$M/a"
  [ "$(stat -c %a "$M/a")" = 640 ] || fail "[$label] chmod"
  chown nobody:nogroup "$M/a"
  [ "$(stat -c %U:%G "$M/a")" = nobody:nogroup ] || fail "[$label] chown"
  truncate -s 100000 "$M/a"
  [ "$(stat -c %s "$M/a")" = 100000 ] || fail "[$label] truncate up"
  cmp -n 99988 -i 12:0 "$M/a" /dev/zero || fail "[$label] grown range is not zeros"
  truncate -s 2 "$M/a"
  [ "$(cat "$M/a")" = he ] || fail "[$label] truncate down"
  : >"$M/a"
  [ "$(stat -c %s "$M/a")" = 0 ] || fail "[$label] O_TRUNC"

  # --- directories
  mkdir "$M/archive_status"
  [ "$(stat -c %F "$M/archive_status")" = directory ] || fail "[$label] mkdir"
  [ "$(stat -c %h "$M")" = 3 ] || fail "[$label] root nlink after mkdir: $(stat -c %h "$M")"
  touch "$M/archive_status/000000010000000000000001.ready"
  expect_fail "[$label] rmdir of a non-empty directory" "not empty" rmdir "$M/archive_status"
  mv "$M/archive_status/000000010000000000000001.ready" \
    "$M/archive_status/000000010000000000000001.done"
  rm "$M/archive_status/000000010000000000000001.done"
  rmdir "$M/archive_status"
  [ ! -e "$M/archive_status" ] || fail "[$label] rmdir"
  expect_fail "[$label] rmdir of a file" "Not a directory" rmdir "$M/a"
  # Many entries: readdir/readdirplus replies span several requests (cookies), and
  # once the files are removed every block comes back, which fails if a reply left a
  # lookup reference the kernel never forgets (the inode would stay an orphan).
  local free0 i
  free0=$(status_field "$M" free_blocks)
  mkdir "$M/many"
  for ((i = 0; i < 150; i++)); do echo "$i" >"$M/many/file-with-a-longish-name-$i"; done
  [ "$(ls "$M/many" | wc -l)" = 150 ] || fail "[$label] ls of 150 entries: $(ls "$M/many" | wc -l)"
  [ "$(ls -l "$M/many" | grep -c '^-')" = 150 ] || fail "[$label] ls -l (readdirplus)"
  [ "$(find "$M/many" -type f | wc -l)" = 150 ] || fail "[$label] find -type f (d_type)"
  [ "$(cat "$M/many/file-with-a-longish-name-77")" = 77 ] || fail "[$label] read in a big directory"
  [ "$(status_field "$M" free_blocks)" -lt "$free0" ] || fail "[$label] small files use no blocks"
  rm -r "$M/many"
  [ ! -e "$M/many" ] || fail "[$label] rm -r"
  for ((i = 0; i < 100; i++)); do
    [ "$(status_field "$M" free_blocks)" = "$free0" ] && break
    sleep 0.05
  done
  [ "$(status_field "$M" free_blocks)" = "$free0" ] ||
    fail "[$label] blocks not freed after rm -r: $(status_field "$M" free_blocks) != $free0"

  # --- O_EXCL, rename flags
  "$HELPER" excl "$M/x" || fail "[$label] O_EXCL create"
  expect_fail "[$label] O_EXCL on an existing name" EEXIST "$HELPER" excl "$M/x"
  echo one >"$M/x"
  echo two >"$M/y"
  expect_fail "[$label] RENAME_NOREPLACE" EEXIST "$HELPER" rename noreplace "$M/x" "$M/y"
  [ "$(cat "$M/x"):$(cat "$M/y")" = one:two ] || fail "[$label] NOREPLACE changed something"
  "$HELPER" rename noreplace "$M/x" "$M/z" || fail "[$label] RENAME_NOREPLACE to a free name"
  "$HELPER" rename exchange "$M/z" "$M/y" || fail "[$label] RENAME_EXCHANGE"
  [ "$(cat "$M/z"):$(cat "$M/y")" = two:one ] || fail "[$label] EXCHANGE did not swap"
  expect_fail "[$label] RENAME_EXCHANGE with a missing target" ENOENT \
    "$HELPER" rename exchange "$M/z" "$M/nothing"
  mv -f "$M/z" "$M/y"
  [ "$(cat "$M/y")" = two ] && [ ! -e "$M/z" ] || fail "[$label] rename over an existing file"

  # --- fallocate, mknod
  fallocate -l 1M "$M/fa"
  [ "$(stat -c %s "$M/fa")" = 1048576 ] || fail "[$label] fallocate size"
  cmp -n 1048576 "$M/fa" /dev/zero || fail "[$label] fallocated range is not zeros"
  fallocate -n -l 2M "$M/fa"
  [ "$(stat -c %s "$M/fa")" = 1048576 ] || fail "[$label] fallocate KEEP_SIZE changed the size"
  expect_fail "[$label] fallocate punch hole" "supported" fallocate -p -o 0 -l 4096 "$M/fa"
  # FIFOs are inert inodes to walfs; the pipe is the kernel's.
  mkfifo "$M/fifo" || fail "[$label] mkfifo"
  [ -p "$M/fifo" ] || fail "[$label] mkfifo made no FIFO"
  (cat "$M/fifo" >"$WORK/fifo.out") &
  echo through-the-pipe >"$M/fifo"
  wait $!
  [ "$(cat "$WORK/fifo.out")" = through-the-pipe ] || fail "[$label] FIFO did not pass data"
  mv "$M/fifo" "$M/fifo2" && ln "$M/fifo2" "$M/fifo3" || fail "[$label] rename/link a FIFO"
  [ "$(stat -c %h "$M/fifo3")" = 2 ] || fail "[$label] FIFO link count"
  rm "$M/fifo2" "$M/fifo3" || fail "[$label] unlink a FIFO"

  # --- WAL-like writes: O_DIRECT + O_DSYNC (wal_level=minimal, open_datasync)
  local seg=$M/000000010000000000000002
  local sync_before
  sync_before=$(status_field "$M" sync_writes)
  dd if="$WORK/rand" of="$seg" bs=8192 count=64 oflag=direct,dsync status=none ||
    fail "[$label] O_DIRECT|O_DSYNC write"
  cmp -n $((64 * 8192)) "$WORK/rand" "$seg" || fail "[$label] O_DIRECT data"
  [ "$(status_field "$M" sync_writes)" -gt "$sync_before" ] ||
    fail "[$label] O_DSYNC writes did not reach core as sync writes"
  dd if=/dev/zero of="$seg" bs=8192 count=1 seek=3 conv=notrunc,fdatasync status=none
  cmp -n 8192 -i $((3 * 8192)):0 "$seg" /dev/zero || fail "[$label] in-place page rewrite"
  dd if="$seg" of=/dev/null bs=8192 iflag=direct status=none || fail "[$label] O_DIRECT read"

  # --- open-unlinked file
  exec 3<"$M/hard"
  rm "$M/hard" "$M/rand2"
  [ ! -e "$M/rand2" ] || fail "[$label] unlink"
  cat <&3 | cmp - "$WORK/rand" || fail "[$label] read through an fd of an unlinked file"
  exec 3<&-

  # --- umask and caller ids
  (umask 077 && touch "$M/um" && mkdir "$M/umd")
  [ "$(stat -c %a "$M/um"):$(stat -c %a "$M/umd")" = 600:700 ] ||
    fail "[$label] umask 077: $(stat -c %a "$M/um") $(stat -c %a "$M/umd")"
  (umask 022 && touch "$M/um2")
  [ "$(stat -c %a "$M/um2")" = 644 ] || fail "[$label] umask 022"

  # --- permissions for another user (allow_other + default_permissions)
  mkdir -m 0700 "$M/priv"
  echo secret >"$M/priv/f"
  echo open >"$M/pub"
  chmod 0644 "$M/pub"
  echo closed >"$M/p600"
  chmod 0600 "$M/p600"
  [ "$(runuser -u nobody -- cat "$M/pub")" = open ] || fail "[$label] nobody cannot read a 0644 file"
  expect_fail "[$label] nobody reads a 0600 file" "Permission denied" runuser -u nobody -- cat "$M/p600"
  expect_fail "[$label] nobody lists a 0700 directory" "Permission denied" \
    runuser -u nobody -- ls "$M/priv"
  expect_fail "[$label] nobody creates in a 0755 root-owned directory" "Permission denied" \
    runuser -u nobody -- touch "$M/nobodys"
  expect_fail "[$label] nobody writes a 0644 file" "Permission denied" \
    runuser -u nobody -- sh -c "echo x >>'$M/pub'"
  chmod 1777 "$M"
  runuser -u nobody -- touch "$M/nobodys" || fail "[$label] nobody creates in a 1777 directory"
  [ "$(stat -c %u:%g "$M/nobodys")" = "$(id -u nobody):$(id -g nobody)" ] ||
    fail "[$label] new file not owned by its creator: $(stat -c %u:%g "$M/nobodys")"
  expect_fail "[$label] nobody removes root's file in a sticky directory" "" \
    runuser -u nobody -- rm -f "$M/pub"
  chmod 0755 "$M"

  # --- set-user-ID / set-group-ID: a write or an O_TRUNC open by a caller without
  # CAP_FSETID clears them (ext4: S_ISGID only with group execute), root's write keeps them
  touch "$M/suid"
  chmod 6777 "$M/suid"
  runuser -u nobody -- sh -c "echo x >>'$M/suid'" || fail "[$label] nobody appends to a 6777 file"
  [ "$(stat -c %a "$M/suid")" = 777 ] ||
    fail "[$label] a write by another user left mode $(stat -c %a "$M/suid") (ext4: 777)"
  chmod 6777 "$M/suid"
  runuser -u nobody -- sh -c ": >'$M/suid'" || fail "[$label] nobody truncates a 6777 file"
  [ "$(stat -c %a "$M/suid")" = 777 ] ||
    fail "[$label] an O_TRUNC open by another user left mode $(stat -c %a "$M/suid") (ext4: 777)"
  chmod 2767 "$M/suid"
  runuser -u nobody -- sh -c "echo x >>'$M/suid'" || fail "[$label] nobody appends to a 2767 file"
  [ "$(stat -c %a "$M/suid")" = 2767 ] ||
    fail "[$label] set-group-ID without group execute cleared: $(stat -c %a "$M/suid") (ext4: 2767)"
  chmod 6777 "$M/suid"
  echo x >>"$M/suid"
  [ "$(stat -c %a "$M/suid")" = 6777 ] || fail "[$label] root's write cleared the bits"

  # --- fsync counters
  local f0 d0 f1 d1
  f0=$(status_field "$M" fuse_fsync)
  d0=$(status_field "$M" fuse_fsyncdir)
  sync "$M/y" && sync -d "$M/y" && sync "$M/y" || fail "[$label] fsync failed"
  sync "$M/umd" && sync "$M/umd" || fail "[$label] directory fsync failed"
  f1=$(status_field "$M" fuse_fsync)
  d1=$(status_field "$M" fuse_fsyncdir)
  case $(status_field "$M" fsync_shortcut) in
    true)
      [ $((f1 - f0)) -le 1 ] || fail "[$label] $((f1 - f0)) FSYNCs reached the daemon after ENOSYS"
      ;;
    false)
      [ $((f1 - f0)) -ge 3 ] || fail "[$label] only $((f1 - f0)) of 3 fsyncs reached the daemon"
      [ "$(status_field "$M" fsyncs)" -ge 3 ] || fail "[$label] core Fsync not called"
      ;;
    *) fail "[$label] no fsync_shortcut in the status document" ;;
  esac
  # Namespace changes are durable at their reply in both modes: FSYNCDIR is answered
  # ENOSYS unless durability=strict.
  case $(status_field "$M" fsyncdir_shortcut) in
    true)
      [ $((d1 - d0)) -le 1 ] || fail "[$label] $((d1 - d0)) FSYNCDIRs reached the daemon after ENOSYS"
      ;;
    false)
      [ $((d1 - d0)) -ge 2 ] || fail "[$label] only $((d1 - d0)) of 2 directory fsyncs reached the daemon"
      ;;
    *) fail "[$label] no fsyncdir_shortcut in the status document" ;;
  esac

  # --- clean unmount
  local pid=$WALFS_PID
  umount_walfs "$M"
  wait "$pid" || fail "[$label] daemon exited with status $? after unmount"
  ! mountpoint -q "$M" || fail "[$label] still mounted"
  # A pool only this walfs wrote: its journal says free space is zero, so no mount reads
  # it (core/pool_state.h).
  if grep -q "free space checked ahead" "$WALFS_LOG"; then
    fail "[$label] the daemon read the free space of a pool walfs kept zero"
  fi
  # As a walfs before that flag leaves a pool: pmem mode checks free space ahead of
  # allocation in the background (done long before the unmount on a pool this size),
  # msync mode leaves it to the allocations. Once checked, the clean unmount says so,
  # and the next mount reads nothing again.
  "$DAMAGE" "$pool" untrusted-free-space || fail "[$label] walfs_damage failed"
  mount_walfs "$pool" "$M" -o allow_other,default_permissions "$@"
  if [ "$want_mode" = pmem ]; then
    local i
    for ((i = 0; i < 100; i++)); do
      grep -q "free space checked ahead of allocation: [0-9.]* MiB" "$WALFS_LOG" && break
      sleep 0.1
    done
    grep -q "free space checked ahead of allocation: [0-9.]* MiB" "$WALFS_LOG" ||
      fail "[$label] no background free-space check of an older walfs's pool"
  fi
  pid=$WALFS_PID
  umount_walfs "$M"
  wait "$pid" || fail "[$label] daemon exited with status $? after unmount"
  if [ "$want_mode" = msync ] && grep -q "free space checked ahead" "$WALFS_LOG"; then
    fail "[$label] msync mode read its free space in the background"
  fi
  if [ "$want_mode" = pmem ]; then
    mount_walfs "$pool" "$M" -o allow_other,default_permissions "$@"
    pid=$WALFS_PID
    umount_walfs "$M"
    wait "$pid" || fail "[$label] daemon exited with status $? after unmount"
    if grep -q "free space checked ahead" "$WALFS_LOG"; then
      fail "[$label] free space read again after a mount that checked all of it"
    fi
  fi
  log "[$label] ok"
}

# Forced-PMEM pools live on tmpfs (/dev/shm) when it has room (containers often give
# it 64M); PMEM_IS_PMEM_FORCE works on any file, so the work directory is the fallback.
if [ -d /dev/shm ] && [ "$(df -k --output=avail /dev/shm | tail -1)" -ge 400000 ]; then
  SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
  on_exit "rm -rf '$SHM'"
else
  SHM=$WORK
fi

export PMEM_IS_PMEM_FORCE=1
run_suite pmem "$SHM/pool" pmem
run_suite strict "$SHM/pool-strict" pmem -o durability=strict
unset PMEM_IS_PMEM_FORCE
run_suite msync "$WORK/pool-msync" msync

log "fs_basic: all checks passed"
