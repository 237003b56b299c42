#!/usr/bin/env bash
# Direct reads (read leases, L9 in docs/design/lease.md) end to end, libwalfs-direct.so
# preloaded into Python clients (os.pread is libc's pread64) on a real mount:
#  - a read-only descriptor takes a read lease at its first pread and every pread inside
#    it is copied out of the pool: no FUSE READ, the bytes are the file's; `cat` and `cp`
#    (read(2) at the file offset) likewise;
#  - a reader sees every byte another process wrote before it read: a leased writer's
#    direct stores and a writer without the library (FUSE WRITEs), checked record by
#    record while both run;
#  - a reader never makes another process's truncate fail: the truncate revokes the read
#    lease (status read_leases_revoked), the reader's next preads go to the kernel and
#    see the new size, never the bytes of a file that reuses the freed blocks; unlink and
#    rename-over succeed too, and the reader keeps reading the file it opened;
#  - WALFS_DIRECT_READS=0: no read lease, reads through FUSE;
#  - walfsctl status counts read leases apart from write leases, and both end with
#    their descriptors;
#  - a process reading file after file sets up one session and keeps it, unlocked,
#    between files: a remount (a new daemon) takes the pool meanwhile, and the kept
#    session is replaced at the process's next lease, whose reads and writes land in the
#    files they name; fsck is clean afterwards.
source "$(dirname "$0")/lib/common.sh"

require_fuse
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
[ -f "$LIB" ] || fail "direct-access library not built: $LIB"
command -v python3 >/dev/null || skip "no python3 for the test clients"
reexec_in_mount_namespace "$@"

WORK=$(make_workdir)
SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
on_exit "rm -rf '$SHM'"
POOL=$SHM/pool
M=$WORK/mnt
make_pool "$POOL" 128M
PMEM_IS_PMEM_FORCE=1 mount_walfs "$POOL" "$M"
on_failure "echo '== daemon log'; cat '$WALFS_LOG'"
[ "$(walfs_status_field "$M" direct_access)" = True ] || fail "direct access is off"

# Record i of a file: 8 KiB of the byte (i % 251) + 1, tagged with its number.
cat >"$WORK/rec.py" <<'PY'
import os, struct, sys
PAGE = 8192
def rec(i, salt=0):
    b = bytes([(i + salt) % 251 + 1]) * (PAGE - 8)
    return struct.pack("<q", i) + b
PY
export PYTHONPATH=$WORK

fuse_reads() { walfs_status_field "$M" reads; }
wait_field() {
  local key=$1 want=$2 i
  for ((i = 0; i < 100; i++)); do
    [ "$(walfs_status_field "$M" "$key")" = "$want" ] && return 0
    sleep 0.05
  done
  fail "$key is $(walfs_status_field "$M" "$key"), expected $want"
}

log "a 16 MiB file written through FUSE, read back with the library"
python3 - "$M/seg1" <<'PY'
import os, sys
from rec import rec, PAGE
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
for i in range(2048):
    os.pwrite(fd, rec(i), i * PAGE)
os.close(fd)
PY
before=$(fuse_reads)
LD_PRELOAD=$LIB WALFS_DIRECT_DEBUG=1 python3 - "$M/seg1" 2>"$WORK/debug1" <<'PY'
import os, sys
from rec import rec, PAGE
fd = os.open(sys.argv[1], os.O_RDONLY)
for i in range(2048):
    got = os.pread(fd, PAGE, i * PAGE)
    if got != rec(i):
        sys.exit(f"record {i} differs")
# Past the end: the kernel's answer (the lease covers the file's size).
if os.pread(fd, PAGE, 2048 * PAGE) != b"":
    sys.exit("read past EOF returned bytes")
os.close(fd)
# Reads need no libpmem: a program that only reads never loads it.
if "libpmem" in open("/proc/self/maps").read():
    sys.exit("a reader loaded libpmem")
