# Shared by the conformance scripts (sourced after they parsed their arguments): mounts
# walfs in one durability mode with the integration tests' helpers, so every mount, daemon
# and scratch directory is cleaned up on any exit, a failing one included.
#
# Needs WALFS_BUILD_DIR set (the CMake build directory holding fs/walfs and
# tools/mkfs.walfs). The caller runs reexec_in_mount_namespace first, so its mounts are
# invisible outside and cannot outlive it.

# shellcheck source=../../tests/integration/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/integration/lib/common.sh"

# conformance_mount MODE POOL_SIZE MNT [daemon args...]: makes a fresh pool for MODE and
# mounts it on MNT, checking that the daemon reports MODE. Sets CONFORMANCE_POOL.
#   pmem  - pool on /dev/shm (tmpfs) with PMEM_IS_PMEM_FORCE=1: writes durable on return
#   msync - pool under /var/tmp (a disk file system): fsync reaches the daemon
conformance_mount() {
  local mode=$1 size=$2 mnt=$3 dir
  shift 3
  case $mode in
    pmem) dir=/dev/shm ;;
    msync) dir=/var/tmp ;;
    *) fail "unknown mode '$mode' (pmem or msync)" ;;
  esac
  [ -d "$dir" ] && [ -w "$dir" ] || fail "$dir is missing or not writable (pool for $mode mode)"
  local pooldir
  pooldir=$(mktemp -d "$dir/walfs-conformance.XXXXXX")
  on_exit "rm -rf '$pooldir'"
  CONFORMANCE_POOL=$pooldir/pool
  make_pool "$CONFORMANCE_POOL" "$size"
  if [ "$mode" = pmem ]; then
    PMEM_IS_PMEM_FORCE=1 mount_walfs "$CONFORMANCE_POOL" "$mnt" "$@"
  else
    unset PMEM_IS_PMEM_FORCE
    mount_walfs "$CONFORMANCE_POOL" "$mnt" "$@"
  fi
  local got
  got=$(walfs_status_field "$mnt" mode)
  [ "$got" = "$mode" ] || fail "the daemon runs in $got mode, not $mode ($CONFORMANCE_POOL)"
}

# conformance_unmount_and_check MNT: clean unmount, then fsck.walfs must find the pool
# clean (exit 0): a run that left the pool inconsistent fails even if the tool passed.
conformance_unmount_and_check() {
  local mnt=$1 pid=$WALFS_PID
  umount_walfs "$mnt"
  wait "$pid" || fail "the daemon exited with status $? after unmounting $mnt"
  "$FSCK" "$CONFORMANCE_POOL" >"$_WALFS_SCRATCH/fsck.out" 2>&1 ||
    fail "fsck.walfs after the run (exit $?): $(cat "$_WALFS_SCRATCH/fsck.out")"
}
