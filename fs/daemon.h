// The walfs daemon's life: lock and open the pool, mount, serve, unmount, close.
//
// Everything that can fail (options, the pool lock, mapping, recovery, the mount
// itself) happens before the daemon detaches and before READY=1 is sent, so a missing,
// damaged or busy pool fails the mount command with a message and never half-mounts.
#ifndef WALFS_FS_DAEMON_H_
#define WALFS_FS_DAEMON_H_

#include "fs/options.h"

namespace walfs::fs {

// Runs until the file system is unmounted (umount, fusermount3 -u) or SIGTERM/SIGINT/
// SIGHUP arrives; then unmounts and closes the pool. Returns the process exit status.
int RunDaemon(const Options& options);

}  // namespace walfs::fs

#endif  // WALFS_FS_DAEMON_H_
