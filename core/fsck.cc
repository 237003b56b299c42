// The walfs checker: one pass reads the raw pool (superblocks, journal, inode and dirent
// tables, data area) and checks every invariant of format.h; CheckPool repeats passes
// while repairs are being made.
#include "core/fsck.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/all_zero.h"
#include "core/crc32c.h"
#include "core/journal.h"
#include "core/pool_clients.h"
#include "core/pool_state.h"
#include "core/status.h"
#include "core/validate.h"

namespace walfs::core {
namespace {

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
constexpr size_t kMaxListed = 32;
constexpr size_t kMaxPasses = 4;
// FsckOptions::progress is called every this many blocks scanned (64 MiB).
constexpr uint64_t kProgressBlocks = 16384;

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

  void Run() {
    report_->region_size = region_.size();
    if (!CheckSuperblocks()) return;
    CheckJournal();
    CheckState();
    LoadInodes();
    LoadDirents();
    CheckTree();
    CheckLinkCounts();
    CheckOverlaps();
    ReclaimOrphans();
    if (options_.scan_data) CheckFileTails();
    CheckFreeSpace();
    FillCounts();
    if (options_.list_files) ListFiles();
  }

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

  // ---- Writes (repair only) --------------------------------------------------------

  // Writes one record the way the file system does: a journal transaction in the next
  // slot (journal.h), persisted, then the record at home, persisted (no image is carried
  // to a later transaction: each repair is complete when it returns). A crash before the
  // commit point leaves the old record, after it recovery replays the new one.
  bool CommitRecord(uint64_t offset, const void* image, uint32_t length) {
    if (journal_ == nullptr) {
      journal_ = std::make_unique<Journal>(region_, sb_, sequence_ + 1,
                                           /*carry_home_images=*/false);
    }
    Transaction txn;
    txn.PutImage(offset, image, length);
    bool committed = false;
    return journal_->Commit(txn, &committed).ok();
  }
  bool FreeInode(uint64_t ino) {
    const InodeRecord zero{};
    return CommitRecord(InodeOffset(ino), &zero, sizeof(zero));
  }
  bool DropDirent(uint64_t index) {
    const DirentRecord zero{};
    return CommitRecord(DirentOffset(index), &zero, sizeof(zero));
  }
  bool ZeroBytes(uint64_t offset, uint64_t length) {
    region_.Fill(offset, 0, length);
    region_.Persist(offset, length);
    return true;
  }

  // ---- Superblocks -----------------------------------------------------------------

  bool CheckSuperblocks() {
    static constexpr const char* kNames[2] = {"superblock A", "superblock B"};
    if (region_.size() < 2 * format::kBlockSize) {
      Add(Severity::kError, "pool",
          absl::StrCat("the region has ", region_.size(),
                       " bytes, too few to hold the two superblocks"));
      return false;
    }
    Superblock sb[2];
    std::string error[2];
    for (int i = 0; i < 2; ++i) {
      std::memcpy(&sb[i], At(format::kSuperblockOffset[i]), sizeof(Superblock));
      error[i] = SuperblockError(sb[i], region_.size());
    }
    int good;
    if (error[0].empty() && error[1].empty()) {
      good = 0;
      if (std::memcmp(&sb[0], &sb[1], sizeof(Superblock)) != 0) {
        Add(Severity::kError, "superblocks",
            "superblock A and B are both valid but differ; A was used");
      }
    } else if (error[0].empty() || error[1].empty()) {
      good = error[0].empty() ? 0 : 1;
      const int bad = 1 - good;
      bool fixed = false;
      if (options_.repair) {
        region_.Store(format::kSuperblockOffset[bad], &sb[good], sizeof(Superblock));
        region_.Persist(format::kSuperblockOffset[bad], sizeof(Superblock));
        fixed = true;
      }
      Add(Severity::kError, kNames[bad],
          absl::StrCat(error[bad], "; ", kNames[good], " is valid",
                       fixed ? " and was copied over it" : " and can replace it"),
          true, fixed);
    } else {
      for (int i = 0; i < 2; ++i) Add(Severity::kError, kNames[i], error[i]);
      Add(Severity::kError, "pool",
          "no valid superblock: the pool's layout is unknown and nothing else was checked");
      return false;
    }
    sb_ = sb[good];
    report_->superblock = sb_;
    report_->superblock_valid = true;
    return true;
  }

  // ---- Journal ---------------------------------------------------------------------

