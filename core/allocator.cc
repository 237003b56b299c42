// BlockAllocator: first-fit from either end over a coalesced free-run map.
#include "core/allocator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace walfs::core {

BlockAllocator::BlockAllocator(uint64_t total_blocks, uint64_t align_blocks,
                               uint64_t align_phase)
    : total_blocks_(total_blocks),
      align_blocks_(align_blocks == 0 ? 1 : align_blocks),
      align_phase_(align_phase % align_blocks_),
      free_blocks_(total_blocks) {
  if (total_blocks > 0) free_[0] = total_blocks;
}

void BlockAllocator::Take(std::map<uint64_t, uint64_t>::iterator it, uint64_t start,
                          uint64_t count) {
  const uint64_t run_start = it->first;
  const uint64_t run_end = it->first + it->second;
  free_.erase(it);
  if (start > run_start) free_[run_start] = start - run_start;
  if (start + count < run_end) free_[start + count] = run_end - (start + count);
  free_blocks_ -= count;
}

absl::Status BlockAllocator::Reserve(const format::Extent& e) {
  if (e.count == 0 || e.block >= total_blocks_ || e.count > total_blocks_ - e.block) {
    return absl::DataLossError(absl::StrCat("extent [", e.block, ", +", e.count,
                                            ") lies outside the data area of ",
                                            total_blocks_, " blocks"));
  }
  auto it = free_.upper_bound(e.block);
  if (it == free_.begin()) {
    return absl::DataLossError(
        absl::StrCat("extent [", e.block, ", +", e.count, ") overlaps another inode's"));
  }
  --it;
  if (it->first + it->second < e.block + e.count) {
    return absl::DataLossError(
        absl::StrCat("extent [", e.block, ", +", e.count, ") overlaps another inode's"));
  }
  Take(it, e.block, e.count);
  return absl::OkStatus();
}

void BlockAllocator::Release(const format::Extent& e) {
  uint64_t start = e.block;
  uint64_t count = e.count;
  auto next = free_.lower_bound(start);
  if (next != free_.end() && start + count == next->first) {
    count += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      count += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = count;
  free_blocks_ += e.count;
}

std::optional<format::Extent> BlockAllocator::AllocateLow(uint64_t count) {
  if (count == 0) return std::nullopt;
  if (align_blocks_ > 1 && count >= align_blocks_) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      // The first aligned block at or after the run's start.
      const uint64_t skew = (it->first + align_phase_) % align_blocks_;
      const uint64_t start = it->first + (skew == 0 ? 0 : align_blocks_ - skew);
      if (start - it->first < it->second && it->second - (start - it->first) >= count) {
        format::Extent e{start, count};
        Take(it, start, count);
        return e;
      }
    }
  }
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second >= count) {
      format::Extent e{it->first, count};
      Take(it, e.block, count);
      return e;
    }
  }
  return std::nullopt;
}

std::optional<format::Extent> BlockAllocator::AllocateHigh(uint64_t count) {
  if (count == 0) return std::nullopt;
  for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
    if (it->second >= count) {
      format::Extent e{it->first + it->second - count, count};
      Take(std::prev(it.base()), e.block, count);
      return e;
    }
  }
  return std::nullopt;
}

uint64_t BlockAllocator::ExtendInPlace(format::Extent& e, uint64_t count) {
  auto it = free_.find(e.block + e.count);
  if (it == free_.end() || count == 0) return 0;
  const uint64_t take = std::min(count, it->second);
  Take(it, it->first, take);
  e.count += take;
  return take;
}

uint64_t BlockAllocator::LargestRun() const {
  uint64_t best = 0;
  for (const auto& [start, len] : free_) best = std::max(best, len);
  return best;
}

}  // namespace walfs::core
