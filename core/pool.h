// Pool: the in-memory state of an open walfs pool and every operation on it.
//
// WalDirectory (wal_directory.h) is the public face; this header is core-internal.
//
// Locking. The one lock order: ns_mu_ -> Inode::mu (any number, held by one thread at a
// time: only an Edit under ns_mu_ holds more than one) -> mu_ -> StateLog's lock (state_log.h).
//  - ns_mu_ serialises every change of the namespace, of allocation and of reclaim, and
//    is held across their journal commits (it plays the part of a journal handle). The
//    data path and lookups never take it, except a write that must allocate.
//  - mu_ guards the in-memory maps (inodes_, dirents_, names) and is only ever held for
//    memory work: shared to find an inode or read names, exclusive while an Edit applies
//    a committed change. No msync, drain or journal persist happens under it, and no
//    thread holding it waits for an Inode::mu (readers pin the inode, drop mu_, then
//    lock the inode), so nothing waits behind I/O to find an inode.
//  - Inode::mu: the data path of that inode (Read/Write/Fsync, its msyncs and its record
//    commits). An Edit holds the mu of every inode whose record it rewrites from the
//    moment it copies the record until the change is applied, so a data-path commit can
//    never interleave with (and undo) a metadata commit of the same record.
//  - StateLog's lock: serialises journal commits.
// Inode::rec is written by an Edit's apply under Inode::mu + mu_ exclusive, and by the
// data path (size, times, set-id bits) under Inode::mu alone. Fields only an Edit changes
// (type, state, nlink, extents, flags) may be read under mu_ or ns_mu_; the rest need
// Inode::mu.
//
// Apply after commit (LevelDB's VersionEdit order): an operation validates under ns_mu_,
// builds the new record images from copies in an Edit, commits them, and only then
// changes the in-memory state. A failed commit changes nothing in memory, and the
// journal commit leaves the media unchanged when its commit point fails (journal.h), so
// memory and media agree after a latched persist error.
#ifndef WALFS_CORE_POOL_H_
#define WALFS_CORE_POOL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "core/allocator.h"
#include "core/format.h"
#include "core/inode.h"
#include "core/journal.h"
#include "core/mutex.h"
#include "core/persistent_region.h"
#include "core/pool_state.h"
#include "core/state_log.h"
#include "core/validate.h"
#include "core/wal_directory.h"

namespace walfs::core {

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
  absl::StatusOr<Lease> AcquireReadLease(InodeId ino);
  absl::Status ReleaseLease(InodeId ino);
  absl::Status Readdir(InodeId ino, uint64_t cookie,
                       const std::function<bool(const DirEntry&)>& fn);
  FsStats Statfs();
  // FreeSpaceGuard's verification ahead of allocation, one step of at most `max_blocks`:
  // ns_mu_ is held to choose the blocks and to mark them, not while they are read.
  // Returns the blocks looked at; 0 when nothing is left, or on a read-only pool.
  uint64_t VerifyFreeSpaceAhead(uint64_t max_blocks);
  // Whether all free space outside the uninitialised range is known zero (trusted at
  // open, or verified since): commits then carry format::kJournalFlagFreeSpaceZero.
  bool free_space_known_zero() const { return free_space_zero_.load(); }
  Counters counters() const;
  absl::Status Close();

  // GrowPool's commit (wal_directory.h): the data area becomes `new_blocks` blocks, in
  // one journaled commit of the state record, after the new blocks were zeroed or put
  // in the uninitialised range. InvalidArgument, with nothing written, when new_blocks
  // is not above the current count or does not fit in the region. The open pool keeps
  // allocating from its old size (its geometry is fixed at Open), so after a grow it
  // refuses every change (Writable): only reads and Close are left, and the next Open
  // uses the new size.
  absl::Status GrowDataArea(uint64_t new_blocks);

 private:
  // One metadata change, built under ns_mu_ from copies, committed, then applied (the
  // lock rules above). Everything taken from the free lists or the allocator while
  // building is given back if the edit is dropped without a successful commit.
  class Edit {
   public:
    explicit Edit(Pool& pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool.ns_mu_);
    ~Edit();
    Edit(const Edit&) = delete;
    Edit& operator=(const Edit&) = delete;

