// Namespace: names, links, directories and attributes (namespace.h). Changes them only
// through Edits; stores no file data but an out-of-line symlink target.
//
// Each operation validates everything under the namespace lock, builds its new records
// from copies in one Edit, commits it, and only then changes the in-memory state: the
// change is atomic and durable on return, and a failed commit changes nothing. Inodes
// that lose their last link and reference are reclaimed after ns_mu_ is released, since
// zeroing their blocks can take milliseconds.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/edit.h"
#include "core/names.h"
#include "core/namespace.h"
#include "core/pool.h"
#include "core/status.h"

namespace walfs::core {
namespace {

bool IsDir(const format::InodeRecord& r) { return r.type == format::InodeType::kDirectory; }

uint32_t DirentType(format::InodeType t) {
  switch (t) {
    case format::InodeType::kDirectory: return S_IFDIR;
    case format::InodeType::kSymlink: return S_IFLNK;
    case format::InodeType::kFifo: return S_IFIFO;
    case format::InodeType::kSocket: return S_IFSOCK;
    case format::InodeType::kCharDevice: return S_IFCHR;
    case format::InodeType::kBlockDevice: return S_IFBLK;
    default: return S_IFREG;
  }
}

}  // namespace

absl::StatusOr<std::pair<uint64_t, uint64_t>> Namespace::NewEntry(Edit& e, InodeId parent,
                                                                  format::InodeType type,
                                                                  uint32_t mode,
                                                                  const Caller& caller) {
  auto slot = e.NewSlot();
  if (!slot.ok()) return slot.status();
  auto ino = NewEntryInode(e, parent, type, mode, caller);
  if (!ino.ok()) return ino.status();
  return std::make_pair(*slot, *ino);
}

absl::StatusOr<uint64_t> Namespace::NewEntryInode(Edit& e, InodeId parent, format::InodeType type,
                                                  uint32_t mode, const Caller& caller) {
  // A set-group-ID directory gives new entries its group, and new subdirectories the
  // bit itself (POSIX; on FUSE the kernel leaves both to the file system).
  Caller owner = caller;
  const format::InodeRecord& dir = e.View(parent);
  if (dir.mode & S_ISGID) {
    owner.gid = dir.gid;
    if (type == format::InodeType::kDirectory) mode |= S_ISGID;
  }
  return e.NewInode(type, mode, owner);
}

absl::StatusOr<Attr> Namespace::CommitEntry(Edit& e, InodeId parent, std::string_view name,
                                            uint64_t slot, uint64_t ino) {
  e.SetDirent(slot, parent, ino, name);
  Touch(e.Rec(parent), true);
  const format::InodeRecord& rec = e.Rec(ino);
  absl::Status s = e.Commit();
  if (!s.ok()) return s;
  // Nobody can have found the new inode before this reply names it, so `rec` (now the
  // live record) is still what it holds.
  pool_.Find(ino)->lookups.fetch_add(1);
  return pool_.MakeAttr(ino, rec);
}

void Namespace::DropLink(Edit& e, uint64_t ino) {
  format::InodeRecord& r = e.Rec(ino);
  if (r.type == format::InodeType::kDirectory) {
    r.nlink = 0;
  } else {
    --r.nlink;
  }
  Touch(r, false);
  if (r.nlink == 0) {
    r.state = format::InodeState::kOrphan;
    if (pool_.Find(ino)->lookups.load() == 0) e.reclaim().push_back(ino);
  }
}

absl::StatusOr<Attr> Namespace::Lookup(InodeId parent, std::string_view name) {
  if (name.size() > format::kMaxNameLength) return PosixError("lookup", ENAMETOOLONG);
  uint64_t ino;
  std::shared_ptr<Inode> in;
  {
    ReaderMutexLock l(&pool_.mu_);
    auto dir = pool_.GetDir(parent);
    if (!dir.ok()) return dir.status();
    if (name == ".") {
      ino = parent;
    } else if (name == "..") {
      ino = parent == format::kRootInode ? parent
                                         : pool_.dirents_.at((*dir)->parent_slot).parent;
    } else {
      auto it = (*dir)->names.find(AsKey(name));
      if (it == (*dir)->names.end()) return PosixError("lookup", ENOENT);
      ino = pool_.dirents_.at(it->second).child;
    }
    in = pool_.inodes_[ino];
    in->lookups.fetch_add(1);
  }
  // The record's size and times belong to the inode's lock, which is never taken under
  // mu_ (pool.h).
  ReaderMutexLock il(&in->mu);
  return pool_.MakeAttr(ino, in->rec);
}

void Namespace::Forget(InodeId ino, uint64_t nlookup) {
  bool reclaim = false;
  {
    ReaderMutexLock l(&pool_.mu_);
    Inode* in = pool_.Find(ino);
    if (in == nullptr) return;
    uint64_t before = in->lookups.load();
    while (!in->lookups.compare_exchange_weak(before,
                                              before > nlookup ? before - nlookup : 0)) {
    }
    reclaim = before <= nlookup && in->rec.state == format::InodeState::kOrphan;
  }
  if (reclaim) pool_.space_.Reclaim(ino);
}

absl::StatusOr<Attr> Namespace::GetAttr(InodeId ino) {
  auto in = pool_.Pin(ino);
  if (!in.ok()) return in.status();
  ReaderMutexLock il(&(*in)->mu);
  // Reclaimed: zeroed, and its record freed with the next commit (pending_frees_).
  if ((*in)->gone) return PosixError(absl::StrCat("inode ", ino), ESTALE);
  return pool_.MakeAttr(ino, (*in)->rec);
}

absl::StatusOr<Attr> Namespace::Create(InodeId parent, std::string_view name, uint32_t mode,
                                       const Caller& caller, bool exclusive) {
  absl::StatusOr<Attr> result = CreateOnce(parent, name, mode, caller, exclusive);
  while (!result.ok() && ErrnoFromStatus(result.status()) == ENOSPC &&
         pool_.space_.AwaitReclaims()) {
    result = CreateOnce(parent, name, mode, caller, exclusive);
  }
  return result;
}

absl::StatusOr<Attr> Namespace::CreateOnce(InodeId parent, std::string_view name, uint32_t mode,
                                           const Caller& caller, bool exclusive) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  MutexLock ns(&pool_.ns_mu_);
  auto dir = pool_.GetDir(parent);
  if (!dir.ok()) return dir.status();
  if (auto it = (*dir)->names.find(AsKey(name)); it != (*dir)->names.end()) {
    if (exclusive) return PosixError(name, EEXIST);
    const uint64_t ino = pool_.dirents_.at(it->second).child;
    Inode* in = pool_.inodes_[ino].get();
    if (IsDir(in->rec)) return PosixError(name, EISDIR);
    in->lookups.fetch_add(1);
    ReaderMutexLock il(&in->mu);
    return pool_.MakeAttr(ino, in->rec);
  }
  Edit e(pool_);
  auto entry = NewEntry(e, parent, format::InodeType::kRegular, mode, caller);
  if (!entry.ok()) return entry.status();
  const auto [slot, ino] = *entry;
  if (IsWalSegmentName(name)) {
    // A WAL segment gets its whole extent now, so its writes never allocate.
    format::InodeRecord& r = e.Rec(ino);
    r.flags |= format::kInodeFlagSegment;
    absl::Status s = pool_.space_.Grow(r, pool_.sb_.segment_size, e.allocated());
    if (!s.ok()) return s;
  }
  return CommitEntry(e, parent, name, slot, ino);
}

