// Space: allocation, the free-space guard, reclaim and the free counts (space.h).
// May not change the namespace, nor a live record but through the caller's Edit.
#include "core/space.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/all_zero.h"
#include "core/edit.h"
#include "core/layout.h"
#include "core/pool.h"
#include "core/status.h"

namespace walfs::core {
namespace {

using format::kBlockSize;

// Segments start on 2 MiB boundaries of the pool where free space allows, for 2 MiB
// page-table entries in the processes that map them (BlockAllocator).
constexpr uint64_t kHugePageBlocks = (uint64_t{2} << 20) / kBlockSize;

uint64_t BlocksFor(uint64_t bytes) { return (bytes + kBlockSize - 1) / kBlockSize; }

}  // namespace

Space::Space(Pool& pool)
    : pool_(pool),
      reserve_blocks_(ReservedBlocks(pool.sb_)),
      alloc_(pool.sb_.data_blocks, kHugePageBlocks, pool.sb_.data_offset / kBlockSize) {}

absl::StatusOr<format::Extent> Space::TakeBlock(Edit& e) {
  std::optional<format::Extent> b;
  if (UsableBlocks(false) >= 1) b = alloc_.AllocateHigh(1);
  if (!b) return PosixError(absl::StrCat("no space for a symlink target", ReserveNote()), ENOSPC);
  e.allocated().push_back(*b);  // given back if the edit is dropped
  if (absl::Status s = PrepareBlocks(*b); !s.ok()) return s;
  return *b;
}

absl::StatusOr<uint64_t> Space::TakeInode() {
  return TakeNumber(free_inodes_, inode_high_, pool_.sb_.inode_count,
                    pool_.sb_.inode_table_offset, format::kInodeSize, "no free inodes");
}

absl::StatusOr<uint64_t> Space::TakeSlot() {
  return TakeNumber(free_slots_, dirent_high_, pool_.sb_.dirent_count,
                    pool_.sb_.dirent_table_offset, format::kDirentSize,
                    "directory entry table is full");
}

absl::StatusOr<uint64_t> Space::TakeNumber(std::vector<uint64_t>& free, uint64_t& high,
                                           uint64_t count, uint64_t table_offset,
                                           uint64_t record_size, std::string_view full) {
  if (!free.empty()) {
    const uint64_t n = free.back();
    free.pop_back();
    return n;
  }
  if (high < count) return TakeFreshSlot(high, table_offset, record_size);
  return PosixError(full, ENOSPC);
}

bool Space::HasFreeSlot() const {
  return !free_slots_.empty() || dirent_high_ < pool_.sb_.dirent_count;
}

uint64_t Space::TakeFreshSlot(uint64_t& high, uint64_t table_offset, uint64_t record_size) {
  const uint64_t slot = high++;
  // Below the mark a slot is a valid record or zero (format.h), and a slot handed out
  // may go back to the free list unwritten (a dropped Edit): zero it before the mark that
  // covers it can be committed. Free after a new file or an earlier use; a write only
  // when mkfs --force left an older pool's bytes.
  const uint64_t off = table_offset + slot * record_size;
  if (!AllZero(pool_.region_->data() + off, record_size)) {
    pool_.region_->Fill(off, 0, record_size);
    pool_.region_->Persist(off, record_size);
  }
  NoteStateChanged();
  return slot;
}

absl::Status Space::PrepareBlocks(const format::Extent& e) {
  const uint64_t begin = guard_.uninit_begin(), end = guard_.uninit_end();
  absl::Status s = guard_.Prepare(*pool_.region_, pool_.sb_.data_offset, e);
  if (guard_.uninit_begin() != begin || guard_.uninit_end() != end) NoteStateChanged();
  PublishVerified();
  return s;
}

void Space::NoteStateChanged() {
  pool_.log_.NoteMarks(inode_high_, dirent_high_, guard_.uninit_begin(), guard_.uninit_end());
}

bool Space::AwaitReclaims() {
  constexpr auto kReclaimWait = std::chrono::seconds(10);
  bool freed = false;
  if (CommitPendingFrees(&freed).ok() && freed) return true;
  if (reclaims_in_flight_.load() == 0) return false;
  const uint64_t done = reclaims_done_.load();
  const auto deadline = std::chrono::steady_clock::now() + kReclaimWait;
  while (reclaims_in_flight_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // What finished meanwhile is pending: free it for the allocator.
  return CommitPendingFrees().ok() && reclaims_done_.load() != done;
}

absl::Status Space::CommitPendingFrees(bool* committed) {
  MutexLock ns(&pool_.ns_mu_);
  if (committed != nullptr) *committed = false;
  if (pending_frees_.empty()) return absl::OkStatus();
  Edit e(pool_);  // carries nothing but them
  absl::Status s = e.Commit();
  if (committed != nullptr) *committed = s.ok();
  return s;
}

void Space::ReclaimAll(const std::vector<uint64_t>& inos) {
  for (uint64_t ino : inos) Reclaim(ino);
}

void Space::Reclaim(uint64_t ino) {
  format::InodeRecord rec;
  uint64_t blocks = 0;
  {
    MutexLock ns(&pool_.ns_mu_);
    Inode* in = pool_.Find(ino);
    // A leased orphan's blocks may still be mapped by a client (lease.cc).
    if (in == nullptr || in->reclaiming || in->rec.state != format::InodeState::kOrphan ||
        in->lookups.load() != 0 || in->leases != 0) {
      return;
    }
    in->reclaiming = true;
    {
      // A thread that pinned the inode before it lost its last reference stores
      // nothing into the blocks from now on (Write checks `gone`).
      MutexLock il(&in->mu);
      in->gone = true;
      rec = in->rec;
    }
    blocks = AllocatedBlocks(rec);
    reclaims_in_flight_.fetch_add(1);
    // Free for statfs from now on: an allocation that needs them waits for the zeroing
    // (AwaitReclaims), so nothing is handed out before it is zero.
    zeroing_blocks_.fetch_add(blocks);
  }
  struct Done {
    Space* space;
    uint64_t blocks;
    ~Done() {
      space->zeroing_blocks_.fetch_sub(blocks);
      space->reclaims_done_.fetch_add(1);
      space->reclaims_in_flight_.fetch_sub(1);
    }
  } done{this, blocks};
  // The orphan owns its extents until the commit below, so nobody else touches them and
  // the zeroing runs without locks. A crash before the commit leaves the orphan in place
  // and the next open zeroes it again.
  uint64_t stored = 0;
  for (uint32_t i = 0; i < rec.extent_count; ++i) {
    const auto& e = rec.extents[i];
    stored += ZeroUnlessZero(*pool_.region_, pool_.sb_.data_offset + e.block * kBlockSize,
                             e.count * kBlockSize);
  }
  pool_.region_->Drain();
  MutexLock ns(&pool_.ns_mu_);
  // Zero and durably so: from here the record may be freed by any commit (pool.h).
  pending_free_blocks_.fetch_add(blocks);
  pending_frees_.push_back(ino);
  PublishFree();
  pool_.counters_.orphans_reclaimed.fetch_add(1, std::memory_order_relaxed);
  pool_.counters_.zeroed_blocks.fetch_add(stored / kBlockSize, std::memory_order_relaxed);
  if (pending_frees_.size() >= kMaxPendingFrees) {
    // On failure they stay pending, and orphans on media for the next open to reclaim.
    Edit e(pool_);
    (void)e.Commit();
  }
}

void Space::PublishFree() {
  free_blocks_.store(alloc_.free_blocks());
  // Slots at or above the mark were never used (format.h) and are free too.
  free_inodes_count_.store(free_inodes_.size() + pending_frees_.size() +
                           (pool_.sb_.inode_count - inode_high_));
}

std::string Space::ReserveNote() const {
  if (alloc_.free_blocks() == 0 || reserve_blocks_ == 0) return "";
  return absl::StrCat(" (", alloc_.free_blocks(), " free, of which the last ",
                      reserve_blocks_, " are reserved for WAL segments)");
}

uint64_t Space::VerifyFreeSpaceAhead(uint64_t max_blocks) {
  if (pool_.read_only_) return 0;
  FreeSpaceGuard::Span span;
  {
    MutexLock l(&pool_.ns_mu_);
    span = guard_.NextAhead(max_blocks);
  }
  if (span.empty()) return 0;
  // Unlocked: blocks allocated meanwhile are verified by their Prepare and are no longer
  // marked by AheadDone (pool_state.h).
  const uint64_t bad =
      FreeSpaceGuard::FirstNonZero(*pool_.region_, pool_.sb_.data_offset, span.begin, span.end);
  MutexLock l(&pool_.ns_mu_);
  guard_.AheadDone(span, bad);
  PublishVerified();
  return (bad < span.end ? bad + 1 : span.end) - span.begin;
}

FsStats Space::Statfs() const {
  FsStats s;
  s.block_size = kBlockSize;
  s.total_blocks = pool_.sb_.data_blocks;
  s.free_blocks = std::min(pool_.sb_.data_blocks, free_blocks_.load() + zeroing_blocks_.load() +
                                                pending_free_blocks_.load());
  s.reserved_blocks = std::min(s.free_blocks, reserve_blocks_);
  s.total_inodes = pool_.sb_.inode_count - 1;
  s.free_inodes = free_inodes_count_.load();
  return s;
}

absl::Status Space::GrowDataArea(uint64_t new_blocks) {
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  const uint64_t old_blocks = pool_.sb_.data_blocks;
  if (new_blocks <= old_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the pool's data area is ", old_blocks, " blocks (", pool_.sb_.capacity,
        " bytes in all); a grow must add at least one ", kBlockSize, "-byte block"));
  }
  if (new_blocks > (pool_.region_->size() - pool_.sb_.data_offset) / kBlockSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a data area of ", new_blocks, " blocks does not fit in the ", pool_.region_->size(),
        "-byte region (the file must be made that big first)"));
  }
  MutexLock ns(&pool_.ns_mu_);
  uint64_t begin = guard_.uninit_begin(), end = guard_.uninit_end();
  if (begin == end) {
    // Nothing uninitialised: the new blocks become the range, unread and unwritten.
    begin = old_blocks;
    end = new_blocks;
  } else if (end == old_blocks) {
    end = new_blocks;  // the range reaches the old end: it extends over the new blocks
  } else {
    // The range ends below files allocated from the top, and one range cannot also
    // cover the new blocks: they must be zero before the commit makes them free space.
    // A region grown by extending its file reads as zeros, so this reads and, normally,
    // writes nothing. Zeros written here land past the committed capacity: a crash
    // before the commit leaves the old pool as it was.
    constexpr uint64_t kChunk = 256;  // blocks persisted at a time
    for (uint64_t b = old_blocks; b < new_blocks; b += kChunk) {
      const uint64_t n = std::min(kChunk, new_blocks - b);
      const uint64_t off = pool_.sb_.data_offset + b * kBlockSize;
      if (AllZero(pool_.region_->data() + off, n * kBlockSize)) continue;
      pool_.region_->Fill(off, 0, n * kBlockSize);
      pool_.region_->Persist(off, n * kBlockSize);
    }
    if (absl::Status h = pool_.region_->health(); !h.ok()) return h;
  }
  bool done = false;
  absl::Status s = pool_.log_.CommitGrow(new_blocks, begin, end, &done);
  if (done) {
    grown_.store(true);
    // The range as committed, so a later NoteStateChanged does not write the old one
    // back (this pool allocates only from its old blocks, see pool.h). What was verified
    // stays so: the new blocks are in the range or zero.
    guard_.SetRange(begin, end);
  }
  return s;
}

