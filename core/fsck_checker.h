// Checker: one fsck pass over a raw pool, private to core/fsck*.cc (fsck.h is the
// interface; nothing else includes this). Its steps live by subject: the fixed records
// (fsck_superblock.cc), the namespace (fsck_namespace.cc), blocks and free space
// (fsck_space.cc); fsck.cc runs them, repeats passes and holds the repair writes.
#ifndef WALFS_CORE_FSCK_CHECKER_H_
#define WALFS_CORE_FSCK_CHECKER_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/all_zero.h"
#include "core/format.h"
#include "core/fsck.h"
#include "core/journal.h"
#include "core/persistent_region.h"
#include "core/validate.h"

namespace walfs::core::fsck_internal {

using format::DirentRecord;
using format::Extent;
using format::InodeRecord;
using format::InodeState;
using format::InodeType;
using format::JournalHeader;
using format::PoolState;
using format::Superblock;
using Severity = FsckProblem::Severity;

// Past this many problems of one repetitive kind in a pass (free-space runs, unreachable
// inodes, overlaps), the rest are summed up in one line.
inline constexpr size_t kMaxListed = 32;
// FsckOptions::progress is called every this many blocks scanned (64 MiB).
inline constexpr uint64_t kProgressBlocks = 16384;

template <typename T>
bool IsZeroRecord(const T& record) {
  return AllZero(reinterpret_cast<const char*>(&record), sizeof(T));
}

struct InodeInfo {
  SlotKind slot = SlotKind::kFree;  // CheckInodeSlot's verdict
  InodeType type = InodeType::kNone;
  uint32_t nlink = 0;
  uint64_t size = 0;
  bool extents_ok = true;     // every extent inside the data area, count within bounds
  bool shares_blocks = false; // an extent overlaps another extent
  uint32_t names = 0;         // linked dirents naming it
  uint32_t subdirs = 0;       // linked dirents below it naming a directory
};

struct OwnedExtent {
  uint64_t block, count, ino;
  bool trusted;  // from a record whose crc is valid
};

// A dirent joining a live directory to a live inode: what the tree is made of.
struct Link {
  uint64_t index, parent, child;
  std::string name;
};

class Checker {
 public:
  Checker(PersistentRegion& region, const FsckOptions& options, FsckReport* report)
      : region_(region), options_(options), report_(report) {}

  // One pass: every step below in order, each reading what the earlier ones kept.
  void Run();

 private:
  // ---- Reporting -------------------------------------------------------------------

  void Add(Severity severity, std::string where, std::string what, bool repairable = false,
           bool repaired = false) {
    report_->problems.push_back(FsckProblem{severity, std::move(what), std::move(where),
                                            repairable, repaired});
  }

  // ---- Raw access ------------------------------------------------------------------
  // Every caller has bounds-checked the offset against the superblock's geometry, which
  // CheckSuperblocks validated against the region's size.

  const char* At(uint64_t offset) const { return region_.data() + offset; }
  uint64_t InodeOffset(uint64_t ino) const {
    return sb_.inode_table_offset + ino * sb_.inode_size;
  }
  uint64_t DirentOffset(uint64_t index) const {
    return sb_.dirent_table_offset + index * sb_.dirent_size;
  }
  uint64_t BlockOffset(uint64_t block) const {
    return sb_.data_offset + block * sb_.block_size;
  }

  // Records as recovery would see them: a committed journal transaction not yet replayed
  // (when not repairing) overlays its home records.
  template <typename T>
  T ReadRecord(uint64_t offset) const {
    T record;
    auto it = overlay_.find(offset);
    std::memcpy(&record, it != overlay_.end() ? it->second.data() : At(offset), sizeof(T));
    return record;
  }
  InodeRecord ReadInode(uint64_t ino) const { return ReadRecord<InodeRecord>(InodeOffset(ino)); }
  DirentRecord ReadDirent(uint64_t index) const {
    return ReadRecord<DirentRecord>(DirentOffset(index));
  }

  // ---- Writes (repair only; fsck.cc) -----------------------------------------------

