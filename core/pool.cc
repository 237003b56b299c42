// Pool: open, validation, recovery, and the metadata helpers shared by every operation.
#include "core/pool.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/all_zero.h"
#include "core/status.h"
#include "core/validate.h"

namespace walfs::core {
namespace {

using format::kBlockSize;

// Segments start on 2 MiB boundaries of the pool where free space allows, for 2 MiB
// page-table entries in the processes that map them (BlockAllocator).
constexpr uint64_t kHugePageBlocks = (uint64_t{2} << 20) / kBlockSize;

}  // namespace

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

Pool::Pool(std::unique_ptr<PersistentRegion> region, const format::Superblock& sb,
           const OpenOptions& options)
    : region_(std::move(region)),
      sb_(sb),
      mode_(region_->is_pmem() ? DurabilityMode::kPmem : DurabilityMode::kMsync),
      read_only_(options.read_only),
      zero_elision_(options.zero_elision),
      reserve_blocks_(ReservedBlocks(sb)),
      alloc_(sb.data_blocks, kHugePageBlocks, sb.data_offset / kBlockSize),
      log_(free_space_zero_) {}

Pool::~Pool() = default;

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
    pool->PublishFree();
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
  inode_high_ = state.inode_high;
  dirent_high_ = state.dirent_high;
  guard_.Init(state.uninit_begin, state.uninit_end, {});  // the range, for LoadInodes
  next_generation_ = std::max<uint64_t>(next_generation_, replay.sequence + 1);
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
  guard_.Init(state.uninit_begin, state.uninit_end,
              trusted ? std::map<uint64_t, uint64_t>{} : alloc_.free_runs());
  PublishVerified();
  return absl::OkStatus();
}