    // The record `ino` will have once the edit is applied, to change in place. The first
    // call copies the current record and locks the inode's mu until the edit ends (its
    // dirty bytes are synced at commit, before the record). New inodes are not locked:
    // nobody else can see them yet.
    format::InodeRecord& Rec(uint64_t ino);
    // The record as this edit sees it (its copy, or the live record), without rewriting
    // it; locks the inode like Rec, so what it shows cannot change before the edit ends.
    const format::InodeRecord& View(uint64_t ino);
    // Locks these live inodes now, in ascending order: an edit that touches several
    // calls it first, so every edit takes inode locks in one order (data-path threads
    // hold only one, and edits run one at a time under ns_mu_, so this is for lock-order
    // checkers more than for safety).
    void LockInOrder(std::vector<uint64_t> inos);
    // A free inode number for a new inode of this type, owned by `c`; ENOSPC without one.
    absl::StatusOr<uint64_t> NewInode(format::InodeType type, uint32_t mode, const Caller& c);
    absl::StatusOr<uint64_t> NewSlot();
    // `slot` names `child` in `parent` after the edit (a new entry or a changed one).
    void SetDirent(uint64_t slot, uint64_t parent, uint64_t child, std::string_view name);
    // `slot` is free after the edit.
    void RemoveDirent(uint64_t slot);
    // `ino`'s record is freed and its extents return to the allocator (zeroed already).
    void FreeInode(uint64_t ino);
    // Blocks Grow took for this edit: returned to the allocator if it is dropped.
    std::vector<format::Extent>& allocated() { return allocated_; }
    // Inodes to reclaim once the edit is applied (unreferenced orphans, trim carriers).
    std::vector<uint64_t>& reclaim() { return reclaim_; }

    // Syncs the dirty bytes of the files it rewrites (msync mode), commits every image
    // in one journal transaction, together with the pool's pending frees (Reclaim), and,
    // if the commit point was reached, applies the edit to memory. Returns the commit's error (EIO once a persist failed), in which case
    // memory is unchanged unless the transaction is durable all the same (journal.h).
    absl::Status Commit();

   private:
    void Lock(uint64_t ino);
    void Apply();
    void Abort();

    Pool& pool_;
    struct Copy {
      format::InodeRecord rec;
      Inode* in;                      // the live inode (null for a new one)
      std::shared_ptr<Inode> fresh;   // a new inode, installed at apply
    };
    std::map<uint64_t, Copy> recs_;     // a std::map: Rec's references stay valid
    std::vector<Inode*> locked_;        // inodes whose mu this edit holds
    std::vector<std::pair<uint64_t, std::optional<Dirent>>> dirents_;  // in order
    std::vector<uint64_t> freed_;       // inodes freed
    std::vector<uint64_t> new_inodes_;  // taken from free_inodes_
    std::vector<uint64_t> new_slots_;   // taken from free_slots_
    std::vector<format::Extent> allocated_;
    std::vector<format::Extent> released_;  // extents of freed inodes, free at apply
    std::vector<uint64_t> reclaim_;
    // The pool's pending frees this commit carries (Commit takes them all; Abort puts
    // them back) and their blocks.
    std::vector<uint64_t> carried_frees_;
    uint64_t carried_free_blocks_ = 0;
    bool done_ = false;
  };

  Pool(std::unique_ptr<PersistentRegion> region, const format::Superblock& sb,
       const OpenOptions& options);

  // `state`: the state record as Open read and checked it (through the journal).
  absl::Status Load(const Journal::ReplayResult& replay, const format::PoolState& state);
  absl::Status LoadInodes(const absl::flat_hash_map<uint64_t, const char*>& overlay);
  absl::Status LoadDirents(const absl::flat_hash_map<uint64_t, const char*>& overlay);
  absl::Status CheckTree();
  absl::Status Recover();

  // Lookups under mu_ (either mode) or ns_mu_ (the only writer of what they read).
  Inode* Find(InodeId ino) const;
  absl::StatusOr<Inode*> Get(InodeId ino) const;
  absl::StatusOr<Inode*> GetDir(InodeId ino) const;
  // The inode, kept alive after mu_ is dropped (a reclaim may free it meanwhile: it then
  // has `gone` set); ESTALE if there is none.
  absl::StatusOr<std::shared_ptr<Inode>> Pin(InodeId ino) ABSL_LOCKS_EXCLUDED(mu_);
  Attr MakeAttr(InodeId ino, const format::InodeRecord& r) const;
  absl::Status Writable() const;

