// DataPath: file bytes and the record fields a write changes (WalDirectory's read, write,
// fsync, fallocate and release). Owns the data-path update of an inode record: size,
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
#include "core/wal_directory.h"

namespace walfs::core {

class Pool;

// Thread-safe; the contracts of the public calls are WalDirectory's (wal_directory.h).
// Read, Write and Fsync take only their inode's lock (core/pool.h): never the namespace
// lock, but for a write that must allocate.
class DataPath {
 public:
  explicit DataPath(Pool& pool) : pool_(pool) {}
  DataPath(const DataPath&) = delete;
  DataPath& operator=(const DataPath&) = delete;

  absl::StatusOr<size_t> Read(InodeId ino, uint64_t offset, absl::Span<char> out);
  absl::StatusOr<size_t> Write(InodeId ino, uint64_t offset, absl::Span<const char> data,
                               bool sync, bool clear_setid, bool* setid_cleared);
  absl::Status Fsync(InodeId ino, bool datasync);
  absl::Status FsyncDir(InodeId ino);
  absl::Status Fallocate(InodeId ino, uint64_t offset, uint64_t length, uint32_t flags);
  absl::Status Release(InodeId ino);

  // msync mode: persists the file bytes written to `in` and not yet durable. Under
  // in.mu; an Edit calls it before it commits the inode's record, so that a record never
  // becomes durable ahead of the bytes it covers.
  void FlushDirty(Inode& in) ABSL_EXCLUSIVE_LOCKS_REQUIRED(in.mu);

 private:
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
