// WalDirectory: opens the pool and hands out its pieces (core/pool.h). Holds no state of
// its own and takes no lock.
#include "core/wal_directory.h"

#include "core/pool.h"

namespace walfs::core {

absl::StatusOr<std::unique_ptr<WalDirectory>> WalDirectory::Open(
    std::unique_ptr<PersistentRegion> region, const OpenOptions& options) {
  auto pool = Pool::Open(std::move(region), options);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<WalDirectory>(new WalDirectory(std::move(*pool)));
}

WalDirectory::WalDirectory(std::unique_ptr<Pool> pool) : pool_(std::move(pool)) {}
WalDirectory::~WalDirectory() = default;

DurabilityMode WalDirectory::mode() const { return pool_->mode(); }
const format::Superblock& WalDirectory::superblock() const { return pool_->superblock(); }
const PersistentRegion& WalDirectory::region() const { return pool_->region(); }
Namespace& WalDirectory::names() { return pool_->names(); }
DataPath& WalDirectory::data() { return pool_->data(); }
LeaseTable& WalDirectory::leases() { return pool_->leases(); }

FsStats WalDirectory::Statfs() { return pool_->space().Statfs(); }
Counters WalDirectory::counters() const { return pool_->counters(); }
uint64_t WalDirectory::VerifyFreeSpaceAhead(uint64_t max_blocks) {
  return pool_->space().VerifyFreeSpaceAhead(max_blocks);
}
bool WalDirectory::FreeSpaceKnownZero() const { return pool_->space().free_space_zero().load(); }
absl::Status WalDirectory::Close() { return pool_->Close(); }

absl::StatusOr<GrowResult> WalDirectory::Grow(uint64_t new_capacity) {
  const format::Superblock& sb = pool_->superblock();
  GrowResult r;
  r.old_blocks = sb.data_blocks;
  r.old_capacity = sb.capacity;
  r.new_blocks = new_capacity > sb.data_offset
                     ? (new_capacity - sb.data_offset) / format::kBlockSize
                     : 0;
  r.new_capacity = sb.data_offset + r.new_blocks * format::kBlockSize;
  absl::Status s = pool_->space().GrowDataArea(r.new_blocks);
  if (!s.ok()) return s;
  return r;
}

absl::StatusOr<GrowResult> GrowPool(std::unique_ptr<PersistentRegion> region,
                                    uint64_t new_capacity) {
  auto dir = WalDirectory::Open(std::move(region));
  if (!dir.ok()) return dir.status();
  absl::StatusOr<GrowResult> r = (*dir)->Grow(new_capacity);
  // Closed whatever happened: a pool that opened is not left to a destructor.
  absl::Status closed = (*dir)->Close();
  if (!r.ok()) return r.status();
  if (!closed.ok()) return closed;
  return r;
}

}  // namespace walfs::core