  // Both slots, parsed and validated by the journal's own parser (the one pool open
  // uses); the newest committed transaction is replayed (repair) or overlaid.
  void CheckJournal() {
    using State = JournalSlot::State;
    JournalContents j = ReadJournal(region_.data(), sb_);
    auto where = [](uint64_t slot) { return absl::StrCat("journal slot ", slot); };
    for (uint64_t slot = 0; slot < format::kJournalSlots; ++slot) {
      const JournalSlot& s = j.slots[slot];
      if (s.state == State::kTorn) {
        Add(Severity::kInfo, where(slot),
            absl::StrCat(s.error, ": torn before its commit point, so never committed; "
                                  "ignored"));
      } else if (s.state == State::kInvalid && static_cast<int>(slot) != j.newest) {
        // Superseded by the newest transaction, so recovery ignores it; but our code never
        // writes such a slot.
        bool fixed = false;
        if (options_.repair) fixed = ZeroBytes(JournalSlotOffset(sb_, slot), sizeof(JournalHeader));
        Add(Severity::kError, where(slot),
            absl::StrCat("older transaction ", s.sequence, " is invalid: ", s.error,
                         fixed ? "; discarded" : "; recovery ignores it"),
            true, fixed);
      }
    }
    report_->free_space_trusted = j.newest < 0;
    if (j.newest < 0) return;  // nothing committed
    const uint64_t newest = static_cast<uint64_t>(j.newest);
    const JournalSlot& s = j.slots[newest];
    sequence_ = s.sequence;
    report_->journal_sequence = s.sequence;
    if (s.state == State::kValid) {
      report_->journal_flags = s.flags;
      report_->free_space_trusted = (s.flags & format::kJournalFlagFreeSpaceZero) != 0;
    }
    if (s.state != State::kValid) {
      bool fixed = false;
      if (options_.repair) {
        // Replaying part of it could be worse than none, and the older slot may be older
        // than the home records: both are discarded, and the checks that follow judge the
        // home records as they are.
        for (uint64_t slot = 0; slot < format::kJournalSlots; ++slot) {
          fixed = ZeroBytes(JournalSlotOffset(sb_, slot), sizeof(JournalHeader));
        }
      }
      Add(Severity::kError, where(newest),
          absl::StrCat("committed transaction ", s.sequence, " is invalid: ", s.error,
                       fixed ? "; the journal was discarded" : "; recovery cannot replay it"),
          true, fixed);
      return;
    }
    size_t differing = 0;
    for (const auto& [offset, image] : s.images) {
      if (std::memcmp(At(offset), image.data(), image.size()) != 0) ++differing;
    }
    if (differing == 0) return;  // applied: the normal state between transactions
    bool fixed = false;
    if (options_.repair) {
      for (const auto& [offset, image] : s.images) {
        region_.Store(offset, image.data(), image.size());
        region_.Persist(offset, image.size());
      }
      fixed = true;
    } else {
      for (const auto& [offset, image] : s.images) overlay_[offset] = image;
    }
    Add(Severity::kWarning, where(newest),
        absl::StrCat("committed transaction ", s.sequence, " is not replayed: ", differing,
                     " of its ", s.images.size(), " records differ from their home copies",
                     fixed ? "; replayed" : " (checked as if replayed)"),
        true, fixed);
  }

  // ---- State record ----------------------------------------------------------------

  // Highest non-zero slot of a table, plus one (a damaged state record's fallback).
  uint64_t UsedHigh(uint64_t offset, uint64_t count, uint64_t size) const {
    for (uint64_t i = count; i-- > 0;) {
      if (!AllZero(At(offset + i * size), size)) return i + 1;
    }
    return 0;
  }

  void CheckState() {
    state_ = ReadRecord<PoolState>(format::kStateOffset);
    const std::string error = PoolStateError(state_, sb_, region_.size());
    if (error.empty()) {
      UseCurrentGeometry();
      return;
    }
    // No safe mark can be recovered from a damaged record: every slot that holds
    // anything is read as a record (an older pool's leftovers are then reported as what
    // they are), and the data area counts as initialised, so the free-space scan zeroes
    // whatever it holds (repairable there). Its size is lost with it: the data area is
    // taken to reach the end of the region, which is where walfsctl grow ends it (the
    // file is extended to the new size first), so a grown pool's files stay inside it.
    PoolState rebuilt{};
    rebuilt.magic = format::kStateMagic;
    rebuilt.inode_high = std::max<uint64_t>(
        2, UsedHigh(sb_.inode_table_offset, sb_.inode_count, sb_.inode_size));
    rebuilt.dirent_high = UsedHigh(sb_.dirent_table_offset, sb_.dirent_count, sb_.dirent_size);
    rebuilt.data_blocks = std::max(sb_.data_blocks,
                                   (region_.size() - sb_.data_offset) / format::kBlockSize);
    SealPoolState(&rebuilt);
    bool fixed = false;
    if (options_.repair) fixed = CommitRecord(format::kStateOffset, &rebuilt, sizeof(rebuilt));
    Add(Severity::kError, "state record",
        absl::StrCat(error, fixed ? "; rebuilt" : "; checked as if rebuilt",
                     " (tables read up to the last used slot: inodes ", rebuilt.inode_high,
                     ", dirents ", rebuilt.dirent_high,
                     "; the whole data area counted as initialised)"),
        true, fixed);
    state_ = rebuilt;
    UseCurrentGeometry();
  }

  // From here on the data area is the state record's (a grown pool's is larger than
  // the superblock's, format.h); the report shows that size too.
  void UseCurrentGeometry() {
    sb_ = CurrentGeometry(sb_, state_);
    report_->superblock = sb_;
  }

  bool InUninit(uint64_t block, uint64_t count) const {
    return block < state_.uninit_end && block + count > state_.uninit_begin;
  }

  // Commits state_ (repair): the marks only ever cover more, or the range less.
  bool CommitState() {
    SealPoolState(&state_);
    return CommitRecord(format::kStateOffset, &state_, sizeof(state_));
  }

  // ---- Inodes ----------------------------------------------------------------------

  // Blocks a record whose crc is bad may still hold a file's data: never reported as
  // free space, never zeroed.
  void ClaimExtents(uint64_t ino, const InodeRecord& r) {
    // An inline target's bytes are not extents; an out-of-line one has exactly one.
    if (r.type == InodeType::kSymlink && r.extent_count != 1) return;
    const uint32_t n = std::min<uint32_t>(r.extent_count, format::kMaxExtents);
    for (uint32_t i = 0; i < n; ++i) {
      const Extent& x = r.extents[i];
      if (x.count > 0 && x.block < sb_.data_blocks && x.count <= sb_.data_blocks - x.block) {
        extents_.push_back({x.block, x.count, ino, false});
      }
    }
  }