absl::StatusOr<Attr> Namespace::Mkdir(InodeId parent, std::string_view name, uint32_t mode,
                                      const Caller& caller) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  MutexLock ns(&pool_.ns_mu_);
  auto dir = pool_.GetDir(parent);
  if (!dir.ok()) return dir.status();
  if ((*dir)->names.contains(AsKey(name))) return PosixError(name, EEXIST);
  Edit e(pool_);
  auto entry = NewEntry(e, parent, format::InodeType::kDirectory, mode, caller);
  if (!entry.ok()) return entry.status();
  const auto [slot, ino] = *entry;
  ++e.Rec(parent).nlink;  // the new directory's ".."
  return CommitEntry(e, parent, name, slot, ino);
}

absl::StatusOr<Attr> Namespace::Symlink(InodeId parent, std::string_view name,
                                        std::string_view target, const Caller& caller) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  if (target.empty()) return PosixError("symlink target", ENOENT);
  if (target.size() > format::kMaxSymlinkTargetOutOfLine) {
    return PosixError(absl::StrCat("symlink target longer than ",
                                   format::kMaxSymlinkTargetOutOfLine, " bytes"),
                      ENAMETOOLONG);
  }
  if (target.find('\0') != std::string_view::npos) return PosixError("symlink target", EINVAL);
  MutexLock ns(&pool_.ns_mu_);
  auto dir = pool_.GetDir(parent);
  if (!dir.ok()) return dir.status();
  if ((*dir)->names.contains(AsKey(name))) return PosixError(name, EEXIST);
  if (target.size() <= format::kMaxSymlinkTarget) {
    Edit e(pool_);
    auto entry = NewEntry(e, parent, format::InodeType::kSymlink, 0777, caller);
    if (!entry.ok()) return entry.status();
    const auto [slot, ino] = *entry;
    format::InodeRecord& r = e.Rec(ino);
    r.size = target.size();
    std::memcpy(r.extents, target.data(), target.size());
    return CommitEntry(e, parent, name, slot, ino);
  }
  // Out of line (format.h): the orphan owning the block commits first, then the target
  // is persisted in the block (free space, so zero after the target), then the entry.
  uint64_t ino;
  format::Extent block;
  {
    Edit orphan(pool_);
    // The entry's slot is taken in the second edit; checking for one now keeps a full
    // table from costing a commit.
    if (!pool_.space_.HasFreeSlot()) return PosixError("directory entry table is full", ENOSPC);
    auto made = NewEntryInode(orphan, parent, format::InodeType::kSymlink, 0777, caller);
    if (!made.ok()) return made.status();
    ino = *made;
    auto b = pool_.space_.TakeBlock(orphan);
    if (!b.ok()) return b.status();
    block = *b;
    format::InodeRecord& r = orphan.Rec(ino);
    r.size = target.size();
    r.extent_count = 1;
    r.extents[0] = block;
    r.state = format::InodeState::kOrphan;
    r.nlink = 0;
    // Whether or not it reached the pool, a failure leaves no trace in memory, and the
    // next open reclaims an orphan that did.
    if (absl::Status s = orphan.Commit(); !s.ok()) return s;
  }
  const uint64_t off = pool_.sb_.data_offset + block.block * format::kBlockSize;
  pool_.region_->Store(off, target.data(), target.size());
  pool_.region_->Flush(off, target.size());
  pool_.region_->Drain();
  // The orphan stays (in memory and on media) if anything below fails: reclaimed at the
  // next open.
  if (absl::Status h = pool_.region_->health(); !h.ok()) return h;
  Edit e(pool_);
  e.LockInOrder({parent, ino});
  auto slot = e.NewSlot();
  if (!slot.ok()) return slot.status();
  format::InodeRecord& r = e.Rec(ino);
  r.state = format::InodeState::kLive;
  r.nlink = 1;
  return CommitEntry(e, parent, name, *slot, ino);
}

