// Pool: namespace operations (names, links, directories, attributes).
//
// Each operation validates everything first, then changes the in-memory state and
// builds one Transaction, then commits it: the change is atomic and durable on return.
// Inodes that lose their last link and reference are reclaimed after mu_ is released,
// since zeroing their blocks can take milliseconds.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/names.h"
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

absl::StatusOr<std::pair<uint64_t, uint64_t>> Pool::NewEntry(InodeId parent,
                                                            format::InodeType type,
                                                            uint32_t mode,
                                                            const Caller& caller) {
  auto slot = NewDirentSlot();
  if (!slot.ok()) return slot.status();
  // A set-group-ID directory gives new entries its group, and new subdirectories the
  // bit itself (POSIX; on FUSE the kernel leaves both to the file system).
  Caller owner = caller;
  const format::InodeRecord& dir = inodes_[parent]->rec;
  if (dir.mode & S_ISGID) {
    owner.gid = dir.gid;
    if (type == format::InodeType::kDirectory) mode |= S_ISGID;
  }
  auto ino = NewInode(type, mode, owner);
  if (!ino.ok()) {
    free_slots_.push_back(*slot);
    return ino.status();
  }
  return std::make_pair(*slot, *ino);
}

void Pool::DiscardEntry(uint64_t slot, uint64_t ino) {
  inodes_[ino].reset();
  free_inodes_.push_back(ino);
  free_slots_.push_back(slot);
}

absl::StatusOr<Attr> Pool::CommitEntry(InodeId parent, std::string_view name, uint64_t slot,
                                       uint64_t ino) {
  Transaction txn;
  AddName(slot, parent, ino, name);
  PutDirent(txn, slot, parent, ino, name);
  PutInode(txn, ino);
  Touch(parent, true);
  PutInode(txn, parent);
  absl::Status s = Commit(txn);
  if (!s.ok()) return s;
  Inode& in = *inodes_[ino];
  in.lookups.fetch_add(1);
  return MakeAttr(ino, in);
}

absl::StatusOr<Attr> Pool::Lookup(InodeId parent, std::string_view name) {
  if (name.size() > format::kMaxNameLength) return PosixError("lookup", ENAMETOOLONG);
  ReaderMutexLock l(&mu_);
  auto dir = GetDir(parent);
  if (!dir.ok()) return dir.status();
  uint64_t ino;
  if (name == ".") {
    ino = parent;
  } else if (name == "..") {
    ino = parent == format::kRootInode ? parent
                                       : dirents_.at((*dir)->parent_slot).parent;
  } else {
    auto it = (*dir)->names.find(AsKey(name));
    if (it == (*dir)->names.end()) return PosixError("lookup", ENOENT);
    ino = dirents_.at(it->second).child;
  }
  Inode* in = inodes_[ino].get();
  in->lookups.fetch_add(1);
  ReaderMutexLock il(&in->mu);
  return MakeAttr(ino, *in);
}

void Pool::Forget(InodeId ino, uint64_t nlookup) {
  bool reclaim = false;
  {
    MutexLock l(&mu_);
    Inode* in = Find(ino);
    if (in == nullptr) return;
    const uint64_t before = in->lookups.load();
    in->lookups.store(before > nlookup ? before - nlookup : 0);
    reclaim = before <= nlookup && in->rec.state == format::InodeState::kOrphan;
  }
  if (reclaim) Reclaim(ino);
}

absl::StatusOr<Attr> Pool::GetAttr(InodeId ino) {
  ReaderMutexLock l(&mu_);
  auto in = Get(ino);
  if (!in.ok()) return in.status();
  ReaderMutexLock il(&(*in)->mu);
  return MakeAttr(ino, **in);
}

absl::StatusOr<Attr> Pool::Create(InodeId parent, std::string_view name, uint32_t mode,
                                  const Caller& caller, bool exclusive) {
  absl::StatusOr<Attr> result = CreateOnce(parent, name, mode, caller, exclusive);
  while (!result.ok() && ErrnoFromStatus(result.status()) == ENOSPC && AwaitReclaims()) {
    result = CreateOnce(parent, name, mode, caller, exclusive);
  }
  return result;
}

