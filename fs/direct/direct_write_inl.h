// TryDirectWrite's body: a template, so tests instantiate it with their persistor.
#ifndef WALFS_FS_DIRECT_DIRECT_WRITE_INL_H_
#define WALFS_FS_DIRECT_DIRECT_WRITE_INL_H_

#include <errno.h>
#include <limits.h>

#include <cstdint>

#include "fs/direct/switches.h"

namespace walfs::direct {

// Drops fd's entry (if it is still `lease`'s) after its stamp changed.
inline void DropStale(FdTable& table, int fd, FdTable::Ref& lease) {
  const int saved_errno = errno;
  DebugLog("fd %d: lease on walfs inode %llu revoked (a close of its file description, or "
           "a truncate of a file read-leased): dropped",
           fd, static_cast<unsigned long long>(lease->walfs_ino));
  FdTable::Entry* entry = lease.entry();
  lease.Reset();
  table.UntrackIf(fd, entry);
  errno = saved_errno;
}

inline bool SyncIsDone(FdTable& table, int fd) {
  FdTable::Ref lease = table.Acquire(fd);
  // A pending descriptor stored nothing directly: its writes, if any, went through FUSE
  // and the kernel's fsync is the one that answers for them.
  if (!lease || lease.pending() || lease->access != lease::kAccessWrite) return false;
  if (LeaseCurrent(*lease)) return true;
  DropStale(table, fd, lease);
  return false;
}

template <typename Persistor>
DirectResult TryDirectWrite(FdTable& table, int fd, const struct iovec* iov, int iovcnt,
                            off_t offset, int flags, Persistor& persistor, size_t* written) {
  FdTable::Ref lease = table.Acquire(fd);
  if (!lease) return DirectResult::kUntracked;
  if (lease.pending()) {
    // A read-only descriptor's write fails in the kernel (EBADF), and an empty file has
    // no lease to give (until NoteSeek finds data in it).
    return lease.pending_access() == lease::kAccessWrite && !lease.pending_empty()
               ? DirectResult::kPending
               : DirectResult::kNotInLease;
  }
  if (lease->access != lease::kAccessWrite || offset < 0 || iovcnt <= 0 ||
      iovcnt > IOV_MAX || !DirectFlagsOk(flags)) {
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
  // The descriptor number may have been closed where we could not see it (a raw system
  // call) and reused: the daemon has then revoked the stamp (it sees every close), and
  // only the file description we leased may receive the bytes.
  if (!LeaseCurrent(*lease)) {
    DropStale(table, fd, lease);
    return DirectResult::kStale;
  }
  const int saved_errno = errno;
  StoreDirect(*lease, begin, iov, iovcnt, persistor);
  errno = saved_errno;
  *written = static_cast<size_t>(total);
  return DirectResult::kStored;
}

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_DIRECT_WRITE_INL_H_
