// LeaseTable: granting and releasing direct-access leases (lease_table.h). The only
// writer of Inode::leases and leased_size; a record changes only through an Edit.
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "core/edit.h"
#include "core/lease_table.h"
#include "core/pool.h"
#include "core/status.h"

namespace walfs::core {

absl::StatusOr<Lease> LeaseTable::AcquireLease(InodeId ino, bool renew) {
  return GrantLease(ino, renew ? LeaseUse::kRenew : LeaseUse::kWrite);
}

absl::StatusOr<Lease> LeaseTable::AcquireReadLease(InodeId ino) {
  return GrantLease(ino, LeaseUse::kRead);
}

absl::StatusOr<Lease> LeaseTable::GrantLease(InodeId ino, LeaseUse use) {
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  if (pool_.mode_ != DurabilityMode::kPmem && use != LeaseUse::kRead) {
    // In msync mode a store is durable only after an msync of the pool, which only the
    // daemon issues: a client storing on its own could acknowledge a commit that is not
    // durable. A copy out needs no durability.
    return PosixError("direct access needs pmem mode (this pool runs in msync mode)",
                      EOPNOTSUPP);
  }
  // Under ns_mu_: every change of owner of a block (Truncate, TrimBlocks, Reclaim)
  // happens under it and checks the lease count.
  MutexLock ns(&pool_.ns_mu_);
  auto inr = pool_.Get(ino);
  if (!inr.ok()) return inr.status();
  Inode& in = **inr;
  if (in.reclaiming) return PosixError(absl::StrCat("inode ", ino), ESTALE);
  if (in.rec.type != format::InodeType::kRegular) {
    return PosixError(absl::StrCat("lease on inode ", ino, ": not a regular file"), EINVAL);
  }
  Lease lease;
  lease.ino = ino;
  {
    MutexLock il(&in.mu);
    // The whole of [0, size) is allocated (format.h: size <= allocation); in pmem mode
    // it is also durable, since a size is committed before the write that set it
    // returns (what a write lease needs; a read lease only copies out).
    lease.size = in.rec.size;
  }
  if (lease.size == 0) {
    return PosixError(absl::StrCat("lease on inode ", ino, ": the file is empty"), ENODATA);
  }
  const uint64_t end = format::AlignUp(lease.size, format::kBlockSize);
  uint64_t file_pos = 0;
  for (uint32_t i = 0; i < in.rec.extent_count && file_pos < end; ++i) {
    const format::Extent& e = in.rec.extents[i];
    const uint64_t n = std::min(e.count * format::kBlockSize, end - file_pos);
    lease.runs.push_back(
        LeaseRun{.file_offset = file_pos,
                 .pool_offset = pool_.sb_.data_offset + e.block * format::kBlockSize,
                 .length = n});
    file_pos += n;
  }
  // A read lease pins nothing: its holder copies out under the stamp check before and
  // after each copy, and the caller revokes it before any truncate (fs/read_leases.h).
  if (use == LeaseUse::kRead) return lease;
  if (use == LeaseUse::kWrite) {
    ++in.leases;
    pool_.counters_.leases_granted.fetch_add(1, std::memory_order_relaxed);
  }
  in.leased_size = std::max(in.leased_size, lease.size);
  return lease;
}

absl::Status LeaseTable::ReleaseLease(InodeId ino) {
  bool reclaim = false;
  absl::Status status;
  {
    MutexLock ns(&pool_.ns_mu_);
    Inode* in = pool_.Find(ino);
    if (in == nullptr || in->leases == 0) {
      return PosixError(absl::StrCat("release of a lease on inode ", ino, " that holds none"),
                        EINVAL);
    }
    pool_.counters_.leases_released.fetch_add(1, std::memory_order_relaxed);
    if (--in->leases == 0) in->leased_size = 0;
    // The holder's stores changed the file without a Write: its times move now.
    Edit e(pool_);
    Touch(e.Rec(ino), /*mtime=*/true);
    status = e.Commit();
    reclaim = in->leases == 0 && in->lookups.load() == 0 &&
              in->rec.state == format::InodeState::kOrphan;
  }
  if (reclaim) pool_.space_.Reclaim(ino);
  return status;
}

}  // namespace walfs::core
