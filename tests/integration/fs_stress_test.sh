#!/usr/bin/env bash
# Concurrent load on a real mount (fs_stress.py: 12 threads in 6 processes creating,
# writing, reading, fsyncing, renaming, linking, unlinking, listing and stat-ing, in
# directories of their own and in one they share) against a daemon with 4 worker
# threads, forced-PMEM and msync pools. Afterwards: every file's contents as written, a
# clean unmount with exit status 0, fsck.walfs clean.
#
# Built for ThreadSanitizer: with WALFS_BUILD_DIR pointing at a -DWALFS_TSAN=ON build,
# the daemon runs with halt_on_error and any report (written to a log file per process)
# fails the test. The same holds for ASan/UBSan builds, whose reports go to stderr.
#   WALFS_STRESS_SECS   seconds of load per mode (default 10)
source "$(dirname "$0")/lib/common.sh"

require_fuse
[ -x "$MKFS" ] && [ -x "$FSCK" ] || fail "mkfs/fsck not built in $WALFS_BUILD_DIR"
command -v python3 >/dev/null || skip "python3 is missing (tools/install-deps.sh)"
SECS=${WALFS_STRESS_SECS:-10}
STRESS=$(dirname "$0")/fs_stress.py

WORK=$(make_workdir)
SAN_LOGS=$WORK/sanitizer
mkdir -p "$SAN_LOGS"
# Only the daemon is under test here; the options are inert for an uninstrumented build.
SUPP=$WALFS_SOURCE_DIR/tests/integration/tsan.supp
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 log_path=$SAN_LOGS/tsan suppressions=$SUPP ${TSAN_OPTIONS:-}"

sanitizer_reports() {
  if compgen -G "$SAN_LOGS/*" >/dev/null; then
    cat "$SAN_LOGS"/* >&2
    fail "[$1] sanitizer report (above)"
  fi
  if grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|SUMMARY: ' "$WALFS_LOG"; then
    cat "$WALFS_LOG" >&2
    fail "[$1] sanitizer report in the daemon log (above)"
  fi
}

run_mode() {
  local label=$1 pool=$2 mnt=$WORK/mnt-$1 pid rc=0
  log "[$label] $SECS s of concurrent load, threads=4"
  make_pool "$pool" 192M --segment-size 1M
  mount_walfs "$pool" "$mnt" -o threads=4
  pid=$WALFS_PID
  local free0 i
  free0=$(stat -f -c %f "$mnt")
  python3 "$STRESS" "$mnt" "$SECS" 6 >"$WORK/stress.out" 2>&1 || {
    cat "$WORK/stress.out" >&2
    sanitizer_reports "$label"
    fail "[$label] stress run failed"
  }
  cat "$WORK/stress.out" >&2
  kill -0 "$pid" 2>/dev/null || { sanitizer_reports "$label"; fail "[$label] daemon died"; }
  # Everything removed: every block comes back (no reference leaked under the races).
  rm -rf "${mnt:?}"/*
  for ((i = 0; i < 100; i++)); do
    [ "$(stat -f -c %f "$mnt")" = "$free0" ] && break
    sleep 0.1
  done
  [ "$(stat -f -c %f "$mnt")" = "$free0" ] ||
    fail "[$label] $(stat -f -c %f "$mnt") free blocks after removing everything, $free0 before"
  umount_walfs "$mnt"
  wait "$pid" || rc=$?
  sanitizer_reports "$label"
  [ "$rc" = 0 ] || { cat "$WALFS_LOG" >&2; fail "[$label] daemon exited with status $rc"; }
  "$FSCK" "$pool" >"$WORK/fsck.out" 2>&1 || { cat "$WORK/fsck.out" >&2; fail "[$label] fsck.walfs"; }
  "$WALFSCTL" inspect --json "$pool" >"$WORK/inspect.json" ||
    fail "[$label] walfsctl inspect"
  log "[$label] ok"
}

if [ -d /dev/shm ] && [ "$(df -k --output=avail /dev/shm | tail -1)" -ge 400000 ]; then
  SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
  on_exit "rm -rf '$SHM'"
else
  SHM=$WORK
fi

PMEM_IS_PMEM_FORCE=1 run_mode pmem "$SHM/pool"
run_mode msync "$WORK/pool-msync"
log "fs_stress: all checks passed"