absl::StatusOr<Attr> Pool::CreateOnce(InodeId parent, std::string_view name, uint32_t mode,
                                      const Caller& caller, bool exclusive) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;
  MutexLock l(&mu_);
  auto dir = GetDir(parent);
  if (!dir.ok()) return dir.status();
  if (auto it = (*dir)->names.find(AsKey(name)); it != (*dir)->names.end()) {
    if (exclusive) return PosixError(name, EEXIST);
    const uint64_t ino = dirents_.at(it->second).child;
    Inode* in = inodes_[ino].get();
    if (IsDir(in->rec)) return PosixError(name, EISDIR);
    in->lookups.fetch_add(1);
    return MakeAttr(ino, *in);
  }
  auto entry = NewEntry(parent, format::InodeType::kRegular, mode, caller);
  if (!entry.ok()) return entry.status();
  const auto [slot, ino] = *entry;
  if (IsWalSegmentName(name)) {
    // A WAL segment gets its whole extent now, so its writes never allocate.
    Inode& in = *inodes_[ino];
    in.rec.flags |= format::kInodeFlagSegment;
    absl::Status s = Grow(in, sb_.segment_size);
    if (!s.ok()) {
      DiscardEntry(slot, ino);
      return s;
    }
  }
  return CommitEntry(parent, name, slot, ino);
}

absl::StatusOr<Attr> Pool::Mkdir(InodeId parent, std::string_view name, uint32_t mode,
                                 const Caller& caller) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;
  MutexLock l(&mu_);
  auto dir = GetDir(parent);
  if (!dir.ok()) return dir.status();
  if ((*dir)->names.contains(AsKey(name))) return PosixError(name, EEXIST);
  auto entry = NewEntry(parent, format::InodeType::kDirectory, mode, caller);
  if (!entry.ok()) return entry.status();
  const auto [slot, ino] = *entry;
  inodes_[ino]->parent_slot = slot;
  ++(*dir)->rec.nlink;  // the new directory's ".."
  return CommitEntry(parent, name, slot, ino);
}

absl::StatusOr<Attr> Pool::Symlink(InodeId parent, std::string_view name,
                                   std::string_view target, const Caller& caller) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;
  if (target.empty()) return PosixError("symlink target", ENOENT);
  if (target.size() > format::kMaxSymlinkTargetOutOfLine) {
    return PosixError(absl::StrCat("symlink target longer than ",
                                   format::kMaxSymlinkTargetOutOfLine, " bytes"),
                      ENAMETOOLONG);
  }
  if (target.find('\0') != std::string_view::npos) return PosixError("symlink target", EINVAL);
  MutexLock l(&mu_);
  auto dir = GetDir(parent);
  if (!dir.ok()) return dir.status();
  if ((*dir)->names.contains(AsKey(name))) return PosixError(name, EEXIST);
  auto entry = NewEntry(parent, format::InodeType::kSymlink, 0777, caller);
  if (!entry.ok()) return entry.status();
  const auto [slot, ino] = *entry;
  Inode& in = *inodes_[ino];
  in.rec.size = target.size();
  if (target.size() <= format::kMaxSymlinkTarget) {
    std::memcpy(in.rec.extents, target.data(), target.size());
    return CommitEntry(parent, name, slot, ino);
  }
  // Out of line (format.h): the orphan owning the block commits first, then the target
  // is persisted in the block (free space, so zero after the target), then the entry.
  std::optional<format::Extent> block = alloc_.AllocateHigh(1);
  if (!block) {
    DiscardEntry(slot, ino);
    return PosixError("no space for a symlink target", ENOSPC);
  }
  if (absl::Status s = PrepareBlocks(*block); !s.ok()) {
    alloc_.Release(*block);
    DiscardEntry(slot, ino);
    return s;
  }
  in.rec.extent_count = 1;
  in.rec.extents[0] = *block;
  in.rec.state = format::InodeState::kOrphan;
  in.rec.nlink = 0;
  Transaction orphan;
  PutInode(orphan, ino);
  if (absl::Status s = Commit(orphan); !s.ok()) {
    // Whether or not it reached the pool, the next open reclaims it as an orphan.
    free_slots_.push_back(slot);
    return s;
  }
  const uint64_t off = sb_.data_offset + block->block * format::kBlockSize;
  region_->Store(off, target.data(), target.size());
  region_->Flush(off, target.size());
  region_->Drain();
  if (absl::Status h = region_->health(); !h.ok()) {
    free_slots_.push_back(slot);
    return h;
  }
  in.rec.state = format::InodeState::kLive;
  in.rec.nlink = 1;
  return CommitEntry(parent, name, slot, ino);
}