PY
grep -q "read lease granted" "$WORK/debug1" || fail "no read lease: $(cat "$WORK/debug1")"
after=$(fuse_reads)
# 2048 pages; what is left are the kernel's reads past the lease (one here).
(((after - before) <= 4)) || fail "$((after - before)) FUSE reads for 2048 direct preads"
(($(walfs_status_field "$M" read_leases_granted) >= 1)) || fail "read_leases_granted not counted"
wait_field read_leases_active 0
[ "$(walfs_status_field "$M" leases_active)" = 0 ] || fail "a read-only descriptor took a write lease"

log "cat and cp with the library: read(2) at the file offset, copied out of the pool"
before=$(fuse_reads)
LD_PRELOAD=$LIB cat "$M/seg1" >"$WORK/seg1.cat" || fail "cat with the library failed"
LD_PRELOAD=$LIB cp "$M/seg1" "$WORK/seg1.cp" || fail "cp with the library failed"
after=$(fuse_reads)
cat "$M/seg1" >"$WORK/seg1.fuse"
cmp "$WORK/seg1.cat" "$WORK/seg1.fuse" || fail "cat with the library read other bytes"
cmp "$WORK/seg1.cp" "$WORK/seg1.fuse" || fail "cp with the library copied other bytes"
# Each ends with a read at EOF (the kernel's); cp may also probe the file first.
(((after - before) <= 8)) || fail "$((after - before)) FUSE reads for cat and cp of 16 MiB"

log "copy_file_range out of a lease into another file system, at offsets"
# Copied out of the pool: no FUSE read (the kernel would refuse with EXDEV, or read
# through FUSE). 1 MiB from 5 MiB + 3 of the segment, to 7 in the file.
before=$(fuse_reads)
LD_PRELOAD=$LIB python3 - "$M/seg1" "$WORK/seg1.range" <<'PY' || fail "copy_file_range with the library failed"
import os, sys
src = os.open(sys.argv[1], os.O_RDONLY)
dst = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
done = 0
while done < 1 << 20:
    n = os.copy_file_range(src, dst, (1 << 20) - done, (5 << 20) + 3 + done, 7 + done)
    assert n > 0, n
    done += n
assert os.lseek(src, 0, os.SEEK_CUR) == 0 and os.lseek(dst, 0, os.SEEK_CUR) == 0
PY
after=$(fuse_reads)
((after == before)) || fail "$((after - before)) FUSE reads for a copy_file_range of 1 MiB"
{ head -c 7 /dev/zero; head -c $(((6 << 20) + 3)) "$WORK/seg1.fuse" | tail -c $((1 << 20)); } >"$WORK/seg1.want"
cmp "$WORK/seg1.range" "$WORK/seg1.want" || fail "copy_file_range with the library copied other bytes"
rm -f "$WORK"/seg1.*

log "dd with the library: it reads the copy dup2 made at 0, which takes its own read lease"
# dd opens the file (fd 3), dup2s it onto 0 and closes 3 before its first read: the
# copy is the descriptor to lease. 128 blocks of 128 KiB are the whole file.
cat "$M/seg1" >"$WORK/seg1.fuse"
before=$(fuse_reads)
LD_PRELOAD=$LIB WALFS_DIRECT_DEBUG=1 dd if="$M/seg1" of=/dev/null bs=128k count=128 \
  2>"$WORK/debug-dd" || fail "dd with the library failed: $(cat "$WORK/debug-dd")"
after=$(fuse_reads)
grep -q "a copy of fd" "$WORK/debug-dd" || fail "dd's input was not noted: $(cat "$WORK/debug-dd")"
grep -q "read lease granted" "$WORK/debug-dd" || fail "dd took no read lease: $(cat "$WORK/debug-dd")"
(((after - before) == 0)) || fail "$((after - before)) FUSE reads for dd of 16 MiB"
# To the end and into a file: the bytes are the file's; the read at EOF is the kernel's
# (the lease covers the size at its grant, past which only the daemon knows).
before=$(fuse_reads)
LD_PRELOAD=$LIB dd if="$M/seg1" of="$WORK/seg1.dd" bs=128k status=none ||
  fail "dd with the library failed"