absl::Status Space::Grow(format::InodeRecord& r, uint64_t bytes,
                         std::vector<format::Extent>& taken) {
  const uint64_t have = AllocatedBlocks(r);
  const uint64_t need = BlocksFor(bytes);
  if (need <= have) return absl::OkStatus();
  if (need > pool_.sb_.data_blocks) {
    return PosixError(absl::StrCat("file of ", bytes, " bytes exceeds the pool"), EFBIG);
  }
  const format::InodeRecord before = r;
  std::vector<format::Extent> mine;  // what this call took, in order
  const bool segment = (r.flags & format::kInodeFlagSegment) != 0;
  const uint64_t seg_blocks = pool_.sb_.segment_size / kBlockSize;
  uint64_t missing = need - have;
  // Only segments may take the reserve (pool.h): another file gets ENOSPC when what it
  // needs would cut into it, and takes no more than the space outside it ahead.
  if (!segment && missing > UsableBlocks(false)) {
    return PosixError(absl::StrCat("no space for ", missing, " more blocks", ReserveNote()),
                      ENOSPC);
  }
  // Segments grow by whole segments; other files by at least what they already have
  // (doubling), so a file written in small appends needs only a few extents. What a
  // file holds past its end is given back at release and truncate (TrimBlocks).
  absl::Status error;
  if (r.extent_count > 0) {
    const uint64_t ahead =
        segment ? missing : std::min(std::max(missing, have), UsableBlocks(false));
    format::Extent& last = r.extents[r.extent_count - 1];
    const uint64_t end = last.block + last.count;
    const uint64_t got = alloc_.ExtendInPlace(last, ahead);
    if (got > 0) mine.push_back({end, got});
    missing -= std::min(missing, got);
    // New blocks are checked (or zeroed) before they are handed out (pool_state.h).
    if (got > 0) error = PrepareBlocks({end, got});
  }
  while (missing > 0 && error.ok()) {
    if (r.extent_count == format::kMaxExtents) {
      error = PosixError("file needs more extents than an inode holds (pool fragmented)",
                         ENOSPC);
      break;
    }
    // Segments from the bottom, other files from the top, so small files do not cut the
    // runs segments need.
    const uint64_t total = AllocatedBlocks(r);
    const uint64_t want = segment ? std::max(missing, seg_blocks)
                                  : std::max(missing, std::min(total, UsableBlocks(false)));
    auto take = [&](uint64_t n) {
      return segment ? alloc_.AllocateLow(n) : alloc_.AllocateHigh(n);
    };
    std::optional<format::Extent> e = take(want);
    if (!e) {
      // No run that long: the longest run there is, up to `want`. Never just `missing`:
      // one small extent per write would reach kMaxExtents with most of the pool free.
      const uint64_t largest = alloc_.LargestRun();
      if (largest > 0) e = take(std::min(largest, want));
    }
    if (!e) {
      error = PosixError(absl::StrCat("no space for ", missing, " more blocks"), ENOSPC);
      break;
    }
    r.extents[r.extent_count++] = *e;
    mine.push_back(*e);
    missing -= std::min(missing, e->count);
    error = PrepareBlocks(*e);
  }
  if (error.ok()) {
    taken.insert(taken.end(), mine.begin(), mine.end());
    return error;
  }
  for (const format::Extent& e : mine) alloc_.Release(e);
  r = before;
  return error;
}

