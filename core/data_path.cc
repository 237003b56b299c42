// DataPath: read, write, fsync, fallocate and release of files (data_path.h). Outside an
// Edit it changes only size, times and set-id bits (SetDataFields, CommitRecord).
//
// Durability of writes (POSTGRES_CONTRACT.md §3):
//  - kPmem: bytes are copied with non-temporal stores and drained before Write returns;
//    a size change is then committed through the journal, so the size never covers
//    bytes that are not durable.
//  - kMsync: bytes go to the shared mapping and the written range is remembered; Fsync
//    (from any handle) or a sync write msyncs it, then commits a changed size.
//  - Every call that promises durability (a persisting Write, Fsync, FsyncDir) fails
//    with the region's latched persist error once a persist has failed (health()).
// Writes take only their inode's lock (pool.h): never the namespace lock, so another
// file's msync or a metadata commit never delays them. A write past the allocated end
// drops it, grows the file in an Edit under ns_mu_, then retries.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/all_zero.h"
#include "core/data_path.h"
#include "core/edit.h"
#include "core/pool.h"
#include "core/status.h"

namespace walfs::core {
namespace {

using format::kBlockSize;

uint64_t BlocksFor(uint64_t bytes) { return (bytes + kBlockSize - 1) / kBlockSize; }

// relatime (the mount's default on Linux): a read moves atime only when it is not newer
// than mtime or ctime, or is a day old.
constexpr int64_t kRelatimeNs = int64_t{24} * 3600 * 1'000'000'000;
bool AtimeDue(const format::InodeRecord& r, int64_t now) {
  return r.atime_ns <= r.mtime_ns || r.atime_ns <= r.ctime_ns || now - r.atime_ns >= kRelatimeNs;
}

}  // namespace

absl::StatusOr<size_t> DataPath::Read(InodeId ino, uint64_t offset, absl::Span<char> out) {
  auto pinned = pool_.Pin(ino);
  if (!pinned.ok()) return pinned.status();
  Inode& in = **pinned;
  uint64_t n = 0;
  bool touch;
  {
    ReaderMutexLock il(&in.mu);
    const auto& r = in.rec;
    if (r.type == format::InodeType::kDirectory) return PosixError("read", EISDIR);
    if (r.type != format::InodeType::kRegular) return PosixError("read", EINVAL);
    if (in.gone) return PosixError(absl::StrCat("inode ", ino), ESTALE);
    if (offset < r.size) {
      n = std::min<uint64_t>(out.size(), r.size - offset);
      ForEachRun(pool_.sb_.data_offset, r, offset, n,
                 [&](uint64_t pool_off, uint64_t len, uint64_t pos) {
                   std::memcpy(out.data() + pos, pool_.region_->data() + pool_off, len);
                 });
    }
    touch = !pool_.read_only_ && AtimeDue(r, NowNs());
  }
  if (touch) {
    // relatime: at most once per change of the file (or per day), and committed with the
    // record's next commit (a write's, Release, Close), never by the read itself.
    MutexLock il(&in.mu);
    const int64_t now = NowNs();
    if (AtimeDue(in.rec, now)) {
      format::InodeRecord next = in.rec;
      next.atime_ns = now;
      SetDataFields(in, next);
    }
  }
  pool_.counters_.reads.fetch_add(1, std::memory_order_relaxed);
  pool_.counters_.read_bytes.fetch_add(n, std::memory_order_relaxed);
  return n;
}

absl::StatusOr<size_t> DataPath::Write(InodeId ino, uint64_t offset, absl::Span<const char> data,
                                       bool sync, bool clear_setid, bool* setid_cleared) {
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  const uint64_t len = data.size();
  if (len == 0) return 0;
  const uint64_t max_bytes = pool_.sb_.data_blocks * kBlockSize;
  if (offset > max_bytes || len > max_bytes - offset) {
    return PosixError(absl::StrCat("write at ", offset, " of ", len, " bytes"), EFBIG);
  }
  const uint64_t end = offset + len;
  const bool persist = pool_.mode_ == DurabilityMode::kPmem || sync;
  auto pinned = pool_.Pin(ino);
  if (!pinned.ok()) return pinned.status();
  Inode& in = **pinned;
  for (;;) {
    {
      // Only this inode's lock: another file's fsync or a metadata commit never holds
      // it (pool.h).
      MutexLock il(&in.mu);
      if (in.rec.type == format::InodeType::kDirectory) return PosixError("write", EISDIR);
      if (in.rec.type != format::InodeType::kRegular) return PosixError("write", EINVAL);
      if (in.gone) return PosixError(absl::StrCat("inode ", ino), ESTALE);
      if (AllocatedBlocks(in.rec) * kBlockSize >= end) {
        const uint64_t old_size = in.rec.size;
        ForEachRun(pool_.sb_.data_offset, in.rec, offset, len,
                   [&](uint64_t pool_off, uint64_t n, uint64_t pos) {
                     const char* src = data.data() + pos;
                     // Zero elision: allocated bytes past EOF already read as zero (format.h), so
                     // PostgreSQL's zero-fill of a new segment costs no stores.
                     if (pool_.zero_elision_ && offset + pos >= old_size && AllZero(src, n)) return;
                     pool_.region_->Store(pool_off, src, n);
                     if (persist) pool_.region_->Flush(pool_off, n);
                   });
        // The record after this write: committed first where the write promises
        // durability, and only then made the in-memory record.
        format::InodeRecord next = in.rec;
        if (end > old_size) next.size = end;
        const int64_t now = NowNs();
        next.mtime_ns = next.ctime_ns = now;
        // Set-user-ID always, set-group-ID only with group execute (without it the bit
        // means mandatory locking), as the kernel's file_remove_privs does.
        const uint32_t setid = next.mode & (S_ISUID | ((next.mode & S_IXGRP) ? S_ISGID : 0));
        const bool killed = clear_setid && setid != 0;
        if (killed) next.mode &= ~setid;
        if (setid_cleared != nullptr) *setid_cleared = killed;
        pool_.counters_.writes.fetch_add(1, std::memory_order_relaxed);
        pool_.counters_.write_bytes.fetch_add(len, std::memory_order_relaxed);
        if (!persist) {
          // msync mode: nothing is durable before an fsync, and the page cache (the
          // mapping) already holds the bytes, so memory runs ahead of the media.
          in.dirty_lo = std::min(in.dirty_lo, offset);
          in.dirty_hi = std::max(in.dirty_hi, end);
          if (killed) {
            absl::Status s = CommitRecord(ino, in, next);
            if (!s.ok()) return s;
            return len;
          }
          SetDataFields(in, next);
          return len;
        }
        pool_.region_->Drain();
        if (absl::Status h = pool_.region_->health(); !h.ok()) return h;
        if (sync) pool_.counters_.sync_writes.fetch_add(1, std::memory_order_relaxed);
        // The size must be durable now; the times within kTimesStalenessNs, so a stream
        // of writes inside the size (WAL) commits at most once per that interval.
        if (next.size != old_size || in.size_dirty || killed ||
            now - in.committed_ns >= kTimesStalenessNs) {
          absl::Status s = CommitRecord(ino, in, next);
          if (!s.ok()) return s;
          return len;
        }
        SetDataFields(in, next);
        return len;
      }
    }
    absl::Status grown;
    {
      MutexLock ns(&pool_.ns_mu_);
      if (pool_.Find(ino) != &in || in.reclaiming) {
        return PosixError(absl::StrCat("inode ", ino), ESTALE);
      }
      Edit e(pool_);
      format::InodeRecord& r = e.Rec(ino);
      grown = pool_.space_.Grow(r, end, e.allocated());
      if (grown.ok()) {
        absl::Status s = e.Commit();
        if (!s.ok()) return s;
      }
    }
    if (!grown.ok() && (ErrnoFromStatus(grown) != ENOSPC || !pool_.space_.AwaitReclaims()))
      return grown;
  }
}

void DataPath::SetDataFields(Inode& in, const format::InodeRecord& next) {
  if (next.size != in.rec.size) in.size_dirty = true;
  in.rec.size = next.size;
  in.rec.mtime_ns = next.mtime_ns;
  in.rec.ctime_ns = next.ctime_ns;
  in.rec.atime_ns = next.atime_ns;
  in.rec.mode = next.mode;
  in.mtime_dirty = true;
}

void DataPath::FlushDirty(Inode& in) {
  if (in.dirty_hi <= in.dirty_lo) return;
  ForEachRun(pool_.sb_.data_offset, in.rec, in.dirty_lo, in.dirty_hi - in.dirty_lo,
             [&](uint64_t pool_off, uint64_t n, uint64_t) { pool_.region_->Flush(pool_off, n); });
  pool_.region_->Drain();
  in.dirty_lo = UINT64_MAX;
  in.dirty_hi = 0;
}

absl::Status DataPath::CommitRecord(uint64_t ino, Inode& in, const format::InodeRecord& rec) {
  FlushDirty(in);
  Transaction txn;
  txn.PutInode(pool_.sb_, ino, rec);
  bool committed = false;
  absl::Status s = pool_.log_.Commit(txn, &committed);
  if (committed) {
    // Only the fields the data path owns: the rest may be read under mu_ alone.
    SetDataFields(in, rec);
    in.size_dirty = in.mtime_dirty = false;
    in.committed_ns = NowNs();
  }
  return s;
}

absl::Status DataPath::Fsync(InodeId ino, bool datasync) {
  pool_.counters_.fsyncs.fetch_add(1, std::memory_order_relaxed);
  if (pool_.read_only_) return absl::OkStatus();
  auto pinned = pool_.Pin(ino);
  if (!pinned.ok()) return pinned.status();
  Inode& in = **pinned;
  // The msync and the commit run under this inode's lock only (pool.h).
  MutexLock il(&in.mu);
  if (in.gone) return PosixError(absl::StrCat("inode ", ino), ESTALE);
  FlushDirty(in);
  // fdatasync need not make the times durable, but keeps them within the bound Write
  // keeps in pmem mode.
  const bool times =
      in.mtime_dirty && (!datasync || NowNs() - in.committed_ns >= kTimesStalenessNs);
  if (in.size_dirty || times) {
    const format::InodeRecord rec = in.rec;
    return CommitRecord(ino, in, rec);
  }
  return pool_.region_->health();
}

absl::Status DataPath::Release(InodeId ino) {
  if (pool_.read_only_) return absl::OkStatus();
  std::vector<uint64_t> reclaim;
  absl::Status status;
  {
    MutexLock ns(&pool_.ns_mu_);
    Inode* in = pool_.Find(ino);
    if (in == nullptr || in->reclaiming) return absl::OkStatus();
    Edit e(pool_);
    const format::InodeRecord& r = e.View(ino);  // locks the inode
    // msync mode, bytes not yet synced: any commit of the record would msync them, and
    // a close promises no durability (only fsync does). All is left to fsync; a later
    // release trims.
    if (in->dirty_hi > in->dirty_lo) return absl::OkStatus();
    const bool dirty = in->size_dirty || in->mtime_dirty;
    const bool trim = r.type == format::InodeType::kRegular &&
                      !(r.flags & (format::kInodeFlagSegment | format::kInodeFlagPreallocated));
    if (trim) pool_.space_.TrimBlocks(e, ino, 0);
    if (!e.reclaim().empty() || dirty) {
      e.Rec(ino);
      status = e.Commit();
      reclaim = e.reclaim();
    }
  }
  // On a failed commit the carriers were never applied: the edit gave their inode
  // numbers back, and the file keeps its blocks.
  pool_.space_.ReclaimAll(reclaim);
  return status;
}

absl::Status DataPath::FsyncDir(InodeId ino) {
  pool_.counters_.fsyncdirs.fetch_add(1, std::memory_order_relaxed);
  {
    ReaderMutexLock l(&pool_.mu_);
    auto in = pool_.Get(ino);
    if (!in.ok()) return in.status();
  }
  // Directory changes were committed (durably) when they were made, unless a persist
  // has failed since.
  return pool_.region_->health();
}

absl::Status DataPath::Fallocate(InodeId ino, uint64_t offset, uint64_t length, uint32_t flags) {
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  if (flags & ~kFallocateKeepSize) return PosixError("fallocate mode", EOPNOTSUPP);
  if (length == 0) return PosixError("fallocate of 0 bytes", EINVAL);
  const uint64_t max_bytes = pool_.sb_.data_blocks * kBlockSize;
  if (offset > max_bytes || length > max_bytes - offset) {
    return PosixError("fallocate beyond the pool", EFBIG);
  }
  for (;;) {
    std::vector<uint64_t> reclaim;
    absl::Status status;
    {
      MutexLock ns(&pool_.ns_mu_);
      auto inr = pool_.Get(ino);
      if (!inr.ok()) return inr.status();
      if ((*inr)->reclaiming) return PosixError(absl::StrCat("inode ", ino), ESTALE);
      Edit e(pool_);
      format::InodeRecord& r = e.Rec(ino);
      if (r.type == format::InodeType::kDirectory) return PosixError("fallocate", EISDIR);
      if (r.type != format::InodeType::kRegular) return PosixError("fallocate", ENODEV);
      const uint64_t had = AllocatedBlocks(r);
      status = pool_.space_.Grow(r, offset + length, e.allocated());
      if (status.ok()) {
        if (!(flags & kFallocateKeepSize) && offset + length > r.size) {
          r.size = offset + length;
          Touch(r, true);
        }
        if ((flags & kFallocateKeepSize) && offset + length > r.size) {
          r.flags |= format::kInodeFlagPreallocated;
        }
        // What was asked for, not Grow's allowance for further growth.
        if (!(r.flags & format::kInodeFlagSegment)) {
          pool_.space_.TrimBlocks(e, ino, std::max(had, BlocksFor(offset + length)));
        }
        status = e.Commit();
        if (!status.ok()) return status;
        reclaim = e.reclaim();
      }
    }
    if (!status.ok()) {
      // Blocks being zeroed count as free (Statfs): wait for them rather than fail.
      if (ErrnoFromStatus(status) == ENOSPC && pool_.space_.AwaitReclaims()) continue;
      return status;
    }
    pool_.space_.ReclaimAll(reclaim);
    return absl::OkStatus();
  }
}

}  // namespace walfs::core