after=$(fuse_reads)
cmp "$WORK/seg1.dd" "$WORK/seg1.fuse" || fail "dd with the library read other bytes"
(((after - before) <= 1)) || fail "$((after - before)) FUSE reads for dd of 16 MiB to its end"
rm -f "$WORK"/seg1.*

log "WALFS_DIRECT_READS=0: reads through FUSE, no read lease"
granted=$(walfs_status_field "$M" read_leases_granted)
before=$(fuse_reads)
LD_PRELOAD=$LIB WALFS_DIRECT_READS=0 python3 - "$M/seg1" <<'PY'
import os, sys
from rec import rec, PAGE
fd = os.open(sys.argv[1], os.O_RDONLY)
for i in range(64):
    assert os.pread(fd, PAGE, i * PAGE) == rec(i)
PY
(($(fuse_reads) - before >= 64)) || fail "reads with WALFS_DIRECT_READS=0 did not go through FUSE"
[ "$(walfs_status_field "$M" read_leases_granted)" = "$granted" ] || fail "a read lease with reads off"

log "a reader sees every record a leased writer and a FUSE writer stored before it read"
# The writer (library, write lease: direct stores) writes record i, then tells the
# reader (library, read lease) over a pipe; the reader checks the record at once. Then
# the same with a writer without the library (FUSE WRITEs).
for writer in direct fuse; do
  rm -f "$M/seg2"
  python3 - "$M/seg2" <<'PY'
import os, sys
from rec import PAGE
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
os.pwrite(fd, b"\0" * (2048 * PAGE), 0)
os.close(fd)
PY
  wpre=$LIB
  [ "$writer" = fuse ] && wpre=
  LD_PRELOAD=$LIB python3 - "$M/seg2" "$wpre" <<'PY' || fail "$writer writer: the reader missed a record"
import os, subprocess, sys
from rec import rec, PAGE
path, wpre = sys.argv[1], sys.argv[2]
r, w = os.pipe()
env = dict(os.environ, LD_PRELOAD=wpre)
writer = subprocess.Popen([sys.executable, "-c", f"""
import os, sys
sys.path.insert(0, {os.environ['PYTHONPATH']!r})
from rec import rec, PAGE
fd = os.open({path!r}, os.O_RDWR)
for i in range(2048):
    os.pwrite(fd, rec(i, 7), i * PAGE)
    os.write({w}, i.to_bytes(4, "little"))
os.close(fd)
"""], env=env, pass_fds=(w,))
os.close(w)
fd = os.open(path, os.O_RDONLY)
seen = 0
with os.fdopen(r, "rb", buffering=0) as pipe:
    while True:
        b = pipe.read(4)
        if not b:
            break
        i = int.from_bytes(b, "little")
        if os.pread(fd, PAGE, i * PAGE) != rec(i, 7):
            sys.exit(f"record {i}: not what the writer stored before announcing it")
        seen += 1
if writer.wait() != 0 or seen != 2048:
    sys.exit(f"writer exit {writer.returncode}, {seen} records")
PY
done
wait_field read_leases_active 0
wait_field leases_active 0

log "a truncate by another process while a reader holds its read lease"
python3 - "$M/seg3" <<'PY'
import os, sys
from rec import rec, PAGE
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
for i in range(2048):
    os.pwrite(fd, rec(i, 3), i * PAGE)
