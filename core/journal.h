// Journal: makes a set of inode/dirent/state record writes atomic across power failure.
//
// Commit protocol (two persistence points per transaction):
//   1. the record images and a header whose CRC covers them are stored in the journal
//      area and persisted: this is the commit point;
//   2. each image is stored at its home offset, and all of them are persisted together
//      (one flush of the range they span and one drain: in msync mode one msync, where
//      each is an fdatasync of the pool file on a disk).
// Two persistence points are the minimum with one journal slot: a home record must not
// reach the media before the transaction naming it is committed, and in msync mode the
// kernel may write a page back at any moment, so the home stores wait for step 1.
// The journal is not cleared afterwards: it always holds the newest image of every record
// it names (all record writes go through it), so Replay at open re-applies the last
// transaction harmlessly. A torn step 1 fails the CRC and is discarded: the transaction
// never committed and its home records were never touched.
//
// Not thread-safe: Pool serialises commits.
#ifndef WALFS_CORE_JOURNAL_H_
#define WALFS_CORE_JOURNAL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/format.h"
#include "core/persistent_region.h"

namespace walfs::core {

// Record images to write together. Put* compute the record's crc.
class Transaction {
 public:
  void PutInode(const format::Superblock& sb, uint64_t ino, format::InodeRecord rec);
  void PutDirent(const format::Superblock& sb, uint64_t slot, format::DirentRecord rec);
  void FreeInode(const format::Superblock& sb, uint64_t ino);
  void PutState(format::PoolState state);
  void FreeDirent(const format::Superblock& sb, uint64_t slot);
  bool empty() const { return entries_.empty(); }

 private:
  friend class Journal;
  struct Entry {
    uint64_t offset;
    std::string bytes;
  };
  void Put(uint64_t offset, const void* record, size_t size);
  std::vector<Entry> entries_;  // a later Put of the same offset replaces the earlier one
};

class Journal {
 public:
  Journal(PersistentRegion& region, const format::Superblock& sb, uint64_t next_sequence)
      : region_(region), sb_(sb), sequence_(next_sequence) {}

  // Writes `txn` atomically and durably (see the protocol above). Fails with the
  // region's persist error (health()) if any persist so far has failed; `committed`
  // then says whether the commit point was passed:
  //  - false: the region was unhealthy before the commit, or the journal persist failed.
  //    Nothing reached the home records, and a journal written but not known durable is
  //    invalidated (its header zeroed), so the media keep the state before the
  //    transaction (the previous transaction is already home: the region was healthy
  //    when it completed). The caller leaves its in-memory state as it was.
  //  - true: the journal persist succeeded, so the transaction is durable (a replay
  //    completes the home records whatever their own persist did): the caller applies
  //    it in memory and still reports the error.
  absl::Status Commit(const Transaction& txn, bool* committed);

  uint64_t commits() const { return commits_; }

  struct ReplayResult {
    bool replayed = false;     // a committed transaction was found and applied
    bool torn = false;         // a header with our magic but a bad CRC: discarded
    uint64_t sequence = 0;     // of the replayed transaction
    uint32_t records = 0;
    // (offset, record image) of the committed transaction, applied or not.
    std::vector<std::pair<uint64_t, std::string>> images;
  };
  // Applies the committed transaction in the journal, if any (skipped when `apply` is
  // false: read-only opens and fsck report without writing). DataLoss if a transaction
  // with a valid CRC names something other than a whole inode, dirent or state record.
  static absl::StatusOr<ReplayResult> Replay(PersistentRegion& region,
                                             const format::Superblock& sb, bool apply);

 private:
  PersistentRegion& region_;
  const format::Superblock& sb_;
  uint64_t sequence_;
  uint64_t commits_ = 0;
  std::string buffer_;  // reused across commits to avoid a per-commit allocation
};

}  // namespace walfs::core

#endif  // WALFS_CORE_JOURNAL_H_
