// The direct read path: a pread/preadv that falls inside a lease is copied out of the
// mapped pool runs instead of going to the daemon through FUSE.
//
// Why it sees every byte: the runs are the pool's own memory, the same pages the daemon's
// FUSE writes and every leased writer's stores go into, so a copy made after a write
// returned sees it, as a FUSE read would.
//
// Why it never returns another file's bytes (L9): a read lease pins nothing, so the
// runs may change owner while a copy runs (a truncate in another process). The daemon
// writes a new stamp before any such change (fs/read_leases.h); the copy compares the
// stamp before it starts and again after it ends (an acquire fence between the copy's
// loads and the second comparison, as a seqlock reader does). If any byte it read was
// stored by the runs' next owner, that store came after the new stamp, so the second
// comparison fails: the copy is discarded and the call goes to the kernel, which
// overwrites the buffer with what the file holds (bytes past the count the kernel
// returns are unspecified, as for any read). A write lease's runs cannot change owner
// (L2), and its reads are checked the same way.
#ifndef WALFS_FS_DIRECT_DIRECT_READ_H_
#define WALFS_FS_DIRECT_DIRECT_READ_H_

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>

#include "fs/direct/direct_write.h"
#include "fs/direct/fd_table.h"
#include "fs/direct/lease_mapping.h"

namespace walfs::direct {

// Production: plain loads. A Copier has void Copy(void* dst, const char* src, size_t n);
// tests pass one that changes the stamp in the middle of a copy.
struct MemcpyCopier {
  void Copy(void* dst, const char* src, size_t n) { memcpy(dst, src, n); }
};

// Copies file bytes [offset, offset + total length) of the lease into the iovecs, in
// order. Precondition (checked by the caller): offset + total length <= m.leased_size.
template <typename Copier>
void CopyOut(const LeaseMapping& m, uint64_t offset, const struct iovec* iov, int iovcnt,
             Copier& copier) {
  RunCursor cursor(m, offset);
  for (int i = 0; i < iovcnt; ++i) {
    char* dst = static_cast<char*>(iov[i].iov_base);
    cursor.Walk(iov[i].iov_len, [&](const MappedRun& run, uint64_t in_run, size_t n) {
      copier.Copy(dst, run.pool_addr + in_run, n);
      dst += n;
    });
  }
}

// RWF_* flags a direct read honours: HIPRI and NOWAIT are hints (a copy from memory
// never waits). Anything else goes to the kernel.
inline bool DirectReadFlagsOk(int flags) { return (flags & ~(RWF_HIPRI | RWF_NOWAIT)) == 0; }

// The checks around every copy out of fd's lease (L9), with the copy passed in:
// copy(lease) runs only while fd holds a current lease covering [begin, begin + total),
// and its result stands only if the stamp still holds after it. kStored: copy ran and
// stands. kPending: fd's lease is still to be asked for. kStale: the lease was revoked
// before or during the copy (the entry is dropped; whatever copy produced must be
// discarded). Anything else: copy did not run.
template <typename Copy>
DirectResult CheckedCopyOut(FdTable& table, int fd, uint64_t begin, uint64_t total,
                            Copy&& copy) {
  FdTable::Ref lease = table.Acquire(fd);
  if (!lease) return DirectResult::kUntracked;
  if (lease.pending()) {
    return lease.pending_empty() ? DirectResult::kNotInLease : DirectResult::kPending;
  }
  if (total == 0 || begin > lease->leased_size || total > lease->leased_size - begin) {
    return DirectResult::kNotInLease;
  }
  if (!LeaseCurrent(*lease)) {
    DropStale(table, fd, lease);
    return DirectResult::kStale;
  }
  copy(*lease);
  // The copy's loads before the second comparison (L9).
  std::atomic_thread_fence(std::memory_order_acquire);
  if (!LeaseCurrent(*lease)) {
    DropStale(table, fd, lease);
    return DirectResult::kStale;
  }
  return DirectResult::kStored;
}

// The whole hot path of pread/preadv/preadv2 on `fd`: one atomic load when untracked.
// kStored: copied, *copied is the byte count. kPending: fd's lease is still to be asked
// for. Anything else: the caller makes the real call. Never changes errno. Thread-safe.
template <typename Copier>
DirectResult TryDirectRead(FdTable& table, int fd, const struct iovec* iov, int iovcnt,
                           off_t offset, int flags, Copier& copier, size_t* copied) {
  // Arguments the direct path does not take ask for a copy of nothing: a pending
  // descriptor still takes its lease, anything else goes to the kernel.
  bool takeable = offset >= 0 && iovcnt > 0 && iovcnt <= IOV_MAX && DirectReadFlagsOk(flags);
  uint64_t total = 0;
  for (int i = 0; takeable && i < iovcnt; ++i) {
    takeable = iov[i].iov_len <= static_cast<uint64_t>(SSIZE_MAX) - total;
    total += iov[i].iov_len;
  }
  if (!takeable) total = 0;
  const uint64_t begin = static_cast<uint64_t>(offset);
  const DirectResult result = CheckedCopyOut(
      table, fd, begin, total,
      [&](const LeaseMapping& m) { CopyOut(m, begin, iov, iovcnt, copier); });
  if (result == DirectResult::kStored) *copied = static_cast<size_t>(total);
  return result;
}

DirectResult TryDirectReadMemcpy(FdTable& table, int fd, const struct iovec* iov, int iovcnt,
                                 off_t offset, int flags, size_t* copied);

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_DIRECT_READ_H_
