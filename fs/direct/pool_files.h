// PoolFiles: the process's open descriptions of pool files, one per pool.
//
// A client maps runs of a pool only while it holds an open file description of that pool
// with an OFD read lock on [lease::kClientLockOffset, +kClientLockLength): the daemon
// refuses to mount a pool while such a lock exists. All mappings of one pool in this
// process share one such fd; it is refcounted (one reference per lease mapping) and
// closed, dropping the lock, when the last mapping goes. The fd is O_CLOEXEC: nothing
// survives exec. After fork the child holds copies of the mappings and of the fd (the
// same open file description, so the same lock), and its own refcounts.
//
// The application never opened these descriptors, so it must not be able to close them
// by number (closefrom(3) in a daemonizing library, a double close, dup2 onto a number
// it believes free): that would drop the lock under live mappings, and a later Release
// would close whatever the application opened under that number next. The interposers
// ask IsPoolFd before such calls and keep away from pool descriptors (see interpose.cc);
// mappings refer to a pool by handle, not by fd, so MoveAside can renumber one.
// Thread-safe: mutations take the SignalSafeLock; IsPoolFd is lock-free.
#ifndef WALFS_FS_DIRECT_POOL_FILES_H_
#define WALFS_FS_DIRECT_POOL_FILES_H_

#include <linux/close_range.h>
#include <sys/types.h>

#include <atomic>
#include <climits>
#include <cstdint>

#include "fs/direct/signal_safe_lock.h"

namespace walfs::direct {

class PoolFiles {
 public:
  static constexpr int kMaxPools = 8;

  struct Identity {
    const char* path;  // absolute
    uint64_t dev;
    uint64_t ino;
    uint64_t uuid_offset;
    const uint8_t* uuid;  // 16 bytes
  };

  constexpr PoolFiles() = default;
  PoolFiles(const PoolFiles&) = delete;
  PoolFiles& operator=(const PoolFiles&) = delete;

  // Takes a reference on the pool `id` names and returns a handle (>= 0) with its
  // descriptor in *fd, or -errno:
  // opening `path` O_RDWR|O_CLOEXEC failed; EXDEV when its st_dev/st_ino differ from
  // dev/ino; EILSEQ when the 16 bytes at uuid_offset differ from uuid (checked on every
  // acquire, so a pool reformatted under the same inode is noticed); EAGAIN/EACCES when
  // the OFD read lock is refused; EMFILE when kMaxPools pools are open. *pool_size is the
  // pool's st_size (0 for a device). Each success must be paired with one
  // Release(handle).
  int Acquire(const Identity& id, int* fd, uint64_t* pool_size);
  void Release(int handle);

  // Whether MAP_SYNC was refused for this pool (tmpfs, device-DAX): later mappings go
  // straight to MAP_SHARED instead of failing the same way again.
  bool MapSyncRefused(int handle);
  void SetMapSyncRefused(int handle);

  // Whether fd is one of the pool descriptors. A few relaxed loads; none when no pool
  // is open.
  bool IsPoolFd(int fd) const;
  // If fd is a pool descriptor, renumbers it (F_DUPFD_CLOEXEC, the same open file
  // description and lock) so the caller can let the application have fd. False when fd
  // stays a pool descriptor (no descriptor free).
  bool MoveAside(int fd);
  // The pool descriptors in [first, last], ascending, into fds[0..kMaxPools); returns
  // how many.
  int PoolFdsIn(unsigned first, unsigned last, int* fds) const;

  // Number of pools open; for tests.
  int open_count();

  void ForkPrepare() { lock_.ForkPrepare(); }
  void ForkParent() { lock_.ForkParent(); }
  void ForkChild() { lock_.ForkChild(); }

 private:
  struct Pool {
    int fd = -1;
    uint64_t dev = 0;
    uint64_t ino = 0;
    uint64_t size = 0;
    int refs = 0;
    bool map_sync_refused = false;
  };
  SignalSafeLock lock_;
  Pool pools_[kMaxPools];  // lock_
  // pools_[i].fd + 1 while pool i is open, else 0: the lock-free view for IsPoolFd.
  std::atomic<int> fd_plus_one_[kMaxPools] = {};
  std::atomic<int> open_pools_{0};
};

// Calls range_fn(a, b) (a close_range) over [first, last] minus the pool descriptors,
// once per gap between them. With CLOSE_RANGE_CLOEXEC it is one call over the whole
// range: pool descriptors are close-on-exec already. Returns the first failure, else 0.
template <typename RangeFn>
int CloseRangeAroundPools(const PoolFiles& pools, unsigned first, unsigned last, int flags,
                          RangeFn range_fn) {
  int pool_fds[PoolFiles::kMaxPools];
  const int n = (flags & CLOSE_RANGE_CLOEXEC) != 0 || first > last
                    ? 0
                    : pools.PoolFdsIn(first, last, pool_fds);
  if (n == 0) return range_fn(first, last);
  int result = 0;
  unsigned from = first;
  for (int i = 0; i <= n; ++i) {
    const unsigned to = i < n ? static_cast<unsigned>(pool_fds[i]) : last;
    const bool gap = i < n ? to > from : from <= last;
    if (gap) {
      const int r = range_fn(from, i < n ? to - 1 : to);
      if (r != 0 && result == 0) result = r;
    }
    if (i < n) from = to + 1;
  }
  return result;
}

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_POOL_FILES_H_
