#!/bin/bash
# libwalfs-direct.so against a real FUSE mount of type fuse.walfs: a minimal lease
# server (tests/integration/direct/lease_server.cc) stands in for the daemon until the
# daemon's lease ioctl lands. The same client runs preloaded (writes inside the lease
# reach the pool with no FUSE WRITE, the pool is read-locked while open), without the
# library, and preloaded with WALFS_DIRECT=0 (every write is a FUSE WRITE).
source "$(dirname "$0")/lib/common.sh"
reexec_in_mount_namespace "$@"
[ -c /dev/fuse ] || skip "/dev/fuse is missing"
command -v fusermount3 >/dev/null || skip "fusermount3 is missing (apt-get install fuse3)"
SERVER=$WALFS_BUILD_DIR/tests/integration/walfs_direct_lease_server
CLIENT=$WALFS_BUILD_DIR/tests/integration/walfs_direct_lease_client
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
for f in "$SERVER" "$CLIENT" "$LIB"; do [ -e "$f" ] || fail "not built: $f"; done

dir=$(mktemp -d /dev/shm/walfs-direct-lease.XXXXXX)
on_exit "rm -rf '$dir'"
mkdir "$dir/mnt"
"$SERVER" "$dir/pool" "$dir/mnt" 2>"$dir/server.log" &
server=$!
on_exit "fusermount3 -u -z '$dir/mnt'; kill $server; wait $server"
on_failure "cat '$dir/server.log'"
for _ in $(seq 100); do
  [ "$(findmnt -n -o FSTYPE --mountpoint "$dir/mnt" 2>/dev/null)" = fuse.walfs ] && break
  sleep 0.1
done
[ "$(findmnt -n -o FSTYPE --mountpoint "$dir/mnt")" = fuse.walfs ] || fail "lease server did not mount"

log "preloaded"
LD_PRELOAD=$LIB WALFS_DIRECT_DEBUG=1 "$CLIENT" direct "$dir/mnt" "$dir/pool" 2>"$dir/client.log" \
  || { cat "$dir/client.log" >&2; fail "preloaded client"; }
cat "$dir/client.log" >&2
grep -q "walfs-direct: .*lease granted: walfs inode 2, 45056 bytes in 2 run(s)" "$dir/client.log" \
  || fail "no 'lease granted' line in the debug log"
grep -q "walfs-direct: .*no lease: ioctl: Bad file descriptor" "$dir/client.log" \
  && fail "a read-only open asked for a lease"

log "not preloaded"
"$CLIENT" fuse "$dir/mnt" "$dir/pool" || fail "client without the library"

log "preloaded, WALFS_DIRECT=0"
LD_PRELOAD=$LIB WALFS_DIRECT=0 WALFS_DIRECT_DEBUG=1 "$CLIENT" fuse "$dir/mnt" "$dir/pool" \
  2>"$dir/inert.log" || { cat "$dir/inert.log" >&2; fail "inert client"; }
grep -q "lease granted" "$dir/inert.log" && fail "WALFS_DIRECT=0 still took a lease"

fusermount3 -u "$dir/mnt"
wait $server || fail "lease server exited with an error"
log "PASS"
