// Namespace: names, links, directories and attributes (WalDirectory::names()). Each
// change validates under the namespace lock, builds one Edit and commits it; the
// in-memory tree changes only in Edit's apply. May not store into file data, nor touch
// the allocator but through Space.
//
// Lookup references (FUSE's nlookup): every call that returns an Attr for a name —
// Lookup, Create, Mkdir, Symlink, Mknod, Link — adds one lookup reference to that inode,
// and Forget(ino, n) drops n of them. An inode whose link count reaches zero stays
// readable and writable until its lookup references are gone too (POSIX open-unlinked
// semantics: the kernel holds a reference for every open file); then its extents are
// zeroed and it is freed. Orphans left by a crash are reclaimed by WalDirectory::Open.
//
// Durability (docs/design/durability.md): every change (create, mkdir, symlink, mknod,
// link, unlink, rmdir, rename, setattr and its truncate) is atomic across power failure
// and durable when the call returns, in both modes.
#ifndef WALFS_CORE_NAMESPACE_H_
#define WALFS_CORE_NAMESPACE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/format.h"
#include "core/types.h"

namespace walfs::core {

class Edit;
class Pool;

// Thread-safe. Every helper below runs under the namespace lock with an Edit.
class Namespace {
 public:
  explicit Namespace(Pool& pool) : pool_(pool) {}
  Namespace(const Namespace&) = delete;
  Namespace& operator=(const Namespace&) = delete;

  absl::StatusOr<Attr> Lookup(InodeId parent, std::string_view name);
  void Forget(InodeId ino, uint64_t nlookup);
  absl::StatusOr<Attr> GetAttr(InodeId ino);
  absl::StatusOr<Attr> Setattr(InodeId ino, const SetattrRequest& request);
  // Creates a regular file; AlreadyExists (EEXIST) when the name exists and `exclusive`,
  // else returns the existing file (which must not be a directory: EISDIR).
  // WAL-segment names get one contiguous segment-size extent at once.
  absl::StatusOr<Attr> Create(InodeId parent, std::string_view name, uint32_t mode,
                              const Caller& caller, bool exclusive);
  absl::StatusOr<Attr> Mkdir(InodeId parent, std::string_view name, uint32_t mode,
                             const Caller& caller);
  absl::StatusOr<Attr> Symlink(InodeId parent, std::string_view name,
                               std::string_view target, const Caller& caller);
  absl::StatusOr<std::string> Readlink(InodeId ino);
  // Creates a FIFO, socket, character or block device (`mode`'s S_IFMT; rdev for
  // devices) as an inert inode: it holds no data and walfs never opens it (EINVAL for
  // any other type; regular files come through Create).
  absl::StatusOr<Attr> Mknod(InodeId parent, std::string_view name, uint32_t mode,
                             uint64_t rdev, const Caller& caller);
  absl::StatusOr<Attr> Link(InodeId ino, InodeId new_parent, std::string_view new_name);
  absl::Status Unlink(InodeId parent, std::string_view name);
  absl::Status Rmdir(InodeId parent, std::string_view name);
  absl::Status Rename(InodeId parent, std::string_view name, InodeId new_parent,
                      std::string_view new_name, uint32_t flags);
  // Calls `fn` for entries of directory `ino` after `cookie` (0 = from the start, then
  // "." and ".." are included) in a stable order; stops when fn returns false. Entries
  // not renamed or unlinked during a scan are returned exactly once across calls.
  absl::Status Readdir(InodeId ino, uint64_t cookie,
                       const std::function<bool(const DirEntry&)>& fn);

 private:
  // Create without the wait for reclaims that Create retries with on ENOSPC.
  absl::StatusOr<Attr> CreateOnce(InodeId parent, std::string_view name, uint32_t mode,
                                  const Caller& caller, bool exclusive);
  // A dirent slot and an inode for a new name in directory `parent`: (slot, ino), owned
  // by `caller` (the group is the directory's if it is set-group-ID). CommitEntry names
  // the inode in the edit (dirent, inode, parent times), commits, and takes one lookup
  // reference.
  absl::StatusOr<std::pair<uint64_t, uint64_t>> NewEntry(Edit& e, InodeId parent,
                                                         format::InodeType type,
                                                         uint32_t mode, const Caller& caller);
  // NewEntry's inode alone (no dirent slot).
  absl::StatusOr<uint64_t> NewEntryInode(Edit& e, InodeId parent, format::InodeType type,
                                         uint32_t mode, const Caller& caller);
  absl::StatusOr<Attr> CommitEntry(Edit& e, InodeId parent, std::string_view name,
                                   uint64_t slot, uint64_t ino);
  // Drops one link of `ino` (its dirent already removed by the caller) in the edit;
  // queues it for reclaim when it becomes unreferenced.
  void DropLink(Edit& e, uint64_t ino);
  // Whether directory `dir` is `of` or one of its ancestors.
  bool IsAncestor(uint64_t dir, uint64_t of) const;

  Pool& pool_;
};

}  // namespace walfs::core

#endif  // WALFS_CORE_NAMESPACE_H_