  // Per-record checks are validate.h's (the ones Open makes); what fsck adds is what
  // it keeps for the checks across records, and the repair of slot 0.
  void LoadInodes() {
    inodes_.assign(sb_.inode_count, InodeInfo{});
    // Slots from inode_high on were never used since mkfs and may hold anything.
    for (uint64_t ino = 0; ino < state_.inode_high; ++ino) {
      const InodeRecord r = ReadInode(ino);
      const InodeCheck c =
          CheckInodeSlot(ino, reinterpret_cast<const char*>(&r), sb_, region_.data());
      const std::string where = absl::StrCat("inode ", ino);
      if (ino == 0) {
        if (c.problems.empty()) continue;
        // Not through the journal: recovery accepts no transaction naming slot 0, and
        // nothing refers to it, so zeroing it in place is safe even if interrupted.
        const bool fixed = options_.repair && ZeroBytes(InodeOffset(0), sb_.inode_size);
        Add(Severity::kError, where, c.problems[0], true, fixed);
        continue;
      }
      for (size_t i = 0; i < c.problems.size(); ++i) {
        Add(Severity::kError, where,
            c.kind == SlotKind::kUnusable && i == 0 ? c.problems[i] + ": the record is not used"
                                                    : c.problems[i]);
      }
      InodeInfo& info = inodes_[ino];
      info.slot = c.kind;
      if (c.kind == SlotKind::kFree) continue;
      if (c.kind == SlotKind::kUnusable) {
        ClaimExtents(ino, r);
        continue;
      }
      info.type = r.type;
      info.nlink = r.nlink;
      info.size = r.size;
      info.extents_ok = c.extents_sound;
      // The blocks it owns: each extent of a file that lies in the data area (a damaged
      // one's others may still hold its data), a sound out-of-line symlink target.
      if (r.type == InodeType::kRegular) {
        const uint32_t n = std::min<uint32_t>(r.extent_count, format::kMaxExtents);
        for (uint32_t i = 0; i < n; ++i) {
          const Extent& x = r.extents[i];
          if (ExtentInDataArea(x, sb_.data_blocks)) extents_.push_back({x.block, x.count, ino, true});
        }
      } else if (r.type == InodeType::kSymlink && r.extent_count == 1 && c.extents_sound) {
        extents_.push_back({r.extents[0].block, 1, ino, true});
      }
      // Only files and symlinks have data that blocks no sound extent names may hold.
      if (!c.extents_sound && damaged_extents_ino_ == 0 &&
          (r.type == InodeType::kRegular || r.type == InodeType::kSymlink)) {
        damaged_extents_ino_ = ino;
      }
    }
  }

  // ---- Dirents ---------------------------------------------------------------------

  void LoadDirents() {
    using LinkKind = DirentLinkCheck::Kind;
    absl::flat_hash_map<std::pair<uint64_t, std::string>, uint64_t> names;
    for (uint64_t index = 0; index < state_.dirent_high; ++index) {
      const DirentRecord d = ReadDirent(index);
      if (IsZeroRecord(d)) continue;
      ++dirents_used_;
      std::string where = absl::StrCat("dirent ", index);
      if (std::string e = DirentRecordError(d, sb_.inode_count); !e.empty()) {
        Add(Severity::kError, where, e + ": the entry is not used");
        dirents_trusted_ = false;
        continue;
      }
      std::string name(d.name, d.name_length);
      absl::StrAppend(&where, " (\"", absl::CEscape(name), "\" in directory ", d.parent, ")");
      const InodeInfo& parent = inodes_[d.parent];
      const InodeInfo& child = inodes_[d.child];
      const DirentLinkCheck link =
          CheckDirentLink(d, parent.slot, parent.type, child.slot, child.type);
      if (link.kind == LinkKind::kDroppable) {
        const bool fixed = options_.repair && DropDirent(index);
        Add(Severity::kError, where, link.problem + (fixed ? "; entry removed" : ""), true,
            fixed);
        continue;
      }
      if (link.kind == LinkKind::kBroken) {
        Add(Severity::kError, where, link.problem);
        dirents_trusted_ = false;
        const bool usable = child.slot == SlotKind::kUnusable || child.slot == SlotKind::kLive;
        if (options_.salvage && usable &&
            (parent.slot == SlotKind::kUnusable ||
             (parent.slot == SlotKind::kLive && parent.type == InodeType::kDirectory))) {
          salvage_links_.push_back(Link{index, d.parent, d.child, std::move(name)});
        }
        continue;
      }
      if (link.kind == LinkKind::kWrongType) {
        bool fixed = false;
        if (options_.repair) {
          DirentRecord fixed_record = d;
          fixed_record.type = child.type;
          fixed_record.crc = RecordCrc(&fixed_record, sizeof(fixed_record));
          fixed = CommitRecord(DirentOffset(index), &fixed_record, sizeof(fixed_record));
        }
        Add(Severity::kError, where, link.problem + (fixed ? "; corrected" : ""), true, fixed);
      }
      auto [it, inserted] = names.try_emplace(std::make_pair(d.parent, name), index);
      if (!inserted) {
        Add(Severity::kError, where,
            absl::StrCat("duplicate name: dirent ", it->second,
                         " has the same name in the same directory"));
        dirents_trusted_ = false;
        continue;
      }
      links_.push_back(Link{index, d.parent, d.child, std::move(name)});
    }
  }

  // ---- Directory tree --------------------------------------------------------------

