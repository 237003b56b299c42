#!/usr/bin/env bash
# Direct access end to end: libwalfs-direct.so preloaded into a small client, against the
# real daemon on a real mount. The lease rules as a client meets them:
#  - writes inside the lease reach the pool without a FUSE WRITE and read back through
#    the mount at once; release sets mtime; the lease ends when the file is closed;
#    write(2) stores directly at the file offset too; without the library, with
#    WALFS_DIRECT=0 and past the lease, writes are FUSE WRITEs; the pool is read-locked
#    exactly while a client maps it;
#  - while a client keeps writing: truncate from another process fails (ETXTBSY); unlink
#    and rename-over leave the client writing into the orphan, no other file changes, and
#    the blocks come back only when it closes;
#  - two processes leasing one file both write, and see each other's bytes;
#  - a client killed in the middle of writing: its lease ends, fsck is clean;
#  - a tracked descriptor number reused for a pipe after a close the library did not see
#    (raw system calls): nothing goes to the pool, the pipe gets what the kernel says;
#    a dup of a leased descriptor closed that way revokes the lease (the daemon's FLUSH
#    stamp): the next write goes through FUSE;
#  - a client of another user gets no session and no lease (L5) and writes through
#    FUSE, no error;
#  - msync mode: sessions say reads only, so no write lease is asked and every write goes
#    through FUSE, no error; reads are copied out of the pool under read leases.
source "$(dirname "$0")/lib/common.sh"

require_fuse
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
[ -f "$LIB" ] || fail "direct-access library not built: $LIB"
command -v cc >/dev/null || skip "no C compiler for the test client (cc)"
id nobody >/dev/null 2>&1 || skip "no user nobody"
reexec_in_mount_namespace "$@"

WORK=$(make_workdir)
CLIENT=$WORK/dclient
cc -O1 -o "$CLIENT" -x c - <<'EOF' || fail "cannot build the test client"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
static int err(const char *what) { printf("%s %s\n", what, strerrorname_np(errno)); return 1; }
/* A system call the preloaded library cannot see (not through libc). */
static long raw(long n, long a, long b) {
#if defined(__x86_64__)
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b) : "rcx", "r11", "memory");
  return r;
#else
  (void)n; (void)a; (void)b;
  return -ENOSYS;
