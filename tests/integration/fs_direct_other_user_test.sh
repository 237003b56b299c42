#!/usr/bin/env bash
# A user who is not the pool's owner, with a writable handle (L5 in docs/design/lease.md).
# The daemon runs as root with allow_other,default_permissions (as fs_security_test.sh
# mounts), the pool is root's, nobody writes a 0666 file in a 0777 mount root:
#  - its session and lease ioctls get EPERM, and no hello (no descriptor) reaches its
#    socket;
#  - nothing of the pool (no descriptor, no mapping) and no memfd appears in its
#    /proc/<pid>/fd or /proc/<pid>/maps, neither after the raw ioctls nor after writes
#    through a preloaded libwalfs-direct.so;
#  - its writes succeed through FUSE and read back; the daemon counts no lease for it;
#  - the same probe as root (the owner) does get a session and a lease: the check can fail.
source "$(dirname "$0")/lib/common.sh"

require_fuse
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
PROBE=$WALFS_BUILD_DIR/tests/tools/walfs_foreign_probe
[ -f "$LIB" ] || fail "direct-access library not built: $LIB"
[ -x "$PROBE" ] || fail "walfs_foreign_probe not built: $PROBE"
id nobody >/dev/null 2>&1 || skip "no user nobody"
reexec_in_mount_namespace "$@"

WORK=$(make_workdir)
SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
on_exit "rm -rf '$SHM'"
SEG=000000010000000000000001
POOL=$SHM/pool
M=$WORK/mnt
make_pool "$POOL" 64M
PMEM_IS_PMEM_FORCE=1 mount_walfs "$POOL" "$M" -o allow_other,default_permissions
on_failure "cat '$WALFS_LOG'"
chmod 0777 "$M"
dd if=/dev/zero of="$M/$SEG" bs=1M count=16 status=none
chmod 0666 "$M/$SEG"
POOL_ID=$(python3 -c 'import os, sys; s = os.stat(sys.argv[1]); print(f"{s.st_dev}:{s.st_ino}")' "$POOL")

as_nobody() { setpriv --reuid nobody --regid nogroup --clear-groups "$@"; }

log "nobody: raw session and lease ioctls"
granted0=$(walfs_status_field "$M" leases_granted)
writes0=$(walfs_status_field "$M" writes)
out=$(as_nobody "$PROBE" "$M/$SEG" "$POOL_ID" --ioctls) || fail "probe as nobody: $out"
printf '%s\n' "$out" | sed 's/^/  /' >&2
grep -qx 'session=EPERM' <<<"$out" || fail "nobody's session ioctl: $(grep '^session=' <<<"$out")"
grep -qx 'lease=EPERM' <<<"$out" || fail "nobody's lease ioctl: $(grep '^lease=' <<<"$out")"
grep -qx 'hello=none' <<<"$out" || fail "nobody got a hello: $(grep '^hello=' <<<"$out")"
grep -qx 'write=ok' <<<"$out" || fail "nobody's write: $(grep '^write=' <<<"$out")"
grep -qx 'clean' <<<"$out" || fail "nobody holds something of the pool: $(grep -e '^pool' -e '^memfd' <<<"$out")"
[ "$(walfs_status_field "$M" leases_granted)" = "$granted0" ] || fail "a lease was granted to nobody"
(($(walfs_status_field "$M" writes) == writes0 + 1)) || fail "nobody's write did not go through FUSE"
cmp <(head -c 8192 "$M/$SEG") <(head -c 8192 /dev/zero | tr '\0' n) || fail "nobody's write does not read back"
# No socket node of nobody's is left in the mount root.
[ -z "$(find "$M" -maxdepth 1 -type s)" ] || fail "socket nodes left in the mount: $(find "$M" -maxdepth 1 -type s)"

log "nobody: writes through the preloaded library"
writes0=$(walfs_status_field "$M" writes)
out=$(as_nobody env LD_PRELOAD="$LIB" WALFS_DIRECT_DEBUG=1 "$PROBE" "$M/$SEG" "$POOL_ID" 2>"$WORK/lib.log") ||
  fail "preloaded probe as nobody: $out"
printf '%s\n' "$out" | sed 's/^/  /' >&2
grep -qx 'write=ok' <<<"$out" || fail "nobody's preloaded write: $(grep '^write=' <<<"$out")"
grep -qx 'clean' <<<"$out" || fail "the library gave nobody something of the pool: $(grep -e '^pool' -e '^memfd' <<<"$out")"
[ "$(walfs_status_field "$M" leases_granted)" = "$granted0" ] || fail "a lease was granted to nobody's library"
(($(walfs_status_field "$M" writes) == writes0 + 1)) || fail "nobody's preloaded write did not go through FUSE"

log "root (the pool's owner): the same probe gets a session and a lease"
out=$("$PROBE" "$M/$SEG" "$POOL_ID" --ioctls) || fail "probe as root: $out"
printf '%s\n' "$out" | sed 's/^/  /' >&2
grep -qx 'session=0' <<<"$out" || fail "root's session ioctl: $(grep '^session=' <<<"$out")"
grep -qx 'hello=2 descriptors' <<<"$out" || fail "root's hello: $(grep '^hello=' <<<"$out")"
grep -qx 'lease=0' <<<"$out" || fail "root's lease ioctl: $(grep '^lease=' <<<"$out")"
grep -q '^pool fd' <<<"$out" || fail "the probe did not see the pool descriptor it was given"

umount_walfs "$M"
"$FSCK" "$POOL" >/dev/null || fail "fsck: $("$FSCK" "$POOL" 2>&1)"
log "fs_direct_other_user: all checks passed"