  // Enters a loaded directory entry in memory (Load).
  void AddName(uint64_t slot, uint64_t parent, uint64_t child, std::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes the free counts Statfs reports (after every change of them, under ns_mu_).
  void PublishFree() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);

  // Metadata helpers, all under ns_mu_ with an Edit.
  // A dirent slot and an inode for a new name in directory `parent`: (slot, ino), owned
  // by `caller` (the group is the directory's if it is set-group-ID). CommitEntry names
  // the inode in the edit (dirent, inode, parent times), commits, and takes one lookup
  // reference.
  absl::StatusOr<std::pair<uint64_t, uint64_t>> NewEntry(Edit& e, InodeId parent,
                                                         format::InodeType type,
                                                         uint32_t mode, const Caller& caller)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  // NewEntry's inode alone (no dirent slot).
  absl::StatusOr<uint64_t> NewEntryInode(Edit& e, InodeId parent, format::InodeType type,
                                         uint32_t mode, const Caller& caller)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  absl::StatusOr<Attr> CommitEntry(Edit& e, InodeId parent, std::string_view name,
                                   uint64_t slot, uint64_t ino)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  // Drops one link of `ino` (its dirent already removed by the caller) in the edit;
  // queues it for reclaim when it becomes unreferenced.
  void DropLink(Edit& e, uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  static void Touch(format::InodeRecord& r, bool mtime);
  bool IsAncestor(uint64_t dir, uint64_t of) const ABSL_SHARED_LOCKS_REQUIRED(ns_mu_);
  // The next never-used table slot (PoolState's inode_high / dirent_high), zeroed on media
  // first if an older pool left bytes there; the mark moves past it with the next commit.
  uint64_t TakeFreshSlot(uint64_t& high, uint64_t table_offset, uint64_t record_size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  // FreeSpaceGuard::Prepare for blocks just allocated; DataLoss when they must not be
  // handed out (the caller gives them back).
  absl::Status PrepareBlocks(const format::Extent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  // Copies the marks (inode_high_, dirent_high_, guard_'s range) into state_ for the
  // next commit to write.
  void NoteStateChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  // Free blocks a file may take now: all of them for a segment, those outside the
  // reserve (ReservedBlocks, wal_directory.h) for anything else.
  uint64_t UsableBlocks(bool segment) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_) {
    const uint64_t free = alloc_.free_blocks();
    return segment ? free : free - std::min(free, reserve_blocks_);
  }
  // ", the last N blocks (...) being reserved for WAL segments" when only the reserve
  // stood in the way of an allocation, for the ENOSPC message; else "".
  std::string ReserveNote() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  // Gives `r` blocks until its extents cover `bytes`; ENOSPC/EFBIG when impossible (then
  // `r` and the allocator are as before). New blocks are appended to `taken`. Files
  // other than segments may get up to twice what they need (TrimBlocks gives the rest
  // back).
  absl::Status Grow(format::InodeRecord& r, uint64_t bytes, std::vector<format::Extent>& taken)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  // Leaves `ino` owning only its first `keep` blocks (never fewer than its leases cover):
  // the rest move in the edit to a carrier orphan queued for reclaim.
  void TrimBlocks(Edit& e, uint64_t ino, uint64_t keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  // Sets a regular file's size in the edit (growing: allocates; shrinking: moves whole
  // blocks past the end to a carrier orphan). Returns the file bytes [from, to) to zero
  // once the edit is applied (ZeroTail), while the edit still holds the inode.
  struct ZeroTail {
    uint64_t from = 0, to = 0;
  };
  absl::StatusOr<ZeroTail> Truncate(Edit& e, uint64_t ino, uint64_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_);
  void ZeroFileRange(const format::InodeRecord& rec, ZeroTail t);
  // Zeroes an orphan's extents, then frees it: its record is freed by the next edit's
  // commit (pending_frees_), or by one of its own when kMaxPendingFrees are waiting.
  // Takes ns_mu_ itself; call without it.
  void Reclaim(uint64_t ino) ABSL_LOCKS_EXCLUDED(ns_mu_, mu_);

  // AcquireLease and AcquireReadLease: a new write lease (counted), the same handle
  // asking again (not counted, leased_size may grow), or a read lease (nothing kept).
  enum class LeaseUse { kWrite, kRenew, kRead };
  absl::StatusOr<Lease> GrantLease(InodeId ino, LeaseUse use) ABSL_LOCKS_EXCLUDED(ns_mu_);
  // Commits the pending frees, if any, in an edit of their own; *committed says whether
  // there were any and they are free now.
  absl::Status CommitPendingFrees(bool* committed = nullptr) ABSL_LOCKS_EXCLUDED(ns_mu_, mu_);
  // Blocks being zeroed by a Reclaim in another thread are not free yet. An allocation
  // that fails with ENOSPC while any is in flight calls this (without locks) and retries
  // when it returns true: it waits, at most kReclaimWait, until none is in flight, and
  // says whether any finished meanwhile. So ENOSPC means the space is not there, not
  // that it is still being zeroed (an unlink or a trim just before). Pending frees are
  // committed first (they are free for Statfs, but not yet for the allocator).
  bool AwaitReclaims() ABSL_LOCKS_EXCLUDED(ns_mu_, mu_);
  void ReclaimAll(const std::vector<uint64_t>& inos) ABSL_LOCKS_EXCLUDED(ns_mu_, mu_);

  // Data-path helpers.
  void FlushDirty(Inode& in) ABSL_EXCLUSIVE_LOCKS_REQUIRED(in.mu);
  // Copies the fields the data path changes (size, times, set-id bits) from `next` into
  // the in-memory record and marks them not yet committed; under in.mu.
  void SetDataFields(Inode& in, const format::InodeRecord& next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(in.mu);
  // Commits `rec` as `in`'s record (after syncing its dirty data) and, if that worked,
  // makes it the in-memory record; under in.mu.
  absl::Status CommitRecord(uint64_t ino, Inode& in, const format::InodeRecord& rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(in.mu);

  std::unique_ptr<PersistentRegion> region_;
  const format::Superblock sb_;
  const DurabilityMode mode_;
  const bool read_only_;
  const bool zero_elision_;
  const uint64_t reserve_blocks_;  // ReservedBlocks(sb_)
  // GrowDataArea committed a new size: changes are refused until the pool is reopened.
  std::atomic<bool> grown_{false};

  Mutex ns_mu_;
  mutable Mutex mu_ ABSL_ACQUIRED_AFTER(ns_mu_);
  std::vector<std::shared_ptr<Inode>> inodes_ ABSL_GUARDED_BY(mu_);  // index = ino
  absl::flat_hash_map<uint64_t, Dirent> dirents_ ABSL_GUARDED_BY(mu_);  // slot -> entry
  // Allocation state: only metadata changes (under ns_mu_) read or change it.
  std::vector<uint64_t> free_inodes_ ABSL_GUARDED_BY(ns_mu_);
  std::vector<uint64_t> free_slots_ ABSL_GUARDED_BY(ns_mu_);
  BlockAllocator alloc_ ABSL_GUARDED_BY(ns_mu_);
  uint64_t next_generation_ ABSL_GUARDED_BY(ns_mu_) = 1;
  // PoolState's table marks and uninitialised range, as this process sees them (they
  // only move forward, before the commit that writes them).
  uint64_t inode_high_ ABSL_GUARDED_BY(ns_mu_) = 0;
  uint64_t dirent_high_ ABSL_GUARDED_BY(ns_mu_) = 0;
  FreeSpaceGuard guard_ ABSL_GUARDED_BY(ns_mu_);
  // guard_.unverified_blocks() == 0, published after every change of guard_ so that a
  // commit reads it without ns_mu_. Only Init makes it false again (open).
  std::atomic<bool> free_space_zero_{false};
  void PublishVerified() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ns_mu_) {
    free_space_zero_.store(guard_.unverified_blocks() == 0);
  }
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
  std::vector<uint64_t> pending_frees_ ABSL_GUARDED_BY(ns_mu_);
  std::atomic<uint64_t> pending_free_blocks_{0};

  // The journal and the state record (its lock is the last in the lock order).
  StateLog log_;

  std::atomic<uint32_t> reclaims_in_flight_{0};
  std::atomic<uint64_t> reclaims_done_{0};

  struct AtomicCounters {
    std::atomic<uint64_t> writes{0}, write_bytes{0}, reads{0}, read_bytes{0};
    std::atomic<uint64_t> fsyncs{0}, fsyncdirs{0}, sync_writes{0};
    std::atomic<uint64_t> journal_replays{0};
    std::atomic<uint64_t> orphans_reclaimed{0}, zeroed_blocks{0};
    std::atomic<uint64_t> leases_granted{0}, leases_released{0};
  } counters_;
};

}  // namespace walfs::core

#endif  // WALFS_CORE_POOL_H_