absl::StatusOr<Attr> Pool::Mknod(InodeId parent, std::string_view name, uint32_t mode,
                                 uint64_t rdev, const Caller& caller) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;
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
  MutexLock l(&mu_);
  auto dir = GetDir(parent);
  if (!dir.ok()) return dir.status();
  if ((*dir)->names.contains(AsKey(name))) return PosixError(name, EEXIST);
  auto entry = NewEntry(parent, type, mode & 07777, caller);
  if (!entry.ok()) return entry.status();
  const auto [slot, ino] = *entry;
  inodes_[ino]->rec.rdev = device ? rdev : 0;
  return CommitEntry(parent, name, slot, ino);
}

absl::StatusOr<std::string> Pool::Readlink(InodeId ino) {
  ReaderMutexLock l(&mu_);
  auto in = Get(ino);
  if (!in.ok()) return in.status();
  const auto& r = (*in)->rec;
  if (r.type != format::InodeType::kSymlink) return PosixError("readlink", EINVAL);
  if (r.extent_count == 1) {  // out of line (format.h)
    return std::string(region_->data() + sb_.data_offset + r.extents[0].block * format::kBlockSize,
                       r.size);
  }
  return std::string(reinterpret_cast<const char*>(r.extents), r.size);
}

absl::StatusOr<Attr> Pool::Link(InodeId ino, InodeId new_parent, std::string_view new_name) {
  if (absl::Status s = ValidateName(new_name); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;
  MutexLock l(&mu_);
  auto in = Get(ino);
  if (!in.ok()) return in.status();
  if (IsDir((*in)->rec)) return PosixError("link to a directory", EPERM);
  if ((*in)->rec.state != format::InodeState::kLive) return PosixError("link", ENOENT);
  if ((*in)->rec.nlink >= 65000) return PosixError("link", EMLINK);
  auto dir = GetDir(new_parent);
  if (!dir.ok()) return dir.status();
  if ((*dir)->names.contains(AsKey(new_name))) return PosixError(new_name, EEXIST);
  auto slot = NewDirentSlot();
  if (!slot.ok()) return slot.status();
  Transaction txn;
  AddName(*slot, new_parent, ino, new_name);
  PutDirent(txn, *slot, new_parent, ino, new_name);
  ++(*in)->rec.nlink;
  Touch(ino, false);
  PutInode(txn, ino);
  Touch(new_parent, true);
  PutInode(txn, new_parent);
  absl::Status s = Commit(txn);
  if (!s.ok()) return s;
  (*in)->lookups.fetch_add(1);
  return MakeAttr(ino, **in);
}

absl::Status Pool::Unlink(InodeId parent, std::string_view name) {
  if (name.size() > format::kMaxNameLength) return PosixError("unlink", ENAMETOOLONG);
  if (absl::Status s = Writable(); !s.ok()) return s;
  std::vector<uint64_t> reclaim;
  {
    MutexLock l(&mu_);
    auto dir = GetDir(parent);
    if (!dir.ok()) return dir.status();
    auto it = (*dir)->names.find(AsKey(name));
    if (it == (*dir)->names.end()) return PosixError(name, ENOENT);
    const uint64_t slot = it->second;
    const uint64_t ino = dirents_.at(slot).child;
    if (IsDir(inodes_[ino]->rec)) return PosixError(name, EISDIR);
    Transaction txn;
    FreeName(txn, slot);
    DropLink(txn, ino, reclaim);
    Touch(parent, true);
    PutInode(txn, parent);
    absl::Status s = Commit(txn);
    if (!s.ok()) return s;
  }
  ReclaimAll(reclaim);
  return absl::OkStatus();
}

absl::Status Pool::Rmdir(InodeId parent, std::string_view name) {
  if (name.size() > format::kMaxNameLength) return PosixError("rmdir", ENAMETOOLONG);
  if (name == ".") return PosixError("rmdir .", EINVAL);
  if (name == "..") return PosixError("rmdir ..", ENOTEMPTY);
  if (absl::Status s = Writable(); !s.ok()) return s;
  std::vector<uint64_t> reclaim;
  {
    MutexLock l(&mu_);
    auto dir = GetDir(parent);
    if (!dir.ok()) return dir.status();
    auto it = (*dir)->names.find(AsKey(name));
    if (it == (*dir)->names.end()) return PosixError(name, ENOENT);
    const uint64_t slot = it->second;
    const uint64_t ino = dirents_.at(slot).child;
    Inode& victim = *inodes_[ino];
    if (!IsDir(victim.rec)) return PosixError(name, ENOTDIR);
    if (!victim.names.empty()) return PosixError(name, ENOTEMPTY);
    Transaction txn;
    FreeName(txn, slot);
    victim.parent_slot = UINT64_MAX;
    DropLink(txn, ino, reclaim);
    --(*dir)->rec.nlink;
    Touch(parent, true);
    PutInode(txn, parent);
    absl::Status s = Commit(txn);
    if (!s.ok()) return s;
  }
  ReclaimAll(reclaim);
  return absl::OkStatus();
}

absl::Status Pool::Rename(InodeId parent, std::string_view name, InodeId new_parent,
                          std::string_view new_name, uint32_t flags) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = ValidateName(new_name); !s.ok()) return s;
  if ((flags & kRenameNoReplace) && (flags & kRenameExchange)) {
    return PosixError("rename: NOREPLACE with EXCHANGE", EINVAL);
  }
  if (flags & ~(kRenameNoReplace | kRenameExchange)) return PosixError("rename", EINVAL);
  if (absl::Status s = Writable(); !s.ok()) return s;
  std::vector<uint64_t> reclaim;
  {
    MutexLock l(&mu_);
    auto src_dir = GetDir(parent);
    if (!src_dir.ok()) return src_dir.status();
    auto dst_dir = GetDir(new_parent);
    if (!dst_dir.ok()) return dst_dir.status();
    auto sit = (*src_dir)->names.find(AsKey(name));
    if (sit == (*src_dir)->names.end()) return PosixError(name, ENOENT);
    const uint64_t src_slot = sit->second;
    const uint64_t src_ino = dirents_.at(src_slot).child;
    Inode& src = *inodes_[src_ino];
    auto dit = (*dst_dir)->names.find(AsKey(new_name));
    const bool target_exists = dit != (*dst_dir)->names.end();
    const uint64_t dst_slot = target_exists ? dit->second : UINT64_MAX;
    const uint64_t dst_ino = target_exists ? dirents_.at(dst_slot).child : 0;

    if (parent == new_parent && name == new_name) return absl::OkStatus();
    if ((flags & kRenameNoReplace) && target_exists) return PosixError(new_name, EEXIST);
    if ((flags & kRenameExchange) && !target_exists) return PosixError(new_name, ENOENT);
    // Moving a directory under itself would detach a cycle from the tree.
    if (IsDir(src.rec) && parent != new_parent && IsAncestor(src_ino, new_parent)) {
      return PosixError("rename a directory into its own subtree", EINVAL);
    }
    if (target_exists && src_ino == dst_ino) return absl::OkStatus();  // POSIX: no-op

    Transaction txn;
    if (flags & kRenameExchange) {
      Inode& dst = *inodes_[dst_ino];
      if (IsDir(dst.rec) && parent != new_parent && IsAncestor(dst_ino, parent)) {
        return PosixError("exchange a directory into its own subtree", EINVAL);
      }
      dirents_[src_slot].child = dst_ino;
      dirents_[dst_slot].child = src_ino;
      if (IsDir(src.rec)) src.parent_slot = dst_slot;
      if (IsDir(dst.rec)) dst.parent_slot = src_slot;
      if (parent != new_parent && IsDir(src.rec) != IsDir(dst.rec)) {
        const int delta = IsDir(src.rec) ? 1 : -1;
        (*dst_dir)->rec.nlink += delta;
        (*src_dir)->rec.nlink -= delta;
      }
      PutDirent(txn, src_slot, parent, dst_ino, name);
      PutDirent(txn, dst_slot, new_parent, src_ino, new_name);
    } else {
      if (target_exists) {
        Inode& dst = *inodes_[dst_ino];
        if (IsDir(src.rec) && !IsDir(dst.rec)) return PosixError(new_name, ENOTDIR);
        if (!IsDir(src.rec) && IsDir(dst.rec)) return PosixError(new_name, EISDIR);
        if (IsDir(dst.rec) && !dst.names.empty()) return PosixError(new_name, ENOTEMPTY);
        // The target's dirent now names the source; the source's dirent goes away.
        dirents_[dst_slot].child = src_ino;
        if (IsDir(dst.rec)) {
          dst.parent_slot = UINT64_MAX;
          --(*dst_dir)->rec.nlink;  // the replaced subdirectory's ".."
        }
        DropLink(txn, dst_ino, reclaim);
        FreeName(txn, src_slot);
        PutDirent(txn, dst_slot, new_parent, src_ino, new_name);
        if (IsDir(src.rec)) src.parent_slot = dst_slot;
      } else if (parent == new_parent) {
        // Same directory: rename the entry in place, keeping its slot (and so its
        // position for readdir scans in progress).
        Inode& dir = **src_dir;
        dir.names.erase(dirents_[src_slot].name);
        dir.names[std::string(new_name)] = src_slot;
        dirents_[src_slot].name = std::string(new_name);
        PutDirent(txn, src_slot, parent, src_ino, new_name);
      } else {
        DropName(src_slot);
        AddName(src_slot, new_parent, src_ino, new_name);
        PutDirent(txn, src_slot, new_parent, src_ino, new_name);
      }
      if (IsDir(src.rec) && parent != new_parent) {
        --(*src_dir)->rec.nlink;
        ++(*dst_dir)->rec.nlink;
      }
    }
    // A file created under a segment name that leaves segment names gives its segment
    // extent back: PostgreSQL writes timeline history files as xlogtemp.<pid> and renames
    // them, and each would otherwise hold a whole segment.
    auto settle = [&](uint64_t ino, std::string_view its_name) {
      auto& r = inodes_[ino]->rec;
      if (r.type != format::InodeType::kRegular || !(r.flags & format::kInodeFlagSegment) ||
          IsWalSegmentName(its_name)) {
        return;
      }
      r.flags &= ~format::kInodeFlagSegment;
      TrimBlocks(ino, format::AlignUp(r.size, format::kBlockSize) / format::kBlockSize, txn,
                 reclaim);
    };
    if (flags & kRenameExchange) {
      settle(dst_ino, name);
      Touch(dst_ino, false);
      PutInode(txn, dst_ino);
    }
    settle(src_ino, new_name);
    Touch(src_ino, false);
    PutInode(txn, src_ino);
    Touch(parent, true);
    PutInode(txn, parent);
    if (new_parent != parent) {
      Touch(new_parent, true);
      PutInode(txn, new_parent);
    }
    absl::Status s = Commit(txn);
    if (!s.ok()) return s;
  }
  ReclaimAll(reclaim);
  return absl::OkStatus();
}

