#!/bin/bash
# mount(8) and fstab support, through what Debian ships: `mount -t fuse.walfs` finds no
# mount.fuse.walfs, falls back to the fuse3 package's /sbin/mount.fuse, which runs
# `/bin/sh -c 'walfs POOL DIR -o OPTIONS'`. mount(8) clears PATH from the helper's
# environment, so the shell's default PATH is searched
# (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin): the package's
# /usr/sbin/walfs is found, a walfs only on the caller's PATH is not.
#
# The test runs in a private mount namespace in which a directory holding a `walfs`
# link to the built daemon is bind-mounted over /usr/local/sbin, so nothing is installed
# on the machine and every mount made here is invisible outside and dies with it.
# Checked:
#   - without walfs on the default PATH, mount -t fuse.walfs fails (and mounts nothing)
#     even with walfs on the caller's PATH;
#   - mount -t fuse.walfs POOL DIR -o allow_other,default_permissions mounts; the
#     postgres user can write and fsync; umount DIR stops the daemon;
#   - an fstab line with nofail and x-systemd.* options, mounted with mount -T FILE
#     DIR (util-linux --fstab) and by source: the daemon gets the walfs options and
#     none of the x-systemd.* or nofail ones;
#   - setuid=postgres (mount.fuse3 starts the daemon as postgres, which mounts through
#     the setuid fusermount3): refused without user_allow_other in /etc/fuse.conf,
#     works with it (a bind-mounted fuse.conf: the machine's is never touched).
source "$(dirname "$0")/lib/common.sh"

require_fuse
[ -x "$MKFS" ] || fail "mkfs.walfs not built: $MKFS"
command -v mount.fuse3 >/dev/null || [ -x /sbin/mount.fuse3 ] || skip "mount.fuse3 is missing (apt-get install fuse3)"
[ -e /sbin/mount.fuse ] || skip "/sbin/mount.fuse (fuse3) is missing"
id postgres >/dev/null 2>&1 || skip "no postgres user"
reexec_in_mount_namespace "$@"

WORK=$(make_workdir)
# make_workdir runs in the $(...) subshell, where its own cleanup entry is lost.
on_exit "rm -rf '$WORK'"
POOL=$WORK/pg.pool
MNT=$WORK/wal
mkdir -p "$MNT"
make_pool "$POOL" 128M

# The daemon(s) serving $1 (a pool path), found by command line: the mount helper starts
# them, so the test has no pid of its own to wait on.
daemon_pids() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
    case $cmd in
      "walfs $1 "* | "$WALFS $1 "*) echo "${p#/proc/}" ;;
    esac
  done
}
kill_daemons() {
  local pid
  for pid in $(daemon_pids "$1"); do kill -9 "$pid" 2>/dev/null; done
}
wait_daemons_gone() {
  local i
  for ((i = 0; i < 200; i++)); do
    [ -z "$(daemon_pids "$1")" ] && return 0
    sleep 0.05
  done
  fail "walfs for $1 still running 10s after umount: $(daemon_pids "$1")"
}
on_exit "kill_daemons '$POOL'"
on_exit "umount -l '$MNT'"

BIN=$WORK/bin
mkdir -p "$BIN"
ln -s "$WALFS" "$BIN/walfs"
SYS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

if ! PATH=$SYS_PATH command -v walfs >/dev/null; then
  log "walfs on the caller's PATH only: mount must fail"
  if PATH=$BIN:$PATH mount -t fuse.walfs "$POOL" "$MNT" -o allow_other,default_permissions 2>"$WORK/err"; then
    fail "mount -t fuse.walfs found walfs on the caller's PATH: mount(8) is expected to clear it"
  fi
  grep -q "walfs: not found" "$WORK/err" || fail "unexpected error without walfs on the default PATH: $(cat "$WORK/err")"
  ! mountpoint -q "$MNT" || fail "something got mounted without walfs"
else
  log "walfs is installed system-wide ($(PATH=$SYS_PATH command -v walfs)): negative PATH check skipped"
