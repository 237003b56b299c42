// Pool: the in-memory state of an open walfs pool and every operation on it.
//
// WalDirectory (wal_directory.h) is the public face; this header is core-internal.
//
// Locking (the one lock order): mu_  ->  Inode::mu  ->  journal_mu_.
//  - mu_ exclusive: every namespace change, allocation, and reclaim.
//  - mu_ shared + Inode::mu: the data path (Read/Write/Fsync) of that inode. It may
//    change the inode's size/mtime and commit its record, but never allocates: a write
//    that needs blocks drops both locks, grows the file under mu_ exclusive, and retries.
//  - journal_mu_: serialises journal commits made by data-path threads.
// Inode::rec is therefore written under (mu_ exclusive) or (mu_ shared + Inode::mu), and
// read under either.
#ifndef WALFS_CORE_POOL_H_
#define WALFS_CORE_POOL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "core/allocator.h"
#include "core/format.h"
#include "core/journal.h"
#include "core/mutex.h"
#include "core/persistent_region.h"
#include "core/pool_state.h"
#include "core/wal_directory.h"

namespace walfs::core {

// CLOCK_REALTIME in nanoseconds, for inode times.
int64_t NowNs();

// Debian's Abseil has its own string_view type; containers keyed by std::string look
// names up through this.
inline absl::string_view AsKey(std::string_view s) { return {s.data(), s.size()}; }

// Blocks owned by an inode's extents.
inline uint64_t AllocatedBlocks(const format::InodeRecord& rec) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < rec.extent_count && i < format::kMaxExtents; ++i) {
    n += rec.extents[i].count;
  }
  return n;
}

class Pool {
 public:
  static absl::StatusOr<std::unique_ptr<Pool>> Open(std::unique_ptr<PersistentRegion> region,
                                                    const OpenOptions& options);
  ~Pool();

  DurabilityMode mode() const { return mode_; }
  const format::Superblock& superblock() const { return sb_; }
  const PersistentRegion& region() const { return *region_; }

  absl::StatusOr<Attr> Lookup(InodeId parent, std::string_view name);
  void Forget(InodeId ino, uint64_t nlookup);
  absl::StatusOr<Attr> GetAttr(InodeId ino);
  absl::StatusOr<Attr> Setattr(InodeId ino, const SetattrRequest& request);
  absl::StatusOr<Attr> Create(InodeId parent, std::string_view name, uint32_t mode,
                              const Caller& caller, bool exclusive);
  absl::StatusOr<Attr> CreateOnce(InodeId parent, std::string_view name, uint32_t mode,
                                  const Caller& caller, bool exclusive);
  absl::StatusOr<Attr> Mkdir(InodeId parent, std::string_view name, uint32_t mode,
                             const Caller& caller);
  absl::StatusOr<Attr> Symlink(InodeId parent, std::string_view name,
                               std::string_view target, const Caller& caller);
  absl::StatusOr<std::string> Readlink(InodeId ino);
  absl::StatusOr<Attr> Mknod(InodeId parent, std::string_view name, uint32_t mode,
                             uint64_t rdev, const Caller& caller);
  absl::StatusOr<Attr> Link(InodeId ino, InodeId new_parent, std::string_view new_name);
  absl::Status Unlink(InodeId parent, std::string_view name);
  absl::Status Rmdir(InodeId parent, std::string_view name);
  absl::Status Rename(InodeId parent, std::string_view name, InodeId new_parent,
                      std::string_view new_name, uint32_t flags);
  absl::StatusOr<size_t> Read(InodeId ino, uint64_t offset, absl::Span<char> out);
  absl::StatusOr<size_t> Write(InodeId ino, uint64_t offset, absl::Span<const char> data,
                               bool sync, bool clear_setid, bool* setid_cleared);
  absl::Status Fsync(InodeId ino, bool datasync);
  absl::Status FsyncDir(InodeId ino);
  absl::Status Fallocate(InodeId ino, uint64_t offset, uint64_t length, uint32_t flags);
  absl::Status Release(InodeId ino);
  absl::StatusOr<Lease> AcquireLease(InodeId ino, bool renew);
  absl::Status ReleaseLease(InodeId ino);
  absl::Status Readdir(InodeId ino, uint64_t cookie,
                       const std::function<bool(const DirEntry&)>& fn);
  FsStats Statfs();
  Counters counters() const;
  absl::Status Close();

 private:
  struct Inode {
    format::InodeRecord rec{};  // the image the next commit writes (see lock rules)
    std::atomic<uint64_t> lookups{0};
    bool reclaiming = false;  // guarded by mu_: a reclaim is zeroing its extents
    // Direct-access leases held (guarded by mu_) and the largest size any of them
    // covers: blocks below it never change owner while leases > 0 (AcquireLease).
    uint32_t leases = 0;
    uint64_t leased_size = 0;
    // Directories: name -> dirent slot, and the slots in order (readdir cookies).
    absl::flat_hash_map<std::string, uint64_t> names;
    std::set<uint64_t> slots;
    uint64_t parent_slot = UINT64_MAX;  // a directory's own dirent (root: none)