#endif
}
static int put(int fd, long off, long len, char c) {
  char *buf = malloc(len);
  memset(buf, c, len);
  ssize_t n = pwrite(fd, buf, len, off);
  free(buf);
  if (n != len) return err("pwrite");
  if (fdatasync(fd) != 0) return err("fdatasync");
  return 0;
}
int main(int argc, char **argv) {
  if (argc < 3) return 2;
  const char *cmd = argv[1], *path = argv[2];
  if (!strcmp(cmd, "reopen") && argc == 3) {  /* reopen FILE: durable_rename's fsync */
    int fd = open(path, O_RDWR);
    if (fd < 0) return err("open");
    if (fsync(fd) != 0) return err("fsync");
    return close(fd) == 0 ? 0 : err("close");
  }
  if (!strcmp(cmd, "write") && argc == 7) {  /* write FILE OFF LEN CHAR COUNT */
    int fd = open(path, O_RDWR);
    if (fd < 0) return err("open");
    long off = atol(argv[3]), len = atol(argv[4]), count = atol(argv[6]);
    for (long i = 0; i < count; i++)
      if (put(fd, off + i * len, len, argv[5][0])) return 1;
    return close(fd) == 0 ? 0 : err("close");
  }
  if (!strcmp(cmd, "read") && argc == 7) {  /* read FILE OFF LEN CHAR COUNT: each byte CHAR */
    int fd = open(path, O_RDONLY);
    if (fd < 0) return err("open");
    long off = atol(argv[3]), len = atol(argv[4]), count = atol(argv[6]);
    char *buf = malloc(len);
    for (long i = 0; i < count; i++) {
      if (pread(fd, buf, len, off + i * len) != len) return err("pread");
      for (long j = 0; j < len; j++)
        if (buf[j] != argv[5][0]) { fprintf(stderr, "byte %ld differs\n", off + i * len + j); return 1; }
    }
    free(buf);
    return close(fd) == 0 ? 0 : err("close");
  }
  if (!strcmp(cmd, "wseq") && argc == 5) {  /* wseq FILE LEN COUNT: write(2) from offset 0 */
    int fd = open(path, O_RDWR);
    if (fd < 0) return err("open");
    long len = atol(argv[3]), count = atol(argv[4]);
    char *buf = malloc(len);
    memset(buf, 'w', len);
    for (long i = 0; i < count; i++)
      if (write(fd, buf, len) != len) return err("write");
    return close(fd) == 0 ? 0 : err("close");
  }
  if (!strcmp(cmd, "session")) {  /* session FILE: "OFF LEN CHAR" per stdin line */
    int fd = open(path, O_RDWR);
    if (fd < 0) return err("open");
    printf("open\n");
    fflush(stdout);
    long off, len;
    char c;
    while (scanf("%ld %ld %c", &off, &len, &c) == 3) {
      if (put(fd, off, len, c) == 0) printf("ok\n");
      fflush(stdout);
    }
    return close(fd) == 0 ? 0 : err("close");
  }
  if (!strcmp(cmd, "spin")) {  /* spin FILE: 1 MiB writes over the first 16 MiB, forever */
    int fd = open(path, O_RDWR);
    if (fd < 0) return err("open");
    printf("open\n");
    fflush(stdout);
    for (long i = 0;; i++)
      if (put(fd, (i % 16) << 20, 1 << 20, 'a' + i % 26)) return 1;
  }
  if (!strcmp(cmd, "dupclose") && argc == 3) {  /* dupclose FILE */
    /* A second descriptor of the leased description, closed behind the library's back:
       the daemon hears of the close (FLUSH) and revokes; the next write goes to FUSE. */
    int fd = open(path, O_RDWR);
    if (fd < 0) return err("open");
    char buf[8192];
    memset(buf, 'D', sizeof(buf));
    if (pwrite(fd, buf, sizeof(buf), 0) != sizeof(buf)) return err("pwrite");
    int d = dup(fd);
    if (d < 0) return err("dup");
    if (raw(SYS_close, d, 0) != 0) { printf("raw close failed\n"); return 1; }
    memset(buf, 'E', sizeof(buf));
    if (pwrite(fd, buf, sizeof(buf), 8192) != sizeof(buf)) return err("pwrite after close");
    if (fdatasync(fd) != 0) return err("fdatasync");
    if (close(fd) != 0) return err("close");
    return 0;
  }
  if (!strcmp(cmd, "reuse") && argc == 4) {  /* reuse FILE libc|raw */
    int fd = open(path, O_RDWR);
    if (fd < 0) return err("open");
    if (raw(SYS_close, fd, 0) != 0) { printf("raw close failed\n"); return 1; }
    int p[2];
    if (!strcmp(argv[3], "raw")) {
      /* The pipe is made behind the library's back too: only its per-write check remains. */
      long r = raw(SYS_pipe2, (long)p, 0);
      if (r != 0) { errno = -r; return err("pipe2"); }
    } else if (pipe(p) != 0) {
      return err("pipe");
    }
    if (p[0] != fd) { printf("pipe got %d, not %d\n", p[0], fd); return 1; }
    /* fd is now the pipe's read end: the kernel refuses a pwrite on it. */
    char buf[8192];
    memset(buf, 'X', sizeof(buf));
    if (pwrite(fd, buf, sizeof(buf), 0) >= 0) { printf("pwrite on the pipe succeeded\n"); return 1; }
    printf("pwrite %s\n", strerrorname_np(errno));
    if (fdatasync(fd) == 0) { printf("fdatasync on the pipe succeeded\n"); return 1; }
    printf("fdatasync %s\n", strerrorname_np(errno));
    return 0;
  }
  return 2;
}
EOF

SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
on_exit "rm -rf '$SHM'"
SEG=000000010000000000000001

