# Shared helpers for walfs integration tests (sourced, not run).
#
# Every resource a test makes is registered for cleanup (on_exit), which runs on any exit
# (success, failure, or a signal): servers are stopped, mounts unmounted, temp dirs
# removed. Diagnostics registered with on_failure run first, only on a failing exit, while
# everything they look at still exists. Tests call `skip "reason"` (exit 77, ctest's
# SKIP_RETURN_CODE) when the machine cannot run them, `fail "what"` when an assertion
# fails.
#
# Environment (set by ctest; defaults work from a build dir named build/):
#   WALFS_BUILD_DIR   the CMake build directory
#   WALFS_SOURCE_DIR  the source tree

set -euo pipefail

WALFS_SOURCE_DIR=${WALFS_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
WALFS_BUILD_DIR=${WALFS_BUILD_DIR:-$WALFS_SOURCE_DIR/build}
WALFS=$WALFS_BUILD_DIR/fs/walfs
MKFS=$WALFS_BUILD_DIR/tools/mkfs.walfs
FSCK=$WALFS_BUILD_DIR/tools/fsck.walfs
WALFSCTL=$WALFS_BUILD_DIR/tools/walfsctl
# The PostgreSQL major version under test. 17 and 18 run in a Debian chroot (lib/pg.sh sets
# PG_ROOT to it in pg_require); PG_BIN is then the path inside it.
WALFS_PG_VERSION=${WALFS_PG_VERSION:-15}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/$WALFS_PG_VERSION/bin}
PG_ROOT=

_CLEANUP=()     # commands run in reverse order at exit
_ON_FAILURE=()  # commands run in order at a failing exit, before the cleanup

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
skip() { log "SKIP: $*"; exit 77; }

on_exit() { _CLEANUP+=("$*"); }

# on_failure CMD: runs CMD (eval'd) when the test exits with a status other than 0 or 77,
# before any cleanup, with its output on the test's original stderr. For diagnostics:
# cleanup commands' own output is discarded, so a report cannot be one of them.
on_failure() { _ON_FAILURE+=("$*"); }

# The stderr the test started with: a failure inside a redirected block still reports.
exec {_WALFS_STDERR}>&2

