// Edit: one metadata change, built from copies, committed, then applied (pool.h: "Apply
// after commit"). The only writer of the tables after open; stores no file data.
#include "core/edit.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/pool.h"
#include "core/status.h"
#include "core/validate.h"

namespace walfs::core {

Edit::Edit(Pool& pool) : pool_(pool) {}

Edit::~Edit() {
  if (!done_) Abort();
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) (*it)->mu.Unlock();
}

void Edit::Lock(uint64_t ino) {
  if (recs_.contains(ino)) return;
  for (Inode* in : locked_) {
    if (in == pool_.Find(ino)) return;
  }
  Inode* in = pool_.Find(ino);
  in->mu.Lock();
  locked_.push_back(in);
}

void Edit::LockInOrder(std::vector<uint64_t> inos) {
  std::sort(inos.begin(), inos.end());
  for (uint64_t ino : inos) {
    if (ino != 0 && pool_.Find(ino) != nullptr) Lock(ino);
  }
}

const format::InodeRecord& Edit::View(uint64_t ino) {
  if (auto it = recs_.find(ino); it != recs_.end()) return it->second.rec;
  Lock(ino);
  return pool_.Find(ino)->rec;
}

format::InodeRecord& Edit::Rec(uint64_t ino) {
  if (auto it = recs_.find(ino); it != recs_.end()) return it->second.rec;
  Lock(ino);
  Inode* in = pool_.Find(ino);
  return recs_.emplace(ino, Copy{in->rec, in, nullptr}).first->second.rec;
}

absl::StatusOr<uint64_t> Edit::NewInode(format::InodeType type, uint32_t mode,
                                        const Caller& c) {
  auto taken = pool_.space_.TakeInode();
  if (!taken.ok()) return taken.status();
  const uint64_t ino = *taken;
  // A dropped edit puts it on the free list either way (a fresh slot is zero).
  new_inodes_.push_back(ino);
  format::InodeRecord r{};
  r.state = format::InodeState::kLive;
  r.type = type;
  r.generation = pool_.space_.NextGeneration();
  r.mode = TypeBits(type) | (mode & 07777);
  r.uid = c.uid;
  r.gid = c.gid;
  r.nlink = type == format::InodeType::kDirectory ? 2 : 1;
  r.atime_ns = r.mtime_ns = r.ctime_ns = NowNs();
  recs_.emplace(ino, Copy{r, nullptr, std::make_shared<Inode>()});
  return ino;
}

absl::StatusOr<uint64_t> Edit::NewSlot() {
  auto slot = pool_.space_.TakeSlot();
  if (!slot.ok()) return slot.status();
  new_slots_.push_back(*slot);
  return *slot;
}

void Edit::SetDirent(uint64_t slot, uint64_t parent, uint64_t child,
                     std::string_view name) {
  dirents_.emplace_back(slot, Dirent{parent, child, std::string(name)});
}

void Edit::RemoveDirent(uint64_t slot) { dirents_.emplace_back(slot, std::nullopt); }

void Edit::FreeInode(uint64_t ino) {
  freed_.push_back(ino);
  const format::InodeRecord& r = pool_.Find(ino)->rec;  // extents: changed under ns_mu_ only
  for (uint32_t i = 0; i < r.extent_count && i < format::kMaxExtents; ++i) {
    released_.push_back(r.extents[i]);
  }
}

