// DataPath: file bytes and the record fields a write changes (WalDirectory::data(): read,
// write, fsync, fallocate and release). Owns the data-path update of an inode record: size,
// times and set-id bits change in memory only in SetDataFields and reach the journal only
// through CommitRecord. May not change a record's other fields, nor allocate but
// through Space in an Edit.
#ifndef WALFS_CORE_DATA_PATH_H_
#define WALFS_CORE_DATA_PATH_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/format.h"
#include "core/inode.h"
#include "core/types.h"

namespace walfs::core {

class Pool;

// Durability (docs/design/durability.md): Fallocate is atomic across power failure and
// durable when it returns, in both modes. kPmem: a Write is durable (data and size) when
// it returns, so Fsync has nothing to do. kMsync: a Write is durable after Fsync of that
// inode (from any handle) or when made with `sync` set (O_DSYNC/O_SYNC).
//
// Thread-safe. Read, Write and Fsync take only their inode's lock (core/pool.h): never the
// namespace lock, but for a write that must allocate.
class DataPath {
 public:
  explicit DataPath(Pool& pool) : pool_(pool) {}
  DataPath(const DataPath&) = delete;
  DataPath& operator=(const DataPath&) = delete;

  // Reads up to out.size() bytes at `offset`; short only at EOF. atime follows relatime
  // (moved when not newer than mtime/ctime or a day old), regular files only; it becomes
  // durable with the record's next commit (a write's, Release, WalDirectory::Close), not
  // by the read.
  absl::StatusOr<size_t> Read(InodeId ino, uint64_t offset, absl::Span<char> out);
  // Writes all of `data` at `offset`, allocating as needed (ENOSPC only then). `sync`:
  // the write is durable when this returns (O_DSYNC/O_SYNC handles). `clear_setid`: the
  // writer may not keep set-user-ID/set-group-ID on the file (it lacks CAP_FSETID), so
  // S_ISUID and, with group execute, S_ISGID are cleared and committed before this
  // returns, as a local file system's write does (the kernel leaves it to FUSE servers
  // on direct_io files); `*setid_cleared` (if given) says whether it cleared any.
  // Times: in pmem mode a write's mtime/ctime are durable at most kTimesStalenessNs
  // after the write (a write commits the record when the last commit is older); in
  // msync mode, with the data (Fsync; fdatasync within the same bound). Release and
  // WalDirectory::Close commit them at once.
  absl::StatusOr<size_t> Write(InodeId ino, uint64_t offset, absl::Span<const char> data,
                               bool sync, bool clear_setid = false,
                               bool* setid_cleared = nullptr);
  // Makes every byte written to `ino` through any handle, and its size, durable.
  absl::Status Fsync(InodeId ino, bool datasync);
  // Directory metadata is already durable; kept for symmetry and counters.
  absl::Status FsyncDir(InodeId ino);
  absl::Status Fallocate(InodeId ino, uint64_t offset, uint64_t length, uint32_t flags);
  // An open file was closed (FUSE RELEASE): its pending times are committed, and a file
  // that is neither a WAL segment nor preallocated (fallocate KEEP_SIZE) gives back the
  // blocks it holds past its size (growth allocates ahead, Space::Grow). In msync mode a
  // file with bytes not yet synced is left alone: close makes nothing durable.
  absl::Status Release(InodeId ino);

 private:
  friend class Edit;  // calls FlushDirty only, before it commits a record

  // msync mode: persists the file bytes written to `in` and not yet durable. Under
  // in.mu; an Edit calls it before it commits the inode's record, so that a record never
  // becomes durable ahead of the bytes it covers.
  void FlushDirty(Inode& in) ABSL_EXCLUSIVE_LOCKS_REQUIRED(in.mu);
  // The one writer of the data-path fields of Inode::rec (size, mtime, ctime, atime and
  // the set-id bits of mode): copies them from `next` and marks them not yet committed.
  // Under in.mu. (An Edit's apply replaces the whole record, under in.mu too.)
  void SetDataFields(Inode& in, const format::InodeRecord& next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(in.mu);
  // The data path's record update: syncs `in`'s dirty bytes, commits `rec` as its record
  // in a journal transaction of its own (StateLog::Commit) and, if the commit point was
  // reached, applies the data-path fields (SetDataFields). Under in.mu, without the
  // namespace lock: a write or fsync of one file never waits for a metadata change of
  // another (docs/design/engine.md says why this is not an Edit).
  absl::Status CommitRecord(uint64_t ino, Inode& in, const format::InodeRecord& rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(in.mu);

  Pool& pool_;
};

}  // namespace walfs::core

#endif  // WALFS_CORE_DATA_PATH_H_
