// The per-process registry of locked pool descriptions.
#include "fs/direct/pool_files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "fs/direct/real_calls.h"
#include "fs/lease_protocol.h"

namespace walfs::direct {
namespace {

// 0 when the 16 bytes at uuid_offset of fd equal uuid, else -errno.
int CheckUuid(int fd, uint64_t uuid_offset, const uint8_t* uuid) {
  uint8_t found[16];
  if (uuid_offset > static_cast<uint64_t>(INT64_MAX) - sizeof(found)) return -EILSEQ;
  ssize_t n;
  do {
    n = pread(fd, found, sizeof(found), static_cast<off_t>(uuid_offset));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  if (n != sizeof(found) || memcmp(found, uuid, sizeof(found)) != 0) return -EILSEQ;
  return 0;
}

}  // namespace

int PoolFiles::Acquire(const Identity& id, int* fd_out, uint64_t* pool_size) {
  SignalSafeLock::Guard guard(lock_);
  for (int i = 0; i < kMaxPools; ++i) {
    Pool& pool = pools_[i];
    if (pool.refs > 0 && pool.dev == id.dev && pool.ino == id.ino) {
      if (const int err = CheckUuid(pool.fd, id.uuid_offset, id.uuid); err != 0) return err;
      ++pool.refs;
      *fd_out = pool.fd;
      *pool_size = pool.size;
      return i;
    }
  }
  int slot = -1;
  for (int i = 0; i < kMaxPools && slot < 0; ++i) {
    if (pools_[i].refs == 0) slot = i;
  }
  if (slot < 0) return -EMFILE;

  const int fd = real::Open(id.path, O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -errno;
  int err = 0;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    err = -errno;
  } else if (static_cast<uint64_t>(st.st_dev) != id.dev ||
             static_cast<uint64_t>(st.st_ino) != id.ino) {
    err = -EXDEV;
  } else {
    err = CheckUuid(fd, id.uuid_offset, id.uuid);
  }
  if (err == 0) {
    struct flock lock = {};
    lock.l_type = F_RDLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = lease::kClientLockOffset;
    lock.l_len = lease::kClientLockLength;
    if (real::Fcntl(fd, F_OFD_SETLK, &lock) != 0) err = -errno;
  }
  if (err != 0) {
    real::Close(fd);
    return err;
  }
  pools_[slot] = Pool{.fd = fd,
                      .dev = id.dev,
                      .ino = id.ino,
                      .size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0,
                      .refs = 1};
  fd_plus_one_[slot].store(fd + 1, std::memory_order_relaxed);
  open_pools_.fetch_add(1, std::memory_order_relaxed);
  *fd_out = fd;
  *pool_size = pools_[slot].size;
  return slot;
}

void PoolFiles::Release(int handle) {
  if (handle < 0 || handle >= kMaxPools) return;
  SignalSafeLock::Guard guard(lock_);
  Pool& pool = pools_[handle];
  if (pool.refs == 0 || --pool.refs > 0) return;
  // Closing the last fd of the description drops the OFD lock.
  real::Close(pool.fd);
  fd_plus_one_[handle].store(0, std::memory_order_relaxed);
  open_pools_.fetch_sub(1, std::memory_order_relaxed);
  pool = Pool{};
}

bool PoolFiles::MapSyncRefused(int handle) {
  SignalSafeLock::Guard guard(lock_);
  return handle >= 0 && handle < kMaxPools && pools_[handle].map_sync_refused;
}

void PoolFiles::SetMapSyncRefused(int handle) {
  SignalSafeLock::Guard guard(lock_);
  if (handle >= 0 && handle < kMaxPools) pools_[handle].map_sync_refused = true;
}

bool PoolFiles::IsPoolFd(int fd) const {
  if (fd < 0 || open_pools_.load(std::memory_order_relaxed) == 0) return false;
  for (const std::atomic<int>& f : fd_plus_one_) {
    if (f.load(std::memory_order_relaxed) == fd + 1) return true;
  }
  return false;
}

bool PoolFiles::MoveAside(int fd) {
  if (!IsPoolFd(fd)) return true;
  SignalSafeLock::Guard guard(lock_);
  for (int i = 0; i < kMaxPools; ++i) {
    Pool& pool = pools_[i];
    if (pool.refs == 0 || pool.fd != fd) continue;
    const int moved = real::Fcntl(fd, F_DUPFD_CLOEXEC, nullptr);
    if (moved < 0) return false;
    pool.fd = moved;
    fd_plus_one_[i].store(moved + 1, std::memory_order_relaxed);
    // The description (and its lock) lives on through `moved`.
    real::Close(fd);
    return true;
  }
  return true;
}

int PoolFiles::PoolFdsIn(unsigned first, unsigned last, int* fds) const {
  int n = 0;
  if (open_pools_.load(std::memory_order_relaxed) == 0) return 0;
  for (const std::atomic<int>& f : fd_plus_one_) {
    const int fd = f.load(std::memory_order_relaxed) - 1;
    if (fd >= 0 && static_cast<unsigned>(fd) >= first && static_cast<unsigned>(fd) <= last) {
      fds[n++] = fd;
    }
  }
  std::sort(fds, fds + n);
  return n;
}

int PoolFiles::open_count() {
  SignalSafeLock::Guard guard(lock_);
  int n = 0;
  for (const Pool& pool : pools_) n += pool.refs > 0;
  return n;
}

}  // namespace walfs::direct