    Mutex mu;
    // Not yet durable (msync mode): file bytes [dirty_lo, dirty_hi) and record fields.
    uint64_t dirty_lo ABSL_GUARDED_BY(mu) = UINT64_MAX;
    uint64_t dirty_hi ABSL_GUARDED_BY(mu) = 0;
    bool size_dirty = false;   // rec.size changed since the last commit
    // rec's times changed by a write (mtime, ctime) or a read (atime) since the last commit
    bool mtime_dirty = false;
    // When the record was last committed (NowNs), to bound how stale the durable times
    // of a file written in place may be (kTimesStalenessNs). Guarded by mu.
    int64_t committed_ns = 0;
  };
  struct Dirent {
    uint64_t parent;
    uint64_t child;
    std::string name;
  };

  Pool(std::unique_ptr<PersistentRegion> region, const format::Superblock& sb,
       const OpenOptions& options);

  absl::Status Load(const Journal::ReplayResult& replay);
  absl::Status LoadInodes(const absl::flat_hash_map<uint64_t, const char*>& overlay);
  absl::Status LoadDirents(const absl::flat_hash_map<uint64_t, const char*>& overlay);
  absl::Status CheckTree();
  absl::Status Recover();

  // Lookups under mu_ (either mode).
  Inode* Find(InodeId ino) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Inode*> Get(InodeId ino) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Inode*> GetDir(InodeId ino) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  Attr MakeAttr(InodeId ino, const Inode& in) const;
  absl::Status Writable() const;

