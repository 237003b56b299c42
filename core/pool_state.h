// PoolState (format.h) helpers (its validation: PoolStateError, core/validate.h), and
// FreeSpaceGuard: how free space is kept zero without reading the pool at open.
//
// The format's invariant is that free data blocks read as zero (zero elision relies on
// it: a new segment's zeros are never stored), but for PoolState's uninitialised range.
// Why it holds across any crash, so that free space need not be read at open:
//  (1) mkfs leaves every block it did not write in the uninitialised range, and a grow
//      extends the range over its new blocks or zeroes them before its commit;
//  (2) blocks of the range are zeroed and the zeros made durable when first allocated,
//      before a commit can name the smaller range (Prepare);
//  (3) data is stored only into blocks an inode owns in the newest committed
//      transaction: a write, truncate or fallocate commits its allocation before it
//      stores (core/data_path.cc); a direct-access client stores only under a lease,
//      which covers extents of a committed inode, and a leased orphan is not reclaimed
//      (core/lease_table.h, fs/lease_protocol.h);
//  (4) blocks leave an inode only through an orphan (unlink, rename-over, trim's carrier)
//      that Reclaim zeroes and drains (pmem_drain, or msync of every flushed range)
//      before any commit may free it; a crash before that commit leaves the orphan, which
//      the next open zeroes again.
// So at every commit point, and so at every power cut, every free block outside the
// range is zero. The crash tests enumerate power cuts through unlinks, trims and
// reclaims (reclaim_then_reuse_free_space among other scenarios) and check, for every
// crash state, that fsck finds free space zero after recovery and that the recovered
// pool trusts it (tests/crash/crash_test.cc, CrashHarness::Check).
//
// What is read, then, guards only against damage the pool's writers did not make (a
// stray write into the pool file, a writer that did not keep (1)-(4)): a commit whose
// writer knows
// free space is zero says so in its journal header (format::kJournalFlagFreeSpaceZero),
// and an open whose newest transaction says so (or that finds none: mkfs's pool) trusts
// all free space. Otherwise (a pool last written by a walfs that did not set the flag,
// or whose check found a non-zero block):
//  - every block free at open and outside the range is read once, when first allocated,
//    before the allocation is handed out: a non-zero block fails it with DataLoss (the
//    range is not handed out; fsck.walfs reports and repairs it);
//  - the daemon reads it ahead of allocation, without holding the pool's locks
//    (NextAhead/AheadDone), so that allocations mostly find it verified;
//  - once all of it is verified, commits carry the flag again.
// Blocks freed while the pool is open were zeroed by the pool itself (Reclaim) and are
// trusted. fsck.walfs still reads all free space outside the uninitialised range.
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
  // [uninit_begin, uninit_end) is what must be verified before it is handed out. Empty
  // `free_runs` when free space is known zero (format::kJournalFlagFreeSpaceZero).
  void Init(uint64_t uninit_begin, uint64_t uninit_end,
            const std::map<uint64_t, uint64_t>& free_runs);

  // Sets the uninitialised range and keeps what is verified (a grow: its new blocks are
  // in the range or zero, and the allocator does not see them until the next open).
  void SetRange(uint64_t uninit_begin, uint64_t uninit_end) {
    uninit_begin_ = uninit_begin;
    uninit_end_ = uninit_end;
  }

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

  // Verifies ahead of use, in two steps so that the reading holds no lock:
  //   NextAhead (under the guard's lock) names the lowest unverified free blocks at or
  //   past the last place it stopped, at most `max_blocks` of one run; empty once every
  //   unverified block has been looked at.
  //   FirstNonZero (no lock) reads them.
  //   AheadDone (under the lock again) marks verified the blocks of [begin, first_bad)
  //   still unverified, and moves past first_bad. A block still unverified was not
  //   allocated in between (an allocation verifies its blocks in Prepare, under the
  //   lock, and only a verified block is written), so what was read is what it holds.
  // Blocks that are not zero stay unverified (Prepare refuses them when they are taken,
  // as without this) and are not looked at again.
  struct Span {
    uint64_t begin = 0, end = 0;
    bool empty() const { return begin >= end; }
  };
  Span NextAhead(uint64_t max_blocks) const;
  void AheadDone(const Span& span, uint64_t first_bad);
  // The first block of [a, b) that is not zero, or b. Holes of the pool file read as
  // zeros (PersistentRegion::MaybeData): only what may hold data is read.
  static uint64_t FirstNonZero(const PersistentRegion& region, uint64_t data_offset,
                               uint64_t a, uint64_t b);
  // The three steps at once, for a caller that holds the lock throughout. Returns the
  // blocks looked at; 0 once every unverified block has been looked at.
  uint64_t VerifyAhead(PersistentRegion& region, uint64_t data_offset, uint64_t max_blocks);

  uint64_t uninit_begin() const { return uninit_begin_; }
  uint64_t uninit_end() const { return uninit_end_; }
  // Blocks free at open and not verified yet (tests, status). 0: all free space outside
  // the uninitialised range is known zero.
  uint64_t unverified_blocks() const { return unverified_blocks_; }

 private:
  // Removes [a, b), which lies inside one run of unverified_.
  void MarkVerified(uint64_t a, uint64_t b);
  // Removes whatever of [a, b) is in unverified_.
  void MarkVerifiedWhereUnverified(uint64_t a, uint64_t b);

  uint64_t uninit_begin_ = 0;
  uint64_t uninit_end_ = 0;
  std::map<uint64_t, uint64_t> unverified_;  // start -> length, disjoint
  uint64_t unverified_blocks_ = 0;
  uint64_t ahead_cursor_ = 0;  // VerifyAhead's next block
};

}  // namespace walfs::core

#endif  // WALFS_CORE_POOL_STATE_H_
