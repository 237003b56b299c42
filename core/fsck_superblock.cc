// fsck's checks of the pool's fixed records: the two superblocks, the journal's slots
// and the state record (with their repairs). Part of the Checker (core/fsck_checker.h);
// touches nothing past the tables' and data area's geometry.
#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/all_zero.h"
#include "core/fsck_checker.h"
#include "core/journal.h"
#include "core/pool_state.h"
#include "core/validate.h"

namespace walfs::core::fsck_internal {

bool Checker::CheckSuperblocks() {
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

void Checker::CheckJournal() {
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

uint64_t Checker::UsedHigh(uint64_t offset, uint64_t count, uint64_t size) const {
  for (uint64_t i = count; i-- > 0;) {
    if (!AllZero(At(offset + i * size), size)) return i + 1;
  }
  return 0;
}

void Checker::CheckState() {
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

void Checker::UseCurrentGeometry() {
  sb_ = CurrentGeometry(sb_, state_);
  report_->superblock = sb_;
}

}  // namespace walfs::core::fsck_internal
