// Pool geometry (layout.cc): the reserve and sizing rules, and computing, validating and
// writing a fresh layout (mkfs). Works on a region and a superblock only; opening a pool
// is WalDirectory's (wal_directory.h).
#ifndef WALFS_CORE_LAYOUT_H_
#define WALFS_CORE_LAYOUT_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/format.h"
#include "core/persistent_region.h"

namespace walfs::core {

// The reserve: the last free blocks of a pool, which only WAL segments (files created
// with a segment name or as xlogtemp.*, which get a segment extent) may take, as ext4
// keeps reserved blocks for root. Other files (archive_status, history, temporary
// files) get ENOSPC when only the reserve is left, so a checkpoint or crash recovery
// after a space shortage can still create the segments it needs. Derived, not stored:
// two segments, at most a quarter of the data area (so a tiny test pool stays usable).
inline constexpr uint64_t kReserveSegments = 2;
uint64_t ReservedBlocks(const format::Superblock& sb);

// Sizing (docs/operations.md, "Sizing a pool"). A PostgreSQL cluster keeps up to
// max_wal_size of WAL between checkpoints (a soft limit, passed under bursts until the
// checkpoint ends) plus wal_keep_size for standbys; on top of that come the segment being
// written, the next one being installed and one being recycled (kHeadroomSegments) and
// the reserve. So the data area a cluster needs is
//   max_wal_size + wal_keep_size + (kHeadroomSegments + kReserveSegments) * segment size.
// (Replication slots and a failing archive_command can hold more: size for them too.)
inline constexpr uint64_t kHeadroomSegments = 3;
uint64_t WalDataBytes(uint64_t max_wal_size, uint64_t wal_keep_size, uint64_t segment_size);
// The largest max_wal_size, in whole segments, that a data area of `data_bytes` holds by
// that rule with this wal_keep_size; 0 when not even the headroom fits.
uint64_t MaxWalSizeFor(uint64_t data_bytes, uint64_t wal_keep_size, uint64_t segment_size);

// Creates a fresh pool on `region` (all of it: capacity = region.size()).
struct FormatOptions {
  uint64_t segment_size = format::kDefaultSegmentSize;
  uint64_t inode_count = 0;  // 0: one per 64 KiB of capacity, at least 64
  // Called with (bytes zeroed, total) while the pool is zeroed (zero_data).
  std::function<void(uint64_t, uint64_t)> progress;
  // The caller knows the region reads as zeros (a new file): the data area starts out
  // initialised, so its free space is verified, not zeroed, when first allocated.
  bool region_is_zero = false;
  // Write zeros over the whole pool (mkfs.walfs --zero) instead of initialising the
  // tables and the data area lazily (format.h, PoolState). Ignored with region_is_zero.
  bool zero_data = false;
  // Owner and permission bits of the root directory (the mount point's attributes), so a
  // pool made for PostgreSQL can be owned by postgres from the start.
  uint32_t root_uid = 0;
  uint32_t root_gid = 0;
  uint32_t root_mode = 0755;
};
absl::Status FormatPool(PersistentRegion& region, const FormatOptions& options);

// The layout FormatPool would write for a region of `capacity` bytes (InvalidArgument
// with the reason when the sizes cannot work).
absl::StatusOr<format::Superblock> ComputeLayout(uint64_t capacity,
                                                 const FormatOptions& options);

// The smallest pool size, in whole MiB, whose layout (ComputeLayout with `options`) has
// a data area of at least `data_bytes`.
absl::StatusOr<uint64_t> PoolSizeFor(uint64_t data_bytes, const FormatOptions& options);

}  // namespace walfs::core

#endif  // WALFS_CORE_LAYOUT_H_