  void CheckTree() {
    absl::flat_hash_map<uint64_t, uint64_t> parent_of_dir;
    for (size_t i = 0; i < links_.size(); ++i) {
      const Link& l = links_[i];
      children_[l.parent].push_back(i);
      InodeInfo& child = inodes_[l.child];
      ++child.names;
      if (child.type == InodeType::kDirectory) {
        ++inodes_[l.parent].subdirs;
        parent_of_dir.try_emplace(l.child, l.parent);
      }
    }
    for (uint64_t ino = 0; ino < inodes_.size(); ++ino) {
      const InodeInfo& info = inodes_[ino];
      if (info.type == InodeType::kDirectory && info.names > 1) {
        Add(Severity::kError, absl::StrCat("inode ", ino),
            absl::StrCat("directory named by ", info.names,
                         " entries: directories cannot be hard-linked"));
      }
    }

    reachable_.assign(inodes_.size(), false);
    const InodeInfo& root = inodes_[format::kRootInode];
    root_reachable_ = root.slot == SlotKind::kLive && root.type == InodeType::kDirectory;
    if (root_reachable_) {
      std::deque<uint64_t> queue{format::kRootInode};
      reachable_[format::kRootInode] = true;
      while (!queue.empty()) {
        const uint64_t dir = queue.front();
        queue.pop_front();
        auto it = children_.find(dir);
        if (it == children_.end()) continue;
        for (size_t i : it->second) {
          const uint64_t child = links_[i].child;
          if (reachable_[child]) continue;
          reachable_[child] = true;
          if (inodes_[child].type == InodeType::kDirectory) queue.push_back(child);
        }
      }
    }

    // Unreachable directories: follow each one's parent chain; a chain that comes back
    // on itself without meeting the root is a cycle.
    std::vector<bool> walked(inodes_.size(), false);
    for (uint64_t ino = 0; ino < inodes_.size(); ++ino) {
      if (reachable_[ino] || walked[ino] || inodes_[ino].type != InodeType::kDirectory ||
          inodes_[ino].slot != SlotKind::kLive) {
        continue;
      }
      std::vector<uint64_t> chain;
      absl::flat_hash_set<uint64_t> on_chain;
      uint64_t cur = ino;
      while (!reachable_[cur] && !walked[cur]) {
        if (!on_chain.insert(cur).second) {
          auto start = std::find(chain.begin(), chain.end(), cur);
          std::vector<uint64_t> cycle(start, chain.end());
          Add(Severity::kError, absl::StrCat("inode ", *std::min_element(cycle.begin(), cycle.end())),
              absl::StrCat("directories ", absl::StrJoin(cycle, " -> "),
                           " form a cycle that the root does not reach"));
          break;
        }
        chain.push_back(cur);
        auto it = parent_of_dir.find(cur);
        if (it == parent_of_dir.end()) break;
        cur = it->second;
      }
      for (uint64_t c : chain) walked[c] = true;
    }

    size_t unreachable = 0, unlisted_fixed = 0;
    for (uint64_t ino = 2; ino < inodes_.size(); ++ino) {
      if (inodes_[ino].slot != SlotKind::kLive || reachable_[ino]) continue;
      // An inode no entry names at all (when every entry could be read) gets one in the
      // root, as e2fsck's lost+found: its data stays, and a human decides. One named
      // from elsewhere (a cycle) keeps its names: moving it would guess.
      const bool repairable = dirents_trusted_ && inodes_[ino].names == 0 &&
                              root_reachable_;
      std::string fixed_as;
      if (options_.repair && repairable) fixed_as = Reattach(ino);
      if (++unreachable <= kMaxListed) {
        Add(Severity::kError, absl::StrCat("inode ", ino),
            absl::StrCat("live ", InodeTypeName(inodes_[ino].type),
                         " is not reachable from the root directory",
                         fixed_as.empty() ? "" : "; reattached as /" + fixed_as),
            repairable, !fixed_as.empty());
      } else if (!fixed_as.empty()) {
        ++unlisted_fixed;
      }
    }
    if (unreachable > kMaxListed) {
      Add(Severity::kError, "inodes",
          absl::StrCat(unreachable - kMaxListed, " more live inodes are not reachable",
                       unlisted_fixed ? absl::StrCat("; ", unlisted_fixed, " reattached") : ""),
          unlisted_fixed > 0, unlisted_fixed > 0);
    }
  }

  // Names `ino` "#<ino>" (or "#<ino>.<n>" if taken) in the root directory; returns the
  // name, or empty when no dirent slot is free. Link counts follow in the next pass.
  std::string Reattach(uint64_t ino) {
    if (!root_names_built_) {
      root_names_built_ = true;
      for (const Link& l : links_) {
        if (l.parent == format::kRootInode) root_names_.insert(l.name);
      }
    }
    std::string name = absl::StrCat("#", ino);
    for (int n = 1; root_names_.contains(name); ++n) name = absl::StrCat("#", ino, ".", n);
    while (free_dirent_cursor_ < state_.dirent_high &&
           !IsZeroRecord(ReadDirent(free_dirent_cursor_))) {
      ++free_dirent_cursor_;
    }
    if (free_dirent_cursor_ >= sb_.dirent_count) return "";
    // A never-used slot: the record is written first, the mark moves after it, so a crash
    // between leaves the slot unread.
    const bool fresh = free_dirent_cursor_ >= state_.dirent_high;
    DirentRecord d{};
    d.in_use = 1;
    d.type = inodes_[ino].type;
    d.name_length = static_cast<uint16_t>(name.size());
    d.parent = format::kRootInode;
    d.child = ino;
    std::memcpy(d.name, name.data(), name.size());
    d.crc = RecordCrc(&d, sizeof(d));
    CommitRecord(DirentOffset(free_dirent_cursor_++), &d, sizeof(d));
    if (fresh) {
      state_.dirent_high = free_dirent_cursor_;
      CommitState();
    }
    root_names_.insert(name);
    return name;
  }

