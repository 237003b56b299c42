// The direct write path: a pwrite/pwritev that falls inside a lease is stored into the
// mapped pool runs and made durable before it returns.
//
// StoreDirect is written once over a Persistor, so the crash tests run the production
// copy loop against core's RecordingRegion. A Persistor has
//   void Store(const MappedRun& run, uint64_t offset_in_run, const void* src, size_t n);
//   void Flush(const MappedRun& run, uint64_t offset_in_run, size_t n);
//   void Drain();
// with PersistentRegion's meaning: bytes stored and flushed are durable once a later
// Drain has returned, and Drain covers the calling thread's flushes only (hence it runs
// in the writing thread, before the call returns).
#ifndef WALFS_FS_DIRECT_DIRECT_WRITE_H_
#define WALFS_FS_DIRECT_DIRECT_WRITE_H_

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>

#include "fs/direct/fd_table.h"
#include "fs/direct/lease_mapping.h"

namespace walfs::direct {

// Production: non-temporal copies (libpmem flushes what they do not bypass) and one
// SFENCE (pmem_drain) at the end.
struct PmemPersistor {
  void Store(const MappedRun& run, uint64_t offset, const void* src, size_t n);
  void Flush(const MappedRun&, uint64_t, size_t) {}
  void Drain();
};

// Stores the iovecs, in order, at file offset `offset` of the lease, flushing each piece,
// then drains once. In a test build with a power-cut image mapped, each piece is also
// copied into the image (plain memcpy: the daemon reads it, durability is the pool's
// business).
// Preconditions (checked by the callers): offset + total length <= m.leased_size.
template <typename Persistor>
void StoreDirect(const LeaseMapping& m, uint64_t offset, const struct iovec* iov, int iovcnt,
                 Persistor& persistor) {
  RunCursor cursor(m, offset);
  for (int i = 0; i < iovcnt; ++i) {
    const char* src = static_cast<const char*>(iov[i].iov_base);
    cursor.Walk(iov[i].iov_len, [&](const MappedRun& run, uint64_t in_run, size_t n) {
      persistor.Store(run, in_run, src, n);
#ifdef WALFS_TEST_FACILITIES
      if (run.image_addr != nullptr) memcpy(run.image_addr + in_run, src, n);
#endif
      persistor.Flush(run, in_run, n);
      src += n;
    });
  }
  persistor.Drain();
}

// Why a write was not taken by the direct path.
enum class DirectResult {
  kStored,      // stored and durable (a write) or copied out (a read); the call
                // returns the byte count
  kUntracked,   // fd holds no lease
  kPending,     // fd is a walfs file whose lease is taken at its first write or read:
                // the caller asks for it (LeasePending) and tries once more
  kNotInLease,  // length 0, negative offset, partly or wholly outside the lease, bad
                // iovec count or length overflow, flags the direct path does not do, or
                // a write on a read lease
  kStale,       // the lease's stamp changed (a close of its file description, or the
                // handle was released): the entry was dropped
};

// RWF_* flags a direct store honours: DSYNC/SYNC are what it does anyway, HIPRI and
// NOWAIT are hints. Anything else (RWF_APPEND, unknown bits) goes to the kernel.
bool DirectFlagsOk(int flags);

// The whole hot path of pwrite/pwritev/pwritev2 on `fd`: one atomic load when untracked.
// On kStored *written is the byte count. Never changes errno. Thread-safe.
template <typename Persistor>
DirectResult TryDirectWrite(FdTable& table, int fd, const struct iovec* iov, int iovcnt,
                            off_t offset, int flags, Persistor& persistor, size_t* written);

DirectResult TryDirectWritePmem(FdTable& table, int fd, const struct iovec* iov, int iovcnt,
                                off_t offset, int flags, size_t* written);

// Whether write(2)/writev(2) on fd should go through AtFileOffset: fd holds a write
// lease, or is pending for one that can be asked for now. One atomic load when untracked.
inline bool WantsPositionedWrite(FdTable& table, int fd) {
  if (!table.IsTracked(fd)) return false;
  FdTable::Ref lease = table.Acquire(fd);
  if (!lease) return false;
  if (lease.pending()) {
    return lease.pending_access() == lease::kAccessWrite && !lease.pending_empty();
  }
  return lease->access == lease::kAccessWrite;
}

// The same for read(2)/readv(2): fd holds a lease of either kind, or is pending for one
// that can be asked for now.
inline bool WantsPositionedRead(FdTable& table, int fd) {
  if (!table.IsTracked(fd)) return false;
  FdTable::Ref lease = table.Acquire(fd);
  return lease && !(lease.pending() && lease.pending_empty());
}

// read(2)/write(2) (and the v forms) of `total` bytes on a descriptor WantsPositioned*
// accepted, turned into a positioned call so the direct path can take it: the range is
// reserved at the file offset with one lseek(fd, total, SEEK_CUR), which the kernel does
// atomically on the open file description (so concurrent users of the description,
// threads or processes, each get their own range, as read(2) and write(2) give them),
// then done by at_offset(offset) (the direct path, else the kernel's pread/pwrite
// there). After an error or a short count (a read reaching EOF) the offset is set back
// to where the bytes done end. Falls back to plain_fn() (the real call) when the
// reservation fails (total 0, an offset past the maximum). lseek_fn is the real lseek.
template <typename Lseek, typename AtOffset, typename Plain>
ssize_t AtFileOffset(int fd, size_t total, Lseek lseek_fn, AtOffset at_offset, Plain plain_fn) {
  if (total == 0 || total > static_cast<size_t>(SSIZE_MAX)) return plain_fn();
  const off_t end = lseek_fn(fd, static_cast<off_t>(total), SEEK_CUR);
  if (end < 0) return plain_fn();
  const off_t offset = end - static_cast<off_t>(total);
  const ssize_t n = at_offset(offset);
  if (n != static_cast<ssize_t>(total)) {
    const int saved_errno = errno;
    (void)lseek_fn(fd, offset + (n > 0 ? n : 0), SEEK_SET);
    errno = saved_errno;
  }
  return n;
}

// fsync/fdatasync on fd: true when fd holds a write lease that still stands, whose stores
// were durable on return (nothing to sync); false when untracked, a read lease, or just
// found revoked (the entry is then dropped): the caller makes the real call. One atomic
// load when untracked.
inline bool SyncIsDone(FdTable& table, int fd);

}  // namespace walfs::direct

#include "fs/direct/direct_write_inl.h"

#endif  // WALFS_FS_DIRECT_DIRECT_WRITE_H_