direct() { LD_PRELOAD=$LIB "$CLIENT" "$@"; }
# wait_field MOUNT KEY VALUE: the status field reaches VALUE within 5 s.
wait_field() {
  local i
  for ((i = 0; i < 100; i++)); do
    [ "$(walfs_status_field "$1" "$2")" = "$3" ] && return 0
    sleep 0.05
  done
  fail "status $2 is $(walfs_status_field "$1" "$2"), expected $3"
}
# expect_bytes FILE OFF LEN CHAR: LEN bytes at OFF of FILE are all CHAR.
expect_bytes() {
  cmp <(dd if="$1" bs=4096 skip=$(($2 / 4096)) count=$(($3 / 4096)) status=none) \
    <(head -c "$3" /dev/zero | tr '\0' "$4") || fail "$1: [$2, +$3) is not all '$4'"
}
new_segment() { dd if=/dev/zero of="$1" bs=1M count=16 status=none; }
# session_start NAME CMD FILE: a preloaded client running CMD (session|spin) on FILE in
# the background, talking through fifos; sets NAME_PID, NAME_IN, NAME_OUT (descriptors)
# and waits for its "open".
SESSION_FDS=()  # this shell's ends of every session's fifos
session_start() {
  local name=$1 cmd=$2 file=$3 in=$WORK/$1.in out=$WORK/$1.out fdin fdout line fd
  mkfifo "$in" "$out"
  # The new client must not inherit the other sessions' ends: an inherited write end of
  # another session's input would keep that session from ever seeing EOF.
  (
    for fd in "${SESSION_FDS[@]}"; do eval "exec $fd>&-"; done
    exec env LD_PRELOAD="$LIB" "$CLIENT" "$cmd" "$file" <"$in" >"$out"
  ) &
  printf -v "${name}_PID" %s $!
  exec {fdin}>"$in" {fdout}<"$out"
  SESSION_FDS+=("$fdin" "$fdout")
  printf -v "${name}_IN" %s "$fdin"
  printf -v "${name}_OUT" %s "$fdout"
  read -r line <&"$fdout" && [ "$line" = open ] || fail "session $name: $line"
}
# session_write NAME "OFF LEN CHAR": one pwrite + fdatasync by the session, which must
# answer ok.
session_write() {
  local in=${1}_IN out=${1}_OUT line
  echo "$2" >&"${!in}"
  read -r line <&"${!out}" && [ "$line" = ok ] || fail "session $1 write $2: $line"
}
# session_end NAME: closes its input; it closes the file and exits.
session_end() {
  local in=${1}_IN pid=${1}_PID
  eval "exec ${!in}>&-"
  wait "${!pid}" 2>/dev/null || true
}

POOL=$SHM/pool
M=$WORK/mnt
make_pool "$POOL" 256M
PMEM_IS_PMEM_FORCE=1 mount_walfs "$POOL" "$M" -o allow_other,default_permissions
on_failure "cat '$WALFS_LOG'"
# /dev/shm has no huge pages unless the kernel forces them for every tmpfs.
if ! grep -q '\[force\]' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null &&
  ! findmnt -n -o OPTIONS -T "$SHM" | grep -qE 'huge=(always|within_size)'; then
  grep -q "is on a tmpfs mounted huge=.*page fault per 4 KiB page" "$WALFS_LOG" ||
    fail "no warning for a pool on a tmpfs without huge pages"
fi

