// Pool: the coordinator's table lookups, counters and close (open: pool_open.cc).
// Close commits what files still hold dirty through Edits; nothing here writes a table.
#include "core/pool.h"

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "core/edit.h"
#include "core/status.h"

namespace walfs::core {

using format::kBlockSize;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

Pool::Pool(std::unique_ptr<PersistentRegion> region, const format::Superblock& sb,
           const OpenOptions& options)
    : region_(std::move(region)),
      sb_(sb),
      mode_(region_->is_pmem() ? DurabilityMode::kPmem : DurabilityMode::kMsync),
      read_only_(options.read_only),
      zero_elision_(options.zero_elision),
      space_(*this),
      log_(space_.free_space_zero()),
      names_(*this),
      data_(*this),
      leases_(*this) {}

Pool::~Pool() = default;

Inode* Pool::Find(InodeId ino) const {
  if (ino == 0 || ino >= inodes_.size()) return nullptr;
  return inodes_[ino].get();
}

absl::StatusOr<Inode*> Pool::Get(InodeId ino) const {
  Inode* in = Find(ino);
  if (in == nullptr) return PosixError(absl::StrCat("inode ", ino), ESTALE);
  return in;
}

absl::StatusOr<Inode*> Pool::GetDir(InodeId ino) const {
  auto in = Get(ino);
  if (!in.ok()) return in;
  if ((*in)->rec.type != format::InodeType::kDirectory) {
    return PosixError(absl::StrCat("inode ", ino), ENOTDIR);
  }
  if ((*in)->rec.state != format::InodeState::kLive) {
    return PosixError(absl::StrCat("directory ", ino, " was removed"), ENOENT);
  }
  return in;
}

absl::StatusOr<std::shared_ptr<Inode>> Pool::Pin(InodeId ino) {
  ReaderMutexLock l(&mu_);
  if (ino == 0 || ino >= inodes_.size() || inodes_[ino] == nullptr) {
    return PosixError(absl::StrCat("inode ", ino), ESTALE);
  }
  return inodes_[ino];
}

absl::Status Pool::Writable() const {
  if (read_only_) return PosixError("pool opened read-only", EROFS);
  if (space_.grown()) {
    return PosixError("the pool was grown: close it and open it again to use it", EROFS);
  }
  return absl::OkStatus();
}

Attr Pool::MakeAttr(InodeId ino, const format::InodeRecord& r) const {
  Attr a;
  a.ino = ino;
  a.generation = r.generation;
  a.mode = r.mode;
  a.nlink = r.nlink;
  a.uid = r.uid;
  a.gid = r.gid;
  a.size = r.type == format::InodeType::kDirectory ? kBlockSize : r.size;
  a.blocks = AllocatedBlocks(r) * (kBlockSize / 512);
  a.atime_ns = r.atime_ns;
  a.mtime_ns = r.mtime_ns;
  a.ctime_ns = r.ctime_ns;
  a.rdev = r.rdev;
  return a;
}

Counters Pool::counters() const {
  Counters c;
  const auto& a = counters_;
  c.writes = a.writes.load();
  c.write_bytes = a.write_bytes.load();
  c.reads = a.reads.load();
  c.read_bytes = a.read_bytes.load();
  c.fsyncs = a.fsyncs.load();
  c.fsyncdirs = a.fsyncdirs.load();
  c.sync_writes = a.sync_writes.load();
  c.journal_commits = log_.commits();
  c.journal_replays = a.journal_replays.load();
  c.orphans_reclaimed = a.orphans_reclaimed.load();
  c.zeroed_blocks = a.zeroed_blocks.load();
  c.leases_granted = a.leases_granted.load();
  c.leases_released = a.leases_released.load();
  c.leases_active = c.leases_granted - std::min(c.leases_released, c.leases_granted);
  return c;
}

absl::Status Pool::Close() {
  if (read_only_) return absl::OkStatus();
  std::vector<uint64_t> orphans;
  {
    MutexLock ns(&ns_mu_);
    std::vector<uint64_t> dirty;
    // Under ns_mu_ nothing but this thread changes inodes_, and an inode's lock is never
    // taken under mu_ (pool.h).
    for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
      Inode* in = inodes_[ino].get();
      if (in == nullptr) continue;
      // The kernel's references end with the mount. Leases do not: a client may still
      // map a leased orphan, which Reclaim leaves to the next Open (the daemon refuses
      // to open a pool while a client holds it, fs/pool_lock.h).
      in->lookups.store(0);
      if (in->reclaiming) continue;  // zeroed, its record freed below (Space's pending frees)
      if (in->rec.state == format::InodeState::kOrphan) orphans.push_back(ino);
      MutexLock il(&in->mu);
      if (in->size_dirty || in->mtime_dirty || in->dirty_hi > in->dirty_lo) {
        dirty.push_back(ino);
      }
    }
    for (uint64_t ino : dirty) {
      Edit e(*this);
      e.Rec(ino);
      absl::Status s = e.Commit();
      if (!s.ok()) return s;
    }
  }
  space_.ReclaimAll(orphans);
  if (absl::Status s = space_.CommitPendingFrees(); !s.ok()) return s;
  // Free space became known zero after the newest commit (verified since): one more
  // commit says so, so that the next open trusts it instead of reading it again.
  if (absl::Status s = log_.CommitFreeSpaceFlag(); !s.ok()) return s;
  // msync mode: the home records of the last transactions may be stored but only
  // durable through the journal (journal.h); a clean close persists them at home too.
  if (absl::Status s = log_.Sync(); !s.ok()) return s;
  return region_->health();
}

}  // namespace walfs::core