absl::StatusOr<Attr> Pool::Setattr(InodeId ino, const SetattrRequest& request) {
  if (absl::Status s = Writable(); !s.ok()) return s;
  std::vector<uint64_t> reclaim;
  Attr attr;
  {
    MutexLock l(&mu_);
    auto in = Get(ino);
    if (!in.ok()) return in.status();
    auto& r = (*in)->rec;
    Transaction txn;
    if (request.size) {
      if (IsDir(r)) return PosixError("truncate", EISDIR);
      if (r.type != format::InodeType::kRegular) return PosixError("truncate", EINVAL);
      if ((*in)->leases > 0 && *request.size < (*in)->leased_size) {
        // A direct-access client maps these blocks and may store into them (lease.cc).
        return PosixError(absl::StrCat("truncate of inode ", ino, " to ", *request.size,
                                       " below its leased size ", (*in)->leased_size),
                          ETXTBSY);
      }
      absl::Status s = Truncate(ino, *request.size, txn, reclaim);
      if (!s.ok()) return s;
    }
    if (request.clear_setid && !request.mode) {
      r.mode &= ~(S_ISUID | ((r.mode & S_IXGRP) ? S_ISGID : 0));
    }
    if (request.mode) r.mode = (r.mode & S_IFMT) | (*request.mode & 07777);
    if (request.uid) r.uid = *request.uid;
    if (request.gid) r.gid = *request.gid;
    if (request.atime_ns) r.atime_ns = *request.atime_ns;
    Touch(ino, request.size.has_value());
    if (request.mtime_ns) r.mtime_ns = *request.mtime_ns;
    PutInode(txn, ino);
    absl::Status s = Commit(txn);
    if (!s.ok()) return s;
    ZeroPendingTail();
    attr = MakeAttr(ino, **in);
  }
  ReclaimAll(reclaim);
  return attr;
}

absl::Status Pool::Readdir(InodeId ino, uint64_t cookie,
                           const std::function<bool(const DirEntry&)>& fn) {
  ReaderMutexLock l(&mu_);
  auto dir = Get(ino);
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
                            : dirents_.at((*dir)->parent_slot).parent;
    if (!fn(DirEntry{"..", up, S_IFDIR, 2})) return absl::OkStatus();
    cookie = 2;
  }
  const auto& slots = (*dir)->slots;
  for (auto it = slots.lower_bound(cookie - 2); it != slots.end(); ++it) {
    const Dirent& d = dirents_.at(*it);
    const DirEntry e{d.name, d.child, DirentType(inodes_[d.child]->rec.type), *it + 3};
    if (!fn(e)) break;
  }
  return absl::OkStatus();
}

}  // namespace walfs::core
