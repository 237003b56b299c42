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
#include "core/edit.h"
#include "core/format.h"
#include "core/inode.h"
#include "core/journal.h"
#include "core/mutex.h"
#include "core/persistent_region.h"
#include "core/space.h"
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
  Space& space() { return space_; }
  const Space& space() const { return space_; }
  Counters counters() const;
  absl::Status Close();

 private:
  friend class Edit;
  friend class Space;

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
  // AcquireLease and AcquireReadLease: a new write lease (counted), the same handle
  // asking again (not counted, leased_size may grow), or a read lease (nothing kept).
  enum class LeaseUse { kWrite, kRenew, kRead };
  absl::StatusOr<Lease> GrantLease(InodeId ino, LeaseUse use) ABSL_LOCKS_EXCLUDED(ns_mu_);
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
  Mutex ns_mu_;
  mutable Mutex mu_ ABSL_ACQUIRED_AFTER(ns_mu_);
  std::vector<std::shared_ptr<Inode>> inodes_ ABSL_GUARDED_BY(mu_);  // index = ino
  absl::flat_hash_map<uint64_t, Dirent> dirents_ ABSL_GUARDED_BY(mu_);  // slot -> entry
  // Allocation, reclaim and free space (guarded by ns_mu_).
  Space space_;
  // The journal and the state record (its lock is the last in the lock order).
  StateLog log_;

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
