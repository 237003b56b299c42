// Edit: one metadata change (LevelDB's VersionEdit): built under the namespace lock from
// copies of records, logged in one journal transaction (StateLog::Commit), then applied to
// the in-memory tables, their only writer after open; numbers and blocks come from Space
// and go back to it. May not store into file data, nor commit without applying.
#ifndef WALFS_CORE_EDIT_H_
#define WALFS_CORE_EDIT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/format.h"
#include "core/inode.h"
#include "core/types.h"

namespace walfs::core {

class Pool;

// Everything taken from the free lists or the allocator while building is given back if
// the edit is dropped without a successful commit. Not thread-safe: one thread builds
// and commits it, under the namespace lock (core/pool.h).
class Edit {
 public:
  explicit Edit(Pool& pool);
  ~Edit();
  Edit(const Edit&) = delete;
  Edit& operator=(const Edit&) = delete;

  // The record `ino` will have once the edit is applied, to change in place. The first
  // call copies the current record and locks the inode's mu until the edit ends (its
  // dirty bytes are synced at commit, before the record). New inodes are not locked:
  // nobody else can see them yet.
  format::InodeRecord& Rec(uint64_t ino);
  // The record as this edit sees it (its copy, or the live record), without rewriting
  // it; locks the inode like Rec, so what it shows cannot change before the edit ends.
  const format::InodeRecord& View(uint64_t ino);
  // Locks these live inodes now, in ascending order: an edit that touches several
  // calls it first, so every edit takes inode locks in one order (data-path threads
  // hold only one, and edits run one at a time under the namespace lock, so this is for
  // lock-order checkers more than for safety).
  void LockInOrder(std::vector<uint64_t> inos);
  // A free inode number for a new inode of this type, owned by `c`; ENOSPC without one.
  absl::StatusOr<uint64_t> NewInode(format::InodeType type, uint32_t mode, const Caller& c);
  absl::StatusOr<uint64_t> NewSlot();
  // `slot` names `child` in `parent` after the edit (a new entry or a changed one).
  void SetDirent(uint64_t slot, uint64_t parent, uint64_t child, std::string_view name);
  // `slot` is free after the edit.
  void RemoveDirent(uint64_t slot);
  // `ino`'s record is freed and its extents return to the allocator (zeroed already).
  void FreeInode(uint64_t ino);
  // Blocks Space::Grow took for this edit: returned to the allocator if it is dropped.
  std::vector<format::Extent>& allocated() { return allocated_; }
  // Inodes to reclaim once the edit is applied (unreferenced orphans, trim carriers).
  std::vector<uint64_t>& reclaim() { return reclaim_; }

  // Syncs the dirty bytes of the files it rewrites (msync mode), commits every image in
  // one journal transaction, together with the pool's pending frees (Space::Reclaim),
  // and, if the commit point was reached, applies the edit to memory. Returns the
  // commit's error (EIO once a persist failed), in which case memory is unchanged
  // unless the transaction is durable all the same (journal.h).
  absl::Status Commit();

 private:
  void Lock(uint64_t ino);
  void Apply();
  void Abort();

  Pool& pool_;
  struct Copy {
    format::InodeRecord rec;
    Inode* in;                      // the live inode (null for a new one)
    std::shared_ptr<Inode> fresh;   // a new inode, installed at apply
  };
  std::map<uint64_t, Copy> recs_;     // a std::map: Rec's references stay valid
  std::vector<Inode*> locked_;        // inodes whose mu this edit holds
  std::vector<std::pair<uint64_t, std::optional<Dirent>>> dirents_;  // in order
  std::vector<uint64_t> freed_;       // inodes freed
  std::vector<uint64_t> new_inodes_;  // taken from the free inode list
  std::vector<uint64_t> new_slots_;   // taken from the free slot list
  std::vector<format::Extent> allocated_;
  std::vector<format::Extent> released_;  // extents of freed inodes, free at apply
  std::vector<uint64_t> reclaim_;
  // The pool's pending frees this commit carries (Commit takes them all; Abort puts
  // them back) and their blocks.
  std::vector<uint64_t> carried_frees_;
  uint64_t carried_free_blocks_ = 0;
  bool done_ = false;
};

}  // namespace walfs::core

#endif  // WALFS_CORE_EDIT_H_