  // Writes one record the way the file system does: a journal transaction in the next
  // slot (journal.h), persisted, then the record at home, persisted (no image is carried
  // to a later transaction: each repair is complete when it returns). A crash before the
  // commit point leaves the old record, after it recovery replays the new one.
  bool CommitRecord(uint64_t offset, const void* image, uint32_t length);
  bool FreeInode(uint64_t ino);
  bool DropDirent(uint64_t index);
  bool ZeroBytes(uint64_t offset, uint64_t length);
  // Commits state_ (repair): the marks only ever cover more, or the range less.
  bool CommitState();

  // ---- Superblocks, journal, state record (fsck_superblock.cc) ---------------------

  bool CheckSuperblocks();
  // Both slots, parsed and validated by the journal's own parser (the one pool open
  // uses); the newest committed transaction is replayed (repair) or overlaid.
  void CheckJournal();
  // Highest non-zero slot of a table, plus one (a damaged state record's fallback).
  uint64_t UsedHigh(uint64_t offset, uint64_t count, uint64_t size) const;
  void CheckState();
  // From here on the data area is the state record's (a grown pool's is larger than
  // the superblock's, format.h); the report shows that size too.
  void UseCurrentGeometry();
  bool InUninit(uint64_t block, uint64_t count) const {
    return block < state_.uninit_end && block + count > state_.uninit_begin;
  }

  // ---- Inodes, dirents, the tree, link counts, listing (fsck_namespace.cc) ---------

  // Blocks a record whose crc is bad may still hold a file's data: never reported as
  // free space, never zeroed.
  void ClaimExtents(uint64_t ino, const InodeRecord& r);
  // Per-record checks are validate.h's (the ones Open makes); what fsck adds is what
  // it keeps for the checks across records, and the repair of slot 0.
  void LoadInodes();
  void LoadDirents();
  void CheckTree();
  // Names `ino` "#<ino>" (or "#<ino>.<n>" if taken) in the root directory; returns the
  // name, or empty when no dirent slot is free. Link counts follow in the next pass.
  std::string Reattach(uint64_t ino);
  void CheckLinkCounts();
  void ListFiles();

  // ---- Extents, orphans, file tails, free space, counts (fsck_space.cc) ------------

  void CheckOverlaps();
  void ReclaimOrphans();
  void CheckFileTails();
  void CheckFreeSpace();
  // For free space found not zero in a pool whose open would trust it.
  static const char* TrustedNote();
  void FillCounts();

  PersistentRegion& region_;
  const FsckOptions& options_;
  FsckReport* report_;
  Superblock sb_{};
  uint64_t sequence_ = 0;  // of the newest committed transaction
  std::unique_ptr<Journal> journal_;  // repairs' commits, made at the first one
  absl::flat_hash_map<uint64_t, std::string> overlay_;
  std::vector<InodeInfo> inodes_;
  std::vector<OwnedExtent> extents_;
  std::vector<std::pair<uint64_t, uint64_t>> used_runs_;  // merged [begin, end) blocks
  std::vector<Link> links_;
  std::vector<Link> salvage_links_;  // with options_.salvage: entries through corrupt inodes
  absl::flat_hash_map<uint64_t, std::vector<size_t>> children_;  // dir -> links_ indices
  std::vector<bool> reachable_;
  bool root_reachable_ = false;            // the root is a live directory
  bool root_names_built_ = false;
  absl::flat_hash_set<std::string> root_names_;  // names in the root, for Reattach
  uint64_t free_dirent_cursor_ = 0;        // no free dirent slot below it
  PoolState state_{};  // the state record as checked (rebuilt in memory when damaged)
  bool dirents_trusted_ = true;  // every used dirent was readable and consistent
  uint64_t damaged_extents_ino_ = 0;  // first file or symlink with invalid extents, if any
  uint64_t dirents_used_ = 0;
  uint64_t blocks_used_ = 0;
};

}  // namespace walfs::core::fsck_internal

#endif  // WALFS_CORE_FSCK_CHECKER_H_
