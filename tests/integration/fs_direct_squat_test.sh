#!/usr/bin/env bash
# Nothing outside the mount for another user to squat on (L8 in docs/design/lease.md).
# Before each mount, nobody pre-creates, as regular files, directories or symlinks, every
# name a walfs daemon ever created outside its mount: the revocation stamps file
# /dev/shm/walfs-leases.<pool dev>.<pool ino> and the power-cut image
# /dev/shm/walfs-powercut.<dev>.<ino> (the daemon runs with powercut_sim where the build
# has it). Then:
#  - the daemon mounts, and a preloaded writer still gets leases: its writes are stored
#    directly (no FUSE WRITE), read back through the mount, and the lease ends at close;
#  - the squatted names are untouched (a symlink's target keeps its bytes);
#  - nobody cannot create a name under the session prefix in the mount root, and the
#    writer gets its lease after nobody tried;
#  - fsck.walfs is clean after unmount.
source "$(dirname "$0")/lib/common.sh"

require_fuse
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
[ -f "$LIB" ] || fail "direct-access library not built: $LIB"
command -v cc >/dev/null || skip "no C compiler for the test client (cc)"
id nobody >/dev/null 2>&1 || skip "no user nobody"
reexec_in_mount_namespace "$@"

WORK=$(make_workdir)
SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
on_exit "rm -rf '$SHM'"
SEG=000000010000000000000001

CLIENT=$WORK/wclient
cc -O1 -o "$CLIENT" -x c - <<'EOF' || fail "cannot build the test client"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* write FILE COUNT CHAR: COUNT pwrites of 8 KiB from offset 0, each followed by fdatasync. */
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  int fd = open(argv[1], O_RDWR);
  if (fd < 0) { printf("open %s\n", strerrorname_np(errno)); return 1; }
  char buf[8192];
  memset(buf, argv[3][0], sizeof(buf));
  for (long i = 0; i < atol(argv[2]); i++) {
    if (pwrite(fd, buf, sizeof(buf), i * 8192) != sizeof(buf)) { printf("pwrite %s\n", strerrorname_np(errno)); return 1; }
    if (fdatasync(fd) != 0) { printf("fdatasync %s\n", strerrorname_np(errno)); return 1; }
  }
  return close(fd) == 0 ? 0 : 1;
}
EOF

# Every name outside the mount the daemon of branch main created, for POOL.
squat_names() {
  local dev ino
  dev=$(python3 -c 'import os, sys; print(os.stat(sys.argv[1]).st_dev)' "$1")
  ino=$(stat -c %i "$1")
  echo "/dev/shm/walfs-leases.$dev.$ino"
  echo "/dev/shm/walfs-powercut.$dev.$ino"
}

TARGET=$WORK/target  # where nobody's symlinks point: root's, must keep its bytes
head -c 65536 /dev/urandom >"$TARGET"
chmod 0666 "$TARGET"
target_sum=$(sha256sum <"$TARGET")

# The power-cut image exists only in builds with test facilities (-DWALFS_TEST_FACILITIES).
POWERCUT=
if "$WALFS" --help 2>&1 | grep -q powercut_sim; then POWERCUT=,powercut_sim; fi
log "daemon options: allow_other$POWERCUT"

round=0
for kind in file dir symlink; do
  round=$((round + 1))
  log "names squatted as ${kind}s by nobody before the mount"
  POOL=$SHM/pool$round
  M=$WORK/mnt$round
  make_pool "$POOL" 64M
  names=$(squat_names "$POOL")
  for name in $names; do
    on_exit "rm -rf '$name'"
    case $kind in
      file) runuser -u nobody -- sh -c 'printf squat >"$1" && chmod 0666 "$1"' _ "$name" ;;
      dir) runuser -u nobody -- mkdir -m 0777 "$name" ;;
      symlink) runuser -u nobody -- ln -s "$TARGET" "$name" ;;
    esac
    [ "$(stat -c %U "$name")" = nobody ] || fail "cannot squat $name as nobody"
  done
  PMEM_IS_PMEM_FORCE=1 mount_walfs "$POOL" "$M" -o "allow_other$POWERCUT"
  on_failure "echo '== daemon log (squat $kind)'; cat '$WALFS_LOG'"
  chmod 0777 "$M"
  if [ "$kind" = file ]; then
    for prefixed in .walfs-direct.squat .walfs-direct.x; do
      runuser -u nobody -- sh -c ': >"$1"' _ "$M/$prefixed" 2>/dev/null &&
        fail "nobody created $prefixed in the mount root"
      runuser -u nobody -- mkdir "$M/$prefixed.d" 2>/dev/null &&
        fail "nobody made a directory under the session prefix"
      runuser -u nobody -- ln -s /tmp "$M/$prefixed.l" 2>/dev/null &&
        fail "nobody made a symlink under the session prefix"
    done
  fi
  dd if=/dev/zero of="$M/$SEG" bs=1M count=16 status=none
  writes0=$(walfs_status_field "$M" writes)
  granted0=$(walfs_status_field "$M" leases_granted)
  out=$(LD_PRELOAD=$LIB "$CLIENT" "$M/$SEG" 16 s) || fail "$kind: the writer failed: $out"
  (($(walfs_status_field "$M" leases_granted) > granted0)) ||
    fail "$kind: no lease with the names squatted: $(grep -i -e lease -e direct "$WALFS_LOG" | tail -5)"
  [ "$(walfs_status_field "$M" writes)" = "$writes0" ] ||
    fail "$kind: $(($(walfs_status_field "$M" writes) - writes0)) writes went through FUSE"
  cmp <(head -c $((16 * 8192)) "$M/$SEG") <(head -c $((16 * 8192)) /dev/zero | tr '\0' s) ||
    fail "$kind: the writer's bytes do not read back through the mount"
  for ((i = 0; i < 100; i++)); do
    [ "$(walfs_status_field "$M" leases_active)" = 0 ] && break
    sleep 0.05
  done
  [ "$(walfs_status_field "$M" leases_active)" = 0 ] || fail "$kind: the lease outlived the writer"
  for name in $names; do
    case $kind in
      file) [ "$(cat "$name")" = squat ] && [ "$(stat -c %U "$name")" = nobody ] ||
        fail "$kind: $name was changed" ;;
      dir) [ -d "$name" ] && [ -z "$(ls -A "$name")" ] || fail "$kind: $name was changed" ;;
      symlink) [ "$(readlink "$name")" = "$TARGET" ] || fail "$kind: $name was changed" ;;
    esac
  done
  [ "$(sha256sum <"$TARGET")" = "$target_sum" ] || fail "$kind: the symlinks' target changed"
  umount_walfs "$M"
  "$FSCK" "$POOL" >/dev/null || fail "$kind: fsck: $("$FSCK" "$POOL" 2>&1)"
  rm -f "$POOL"
done

log "fs_direct_squat: all checks passed"
