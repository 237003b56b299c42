#!/usr/bin/env bash
# A leased descriptor closed while a direct store through it is in flight (L2, L3 in
# docs/design/lease.md): walfs_close_race stalls a 2 MiB pwrite into a leased segment A
# on a userfaultfd page fault in its source buffer and, meanwhile, closes the descriptor,
# unlinks A, commits metadata and creates a 16 MiB segment B, from a signal handler on the
# writing thread and from a second thread; each also once with another descriptor of A
# kept open. Checks, in a fresh pmem-mode pool each time:
#  - B reads back exactly its own pattern (none of the store's bytes went into it);
#  - the pwrite returned 2 MiB with every byte in A (when A is kept), or an error;
#  - no deadlock (each run is bounded), the lease ends, fsck.walfs is clean after unmount.
source "$(dirname "$0")/lib/common.sh"

require_fuse
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
RACE=$WALFS_BUILD_DIR/tests/tools/walfs_close_race
[ -f "$LIB" ] || fail "direct-access library not built: $LIB"
[ -x "$RACE" ] || fail "walfs_close_race not built: $RACE"
reexec_in_mount_namespace "$@"

WORK=$(make_workdir)
SHM=$(mktemp -d /dev/shm/walfs-test.XXXXXX)
on_exit "rm -rf '$SHM'"

run=0
for how in signal thread; do
  for keep in "" --keep; do
    run=$((run + 1))
    log "close during a stalled store: race step from a $how${keep:+, A kept open}"
    POOL=$SHM/pool$run
    M=$WORK/mnt$run
    make_pool "$POOL" 64M
    PMEM_IS_PMEM_FORCE=1 mount_walfs "$POOL" "$M"
    on_failure "echo '== daemon log ($how$keep)'; cat '$WALFS_LOG'"
    rc=0
    out=$(timeout -s KILL 90 env LD_PRELOAD="$LIB" "$RACE" "$M" "$how" $keep 2>&1) || rc=$?
    printf '%s\n' "$out" | sed 's/^/  /' >&2
    [ "$rc" = 77 ] && skip "$(grep -m1 '^SKIP' <<<"$out")"
    [ "$rc" = 137 ] && fail "$how$keep: walfs_close_race did not finish within 90 s (deadlock?)"
    [ "$rc" = 0 ] || fail "$how$keep: $(grep -m1 -e '^FAIL' -e '^setup' <<<"$out" || echo "exit $rc")"
    grep -q '^race ran during the store$' <<<"$out" ||
      fail "$how$keep: the race step did not run while the store was stalled"
    (($(walfs_status_field "$M" leases_granted) >= 1)) || fail "$how$keep: no lease was granted"
    for ((i = 0; i < 100; i++)); do
      [ "$(walfs_status_field "$M" leases_active)" = 0 ] && break
      sleep 0.05
    done
    [ "$(walfs_status_field "$M" leases_active)" = 0 ] || fail "$how$keep: the lease outlived the writer"
    umount_walfs "$M"
    fsck_rc=0
    fsck_out=$("$FSCK" "$POOL" 2>&1) || fsck_rc=$?
    [ "$fsck_rc" = 0 ] || fail "$how$keep: fsck.walfs exit $fsck_rc: $fsck_out"
    rm -f "$POOL"
  done
done

log "fs_direct_race: all checks passed"