log "direct writes bypass FUSE and read back at once"
new_segment "$M/$SEG"
writes0=$(walfs_status_field "$M" writes)
mtime0=$(stat -c %y "$M/$SEG")
sleep 1.1
direct write "$M/$SEG" 0 8192 p 64 || fail "direct write"
[ "$(walfs_status_field "$M" writes)" = "$writes0" ] || fail "direct writes went through FUSE"
[ "$(walfs_status_field "$M" leases_granted)" = 1 ] || fail "no lease granted"
wait_field "$M" leases_active 0
expect_bytes "$M/$SEG" 0 $((64 * 8192)) p
expect_bytes "$M/$SEG" $((64 * 8192)) 8192 '\0'
[ "$(stat -c %y "$M/$SEG")" != "$mtime0" ] || fail "mtime not updated when the lease ended"
# Without the library, with WALFS_DIRECT=0, and past the lease, writes are FUSE WRITEs;
# write(2) inside the lease is stored directly at the file offset.
"$CLIENT" write "$M/$SEG" 0 8192 q 4 || fail "plain write"
(($(walfs_status_field "$M" writes) == writes0 + 4)) || fail "plain writes not counted as FUSE writes"
WALFS_DIRECT=0 LD_PRELOAD=$LIB "$CLIENT" write "$M/$SEG" 0 8192 q 4 || fail "inert write"
(($(walfs_status_field "$M" writes) == writes0 + 8)) || fail "WALFS_DIRECT=0 writes not through FUSE"
granted0=$(walfs_status_field "$M" leases_granted)
direct wseq "$M/$SEG" 8192 4 || fail "write(2)"
(($(walfs_status_field "$M" writes) == writes0 + 8)) || fail "write(2) inside the lease went through FUSE"
(($(walfs_status_field "$M" leases_granted) == granted0 + 1)) || fail "write(2) took no lease"
expect_bytes "$M/$SEG" 0 $((4 * 8192)) w
expect_bytes "$M/$SEG" $((4 * 8192)) 8192 p
direct write "$M/$SEG" $((16 << 20)) 8192 x 1 || fail "write past the lease"
(($(walfs_status_field "$M" writes) == writes0 + 9)) || fail "a write past the lease not through FUSE"
[ "$(stat -c %s "$M/$SEG")" = $(((16 << 20) + 8192)) ] || fail "size after a write past the lease"
truncate -s $((16 << 20)) "$M/$SEG"

log "cp into the mount (a restore_command): the empty destination is sized and leased"
# cp tries copy_file_range first; the library gives the new file the source's size, takes
# a write lease and stores the bytes into the pool: no FUSE WRITE. Twice: a new file,
# then the same name again (O_TRUNC).
head -c $((16 << 20)) /dev/urandom >"$WORK/archived"
for round in new again; do
  writes0=$(walfs_status_field "$M" writes)
  granted0=$(walfs_status_field "$M" leases_granted)
  LD_PRELOAD=$LIB cp "$WORK/archived" "$M/RECOVERYXLOG" || fail "$round: cp into the mount failed"
  (($(walfs_status_field "$M" writes) == writes0)) ||
    fail "$round: cp into the mount made $(($(walfs_status_field "$M" writes) - writes0)) FUSE WRITEs"
  (($(walfs_status_field "$M" leases_granted) == granted0 + 1)) || fail "$round: cp took no write lease"
  cmp "$WORK/archived" "$M/RECOVERYXLOG" || fail "$round: cp into the mount stored other bytes"
done
rm -f "$M/RECOVERYXLOG" "$WORK/archived"

log "reopening a file just written through FUSE sends the daemon nothing more"
# PostgreSQL reopens every new segment to fsync it right after the zero-fill, whose
# WRITEs invalidated the kernel's cached attributes: the library's stat at open must not
# cost a GETATTR. The daemon's "other" requests (GETATTR among them) must grow as much
# with the library as without it.
other_requests() {
  python3 -c 'import json, os, sys
print(json.loads(os.getxattr(sys.argv[1], "user.walfs.status"))["latency"]["other"]["count"])' "$M"
}
reopen_rounds() {
  local i before
  before=$(other_requests)
  for ((i = 0; i < 5; i++)); do
    "$CLIENT" write "$M/$SEG" 0 8192 z 1 || fail "write before reopen"
    "$@" reopen "$M/$SEG" || fail "reopen"
  done
  echo $(($(other_requests) - before))
}
plain_other=$(reopen_rounds "$CLIENT")
direct_other=$(reopen_rounds direct)
# A GETATTR per reopen would be 5 more; one either way is an attribute timeout expiring
# during one of the two runs.
((direct_other <= plain_other + 1)) ||
  fail "5 reopens after a write cost $direct_other other requests with the library, $plain_other without"
(($(walfs_status_field "$M" leases_active) == 0)) || fail "a reopen to fsync took a lease"