absl::StatusOr<Attr> Namespace::Mknod(InodeId parent, std::string_view name, uint32_t mode,
                                      uint64_t rdev, const Caller& caller) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  format::InodeType type;
  switch (mode & S_IFMT) {
    case S_IFIFO: type = format::InodeType::kFifo; break;
    case S_IFSOCK: type = format::InodeType::kSocket; break;
    case S_IFCHR: type = format::InodeType::kCharDevice; break;
    case S_IFBLK: type = format::InodeType::kBlockDevice; break;
    default: return PosixError("mknod of this file type", EINVAL);
  }
  const bool device = type == format::InodeType::kCharDevice ||
                      type == format::InodeType::kBlockDevice;
  MutexLock ns(&pool_.ns_mu_);
  auto dir = pool_.GetDir(parent);
  if (!dir.ok()) return dir.status();
  if ((*dir)->names.contains(AsKey(name))) return PosixError(name, EEXIST);
  Edit e(pool_);
  auto entry = NewEntry(e, parent, type, mode & 07777, caller);
  if (!entry.ok()) return entry.status();
  const auto [slot, ino] = *entry;
  e.Rec(ino).rdev = device ? rdev : 0;
  return CommitEntry(e, parent, name, slot, ino);
}

absl::StatusOr<std::string> Namespace::Readlink(InodeId ino) {
  ReaderMutexLock l(&pool_.mu_);
  auto in = pool_.Get(ino);
  if (!in.ok()) return in.status();
  const auto& r = (*in)->rec;
  if (r.type != format::InodeType::kSymlink) return PosixError("readlink", EINVAL);
  if (r.extent_count == 1) {  // out of line (format.h)
    return std::string(
        pool_.region_->data() + pool_.sb_.data_offset + r.extents[0].block * format::kBlockSize,
        r.size);
  }
  return std::string(reinterpret_cast<const char*>(r.extents), r.size);
}

