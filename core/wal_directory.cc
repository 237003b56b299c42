// WalDirectory: each call sent to the piece of the engine that owns it (core/pool.h),
// and the sizing helpers. Holds no state of its own and takes no lock.
#include "core/wal_directory.h"

#include <algorithm>

#include "core/pool.h"

namespace walfs::core {

std::string_view DurabilityModeName(DurabilityMode mode) {
  return mode == DurabilityMode::kPmem ? "pmem" : "msync";
}

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

// Namespace (namespace.h).
absl::StatusOr<Attr> WalDirectory::Lookup(InodeId parent, std::string_view name) {
  return pool_->names().Lookup(parent, name);
}
void WalDirectory::Forget(InodeId ino, uint64_t nlookup) { pool_->names().Forget(ino, nlookup); }
absl::StatusOr<Attr> WalDirectory::GetAttr(InodeId ino) { return pool_->names().GetAttr(ino); }
absl::StatusOr<Attr> WalDirectory::Setattr(InodeId ino, const SetattrRequest& request) {
  return pool_->names().Setattr(ino, request);
}
absl::StatusOr<Attr> WalDirectory::Create(InodeId parent, std::string_view name,
                                          uint32_t mode, const Caller& caller,
                                          bool exclusive) {
  return pool_->names().Create(parent, name, mode, caller, exclusive);
}
absl::StatusOr<Attr> WalDirectory::Mkdir(InodeId parent, std::string_view name,
                                         uint32_t mode, const Caller& caller) {
  return pool_->names().Mkdir(parent, name, mode, caller);
}
absl::StatusOr<Attr> WalDirectory::Mknod(InodeId parent, std::string_view name, uint32_t mode,
                                         uint64_t rdev, const Caller& caller) {
  return pool_->names().Mknod(parent, name, mode, rdev, caller);
}
absl::StatusOr<Attr> WalDirectory::Symlink(InodeId parent, std::string_view name,
                                           std::string_view target, const Caller& caller) {
  return pool_->names().Symlink(parent, name, target, caller);
}
absl::StatusOr<std::string> WalDirectory::Readlink(InodeId ino) {
  return pool_->names().Readlink(ino);
}
absl::StatusOr<Attr> WalDirectory::Link(InodeId ino, InodeId new_parent,
                                        std::string_view new_name) {
  return pool_->names().Link(ino, new_parent, new_name);
}
absl::Status WalDirectory::Unlink(InodeId parent, std::string_view name) {
  return pool_->names().Unlink(parent, name);
}
absl::Status WalDirectory::Rmdir(InodeId parent, std::string_view name) {
  return pool_->names().Rmdir(parent, name);
}
absl::Status WalDirectory::Rename(InodeId parent, std::string_view name, InodeId new_parent,
                                  std::string_view new_name, uint32_t flags) {
  return pool_->names().Rename(parent, name, new_parent, new_name, flags);
}
absl::Status WalDirectory::Readdir(InodeId ino, uint64_t cookie,
                                   const std::function<bool(const DirEntry&)>& fn) {
  return pool_->names().Readdir(ino, cookie, fn);
}

// DataPath (data_path.h).
absl::StatusOr<size_t> WalDirectory::Read(InodeId ino, uint64_t offset,
                                          absl::Span<char> out) {
  return pool_->data().Read(ino, offset, out);
}
absl::StatusOr<size_t> WalDirectory::Write(InodeId ino, uint64_t offset,
                                           absl::Span<const char> data, bool sync,
                                           bool clear_setid, bool* setid_cleared) {
  return pool_->data().Write(ino, offset, data, sync, clear_setid, setid_cleared);
}
absl::Status WalDirectory::Fsync(InodeId ino, bool datasync) {
  return pool_->data().Fsync(ino, datasync);
}
absl::Status WalDirectory::FsyncDir(InodeId ino) { return pool_->data().FsyncDir(ino); }
absl::Status WalDirectory::Fallocate(InodeId ino, uint64_t offset, uint64_t length,
                                     uint32_t flags) {
  return pool_->data().Fallocate(ino, offset, length, flags);
}
absl::Status WalDirectory::Release(InodeId ino) { return pool_->data().Release(ino); }

// Space (space.h).
FsStats WalDirectory::Statfs() { return pool_->space().Statfs(); }
uint64_t WalDirectory::VerifyFreeSpaceAhead(uint64_t max_blocks) {
  return pool_->space().VerifyFreeSpaceAhead(max_blocks);
}

bool WalDirectory::FreeSpaceKnownZero() const { return pool_->space().free_space_zero().load(); }

// LeaseTable (lease_table.h).
absl::StatusOr<Lease> WalDirectory::AcquireLease(InodeId ino, bool renew) {
  return pool_->leases().AcquireLease(ino, renew);
}

absl::StatusOr<Lease> WalDirectory::AcquireReadLease(InodeId ino) {
  return pool_->leases().AcquireReadLease(ino);
}

absl::Status WalDirectory::ReleaseLease(InodeId ino) { return pool_->leases().ReleaseLease(ino); }

Counters WalDirectory::counters() const { return pool_->counters(); }
absl::Status WalDirectory::Close() { return pool_->Close(); }

uint64_t ReservedBlocks(const format::Superblock& sb) {
  return std::min(kReserveSegments * (sb.segment_size / format::kBlockSize),
                  sb.data_blocks / 4);
}

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
