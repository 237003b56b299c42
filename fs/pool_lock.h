// PoolLock: keeps a second walfs daemon (or a repairing fsck) off a pool in use.
//
// An exclusive flock(2) on an fd of the pool, held for the daemon's lifetime. flock
// locks belong to the open file description, so they vanish when the holder dies
// (kill -9 included) and need no stale-lock cleanup.
#ifndef WALFS_FS_POOL_LOCK_H_
#define WALFS_FS_POOL_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace walfs::fs {

// Fails with FailedPrecondition naming the processes (pid and command) when a
// direct-access client still holds the pool: an OFD read lock on the range
// fs/lease_protocol.h reserves, which every client holds while it maps part of the pool.
// Such a client may still store into blocks that opening the pool would reclaim (a
// leased file unlinked while open is an orphan), so the daemon must not open it until
// they are gone.
absl::Status CheckNoDirectClients(const std::string& path);

class PoolLock {
 public:
  // Locks `path` with LOCK_EX|LOCK_NB. Fails with Unavailable "pool X is in use by
  // another walfs (pid N)" when it is held, or with the open error (NotFound, ...).
  static absl::StatusOr<std::unique_ptr<PoolLock>> Acquire(const std::string& path);
  ~PoolLock();
  PoolLock(const PoolLock&) = delete;
  PoolLock& operator=(const PoolLock&) = delete;

 private:
  explicit PoolLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace walfs::fs

#endif  // WALFS_FS_POOL_LOCK_H_
