// BlockAllocator: the in-memory map of free data blocks.
//
// Free space is not stored on media: it is the complement of the extents owned by
// inodes, rebuilt at open (Reserve every owned extent). So an allocation becomes
// durable exactly when the inode record naming it commits, and a crash can never leak
// or double-allocate a block.
//
// Placement: WAL segments take the lowest free run that fits (AllocateLow) and small
// files take from the top of the pool (AllocateHigh), so small files do not cut the
// contiguous runs segments need. A run of at least `align_blocks` starts, where free
// space allows, on a block whose pool offset is a multiple of align_blocks blocks (2 MiB
// in a pool): a process mapping such a run gets 2 MiB page-table entries where the
// memory behind the pool has 2 MiB pages (fsdax or device-DAX with 2 MiB alignment, a
// huge=always tmpfs), so writing a 16 MiB segment takes 8 page faults instead of 4096.
//
// Not thread-safe: Pool guards it with its metadata mutex.
#ifndef WALFS_CORE_ALLOCATOR_H_
#define WALFS_CORE_ALLOCATOR_H_

#include <cstdint>
#include <map>
#include <optional>

#include "absl/status/status.h"
#include "core/format.h"

namespace walfs::core {

class BlockAllocator {
 public:
  // All of [0, total_blocks) free. Block b is aligned when (b + align_phase) is a
  // multiple of align_blocks; align_blocks 1 (the default) aligns nothing.
  explicit BlockAllocator(uint64_t total_blocks, uint64_t align_blocks = 1,
                          uint64_t align_phase = 0);

  // Marks `e` as owned. DataLoss if any block of it is outside the area or owned already
  // (two inodes claiming one block).
  absl::Status Reserve(const format::Extent& e);
  // Returns `e` to free space. The caller guarantees its blocks read as zero.
  void Release(const format::Extent& e);

  // A run of exactly `count` blocks at the lowest / highest free address; nullopt if no
  // run is that long. AllocateLow of at least align_blocks blocks takes the lowest
  // aligned start that fits, and the lowest start of all only when no aligned one does:
  // alignment never turns a success into a failure. It may leave a free gap of less
  // than align_blocks below the run, which AllocateHigh and later runs still use.
  std::optional<format::Extent> AllocateLow(uint64_t count);
  std::optional<format::Extent> AllocateHigh(uint64_t count);
  // Grows `e` in place by up to `count` blocks if the blocks right after it are free;
  // returns how many it took.
  uint64_t ExtendInPlace(format::Extent& e, uint64_t count);
  // The longest free run, in blocks.
  uint64_t LargestRun() const;
  // The free runs, start -> length, disjoint and not adjacent.
  const std::map<uint64_t, uint64_t>& free_runs() const { return free_; }

  uint64_t free_blocks() const { return free_blocks_; }
  uint64_t total_blocks() const { return total_blocks_; }

 private:
  void Take(std::map<uint64_t, uint64_t>::iterator it, uint64_t start, uint64_t count);

  uint64_t total_blocks_;
  uint64_t align_blocks_;
  uint64_t align_phase_;
  uint64_t free_blocks_;
  std::map<uint64_t, uint64_t> free_;  // start -> length, disjoint, not adjacent
};

}  // namespace walfs::core

#endif  // WALFS_CORE_ALLOCATOR_H_
