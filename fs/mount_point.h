// The checks a mount point must pass before walfs mounts over it.
//
// The kernel lets a FUSE file system be mounted over any directory and over a regular
// file; neither is what an operator means for a pg_wal mount:
//   - over a regular file, the mount's root is a file that walfs serves as a directory,
//     so every access fails with EIO;
//   - over a directory that holds files, the mount hides them for as long as it lasts.
//     For a pg_wal mount point those may be WAL segments written while the mount was
//     missing, which a recovery would then never see. Mounting there anyway is a
//     deliberate choice (-o nonempty), as it was with libfuse 2.
#ifndef WALFS_FS_MOUNT_POINT_H_
#define WALFS_FS_MOUNT_POINT_H_

#include <string>

#include "absl/status/status.h"

namespace walfs::fs {

// OK when `path` (absolute) is a directory (symlinks followed, as the mount follows
// them) that is empty or `allow_nonempty` is set. Otherwise FailedPrecondition (not a
// directory, not empty), NotFound (missing) or the errno of the failed stat or listing,
// with a message that names the path and the fix. Looks at the path once, when called:
// the caller mounts right after.
absl::Status CheckMountPoint(const std::string& path, bool allow_nonempty);

}  // namespace walfs::fs

#endif  // WALFS_FS_MOUNT_POINT_H_
