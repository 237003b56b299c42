// Space: where blocks, inode numbers and dirent slots come from and go back to. Owns the
// allocator, the free lists, the table marks, the free-space guard (pool_state.h), the
// reclaim of orphans and the free counts Statfs reports. Changes of file size that move
// blocks (Grow, TrimBlocks, Truncate) are built here, in the caller's Edit.
// May not change a live inode's record except through an Edit, nor the namespace.
#ifndef WALFS_CORE_SPACE_H_
#define WALFS_CORE_SPACE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/allocator.h"
#include "core/format.h"
#include "core/pool_state.h"
#include "core/types.h"

namespace walfs::core {

class Edit;
class Pool;

// Everything here is guarded by the pool's namespace lock (ns_mu_) unless it says
// otherwise; the atomics are published under it and read without it.
class Space {
 public:
  explicit Space(Pool& pool);
  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;

  // Gives `r` blocks until its extents cover `bytes`; ENOSPC/EFBIG when impossible (then
  // `r` and the allocator are as before). New blocks are appended to `taken`. Files
  // other than segments may get up to twice what they need (TrimBlocks gives the rest
  // back).
  absl::Status Grow(format::InodeRecord& r, uint64_t bytes, std::vector<format::Extent>& taken);
  // One block outside the reserve for `e` (an out-of-line symlink target), prepared
  // (zero); ENOSPC without one.
  absl::StatusOr<format::Extent> TakeBlock(Edit& e);
  // Leaves `ino` owning only its first `keep` blocks (never fewer than its leases cover):
  // the rest move in the edit to a carrier orphan queued for reclaim.
  void TrimBlocks(Edit& e, uint64_t ino, uint64_t keep);
  // Sets a regular file's size in the edit (growing: allocates; shrinking: moves whole
  // blocks past the end to a carrier orphan). Returns the file bytes [from, to) to zero
  // once the edit is applied (ZeroFileRange), while the edit still holds the inode.
  struct ZeroTail {
    uint64_t from = 0, to = 0;
  };
  absl::StatusOr<ZeroTail> Truncate(Edit& e, uint64_t ino, uint64_t size);
  void ZeroFileRange(const format::InodeRecord& rec, ZeroTail t);
  // Whether the dirent table has a slot left (free or never used).
  bool HasFreeSlot() const;

  // Zeroes an orphan's extents, then frees it: its record is freed by the next edit's
  // commit (pending frees), or by one of its own when kMaxPendingFrees are waiting.
  // Takes the namespace lock itself; call without it.
  void Reclaim(uint64_t ino);
  void ReclaimAll(const std::vector<uint64_t>& inos);
  // Commits the pending frees, if any, in an edit of their own; *committed says whether
  // there were any and they are free now. Takes the namespace lock.
  absl::Status CommitPendingFrees(bool* committed = nullptr);
  // Blocks being zeroed by a Reclaim in another thread are not free yet. An allocation
  // that fails with ENOSPC while any is in flight calls this (without locks) and retries
  // when it returns true: it waits, at most kReclaimWait, until none is in flight, and
  // says whether any finished meanwhile. So ENOSPC means the space is not there, not
  // that it is still being zeroed (an unlink or a trim just before). Pending frees are
  // committed first (they are free for Statfs, but not yet for the allocator).
  bool AwaitReclaims();

  // What an Edit takes while it is built and gives back when it is dropped (or, for what
  // it freed, once it is applied). TakeInode and TakeSlot: a free number, or the next
  // never-used one (TakeFreshSlot); ENOSPC when there is none.
  absl::StatusOr<uint64_t> TakeInode();
  absl::StatusOr<uint64_t> TakeSlot();
  uint64_t NextGeneration() { return next_generation_++; }
  void ReturnInode(uint64_t ino) { free_inodes_.push_back(ino); }
  void ReturnSlot(uint64_t slot) { free_slots_.push_back(slot); }
  void ReturnBlocks(const format::Extent& e) { alloc_.Release(e); }
  // The pending frees (Reclaim), all of them, for the commit that frees their records;
  // given back by an edit whose commit did not happen.
  std::vector<uint64_t> TakePendingFrees() { return std::exchange(pending_frees_, {}); }
  void ReturnPendingFrees(const std::vector<uint64_t>& inos) {
    pending_frees_.insert(pending_frees_.end(), inos.begin(), inos.end());
  }
  // The commit that carried pending frees of `blocks` blocks was applied: the allocator
  // counts them now.
  void PendingFreesApplied(uint64_t blocks) { pending_free_blocks_.fetch_sub(blocks); }