os.close(fd)
PY
revoked=$(walfs_status_field "$M" read_leases_revoked)
mkfifo "$WORK/go" "$WORK/done"
LD_PRELOAD=$LIB python3 - "$M/seg3" "$WORK/go" "$WORK/done" <<'PY' &
import os, sys
from rec import rec, PAGE
path, go, done = sys.argv[1:]
fd = os.open(path, os.O_RDONLY)
assert os.pread(fd, PAGE, 100 * PAGE) == rec(100, 3)  # the lease is taken
open(done, "w").write("leased\n")
open(go).read()  # the truncate and the reuse of the blocks happen now
# The file holds one record now: the rest is past EOF, whatever fills the freed blocks.
first = os.pread(fd, PAGE, 0)
rest = [os.pread(fd, PAGE, i * PAGE) for i in range(1, 2048)]
bad = [i + 1 for i, b in enumerate(rest) if b != b""]
result = "ok" if first == rec(0, 3) and not bad else f"first ok {first == rec(0, 3)}, {len(bad)} records past EOF returned bytes (first {bad[:1]})"
open(done, "w").write(result + "\n")
PY
reader=$!
[ "$(cat "$WORK/done")" = leased ] || fail "reader did not take its lease"
[ "$(walfs_status_field "$M" read_leases_active)" = 1 ] || fail "read lease not active in status"
LD_PRELOAD= truncate -s 8192 "$M/seg3" || fail "truncate of a read-leased file failed"
[ "$(walfs_status_field "$M" read_leases_revoked)" = $((revoked + 1)) ] ||
  fail "the truncate did not revoke the read lease"
# Another file may take the freed blocks: the reader must not see them either way.
python3 - "$M/seg4" <<'PY'
import os, sys
from rec import PAGE
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
os.pwrite(fd, b"\xee" * (2048 * PAGE), 0)
os.close(fd)
PY
echo go >"$WORK/go"
result=$(cat "$WORK/done")
wait "$reader" || fail "reader exited with an error"
[ "$result" = ok ] || fail "after the truncate: $result"
wait_field read_leases_active 0

log "unlink and rename-over of a file a reader holds: it keeps reading the file it opened"
for how in unlink rename; do
  python3 - "$M/seg5" <<'PY'
import os, sys
from rec import rec, PAGE
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
for i in range(2048):
    os.pwrite(fd, rec(i, 5), i * PAGE)
os.close(fd)
PY
  LD_PRELOAD=$LIB python3 - "$M/seg5" "$WORK/go" "$WORK/done" <<'PY' &
import os, sys
from rec import rec, PAGE
path, go, done = sys.argv[1:]
fd = os.open(path, os.O_RDONLY)
assert os.pread(fd, PAGE, 0) == rec(0, 5)
open(done, "w").write("leased\n")
open(go).read()
bad = [i for i in range(2048) if os.pread(fd, PAGE, i * PAGE) != rec(i, 5)]
open(done, "w").write(("ok" if not bad else f"{len(bad)} records changed (first {bad[0]})") + "\n")
PY
  reader=$!
  [ "$(cat "$WORK/done")" = leased ] || fail "$how: reader did not take its lease"
  if [ "$how" = unlink ]; then
    rm "$M/seg5" || fail "unlink of a read-leased file failed"
  else
    printf 'other' >"$M/other" && mv "$M/other" "$M/seg5" || fail "rename over a read-leased file failed"
  fi
  # New files that may take blocks the old one would free.
  python3 - "$M/seg6" <<'PY'
import os, sys
from rec import PAGE
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
os.pwrite(fd, b"\xdd" * (2048 * PAGE), 0)
os.close(fd)
PY
  echo go >"$WORK/go"
  result=$(cat "$WORK/done")
  wait "$reader" || fail "$how: reader exited with an error"
  [ "$result" = ok ] || fail "$how: $result"
  rm -f "$M/seg5" "$M/seg6"
done
wait_field read_leases_active 0
walfsctl_out=$("$WALFSCTL" status "$M")
grep -q "read leases held" <<<"$walfsctl_out" || fail "walfsctl status has no read leases: $walfsctl_out"

log "one session per process: kept, unlocked, between files; replaced after a remount"
for f in seg7 seg8; do
  python3 - "$M/$f" <<'PY'
