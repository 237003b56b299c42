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

class PoolLock {
 public:
  // Locks `path` with LOCK_EX|LOCK_NB. Fails with Unavailable "pool X is in use by
  // another walfs (pid N)" when it is held, or with the open error (NotFound, ...).
  static absl::StatusOr<std::unique_ptr<PoolLock>> Acquire(const std::string& path);
  ~PoolLock();
  PoolLock(const PoolLock&) = delete;
  PoolLock& operator=(const PoolLock&) = delete;

  // The locked descriptor (O_RDONLY, owned): the inode the daemon serves. Session
  // hellos reopen it through /proc/self/fd for each client (fs/session.h).
  int fd() const { return fd_; }

 private:
  explicit PoolLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace walfs::fs

#endif  // WALFS_FS_POOL_LOCK_H_