absl::StatusOr<Attr> Namespace::Link(InodeId ino, InodeId new_parent, std::string_view new_name) {
  if (absl::Status s = ValidateName(new_name); !s.ok()) return s;
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  MutexLock ns(&pool_.ns_mu_);
  auto in = pool_.Get(ino);
  if (!in.ok()) return in.status();
  if (IsDir((*in)->rec)) return PosixError("link to a directory", EPERM);
  if ((*in)->rec.state != format::InodeState::kLive) return PosixError("link", ENOENT);
  if ((*in)->rec.nlink >= 65000) return PosixError("link", EMLINK);
  auto dir = pool_.GetDir(new_parent);
  if (!dir.ok()) return dir.status();
  if ((*dir)->names.contains(AsKey(new_name))) return PosixError(new_name, EEXIST);
  Edit e(pool_);
  e.LockInOrder({ino, new_parent});
  auto slot = e.NewSlot();
  if (!slot.ok()) return slot.status();
  e.SetDirent(*slot, new_parent, ino, new_name);
  format::InodeRecord& r = e.Rec(ino);
  ++r.nlink;
  Touch(r, false);
  Touch(e.Rec(new_parent), true);
  absl::Status s = e.Commit();
  if (!s.ok()) return s;
  (*in)->lookups.fetch_add(1);
  return pool_.MakeAttr(ino, r);  // e still holds the inode, so r is its live record
}

absl::Status Namespace::Unlink(InodeId parent, std::string_view name) {
  if (name.size() > format::kMaxNameLength) return PosixError("unlink", ENAMETOOLONG);
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  std::vector<uint64_t> reclaim;
  {
    MutexLock ns(&pool_.ns_mu_);
    auto dir = pool_.GetDir(parent);
    if (!dir.ok()) return dir.status();
    auto it = (*dir)->names.find(AsKey(name));
    if (it == (*dir)->names.end()) return PosixError(name, ENOENT);
    const uint64_t slot = it->second;
    const uint64_t ino = pool_.dirents_.at(slot).child;
    if (IsDir(pool_.inodes_[ino]->rec)) return PosixError(name, EISDIR);
    Edit e(pool_);
    e.LockInOrder({parent, ino});
    e.RemoveDirent(slot);
    DropLink(e, ino);
    Touch(e.Rec(parent), true);
    absl::Status s = e.Commit();
    if (!s.ok()) return s;
    reclaim = e.reclaim();
  }
  pool_.space_.ReclaimAll(reclaim);
  return absl::OkStatus();
}

absl::Status Namespace::Rmdir(InodeId parent, std::string_view name) {
  if (name.size() > format::kMaxNameLength) return PosixError("rmdir", ENAMETOOLONG);
  if (name == ".") return PosixError("rmdir .", EINVAL);
  if (name == "..") return PosixError("rmdir ..", ENOTEMPTY);
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  std::vector<uint64_t> reclaim;
  {
    MutexLock ns(&pool_.ns_mu_);
    auto dir = pool_.GetDir(parent);
    if (!dir.ok()) return dir.status();
    auto it = (*dir)->names.find(AsKey(name));
    if (it == (*dir)->names.end()) return PosixError(name, ENOENT);
    const uint64_t slot = it->second;
    const uint64_t ino = pool_.dirents_.at(slot).child;
    Inode& victim = *pool_.inodes_[ino];
    if (!IsDir(victim.rec)) return PosixError(name, ENOTDIR);
    if (!victim.names.empty()) return PosixError(name, ENOTEMPTY);
    Edit e(pool_);
    e.LockInOrder({parent, ino});
    e.RemoveDirent(slot);
    DropLink(e, ino);
    format::InodeRecord& p = e.Rec(parent);
    --p.nlink;
    Touch(p, true);
    absl::Status s = e.Commit();
    if (!s.ok()) return s;
    reclaim = e.reclaim();
  }
  pool_.space_.ReclaimAll(reclaim);
  return absl::OkStatus();
}

