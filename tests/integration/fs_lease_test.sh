#!/usr/bin/env bash
# The daemon side of direct access (fs/lease_protocol.h) on a real mount, driven by
# walfs_lease_probe (a minimal client) so that it is tested apart from the library:
#  - pmem mode gives a session: the hello comes from root over the socket the probe bound
#    in the mount, with this pool's descriptor (read-write, its superblock's uuid) and a
#    stamps memfd sealed against writes, shrinking and growing, and no power-cut image;
#  - it grants a lease on a written file: the reply carries no path, has the session's
#    uuid, covers the file's size with runs inside the data area, its stamp is in the
#    stamps word, and a store through the session's pool descriptor reads back through
#    the mount;
#  - refusals: a read-only handle (EBADF), an empty file (ENODATA), a directory or
#    another command (ENOTTY), msync mode (EOPNOTSUPP for a write lease, and for a
#    lease asked without a session; sessions there say reads only and read leases are
#    granted); each counted in status;
#  - while a lease is held: truncate below it fails with ETXTBSY from any process;
#    unlinking it keeps its blocks (df, a new segment does not get them) until release;
#    status shows it active;
#  - release sets mtime;
#  - a daemon will not mount a pool while a client holds its lock, and names the holder;
#    neither fsck --repair nor mkfs --force touch it then;
#  - fsck is clean at the end.
source "$(dirname "$0")/lib/common.sh"

require_fuse
PROBE=$WALFS_BUILD_DIR/tests/tools/walfs_lease_probe
[ -x "$PROBE" ] || fail "probe not built: $PROBE"
reexec_in_mount_namespace "$@"

WORK=$(make_workdir)
if [ -d /dev/shm ] && [ "$(df -k --output=avail /dev/shm | tail -1)" -ge 200000 ]; then
  SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
  on_exit "rm -rf '$SHM'"
else
  SHM=$WORK
fi
SEG=000000010000000000000001


# wait_held FD: reads the holding probe's output up to its "held" line (the session's
# key=value lines come first).
wait_held() {
  local line
  while read -r line <&"$1"; do
    [ "$line" = held ] && return 0
    [[ "$line" == *=* ]] || fail "hold: $line"
  done
  fail "hold: no answer"
}

# probe_field OUTPUT KEY: one key=value of a `probe lease` answer.
probe_field() { sed -n "s/^$2=//p" <<<"$1"; }

# expect_refused WHAT ERRNO PROBE-ARGS...
expect_refused() {
  local what=$1 want=$2 out rc=0
  shift 2
  out=$("$PROBE" "$@" 2>&1) || rc=$?
  # (The session's key=value lines come first.)
  [ "$rc" = 3 ] && [ "$(tail -n 1 <<<"$out")" = "refused errno=$want" ] ||
    fail "$what: expected refusal $want, got (exit $rc): $out"
}

# --- pmem mode ----------------------------------------------------------------------
POOL=$SHM/pool
M=$WORK/mnt
make_pool "$POOL" 256M
export PMEM_IS_PMEM_FORCE=1
mount_walfs "$POOL" "$M"
on_failure "cat '$WALFS_LOG'"
[ "$(walfs_status_field "$M" mode)" = pmem ] || fail "not in pmem mode"

