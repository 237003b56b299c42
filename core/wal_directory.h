// WalDirectory: an open walfs pool as a file system, in plain types (core/types.h).
//
// This is the handle fs/, the tools and the tests hold. It opens and closes the pool and
// hands out the pieces of the engine that carry out the file-system calls, each with its
// contracts stated in its own header (docs/design/engine.md):
//  - names():  Namespace (namespace.h): lookup, create, link, unlink, rename, setattr,
//              readdir; the lookup references FUSE counts;
//  - data():   DataPath (data_path.h): read, write, fsync, fallocate, release;
//  - leases(): LeaseTable (lease_table.h): direct-access leases.
// Free space, counters, growth and close are here. Every errno a call means is
// ErrnoFromStatus of its absl::Status. Nothing here knows about FUSE.
//
// Thread safety: every method here and of the pieces may be called concurrently from any
// thread.
#ifndef WALFS_CORE_WAL_DIRECTORY_H_
#define WALFS_CORE_WAL_DIRECTORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data_path.h"
#include "core/format.h"
#include "core/layout.h"
#include "core/lease_table.h"
#include "core/namespace.h"
#include "core/persistent_region.h"
#include "core/types.h"

namespace walfs::core {

class Pool;

class WalDirectory {
 public:
  // Validates the superblocks, replays the journal, re-zeroes what a crash left dirty
  // and reclaims orphans (unless read_only), then builds the in-memory indexes.
  // A damaged pool fails with DataLoss naming what and where.
  static absl::StatusOr<std::unique_ptr<WalDirectory>> Open(
      std::unique_ptr<PersistentRegion> region, const OpenOptions& options = {});
  ~WalDirectory();
  WalDirectory(const WalDirectory&) = delete;
  WalDirectory& operator=(const WalDirectory&) = delete;

  DurabilityMode mode() const;
  const format::Superblock& superblock() const;
  const PersistentRegion& region() const;

  Namespace& names();
  DataPath& data();
  LeaseTable& leases();

  FsStats Statfs();
  Counters counters() const;

  // Reads up to `max_blocks` of the free space not yet known to be zero (space free since
  // the pool was opened), so that the allocations which take it later read nothing: the
  // first 16 MiB segment allocated from space not known to be zero otherwise reads 16
  // MiB while PostgreSQL waits. Meant for a background thread, called until it returns
  // 0; the namespace lock is held to pick and to mark the blocks, not while they are
  // read. Free space that is not zero is left for the allocation to refuse, as without
  // it.
  uint64_t VerifyFreeSpaceAhead(uint64_t max_blocks);
  // Whether all free space is known zero (core/pool_state.h): trusted at open because
  // the newest transaction says so, or verified since. Nothing is left to verify ahead.
  bool FreeSpaceKnownZero() const;

  // Persists everything pending and reclaims unreferenced orphans (clean unmount).
  absl::Status Close();

  // GrowPool's work on this open pool (see there). After it succeeds the pool refuses
  // every change (EROFS, "close and reopen"): its allocator still has the old size, and
  // the next Open uses the new one. Reads and Close work as before.
  absl::StatusOr<GrowResult> Grow(uint64_t new_capacity);

 private:
  explicit WalDirectory(std::unique_ptr<Pool> pool);
  std::unique_ptr<Pool> pool_;
};

// Grows the pool on `region` (walfsctl grow) to `new_capacity` bytes, rounded down to a
// whole block: the data area is extended to end there, every file is kept. Opens the
// pool, WalDirectory::Grow, closes it. Offline: the
// region must not be served by anyone else (the caller holds the pool's lock), and the
// caller has already made the region that big (the bytes past the old capacity may hold
// anything: they are zeroed, or recorded as uninitialised, before the new size is
// committed).
//
// Crash-consistent: the pool is opened (so a pending journal is replayed and a crashed
// operation recovered first), then the new size is committed in one journal
// transaction of the state record (format.h, PoolState::data_blocks). A power cut before
// that commit point leaves the old pool in a bigger region, which opens as before; after
// it, the grown one. Nothing else is written but zeros past the old capacity.
//
// InvalidArgument, with nothing changed, when new_capacity does not add a whole block or
// does not fit in the region; the pool's own errors (not a pool, damaged) as Open gives
// them.
absl::StatusOr<GrowResult> GrowPool(std::unique_ptr<PersistentRegion> region,
                                    uint64_t new_capacity);

}  // namespace walfs::core

#endif  // WALFS_CORE_WAL_DIRECTORY_H_