fi
# /usr/local/sbin is first on the shell's default PATH: ours shadows any installed walfs.
mount --bind "$BIN" /usr/local/sbin
[ "$(env -i /bin/sh -c 'command -v walfs')" = /usr/local/sbin/walfs ] ||
  fail "the default PATH does not find /usr/local/sbin/walfs"

# --- mount -t fuse.walfs
log "mount -t fuse.walfs"
mount -t fuse.walfs "$POOL" "$MNT" -o allow_other,default_permissions ||
  fail "mount -t fuse.walfs failed"
mountpoint -q "$MNT" || fail "mount returned but $MNT is not a mount point"
[ "$(findmnt -n -o FSTYPE --mountpoint "$MNT")" = fuse.walfs ] ||
  fail "type is $(findmnt -n -o FSTYPE --mountpoint "$MNT"), not fuse.walfs"
[ "$(findmnt -n -o SOURCE --mountpoint "$MNT")" = "$POOL" ] ||
  fail "source is $(findmnt -n -o SOURCE --mountpoint "$MNT"), not $POOL"
opts=$(findmnt -n -o OPTIONS --mountpoint "$MNT")
[[ ,$opts, == *,allow_other,* && ,$opts, == *,default_permissions,* ]] ||
  fail "kernel mount options lack allow_other/default_permissions: $opts"
# mount.fuse3 adds dev,suid; walfs must not pass them on: device nodes in a pool (which
# whoever writes the pool file can forge) are inert only on a nodev mount.
[[ ,$opts, == *,nodev,* && ,$opts, == *,nosuid,* ]] ||
  fail "mounted through mount(8) without nodev/nosuid: $opts"
pid=$(daemon_pids "$POOL")
[ -n "$pid" ] || fail "no walfs daemon found for $POOL"
[ "$(wc -w <<<"$pid")" = 1 ] || fail "several daemons for one pool: $pid"
[ "$(stat -c %U "/proc/$pid")" = root ] || fail "daemon does not run as root"

# The postgres user works in a directory of its own, through allow_other.
mkdir "$MNT/pg_wal"
chown postgres:postgres "$MNT/pg_wal"
chmod 0700 "$MNT/pg_wal"
as_postgres bash -c "head -c 16384 /dev/urandom > '$MNT/pg_wal/000000010000000000000001'"
as_postgres sync -- "$MNT/pg_wal/000000010000000000000001" "$MNT/pg_wal" ||
  fail "fsync on the mount failed"
sum1=$(as_postgres sha256sum <"$MNT/pg_wal/000000010000000000000001")
[ "$(stat -c %U "$MNT/pg_wal/000000010000000000000001")" = postgres ] ||
  fail "file not owned by its creator"
# default_permissions: another unprivileged user is kept out of postgres's 0700 dir.
if runuser -u nobody -- ls "$MNT/pg_wal" >/dev/null 2>&1; then
  fail "nobody could list postgres's 0700 directory"
fi

log "umount"
umount "$MNT" || fail "umount failed"
! mountpoint -q "$MNT" || fail "still mounted after umount"
wait_daemons_gone "$POOL"

# --- fstab, through mount -T FILE (what systemd's generated .mount unit runs too)
FSTAB=$WORK/fstab
cat >"$FSTAB" <<EOF
# test fstab
$POOL $MNT fuse.walfs allow_other,default_permissions,nofail,threads=2,x-systemd.requires-mounts-for=$WORK,x-systemd.before=postgresql@15-main.service,x-systemd.required-by=postgresql@15-main.service 0 0
EOF
log "mount -T fstab MOUNTPOINT"
mount -T "$FSTAB" "$MNT" || fail "mount -T $FSTAB $MNT failed"
mountpoint -q "$MNT" || fail "fstab mount returned but $MNT is not a mount point"
pid=$(daemon_pids "$POOL")
[ -n "$pid" ] || fail "no walfs daemon for the fstab mount"
cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
log "daemon started as: $cmdline"
[[ $cmdline == *threads=2* ]] || fail "threads=2 did not reach the daemon: $cmdline"
[[ $cmdline != *x-systemd* ]] || fail "x-systemd.* options reached the daemon: $cmdline"
[[ $cmdline != *nofail* ]] || fail "nofail reached the daemon: $cmdline"
# What was written before is there.
[ "$(as_postgres sha256sum <"$MNT/pg_wal/000000010000000000000001")" = "$sum1" ] ||
  fail "data differs after remounting"
