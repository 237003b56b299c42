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
#include "core/wal_directory.h"

namespace walfs::core {

class Pool;

// Thread-safe; the contracts of the public calls are WalDirectory's (wal_directory.h).
class LeaseTable {
 public:
  explicit LeaseTable(Pool& pool) : pool_(pool) {}
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  absl::StatusOr<Lease> AcquireLease(InodeId ino, bool renew);
  absl::StatusOr<Lease> AcquireReadLease(InodeId ino);
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
