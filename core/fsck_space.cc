// fsck's checks of the data area: extents shared by two inodes, orphans (reclaimed),
// non-zero bytes past a file's end and in free space (zeroed), and the report's counts.
// Part of the Checker (core/fsck_checker.h); the inode and dirent records are
// fsck_namespace.cc's.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/all_zero.h"
#include "core/fsck_checker.h"
#include "core/persistent_region.h"
#include "core/validate.h"

namespace walfs::core::fsck_internal {

void Checker::CheckOverlaps() {
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

void Checker::ReclaimOrphans() {
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

void Checker::CheckFileTails() {
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

void Checker::CheckFreeSpace() {
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

const char* Checker::TrustedNote() {
  return " although the journal says walfs kept free space zero (written by something "
         "other than walfs; a mount would hand it out unread)";
}

void Checker::FillCounts() {
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

}  // namespace walfs::core::fsck_internal