umount "$MNT" || fail "umount of the fstab mount failed"
wait_daemons_gone "$POOL"

# mount by source works too (mount -T FILE POOL).
mount -T "$FSTAB" "$POOL" || fail "mount -T $FSTAB $POOL failed"
mountpoint -q "$MNT" || fail "mount by source did not mount $MNT"
umount "$MNT"
wait_daemons_gone "$POOL"

# --- setuid=postgres: the daemon runs as postgres and mounts through fusermount3.
POOL2=$WORK/user.pool
MNT2=$WORK/userwal
make_pool "$POOL2" 64M
chown postgres:postgres "$POOL2"
install -d -o postgres -g postgres -m 0700 "$MNT2"
on_exit "kill_daemons '$POOL2'"
printf '%s\n' "# no user_allow_other" >"$WORK/fuse.conf.without"
printf '%s\n' "user_allow_other" >"$WORK/fuse.conf.with"
cat >"$WORK/fstab.user" <<EOF
$POOL2 $MNT2 fuse.walfs setuid=postgres,allow_other,default_permissions,nofail 0 0
EOF

# Debian's udev makes /dev/fuse 0666; a container may make it 0600, which keeps every
# non-root daemon out (libfuse opens it before it falls back to fusermount3). Here, in
# this namespace only, a 0666 node for the same device stands in for it.
if ! as_postgres test -r /dev/fuse -a -w /dev/fuse; then
  log "/dev/fuse is $(stat -c %a /dev/fuse) here: binding a 0666 node over it in this namespace"
  mknod -m 0666 "$WORK/fuse-dev" c "$((16#$(stat -c %t /dev/fuse)))" "$((16#$(stat -c %T /dev/fuse)))" ||
    skip "cannot make a /dev/fuse node"
  mount --bind "$WORK/fuse-dev" /dev/fuse
  on_exit "umount /dev/fuse"
fi

log "setuid=postgres without user_allow_other"
mount --bind "$WORK/fuse.conf.without" /etc/fuse.conf
on_exit "umount /etc/fuse.conf"
if mount -T "$WORK/fstab.user" "$MNT2" 2>"$WORK/err.user"; then
  fail "setuid=postgres with allow_other mounted without user_allow_other"
fi
grep -q user_allow_other "$WORK/err.user" || fail "no user_allow_other hint: $(cat "$WORK/err.user")"
! mountpoint -q "$MNT2" || fail "half-mounted after the refusal"
umount /etc/fuse.conf

log "setuid=postgres with user_allow_other"
mount --bind "$WORK/fuse.conf.with" /etc/fuse.conf
on_exit "umount -l '$MNT2'"
mount -T "$WORK/fstab.user" "$MNT2" || fail "setuid=postgres mount failed with user_allow_other"
mountpoint -q "$MNT2" || fail "setuid=postgres: not mounted"
pid=$(daemon_pids "$POOL2")
[ -n "$pid" ] || fail "no daemon for the setuid=postgres mount"
[ "$(stat -c %U "/proc/$pid")" = postgres ] || fail "daemon runs as $(stat -c %U "/proc/$pid"), not postgres"
owner=$(findmnt -n -o OPTIONS --mountpoint "$MNT2" | grep -o 'user_id=[0-9]*')
[ "$owner" = "user_id=$(id -u postgres)" ] || fail "mount not owned by postgres: $owner"
# A new pool's root belongs to root (0755): root hands it over once, through allow_other.
if as_postgres touch "$MNT2/f" 2>/dev/null; then fail "postgres could write a root-owned 0755 root"; fi
chown postgres:postgres "$MNT2"
as_postgres bash -c "echo wal > '$MNT2/f' && sync -- '$MNT2/f'"
[ "$(cat "$MNT2/f")" = wal ] || fail "root cannot read through allow_other"
umount "$MNT2" || fail "umount of the setuid=postgres mount failed"
! mountpoint -q "$MNT2" || fail "still mounted after umount"
wait_daemons_gone "$POOL2"

log "PASS"
