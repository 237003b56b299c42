// LeaseTable: direct-access leases (the daemon side of fs/lease_protocol.h). The lease
// counts live in each Inode (leases, leased_size) under the namespace lock; this is the
// only code that changes them. May not change a record but through an Edit.
//
// A lease hands a client the pool runs holding a file's bytes so it can store into them
// itself. Safety rests on one rule kept by the rest of the engine: while Inode::leases >
// 0, no block below Inode::leased_size changes owner. Truncate refuses to cut below it
// (Namespace::Setattr), and Space::Reclaim leaves a leased orphan alone; everything else
// only ever adds blocks past the end (Space::Grow), never moves existing ones.
#ifndef WALFS_CORE_LEASE_TABLE_H_
#define WALFS_CORE_LEASE_TABLE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/types.h"

namespace walfs::core {

class Pool;

// Thread-safe.
class LeaseTable {
 public:
  explicit LeaseTable(Pool& pool) : pool_(pool) {}
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  // Grants a lease on the regular file `ino`: its bytes [0, size) with size = the file's
  // size now, which is allocated and durable. Only in pmem mode, where a store the holder
  // persists with cache flushes and a fence is durable; fails with EOPNOTSUPP in msync
  // mode, EROFS on a read-only pool, EINVAL for other file types, ENODATA for an empty
  // file. `renew`: the caller already holds a lease on `ino` (the same open handle asking
  // again): the lease count is unchanged and the returned size may have grown.
  // While any lease on `ino` is held, the blocks of every lease granted are never freed,
  // moved, zeroed or reused: a truncate below the largest leased size fails with
  // ETXTBSY, and an unlinked or renamed-over file stays an orphan until its last lease
  // is released (as it does until its last lookup reference is forgotten).
  // WalDirectory::Close does not reclaim an orphan that is still leased; the next Open
  // does.
  absl::StatusOr<Lease> AcquireLease(InodeId ino, bool renew = false);
  // The runs of `ino` as AcquireLease would grant them, under the same conditions, for a
  // holder that only copies out of them: nothing is counted or pinned, so truncate,
  // unlink and reclaim go on as without it. The caller must make every such holder stop
  // trusting the runs before the file shrinks (the daemon revokes its stamps first).
  absl::StatusOr<Lease> AcquireReadLease(InodeId ino);
  // Ends one lease on `ino`: its mtime and ctime become now (the holder's stores did not
  // come through DataPath::Write) and are committed. An orphan with no lookup references
  // and no leases left is then reclaimed.
  absl::Status ReleaseLease(InodeId ino);

 private:
  // AcquireLease and AcquireReadLease: a new write lease (counted), the same handle
  // asking again (not counted, leased_size may grow), or a read lease (nothing kept).
  enum class LeaseUse { kWrite, kRenew, kRead };
  absl::StatusOr<Lease> GrantLease(InodeId ino, LeaseUse use);

  Pool& pool_;
};

}  // namespace walfs::core

#endif  // WALFS_CORE_LEASE_TABLE_H_
