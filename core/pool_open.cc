// Pool's open: superblocks, journal replay, the tables loaded and checked against each
// other, and recovery of what a crash left (orphans, bytes past EOF). Writes the media
// only through Journal::Replay, Recover's zeroing and Space's reclaim.
#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/all_zero.h"
#include "core/pool.h"
#include "core/status.h"
#include "core/validate.h"

namespace walfs::core {

using format::kBlockSize;

absl::StatusOr<std::unique_ptr<Pool>> Pool::Open(std::unique_ptr<PersistentRegion> region,
                                                 const OpenOptions& options) {
  if (region->size() < 2 * kBlockSize) {
    return absl::DataLossError(absl::StrCat("pool is ", region->size(),
                                            " bytes: too small to hold a superblock"));
  }
  format::Superblock sbs[2];
  std::string errors[2];
  for (int i = 0; i < 2; ++i) {
    std::memcpy(&sbs[i], region->data() + format::kSuperblockOffset[i], sizeof(sbs[i]));
    errors[i] = SuperblockError(sbs[i], region->size());
  }
  if (!errors[0].empty() && !errors[1].empty()) {
    if (sbs[0].magic != format::kSuperblockMagic && sbs[1].magic != format::kSuperblockMagic) {
      return absl::DataLossError("not a walfs pool (no superblock magic; run mkfs.walfs)");
    }
    return absl::DataLossError(
        absl::StrCat("both superblocks are damaged: A: ", errors[0], "; B: ", errors[1]));
  }
  // One bad copy is survivable, but we refuse to run on a pool that is already damaged:
  // fsck.walfs --repair restores it from the good copy.
  for (int i = 0; i < 2; ++i) {
    if (!errors[i].empty()) {
      return absl::DataLossError(absl::StrCat("superblock ", i == 0 ? "A" : "B",
                                              " (offset ", format::kSuperblockOffset[i],
                                              ") is damaged: ", errors[i],
                                              "; run fsck.walfs --repair"));
    }
  }
  if (std::memcmp(&sbs[0], &sbs[1], sizeof(sbs[0])) != 0) {
    return absl::DataLossError(
        "superblocks A and B differ; run fsck.walfs --repair");
  }
  // The journal first: the state record it may hold says how big the data area is now
  // (format.h: a grow changes only the state record), and the pool is built with that.
  auto replay = Journal::Replay(*region, sbs[0], !options.read_only);
  if (!replay.ok()) return replay.status();
  format::PoolState state;
  std::memcpy(&state, region->data() + format::kStateOffset, sizeof(state));
  if (options.read_only) {
    // A read-only open does not apply the journal, so it reads through it instead.
    for (const auto& [off, bytes] : replay->images) {
      if (off == format::kStateOffset && bytes.size() == sizeof(state)) {
        std::memcpy(&state, bytes.data(), sizeof(state));
      }
    }
  }
  if (std::string e = PoolStateError(state, sbs[0], region->size()); !e.empty()) {
    return absl::DataLossError(absl::StrCat("state record (offset ", format::kStateOffset,
                                            "): ", e, "; run fsck.walfs --repair"));
  }
  std::unique_ptr<Pool> pool(
      new Pool(std::move(region), CurrentGeometry(sbs[0], state), options));
  if (replay->replayed) pool->counters_.journal_replays.fetch_add(1);
  absl::Status s = pool->Load(*replay, state);
  if (!s.ok()) return s;
  pool->log_.Start(std::make_unique<Journal>(*pool->region_, pool->sb_, replay->sequence + 1));
  if (!options.read_only) {
    s = pool->Recover();
    if (!s.ok()) return s;
    // Replay and recovery persist: a pool whose first persists fail is not mounted.
    s = pool->region_->health();
    if (!s.ok()) return s;
  }
  {
    MutexLock l(&pool->ns_mu_);
    pool->space_.PublishFree();
  }
  return pool;
}

absl::Status Pool::Load(const Journal::ReplayResult& replay,
                        const format::PoolState& state) {
  // A read-only open does not apply the journal, so it reads through it instead.
  absl::flat_hash_map<uint64_t, const char*> overlay;
  if (read_only_) {
    for (const auto& [off, bytes] : replay.images) overlay[off] = bytes.data();
  }
  log_.Load(state, replay.replayed ? replay.flags : 0);
  MutexLock ns(&ns_mu_);
  MutexLock l(&mu_);
  space_.inode_high_ = state.inode_high;
  space_.dirent_high_ = state.dirent_high;
  space_.guard_.Init(state.uninit_begin, state.uninit_end, {});  // the range, for LoadInodes
  space_.next_generation_ = std::max<uint64_t>(space_.next_generation_, replay.sequence + 1);
  absl::Status s = LoadInodes(overlay);
  if (!s.ok()) return s;
  s = LoadDirents(overlay);
  if (!s.ok()) return s;
  s = CheckTree();
  if (!s.ok()) return s;
  // Free space is not read here (pool_state.h). It is trusted when the newest
  // transaction says it is zero, or when nothing was committed since mkfs; otherwise
  // blocks are checked when first allocated (or ahead of that: VerifyFreeSpaceAhead).
  const bool trusted =
      !replay.replayed || (replay.flags & format::kJournalFlagFreeSpaceZero) != 0;
  space_.guard_.Init(state.uninit_begin, state.uninit_end,
              trusted ? std::map<uint64_t, uint64_t>{} : space_.alloc_.free_runs());
  space_.PublishVerified();
  return absl::OkStatus();
}

// Per-record checks are validate.h's (fsck makes the same); the cross-record ones that
// need the whole table stay here and in CheckTree (see validate.h for why).
absl::Status Pool::LoadInodes(const absl::flat_hash_map<uint64_t, const char*>& overlay) {
  inodes_.resize(sb_.inode_count);
  // Slots at or above inode_high_ were never used (format.h) and are not read. Slot 0 is
  // read from home: no transaction names it (ParseJournalSlot).
  for (uint64_t ino = space_.inode_high_; ino-- > 0;) {
    const uint64_t off = sb_.inode_table_offset + ino * format::kInodeSize;
    const auto ov = overlay.find(off);
    const char* raw = ov != overlay.end() ? ov->second : region_->data() + off;
    const InodeCheck check = CheckInodeSlot(ino, raw, sb_, region_->data());
    if (!check.problems.empty()) {
      return absl::DataLossError(
          absl::StrCat("inode ", ino, " (offset ", off, "): ", check.problems[0]));
    }
    if (check.kind == SlotKind::kFree) {
      if (ino != 0) space_.free_inodes_.push_back(ino);
      continue;
    }
    auto in = std::make_unique<Inode>();
    std::memcpy(&in->rec, raw, sizeof(in->rec));
    const format::InodeRecord& rec = in->rec;
    // Blocks owned by two inodes, or in the range no file has used since mkfs.
    const bool owns_blocks = rec.type == format::InodeType::kRegular ||
                             (rec.type == format::InodeType::kSymlink && rec.extent_count == 1);
    for (uint32_t i = 0; owns_blocks && i < rec.extent_count; ++i) {
      const format::Extent& x = rec.extents[i];
      absl::Status s = space_.alloc_.Reserve(x);
      if (!s.ok()) {
        return absl::DataLossError(
            absl::StrCat("inode ", ino, " (offset ", off, "): ", s.message()));
      }
      if (x.block < space_.guard_.uninit_end() &&
          x.block + x.count > space_.guard_.uninit_begin()) {
        return absl::DataLossError(
            absl::StrCat("inode ", ino, " (offset ", off, "): extent [", x.block, ", +", x.count,
                         ") lies in the range no file has used since mkfs (blocks ",
                         space_.guard_.uninit_begin(), "..", space_.guard_.uninit_end(), ")"));
      }
    }
    space_.next_generation_ = std::max(space_.next_generation_, rec.generation + 1);
    inodes_[ino] = std::move(in);
  }
  return absl::OkStatus();
}

absl::Status Pool::LoadDirents(const absl::flat_hash_map<uint64_t, const char*>& overlay) {
  auto kind = [](const Inode* in) {
    if (in == nullptr) return SlotKind::kFree;
    return in->rec.state == format::InodeState::kLive ? SlotKind::kLive : SlotKind::kOrphan;
  };
  auto type = [](const Inode* in) {
    return in == nullptr ? format::InodeType::kNone : in->rec.type;
  };
  for (uint64_t slot = space_.dirent_high_; slot-- > 0;) {
    const uint64_t off = sb_.dirent_table_offset + slot * format::kDirentSize;
    const auto ov = overlay.find(off);
    const char* raw = ov != overlay.end() ? ov->second : region_->data() + off;
    if (AllZero(raw, format::kDirentSize)) {
      space_.free_slots_.push_back(slot);
      continue;
    }
    auto where = [&] { return absl::StrCat("directory entry ", slot, " (offset ", off, "): "); };
    format::DirentRecord d;
    std::memcpy(&d, raw, sizeof(d));
    std::string error = DirentRecordError(d, sb_.inode_count);
    Inode* parent = nullptr;
    Inode* child = nullptr;
    if (error.empty()) {
      parent = Find(d.parent);
      child = Find(d.child);
      error = CheckDirentLink(d, kind(parent), type(parent), kind(child), type(child)).problem;
    }
    if (!error.empty()) return absl::DataLossError(absl::StrCat(where(), error));
    const std::string_view name(d.name, d.name_length);
    if (parent->names.contains(AsKey(name))) {
      return absl::DataLossError(absl::StrCat(where(), "duplicate name \"", AsKey(name),
                                              "\" in directory ", d.parent));
    }
    if (child->rec.type == format::InodeType::kDirectory) {
      if (child->parent_slot != UINT64_MAX) {
        return absl::DataLossError(
            absl::StrCat(where(), "directory ", d.child, " has more than one name"));
      }
      child->parent_slot = slot;
    }
    AddName(slot, d.parent, d.child, name);
  }
  return absl::OkStatus();
}

absl::Status Pool::CheckTree() {
  // Reachability first, so a broken tree is reported as such rather than as the link
  // counts it throws off: every live inode but the root is named, and every directory's
  // chain of parents reaches the root.
  absl::flat_hash_map<uint64_t, uint32_t> names;
  absl::flat_hash_map<uint64_t, uint32_t> subdirs;
  for (const auto& [slot, d] : dirents_) {
    ++names[d.child];
    if (inodes_[d.child]->rec.type == format::InodeType::kDirectory) ++subdirs[d.parent];
  }
  for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
    const Inode* in = inodes_[ino].get();
    if (in == nullptr) continue;
    if (in->rec.state == format::InodeState::kOrphan) {
      if (names[ino] != 0) {
        return absl::DataLossError(absl::StrCat("inode ", ino, " is an orphan but is named"));
      }
      continue;
    }
    if (ino != format::kRootInode && names[ino] == 0) {
      return absl::DataLossError(absl::StrCat("inode ", ino, " is live but has no name"));
    }
  }
  // Every directory but the root now has exactly one name (LoadDirents refuses a second),
  // so each step up the tree has a parent_slot.
  for (uint64_t ino = 2; ino < inodes_.size(); ++ino) {
    const Inode* in = inodes_[ino].get();
    if (in == nullptr || in->rec.state != format::InodeState::kLive ||
        in->rec.type != format::InodeType::kDirectory) {
      continue;
    }
    // Walk to the root; more steps than inodes means a cycle.
    uint64_t cur = ino;
    for (uint64_t steps = 0; cur != format::kRootInode; ++steps) {
      if (steps > inodes_.size()) {
        return absl::DataLossError(absl::StrCat("directory ", ino,
                                                " is in a directory cycle the root does "
                                                "not reach"));
      }
      cur = dirents_.at(inodes_[cur]->parent_slot).parent;
    }
  }
  for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
    const Inode* in = inodes_[ino].get();
    if (in == nullptr || in->rec.state != format::InodeState::kLive) continue;
    const uint32_t expected =
        in->rec.type == format::InodeType::kDirectory ? 2 + subdirs[ino] : names[ino];
    if (in->rec.nlink != expected) {
      return absl::DataLossError(absl::StrCat("inode ", ino, " has link count ",
                                              in->rec.nlink, " but ", expected, " links"));
    }
  }
  return absl::OkStatus();
}

