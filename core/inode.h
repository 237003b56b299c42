// Inode and Dirent: the in-memory images of the pool's inode and directory-entry tables,
// and the helpers every piece of the engine reads them with.
// Owns no state and takes no lock: who may read or write each field is stated here and
// enforced by the engine's pieces (core/pool.h states the lock order).
#ifndef WALFS_CORE_INODE_H_
#define WALFS_CORE_INODE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/format.h"
#include "core/mutex.h"

namespace walfs::core {

// CLOCK_REALTIME in nanoseconds, for inode times.
int64_t NowNs();

// Debian's Abseil has its own string_view type; containers keyed by std::string look
// names up through this.
inline absl::string_view AsKey(std::string_view s) { return {s.data(), s.size()}; }

// Blocks owned by an inode's extents.
inline uint64_t AllocatedBlocks(const format::InodeRecord& rec) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < rec.extent_count && i < format::kMaxExtents; ++i) {
    n += rec.extents[i].count;
  }
  return n;
}

// Sets ctime (and mtime if asked) to now, in a record being built.
inline void Touch(format::InodeRecord& r, bool mtime) {
  r.ctime_ns = NowNs();
  if (mtime) r.mtime_ns = r.ctime_ns;
}

// One live (or orphaned) inode. `rec` is the image the next commit writes; it changes in
// exactly two ways (docs/design/engine.md): an Edit's apply (any field; under Inode::mu
// and the table lock, after the commit) and DataPath::SetDataFields (size, times, set-id
// bits; under Inode::mu). Fields only an Edit changes (type, state, nlink, extents,
// flags) may be read under the table lock or the namespace lock; the rest need mu.
struct Inode {
  format::InodeRecord rec{};
  std::atomic<uint64_t> lookups{0};
  bool reclaiming = false;  // guarded by the namespace lock: a reclaim is zeroing its extents
  // Direct-access leases held (guarded by the namespace lock) and the largest size any
  // of them covers: blocks below it never change owner while leases > 0 (LeaseTable).
  uint32_t leases = 0;
  uint64_t leased_size = 0;
  // Directories: name -> dirent slot, and the slots in order (readdir cookies).
  // Guarded by the table lock (written only while an Edit applies).
  absl::flat_hash_map<std::string, uint64_t> names;
  std::set<uint64_t> slots;
  uint64_t parent_slot = UINT64_MAX;  // a directory's own dirent (root: none)

  Mutex mu;
  // Set (under mu) when a reclaim starts zeroing the inode's blocks: a thread that
  // pinned the inode before must not store into them any more.
  bool gone ABSL_GUARDED_BY(mu) = false;
  // Not yet durable (msync mode): file bytes [dirty_lo, dirty_hi) and record fields.
  uint64_t dirty_lo ABSL_GUARDED_BY(mu) = UINT64_MAX;
  uint64_t dirty_hi ABSL_GUARDED_BY(mu) = 0;
  bool size_dirty = false;   // rec.size changed since the last commit
  // rec's times changed by a write (mtime, ctime) or a read (atime) since the last commit
  bool mtime_dirty = false;
  // When the record was last committed (NowNs), to bound how stale the durable times
  // of a file written in place may be (kTimesStalenessNs). Guarded by mu.
  int64_t committed_ns = 0;
};

// One directory entry, as the table lock guards it.
struct Dirent {
  uint64_t parent;
  uint64_t child;
  std::string name;
};

// Calls fn(pool_offset, length, position_in_range) for the pool bytes holding file bytes
// [off, off+len) of `rec`, which must be allocated; `data_offset` is the data area's.
template <typename Fn>
void ForEachRun(uint64_t data_offset, const format::InodeRecord& rec, uint64_t off,
                uint64_t len, Fn fn) {
  uint64_t file_pos = 0;  // file offset of the current extent's first byte
  uint64_t done = 0;
  for (uint32_t i = 0; i < rec.extent_count && done < len; ++i) {
    const uint64_t ext_bytes = rec.extents[i].count * format::kBlockSize;
    const uint64_t cur = off + done;
    if (cur < file_pos + ext_bytes) {
      const uint64_t in_ext = cur - file_pos;
      const uint64_t n = std::min(ext_bytes - in_ext, len - done);
      fn(data_offset + rec.extents[i].block * format::kBlockSize + in_ext, n, done);
      done += n;
    }
    file_pos += ext_bytes;
  }
}

}  // namespace walfs::core

#endif  // WALFS_CORE_INODE_H_