  // Lock-free: the counts published by PublishFree.
  FsStats Statfs() const;
  // Publishes the free counts Statfs reports (after every change of them).
  void PublishFree();
  // FreeSpaceGuard's verification ahead of allocation, one step of at most `max_blocks`:
  // the namespace lock is held to choose the blocks and to mark them, not while they are
  // read. Returns the blocks looked at; 0 when nothing is left, or on a read-only pool.
  uint64_t VerifyFreeSpaceAhead(uint64_t max_blocks);
  // Whether all free space outside the uninitialised range is known zero (trusted at
  // open, or verified since): commits then carry format::kJournalFlagFreeSpaceZero.
  // Lock-free; StateLog reads it at every commit.
  const std::atomic<bool>& free_space_zero() const { return free_space_zero_; }

  // GrowPool's commit (wal_directory.h): the data area becomes `new_blocks` blocks, in
  // one journaled commit of the state record, after the new blocks were zeroed or put
  // in the uninitialised range. InvalidArgument, with nothing written, when new_blocks
  // is not above the current count or does not fit in the region. The open pool keeps
  // allocating from its old size (its geometry is fixed at Open), so after a grow it
  // refuses every change (Pool::Writable): only reads and Close are left, and the next
  // Open uses the new size. Takes the namespace lock.
  absl::Status GrowDataArea(uint64_t new_blocks);
  bool grown() const { return grown_.load(); }

 private:
  friend class Pool;  // loads the free lists and marks at open

  // TakeInode and TakeSlot: the last number on `free`, else the next never-used one of a
  // table of `count` records (TakeFreshSlot); ENOSPC with `full` when there is none.
  absl::StatusOr<uint64_t> TakeNumber(std::vector<uint64_t>& free, uint64_t& high,
                                      uint64_t count, uint64_t table_offset,
                                      uint64_t record_size, std::string_view full);
  // The next never-used table slot (PoolState's inode_high / dirent_high), zeroed on media
  // first if an older pool left bytes there; the mark moves past it with the next commit.
  uint64_t TakeFreshSlot(uint64_t& high, uint64_t table_offset, uint64_t record_size);
  // FreeSpaceGuard::Prepare for blocks just allocated; DataLoss when they must not be
  // handed out (the caller gives them back).
  absl::Status PrepareBlocks(const format::Extent& e);
  // Hands the marks (inode_high_, dirent_high_, guard_'s range) to the StateLog for the
  // next commit to write.
  void NoteStateChanged();
  void PublishVerified() { free_space_zero_.store(guard_.unverified_blocks() == 0); }
  // Free blocks a file may take now: all of them for a segment, those outside the
  // reserve (ReservedBlocks, layout.h) for anything else.
  uint64_t UsableBlocks(bool segment) const {
    const uint64_t free = alloc_.free_blocks();
    return segment ? free : free - std::min(free, reserve_blocks_);
  }
  // ", the last N blocks (...) being reserved for WAL segments" when only the reserve
  // stood in the way of an allocation, for the ENOSPC message; else "".
  std::string ReserveNote() const;

  Pool& pool_;
  const uint64_t reserve_blocks_;  // ReservedBlocks(superblock)
  BlockAllocator alloc_;
  std::vector<uint64_t> free_inodes_;
  std::vector<uint64_t> free_slots_;
  uint64_t next_generation_ = 1;
  // PoolState's table marks and uninitialised range, as this process sees them (they
  // only move forward, before the commit that writes them).
  uint64_t inode_high_ = 0;
  uint64_t dirent_high_ = 0;
  FreeSpaceGuard guard_;
  // guard_.unverified_blocks() == 0, published after every change of guard_ so that a
  // commit reads it without the namespace lock. Only Init makes it false again (open).
  std::atomic<bool> free_space_zero_{false};
  // What Statfs reports, published by PublishFree so that it takes no lock: free blocks
  // and inodes, and the blocks of orphans being zeroed (free as soon as their reclaim
  // starts, since an allocation that needs them waits for it: AwaitReclaims).
  std::atomic<uint64_t> free_blocks_{0}, free_inodes_count_{0};
  std::atomic<uint64_t> zeroing_blocks_{0};
  // Orphans Reclaim has zeroed and whose records the next edit's commit frees, so that
  // an unlink costs one journal commit, not two (the unlink's, then the free's after the
  // kernel's FORGET; in msync mode each is an msync, on disk a device flush). Until then
  // they are orphans on media, which a crash leaves to the next Open's reclaim exactly
  // as a crash just before a commit of their own would, and `reclaiming` in memory
  // (nothing can reach them). Their blocks and inodes count as free in Statfs; the
  // allocator gets them at apply, and an allocation that fails meanwhile commits them
  // (AwaitReclaims). At most kMaxPendingFrees, so a commit carrying them stays well
  // inside a journal slot.
  static constexpr size_t kMaxPendingFrees = 16;
  std::vector<uint64_t> pending_frees_;
  std::atomic<uint64_t> pending_free_blocks_{0};
  std::atomic<uint32_t> reclaims_in_flight_{0};
  std::atomic<uint64_t> reclaims_done_{0};
  // GrowDataArea committed a new size: changes are refused until the pool is reopened.
  std::atomic<bool> grown_{false};
};

}  // namespace walfs::core

#endif  // WALFS_CORE_SPACE_H_
