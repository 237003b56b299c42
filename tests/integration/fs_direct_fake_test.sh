#!/usr/bin/env bash
# A FUSE file system that claims to be walfs (walfs_fake_fuse: type fuse.walfs, forged
# answers to the session and lease ioctls) cannot make libwalfs-direct.so store anywhere
# but through the kernel (L1, L5, L7 in docs/design/lease.md). The fake server runs as
# nobody, or as postgres where a same-uid peer is needed to get past SO_PEERCRED; a client
# runs as postgres with the library preloaded (WALFS_DIRECT_DEBUG=1) and writes files on
# the fake mount with pwrite/pwritev and fsync. For every forged answer:
#  - every write succeeds and reads back through the kernel from the fake mount (the
#    server's WRITE handler stored it);
#  - no byte changes of a postgres-owned 0600 victim file outside the mount, nor of the
#    pool file the fake server passes;
#  - the server saw the client get as far as the forged step (so the mode tested what it
#    says).
# Forged answers: the hello passes a victim file the server opened (as postgres) or its
# own file (as nobody, which cannot open the victim); runs over the superblock; a lease
# reply or a hello with another pool's uuid; stamps in a plain file or an unsealed memfd;
# kDurabilityMapSync for a pool on tmpfs; every answer right but the server another user.
# Control: every answer right and a same-uid server: the client must store into the
# pool, or the harness would prove nothing.
source "$(dirname "$0")/lib/common.sh"

require_fuse
require_postgres
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
FAKE=$WALFS_BUILD_DIR/tests/tools/walfs_fake_fuse
[ -f "$LIB" ] || fail "direct-access library not built: $LIB"
[ -x "$FAKE" ] || fail "walfs_fake_fuse not built: $FAKE"
[ -x "$MKFS" ] || fail "mkfs not built: $MKFS"
command -v cc >/dev/null || skip "no C compiler for the test client (cc)"
id nobody >/dev/null 2>&1 || skip "no user nobody"
reexec_in_mount_namespace "$@"

WORK=$(make_workdir)
SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
chmod 0755 "$SHM"
on_exit "rm -rf '$SHM'"

CLIENT=$WORK/fclient
cc -O1 -o "$CLIENT" -x c - <<'EOF' || fail "cannot build the test client"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#define SIZE (1 << 20)
static int err(const char *what) { printf("%s: %s\n", what, strerrorname_np(errno)); return 1; }
/* FILE: 1 MiB of zeros through write(2), then pwrite, pwritev, fsync, pwrite,
   fdatasync on a new descriptor, then everything read back through the kernel. */
