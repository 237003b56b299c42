#!/usr/bin/env bash
# Damaged pools at the mount level. A pool is populated through a real mount (WAL
# segments, a .history file, archive_status/, a nested directory), then for each kind of
# damage (tests/tools/walfs_damage --list) a copy is damaged and:
#  - the daemon refuses to mount it, naming the problem, and leaves no mount behind;
#  - fsck.walfs reports it (exit 4);
#  - fsck.walfs --repair either repairs it (exit 1; then fsck exits 0, the daemon mounts
#    it and every file reads back byte for byte) or, when no repair is safe, changes
#    nothing it cannot fix, says so and exits with 4 set (4, or 5 when something else
#    on the way was repaired), and the daemon still refuses.
# journal-torn is the one harmless kind: bytes that fail the journal CRC are what a
# transaction torn before its commit point leaves, so the daemon mounts and fsck is clean.
# free-space is not found by the daemon: the pool's newest transaction says walfs kept
# free space zero (core/pool_state.h), so the mount trusts it without reading it; fsck
# reports the block, says that walfs did not write it, and repairs it.
# free-space-untrusted (the same in a pool whose journal does not say so, as an older
# walfs leaves it) is found later than at the mount: the daemon refuses the scribbled
# blocks when they are first allocated, before any file gets them; fsck reports and
# repairs it as before.
source "$(dirname "$0")/lib/common.sh"
require_fuse
DAMAGE=$WALFS_BUILD_DIR/tests/tools/walfs_damage
[ -x "$DAMAGE" ] || fail "not built: $DAMAGE"

W=$(make_workdir)
MNT=$W/mnt
mkdir -p "$MNT"
OUT=$W/out
on_exit "fusermount3 -u -z '$MNT'"

# Content hashes of every regular file under a mount, by path.
hashes() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }

log "populating a pool through the daemon"
make_pool "$W/pristine.pool" 64M --segment-size 1M
mount_walfs "$W/pristine.pool" "$MNT"
head -c $((1 << 20)) /dev/urandom >"$MNT/000000010000000000000001"
head -c 300000 /dev/urandom >"$MNT/000000010000000000000002"
printf '1\t0/3000028\tno recovery target specified\n' >"$MNT/00000002.history"
mkdir -p "$MNT/archive_status" "$MNT/dir/sub"
touch "$MNT/archive_status/000000010000000000000001.ready"
head -c 9000 /dev/urandom >"$MNT/dir/sub/note"
hashes "$MNT" >"$W/expected"
umount_walfs "$MNT"
"$FSCK" "$W/pristine.pool" >"$OUT" || { cat "$OUT" >&2; fail "the pristine pool is not clean"; }

# expect_refused POOL PATTERN: the daemon exits non-zero naming PATTERN, no mount left.
expect_refused() {
  local pool=$1 pattern=$2 rc=0
  timeout 30 "$WALFS" "$pool" "$MNT" -f >"$OUT" 2>&1 || rc=$?
  if mountpoint -q "$MNT" || grep -q " $MNT " /proc/mounts; then
    fusermount3 -u -z "$MNT"
    fail "$kind: the daemon left a mount behind"
  fi
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$OUT" >&2; fail "$kind: the daemon did not refuse (exit $rc)"; }
  grep -Eq -- "$pattern" "$OUT" || { cat "$OUT" >&2; fail "$kind: the daemon's refusal lacks /$pattern/"; }
}

# expect_fsck RC PATTERN ARGS...: fsck.walfs ARGS exits RC and prints PATTERN.
expect_fsck() {
  local want=$1 pattern=$2 rc=0
  shift 2
  "$FSCK" "$@" >"$OUT" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || { cat "$OUT" >&2; fail "$kind: fsck.walfs $* exited $rc, expected $want"; }
  [ -z "$pattern" ] || grep -Eq -- "$pattern" "$OUT" ||
    { cat "$OUT" >&2; fail "$kind: fsck.walfs $* lacks /$pattern/"; }
}

# expect_intact POOL [--by-content]: mounts POOL, compares every file with the pristine
# tree (by path, or only as a multiset of contents for a file fsck gave a new name).
expect_intact() {
  mount_walfs "$1" "$MNT"
  hashes "$MNT" >"$W/got"
  umount_walfs "$MNT"
  if [ "${2:-}" = --by-content ]; then
    diff <(cut -d' ' -f1 "$W/expected" | sort) <(cut -d' ' -f1 "$W/got" | sort) >&2 ||
      fail "$kind: file contents differ after repair"
    grep -q '/#[0-9]' "$W/got" || fail "$kind: no reattached #<ino> file after repair"
  else
    diff "$W/expected" "$W/got" >&2 || fail "$kind: files differ after repair"
  fi
}

