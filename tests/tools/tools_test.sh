#!/usr/bin/env bash
# mkfs.walfs, fsck.walfs and walfsctl on real pool files: option parsing, refusals,
# exit codes, damage injected with dd, inspect/export, status formatting. When the
# daemon and /dev/fuse are there, a pool populated through a real mount is also checked
# and exported.
source "$(dirname "$0")/../integration/lib/common.sh"

for tool in "$MKFS" "$FSCK" "$WALFSCTL"; do
  [ -x "$tool" ] || fail "not built: $tool"
done

W=$(make_workdir)
OUT=$W/out
ERR=$W/err

# expect_rc RC CMD...: runs CMD (stdout -> $OUT, stderr -> $ERR), fails unless it exits RC.
expect_rc() {
  local want=$1 got=0
  shift
  "$@" >"$OUT" 2>"$ERR" || got=$?
  if [ "$got" != "$want" ]; then
    cat "$OUT" "$ERR" >&2
    fail "expected exit $want, got $got: $*"
  fi
}
expect_out() { grep -q -- "$1" "$OUT" || { cat "$OUT" >&2; fail "stdout lacks: $1"; }; }
expect_err() { grep -q -- "$1" "$ERR" || { cat "$ERR" >&2; fail "stderr lacks: $1"; }; }
file_size() { stat -c %s "$1"; }