void Space::TrimBlocks(Edit& e, uint64_t ino, uint64_t keep) {
  const format::InodeRecord& cur = e.View(ino);
  const Inode& in = *pool_.Find(ino);
  // Never below the file's size; leased blocks never change owner (lease.cc).
  keep = std::max(keep, BlocksFor(cur.size));
  if (in.leases > 0) keep = std::max(keep, BlocksFor(in.leased_size));
  if (AllocatedBlocks(cur) <= keep) return;
  // The blocks go to a carrier orphan in the same transaction, zeroed and freed after
  // the commit. Without a free inode for the carrier, they stay with the file (zeroed)
  // and are freed when it is.
  auto carrier = e.NewInode(format::InodeType::kRegular, 0, Caller{});
  if (!carrier.ok()) return;
  format::InodeRecord& r = e.Rec(ino);
  format::InodeRecord kept = r;
  format::InodeRecord& freed = e.Rec(*carrier);
  freed.state = format::InodeState::kOrphan;
  freed.nlink = 0;
  freed.extent_count = 0;
  kept.extent_count = 0;
  uint64_t pos = 0;
  for (uint32_t i = 0; i < r.extent_count; ++i) {
    format::Extent x = r.extents[i];
    if (pos + x.count <= keep) {
      kept.extents[kept.extent_count++] = x;
    } else if (pos >= keep) {
      freed.extents[freed.extent_count++] = x;
    } else {
      const uint64_t head = keep - pos;
      kept.extents[kept.extent_count++] = {x.block, head};
      freed.extents[freed.extent_count++] = {x.block + head, x.count - head};
    }
    pos += x.count;
  }
  for (uint32_t i = kept.extent_count; i < format::kMaxExtents; ++i) kept.extents[i] = {};
  e.reclaim().push_back(*carrier);
  r = kept;
}