absl::Status Edit::Commit() {
  const format::Superblock& sb = pool_.sb_;
  // The pool's pending frees ride with this commit (Space::Reclaim).
  carried_frees_ = pool_.space_.TakePendingFrees();
  const size_t own_released = released_.size();
  for (uint64_t ino : carried_frees_) FreeInode(ino);
  for (size_t i = own_released; i < released_.size(); ++i) {
    carried_free_blocks_ += released_[i].count;
  }
  Transaction txn;
  for (auto& [ino, c] : recs_) {
    // msync mode: a record never becomes durable ahead of the bytes it covers. The
    // dirty range is where the live record's extents put it.
    if (c.in != nullptr) pool_.data_.FlushDirty(*c.in);
    txn.PutInode(sb, ino, c.rec);
  }
  for (uint64_t ino : freed_) txn.FreeInode(sb, ino);
  for (const auto& [slot, d] : dirents_) {
    if (!d) {
      txn.FreeDirent(sb, slot);
      continue;
    }
    format::DirentRecord r{};
    r.in_use = 1;
    auto it = recs_.find(d->child);
    r.type = it != recs_.end() ? it->second.rec.type : pool_.Find(d->child)->rec.type;
    r.name_length = static_cast<uint16_t>(d->name.size());
    r.parent = d->parent;
    r.child = d->child;
    std::memcpy(r.name, d->name.data(), d->name.size());
    txn.PutDirent(sb, slot, r);
  }
  bool committed = false;
  absl::Status s = pool_.log_.Commit(txn, &committed);
  if (committed) {
    Apply();
  } else {
    Abort();
    reclaim_.clear();
  }
  done_ = true;
  return s;
}

void Edit::Apply() {
  const int64_t now = NowNs();
  {
    MutexLock l(&pool_.mu_);
    for (auto& [ino, c] : recs_) {
      if (c.in == nullptr) {
        c.fresh->rec = c.rec;
        c.fresh->committed_ns = now;
        pool_.inodes_[ino] = c.fresh;
        continue;
      }
      c.in->rec = c.rec;  // this edit holds c.in->mu
      c.in->size_dirty = c.in->mtime_dirty = false;
      c.in->committed_ns = now;
    }
    // Every changed slot loses its old entry first, then gets its new one, so an entry
    // moved between slots (rename, exchange) never meets itself.
    for (const auto& [slot, d] : dirents_) {
      auto it = pool_.dirents_.find(slot);
      if (it == pool_.dirents_.end()) continue;
      Inode* p = pool_.inodes_[it->second.parent].get();
      p->names.erase(it->second.name);
      p->slots.erase(slot);
      Inode* old_child = pool_.Find(it->second.child);
      if (old_child != nullptr && old_child->parent_slot == slot) {
        old_child->parent_slot = UINT64_MAX;
      }
      pool_.dirents_.erase(it);
    }
    for (const auto& [slot, d] : dirents_) {
      if (!d) continue;
      Inode* p = pool_.inodes_[d->parent].get();
      p->names[d->name] = slot;
      p->slots.insert(slot);
      pool_.dirents_[slot] = *d;
      Inode* child = pool_.inodes_[d->child].get();
      if (child->rec.type == format::InodeType::kDirectory) child->parent_slot = slot;
    }
    for (uint64_t ino : freed_) pool_.inodes_[ino].reset();
  }
  // Allocation state (ns_mu_ only): slots and inodes this edit freed become reusable.
  for (const auto& [slot, d] : dirents_) {
    if (!d) pool_.space_.ReturnSlot(slot);
  }
  for (uint64_t ino : freed_) pool_.space_.ReturnInode(ino);
  for (const format::Extent& e : released_) pool_.space_.ReturnBlocks(e);
  pool_.space_.PublishFree();
  // Now the allocator's (Statfs may count them twice for this instant, never not at all).
  pool_.space_.PendingFreesApplied(carried_free_blocks_);
}

void Edit::Abort() {
  // Blocks Grow took were free (so zero) and nobody stored into them: the records naming
  // them were never applied.
  for (const format::Extent& e : allocated_) pool_.space_.ReturnBlocks(e);
  allocated_.clear();
  for (uint64_t ino : new_inodes_) pool_.space_.ReturnInode(ino);
  new_inodes_.clear();
  for (uint64_t slot : new_slots_) pool_.space_.ReturnSlot(slot);
  new_slots_.clear();
  // Still zeroed orphans, for the next commit to free.
  pool_.space_.ReturnPendingFrees(carried_frees_);
  carried_frees_.clear();
}

}  // namespace walfs::core
