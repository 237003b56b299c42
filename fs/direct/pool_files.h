// PoolFiles: the process's open descriptions of pool files, one per pool.
//
// A client maps runs of a pool only while it holds an open file description of that pool
// with an OFD read lock on [lease::kClientLockOffset, +kClientLockLength): the daemon
// refuses to mount a pool while such a lock exists. All mappings of one pool in this
// process share one such fd; it is refcounted (one reference per lease mapping) and
// closed, dropping the lock, when the last mapping goes. The fd is O_CLOEXEC: nothing
// survives exec. After fork the child holds copies of the mappings and of the fd (the
// same open file description, so the same lock), and its own refcounts.
// Thread-safe: every method takes the SignalSafeLock.
#ifndef WALFS_FS_DIRECT_POOL_FILES_H_
#define WALFS_FS_DIRECT_POOL_FILES_H_

#include <sys/types.h>

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

  // Takes a reference on the pool `id` names and returns its fd (>= 0), or -errno:
  // opening `path` O_RDWR|O_CLOEXEC failed; EXDEV when its st_dev/st_ino differ from
  // dev/ino; EILSEQ when the 16 bytes at uuid_offset differ from uuid (checked on every
  // acquire, so a pool reformatted under the same inode is noticed); EAGAIN/EACCES when
  // the OFD read lock is refused; EMFILE when kMaxPools pools are open. *pool_size is the
  // pool's st_size (0 for a device). Each success must be paired with one Release(fd).
  int Acquire(const Identity& id, uint64_t* pool_size);
  void Release(int fd);

  // Whether MAP_SYNC was refused for this pool (tmpfs, device-DAX): later mappings go
  // straight to MAP_SHARED instead of failing the same way again.
  bool MapSyncRefused(int fd);
  void SetMapSyncRefused(int fd);

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
  Pool* FindByFd(int fd);

  SignalSafeLock lock_;
  Pool pools_[kMaxPools];
};

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_POOL_FILES_H_