absl::StatusOr<Space::ZeroTail> Space::Truncate(Edit& e, uint64_t ino, uint64_t size) {
  format::InodeRecord& r = e.Rec(ino);
  // A segment keeps its whole extent unless cut below it; any other file is left
  // holding exactly its size (fallocate's preallocation past EOF included, as on ext4).
  const bool segment = (r.flags & format::kInodeFlagSegment) != 0;
  r.flags &= ~format::kInodeFlagPreallocated;
  if (size > r.size) {
    absl::Status s = Grow(r, size, e.allocated());
    if (!s.ok()) return s;
    r.size = size;  // the grown range is zero (format.h invariant)
    if (!segment) TrimBlocks(e, ino, BlocksFor(size));
    return ZeroTail{};
  }
  if (size == r.size) {
    if (!segment) TrimBlocks(e, ino, BlocksFor(size));
    return ZeroTail{};
  }
  const uint64_t old_size = r.size;
  r.size = size;
  TrimBlocks(e, ino, BlocksFor(size));
  // Bytes past the new EOF must read as zero if the file grows again. Zeroed after the
  // commit (the caller's), so a crash leaves the old size with old bytes or the new size
  // (recovery re-zeroes past EOF).
  return ZeroTail{size, std::min(old_size, AllocatedBlocks(r) * kBlockSize)};
}

void Space::ZeroFileRange(const format::InodeRecord& rec, ZeroTail t) {
  if (t.to <= t.from) return;
  ForEachRun(pool_.sb_.data_offset, rec, t.from, t.to - t.from,
             [&](uint64_t pool_off, uint64_t n, uint64_t) {
               ZeroUnlessZero(*pool_.region_, pool_off, n);
             });
  pool_.region_->Drain();
}

}  // namespace walfs::core