import os, sys
from rec import rec, PAGE
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
os.pwrite(fd, b"".join(rec(i, 7) for i in range(2048)), 0)
os.close(fd)
PY
done
mkfifo "$WORK/go7" "$WORK/done7"
LD_PRELOAD=$LIB WALFS_DIRECT_DEBUG=1 python3 - "$M" "$WORK/go7" "$WORK/done7" 2>"$WORK/debug7" <<'PY' &
import os, sys
from rec import rec, PAGE
mnt, go, done = sys.argv[1:]
def check(name):
    fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
    bad = [i for i in range(2048) if os.pread(fd, PAGE, i * PAGE) != rec(i, 7)]
    os.close(fd)
    return bad
bad = check("seg7") + check("seg8") + check("seg7")
open(done, "w").write(("read" if not bad else f"{len(bad)} records wrong") + "\n")
open(go).read()
# The mount is a new daemon's now: read and write through it.
bad = check("seg8")
fd = os.open(os.path.join(mnt, "seg7"), os.O_RDWR)
for i in range(0, 2048, 2):
    os.pwrite(fd, rec(i, 9), i * PAGE)
os.close(fd)
# Its first write lease loaded libpmem.
if "libpmem" not in open("/proc/self/maps").read():
    bad.append("libpmem not loaded by a writer")
open(done, "w").write(("ok" if not bad else f"{len(bad)} records wrong after the remount") + "\n")
PY
client=$!
result=$(cat "$WORK/done7")
[ "$result" = read ] || fail "before the remount: $result"
sessions=$(grep -c "session for device" "$WORK/debug7")
[ "$sessions" = 1 ] || fail "three files read in one process set up $sessions sessions: $(cat "$WORK/debug7")"
[ "$(grep -c "read lease granted" "$WORK/debug7")" = 3 ] || fail "not one read lease per file: $(cat "$WORK/debug7")"
old_dev=$(mountpoint -d "$M")
# The client keeps its session, unlocked: a new daemon may take the pool (it refuses a
# locked one, L6).
umount_walfs "$M"
PMEM_IS_PMEM_FORCE=1 mount_walfs "$POOL" "$M"
log "remounted: device $old_dev before, $(mountpoint -d "$M") now"
echo go >"$WORK/go7"
result=$(cat "$WORK/done7")
wait "$client" || fail "the client of the remount exited with an error: $(cat "$WORK/debug7")"
[ "$result" = ok ] || fail "$result"
[ "$(walfs_status_field "$M" read_leases_granted)" = 1 ] || fail "no read lease from the new daemon"
[ "$(walfs_status_field "$M" leases_granted)" = 1 ] || fail "no write lease from the new daemon"
if [ "$old_dev" = "$(mountpoint -d "$M")" ]; then
  # The kept session is the old daemon's: the first reply names other stamps.
  grep -q "a kept session was an earlier daemon's" "$WORK/debug7" ||
    fail "the kept session of the old daemon was not replaced: $(cat "$WORK/debug7")"
fi
[ "$(grep -c "session for device" "$WORK/debug7")" = 2 ] || fail "no new session after the remount: $(cat "$WORK/debug7")"
python3 - "$M/seg7" <<'PY' || fail "the stores after the remount did not land in seg7"
import os, sys
from rec import rec, PAGE
fd = os.open(sys.argv[1], os.O_RDONLY)
bad = [i for i in range(2048) if os.pread(fd, PAGE, i * PAGE) != rec(i, 9 if i % 2 == 0 else 7)]
sys.exit(1 if bad else 0)
PY
python3 - "$M/seg8" <<'PY' || fail "seg8 changed after the remount"
import os, sys
from rec import rec, PAGE
fd = os.open(sys.argv[1], os.O_RDONLY)
sys.exit(1 if any(os.pread(fd, PAGE, i * PAGE) != rec(i, 7) for i in range(2048)) else 0)
PY
rm -f "$M/seg7" "$M/seg8"

umount_walfs "$M"
fsck_out=$("$FSCK" "$POOL" 2>&1) || fail "fsck.walfs after the run: $fsck_out"
log "fs_direct_read: all checks passed"