  // ---- Link counts -----------------------------------------------------------------

  void CheckLinkCounts() {
    for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
      const InodeInfo& info = inodes_[ino];
      if (info.slot != SlotKind::kLive) continue;
      if (ino != format::kRootInode && info.names == 0) continue;  // reported unreachable
      const bool dir = info.type == InodeType::kDirectory;
      const uint32_t expected = dir ? 2 + info.subdirs : info.names;
      if (info.nlink == expected) continue;
      // Counting needs every entry: one that could not be read may name this inode.
      const bool repairable = dirents_trusted_;
      bool fixed = false;
      if (options_.repair && repairable) {
        InodeRecord r = ReadInode(ino);
        r.nlink = expected;
        r.crc = RecordCrc(&r, sizeof(r));
        fixed = CommitRecord(InodeOffset(ino), &r, sizeof(r));
      }
      Add(Severity::kError, absl::StrCat("inode ", ino),
          dir ? absl::StrCat("directory link count is ", info.nlink, ", expected 2 + ",
                             info.subdirs, " subdirectories = ", expected,
                             fixed ? "; corrected" : "")
              : absl::StrCat("link count is ", info.nlink, " but ", info.names,
                             " entries name it", fixed ? "; corrected" : ""),
          repairable, fixed);
    }
  }

  // ---- Extents ---------------------------------------------------------------------

  void CheckOverlaps() {
    std::sort(extents_.begin(), extents_.end(), [](const OwnedExtent& a, const OwnedExtent& b) {
      return a.block != b.block ? a.block < b.block : a.ino < b.ino;
    });
    size_t overlaps = 0;
    uint64_t run_begin = 0, run_end = 0;
    size_t widest = 0;  // index of the extent reaching furthest so far
    for (size_t i = 0; i < extents_.size(); ++i) {
      const OwnedExtent& e = extents_[i];
      const uint64_t end = e.block + e.count;
      if (i > 0 && e.block < run_end) {
        const OwnedExtent& other = extents_[widest];
        if (e.trusted && other.trusted) {
          inodes_[e.ino].shares_blocks = true;
          inodes_[other.ino].shares_blocks = true;
          // Two extents of one inode: the record's own problem, reported with it
          // (CheckInodeSlot).
          if (e.ino != other.ino && ++overlaps <= kMaxListed) {
            Add(Severity::kError, absl::StrCat("inode ", e.ino),
                absl::StrCat("extent (blocks ", e.block, " +", e.count, ") overlaps inode ",
                             other.ino, " (blocks ", other.block, " +", other.count, ")"));
          }
        }
        if (end > run_end) {
          run_end = end;
          widest = i;
        }
      } else {
        if (i > 0) used_runs_.emplace_back(run_begin, run_end);
        run_begin = e.block;
        run_end = end;
        widest = i;
      }
    }
    if (!extents_.empty()) used_runs_.emplace_back(run_begin, run_end);
    if (overlaps > kMaxListed) {
      Add(Severity::kError, "extents",
          absl::StrCat(overlaps - kMaxListed, " more overlapping extents"));
    }
  }

  // ---- Orphans, file tails, free space ---------------------------------------------

