// Journal: makes a set of inode/dirent/state record writes atomic across power failure.
//
// The journal area is two slots (format.h); transaction n goes to slot n % 2, so the
// slot being written never holds the newest committed transaction.
// Commit protocol:
//   1. the record images and a header whose CRC covers them are stored in the slot and
//      persisted: this is the commit point;
//   2. each image is stored at its home offset.
// When the home images are persisted depends on the region:
//  - pmem: at once, with one flush of their span and one drain.
//  - msync (each persist is an msync, an fdatasync of the pool file on a disk): not at
//    commit. Until one persist of their span makes them durable they are carried: every
//    later transaction repeats them in its journal image, so the newest committed
//    transaction always holds every home image that may not be on the media. A commit
//    costs one msync, not two. When the carried images make a journal image larger than
//    kCarryLimit, that commit's one msync covers their span too (the slot, which still
//    repeats them, and their home pages together: if the slot is torn, the other slot
//    holds them), and they are forgotten once it returns; at Sync one msync of their
//    span persists them.
//    A home image the kernel writes back early does no harm: it is the newest image,
//    the one the journal holds.
// The home stores of a transaction are never made before its commit point: the media
// must not see them while the journal does not (the kernel may write a page back at
// any moment).
// Recovery (Replay) applies the valid slot with the higher sequence. A torn write of
// slot n % 2 fails its CRC and falls back to transaction n - 1 in the other slot, which
// holds every image carried until then; transaction n never committed and its home
// records were never touched. Replaying a transaction again is harmless: it holds the
// newest image of every record it names.
//
// ParseJournalSlot / ReadJournal are the one parser of the journal: Replay (pool open)
// and fsck both use them, and fsck's repairs commit through a Journal.
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
  void PutState(format::PoolState state);
  void FreeDirent(const format::Superblock& sb, uint64_t slot);
  // A whole record image as it is, its crc already set (or all zero): fsck's repairs.
  // The caller has checked that `offset` is a record's (ParseJournalSlot rejects any
  // other target at replay).
  void PutImage(uint64_t offset, const void* record, size_t size) { Put(offset, record, size); }
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

// One journal slot as read from the media.
struct JournalSlot {
  enum class State {
    kEmpty,    // header all zero: never written, or taken back after a failed persist
    kTorn,     // no magic, a payload past the slot or a CRC mismatch: never committed
    kInvalid,  // the CRC matches but the content is not what Commit writes: damage
    kValid,    // a committed transaction
  };
  State state = State::kEmpty;
  uint64_t sequence = 0;  // from the header (meaningful for kInvalid and kValid)
  uint32_t flags = 0;     // the header's (format::kJournalFlag*), kInvalid and kValid
  std::string error;      // kTorn, kInvalid: what is wrong
  // kValid: (offset, record image) of every entry, in journal order.
  std::vector<std::pair<uint64_t, std::string>> images;
};

// Pool offset of journal slot `slot` (0 or 1).
uint64_t JournalSlotOffset(const format::Superblock& sb, uint64_t slot);

// Parses and validates slot `slot` of the journal in `pool` (the region's bytes; `sb`
// valid for it, so the journal lies inside it): magic, payload bounds, CRC, the
// sequence's slot, and that every entry is a whole inode/dirent/state record image whose
// own crc is valid (or which is all zero, for inode and dirent slots), no record named
// twice, nothing after the last entry.
JournalSlot ParseJournalSlot(const char* pool, const format::Superblock& sb, uint64_t slot);

// Both slots and which one recovery applies.
struct JournalContents {
  JournalSlot slots[format::kJournalSlots];
  // The slot with the highest sequence among those whose CRC matches (kValid or
  // kInvalid), -1 when there is none. Recovery applies it when it is kValid and refuses
  // the pool when it is kInvalid; an older slot does not matter (its transaction is
  // superseded by the newest, which repeats every image not yet home).
  int newest = -1;
  // The newest committed transaction, if it is valid; else nullptr.
  const JournalSlot* committed() const {
    return newest >= 0 && slots[newest].state == JournalSlot::State::kValid ? &slots[newest]
                                                                             : nullptr;
  }
};
JournalContents ReadJournal(const char* pool, const format::Superblock& sb);