// Per-record checks are validate.h's (fsck makes the same); the cross-record ones that
// need the whole table stay here and in CheckTree (see validate.h for why).
absl::Status Pool::LoadInodes(const absl::flat_hash_map<uint64_t, const char*>& overlay) {
  inodes_.resize(sb_.inode_count);
  // Slots at or above inode_high_ were never used (format.h) and are not read. Slot 0 is
  // read from home: no transaction names it (ParseJournalSlot).
  for (uint64_t ino = inode_high_; ino-- > 0;) {
    const uint64_t off = sb_.inode_table_offset + ino * format::kInodeSize;
    const auto ov = overlay.find(off);
    const char* raw = ov != overlay.end() ? ov->second : region_->data() + off;
    const InodeCheck check = CheckInodeSlot(ino, raw, sb_, region_->data());
    if (!check.problems.empty()) {
      return absl::DataLossError(
          absl::StrCat("inode ", ino, " (offset ", off, "): ", check.problems[0]));
    }
    if (check.kind == SlotKind::kFree) {
      if (ino != 0) free_inodes_.push_back(ino);
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
      absl::Status s = alloc_.Reserve(x);
      if (!s.ok()) {
        return absl::DataLossError(
            absl::StrCat("inode ", ino, " (offset ", off, "): ", s.message()));
      }
      if (x.block < guard_.uninit_end() && x.block + x.count > guard_.uninit_begin()) {
        return absl::DataLossError(absl::StrCat(
            "inode ", ino, " (offset ", off, "): extent [", x.block, ", +", x.count,
            ") lies in the range no file has used since mkfs (blocks ", guard_.uninit_begin(),
            "..", guard_.uninit_end(), ")"));
      }
    }
    next_generation_ = std::max(next_generation_, rec.generation + 1);
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
  for (uint64_t slot = dirent_high_; slot-- > 0;) {
    const uint64_t off = sb_.dirent_table_offset + slot * format::kDirentSize;
    const auto ov = overlay.find(off);
    const char* raw = ov != overlay.end() ? ov->second : region_->data() + off;
    if (AllZero(raw, format::kDirentSize)) {
      free_slots_.push_back(slot);
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
  ReclaimAll(orphans);
  // The orphans a crash left are freed in one commit (at most kMaxPendingFrees per
  // commit) rather than one each; a failure leaves them to the next open.
  if (absl::Status s = CommitPendingFrees(); !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

Inode* Pool::Find(InodeId ino) const {
  if (ino == 0 || ino >= inodes_.size()) return nullptr;
  return inodes_[ino].get();
}

absl::StatusOr<Inode*> Pool::Get(InodeId ino) const {
  Inode* in = Find(ino);
  if (in == nullptr) return PosixError(absl::StrCat("inode ", ino), ESTALE);
  return in;
}

absl::StatusOr<Inode*> Pool::GetDir(InodeId ino) const {
  auto in = Get(ino);
  if (!in.ok()) return in;
  if ((*in)->rec.type != format::InodeType::kDirectory) {
    return PosixError(absl::StrCat("inode ", ino), ENOTDIR);
  }
  if ((*in)->rec.state != format::InodeState::kLive) {
    return PosixError(absl::StrCat("directory ", ino, " was removed"), ENOENT);
  }
  return in;
}

absl::StatusOr<std::shared_ptr<Inode>> Pool::Pin(InodeId ino) {
  ReaderMutexLock l(&mu_);
  if (ino == 0 || ino >= inodes_.size() || inodes_[ino] == nullptr) {
    return PosixError(absl::StrCat("inode ", ino), ESTALE);
  }
  return inodes_[ino];
}

absl::Status Pool::Writable() const {
  if (read_only_) return PosixError("pool opened read-only", EROFS);
  if (grown_.load()) {
    return PosixError("the pool was grown: close it and open it again to use it", EROFS);
  }
  return absl::OkStatus();
}

Attr Pool::MakeAttr(InodeId ino, const format::InodeRecord& r) const {
  Attr a;
  a.ino = ino;
  a.generation = r.generation;
  a.mode = r.mode;
  a.nlink = r.nlink;
  a.uid = r.uid;
  a.gid = r.gid;
  a.size = r.type == format::InodeType::kDirectory ? kBlockSize : r.size;
  a.blocks = AllocatedBlocks(r) * (kBlockSize / 512);
  a.atime_ns = r.atime_ns;
  a.mtime_ns = r.mtime_ns;
  a.ctime_ns = r.ctime_ns;
  a.rdev = r.rdev;
  return a;
}

uint64_t Pool::TakeFreshSlot(uint64_t& high, uint64_t table_offset, uint64_t record_size) {
  const uint64_t slot = high++;
  // Below the mark a slot is a valid record or zero (format.h), and a slot handed out
  // may go back to the free list unwritten (a dropped Edit): zero it before the mark that
  // covers it can be committed. Free after a new file or an earlier use; a write only
  // when mkfs --force left an older pool's bytes.
  const uint64_t off = table_offset + slot * record_size;
  if (!AllZero(region_->data() + off, record_size)) {
    region_->Fill(off, 0, record_size);
    region_->Persist(off, record_size);
  }
  NoteStateChanged();
  return slot;
}

absl::Status Pool::PrepareBlocks(const format::Extent& e) {
  const uint64_t begin = guard_.uninit_begin(), end = guard_.uninit_end();
  absl::Status s = guard_.Prepare(*region_, sb_.data_offset, e);
  if (guard_.uninit_begin() != begin || guard_.uninit_end() != end) NoteStateChanged();
  PublishVerified();
  return s;
}

void Pool::NoteStateChanged() {
  log_.NoteMarks(inode_high_, dirent_high_, guard_.uninit_begin(), guard_.uninit_end());
}

void Pool::AddName(uint64_t slot, uint64_t parent, uint64_t child, std::string_view name) {
  Inode* p = inodes_[parent].get();
  p->names[std::string(name)] = slot;
  p->slots.insert(slot);
  dirents_[slot] = Dirent{parent, child, std::string(name)};
}

bool Pool::IsAncestor(uint64_t dir, uint64_t of) const {
  for (uint64_t cur = of;;) {
    if (cur == dir) return true;
    if (cur == format::kRootInode) return false;
    cur = dirents_.at(inodes_[cur]->parent_slot).parent;
  }
}

bool Pool::AwaitReclaims() {
  constexpr auto kReclaimWait = std::chrono::seconds(10);
  bool freed = false;
  if (CommitPendingFrees(&freed).ok() && freed) return true;
  if (reclaims_in_flight_.load() == 0) return false;
  const uint64_t done = reclaims_done_.load();
  const auto deadline = std::chrono::steady_clock::now() + kReclaimWait;
  while (reclaims_in_flight_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // What finished meanwhile is pending: free it for the allocator.
  return CommitPendingFrees().ok() && reclaims_done_.load() != done;
}

absl::Status Pool::CommitPendingFrees(bool* committed) {
  MutexLock ns(&ns_mu_);
  if (committed != nullptr) *committed = false;
  if (pending_frees_.empty()) return absl::OkStatus();
  Edit e(*this);  // carries nothing but them
  absl::Status s = e.Commit();
  if (committed != nullptr) *committed = s.ok();
  return s;
}

void Pool::ReclaimAll(const std::vector<uint64_t>& inos) {
  for (uint64_t ino : inos) Reclaim(ino);
}

void Pool::Reclaim(uint64_t ino) {
  format::InodeRecord rec;
  uint64_t blocks = 0;
  {
    MutexLock ns(&ns_mu_);
    Inode* in = Find(ino);
    // A leased orphan's blocks may still be mapped by a client (lease.cc).
    if (in == nullptr || in->reclaiming || in->rec.state != format::InodeState::kOrphan ||
        in->lookups.load() != 0 || in->leases != 0) {
      return;
    }
    in->reclaiming = true;
    {
      // A thread that pinned the inode before it lost its last reference stores
      // nothing into the blocks from now on (Write checks `gone`).
      MutexLock il(&in->mu);
      in->gone = true;
      rec = in->rec;
    }
    blocks = AllocatedBlocks(rec);
    reclaims_in_flight_.fetch_add(1);
    // Free for statfs from now on: an allocation that needs them waits for the zeroing
    // (AwaitReclaims), so nothing is handed out before it is zero.
    zeroing_blocks_.fetch_add(blocks);
  }
  struct Done {
    Pool* pool;
    uint64_t blocks;
    ~Done() {
      pool->zeroing_blocks_.fetch_sub(blocks);
      pool->reclaims_done_.fetch_add(1);
      pool->reclaims_in_flight_.fetch_sub(1);
    }
  } done{this, blocks};
  // The orphan owns its extents until the commit below, so nobody else touches them and
  // the zeroing runs without locks. A crash before the commit leaves the orphan in place
  // and the next open zeroes it again.
  uint64_t stored = 0;
  for (uint32_t i = 0; i < rec.extent_count; ++i) {
    const auto& e = rec.extents[i];
    stored += ZeroUnlessZero(*region_, sb_.data_offset + e.block * kBlockSize,
                             e.count * kBlockSize);
  }
  region_->Drain();
  MutexLock ns(&ns_mu_);
  // Zero and durably so: from here the record may be freed by any commit (pool.h).
  pending_free_blocks_.fetch_add(blocks);
  pending_frees_.push_back(ino);
  PublishFree();
  counters_.orphans_reclaimed.fetch_add(1, std::memory_order_relaxed);
  counters_.zeroed_blocks.fetch_add(stored / kBlockSize, std::memory_order_relaxed);
  if (pending_frees_.size() >= kMaxPendingFrees) {
    // On failure they stay pending, and orphans on media for the next open to reclaim.
    Edit e(*this);
    (void)e.Commit();
  }
}

void Pool::PublishFree() {
  free_blocks_.store(alloc_.free_blocks());
  // Slots at or above the mark were never used (format.h) and are free too.
  free_inodes_count_.store(free_inodes_.size() + pending_frees_.size() +
                           (sb_.inode_count - inode_high_));
}

std::string Pool::ReserveNote() const {
  if (alloc_.free_blocks() == 0 || reserve_blocks_ == 0) return "";
  return absl::StrCat(" (", alloc_.free_blocks(), " free, of which the last ",
                      reserve_blocks_, " are reserved for WAL segments)");
}

uint64_t Pool::VerifyFreeSpaceAhead(uint64_t max_blocks) {
  if (read_only_) return 0;
  FreeSpaceGuard::Span span;
  {
    MutexLock l(&ns_mu_);
    span = guard_.NextAhead(max_blocks);
  }
  if (span.empty()) return 0;
  // Unlocked: blocks allocated meanwhile are verified by their Prepare and are no longer
  // marked by AheadDone (pool_state.h).
  const uint64_t bad = FreeSpaceGuard::FirstNonZero(*region_, sb_.data_offset, span.begin,
                                                    span.end);
  MutexLock l(&ns_mu_);
  guard_.AheadDone(span, bad);
  PublishVerified();
  return (bad < span.end ? bad + 1 : span.end) - span.begin;
}

FsStats Pool::Statfs() {
  FsStats s;
  s.block_size = kBlockSize;
  s.total_blocks = sb_.data_blocks;
  s.free_blocks = std::min(sb_.data_blocks, free_blocks_.load() + zeroing_blocks_.load() +
                                                pending_free_blocks_.load());
  s.reserved_blocks = std::min(s.free_blocks, reserve_blocks_);
  s.total_inodes = sb_.inode_count - 1;
  s.free_inodes = free_inodes_count_.load();
  return s;
}

Counters Pool::counters() const {
  Counters c;
  const auto& a = counters_;
  c.writes = a.writes.load();
  c.write_bytes = a.write_bytes.load();
  c.reads = a.reads.load();
  c.read_bytes = a.read_bytes.load();
  c.fsyncs = a.fsyncs.load();
  c.fsyncdirs = a.fsyncdirs.load();
  c.sync_writes = a.sync_writes.load();
  c.journal_commits = log_.commits();
  c.journal_replays = a.journal_replays.load();
  c.orphans_reclaimed = a.orphans_reclaimed.load();
  c.zeroed_blocks = a.zeroed_blocks.load();
  c.leases_granted = a.leases_granted.load();
  c.leases_released = a.leases_released.load();
  c.leases_active = c.leases_granted - std::min(c.leases_released, c.leases_granted);
  return c;
}

absl::Status Pool::Close() {
  if (read_only_) return absl::OkStatus();
  std::vector<uint64_t> orphans;
  {
    MutexLock ns(&ns_mu_);
    std::vector<uint64_t> dirty;
    // Under ns_mu_ nothing but this thread changes inodes_, and an inode's lock is never
    // taken under mu_ (pool.h).
    for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
      Inode* in = inodes_[ino].get();
      if (in == nullptr) continue;
      // The kernel's references end with the mount. Leases do not: a client may still
      // map a leased orphan, which Reclaim leaves to the next Open (the daemon refuses
      // to open a pool while a client holds it, fs/pool_lock.h).
      in->lookups.store(0);
      if (in->reclaiming) continue;  // zeroed, its record freed below (pending_frees_)
      if (in->rec.state == format::InodeState::kOrphan) orphans.push_back(ino);
      MutexLock il(&in->mu);
      if (in->size_dirty || in->mtime_dirty || in->dirty_hi > in->dirty_lo) {
        dirty.push_back(ino);
      }
    }
    for (uint64_t ino : dirty) {
      Edit e(*this);
      e.Rec(ino);
      absl::Status s = e.Commit();
      if (!s.ok()) return s;
    }
  }
  ReclaimAll(orphans);
  if (absl::Status s = CommitPendingFrees(); !s.ok()) return s;
  // Free space became known zero after the newest commit (verified since): one more
  // commit says so, so that the next open trusts it instead of reading it again.
  if (absl::Status s = log_.CommitFreeSpaceFlag(); !s.ok()) return s;
  // msync mode: the home records of the last transactions may be stored but only
  // durable through the journal (journal.h); a clean close persists them at home too.
  if (absl::Status s = log_.Sync(); !s.ok()) return s;
  return region_->health();
}

absl::Status Pool::GrowDataArea(uint64_t new_blocks) {
  if (absl::Status s = Writable(); !s.ok()) return s;
  const uint64_t old_blocks = sb_.data_blocks;
  if (new_blocks <= old_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the pool's data area is ", old_blocks, " blocks (", sb_.capacity,
        " bytes in all); a grow must add at least one ", kBlockSize, "-byte block"));
  }
  if (new_blocks > (region_->size() - sb_.data_offset) / kBlockSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a data area of ", new_blocks, " blocks does not fit in the ", region_->size(),
        "-byte region (the file must be made that big first)"));
  }
  MutexLock ns(&ns_mu_);
  uint64_t begin = guard_.uninit_begin(), end = guard_.uninit_end();
  if (begin == end) {
    // Nothing uninitialised: the new blocks become the range, unread and unwritten.
    begin = old_blocks;
    end = new_blocks;
  } else if (end == old_blocks) {
    end = new_blocks;  // the range reaches the old end: it extends over the new blocks
  } else {
    // The range ends below files allocated from the top, and one range cannot also
    // cover the new blocks: they must be zero before the commit makes them free space.
    // A region grown by extending its file reads as zeros, so this reads and, normally,
    // writes nothing. Zeros written here land past the committed capacity: a crash
    // before the commit leaves the old pool as it was.
    constexpr uint64_t kChunk = 256;  // blocks persisted at a time
    for (uint64_t b = old_blocks; b < new_blocks; b += kChunk) {
      const uint64_t n = std::min(kChunk, new_blocks - b);
      const uint64_t off = sb_.data_offset + b * kBlockSize;
      if (AllZero(region_->data() + off, n * kBlockSize)) continue;
      region_->Fill(off, 0, n * kBlockSize);
      region_->Persist(off, n * kBlockSize);
    }
    if (absl::Status h = region_->health(); !h.ok()) return h;
  }
  bool done = false;
  absl::Status s = log_.CommitGrow(new_blocks, begin, end, &done);
  if (done) {
    grown_.store(true);
    // The range as committed, so a later NoteStateChanged does not write the old one
    // back (this pool allocates only from its old blocks, see pool.h). What was verified
    // stays so: the new blocks are in the range or zero.
    guard_.SetRange(begin, end);
  }
  return s;
}

}  // namespace walfs::core