  void ReclaimOrphans() {
    for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
      const InodeInfo& info = inodes_[ino];
      if (info.slot != SlotKind::kOrphan) continue;
      const InodeRecord r = ReadInode(ino);
      uint64_t blocks = 0;
      const bool owns_blocks =
          r.type == InodeType::kRegular || (r.type == InodeType::kSymlink && r.extent_count == 1);
      const uint32_t n = owns_blocks ? std::min<uint32_t>(r.extent_count, format::kMaxExtents) : 0;
      for (uint32_t i = 0; i < n; ++i) blocks += r.extents[i].count;
      // Zeroing blocks another inode also claims would destroy its data.
      const bool repairable = info.extents_ok && !info.shares_blocks && info.names == 0;
      bool fixed = false;
      if (options_.repair && repairable) {
        for (uint32_t i = 0; i < n; ++i) {
          ZeroBytes(BlockOffset(r.extents[i].block), r.extents[i].count * sb_.block_size);
        }
        fixed = FreeInode(ino);
      }
      Add(Severity::kWarning, absl::StrCat("inode ", ino),
          absl::StrCat("orphan ", InodeTypeName(info.type), " (unlinked, ", blocks,
                       " blocks): ", fixed ? "reclaimed" : "reclaimable"),
          repairable, fixed);
    }
  }

  void CheckFileTails() {
    for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
      const InodeInfo& info = inodes_[ino];
      if (info.slot != SlotKind::kLive || !info.extents_ok || info.shares_blocks) continue;
      const InodeRecord r = ReadInode(ino);
      std::vector<std::pair<uint64_t, uint64_t>> dirty;  // pool offset, length
      uint64_t file_offset = 0;
      for (uint32_t i = 0; i < r.extent_count; ++i) {
        const uint64_t bytes = r.extents[i].count * sb_.block_size;
        if (file_offset + bytes > r.size) {
          const uint64_t skip = r.size > file_offset ? r.size - file_offset : 0;
          const uint64_t start = BlockOffset(r.extents[i].block) + skip;
          if (!AllZero(At(start), bytes - skip)) dirty.emplace_back(start, bytes - skip);
        }
        file_offset += bytes;
      }
      if (dirty.empty()) continue;
      bool fixed = false;
      if (options_.repair) {
        for (const auto& [offset, length] : dirty) ZeroBytes(offset, length);
        fixed = true;
      }
      Add(Severity::kWarning, absl::StrCat("inode ", ino),
          absl::StrCat("bytes past the end of the file (size ", r.size, ") are not zero in ",
                       dirty.size(), " extent(s)", fixed ? "; zeroed" : ""),
          true, fixed);
    }
  }

  void CheckFreeSpace() {
    size_t runs = 0;
    uint64_t unlisted_blocks = 0;
    bool unlisted_fixed = false;
    // A file whose extents are damaged may have its data in blocks no valid extent
    // names: zeroing them would destroy what walfsctl export --salvage could recover.
    const bool repairable = damaged_extents_ino_ == 0;
    auto report_run = [&](uint64_t begin, uint64_t end) {
      bool fixed = false;
      if (options_.repair && repairable) {
        fixed = ZeroBytes(BlockOffset(begin), (end - begin) * sb_.block_size);
      }
      if (++runs <= kMaxListed) {
        Add(Severity::kError, absl::StrCat("data blocks ", begin, "-", end - 1),
            absl::StrCat(end - begin, " block(s) owned by no inode are not zero",
                         report_->free_space_trusted ? TrustedNote() : "",
                         fixed ? "; zeroed" : "",
                         repairable ? ""
                                    : absl::StrCat("; kept: they may hold data of inode ",
                                                   damaged_extents_ino_,
                                                   ", whose extents are damaged")),
            repairable, fixed);
      } else {
        unlisted_blocks += end - begin;
        unlisted_fixed = fixed;
      }
    };
    // Blocks inside the uninitialised range are no file's and may hold anything (read
    // when scanning: a repair below may empty the range).
    uint64_t scanned = 0, to_scan = 0;
    auto count_scanned = [&](uint64_t blocks) {
      const uint64_t before = scanned;
      scanned += blocks;
      if (options_.progress && scanned / kProgressBlocks != before / kProgressBlocks) {
        options_.progress(scanned, to_scan);
      }
    };
    auto scan_gap = [&](uint64_t begin, uint64_t end) {
      uint64_t dirty_begin = end;
      uint64_t maybe_data_end = begin;  // blocks below it were found to be possibly data
      for (uint64_t b = begin; b < end; ++b) {
        if (b >= state_.uninit_begin && b < state_.uninit_end) {
          if (dirty_begin != end) {
            report_run(dirty_begin, b);
            dirty_begin = end;
          }
          b = state_.uninit_end - 1;
          continue;
        }
        if (b >= maybe_data_end) {
          // Holes of the pool file read as zeros: skip them unread. Asked up to the
          // uninitialised range at most (handled above, and not in to_scan).
          const uint64_t until =
              b < state_.uninit_begin ? std::min(end, state_.uninit_begin) : end;
          const PersistentRegion::DataRange data =
              MaybeDataBlocks(region_, sb_.data_offset, sb_.block_size, b, until);
          maybe_data_end = data.end;
          if (data.begin > b) {
            if (dirty_begin != end) {
              report_run(dirty_begin, b);
              dirty_begin = end;
            }
            count_scanned(data.begin - b);
            b = data.begin - 1;
            continue;
          }
        }
        count_scanned(1);
        const bool zero = AllZero(At(BlockOffset(b)), sb_.block_size);
        if (!zero && dirty_begin == end) dirty_begin = b;
        if (zero && dirty_begin != end) {
          report_run(dirty_begin, b);
          dirty_begin = end;
        }
      }
      if (dirty_begin != end) report_run(dirty_begin, end);
    };
    // Owned blocks in that range: the range is wrong (or the extents are). Emptying it
    // is safe: its free blocks are then scanned like all free space, and zeroed.
    uint64_t used_blocks = 0;
    for (const auto& [begin, end] : used_runs_) {
      used_blocks += end - begin;
      if (!InUninit(begin, end - begin)) continue;
      const uint64_t old_begin = state_.uninit_begin, old_end = state_.uninit_end;
      bool fixed = false;
      if (options_.repair) {
        state_.uninit_begin = state_.uninit_end = 0;
        fixed = CommitState();
      }
      Add(Severity::kError, "state record",
          absl::StrCat("data blocks ", std::max(begin, old_begin), "-",
                       std::min(end, old_end) - 1,
                       " are owned by a file but lie in the range no file has used since "
                       "mkfs (blocks ", old_begin, "-", old_end - 1, ")",
                       fixed ? "; the range was emptied" : ""),
          true, fixed);
      break;
    }
    const uint64_t uninit_blocks =
        state_.uninit_end - state_.uninit_begin;  // none of it owned unless reported above
    to_scan = sb_.data_blocks - std::min(sb_.data_blocks, used_blocks + uninit_blocks);
    uint64_t cursor = 0, used = 0;
    for (const auto& [begin, end] : used_runs_) {
      if (begin > cursor && options_.scan_data) scan_gap(cursor, begin);
      used += end - begin;
      cursor = end;
    }
    if (cursor < sb_.data_blocks && options_.scan_data) scan_gap(cursor, sb_.data_blocks);
    if (options_.progress && options_.scan_data) options_.progress(to_scan, to_scan);
    if (runs > kMaxListed) {
      Add(Severity::kError, "data blocks",
          absl::StrCat(runs - kMaxListed, " more runs (", unlisted_blocks,
                       " blocks) owned by no inode are not zero",
                       report_->free_space_trusted ? TrustedNote() : "",
                       unlisted_fixed ? "; zeroed" : ""),
          repairable, unlisted_fixed);
    }
    blocks_used_ = used;
  }

  // For free space found not zero in a pool whose open would trust it.
  static const char* TrustedNote() {
    return " although the journal says walfs kept free space zero (written by something "
           "other than walfs; a mount would hand it out unread)";
  }

  // ---- Summary -----------------------------------------------------------------------

  void FillCounts() {
    FsckReport& r = *report_;
    r.inodes_total = sb_.inode_count - 1;
    for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
      const InodeInfo& info = inodes_[ino];
      if (info.slot == SlotKind::kFree) ++r.inodes_free;
      if (info.slot == SlotKind::kOrphan) ++r.inodes_orphan;
      if (info.slot != SlotKind::kLive) continue;
      ++r.inodes_live;
      if (info.type == InodeType::kRegular) ++r.files;
      if (info.type == InodeType::kDirectory) ++r.dirs;
      if (info.type == InodeType::kSymlink) ++r.symlinks;
      if (info.type >= InodeType::kFifo) ++r.specials;
    }
    r.dirents_total = sb_.dirent_count;
    r.dirents_used = dirents_used_;
    r.state = state_;
    r.blocks_total = sb_.data_blocks;
    r.blocks_used = blocks_used_;
    r.blocks_free = sb_.data_blocks - blocks_used_;
  }

  void ListFiles() {
    absl::flat_hash_map<uint64_t, std::vector<const Link*>> children;
    for (const Link& l : links_) children[l.parent].push_back(&l);
    for (const Link& l : salvage_links_) children[l.parent].push_back(&l);
    std::vector<bool> listed(inodes_.size(), false);
    std::vector<std::pair<uint64_t, std::string>> stack{{format::kRootInode, "/"}};
    if (inodes_[format::kRootInode].slot != SlotKind::kLive) return;
    listed[format::kRootInode] = true;
    while (!stack.empty()) {
      auto [ino, path] = std::move(stack.back());
      stack.pop_back();
      const InodeRecord record = ReadInode(ino);
      report_->files_list.push_back(
          FsckFile{path, ino, record, inodes_[ino].slot == SlotKind::kUnusable,
                   record.type == InodeType::kSymlink ? SymlinkTarget(region_, sb_, record)
                                                      : std::string()});
      // Only a directory has children. Entries that name anything else as their parent
      // (damage, or a crafted pool) are not listed: below a symlink, such a path would
      // lead an export wherever the symlink points.
      if (record.type != InodeType::kDirectory) continue;
      auto it = children.find(ino);
      if (it == children.end()) continue;
      for (const Link* l : it->second) {
        std::string child_path = absl::StrCat(path == "/" ? "" : path, "/", l->name);
        // A hard-linked file is listed under each name; a directory only once (the
        // record's own type: a corrupt inode has no trusted one).
        if (ReadInode(l->child).type == InodeType::kDirectory) {
          if (listed[l->child]) continue;
          listed[l->child] = true;
        }
        stack.emplace_back(l->child, std::move(child_path));
      }
    }
    std::sort(report_->files_list.begin(), report_->files_list.end(),
              [](const FsckFile& a, const FsckFile& b) { return a.path < b.path; });
  }

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