  // Metadata helpers, all under mu_ exclusive.
  absl::StatusOr<uint64_t> NewInode(format::InodeType type, uint32_t mode, const Caller& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> NewDirentSlot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The next never-used table slot (PoolState's inode_high / dirent_high), zeroed on media
  // first if an older pool left bytes there; the mark moves past it with the next commit.
  uint64_t TakeFreshSlot(uint64_t& high, uint64_t table_offset, uint64_t record_size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FreeSpaceGuard::Prepare for blocks just allocated; DataLoss when they must not be
  // handed out (the caller gives them back).
  absl::Status PrepareBlocks(const format::Extent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies the marks (inode_high_, dirent_high_, guard_'s range) into state_ for the
  // next commit to write.
  void NoteStateChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A dirent slot and an inode for a new name in directory `parent`: (slot, ino), owned
  // by `caller` (the group is the directory's if it is set-group-ID). DiscardEntry gives
  // both back if the operation fails before CommitEntry; CommitEntry names the inode in
  // one transaction (dirent, inode, parent times) and takes one lookup reference.
  absl::StatusOr<std::pair<uint64_t, uint64_t>> NewEntry(InodeId parent, format::InodeType type,
                                                         uint32_t mode, const Caller& caller)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DiscardEntry(uint64_t slot, uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Attr> CommitEntry(InodeId parent, std::string_view name, uint64_t slot,
                                   uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PutDirent(Transaction& txn, uint64_t slot, uint64_t parent, uint64_t child,
                 std::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddName(uint64_t slot, uint64_t parent, uint64_t child, std::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropName(uint64_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the entry in `slot` from memory and, in txn, from the pool; the slot is free.
  void FreeName(Transaction& txn, uint64_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `ino`'s current record to txn (flushing its dirty data first in msync mode, so
  // a size never becomes durable ahead of the bytes it covers).
  void PutInode(Transaction& txn, uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Commit(const Transaction& txn);
  // Drops one link of `ino` (its dirent already removed by the caller) in txn; appends
  // it to `reclaim` when it becomes unreferenced.
  void DropLink(Transaction& txn, uint64_t ino, std::vector<uint64_t>& reclaim)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(uint64_t ino, bool mtime) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsAncestor(uint64_t dir, uint64_t of) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Gives `in` blocks until its extents cover `bytes`; ENOSPC/EFBIG when impossible.
  // Files other than segments may get up to twice what they need (TrimBlocks gives the
  // rest back).
  absl::Status Grow(Inode& in, uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leaves `ino` owning only its first `keep` blocks (never fewer than its leases cover):
  // the rest move in txn to a carrier orphan appended to `reclaim`, which the caller
  // reclaims after committing txn with `ino`'s record.
  void TrimBlocks(uint64_t ino, uint64_t keep, Transaction& txn,
                  std::vector<uint64_t>& reclaim) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets a regular file's size in txn (growing: allocates; shrinking: moves whole blocks
  // past the end to a carrier orphan appended to `reclaim`). The caller commits, then
  // calls ZeroPendingTail to zero the bytes past the new EOF.
  absl::Status Truncate(uint64_t ino, uint64_t size, Transaction& txn,
                        std::vector<uint64_t>& reclaim) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ZeroPendingTail() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Zeroes an orphan's extents, then frees it. Takes mu_ itself; call without it.
  void Reclaim(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks being zeroed by a Reclaim in another thread are not free yet. An allocation
  // that fails with ENOSPC while any is in flight calls this (without mu_) and retries
  // when it returns true: it waits, at most kReclaimWait, until none is in flight, and
  // says whether any finished meanwhile. So ENOSPC means the space is not there, not
  // that it is still being zeroed (an unlink or a trim just before).
  bool AwaitReclaims() ABSL_LOCKS_EXCLUDED(mu_);
  void ReclaimAll(const std::vector<uint64_t>& inos) ABSL_LOCKS_EXCLUDED(mu_);

  // Data-path helpers.
  // Calls fn(pool_offset, length, position_in_range) for the pool bytes holding file
  // bytes [off, off+len), which must be allocated.
  template <typename Fn>
  void ForEachRun(const format::InodeRecord& rec, uint64_t off, uint64_t len, Fn fn) const;
  void FlushDirty(Inode& in) ABSL_EXCLUSIVE_LOCKS_REQUIRED(in.mu);
  void ZeroRange(const format::InodeRecord& rec, uint64_t off, uint64_t len);
  // Commits `in`'s record (after flushing its dirty data); under in.mu.
  absl::Status CommitRecord(uint64_t ino, Inode& in);
  // CommitRecord, then `len` (a Write's result).
  absl::StatusOr<size_t> CommitWritten(uint64_t ino, Inode& in, size_t len);

  std::unique_ptr<PersistentRegion> region_;
  const format::Superblock sb_;
  const DurabilityMode mode_;
  const bool read_only_;
  const bool zero_elision_;

  mutable Mutex mu_;
  std::vector<std::unique_ptr<Inode>> inodes_ ABSL_GUARDED_BY(mu_);  // index = ino
  std::vector<uint64_t> free_inodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Dirent> dirents_ ABSL_GUARDED_BY(mu_);  // slot -> entry
  std::vector<uint64_t> free_slots_ ABSL_GUARDED_BY(mu_);
  BlockAllocator alloc_ ABSL_GUARDED_BY(mu_);
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  // PoolState's table marks and uninitialised range, as this process sees them (they
  // only move forward, before the commit that writes them).
  uint64_t inode_high_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dirent_high_ ABSL_GUARDED_BY(mu_) = 0;
  FreeSpaceGuard guard_ ABSL_GUARDED_BY(mu_);
  struct ZeroTail {
    uint64_t ino = 0, from = 0, to = 0;  // file bytes [from, to) of ino
  };
  ZeroTail pending_zero_ ABSL_GUARDED_BY(mu_);

  Mutex journal_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::unique_ptr<Journal> journal_ ABSL_GUARDED_BY(journal_mu_);
  // The PoolState image the next commit adds when state_dirty_ (Commit).
  format::PoolState state_ ABSL_GUARDED_BY(journal_mu_){};
  bool state_dirty_ ABSL_GUARDED_BY(journal_mu_) = false;

  std::atomic<uint32_t> reclaims_in_flight_{0};
  std::atomic<uint64_t> reclaims_done_{0};

  struct AtomicCounters {
    std::atomic<uint64_t> writes{0}, write_bytes{0}, reads{0}, read_bytes{0};
    std::atomic<uint64_t> fsyncs{0}, fsyncdirs{0}, sync_writes{0};
    std::atomic<uint64_t> journal_commits{0}, journal_replays{0};
    std::atomic<uint64_t> orphans_reclaimed{0}, zeroed_blocks{0};
    std::atomic<uint64_t> leases_granted{0}, leases_released{0};
  } counters_;
};

template <typename Fn>
void Pool::ForEachRun(const format::InodeRecord& rec, uint64_t off, uint64_t len,
                      Fn fn) const {
  uint64_t file_pos = 0;  // file offset of the current extent's first byte
  uint64_t done = 0;
  for (uint32_t i = 0; i < rec.extent_count && done < len; ++i) {
    const uint64_t ext_bytes = rec.extents[i].count * format::kBlockSize;
    const uint64_t cur = off + done;
    if (cur < file_pos + ext_bytes) {
      const uint64_t in_ext = cur - file_pos;
      const uint64_t n = std::min(ext_bytes - in_ext, len - done);
      fn(sb_.data_offset + rec.extents[i].block * format::kBlockSize + in_ext, n, done);
      done += n;
    }
    file_pos += ext_bytes;
  }
}

}  // namespace walfs::core

#endif  // WALFS_CORE_POOL_H_