# kind | daemon's refusal | fsck's report | repair exit | repair output (refusals)
CASES=(
  "sb-a-crc|superblock A \(offset 0\) is damaged: bad crc \(stored|superblock A: bad crc|1|"
  "sb-b-crc|superblock B \(offset 4096\) is damaged: bad crc \(stored|superblock B: bad crc|1|"
  "sb-both|both superblocks are damaged|no valid superblock|4|not repaired: 3 error"
  "journal-garbage|committed transaction 1000 is invalid: entry 0: offset 4096 lies outside|committed transaction 1000 is invalid|1|"
  "extent-outside|lies outside the data area|lies outside the data area|4|may hold data of inode"
  "overlap|overlaps another inode|overlaps inode|4|no safe automatic repair"
  "nlink|link count 5 but 1 links|link count is 5 but 1 entries name it|1|"
  "dir-cycle|directory cycle|form a cycle that the root does not reach|5|no safe automatic repair"
  "state-crc|state record \(offset 73728\): bad crc|state record: bad crc|1|"
  "state-uninit|lies in the range no file has used since mkfs|owned by a file but lie in the range no file has used since mkfs|1|"
  "state-size|does not fit in the region of [0-9]+ bytes|state record: data area of [0-9]+ blocks at offset [0-9]+ does not fit|1|"
  "lost-file|live but has no name|is not reachable from the root directory|1|"
  "inode-crc|inode [0-9]+ \(offset [0-9]+\): bad crc \(stored|bad crc \(stored|4|no safe automatic repair"
  "dirent-free-inode|it names inode [0-9]+, which is free|which is free|1|"
  "truncated|truncated pool|truncated pool|4|no safe automatic repair"
)
for c in "${CASES[@]}"; do
  IFS='|' read -r kind refusal report repair_rc repair_msg <<<"$c"
  log "damage: $kind"
  P=$W/$kind.pool
  cp --sparse=always "$W/pristine.pool" "$P"
  "$DAMAGE" "$P" "$kind" || fail "$kind: walfs_damage failed"
  expect_refused "$P" "$refusal"
  expect_fsck 4 "$report" "$P"
  expect_fsck 4 "\"clean\":false" --json "$P"
  expect_fsck "$repair_rc" "$repair_msg" --repair "$P"
  if [ "$repair_rc" = 1 ]; then
    expect_fsck 0 "" "$P"
    if [ "$kind" = lost-file ]; then expect_intact "$P" --by-content; else expect_intact "$P"; fi
  else
    expect_fsck 4 "$report" "$P"
    expect_refused "$P" "$refusal"
  fi
  rm -f "$P"
done

log "damage: journal-torn (harmless by design)"
kind=journal-torn
P=$W/$kind.pool
cp --sparse=always "$W/pristine.pool" "$P"
"$DAMAGE" "$P" "$kind" || fail "$kind: walfs_damage failed"
expect_fsck 0 "" "$P"
expect_fsck 0 "bad crc: torn before its commit point" -v "$P"
expect_intact "$P"

log "damage: free-space (trusted by the mount, found by fsck)"
kind=free-space
P=$W/$kind.pool
cp --sparse=always "$W/pristine.pool" "$P"
"$DAMAGE" "$P" "$kind" || fail "$kind: walfs_damage failed"
expect_fsck 4 "although the journal says walfs kept free space zero" "$P"
mount_walfs "$P" "$MNT"
hashes "$MNT" >"$W/got"
diff "$W/expected" "$W/got" >&2 || fail "$kind: files differ on the damaged pool"
grep -q "free space checked ahead" "$WALFS_LOG" && fail "$kind: the daemon read free space"
umount_walfs "$MNT"
expect_fsck 1 "" --repair "$P"
expect_fsck 0 "" "$P"
expect_intact "$P"
rm -f "$P"

log "damage: free-space-untrusted (refused when first allocated)"
kind=free-space-untrusted
P=$W/$kind.pool
cp --sparse=always "$W/pristine.pool" "$P"
"$DAMAGE" "$P" "$kind" || fail "$kind: walfs_damage failed"
expect_fsck 4 "owned by no inode are not zero" "$P"
mount_walfs "$P" "$MNT"
hashes "$MNT" >"$W/got"
diff "$W/expected" "$W/got" >&2 || fail "$kind: files differ on the damaged pool"
# The scribbled block is the lowest free one, where the next segment's extent starts.
seg=$MNT/000000010000000000000009
if head -c 8192 /dev/zero >"$seg" 2>"$OUT"; then fail "$kind: a segment got the scribbled block"; fi
[ ! -e "$seg" ] || fail "$kind: the refused segment exists"
grep -q "is free space but not zero; it is not handed out" "$WALFS_LOG" ||
  { cat "$WALFS_LOG" >&2; fail "$kind: the daemon did not log the refused block"; }
printf x >"$MNT/small" || fail "$kind: a small file (from the top of the pool) was refused"
rm "$MNT/small"
umount_walfs "$MNT"
expect_fsck 4 "owned by no inode are not zero" "$P"
expect_fsck 1 "" --repair "$P"
expect_fsck 0 "" "$P"
expect_intact "$P"
mount_walfs "$P" "$MNT"
head -c 8192 /dev/urandom >"$seg" || fail "$kind: no segment after the repair"
umount_walfs "$MNT"
rm -f "$P"

log "every kind the damage tool knows is covered"
for k in $("$DAMAGE" --list | cut -d' ' -f1); do
  [ "$k" = journal-torn ] && continue
  [ "$k" = free-space ] && continue
  [ "$k" = free-space-untrusted ] && continue
  [ "$k" = untrusted-free-space ] && continue  # not damage (fs_basic_test.sh)
  [ "$k" = symlink-parent ] && continue  # a crafted pool for export (tools_test.sh)
  covered=0
  for c in "${CASES[@]}"; do [ "${c%%|*}" = "$k" ] && covered=1; done
  [ "$covered" = 1 ] || fail "damage kind $k has no case here"
done
! grep -q " $MNT " /proc/mounts || fail "a mount was left behind"
log "PASS"
