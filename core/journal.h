// Journal: makes a set of inode/dirent record writes atomic across power failure.
//
// Commit protocol:
//   1. the record images and a header whose CRC covers them are stored in the journal
//      area and persisted: this is the commit point;
//   2. each image is stored at its home offset.
// The journal is not cleared afterwards: it always holds the newest image of every record
// it names (all record writes go through it), so Replay at open re-applies the last
// transaction harmlessly. A torn step 1 fails the CRC and is discarded: the transaction
// never committed and its home records were never touched.
//
// When the home images are persisted depends on the region:
//  - pmem: at once, with one drain for all of them (a flush is free, a drain is a fence).
//  - msync (each persist is an msync, an fdatasync of the pool file on a disk): not at
//    commit. Until a persist of their span makes them durable, they are carried: every
//    later transaction repeats them in its journal image, so the one transaction a
//    replay applies always holds every home image that may not be on the media. A
//    commit therefore costs one msync, not two; the carried images are persisted (one
//    msync for their span) when they would make the journal image larger than
//    kCarryLimit, and at Sync. A home image written back early by the kernel is no
//    harm: it is the newest image, the one the journal holds.
// The home stores of one transaction are never made before its commit point, since the
// media must not see them while the journal does not (the kernel may write a page back
// at any moment).
//
// Not thread-safe: Pool serialises commits.
#ifndef WALFS_CORE_JOURNAL_H_
#define WALFS_CORE_JOURNAL_H_

#include <cstdint>
#include <map>
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
      : region_(region), sb_(sb), sequence_(next_sequence), carry_(!region.is_pmem()) {}

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

  // Persists the home images still carried (msync mode), so the home records alone
  // describe the pool. For a clean close; a no-op in pmem mode.
  absl::Status Sync();

  uint64_t commits() const { return commits_; }

  // Journal image size above which the carried home images are persisted first.
  static constexpr size_t kCarryLimit = 16 << 10;

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
  // with a valid CRC names something other than a whole inode or dirent record.
  static absl::StatusOr<ReplayResult> Replay(PersistentRegion& region,
                                             const format::Superblock& sb, bool apply);

 private:
  PersistentRegion& region_;
  const format::Superblock& sb_;
  uint64_t sequence_;
  uint64_t commits_ = 0;
  // Builds the journal image of `txn` plus the carried images it does not replace.
  void Build(const Transaction& txn, bool with_carried);
  // Persists the carried home images and forgets them.
  void PersistCarried();

  std::string buffer_;  // reused across commits to avoid a per-commit allocation
  std::string previous_;  // the last committed journal image (restored on failure)
  const bool carry_;
  // msync mode: home offset -> image stored but not yet persisted.
  std::map<uint64_t, std::string> carried_;
};

}  // namespace walfs::core

#endif  // WALFS_CORE_JOURNAL_H_
