// PoolState (format.h) helpers (its validation: PoolStateError, core/validate.h), and
// FreeSpaceGuard: how free space is kept zero without
// reading the pool at open.
//
// The format's invariant is that free data blocks read as zero (zero elision relies on
// it: a new segment's zeros are never stored). Version 1 checked it by reading every
// free block at open, which cost a memory (or disk) scan proportional to the pool.
// Version 2 checks it where the cost is bounded by what is used:
//  - blocks in PoolState's uninitialised range are zeroed when first allocated, and the
//    range shrinks in the same step (mkfs never writes them);
//  - every other block free at open is read once, when first allocated, before the
//    allocation is handed out: a non-zero block fails it with DataLoss (the range is
//    not handed out; fsck.walfs reports and repairs it);
//  - blocks freed while the pool is open were zeroed by the pool itself (Reclaim) and
//    are trusted.
// fsck.walfs still reads all free space outside the uninitialised range.
#ifndef WALFS_CORE_POOL_STATE_H_
#define WALFS_CORE_POOL_STATE_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "core/format.h"
#include "core/persistent_region.h"

namespace walfs::core {

// The pool's current geometry: `sb` with data_blocks and capacity as `state` (valid for
// it) says, which differ from what mkfs wrote once the pool was grown (format.h).
format::Superblock CurrentGeometry(const format::Superblock& sb,
                                   const format::PoolState& state);

// The state mkfs writes: tables initialised up to the root, and the whole data area
// uninitialised unless `data_is_zero`. crc set.
format::PoolState InitialPoolState(const format::Superblock& sb, bool data_is_zero);

// Sets state->crc.
void SealPoolState(format::PoolState* state);

// Not thread-safe: Pool guards it with its metadata mutex.
class FreeSpaceGuard {
 public:
  FreeSpaceGuard() = default;
  // `free_runs` (start -> length, disjoint) is free space at open; the part outside
  // [uninit_begin, uninit_end) is what must be verified before it is handed out.
  void Init(uint64_t uninit_begin, uint64_t uninit_end,
            const std::map<uint64_t, uint64_t>& free_runs);

  // Makes the blocks of `e` (just taken from free space) safe to hand out as zeros:
  // zeroes and persists the part in the uninitialised range and shrinks the range (the
  // caller commits the new range in its PoolState with, or before, the allocation; the
  // zeros are durable first, so either order is safe), and reads the part free since
  // open and not yet verified (but for holes of the pool file, which read as zeros:
  // PersistentRegion::MaybeData). DataLoss naming the first non-zero block if a verified
  // part is not zero: the caller must give `e` back, not hand it out. Costs at most the extent's size in reads or writes,
  // as long as `e` touches the uninitialised range only at one of its ends, which
  // BlockAllocator almost guarantees (it takes the start or the end of a free run, or a
  // 2 MiB-aligned start less than 2 MiB into one); an extent in its middle also zeroes
  // the blocks below it, so an aligned segment costs at most 2 MiB more, once.
  absl::Status Prepare(PersistentRegion& region, uint64_t data_offset,
                       const format::Extent& e);

  // Verifies ahead of use: reads the lowest unverified free blocks at or past the last
  // place it stopped, at most `max_blocks` of one run, and marks them verified if they
  // are zero, so a later Prepare of them reads nothing. Blocks that are not zero stay
  // unverified (Prepare refuses them when they are taken, as without this) and are not
  // looked at again. The caller holds the lock that guards this object, and calls it
  // only with no allocation in between (the blocks are free while they are read).
  // Returns the blocks looked at; 0 once every unverified block has been looked at.
  uint64_t VerifyAhead(PersistentRegion& region, uint64_t data_offset, uint64_t max_blocks);

  uint64_t uninit_begin() const { return uninit_begin_; }
  uint64_t uninit_end() const { return uninit_end_; }
  // Blocks free at open and not verified yet (tests, status).
  uint64_t unverified_blocks() const { return unverified_blocks_; }

 private:
  // Removes [a, b), which lies inside one run of unverified_.
  void MarkVerified(uint64_t a, uint64_t b);

  uint64_t uninit_begin_ = 0;
  uint64_t uninit_end_ = 0;
  std::map<uint64_t, uint64_t> unverified_;  // start -> length, disjoint
  uint64_t unverified_blocks_ = 0;
  uint64_t ahead_cursor_ = 0;  // VerifyAhead's next block
};

}  // namespace walfs::core

#endif  // WALFS_CORE_POOL_STATE_H_