class Journal {
 public:
  // `carry_home_images`: the msync-mode protocol above (defaults to the region's kind);
  // false persists the home images at every commit (pmem; fsck's repairs, each of which
  // must be complete on its own).
  Journal(PersistentRegion& region, const format::Superblock& sb, uint64_t next_sequence)
      : Journal(region, sb, next_sequence, !region.is_pmem()) {}
  Journal(PersistentRegion& region, const format::Superblock& sb, uint64_t next_sequence,
          bool carry_home_images)
      : region_(region), sb_(sb), sequence_(next_sequence), carry_(carry_home_images) {}

  // Writes `txn` atomically and durably (see the protocol above). Fails with the
  // region's persist error (health()) if any persist so far has failed; `committed`
  // then says whether the commit point was passed:
  //  - false: the region was unhealthy before the commit, or a persist before the commit
  //    point failed (the journal's, or that of carried images). Nothing of this
  //    transaction reached the home records, and a slot written but not known durable
  //    is invalidated (its header zeroed), so the media keep the state before the
  //    transaction: the other slot holds the previous one, with every image not yet
  //    home. The caller leaves its in-memory state as it was.
  //  - true: the journal persist succeeded, so the transaction is durable (a replay
  //    completes the home records whatever their own persist did): the caller applies
  //    it in memory and still reports the error.
  // `flags` (format::kJournalFlag*) go into the transaction's header; the caller
  // vouches for what they promise. An empty `txn` writes nothing, flags included.
  absl::Status Commit(const Transaction& txn, bool* committed, uint32_t flags = 0);

  // Persists the home images still carried, so the home records alone describe the
  // pool (for a clean close). Fails with the region's persist error, as Commit does.
  // Nothing to do in pmem mode.
  absl::Status Sync();

  uint64_t commits() const { return commits_; }
  // Home images stored but not yet persisted (msync mode); for tests.
  size_t carried() const { return carried_.size(); }
  // Journal image size above which the commit's msync persists the carried home images
  // too (a quarter of a slot: the journal write of a commit stays a few pages).
  static constexpr size_t kCarryLimit = format::kJournalSlotSize / 4;

  struct ReplayResult {
    bool replayed = false;     // a committed transaction was found and applied
    bool torn = false;         // a slot held a write that never committed: ignored
    uint64_t sequence = 0;     // of the replayed transaction; 0 if none
    uint32_t records = 0;
    uint32_t flags = 0;        // the replayed transaction's header flags; 0 if none
    // (offset, record image) of the committed transaction, applied or not.
    std::vector<std::pair<uint64_t, std::string>> images;
  };
  // Applies the newest committed transaction in the journal (ReadJournal), if any, and
  // persists it (skipped when `apply` is false: read-only opens report without
  // writing). DataLoss if the newest slot whose CRC matches is not a valid transaction.
  static absl::StatusOr<ReplayResult> Replay(PersistentRegion& region,
                                             const format::Superblock& sb, bool apply);

 private:
  // Builds the journal image of `txn` in buffer_, plus (`with_carried`) the carried
  // images it does not replace.
  void Build(const Transaction& txn, bool with_carried, uint32_t flags);
  // Persists the carried home images (one flush of their span) and forgets them (Sync;
  // Commit when a transaction with them would not fit in a slot).
  void PersistCarried();

  PersistentRegion& region_;
  const format::Superblock& sb_;
  uint64_t sequence_;
  const bool carry_;
  uint64_t commits_ = 0;
  std::string buffer_;  // reused across commits to avoid a per-commit allocation
  // msync mode: home offset -> image stored at home but not yet persisted.
  std::map<uint64_t, std::string> carried_;
};

}  // namespace walfs::core

#endif  // WALFS_CORE_JOURNAL_H_
