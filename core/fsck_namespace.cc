// fsck's checks of the namespace: inode and dirent records, the directory tree from the
// root, link counts (with their repairs: dropped entries, reattached inodes, corrected
// counts), and the listing of reachable files. Part of the Checker
// (core/fsck_checker.h); what blocks the inodes own is fsck_space.cc's to judge.
#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/crc32c.h"
#include "core/fsck_checker.h"
#include "core/validate.h"

namespace walfs::core {
namespace fsck_internal {

void Checker::ClaimExtents(uint64_t ino, const InodeRecord& r) {
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

void Checker::LoadInodes() {
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

void Checker::LoadDirents() {
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

void Checker::CheckTree() {
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

std::string Checker::Reattach(uint64_t ino) {
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

void Checker::CheckLinkCounts() {
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

void Checker::ListFiles() {
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

}  // namespace fsck_internal

std::string SymlinkTarget(const PersistentRegion& region, const format::Superblock& sb,
                          const format::InodeRecord& record) {
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

}  // namespace walfs::core
