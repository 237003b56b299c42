// The per-process registry of locked pool descriptions.
#include "fs/direct/pool_files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int PoolFiles::Acquire(const Identity& id, uint64_t* pool_size) {
  SignalSafeLock::Guard guard(lock_);
  for (Pool& pool : pools_) {
    if (pool.refs > 0 && pool.dev == id.dev && pool.ino == id.ino) {
      if (const int err = CheckUuid(pool.fd, id.uuid_offset, id.uuid); err != 0) return err;
      ++pool.refs;
      *pool_size = pool.size;
      return pool.fd;
    }
  }
  Pool* free_pool = nullptr;
  for (Pool& pool : pools_) {
    if (pool.refs == 0) {
      free_pool = &pool;
      break;
    }
  }
  if (free_pool == nullptr) return -EMFILE;

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
  *free_pool = Pool{.fd = fd,
                    .dev = id.dev,
                    .ino = id.ino,
                    .size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0,
                    .refs = 1};
  *pool_size = free_pool->size;
  return fd;
}

void PoolFiles::Release(int fd) {
  int to_close = -1;
  {
    SignalSafeLock::Guard guard(lock_);
    Pool* pool = FindByFd(fd);
    if (pool == nullptr) return;
    if (--pool->refs == 0) {
      to_close = pool->fd;
      *pool = Pool{};
    }
  }
  // Closing the last fd of the description drops the OFD lock.
  if (to_close >= 0) real::Close(to_close);
}

bool PoolFiles::MapSyncRefused(int fd) {
  SignalSafeLock::Guard guard(lock_);
  Pool* pool = FindByFd(fd);
  return pool != nullptr && pool->map_sync_refused;
}

void PoolFiles::SetMapSyncRefused(int fd) {
  SignalSafeLock::Guard guard(lock_);
  if (Pool* pool = FindByFd(fd)) pool->map_sync_refused = true;
}

int PoolFiles::open_count() {
  SignalSafeLock::Guard guard(lock_);
  int n = 0;
  for (const Pool& pool : pools_) n += pool.refs > 0;
  return n;
}

PoolFiles::Pool* PoolFiles::FindByFd(int fd) {
  for (Pool& pool : pools_) {
    if (pool.refs > 0 && pool.fd == fd) return &pool;
  }
  return nullptr;
}

}  // namespace walfs::direct