absl::Status Namespace::Rename(InodeId parent, std::string_view name, InodeId new_parent,
                               std::string_view new_name, uint32_t flags) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = ValidateName(new_name); !s.ok()) return s;
  if ((flags & kRenameNoReplace) && (flags & kRenameExchange)) {
    return PosixError("rename: NOREPLACE with EXCHANGE", EINVAL);
  }
  if (flags & ~(kRenameNoReplace | kRenameExchange)) return PosixError("rename", EINVAL);
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  std::vector<uint64_t> reclaim;
  {
    MutexLock ns(&pool_.ns_mu_);
    auto src_dir = pool_.GetDir(parent);
    if (!src_dir.ok()) return src_dir.status();
    auto dst_dir = pool_.GetDir(new_parent);
    if (!dst_dir.ok()) return dst_dir.status();
    auto sit = (*src_dir)->names.find(AsKey(name));
    if (sit == (*src_dir)->names.end()) return PosixError(name, ENOENT);
    const uint64_t src_slot = sit->second;
    const uint64_t src_ino = pool_.dirents_.at(src_slot).child;
    Inode& src = *pool_.inodes_[src_ino];
    auto dit = (*dst_dir)->names.find(AsKey(new_name));
    const bool target_exists = dit != (*dst_dir)->names.end();
    const uint64_t dst_slot = target_exists ? dit->second : UINT64_MAX;
    const uint64_t dst_ino = target_exists ? pool_.dirents_.at(dst_slot).child : 0;

    if (parent == new_parent && name == new_name) return absl::OkStatus();
    if ((flags & kRenameNoReplace) && target_exists) return PosixError(new_name, EEXIST);
    if ((flags & kRenameExchange) && !target_exists) return PosixError(new_name, ENOENT);
    // Moving a directory under itself would detach a cycle from the tree.
    if (IsDir(src.rec) && parent != new_parent && IsAncestor(src_ino, new_parent)) {
      return PosixError("rename a directory into its own subtree", EINVAL);
    }
    if (target_exists && src_ino == dst_ino) return absl::OkStatus();  // POSIX: no-op

    Edit e(pool_);
    e.LockInOrder({parent, new_parent, src_ino, dst_ino});
    if (flags & kRenameExchange) {
      Inode& dst = *pool_.inodes_[dst_ino];
      if (IsDir(dst.rec) && parent != new_parent && IsAncestor(dst_ino, parent)) {
        return PosixError("exchange a directory into its own subtree", EINVAL);
      }
      if (parent != new_parent && IsDir(src.rec) != IsDir(dst.rec)) {
        const int delta = IsDir(src.rec) ? 1 : -1;
        e.Rec(new_parent).nlink += delta;
        e.Rec(parent).nlink -= delta;
      }
      e.SetDirent(src_slot, parent, dst_ino, name);
      e.SetDirent(dst_slot, new_parent, src_ino, new_name);
    } else {
      if (target_exists) {
        Inode& dst = *pool_.inodes_[dst_ino];
        if (IsDir(src.rec) && !IsDir(dst.rec)) return PosixError(new_name, ENOTDIR);
        if (!IsDir(src.rec) && IsDir(dst.rec)) return PosixError(new_name, EISDIR);
        if (IsDir(dst.rec) && !dst.names.empty()) return PosixError(new_name, ENOTEMPTY);
        // The target's dirent now names the source; the source's dirent goes away.
        if (IsDir(dst.rec)) --e.Rec(new_parent).nlink;  // the replaced subdirectory's ".."
        DropLink(e, dst_ino);
        e.RemoveDirent(src_slot);
        e.SetDirent(dst_slot, new_parent, src_ino, new_name);
      } else {
        // Same directory: the entry keeps its slot (and so its position for readdir
        // scans in progress); across directories too, only its parent changes.
        e.SetDirent(src_slot, new_parent, src_ino, new_name);
      }
      if (IsDir(src.rec) && parent != new_parent) {
        --e.Rec(parent).nlink;
        ++e.Rec(new_parent).nlink;
      }
    }
    // A file created under a segment name that leaves segment names gives its segment
    // extent back: PostgreSQL writes timeline history files as xlogtemp.<pid> and renames
    // them, and each would otherwise hold a whole segment.
    auto settle = [&](uint64_t ino, std::string_view its_name) {
      const format::InodeRecord& cur = e.View(ino);
      if (cur.type != format::InodeType::kRegular ||
          !(cur.flags & format::kInodeFlagSegment) || IsWalSegmentName(its_name)) {
        return;
      }
      e.Rec(ino).flags &= ~format::kInodeFlagSegment;
      pool_.space_.TrimBlocks(e, ino, 0);
    };
    if (flags & kRenameExchange) {
      settle(dst_ino, name);
      Touch(e.Rec(dst_ino), false);
    }
    settle(src_ino, new_name);
    Touch(e.Rec(src_ino), false);
    Touch(e.Rec(parent), true);
    if (new_parent != parent) Touch(e.Rec(new_parent), true);
    absl::Status s = e.Commit();
    if (!s.ok()) return s;
    reclaim = e.reclaim();
  }
  pool_.space_.ReclaimAll(reclaim);
  return absl::OkStatus();
}

