// Pool: the engine's coordinator. Owns the region, the locks, the in-memory inode and
// directory-entry tables, the counters and the pieces that work on them (Namespace,
// DataPath, LeaseTable, Space, StateLog); opens, recovers and closes the pool.
// May not change a table but through an Edit (edit.h). docs/design/engine.md draws it.
//
// Locking. The one lock order: ns_mu_ -> Inode::mu (any number, held by one thread at a
// time: only an Edit under ns_mu_ holds more than one) -> mu_ -> StateLog's lock.
//  - ns_mu_ (the namespace lock) serialises every change of the namespace, of allocation
//    and of reclaim (Space), and is held across their journal commits (it plays the part
//    of a journal handle). The data path and lookups never take it, except a write that
//    must allocate.
//  - mu_ (the table lock) guards the in-memory tables (inodes_, dirents_, names) and is
//    only ever held for memory work: shared to find an inode or read names, exclusive
//    while an Edit applies a committed change. No msync, drain or journal persist
//    happens under it, and no thread holding it waits for an Inode::mu (readers pin the
//    inode, drop mu_, then lock the inode), so nothing waits behind I/O to find an inode.
//  - Inode::mu: the data path of that inode (Read/Write/Fsync, its msyncs and its record
//    commits). An Edit holds the mu of every inode whose record it rewrites from the
//    moment it copies the record until the change is applied, so a data-path commit can
//    never interleave with (and undo) a metadata commit of the same record.
//  - StateLog's lock (state_log.h): serialises journal commits.
// Inode::rec is written by an Edit's apply under Inode::mu + mu_ exclusive, and by the
// data path (DataPath::SetDataFields: size, times, set-id bits) under Inode::mu alone
// (inode.h says who may read what).
//
// Apply after commit (LevelDB's VersionEdit order): an operation validates under ns_mu_,
// builds the new record images from copies in an Edit, commits them, and only then
// changes the in-memory state. A failed commit changes nothing in memory, and the
// journal commit leaves the media unchanged when its commit point fails (journal.h), so
// memory and media agree after a latched persist error.
#ifndef WALFS_CORE_POOL_H_
#define WALFS_CORE_POOL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data_path.h"
#include "core/format.h"
#include "core/inode.h"
#include "core/journal.h"
#include "core/lease_table.h"
#include "core/mutex.h"
#include "core/namespace.h"
#include "core/persistent_region.h"
#include "core/space.h"
#include "core/state_log.h"
#include "core/types.h"

namespace walfs::core {

// Core-internal: WalDirectory (wal_directory.h) is the handle callers hold; it hands out
// the pieces (names(), data(), leases()) that carry out their calls.
class Pool {
 public:
  static absl::StatusOr<std::unique_ptr<Pool>> Open(std::unique_ptr<PersistentRegion> region,
                                                    const OpenOptions& options);
  ~Pool();

  DurabilityMode mode() const { return mode_; }
  const format::Superblock& superblock() const { return sb_; }
  const PersistentRegion& region() const { return *region_; }

  Namespace& names() { return names_; }
  DataPath& data() { return data_; }
  LeaseTable& leases() { return leases_; }
  Space& space() { return space_; }
  const Space& space() const { return space_; }

  Counters counters() const;
  absl::Status Close();

 private:
  // The pieces reach the tables, the locks and each other through the coordinator.
  friend class DataPath;
  friend class Edit;
  friend class LeaseTable;
  friend class Namespace;
  friend class Space;

  Pool(std::unique_ptr<PersistentRegion> region, const format::Superblock& sb,
       const OpenOptions& options);

  // Open's steps (pool_open.cc). `state`: the state record as Open read and checked it
  // (through the journal).
  absl::Status Load(const Journal::ReplayResult& replay, const format::PoolState& state);
  absl::Status LoadInodes(const absl::flat_hash_map<uint64_t, const char*>& overlay);
  absl::Status LoadDirents(const absl::flat_hash_map<uint64_t, const char*>& overlay);
  absl::Status CheckTree();
  absl::Status Recover();
  // Enters a loaded directory entry in memory (Load).
  void AddName(uint64_t slot, uint64_t parent, uint64_t child, std::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Lookups under mu_ (either mode) or ns_mu_ (the only writer of what they read).
  Inode* Find(InodeId ino) const;
  absl::StatusOr<Inode*> Get(InodeId ino) const;
  absl::StatusOr<Inode*> GetDir(InodeId ino) const;
  // The inode, kept alive after mu_ is dropped (a reclaim may free it meanwhile: it then
  // has `gone` set); ESTALE if there is none.
  absl::StatusOr<std::shared_ptr<Inode>> Pin(InodeId ino) ABSL_LOCKS_EXCLUDED(mu_);
  Attr MakeAttr(InodeId ino, const format::InodeRecord& r) const;
  // EROFS when no change may be made (read-only, or grown since open).
  absl::Status Writable() const;

  std::unique_ptr<PersistentRegion> region_;
  const format::Superblock sb_;
  const DurabilityMode mode_;
  const bool read_only_;
  const bool zero_elision_;
  Mutex ns_mu_;
  mutable Mutex mu_ ABSL_ACQUIRED_AFTER(ns_mu_);
  std::vector<std::shared_ptr<Inode>> inodes_ ABSL_GUARDED_BY(mu_);  // index = ino
  absl::flat_hash_map<uint64_t, Dirent> dirents_ ABSL_GUARDED_BY(mu_);  // slot -> entry

  Space space_;  // allocation, reclaim and free space (under ns_mu_)
  StateLog log_;  // the journal and the state record
  Namespace names_;
  DataPath data_;
  LeaseTable leases_;

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
