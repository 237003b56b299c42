// PoolState helpers and FreeSpaceGuard (the record's validation is core/validate.h).
#include "core/pool_state.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/all_zero.h"
#include "core/crc32c.h"

namespace walfs::core {
namespace {

using format::kBlockSize;

}  // namespace

format::Superblock CurrentGeometry(const format::Superblock& sb,
                                   const format::PoolState& state) {
  format::Superblock cur = sb;
  cur.data_blocks = state.data_blocks;
  cur.capacity = sb.data_offset + state.data_blocks * kBlockSize;
  return cur;
}

void SealPoolState(format::PoolState* state) {
  state->crc = RecordCrc(state, sizeof(*state));
}

format::PoolState InitialPoolState(const format::Superblock& sb, bool data_is_zero) {
  format::PoolState s{};
  s.magic = format::kStateMagic;
  s.inode_high = 2;  // slot 0 (reserved, zero) and the root
  s.dirent_high = 0;
  s.uninit_begin = 0;
  s.uninit_end = data_is_zero ? 0 : sb.data_blocks;
  s.data_blocks = sb.data_blocks;
  SealPoolState(&s);
  return s;
}

void FreeSpaceGuard::Init(uint64_t uninit_begin, uint64_t uninit_end,
                          const std::map<uint64_t, uint64_t>& free_runs) {
  uninit_begin_ = uninit_begin;
  uninit_end_ = uninit_end;
  unverified_.clear();
  unverified_blocks_ = 0;
  ahead_cursor_ = 0;
  auto add = [&](uint64_t begin, uint64_t end) {
    if (begin >= end) return;
    unverified_[begin] = end - begin;
    unverified_blocks_ += end - begin;
  };
  for (const auto& [start, length] : free_runs) {
    const uint64_t end = start + length;
    // The part of [start, end) outside [uninit_begin, uninit_end).
    add(start, std::min(end, uninit_begin));
    add(std::max(start, uninit_end), end);
  }
}

uint64_t FreeSpaceGuard::FirstNonZero(const PersistentRegion& region, uint64_t data_offset,
                                      uint64_t a, uint64_t b) {
  for (uint64_t from = a; from < b;) {
    const PersistentRegion::DataRange data =
        MaybeDataBlocks(region, data_offset, kBlockSize, from, b);
    for (uint64_t blk = data.begin; blk < data.end; ++blk) {
      if (!AllZero(region.data() + data_offset + blk * kBlockSize, kBlockSize)) return blk;
    }
    from = data.end;
  }
  return b;
}

void FreeSpaceGuard::MarkVerified(uint64_t a, uint64_t b) {
  auto run = std::prev(unverified_.upper_bound(a));
  const uint64_t run_begin = run->first, run_end = run->first + run->second;
  unverified_.erase(run);
  if (run_begin < a) unverified_[run_begin] = a - run_begin;
  if (b < run_end) unverified_[b] = run_end - b;
  unverified_blocks_ -= b - a;
}

void FreeSpaceGuard::MarkVerifiedWhereUnverified(uint64_t a, uint64_t b) {
  auto it = unverified_.upper_bound(a);
  if (it != unverified_.begin()) --it;
  while (it != unverified_.end() && it->first < b) {
    const uint64_t x = std::max(a, it->first);
    const uint64_t y = std::min(b, it->first + it->second);
    ++it;  // MarkVerified replaces the run; the next one stays valid
    if (x < y) MarkVerified(x, y);
  }
}

FreeSpaceGuard::Span FreeSpaceGuard::NextAhead(uint64_t max_blocks) const {
  if (max_blocks == 0) return {};
  auto it = unverified_.upper_bound(ahead_cursor_);
  if (it != unverified_.begin() && std::prev(it)->first + std::prev(it)->second > ahead_cursor_) {
    --it;
  }
  if (it == unverified_.end()) return {};
  const uint64_t a = std::max(ahead_cursor_, it->first);
  return {a, std::min(it->first + it->second, a + max_blocks)};
}

void FreeSpaceGuard::AheadDone(const Span& span, uint64_t first_bad) {
  if (span.empty()) return;
  first_bad = std::clamp(first_bad, span.begin, span.end);
  MarkVerifiedWhereUnverified(span.begin, first_bad);
  // A block that is not zero is skipped: Prepare reports it if it is ever taken.
  ahead_cursor_ = std::max(ahead_cursor_, first_bad < span.end ? first_bad + 1 : span.end);
}

uint64_t FreeSpaceGuard::VerifyAhead(PersistentRegion& region, uint64_t data_offset,
                                     uint64_t max_blocks) {
  const Span span = NextAhead(max_blocks);
  if (span.empty()) return 0;
  AheadDone(span, FirstNonZero(region, data_offset, span.begin, span.end));
  return ahead_cursor_ - span.begin;
}

absl::Status FreeSpaceGuard::Prepare(PersistentRegion& region, uint64_t data_offset,
                                     const format::Extent& e) {
  const uint64_t begin = e.block, end = e.block + e.count;
  // Verify first: a refused extent leaves everything as it was.
  std::vector<std::pair<uint64_t, uint64_t>> checked;  // [begin, end) pieces verified
  auto it = unverified_.upper_bound(begin);
  if (it != unverified_.begin()) --it;
  for (; it != unverified_.end() && it->first < end; ++it) {
    const uint64_t a = std::max(begin, it->first);
    const uint64_t b = std::min(end, it->first + it->second);
    if (a >= b) continue;
    if (const uint64_t blk = FirstNonZero(region, data_offset, a, b); blk < b) {
      return absl::DataLossError(absl::StrCat(
          "data block ", blk, " (offset ", data_offset + blk * kBlockSize,
          ") is free space but not zero; it is not handed out: run fsck.walfs --repair"));
    }
    checked.emplace_back(a, b);
  }
  for (const auto& [a, b] : checked) MarkVerified(a, b);

  const uint64_t a = std::max(begin, uninit_begin_);
  const uint64_t b = std::min(end, uninit_end_);
  if (a >= b) return region.health();
  // The zeros must be durable before a committed PoolState stops covering the blocks.
  uint64_t zero_from = a;
  if (a == uninit_begin_) {
    uninit_begin_ = b;
  } else if (b == uninit_end_) {
    uninit_end_ = a;
  } else {
    zero_from = uninit_begin_;  // see the header: not reached through BlockAllocator
    uninit_begin_ = b;
  }
  const uint64_t off = data_offset + zero_from * kBlockSize;
  const uint64_t len = (b - zero_from) * kBlockSize;
  ZeroUnlessZero(region, off, len);
  region.Drain();
  return region.health();
}

}  // namespace walfs::core
