// Clearing the dead mount a killed walfs leaves behind.
//
// After kill -9 (or a crash) the kernel keeps the mount with no daemon behind it:
// accesses fail with ENOTCONN, or succeed from cached attributes, so mounting again
// would stack a new mount over the dead one (or fail). The caller holds the pool lock,
// which proves no live walfs serves this pool: a mount of this same pool (same fsname
// and type) at the mount point can only be dead, and is ours to detach once a statfs
// of it fails with ENOTCONN. Anything else at the mount point is left alone.
#ifndef WALFS_FS_STALE_MOUNT_H_
#define WALFS_FS_STALE_MOUNT_H_

#include <string>

#include "absl/status/statusor.h"

namespace walfs::fs {

// Returns true when mounts of `fsname` with type `fstype` (e.g. "fuse.walfs") were
// found at `mountpoint` and detached (MNT_DETACH, or fusermount3 -u -z without root),
// false when there was none. Must only be called with the pool lock held.
absl::StatusOr<bool> DetachStaleMount(const std::string& mountpoint, const std::string& fsname,
                                      const std::string& fstype);

}  // namespace walfs::fs

#endif  // WALFS_FS_STALE_MOUNT_H_
