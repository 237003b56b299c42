// Pool: the data path (read, write, fsync) and block allocation for files.
//
// Durability of writes (POSTGRES_CONTRACT.md §3):
//  - kPmem: bytes are copied with non-temporal stores and drained before Write returns;
//    a size change is then committed through the journal, so the size never covers
//    bytes that are not durable.
//  - kMsync: bytes go to the shared mapping and the written range is remembered; Fsync
//    (from any handle) or a sync write msyncs it, then commits a changed size.
//  - Every call that promises durability (a persisting Write, Fsync, FsyncDir) fails
//    with the region's latched persist error once a persist has failed (health()).
// Writes never allocate while holding the data-path locks: a write past the allocated
// end grows the file under mu_ exclusive first, then retries.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/pool.h"
#include "core/status.h"

namespace walfs::core {
namespace {

using format::kBlockSize;

bool AllZero(const char* p, size_t n) {
  return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

uint64_t BlocksFor(uint64_t bytes) { return (bytes + kBlockSize - 1) / kBlockSize; }

// relatime (the mount's default on Linux): a read moves atime only when it is not newer
// than mtime or ctime, or is a day old.
constexpr int64_t kRelatimeNs = int64_t{24} * 3600 * 1'000'000'000;
bool AtimeDue(const format::InodeRecord& r, int64_t now) {
  return r.atime_ns <= r.mtime_ns || r.atime_ns <= r.ctime_ns || now - r.atime_ns >= kRelatimeNs;
}

}  // namespace

absl::Status Pool::Grow(Inode& in, uint64_t bytes) {
  auto& r = in.rec;
  const uint64_t have = AllocatedBlocks(r);
  const uint64_t need = BlocksFor(bytes);
  if (need <= have) return absl::OkStatus();
  if (need > sb_.data_blocks) {
    return PosixError(absl::StrCat("file of ", bytes, " bytes exceeds the pool"), EFBIG);
  }
  const format::InodeRecord before = r;
  const bool segment = (r.flags & format::kInodeFlagSegment) != 0;
  const uint64_t seg_blocks = sb_.segment_size / kBlockSize;
  uint64_t missing = need - have;
  // Segments grow by whole segments; other files by at least what they already have
  // (doubling), so a file written in small appends needs only a few extents. What a
  // file holds past its end is given back at release and truncate (TrimBlocks).
  absl::Status error;
  if (r.extent_count > 0) {
    const uint64_t ahead = segment ? missing : std::max(missing, have);
    format::Extent& last = r.extents[r.extent_count - 1];
    const uint64_t end = last.block + last.count;
    const uint64_t took = alloc_.ExtendInPlace(last, ahead);
    missing -= std::min(missing, took);
    // New blocks are checked (or zeroed) before they are handed out (pool_state.h).
    if (took > 0) error = PrepareBlocks({end, took});
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
    const uint64_t want = segment ? std::max(missing, seg_blocks) : std::max(missing, total);
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
    missing -= std::min(missing, e->count);
    error = PrepareBlocks(*e);
  }
  if (error.ok()) return error;
  // Undo: give back in-place growth and new extents.
  for (uint32_t i = 0; i < r.extent_count; ++i) {
    if (i < before.extent_count) {
      const uint64_t extra = r.extents[i].count - before.extents[i].count;
      if (extra > 0) alloc_.Release({before.extents[i].block + before.extents[i].count, extra});
    } else {
      alloc_.Release(r.extents[i]);
    }
  }
  r = before;
  return error;
}

void Pool::TrimBlocks(uint64_t ino, uint64_t keep, Transaction& txn,
                      std::vector<uint64_t>& reclaim) {
  Inode& in = *inodes_[ino];
  auto& r = in.rec;
  // Leased blocks never change owner (lease.cc).
  if (in.leases > 0) keep = std::max(keep, BlocksFor(in.leased_size));
  if (AllocatedBlocks(r) <= keep) return;
  {
    MutexLock l(&in.mu);
    FlushDirty(in);  // before the extents change under the dirty range
  }
  format::InodeRecord kept = r;
  format::InodeRecord freed{};
  kept.extent_count = 0;
  uint64_t pos = 0;
  for (uint32_t i = 0; i < r.extent_count; ++i) {
    format::Extent e = r.extents[i];
    if (pos + e.count <= keep) {
      kept.extents[kept.extent_count++] = e;
    } else if (pos >= keep) {
      freed.extents[freed.extent_count++] = e;
    } else {
      const uint64_t head = keep - pos;
      kept.extents[kept.extent_count++] = {e.block, head};
      freed.extents[freed.extent_count++] = {e.block + head, e.count - head};
    }
    pos += e.count;
  }
  // The blocks go to a carrier orphan in the same transaction, zeroed and freed after
  // the commit. Without a free inode for the carrier, they stay with the file (zeroed)
  // and are freed when it is.
  if (free_inodes_.empty() && inode_high_ == sb_.inode_count) return;
  for (uint32_t i = kept.extent_count; i < format::kMaxExtents; ++i) kept.extents[i] = {};
  auto carrier = NewInode(format::InodeType::kRegular, 0, Caller{});
  Inode& c = *inodes_[*carrier];
  c.rec.state = format::InodeState::kOrphan;
  c.rec.nlink = 0;
  c.rec.extent_count = freed.extent_count;
  std::memcpy(c.rec.extents, freed.extents, sizeof(freed.extents));
  txn.PutInode(sb_, *carrier, c.rec);
  reclaim.push_back(*carrier);
  r = kept;
}

absl::Status Pool::Truncate(uint64_t ino, uint64_t size, Transaction& txn,
                            std::vector<uint64_t>& reclaim) {
  Inode& in = *inodes_[ino];
  auto& r = in.rec;
  {
    MutexLock l(&in.mu);
    FlushDirty(in);  // before the extents change under the dirty range
  }
  // A segment keeps its whole extent unless cut below it; any other file is left
  // holding exactly its size (fallocate's preallocation past EOF included, as on ext4).
  const bool segment = (r.flags & format::kInodeFlagSegment) != 0;
  r.flags &= ~format::kInodeFlagPreallocated;
  if (size > r.size) {
    absl::Status s = Grow(in, size);
    if (!s.ok()) return s;
    r.size = size;  // the grown range is zero (format.h invariant)
    if (!segment) TrimBlocks(ino, BlocksFor(size), txn, reclaim);
    return absl::OkStatus();
  }
  if (size == r.size) {
    if (!segment) TrimBlocks(ino, BlocksFor(size), txn, reclaim);
    return absl::OkStatus();
  }
  const uint64_t old_size = r.size;
  TrimBlocks(ino, BlocksFor(size), txn, reclaim);
  r.size = size;
  // Bytes past the new EOF must read as zero if the file grows again. Zeroed after the
  // commit (the caller's), so a crash leaves the old size with old bytes or the new size
  // (recovery re-zeroes past EOF).
  pending_zero_ = {ino, size, std::min(old_size, AllocatedBlocks(r) * kBlockSize)};
  return absl::OkStatus();
}

void Pool::ZeroPendingTail() {
  const auto [ino, from, to] = pending_zero_;
  pending_zero_ = {};
  if (ino == 0 || to <= from) return;
  Inode* in = Find(ino);
  if (in == nullptr) return;
  ForEachRun(in->rec, from, to - from, [&](uint64_t pool_off, uint64_t n, uint64_t) {
    region_->Fill(pool_off, 0, n);
    region_->Flush(pool_off, n);
  });
  region_->Drain();
}

absl::StatusOr<size_t> Pool::Read(InodeId ino, uint64_t offset, absl::Span<char> out) {
  ReaderMutexLock l(&mu_);
  auto in = Get(ino);
  if (!in.ok()) return in.status();
  const auto& r = (*in)->rec;
  if (r.type == format::InodeType::kDirectory) return PosixError("read", EISDIR);
  if (r.type != format::InodeType::kRegular) return PosixError("read", EINVAL);
  uint64_t n = 0;
  bool touch;
  {
    ReaderMutexLock il(&(*in)->mu);
    if (offset < r.size) {
      n = std::min<uint64_t>(out.size(), r.size - offset);
      ForEachRun(r, offset, n, [&](uint64_t pool_off, uint64_t len, uint64_t pos) {
        std::memcpy(out.data() + pos, region_->data() + pool_off, len);
      });
    }
    touch = !read_only_ && AtimeDue(r, NowNs());
  }
  if (touch) {
    // relatime: at most once per change of the file (or per day), and committed with the
    // record's next commit (a write's, Release, Close), never by the read itself.
    MutexLock il(&(*in)->mu);
    const int64_t now = NowNs();
    if (AtimeDue((*in)->rec, now)) {
      (*in)->rec.atime_ns = now;
      (*in)->mtime_dirty = true;
    }
  }
  counters_.reads.fetch_add(1, std::memory_order_relaxed);
  counters_.read_bytes.fetch_add(n, std::memory_order_relaxed);
  return n;
}

absl::StatusOr<size_t> Pool::Write(InodeId ino, uint64_t offset, absl::Span<const char> data,
                                   bool sync, bool clear_setid, bool* setid_cleared) {
  if (absl::Status s = Writable(); !s.ok()) return s;
  const uint64_t len = data.size();
  if (len == 0) return 0;
  const uint64_t max_bytes = sb_.data_blocks * kBlockSize;
  if (offset > max_bytes || len > max_bytes - offset) {
    return PosixError(absl::StrCat("write at ", offset, " of ", len, " bytes"), EFBIG);
  }
  const uint64_t end = offset + len;
  const bool persist = mode_ == DurabilityMode::kPmem || sync;
  for (;;) {
    {
      ReaderMutexLock l(&mu_);
      auto inr = Get(ino);
      if (!inr.ok()) return inr.status();
      Inode& in = **inr;
      if (in.rec.type == format::InodeType::kDirectory) return PosixError("write", EISDIR);
      if (in.rec.type != format::InodeType::kRegular) return PosixError("write", EINVAL);
      MutexLock il(&in.mu);
      if (AllocatedBlocks(in.rec) * kBlockSize >= end) {
        const uint64_t old_size = in.rec.size;
        ForEachRun(in.rec, offset, len, [&](uint64_t pool_off, uint64_t n, uint64_t pos) {
          const char* src = data.data() + pos;
          // Zero elision: allocated bytes past EOF already read as zero (format.h), so
          // PostgreSQL's zero-fill of a new segment costs no stores.
          if (zero_elision_ && offset + pos >= old_size && AllZero(src, n)) return;
          region_->Store(pool_off, src, n);
          if (persist) region_->Flush(pool_off, n);
        });
        if (end > old_size) {
          in.rec.size = end;
          in.size_dirty = true;
        }
        const int64_t now = NowNs();
        in.rec.mtime_ns = in.rec.ctime_ns = now;
        in.mtime_dirty = true;
        // Set-user-ID always, set-group-ID only with group execute (without it the bit
        // means mandatory locking), as the kernel's file_remove_privs does.
        const uint32_t setid = in.rec.mode & (S_ISUID | ((in.rec.mode & S_IXGRP) ? S_ISGID : 0));
        const bool killed = clear_setid && setid != 0;
        if (killed) in.rec.mode &= ~setid;
        if (setid_cleared != nullptr) *setid_cleared = killed;
        counters_.writes.fetch_add(1, std::memory_order_relaxed);
        counters_.write_bytes.fetch_add(len, std::memory_order_relaxed);
        if (!persist) {
          in.dirty_lo = std::min(in.dirty_lo, offset);
          in.dirty_hi = std::max(in.dirty_hi, end);
          if (killed) return CommitWritten(ino, in, len);
          return len;
        }
        region_->Drain();
        if (absl::Status h = region_->health(); !h.ok()) return h;
        if (sync) counters_.sync_writes.fetch_add(1, std::memory_order_relaxed);
        // The size must be durable now; the times within kTimesStalenessNs, so a stream
        // of writes inside the size (WAL) commits at most once per that interval.
        if (in.size_dirty || killed || now - in.committed_ns >= kTimesStalenessNs) {
          return CommitWritten(ino, in, len);
        }
        return len;
      }
    }
    absl::Status grown;
    {
      MutexLock l(&mu_);
      auto inr = Get(ino);
      if (!inr.ok()) return inr.status();
      grown = Grow(**inr, end);
      if (grown.ok()) {
        Transaction txn;
        PutInode(txn, ino);
        absl::Status s = Commit(txn);
        if (!s.ok()) return s;
      }
    }
    if (!grown.ok() && (ErrnoFromStatus(grown) != ENOSPC || !AwaitReclaims())) return grown;
  }
}

void Pool::FlushDirty(Inode& in) {
  if (in.dirty_hi <= in.dirty_lo) return;
  ForEachRun(in.rec, in.dirty_lo, in.dirty_hi - in.dirty_lo,
             [&](uint64_t pool_off, uint64_t n, uint64_t) { region_->Flush(pool_off, n); });
  region_->Drain();
  in.dirty_lo = UINT64_MAX;
  in.dirty_hi = 0;
}

absl::Status Pool::CommitRecord(uint64_t ino, Inode& in) {
  FlushDirty(in);
  Transaction txn;
  txn.PutInode(sb_, ino, in.rec);
  in.size_dirty = in.mtime_dirty = false;
  in.committed_ns = NowNs();
  return Commit(txn);
}

absl::StatusOr<size_t> Pool::CommitWritten(uint64_t ino, Inode& in, size_t len) {
  absl::Status s = CommitRecord(ino, in);
  if (!s.ok()) return s;
  return len;
}

absl::Status Pool::Fsync(InodeId ino, bool datasync) {
  counters_.fsyncs.fetch_add(1, std::memory_order_relaxed);
  if (read_only_) return absl::OkStatus();
  ReaderMutexLock l(&mu_);
  auto inr = Get(ino);
  if (!inr.ok()) return inr.status();
  Inode& in = **inr;
  MutexLock il(&in.mu);
  FlushDirty(in);
  // fdatasync need not make the times durable, but keeps them within the bound Write
  // keeps in pmem mode.
  const bool times =
      in.mtime_dirty && (!datasync || NowNs() - in.committed_ns >= kTimesStalenessNs);
  if (in.size_dirty || times) return CommitRecord(ino, in);
  return region_->health();
}

absl::Status Pool::Release(InodeId ino) {
  if (read_only_) return absl::OkStatus();
  std::vector<uint64_t> reclaim;
  absl::Status status;
  {
    MutexLock l(&mu_);
    Inode* in = Find(ino);
    if (in == nullptr) return absl::OkStatus();
    auto& r = in->rec;
    bool dirty;
    {
      MutexLock il(&in->mu);
      // msync mode, bytes not yet synced: any commit of the record would msync them, and
      // a close promises no durability (only fsync does). All is left to fsync; a later
      // release trims.
      if (in->dirty_hi > in->dirty_lo) return absl::OkStatus();
      dirty = in->size_dirty || in->mtime_dirty;
    }
    Transaction txn;
    const bool trim = r.type == format::InodeType::kRegular &&
                      !(r.flags & (format::kInodeFlagSegment | format::kInodeFlagPreallocated));
    if (trim) TrimBlocks(ino, BlocksFor(r.size), txn, reclaim);
    if (!reclaim.empty() || dirty) {
      PutInode(txn, ino);
      status = Commit(txn);
    }
  }
  // On a failed commit the carriers stay orphans in memory and on media: the next open
  // reclaims them.
  if (status.ok()) ReclaimAll(reclaim);
  return status;
}

absl::Status Pool::FsyncDir(InodeId ino) {
  counters_.fsyncdirs.fetch_add(1, std::memory_order_relaxed);
  ReaderMutexLock l(&mu_);
  auto in = Get(ino);
  if (!in.ok()) return in.status();
  // Directory changes were committed (durably) when they were made, unless a persist
  // has failed since.
  return region_->health();
}

absl::Status Pool::Fallocate(InodeId ino, uint64_t offset, uint64_t length, uint32_t flags) {
  if (absl::Status s = Writable(); !s.ok()) return s;
  if (flags & ~kFallocateKeepSize) return PosixError("fallocate mode", EOPNOTSUPP);
  if (length == 0) return PosixError("fallocate of 0 bytes", EINVAL);
  const uint64_t max_bytes = sb_.data_blocks * kBlockSize;
  if (offset > max_bytes || length > max_bytes - offset) {
    return PosixError("fallocate beyond the pool", EFBIG);
  }
  std::vector<uint64_t> reclaim;
  absl::Status status;
  {
    MutexLock l(&mu_);
    auto inr = Get(ino);
    if (!inr.ok()) return inr.status();
    Inode& in = **inr;
    if (in.rec.type == format::InodeType::kDirectory) return PosixError("fallocate", EISDIR);
    if (in.rec.type != format::InodeType::kRegular) return PosixError("fallocate", ENODEV);
    const uint64_t had = AllocatedBlocks(in.rec);
    absl::Status s = Grow(in, offset + length);
    if (!s.ok()) return s;
    if (!(flags & kFallocateKeepSize) && offset + length > in.rec.size) {
      in.rec.size = offset + length;
      Touch(ino, true);
    }
    if ((flags & kFallocateKeepSize) && offset + length > in.rec.size) {
      in.rec.flags |= format::kInodeFlagPreallocated;
    }
    Transaction txn;
    // What was asked for, not Grow's allowance for further growth.
    if (!(in.rec.flags & format::kInodeFlagSegment)) {
      TrimBlocks(ino, std::max({had, BlocksFor(offset + length), BlocksFor(in.rec.size)}), txn,
                 reclaim);
    }
    PutInode(txn, ino);
    status = Commit(txn);
  }
  if (status.ok()) ReclaimAll(reclaim);
  return status;
}

}  // namespace walfs::core