bool SameProblem(const FsckProblem& a, const FsckProblem& b) {
  return a.severity == b.severity && a.where == b.where && a.what == b.what;
}

}  // namespace

std::string_view SeverityName(FsckProblem::Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "?";
}

bool FsckReport::clean() const { return Count(Severity::kError, true) == 0; }

size_t FsckReport::Count(FsckProblem::Severity severity, bool unrepaired_only) const {
  return std::count_if(problems.begin(), problems.end(), [&](const FsckProblem& p) {
    return p.severity == severity && !(unrepaired_only && p.repaired);
  });
}

size_t FsckReport::repaired_count() const {
  return std::count_if(problems.begin(), problems.end(),
                       [](const FsckProblem& p) { return p.repaired; });
}

absl::StatusOr<FsckReport> CheckPool(PersistentRegion& region, const FsckOptions& options) {
  FsckReport result;
  for (size_t pass = 1; pass <= kMaxPasses; ++pass) {
    // The last pass only looks, so a repair that did not hold is reported unrepaired.
    FsckOptions pass_options = options;
    pass_options.repair = options.repair && pass < kMaxPasses;
    FsckReport report;
    Checker(region, pass_options, &report).Run();
    // A problem found again keeps its first wording; it is repaired only if the last
    // pass that saw it repaired it.
    for (FsckProblem& p : report.problems) {
      auto it = std::find_if(result.problems.begin(), result.problems.end(),
                             [&](const FsckProblem& q) { return SameProblem(p, q); });
      if (it == result.problems.end()) {
        result.problems.push_back(std::move(p));
      } else {
        it->repaired = p.repaired;
      }
    }
    const bool repaired_now = report.repaired_count() > 0;
    report.problems = std::move(result.problems);
    result = std::move(report);
    result.passes = pass;
    if (!pass_options.repair || !repaired_now) break;
  }
  // A repair whose writes did not reach the media repaired nothing.
  if (absl::Status h = region.health(); !h.ok()) return h;
  return result;
}

absl::StatusOr<std::unique_ptr<PoolClaim>> PoolClaim::Acquire(const std::string& path,
                                                              bool exclusive) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PosixError(absl::StrCat("cannot open pool ", path), errno);
  if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    const int e = errno;
    close(fd);
    if (e == EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(
          "pool ", path, " is in use (a running walfs daemon or another tool holds it)"));
    }
    return PosixError(absl::StrCat("cannot lock pool ", path), e);
  }
  if (exclusive) {
    // Rewriting a pool under a direct-access client could free blocks it still stores
    // into (core/pool_clients.h).
    if (absl::Status s = CheckNoDirectClients(path); !s.ok()) {
      close(fd);
      return absl::UnavailableError(s.message());
    }
  }
  return std::unique_ptr<PoolClaim>(new PoolClaim(fd));
}