absl::Status Pool::Recover() {
  // Orphans: nothing is open after a restart, so all of them go.
  std::vector<uint64_t> orphans;
  {
    MutexLock l(&mu_);
    for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
      Inode* in = inodes_[ino].get();
      if (in == nullptr) continue;
      if (in->rec.state == format::InodeState::kOrphan) {
        orphans.push_back(ino);
        continue;
      }
      // An unacknowledged write may have reached media beyond the durable size: restore
      // the invariant that allocated bytes past EOF read as zero.
      if (in->rec.type != format::InodeType::kRegular) continue;
      const uint64_t allocated = AllocatedBlocks(in->rec) * kBlockSize;
      ForEachRun(sb_.data_offset, in->rec, in->rec.size, allocated - in->rec.size,
                 [&](uint64_t pool_off, uint64_t n, uint64_t) {
                   ZeroUnlessZero(*region_, pool_off, n);
                 });
    }
    region_->Drain();
  }
  space_.ReclaimAll(orphans);
  // The orphans a crash left are freed in one commit (at most kMaxPendingFrees per
  // commit) rather than one each; a failure leaves them to the next open.
  if (absl::Status s = space_.CommitPendingFrees(); !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

void Pool::AddName(uint64_t slot, uint64_t parent, uint64_t child, std::string_view name) {
  Inode* p = inodes_[parent].get();
  p->names[std::string(name)] = slot;
  p->slots.insert(slot);
  dirents_[slot] = Dirent{parent, child, std::string(name)};
}

}  // namespace walfs::core