log "truncate, unlink and rename-over while a client writes"
session_start S1 session "$M/$SEG"
session_write S1 "0 8192 r"
[ "$(walfs_pool_lock "$POOL")" = locked ] || fail "the pool is not read-locked while a client maps it"
out=$(truncate -s 4096 "$M/$SEG" 2>&1) && fail "truncate under a writing client succeeded"
[[ "$out" == *"Text file busy"* ]] || fail "truncate: $out"
new_segment "$M/other"
"$CLIENT" write "$M/other" 0 8192 o 2048 || fail "write other"
free_before=$(walfs_status_field "$M" free_blocks)
mv "$M/other" "$M/$SEG"  # rename-over: the client's file is now an orphan
session_write S1 "8192 8192 s"
expect_bytes "$M/$SEG" 0 $((16 << 20)) o  # the new file is untouched
[ "$(walfs_status_field "$M" free_blocks)" = "$free_before" ] || fail "orphan's blocks freed under the client"
new_segment "$M/third"
expect_bytes "$M/third" 0 $((16 << 20)) '\0'
rm "$M/third"
session_end S1
wait_field "$M" leases_active 0
wait_field "$M" free_blocks $((free_before + 4096))
[ "$(walfs_pool_lock "$POOL")" = free ] || fail "the pool is still locked after the client closed"

log "two processes lease one file; unlink under them"
session_start S2 session "$M/$SEG"
session_start S3 session "$M/$SEG"
# Leases are taken at a descriptor's first write, not at open.
[ "$(walfs_status_field "$M" leases_active)" = 0 ] || fail "a lease was taken at open"
writes0=$(walfs_status_field "$M" writes)
session_write S2 "0 4096 A"
session_write S3 "4096 4096 B"
wait_field "$M" leases_active 2
[ "$(walfs_status_field "$M" writes)" = "$writes0" ] || fail "shared-file writes went through FUSE"
expect_bytes "$M/$SEG" 0 4096 A
expect_bytes "$M/$SEG" 4096 4096 B
rm "$M/$SEG"
session_write S2 "8192 4096 C"
session_end S2
wait_field "$M" leases_active 1
free_mid=$(walfs_status_field "$M" free_blocks)
session_end S3
wait_field "$M" leases_active 0
wait_field "$M" free_blocks $((free_mid + 4096))

log "a client killed while writing"
new_segment "$M/$SEG"
session_start SPIN spin "$M/$SEG"
sleep 0.5
kill -9 "$SPIN_PID"
wait "$SPIN_PID" 2>/dev/null || true
wait_field "$M" leases_active 0
truncate -s 0 "$M/$SEG" || fail "truncate after the killed client's lease ended"

log "descriptor numbers reused behind the library's back"
new_segment "$M/$SEG"
for how in libc raw; do
  out=$(direct reuse "$M/$SEG" "$how") || fail "reuse ($how): $out"
  [ "$out" = $'pwrite ESPIPE\nfdatasync EINVAL' ] || fail "reuse ($how): $out"
done
expect_bytes "$M/$SEG" 0 $((16 << 20)) '\0'
# The daemon, not the library, saw that close: the write before it was direct, the one
# after it went through FUSE (the per-write check is the daemon's revocation stamp).
writes0=$(walfs_status_field "$M" writes)
flushes0=$(walfs_status_field "$M" fuse_flush)
out=$(direct dupclose "$M/$SEG") || fail "dupclose: $out"
(($(walfs_status_field "$M" writes) == writes0 + 1)) ||
  fail "after a close the library did not see, $(($(walfs_status_field "$M" writes) - writes0)) FUSE WRITEs, not 1"
(($(walfs_status_field "$M" fuse_flush) >= flushes0 + 2)) || fail "FLUSH not sent at close"
[ "$(walfs_status_field "$M" flush_shortcut)" = False ] || fail "FLUSH answered ENOSYS while leasing"
expect_bytes "$M/$SEG" 0 8192 D
expect_bytes "$M/$SEG" 8192 8192 E
new_segment "$M/$SEG"

log "a client of another user gets no lease and falls back"
chmod 0666 "$M/$SEG"
chmod 0777 "$M"
granted=$(walfs_status_field "$M" leases_granted)
writes0=$(walfs_status_field "$M" writes)
out=$(setpriv --reuid nobody --regid nogroup --clear-groups env LD_PRELOAD="$LIB" \
  "$CLIENT" write "$M/$SEG" 0 8192 n 8) || fail "client without the pool: $out"