int main(int argc, char **argv) {
  if (argc != 2) return 2;
  static char want[SIZE], got[SIZE];
  int fd = open(argv[1], O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (fd < 0) return err("create");
  if (write(fd, want, SIZE) != SIZE) return err("write");
  if (close(fd) != 0) return err("close");
  fd = open(argv[1], O_RDWR);
  if (fd < 0) return err("open");
  char a[8192], b[4096], c[4096], d[4096];
  memset(a, 'a', sizeof(a)); memset(b, 'b', sizeof(b));
  memset(c, 'c', sizeof(c)); memset(d, 'd', sizeof(d));
  if (pwrite(fd, a, sizeof(a), 0) != sizeof(a)) return err("pwrite");
  memcpy(want, a, sizeof(a));
  struct iovec iov[2] = {{b, sizeof(b)}, {c, sizeof(c)}};
  if (pwritev(fd, iov, 2, 8192) != 8192) return err("pwritev");
  memcpy(want + 8192, b, 4096);
  memcpy(want + 12288, c, 4096);
  if (fsync(fd) != 0) return err("fsync");
  if (pwrite(fd, d, sizeof(d), 65536) != sizeof(d)) return err("pwrite 2");
  memcpy(want + 65536, d, 4096);
  if (fdatasync(fd) != 0) return err("fdatasync");
  if (close(fd) != 0) return err("close 2");
  fd = open(argv[1], O_RDONLY);
  if (fd < 0) return err("reopen");
  ssize_t n = pread(fd, got, SIZE, 0);
  if (n != SIZE) { printf("read back %zd bytes\n", n); return 1; }
  close(fd);
  if (memcmp(want, got, SIZE) != 0) { printf("read back differs\n"); return 1; }
  printf("ok\n");
  return 0;
}
EOF
chmod 0755 "$CLIENT"

# The victim: postgres's, 0600, outside any mount.
VICTIM=$WORK/victim
head -c $((8 << 20)) /dev/urandom >"$VICTIM"  # past the data area's start
chown postgres: "$VICTIM"
chmod 0600 "$VICTIM"
victim_sum=$(sha256sum <"$VICTIM")

# fake_run N MODE USER EXPECT...: walfs_fake_fuse MODE as USER with a pool of USER's; the
# preloaded client writes two files on it. EXPECT words: "stored" (control: the pool must
# change), "session", "connected", "hello", "lease" (log lines the server must have
# written).
fake_run() {
  local n=$1 mode=$2 user=$3
  shift 3
  local dir=$SHM/$n mnt=$WORK/fake$n flog=$WORK/fake$n.log clog=$WORK/client$n.log
  local pool pool_sum pid i f out want
  mkdir -p "$dir" "$mnt"
  chown "$user:" "$dir"
  pool=$dir/pool
  runuser -u "$user" -- "$MKFS" --size 64M "$pool" >/dev/null || fail "$mode: mkfs as $user"
  pool_sum=$(sha256sum <"$pool")
  : >"$flog"
  chmod 0666 "$flog"
  "$FAKE" "$mode" "$mnt" --pool "$pool" --victim "$VICTIM" --stamps "$dir/stamps" \
    --user "$user" --log "$flog" 2>>"$flog" &
  pid=$!
  on_exit "umount -l '$mnt'; kill -9 $pid"
  for ((i = 0; i < 200; i++)); do
    grep -q '^mounted' "$flog" && break
    kill -0 "$pid" 2>/dev/null || { cat "$flog" >&2; fail "$mode: the fake server exited"; }
    sleep 0.05
  done
  grep -q '^mounted' "$flog" || { cat "$flog" >&2; fail "$mode: the fake server did not mount"; }
  grep " $mnt " /proc/self/mountinfo | grep -q ' - fuse\.walfs ' ||
    fail "$mode: $mnt is not a fuse.walfs mount: $(grep " $mnt " /proc/self/mountinfo)"
  for f in 000000010000000000000001 000000010000000000000002; do
    out=$(runuser -u postgres -- env LD_PRELOAD="$LIB" WALFS_DIRECT_DEBUG=1 \
      timeout 60 "$CLIENT" "$mnt/$f" 2>>"$clog") || true
    # Control: the stores went into the pool, so the server has only the zeros.
    if [[ " $* " == *" stored "* ]] && [ "$out" = "read back differs" ]; then continue; fi
    [ "$out" = ok ] ||
      { cat "$flog" "$clog" >&2; fail "$mode as $user: the client's writes to $f: $out"; }
    # Through the kernel once more, by another process: what the server stored.
    cmp -s <(head -c 8192 "$mnt/$f") <(head -c 8192 /dev/zero | tr '\0' a) &&
      cmp -s <(dd if="$mnt/$f" bs=4096 skip=16 count=1 status=none) \
        <(head -c 4096 /dev/zero | tr '\0' d) ||
      fail "$mode as $user: $f does not read back through the mount"
  done
  [ "$(sha256sum <"$VICTIM")" = "$victim_sum" ] || fail "$mode as $user: the victim file changed"
  for want in "$@"; do
    case $want in
      stored)
        [ "$(sha256sum <"$pool")" != "$pool_sum" ] ||
          { cat "$flog" "$clog" >&2; fail "$mode as $user: a same-uid server answering as walfs got no direct store: this harness would prove nothing"; }
        ;;
      session | connected | hello | lease)
        grep -q "^$want" "$flog" ||
          { cat "$flog" "$clog" >&2; fail "$mode as $user: the client never got to the forged step ($want)"; }
        ;;
    esac
  done
  if [[ " $* " != *" stored "* ]]; then
    [ "$(sha256sum <"$pool")" = "$pool_sum" ] ||
      { cat "$flog" "$clog" >&2; fail "$mode as $user: the client stored into the pool file the fake server passed"; }
  fi
  log "$mode as $user: $(grep -E '^(cannot open victim|passing victim)' "$flog" | head -1)"
  [ ! -s "$clog" ] || sed 's/^/  /' "$clog" | sort -u -k3 >&2
  umount -l "$mnt"
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
}

log "control: right answers from a same-uid server get direct stores"
fake_run 1 control postgres session hello lease stored
log "forged answers"
fake_run 2 control nobody session connected          # wrong peer: another user
fake_run 3 victim nobody session connected           # cannot open the victim: its own file
grep -q '^cannot open victim' "$WORK/fake3.log" || fail "nobody could open the victim"
fake_run 4 victim postgres session hello         # the victim itself
grep -q '^passing victim' "$WORK/fake4.log" || fail "the postgres server did not pass the victim"
fake_run 5 outside postgres session hello lease
fake_run 6 lease-uuid postgres session hello lease
fake_run 7 hello-uuid postgres session hello
fake_run 8 unsealed-file postgres session hello
fake_run 9 unsealed-memfd postgres session hello
fake_run 10 no-mapsync postgres session hello

log "fs_direct_fake: all checks passed"