absl::StatusOr<Attr> Namespace::Setattr(InodeId ino, const SetattrRequest& request) {
  if (absl::Status s = pool_.Writable(); !s.ok()) return s;
  for (;;) {
    std::vector<uint64_t> reclaim;
    Attr attr;
    absl::Status status;
    {
      MutexLock ns(&pool_.ns_mu_);
      auto in = pool_.Get(ino);
      if (!in.ok()) return in.status();
      if ((*in)->reclaiming) return PosixError(absl::StrCat("inode ", ino), ESTALE);
      Edit e(pool_);
      format::InodeRecord& r = e.Rec(ino);
      Space::ZeroTail tail;
      if (request.size) {
        if (IsDir(r)) return PosixError("truncate", EISDIR);
        if (r.type != format::InodeType::kRegular) return PosixError("truncate", EINVAL);
        if ((*in)->leases > 0 && *request.size < (*in)->leased_size) {
          // A direct-access client maps these blocks and may store into them (lease.cc).
          return PosixError(absl::StrCat("truncate of inode ", ino, " to ", *request.size,
                                         " below its leased size ", (*in)->leased_size),
                            ETXTBSY);
        }
        auto t = pool_.space_.Truncate(e, ino, *request.size);
        status = t.status();
        if (t.ok()) tail = *t;
      }
      if (status.ok()) {
        if (request.clear_setid && !request.mode) {
          r.mode &= ~(S_ISUID | ((r.mode & S_IXGRP) ? S_ISGID : 0));
        }
        if (request.mode) r.mode = (r.mode & S_IFMT) | (*request.mode & 07777);
        if (request.uid) r.uid = *request.uid;
        if (request.gid) r.gid = *request.gid;
        if (request.atime_ns) r.atime_ns = *request.atime_ns;
        Touch(r, request.size.has_value());
        if (request.mtime_ns) r.mtime_ns = *request.mtime_ns;
        status = e.Commit();
        if (!status.ok()) return status;
        // Still under the inode's lock (e), so no write sees the old bytes past EOF.
        pool_.space_.ZeroFileRange(r, tail);
        attr = pool_.MakeAttr(ino, r);
        reclaim = e.reclaim();
      }
    }
    if (!status.ok()) {
      // Blocks being zeroed count as free (Statfs): wait for them rather than fail.
      if (ErrnoFromStatus(status) == ENOSPC && pool_.space_.AwaitReclaims()) continue;
      return status;
    }
    pool_.space_.ReclaimAll(reclaim);
    return attr;
  }
}

absl::Status Namespace::Readdir(InodeId ino, uint64_t cookie,
                                const std::function<bool(const DirEntry&)>& fn) {
  ReaderMutexLock l(&pool_.mu_);
  auto dir = pool_.Get(ino);
  if (!dir.ok()) return dir.status();
  if (!IsDir((*dir)->rec)) return PosixError("readdir", ENOTDIR);
  // Cookies: 1 after ".", 2 after "..", slot + 3 after the entry in that slot. Slots
  // never move while an entry lives, so a scan resumes exactly where it stopped.
  if (cookie == 0) {
    if (!fn(DirEntry{".", ino, S_IFDIR, 1})) return absl::OkStatus();
    cookie = 1;
  }
  if (cookie == 1) {
    const uint64_t up = ino == format::kRootInode || (*dir)->parent_slot == UINT64_MAX
                            ? ino
                            : pool_.dirents_.at((*dir)->parent_slot).parent;
    if (!fn(DirEntry{"..", up, S_IFDIR, 2})) return absl::OkStatus();
    cookie = 2;
  }
  const auto& slots = (*dir)->slots;
  for (auto it = slots.lower_bound(cookie - 2); it != slots.end(); ++it) {
    const Dirent& d = pool_.dirents_.at(*it);
    // A type never changes, and an Edit rewrites a record only under mu_ exclusive.
    const DirEntry e{d.name, d.child, DirentType(pool_.inodes_[d.child]->rec.type), *it + 3};
    if (!fn(e)) break;
  }
  return absl::OkStatus();
}

bool Namespace::IsAncestor(uint64_t dir, uint64_t of) const {
  for (uint64_t cur = of;;) {
    if (cur == dir) return true;
    if (cur == format::kRootInode) return false;
    cur = pool_.dirents_.at(pool_.inodes_[cur]->parent_slot).parent;
  }
}

}  // namespace walfs::core
