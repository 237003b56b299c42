// TryDirectWrite's body: a template, so tests instantiate it with their persistor.
#ifndef WALFS_FS_DIRECT_DIRECT_WRITE_INL_H_
#define WALFS_FS_DIRECT_DIRECT_WRITE_INL_H_

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>

#include <cstdint>

#include "fs/direct/switches.h"

namespace walfs::direct {

template <typename Persistor>
DirectResult TryDirectWrite(FdTable& table, int fd, const struct iovec* iov, int iovcnt,
                            off_t offset, int flags, Persistor& persistor, size_t* written) {
  FdTable::Ref lease = table.Acquire(fd);
  if (!lease) return DirectResult::kUntracked;
  if (offset < 0 || iovcnt <= 0 || iovcnt > IOV_MAX || !DirectFlagsOk(flags)) {
    return DirectResult::kNotInLease;
  }
  uint64_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len > static_cast<uint64_t>(SSIZE_MAX) - total) {
      return DirectResult::kNotInLease;
    }
    total += iov[i].iov_len;
  }
  const uint64_t begin = static_cast<uint64_t>(offset);
  if (total == 0 || begin > lease->leased_size || total > lease->leased_size - begin) {
    return DirectResult::kNotInLease;
  }
  // The descriptor number may have been closed and reused where we could not see it (a
  // raw system call): only the file we leased may receive the bytes.
  const int saved_errno = errno;
  struct stat st;
  const bool same = fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == lease->file_dev &&
                    static_cast<uint64_t>(st.st_ino) == lease->file_ino;
  if (!same) {
    DebugLog("fd %d: no longer the leased file (walfs inode %llu): lease dropped", fd,
             static_cast<unsigned long long>(lease->walfs_ino));
    FdTable::Entry* entry = lease.entry();
    lease.Reset();
    table.UntrackIf(fd, entry);
    errno = saved_errno;
    return DirectResult::kStale;
  }
  StoreDirect(*lease, begin, iov, iovcnt, persistor);
  errno = saved_errno;
  *written = static_cast<size_t>(total);
  return DirectResult::kStored;
}

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_DIRECT_WRITE_INL_H_
