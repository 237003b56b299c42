// Who else has a pool file: direct-access clients and other processes.
//
// A direct-access client (fs/lease_protocol.h) holds an OFD read lock on
// [format::kClientLockOffset, +kClientLockLength) of the pool file for as long as it maps
// any part of the pool. Whatever rewrites a pool's metadata or reclaims its blocks (the
// daemon opening it, mkfs --force, fsck --repair) must not run while such a lock is held:
// a surviving client may still store into blocks it would free or overwrite.
#ifndef WALFS_CORE_POOL_CLIENTS_H_
#define WALFS_CORE_POOL_CLIENTS_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace walfs::core {

// FailedPrecondition naming the processes that have the pool open (pid and command)
// when a client lock is held; OK when none is; the open/fcntl error otherwise.
absl::Status CheckNoDirectClients(const std::string& path);

// Other processes holding a descriptor of the file (dev, ino), at most `limit`, found by
// a best-effort scan of /proc (for error messages only).
std::vector<pid_t> ProcessesWithFileOpen(dev_t dev, ino_t ino, size_t limit);

// "pid 12 (postgres), pid 13 (postgres)".
std::string DescribeProcesses(const std::vector<pid_t>& pids);

}  // namespace walfs::core

#endif  // WALFS_CORE_POOL_CLIENTS_H_