dd if=/dev/zero of="$M/$SEG" bs=1M count=16 status=none
out=$("$PROBE" lease "$M/$SEG") || fail "lease refused in pmem mode: $out"
# expect_field KEY VALUE: the probe's answer has KEY=VALUE.
expect_field() { [ "$(probe_field "$out" "$1")" = "$2" ] || fail "$1 is not $2: $out"; }
expect_field session ok
expect_field hello_version 4
expect_field durability 3
expect_field fds 2
expect_field peer_uid 0
expect_field pool_type regular
expect_field pool_access rdwr
expect_field pool_size "$(stat -c %s "$POOL")"
expect_field superblock_uuid_match 1
expect_field image_fd 0
# F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE (0x2 | 0x4 | 0x10), perhaps F_SEAL_SEAL.
(($(probe_field "$out" stamps_seals) & 0x16 == 0x16)) || fail "stamps seals: $out"
expect_field stamps_map_write EPERM
expect_field stamps_write EPERM
expect_field magic 0x4c534657
expect_field version 4
expect_field leased_size $((16 << 20))
expect_field reply_uuid_match 1
expect_field reply_stamps_id_match 1
[ "$(probe_field "$out" stamps_id)" != 0 ] || fail "no stamps id: $out"
expect_field runs_in_data_area 1
[ "$(probe_field "$out" stamp_word)" = "$(probe_field "$out" stamp)" ] || fail "stamp word: $out"
! grep -q -e path -e /dev/shm <<<"$out" || fail "a path in the session or the reply: $out"
[ "$(walfs_status_field "$M" leases_active)" = 0 ] || fail "lease still active after close"
[ "$(walfs_status_field "$M" leases_granted)" = 1 ] || fail "leases_granted"

log "a store through the pool mapping reads back through the mount"
mtime0=$(stat -c %Y.%y "$M/$SEG")
sleep 1.1
"$PROBE" store "$M/$SEG" 8192 8192 Q >/dev/null || fail "store through the lease"
cmp <(dd if="$M/$SEG" bs=8192 skip=1 count=1 status=none) <(head -c 8192 /dev/zero | tr '\0' Q) ||
  fail "stored bytes do not read back through the mount"
cmp -n 8192 "$M/$SEG" /dev/zero || fail "bytes outside the store changed"
[ "$(stat -c %Y.%y "$M/$SEG")" != "$mtime0" ] || fail "release did not update mtime"

log "refusals"
expect_refused "read-only handle" EBADF lease "$M/$SEG" --rdonly
: >"$M/empty"
expect_refused "empty file" ENODATA lease "$M/empty"
mkdir "$M/dir"
expect_refused "directory" ENOTTY lease "$M/dir" --rdonly
[ "$(walfs_status_field "$M" leases_refused)" -ge 2 ] || fail "refusals not counted"

log "truncate and unlink while a lease is held"
coproc HOLD { exec "$PROBE" hold "$M/$SEG"; }
hold_pid=$HOLD_PID
wait_held "${HOLD[0]}"
[ "$(walfs_status_field "$M" leases_active)" = 1 ] || fail "held lease not active in status"
out=$(truncate -s 8M "$M/$SEG" 2>&1) && fail "truncate below a held lease succeeded"
[[ "$out" == *"Text file busy"* ]] || fail "truncate: expected ETXTBSY, got: $out"
out=$(truncate -s 0 "$M/$SEG" 2>&1) && fail "truncate to 0 under a lease succeeded"
truncate -s $((16 << 20)) "$M/$SEG" || fail "truncate to the same size refused"
[ "$(stat -c %s "$M/$SEG")" = $((16 << 20)) ] || fail "size changed under the lease"
free_with=$(walfs_status_field "$M" free_blocks)
rm "$M/$SEG"
sync
[ "$(walfs_status_field "$M" free_blocks)" = "$free_with" ] || fail "unlinked leased file's blocks were freed"
dd if=/dev/zero of="$M/000000010000000000000002" bs=1M count=16 status=none
cmp "$M/000000010000000000000002" <(head -c $((16 << 20)) /dev/zero) ||
  fail "a new segment does not read as zeros"
exec {HOLD[1]}>&-
wait "$hold_pid" 2>/dev/null || true
for ((i = 0; i < 100; i++)); do
  [ "$(walfs_status_field "$M" leases_active)" = 0 ] && break
  sleep 0.05
done
[ "$(walfs_status_field "$M" leases_active)" = 0 ] || fail "lease still active after the holder closed"
for ((i = 0; i < 100; i++)); do
  [ "$(walfs_status_field "$M" free_blocks)" = "$free_with" ] && break
  sleep 0.05