PoolClaim::~PoolClaim() { close(fd_); }

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string SymlinkTarget(const PersistentRegion& region, const Superblock& sb,
                          const InodeRecord& record) {
  if (record.extent_count != 1) {
    return std::string(reinterpret_cast<const char*>(record.extents),
                       std::min<uint64_t>(record.size, format::kMaxSymlinkTarget));
  }
  const uint64_t block = record.extents[0].block;
  if (block >= sb.data_blocks) return "";
  const uint64_t offset = sb.data_offset + block * sb.block_size;
  if (offset > region.size() || sb.block_size > region.size() - offset) return "";
  return std::string(region.data() + offset,
                     std::min<uint64_t>(record.size, format::kMaxSymlinkTargetOutOfLine));
}

std::string FormatUuid(const uint8_t (&uuid)[16]) {
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += absl::StrFormat("%02x", uuid[i]);
  }
  return out;
}

std::string FsckReportJson(const FsckReport& report) {
  std::string out = absl::StrCat("{\"clean\":", report.clean() ? "true" : "false",
                                 ",\"superblock_valid\":",
                                 report.superblock_valid ? "true" : "false",
                                 ",\"region_size\":", report.region_size);
  if (report.superblock_valid) {
    const Superblock& sb = report.superblock;
    absl::StrAppend(&out, ",\"superblock\":{\"version\":", sb.version,
                    ",\"uuid\":", JsonQuote(FormatUuid(sb.uuid)),
                    ",\"capacity\":", sb.capacity, ",\"block_size\":", sb.block_size,
                    ",\"segment_size\":", sb.segment_size,
                    ",\"journal_offset\":", sb.journal_offset,
                    ",\"journal_size\":", sb.journal_size,
                    ",\"inode_table_offset\":", sb.inode_table_offset,
                    ",\"inode_count\":", sb.inode_count,
                    ",\"dirent_table_offset\":", sb.dirent_table_offset,
                    ",\"dirent_count\":", sb.dirent_count,
                    ",\"data_offset\":", sb.data_offset,
                    ",\"data_blocks\":", sb.data_blocks,
                    ",\"created_ns\":", sb.created_ns, "}");
    absl::StrAppend(&out, ",\"state\":{\"inode_high\":", report.state.inode_high,
                    ",\"dirent_high\":", report.state.dirent_high,
                    ",\"uninit_begin\":", report.state.uninit_begin,
                    ",\"uninit_end\":", report.state.uninit_end, "}");
    absl::StrAppend(&out, ",\"usage\":{\"inodes_total\":", report.inodes_total,
                    ",\"inodes_live\":", report.inodes_live,
                    ",\"inodes_orphan\":", report.inodes_orphan,
                    ",\"inodes_free\":", report.inodes_free,
                    ",\"dirents_total\":", report.dirents_total,
                    ",\"dirents_used\":", report.dirents_used, ",\"files\":", report.files,
                    ",\"dirs\":", report.dirs, ",\"symlinks\":", report.symlinks,
                    ",\"specials\":", report.specials,
                    ",\"blocks_total\":", report.blocks_total,
                    ",\"blocks_used\":", report.blocks_used,
                    ",\"blocks_free\":", report.blocks_free,
                    ",\"journal_sequence\":", report.journal_sequence,
                    ",\"journal_flags\":", report.journal_flags,
                    ",\"free_space_trusted\":", report.free_space_trusted ? "true" : "false",
                    "}");
  }
  absl::StrAppend(&out, ",\"problems\":[");
  for (size_t i = 0; i < report.problems.size(); ++i) {
    const FsckProblem& p = report.problems[i];
    absl::StrAppend(&out, i ? "," : "", "{\"severity\":",
                    JsonQuote(SeverityName(p.severity)), ",\"where\":", JsonQuote(p.where),
                    ",\"what\":", JsonQuote(p.what),
                    ",\"repairable\":", p.repairable ? "true" : "false",
                    ",\"repaired\":", p.repaired ? "true" : "false", "}");
  }
  out += "]";
  if (!report.files_list.empty()) {
    out += ",\"files\":[";
    for (size_t i = 0; i < report.files_list.size(); ++i) {
      const FsckFile& f = report.files_list[i];
      const InodeRecord& r = f.record;
      absl::StrAppend(&out, i ? "," : "", "{\"path\":", JsonQuote(f.path),
                      ",\"ino\":", f.ino, ",\"type\":", JsonQuote(InodeTypeName(r.type)),
                      ",\"size\":", r.size, ",\"mode\":", JsonQuote(absl::StrFormat("%04o", r.mode & 07777)),
                      ",\"uid\":", r.uid, ",\"gid\":", r.gid, ",\"nlink\":", r.nlink,
                      ",\"mtime_ns\":", r.mtime_ns, ",\"generation\":", r.generation,
                      ",\"damaged\":", f.damaged ? "true" : "false");
      if (r.type == InodeType::kSymlink) {
        absl::StrAppend(&out, ",\"target\":", JsonQuote(f.target));
      }
      out += ",\"extents\":[";
      const uint32_t n = r.type == InodeType::kRegular
                             ? std::min<uint32_t>(r.extent_count, format::kMaxExtents)
                             : 0;
      for (uint32_t e = 0; e < n; ++e) {
        absl::StrAppend(&out, e ? "," : "", "{\"block\":", r.extents[e].block,
                        ",\"count\":", r.extents[e].count, "}");
      }
      out += "]}";
    }
    out += "]";
  }
  return out + "}";
}

}  // namespace walfs::core