_run_cleanup() {
  local rc=$? i
  set +e
  if ((rc != 0 && rc != 77)); then
    for ((i = 0; i < ${#_ON_FAILURE[@]}; i++)); do
      eval "${_ON_FAILURE[i]}" >&"$_WALFS_STDERR" 2>&1
    done
  fi
  for ((i = ${#_CLEANUP[@]} - 1; i >= 0; i--)); do
    eval "${_CLEANUP[i]}" >/dev/null 2>&1
  done
  exit $rc
}
trap _run_cleanup EXIT
trap 'exit 130' INT TERM

require_fuse() {
  [ -c /dev/fuse ] || skip "/dev/fuse is missing"
  command -v fusermount3 >/dev/null || skip "fusermount3 is missing (apt-get install fuse3)"
  [ -x "$WALFS" ] || fail "daemon not built: $WALFS"
}

# require_test_facilities: skips unless the daemon was built with
# -DWALFS_TEST_FACILITIES=ON (its usage offers powercut_sim only then).
require_test_facilities() {
  [ -x "$WALFS" ] || fail "daemon not built: $WALFS"
  local usage
  usage=$("$WALFS" --help 2>&1) || fail "$WALFS --help failed: $usage"
  [[ $usage == *powercut_sim* ]] ||
    skip "$WALFS was built without test facilities (configure with -DWALFS_TEST_FACILITIES=ON): no -o powercut_sim"
}

require_postgres() {
  [ -x "$PG_ROOT$PG_BIN/initdb" ] || skip "PostgreSQL $WALFS_PG_VERSION is missing ($PG_ROOT$PG_BIN)"
  id postgres >/dev/null 2>&1 || skip "no postgres user"
}

# Every scratch directory of this test lives under one root made here, in the test's own
# shell, so it is removed at exit even when make_workdir runs in a $(...) subshell (where
# a cleanup entry would be lost). Registered first, so it runs after every unmount.
_WALFS_SCRATCH=$(mktemp -d /tmp/walfs-test.XXXXXX)
chmod 0755 "$_WALFS_SCRATCH"
on_exit "rm -rf '$_WALFS_SCRATCH'"

# reexec_in_mount_namespace "$@": runs this test script again in a private mount
# namespace (once; WALFS_IN_MOUNT_NS marks the inner run), so the mounts it makes are
# invisible outside and cannot outlive it. Call before making anything: the outer run's
# scratch root is removed here, since exec skips the exit cleanup.
reexec_in_mount_namespace() {
  [ -n "${WALFS_IN_MOUNT_NS:-}" ] && return 0
  command -v unshare >/dev/null || skip "unshare (util-linux) is missing"
  unshare -m --propagation private true 2>/dev/null || skip "cannot make a mount namespace"
  trap - EXIT
  rm -rf "$_WALFS_SCRATCH"
  exec unshare -m --propagation private env WALFS_IN_MOUNT_NS=1 bash "$0" "$@"
}

# A scratch directory, removed at exit, traversable by the postgres user.
make_workdir() {
  local d
  d=$(mktemp -d "$_WALFS_SCRATCH/w.XXXXXX")
  chmod 0755 "$d"
  echo "$d"
}

# A free TCP port on 127.0.0.1 (bind to port 0, read what the kernel chose).
free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
PY
}

# make_pool POOL SIZE [mkfs args...]: a fresh pool file (0600, owned by root).
make_pool() {
  local pool=$1 size=$2
  shift 2
  "$MKFS" --size "$size" "$@" "$pool" >/dev/null
}

# kill -9 PID, only if PID is still a walfs daemon (a pid recorded for cleanup may have
# been reused by the time cleanup runs).
kill_if_walfs() {
  local exe
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 0
  [ "$exe" = "$(readlink -f "$WALFS")" ] && kill -9 "$1"
  return 0
}

# mount_walfs POOL MNT [extra walfs args...]: runs the daemon in the foreground in the
# background, waits until MNT is a mount point, registers unmount at exit. Sets
# WALFS_PID. Extra args go to the daemon (e.g. -o allow_other,default_permissions).
mount_walfs() {
  local pool=$1 mnt=$2
  shift 2
  # A dead mount a killed daemon left answers stat with ENOTCONN unless the kernel still
  # caches the root's attributes, and mkdir -p stats what exists: make only a mount point
  # that is not one already (mountinfo is read without touching the mount).
  if ! grep -qF " $mnt " /proc/self/mountinfo; then mkdir -p "$mnt"; fi
  local logf
  logf=$(mktemp /tmp/walfs-daemon.XXXXXX.log)
  "$WALFS" "$pool" "$mnt" -f "$@" >"$logf" 2>&1 &
  WALFS_PID=$!
  WALFS_LOG=$logf
  on_exit "fusermount3 -u -z '$mnt'; kill_if_walfs $WALFS_PID; rm -f '$logf'"
  local i
  for ((i = 0; i < 200; i++)); do
    if mountpoint -q "$mnt"; then return 0; fi
    if ! kill -0 "$WALFS_PID" 2>/dev/null; then
      cat "$logf" >&2
      fail "walfs exited before mounting $mnt"
    fi
    sleep 0.05
  done
  cat "$logf" >&2
  fail "walfs did not mount $mnt within 10s"
}

# umount_walfs MNT: clean unmount; waits for the daemon to exit.
umount_walfs() {
  local mnt=$1 i dev
  dev=$(mountpoint -d "$mnt" 2>/dev/null || true)
  fusermount3 -u "$mnt"
  for ((i = 0; i < 200; i++)); do
    kill -0 "$WALFS_PID" 2>/dev/null || return 0
    sleep 0.05
  done
  walfs_stuck_report "$WALFS_PID" "$dev" >&2
  fail "walfs (pid $WALFS_PID) still running 10s after unmount of $mnt"
}

# walfs_stuck_report PID DEV: for a daemon that outlives its unmount: the mounts of its
# file system (device DEV, major:minor) left in any mount namespace (a namespace made
# while it was mounted keeps a copy, and with it the FUSE connection), where each of its
# threads waits, and the other processes that share a file of /dev/shm or a memfd with it.
walfs_stuck_report() {
  local pid=$1 dev=$2 t f target p ns seen=" "
  for p in /proc/[0-9]*; do
    ns=$(readlink "$p/ns/mnt" 2>/dev/null) || continue
    [[ $seen == *" $ns "* ]] && continue
    seen+="$ns "
    [ -n "$dev" ] || continue
    awk -v dev="$dev" '$3 == dev { print $5 }' "$p/mountinfo" 2>/dev/null |
      sed "s|^|still mounted in $ns (pid ${p#/proc/}, $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null |
        cut -c1-100)): |"
  done
  for t in /proc/"$pid"/task/*; do
    echo "thread ${t##*/} ($(cat "$t/comm" 2>/dev/null)): $(cat "$t/wchan" 2>/dev/null)"
  done
  for f in /proc/"$pid"/fd/*; do
    target=$(readlink "$f" 2>/dev/null) || continue
    case $target in /dev/shm/* | /memfd:*) ;; *) continue ;; esac
    for p in /proc/[0-9]*; do
      [ "${p#/proc/}" = "$pid" ] && continue
      if ls -l "$p/fd" 2>/dev/null | grep -qF -- "-> $target"; then
        echo "$target is also open in pid ${p#/proc/} ($(cat "$p/comm" 2>/dev/null))"
      fi
    done
  done
}

# walfs_status_field MOUNT KEY: one field of the daemon's status document (getxattr of
# user.walfs.status on the mount root), as Python prints it.
walfs_status_field() {
  python3 -c 'import json, os, sys
print(json.loads(os.getxattr(sys.argv[1], "user.walfs.status"))[sys.argv[2]])' "$1" "$2"
}

# walfs_pool_lock POOL: "locked" while a direct-access client holds its OFD read lock on
# POOL (what the daemon, mkfs --force and fsck --repair check), else "free".
walfs_pool_lock() {
  python3 - "$1" <<'PY'
import fcntl, os, struct, sys
F_OFD_GETLK = 36
fd = os.open(sys.argv[1], os.O_RDONLY)
lk = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
ltype = struct.unpack("hhqqi4x", fcntl.fcntl(fd, F_OFD_GETLK, lk))[0]
print("free" if ltype == fcntl.F_UNLCK else "locked")
PY
}

# as_postgres CMD...: runs a command as the postgres user.
as_postgres() { runuser -u postgres -- "$@"; }