done
# The unlinked segment's 16 MiB came back once the lease went (the new one took 16 MiB).
[ "$(walfs_status_field "$M" free_blocks)" = "$free_with" ] ||
  fail "unlinked leased file not reclaimed after release ($(walfs_status_field "$M" free_blocks) != $free_with)"

log "a client holding the pool keeps a new daemon from mounting it"
coproc HOLD2 { exec "$PROBE" hold "$M/000000010000000000000002"; }
hold_pid=$HOLD2_PID
wait_held "${HOLD2[0]}"
kill -9 "$WALFS_PID"
wait "$WALFS_PID" 2>/dev/null || true
fusermount3 -u -z "$M" 2>/dev/null || true
out=$("$WALFS" "$POOL" "$M" -f 2>&1) && fail "walfs mounted a pool a client still holds"
[[ "$out" == *"still mapped by direct-access clients"*"pid $hold_pid (walfs_lease_pro"* ]] ||
  fail "refusal does not name the holder (pid $hold_pid): $out"
! mountpoint -q "$M" || fail "mounted anyway"
# Neither may a repair or a new mkfs rewrite the pool under it.
out=$("$FSCK" --repair "$POOL" 2>&1) && fail "fsck --repair ran on a pool a client holds"
[[ "$out" == *"still mapped by direct-access clients"* ]] || fail "fsck --repair: $out"
out=$("$MKFS" --force --size 256M "$POOL" 2>&1) && fail "mkfs --force ran on a pool a client holds"
[[ "$out" == *"still mapped by direct-access clients"* ]] || fail "mkfs --force: $out"
"$FSCK" "$POOL" >/dev/null || fail "a read-only fsck is refused while a client holds the pool"
exec {HOLD2[1]}>&-
wait "$hold_pid" 2>/dev/null || true  # its FUSE file is gone with the daemon
mount_walfs "$POOL" "$M"
cmp "$M/000000010000000000000002" <(head -c $((16 << 20)) /dev/zero) || fail "segment after remount"
umount_walfs "$M"
"$FSCK" "$POOL" >/dev/null || fail "fsck after the lease tests: $("$FSCK" "$POOL" 2>&1)"

# --- msync mode: read leases only (L7) ------------------------------------------------
unset PMEM_IS_PMEM_FORCE
POOL2=$WORK/pool-msync
M2=$WORK/mnt-msync
make_pool "$POOL2" 64M
mount_walfs "$POOL2" "$M2"
dd if=/dev/zero of="$M2/$SEG" bs=1M count=16 status=none
[ "$(walfs_status_field "$M2" direct_access)" = False ] || fail "msync mode offers direct writes"
[ "$(walfs_status_field "$M2" direct_reads)" = True ] || fail "msync mode offers no direct reads"
# A session says reads only; a write lease is refused, a read lease granted.
expect_refused "msync mode, write lease" EOPNOTSUPP lease "$M2/$SEG"
out=$("$PROBE" session "$M2/$SEG" 2>&1) || fail "msync mode: no session: $out"
[ "$(probe_field "$out" durability)" = 4 ] || fail "msync mode: the hello does not say reads only: $out"
out=$("$PROBE" lease "$M2/$SEG" --read 2>&1) || fail "msync mode: read lease refused: $out"
[ "$(probe_field "$out" access)" = 2 ] || fail "msync mode: not a read lease: $out"
[ "$(probe_field "$out" runs_in_data_area)" = 1 ] || fail "msync mode: read lease runs: $out"
[ "$(walfs_status_field "$M2" read_leases_granted)" = 1 ] || fail "msync mode: read lease not counted"
[ "$(walfs_status_field "$M2" leases_granted)" = 0 ] || fail "msync mode granted a write lease"
expect_refused "msync mode, lease without a session" EOPNOTSUPP lease "$M2/$SEG" --no-session
(($(walfs_status_field "$M2" leases_refused) >= 2)) || fail "msync refusals not counted"
umount_walfs "$M2"

log "fs_lease: all checks passed"