# Superblock A is at offset 0, B at 4096; the capacity field is at byte 32 of each.
smash() { printf '%s' "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

log "mkfs: sizes and creation"
expect_rc 0 "$MKFS" --help
expect_out "1024"
expect_rc 0 "$MKFS" --size 64M "$W/a.pool"
expect_out "uuid"
expect_out "64.00 MiB"
[ "$(file_size "$W/a.pool")" = $((64 << 20)) ] || fail "64M is not 64 MiB"
[ "$(stat -c %a "$W/a.pool")" = 600 ] || fail "new pool is not mode 0600"
# One size syntax for every program (util/byte_size.h): every suffix is 1024-based.
for spec in 67108864 65536K 65536k 65536KB 64MiB 64m 64MB 64mb; do
  rm -f "$W/s.pool"
  expect_rc 0 "$MKFS" -q --size "$spec" "$W/s.pool"
  [ "$(file_size "$W/s.pool")" = $((64 << 20)) ] || fail "--size $spec is not 64 MiB"
done
rm -f "$W/s.pool"
expect_rc 0 "$MKFS" -q -s 1GiB "$W/s.pool"
[ "$(file_size "$W/s.pool")" = $((1 << 30)) ] || fail "1GiB is not 2^30"
rm -f "$W/s.pool"
for bad in "" 12Q 1.5G -5 M 64MBB 99999999999999999999; do
  expect_rc 1 "$MKFS" --size "$bad" "$W/bad.pool"
  expect_err "bad size"
  expect_err "64M, 64MB, 64MiB, 512k"
  expect_err "Try 'mkfs.walfs --help'"
done
[ ! -e "$W/bad.pool" ] || fail "a refused mkfs left a file"
expect_rc 1 "$MKFS" "$W/nosize.pool"
expect_err "size is required"
expect_rc 1 "$MKFS" --bogus "$W/x.pool"
expect_err "unknown option"
expect_rc 1 "$MKFS" --size 64M
expect_err "no POOL"

log "mkfs: segment sizes"
for bad in 3M 512K 2G 0 1000000; do
  expect_rc 1 "$MKFS" --size 64M --segment-size "$bad" "$W/seg.pool"
  expect_err "power of two"
done
expect_rc 0 "$MKFS" --size 64M --segment-size 1M "$W/seg.pool"
expect_out "1.00 MiB"
expect_rc 0 "$MKFS" --force --size 64M --segment-size 16MB "$W/seg.pool"
expect_out "16.00 MiB"
expect_rc 0 "$MKFS" --force --size 256M --segment-size 64M "$W/seg.pool"
expect_out "64.00 MiB"

log "mkfs: too small, no space"
expect_rc 1 "$MKFS" --size 1M "$W/small.pool"
expect_err "too small"
[ ! -e "$W/small.pool" ] || fail "a too-small mkfs left a file"
expect_rc 1 "$MKFS" --size 100T "$W/huge.pool"
expect_err "not enough space"
[ ! -e "$W/huge.pool" ] || fail "a failed mkfs left a file"

log "mkfs: sizing for PostgreSQL (docs/operations.md \"Sizing a pool\")"
# One 16 MiB segment's room: refused, nothing left behind, the size it needs named.
expect_rc 1 "$MKFS" --size 20M "$W/one-seg.pool"
expect_err "too small for PostgreSQL.*cannot hold two WAL segments"
expect_err "make it at least"
[ ! -e "$W/one-seg.pool" ] || fail "a refused mkfs left a file"
# Below the rule for PostgreSQL's defaults: made, with the numbers and the fix.
expect_rc 0 "$MKFS" --size 256M "$W/short.pool"
expect_err "warning: a pool of 256.00 MiB .* smaller than a cluster with max_wal_size 1024MB"
expect_err "set max_wal_size = 160MB (at most)"
expect_out "fits          max_wal_size = 160MB with wal_keep_size = 0MB"
expect_out "reserve       32.00 MiB"
# The settings given are what the pool is judged against.
expect_rc 0 "$MKFS" --force --size 256M --max-wal-size 128MB "$W/short.pool"
[ ! -s "$ERR" ] || { cat "$ERR" >&2; fail "a warning for a pool that fits max_wal_size 128MB"; }
expect_rc 0 "$MKFS" --force --size 256M --max-wal-size 128MB --wal-keep-size 64MB "$W/short.pool"
expect_err "max_wal_size 128MB and wal_keep_size 64MB needs"
rm -f "$W/short.pool"
# Sized from the settings when --size is not given: max_wal_size + 5 segments of data.
expect_rc 0 "$MKFS" --max-wal-size 512MB --segment-size 16M "$W/sized.pool"
[ ! -s "$ERR" ] || { cat "$ERR" >&2; fail "a warning for a pool sized by mkfs"; }
expect_out "fits          max_wal_size = 512MB"
sized_mib=$(($(file_size "$W/sized.pool") >> 20))
((sized_mib >= 592 && sized_mib < 608)) || fail "a pool for max_wal_size 512MB is $sized_mib MiB"
rm -f "$W/sized.pool"
expect_rc 1 "$MKFS" --max-wal-size lots "$W/sized.pool"
expect_err "max-wal-size"

log "mkfs: refuses to overwrite"
expect_rc 1 "$MKFS" --size 64M "$W/a.pool"
expect_err "already holds a walfs pool"
echo "precious" >"$W/data.txt"
expect_rc 1 "$MKFS" --size 64M "$W/data.txt"
expect_err "not empty"
grep -q precious "$W/data.txt" || fail "mkfs touched a file it refused"
: >"$W/empty.pool"
expect_rc 1 "$MKFS" "$W/empty.pool"
expect_err "size is required"
expect_rc 0 "$MKFS" --size 64M "$W/empty.pool"
expect_rc 0 "$MKFS" --force "$W/a.pool"

# --owner: the pool file and the mount root belong to that user (numbers or names).
expect_rc 0 "$MKFS" -q --size 64M --owner 4321:8765 "$W/owned.pool"
[ "$(stat -c %u:%g "$W/owned.pool")" = 4321:8765 ] || fail "pool file not chowned by --owner"
expect_rc 0 "$WALFSCTL" inspect "$W/owned.pool"
grep -E '^/ +dir .* 4321 +8765 ' "$OUT" >/dev/null || { cat "$OUT" >&2; fail "root not owned by --owner"; }
expect_rc 1 "$MKFS" -q --size 64M --owner no-such-user-here "$W/badowner.pool"
expect_err "bad owner"
[ ! -e "$W/badowner.pool" ] || fail "a refused mkfs left a pool file"
expect_rc 0 "$MKFS" --force --size 96M "$W/a.pool"
[ "$(file_size "$W/a.pool")" = $((96 << 20)) ] || fail "--size did not resize an existing file"
chmod 0400 "$W/empty.pool"
if [ "$(id -u)" != 0 ]; then
  expect_rc 1 "$MKFS" --force "$W/empty.pool"
  expect_err "not writable"
fi

log "fsck: exit codes on a clean pool"
expect_rc 0 "$FSCK" "$W/a.pool"
expect_out "clean"
expect_rc 0 "$FSCK" -n "$W/a.pool"
expect_rc 0 "$FSCK" -fy "$W/a.pool"
expect_rc 0 "$FSCK" --json "$W/a.pool"
expect_out '"exit_code":0'
expect_out '"clean":true'
expect_rc 16 "$FSCK"
expect_rc 16 "$FSCK" --bogus "$W/a.pool"
expect_rc 16 "$FSCK" -n -y "$W/a.pool"
expect_rc 8 "$FSCK" "$W/missing.pool"
expect_err "missing.pool"
expect_rc 8 "$FSCK" --json "$W/missing.pool"
expect_out '"exit_code":8,"error":'

log "fsck: one bad superblock: 4, repaired 1, then 0"
cp "$W/a.pool" "$W/b.pool"
smash "$W/b.pool" 32 "XXXX"
sum_before=$(md5sum <"$W/b.pool")
expect_rc 4 "$FSCK" "$W/b.pool"
expect_out "superblock A"
[ "$(md5sum <"$W/b.pool")" = "$sum_before" ] || fail "fsck without --repair wrote"
expect_rc 4 "$FSCK" --json "$W/b.pool"
expect_out '"exit_code":4'
expect_out '"repairable":true'
expect_rc 1 "$FSCK" --repair "$W/b.pool"
expect_out "repaired"
expect_rc 0 "$FSCK" "$W/b.pool"
cmp -s -n 4096 "$W/b.pool" "$W/a.pool" || fail "superblock A not restored"

log "fsck: both superblocks bad: 4, not repairable"
smash "$W/b.pool" 32 "XXXX"
smash "$W/b.pool" $((4096 + 32)) "XXXX"
expect_rc 4 "$FSCK" "$W/b.pool"
expect_out "no valid superblock"
expect_rc 4 "$FSCK" -y "$W/b.pool"
expect_rc 1 "$WALFSCTL" inspect "$W/b.pool"
expect_rc 1 "$WALFSCTL" export "$W/b.pool" "$W/nothing"

log "fsck: garbage in free space: 4, 1, 0"
# A new file: its data area is initialised (mkfs --force would leave it uninitialised,
# where anything is allowed).
expect_rc 0 "$MKFS" -q --size 96M "$W/c.pool"
dd if=/dev/urandom of="$W/c.pool" bs=4096 seek=$((80 << 8)) count=4 conv=notrunc status=none
expect_rc 4 "$FSCK" -n "$W/c.pool"
expect_out "not zero"
expect_rc 1 "$FSCK" -p "$W/c.pool"
expect_rc 0 "$FSCK" "$W/c.pool"

log "fsck -C: progress as e2fsck"
expect_rc 0 "$FSCK" -C 3 "$W/c.pool" 3>"$W/progress"
grep -Eq "^1 ([0-9]+) \1 $W/c.pool\$" "$W/progress" ||
  { cat "$W/progress" >&2; fail "no final '1 N N POOL' progress line"; }
expect_rc 0 "$FSCK" -C "$W/c.pool"
expect_out "100.0%"
expect_rc 0 "$FSCK" -C0 --json "$W/c.pool"
expect_err "100.0%"
expect_out '"clean":true'
expect_rc 0 "$FSCK" "$W/c.pool" -C
expect_rc 16 "$FSCK" -C 9 "$W/c.pool"
expect_err "file descriptor 9 is not open"

log "mkfs --force writes only metadata, --zero writes everything"
head -c $((64 << 20)) /dev/urandom >"$W/g.pool"  # an old device's bytes
chmod 600 "$W/g.pool"
expect_rc 1 "$MKFS" -q "$W/g.pool"
expect_rc 0 "$MKFS" -q --force "$W/g.pool"
expect_rc 0 "$FSCK" "$W/g.pool"  # the old bytes lie where nothing is read
expect_rc 0 "$FSCK" --json "$W/g.pool"
expect_out '"state":{"inode_high":2,"dirent_high":0,"uninit_begin":0,"uninit_end":[1-9]'
[ "$(tail -c 1M "$W/g.pool" | tr -d '\0' | wc -c)" -gt 0 ] || fail "--force wrote the data area"
expect_rc 0 "$MKFS" -q --force --zero "$W/g.pool"
tail -c 32M "$W/g.pool" | cmp -s - <(head -c 32M /dev/zero) || fail "--zero left bytes"
expect_rc 0 "$FSCK" --json "$W/g.pool"
expect_out '"uninit_begin":0,"uninit_end":0}'
expect_rc 0 "$MKFS" -q --force "$W/g.pool"

log "fsck: truncated pool"
cp "$W/a.pool" "$W/t.pool"
truncate -s 32M "$W/t.pool"
expect_rc 4 "$FSCK" "$W/t.pool"
expect_out "truncated"

log "a pool in use (flocked, as the daemon does) is refused"
if command -v flock >/dev/null; then
  exec 9<"$W/a.pool"
  flock -x 9
  expect_rc 8 "$FSCK" "$W/a.pool"
  expect_err "in use"
  expect_rc 8 "$FSCK" -y "$W/a.pool"
  expect_rc 1 "$MKFS" --force "$W/a.pool"
  expect_err "in use"
  expect_rc 0 "$WALFSCTL" inspect "$W/a.pool"
  expect_err "warning: pool .* is in use"
  exec 9<&-
  expect_rc 0 "$FSCK" "$W/a.pool"
else
  log "no flock(1): lock checks skipped"
fi

log "walfsctl inspect"
expect_rc 0 "$WALFSCTL" inspect "$W/a.pool"
expect_out "capacity"
expect_out "96.00 MiB"
expect_out "check       metadata clean"
expect_rc 0 "$WALFSCTL" inspect --json "$W/a.pool"
expect_out '"clean":true'
expect_out '"files":\[{"path":"/","ino":1,"type":"directory"'
expect_out '"segment_size":16777216'
if command -v jq >/dev/null; then
  jq -e '.report.usage.inodes_live == 1' "$OUT" >/dev/null || fail "inspect --json is not what jq expects"
fi
# Usage errors exit 1, as the e2fsprogs tools; options may come before the command.
expect_rc 1 "$WALFSCTL" inspect
expect_err "Try 'walfsctl --help'"
expect_rc 1 "$WALFSCTL" inspect --yaml "$W/a.pool"
expect_err "unknown option --yaml"
expect_rc 1 "$WALFSCTL"
expect_rc 1 "$WALFSCTL" inspect --salvage "$W/a.pool"
expect_err "inspect does not take --salvage"
expect_rc 0 "$WALFSCTL" --json inspect "$W/a.pool"
expect_out '"clean":true'
expect_rc 1 "$WALFSCTL" inspect "$W/missing.pool"

log "walfsctl export --salvage of a crafted pool stays inside its directory"
DAMAGE=$WALFS_BUILD_DIR/tests/tools/walfs_damage
expect_rc 0 "$MKFS" --size 64M "$W/crafted.pool"
mkdir "$W/outside"
expect_rc 0 "$DAMAGE" "$W/crafted.pool" symlink-parent "$W/outside"
expect_rc 1 "$WALFSCTL" export --salvage "$W/crafted.pool" "$W/crafted-export"
[ -z "$(ls -A "$W/outside")" ] || fail "export wrote outside its directory: $(ls -A "$W/outside")"
[ "$(readlink "$W/crafted-export/evil")" = "$W/outside" ] || fail "the symlink itself not exported"
[ ! -e "$W/crafted-export/pwned" ] || fail "a symlink's child exported elsewhere"
expect_rc 0 "$WALFSCTL" inspect "$W/crafted.pool"
expect_rc 1 "$WALFSCTL" export "$W/crafted.pool" "$W/crafted-plain"
[ -z "$(ls -A "$W/outside")" ] || fail "export wrote outside its directory"

log "walfsctl export of an empty pool"
expect_rc 0 "$WALFSCTL" export "$W/a.pool" "$W/export-empty"
[ -d "$W/export-empty" ] || fail "export did not create its directory"
[ -z "$(ls -A "$W/export-empty")" ] || fail "export of an empty pool is not empty"
[ "$(stat -c %a "$W/export-empty")" = 755 ] || fail "root directory mode not kept"
expect_rc 1 "$WALFSCTL" export "$W/a.pool"
expect_err "export takes POOL and DIR"

log "walfsctl status"
expect_rc 1 "$WALFSCTL" status "$W"
expect_err "$W is not a walfs mount nor inside one (no user.walfs.status attribute on it or on a directory above it on the same file system, up to "
expect_rc 1 "$WALFSCTL" status "$W" --json --prometheus
expect_err "exclude each other"
# The status document is an xattr: any file carrying one stands in for a mount.
if command -v python3 >/dev/null && python3 - "$W/fake-mount" <<'PY'
import os, sys
path = sys.argv[1]
os.mkdir(path)
doc = ('{"version":1,"pool":"/p/a.pool","mountpoint":"/m","mode":"pmem",'
       '"region":"/dev/dax0.0","durability":"auto","block_size":4096,'
       '"total_blocks":1000,"free_blocks":100,"reserved_blocks":50,"writes":5,"write_bytes":40960,'
       '"software_version":"9.9","uptime_seconds":7200,"persist_error":"",'
       '"future_field":{"a":1},'
       '"latency":{"write":{"count":3,"sum_ns":9000,"buckets":[0,0,3,0,0,0,0,0,0,0,0,'
       '0,0,0,0,0,0,0,0,0,0,0]},"fsync":{"count":"x"}}}')
os.setxattr(path, "user.walfs.status", doc.encode())
PY
then
  expect_rc 0 "$WALFSCTL" status "$W/fake-mount"
  expect_out "mode: *pmem (region /dev/dax0.0"
  expect_out "space: *3.52 MiB used of 3.91 MiB (90.0%), 400.00 KiB free (200.00 KiB of it reserved for WAL segments)"
  expect_out "5 writes (40.00 KiB)"
  expect_out "up 2h00m"
  expect_out 'future_field: *{"a":1}'
  expect_out "p99 latency: *write 4 us"
  expect_rc 0 "$WALFSCTL" status "$W/fake-mount" --json
  expect_out '"region":"/dev/dax0.0"'
  expect_rc 0 "$WALFSCTL" --prometheus status "$W/fake-mount"
  expect_out '^# TYPE walfs_writes_total counter$'
  expect_out '^walfs_build_info{mountpoint="/m",pool="/p/a.pool",version="9.9",mode="pmem",region="/dev/dax0.0",durability="auto"} 1$'
  expect_out '^walfs_writes_total{mountpoint="/m",pool="/p/a.pool"} 5$'
  expect_out '^walfs_pool_free_bytes{mountpoint="/m",pool="/p/a.pool"} 409600$'
  expect_out '^walfs_pool_reserved_bytes{mountpoint="/m",pool="/p/a.pool"} 204800$'
  expect_out '^walfs_uptime_seconds{mountpoint="/m",pool="/p/a.pool"} 7200$'
  expect_out '^walfs_request_duration_seconds_bucket{mountpoint="/m",pool="/p/a.pool",op="write",le="4e-06"} 3$'
  expect_rc 0 "$WALFSCTL" status "$W/fake-mount" --latency
  expect_out '^write  *3  *3.0 us  *4 us'
  expect_out '^fsync  *(malformed)'
  expect_rc 1 "$WALFSCTL" status "$W/fake-mount" --latency --json
  expect_err "exclude each other"
else
  log "no python3 (or no user xattrs here): status formatting not exercised"
fi

log "a pool populated through a mount"
if [ -x "$WALFS" ] && [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
  expect_rc 0 "$MKFS" --size 128M --segment-size 1M "$W/m.pool"
  mount_walfs "$W/m.pool" "$W/mnt"
  M=$W/mnt
  mkdir "$M/archive"
  head -c 300000 /dev/urandom >"$M/000000010000000000000001"
  printf 'timeline history\n' >"$M/00000002.history"
  chmod 0640 "$M/00000002.history"
  touch -d '2001-02-03 04:05:06' "$M/00000002.history"
  ln "$M/000000010000000000000001" "$M/archive/seg-link"
  ln -s ../00000002.history "$M/archive/latest"
  LONG_TARGET=$(printf 'long/%.0s' $(seq 800))x  # 4001 bytes: stored out of line
  ln -s "$LONG_TARGET" "$M/archive/long"
  [ "$(readlink "$M/archive/long")" = "$LONG_TARGET" ] || fail "long symlink target differs"
  mkdir "$M/archive/empty"
  mkfifo -m 0604 "$M/archive/fifo"
  expect_rc 0 "$WALFSCTL" status "$M"
  expect_out "mode:"
  expect_out "^  direct access: *reads only (msync mode: a copy + drain is not durable on this pool); sessions 0 granted, 0 refused; 0 write leases held (0 granted), 0 read leases held (0 granted), 0 refused"
  expect_rc 0 "$WALFSCTL" status "$M" --json
  expect_out '"version":1'
  expect_out '"direct_access":false,"direct_reads":true,"direct_access_off_reason":"msync mode: a copy + drain is not durable on this pool","direct_access_durability":"reads_only","sessions_granted":0,"sessions_refused":0'
  expect_rc 0 "$WALFSCTL" status "$M" --prometheus
  expect_out '^walfs_build_info{.*mode="'
  expect_out "^walfs_writes_total{mountpoint=\"$M\",pool=\"$W/m.pool\"} [1-9]"
  expect_out '^walfs_pool_size_bytes{.*} [1-9]'
  expect_out '^walfs_direct_access{.*,durability="reads_only"} 0$'
  expect_out '^walfs_direct_reads{.*} 1$'
  expect_out '^walfs_sessions_refused_total{.*} 0$'
  expect_out '^walfs_request_duration_seconds_count{.*op="write"} [1-9]'
  expect_rc 0 "$WALFSCTL" status "$M" --latency
  expect_out '^write  *[1-9][0-9]* '
  expect_out '^create  *[1-9][0-9]* '
  # Any path inside the mount names it: a subdirectory, a file, a symlink from outside
  # (PGDATA/pg_wal -> MOUNT/pg_wal, as walfsctl(8) shows).
  ln -s "$M/archive" "$W/pg_wal-link"
  for p in "$M/archive" "$M/archive/empty" "$M/00000002.history" "$W/pg_wal-link"; do
    expect_rc 0 "$WALFSCTL" status "$p"
    expect_out "^walfs .* at $M\$"
    expect_rc 0 "$WALFSCTL" status --json "$p"
    expect_out '"version":1'
  done
  expect_rc 1 "$WALFSCTL" status "$W/exported-none"
  expect_err "cannot resolve $W/exported-none"
  # The daemon holds the pool's lock: no fsck or mkfs under it, inspect warns.
  expect_rc 8 "$FSCK" "$W/m.pool"
  expect_err "in use"
  expect_rc 1 "$MKFS" --force "$W/m.pool"
  expect_rc 0 "$WALFSCTL" inspect "$W/m.pool"
  expect_err "in use"
  expect_rc 1 "$WALFSCTL" grow "$W/m.pool" 192M
  expect_err "in use.*grow is offline"
  [ "$(file_size "$W/m.pool")" = $((128 << 20)) ] || fail "a refused grow changed the file"
  (cd "$M" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$W/m.sums"
  umount_walfs "$M"
  expect_rc 0 "$FSCK" "$W/m.pool"
  expect_out "clean"
  expect_rc 0 "$WALFSCTL" inspect "$W/m.pool"
  expect_out "/archive/seg-link"
  expect_out "300000"
  expect_rc 0 "$WALFSCTL" export "$W/m.pool" "$W/exported"
  expect_out "exported 2 files"
  E=$W/exported
  cmp "$E/000000010000000000000001" "$E/archive/seg-link" || fail "hard link content differs"
  [ "$(stat -c %i "$E/000000010000000000000001")" = "$(stat -c %i "$E/archive/seg-link")" ] ||
    fail "hard link not exported as a link"
  [ "$(readlink "$E/archive/latest")" = ../00000002.history ] || fail "symlink target differs"
  [ "$(cat "$E/archive/latest")" = "timeline history" ] || fail "symlink does not resolve"
  [ "$(stat -c %a "$E/00000002.history")" = 640 ] || fail "mode not kept"
  [ "$(stat -c %Y "$E/00000002.history")" = "$(date -d '2001-02-03 04:05:06' +%s)" ] ||
    fail "mtime not kept"
  [ -d "$E/archive/empty" ] || fail "empty directory not exported"
  [ "$(readlink "$E/archive/long")" = "$LONG_TARGET" ] || fail "long symlink target not exported"
  [ -p "$E/archive/fifo" ] && [ "$(stat -c %a "$E/archive/fifo")" = 604 ] ||
    fail "FIFO not exported as a FIFO with its mode"
  # Export twice into the same place refuses to overwrite.
  expect_rc 1 "$WALFSCTL" export "$W/m.pool" "$W/exported"
  expect_err "File exists"

  # walfsctl grow, offline: every file kept, the new space offered by the mount.
  expect_rc 0 "$WALFSCTL" grow "$W/m.pool" 192M
  expect_out "grown from 128.00 MiB .* to 192.00 MiB"
  [ "$(file_size "$W/m.pool")" = $((192 << 20)) ] || fail "grow did not extend the file"
  expect_rc 0 "$FSCK" "$W/m.pool"
  expect_rc 0 "$WALFSCTL" inspect "$W/m.pool"
  expect_out "capacity    192.00 MiB"
  mount_walfs "$W/m.pool" "$W/mnt"
  (cd "$M" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$W/m.sums2"
  diff "$W/m.sums" "$W/m.sums2" >&2 || fail "files differ after grow"
  [ "$(stat -f -c %b "$M")" -gt $((130 << 20 >> 12)) ] || fail "statfs does not show the new size"
  # More than the old pool held, in one file: the new blocks are used, and read as zeros.
  fallocate -l 150M "$M/big" || fail "fallocate 150M on the grown pool"
  cmp -n $((150 << 20)) "$M/big" /dev/zero || fail "new space is not zero"
  rm "$M/big"
  umount_walfs "$M"
  # Bad input changes nothing.
  cp "$W/m.pool" "$W/m-before.pool"
  expect_rc 1 "$WALFSCTL" grow "$W/m.pool" 192M
  expect_err "already 192.00 MiB.*cannot shrink"
  expect_rc 1 "$WALFSCTL" grow "$W/m.pool" 100M
  expect_err "cannot shrink"
  expect_rc 1 "$WALFSCTL" grow "$W/m.pool" $(((192 << 20) + 100))
  expect_err "at least one 4 KiB block"
  expect_rc 1 "$WALFSCTL" grow "$W/m.pool" lots
  expect_err "SIZE"
  expect_rc 1 "$WALFSCTL" grow "$W/m.pool" 100T
  expect_err "No space left on device\|File too large"
  expect_err "the pool is unchanged"
  expect_rc 1 "$WALFSCTL" grow "$W/m.pool"
  expect_err "grow takes POOL and SIZE"
  head -c 1M /dev/urandom >"$W/not-a.pool"
  expect_rc 1 "$WALFSCTL" grow "$W/not-a.pool" 2M
  expect_err "not a walfs pool"
  [ "$(file_size "$W/not-a.pool")" = $((1 << 20)) ] || fail "grow changed a non-pool file"
  expect_rc 1 "$WALFSCTL" grow /dev/null 2M
  expect_err "it is a device"
  cmp "$W/m.pool" "$W/m-before.pool" || fail "a refused grow changed the pool"
  rm "$W/m-before.pool"

  # A pool made lazily over an old device's bytes (g.pool): files and segments read
  # back exactly, with zeros where nothing was written, and fsck is clean.
  mount_walfs "$W/g.pool" "$W/mnt"
  head -c 100000 /dev/urandom >"$W/seg-data"
  cp "$W/seg-data" "$M/000000010000000000000001"
  mkdir "$M/archive_status"
  for i in 1 2 3 4 5; do echo "$i" >"$M/archive_status/$i.ready"; done
  truncate -s 20000 "$M/sparse"
  cmp "$W/seg-data" "$M/000000010000000000000001" || fail "segment differs on a lazy pool"
  cmp <(head -c 20000 /dev/zero) "$M/sparse" || fail "old bytes show through a grown file"
  umount_walfs "$M"
  expect_rc 0 "$FSCK" "$W/g.pool"
  mount_walfs "$W/g.pool" "$W/mnt"
  [ "$(cat "$M/archive_status/3.ready")" = 3 ] || fail "file lost on a lazy pool"
  cmp "$W/seg-data" "$M/000000010000000000000001" || fail "segment differs after remount"
  umount_walfs "$M"
else
  log "no daemon or /dev/fuse: populated-pool checks skipped"
fi

log "PASS"