(($(walfs_status_field "$M" writes) == writes0 + 8)) || fail "fallback writes did not go through FUSE"
(($(walfs_status_field "$M" leases_granted) == granted)) || fail "the daemon granted another user a lease"
expect_bytes "$M/$SEG" 0 $((8 * 8192)) n
wait_field "$M" leases_active 0

umount_walfs "$M"
"$FSCK" "$POOL" >/dev/null || fail "fsck after the direct-access tests: $("$FSCK" "$POOL" 2>&1)"

log "msync mode: no write lease, every write through FUSE; reads from the pool"
POOL2=$WORK/pool-msync
M2=$WORK/mnt-msync
make_pool "$POOL2" 64M
mount_walfs "$POOL2" "$M2"
new_segment "$M2/$SEG"
writes0=$(walfs_status_field "$M2" writes)
direct write "$M2/$SEG" 0 8192 m 16 || fail "write in msync mode"
(($(walfs_status_field "$M2" writes) == writes0 + 16)) || fail "msync-mode writes not through FUSE"
# The library asks for a session first: it says reads only, so no write lease is asked.
[ "$(walfs_status_field "$M2" sessions_granted)" = 1 ] || fail "msync mode: no session"
[ "$(walfs_status_field "$M2" direct_access)" = False ] || fail "msync mode offers direct writes"
[ "$(walfs_status_field "$M2" leases_granted)" = 0 ] || fail "msync mode granted a write lease"
[ "$(walfs_status_field "$M2" leases_refused)" = 0 ] || fail "msync mode: a write lease was asked for"
reads0=$(walfs_status_field "$M2" reads)
direct read "$M2/$SEG" 0 8192 m 16 || fail "read in msync mode"
[ "$(walfs_status_field "$M2" reads)" = "$reads0" ] || fail "msync-mode reads went through FUSE"
[ "$(walfs_status_field "$M2" read_leases_granted)" = 1 ] || fail "msync mode: no read lease"
expect_bytes "$M2/$SEG" 0 $((16 * 8192)) m
head -c $((1 << 20)) /dev/urandom >"$WORK/archived"
writes0=$(walfs_status_field "$M2" writes)
LD_PRELOAD=$LIB cp "$WORK/archived" "$M2/RECOVERYXLOG" || fail "msync mode: cp into the mount failed"
(($(walfs_status_field "$M2" writes) > writes0)) || fail "msync mode: cp into the mount not through FUSE"
[ "$(walfs_status_field "$M2" leases_granted)" = 0 ] || fail "msync mode: cp took a write lease"
cmp "$WORK/archived" "$M2/RECOVERYXLOG" || fail "msync mode: cp into the mount stored other bytes"
rm -f "$WORK/archived"
umount_walfs "$M2"
"$FSCK" "$POOL2" >/dev/null || fail "fsck of the msync pool"

log "a pool on a huge=always tmpfs: no page-size warning, and leases as before"
HUGE=$WORK/huge
mkdir -p "$HUGE"
mount -t tmpfs -o huge=always,size=128M,mode=0755 walfs-test-huge "$HUGE" ||
  fail "cannot mount a huge=always tmpfs"
on_exit "umount -l '$HUGE'"
POOL3=$HUGE/pool
M3=$WORK/mnt-huge
make_pool "$POOL3" 64M
PMEM_IS_PMEM_FORCE=1 mount_walfs "$POOL3" "$M3"
if grep -q "page fault per 4 KiB page" "$WALFS_LOG"; then
  fail "page-size warning for a pool with 2 MiB pages: $(cat "$WALFS_LOG")"
fi
new_segment "$M3/$SEG"
granted=$(walfs_status_field "$M3" leases_granted)
direct write "$M3/$SEG" 0 8192 h 4 || fail "write on the huge-page pool"
(($(walfs_status_field "$M3" leases_granted) == granted + 1)) || fail "no lease on the huge-page pool"
expect_bytes "$M3/$SEG" 0 $((4 * 8192)) h
umount_walfs "$M3"
"$FSCK" "$POOL3" >/dev/null || fail "fsck of the huge-page pool"

log "fs_direct: all checks passed"
