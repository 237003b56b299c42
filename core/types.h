// The engine's interface types: the plain values that cross between core/ and its callers
// (fs/, the tools, the tests). No engine behaviour and no engine state; every call that takes or
// returns them is declared with the piece that owns it (docs/design/engine.md).
#ifndef WALFS_CORE_TYPES_H_
#define WALFS_CORE_TYPES_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/format.h"

namespace walfs::core {

using InodeId = uint64_t;
inline constexpr InodeId kRootInode = format::kRootInode;

enum class DurabilityMode {
  kPmem,   // region->is_pmem(): writes persisted before returning
  kMsync,  // page cache + msync: persisted by Fsync or sync writes
};
inline std::string_view DurabilityModeName(DurabilityMode mode) {
  return mode == DurabilityMode::kPmem ? "pmem" : "msync";
}

struct Attr {
  InodeId ino = 0;
  uint64_t generation = 0;
  uint32_t mode = 0;  // st_mode: S_IFREG/S_IFDIR/S_IFLNK | permission bits
  uint32_t nlink = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  uint64_t blocks = 0;  // 512-byte units allocated (st_blocks)
  int64_t atime_ns = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t rdev = 0;  // devices: st_rdev
};

// Who asks: new inodes get this uid/gid (the gid is the directory's in a set-group-ID
// directory). Permission checks are the kernel's
// (default_permissions); core checks only what POSIX asks of the file system itself.
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

struct SetattrRequest {
  std::optional<uint32_t> mode;  // permission bits only; the type bits are kept
  // The caller lacks CAP_FSETID and truncates (open O_TRUNC): S_ISUID and, with group
  // execute, S_ISGID are cleared as a write would clear them. `mode` overrides it.
  bool clear_setid = false;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint64_t> size;  // truncate: grown range reads as zeros
  std::optional<int64_t> atime_ns;
  std::optional<int64_t> mtime_ns;
};

struct DirEntry {
  std::string_view name;
  InodeId ino;
  uint32_t type;  // S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, ... (d_type = type >> 12)
  uint64_t next_cookie;  // pass to Readdir to continue after this entry
};

struct FsStats {
  uint64_t block_size = 0;
  uint64_t total_blocks = 0;
  uint64_t free_blocks = 0;  // exact: blocks not owned by any inode
  // Of free_blocks, those only WAL segments may take (ReservedBlocks, layout.h): statfs's f_bavail
  // is free_blocks minus these (f_bfree stays free_blocks).
  uint64_t reserved_blocks = 0;
  uint64_t total_inodes = 0;
  uint64_t free_inodes = 0;
  uint32_t name_max = format::kMaxNameLength;
};

// Live counters (relaxed atomics inside; a snapshot here).
struct Counters {
  uint64_t writes = 0, write_bytes = 0, reads = 0, read_bytes = 0;
  uint64_t fsyncs = 0, fsyncdirs = 0, sync_writes = 0;
  uint64_t journal_commits = 0, journal_replays = 0;
  uint64_t orphans_reclaimed = 0, zeroed_blocks = 0;
  uint64_t leases_granted = 0;   // AcquireLease calls that counted a new lease
  uint64_t leases_released = 0;  // ReleaseLease calls
  uint64_t leases_active = 0;    // leases held now (granted - released, as a gauge)
};

// Direct access: file bytes [file_offset, file_offset + length) of a leased file live in
// pool bytes [pool_offset, pool_offset + length). Offsets and lengths are multiples of
// the block size; runs are in file order and contiguous from file offset 0.
struct LeaseRun {
  uint64_t file_offset = 0;
  uint64_t pool_offset = 0;
  uint64_t length = 0;
};

// What a lease holder may store into itself: file bytes [0, size) through `runs`
// (which may extend past `size` to the end of the last block; those bytes are not
// leased). See LeaseTable::AcquireLease for what the pool guarantees while it is held.
struct Lease {
  InodeId ino = 0;
  uint64_t size = 0;
  std::vector<LeaseRun> runs;
};

struct OpenOptions {
  bool read_only = false;  // no recovery writes; every mutation fails with EROFS
  // Skip storing zeros written past EOF into allocated space, which already reads as
  // zero (format.h). Turned off only to measure what it saves (tools/bench/levers.sh).
  bool zero_elision = true;
};

// How old the durable mtime/ctime of a file written in place may be, behind its last
// write (see DataPath::Write): a write commits its record when the last commit is this old.
inline constexpr int64_t kTimesStalenessNs = 1'000'000'000;

enum RenameFlags : uint32_t {
  kRenameNoReplace = 1u << 0,  // RENAME_NOREPLACE
  kRenameExchange = 1u << 1,   // RENAME_EXCHANGE
};

enum FallocateFlags : uint32_t {
  kFallocateKeepSize = 1u << 0,  // FALLOC_FL_KEEP_SIZE
};

// What GrowPool (wal_directory.h) did, in data blocks (kBlockSize each).
struct GrowResult {
  uint64_t old_blocks = 0;
  uint64_t new_blocks = 0;
  uint64_t old_capacity = 0;  // bytes covered by the layout, before and after
  uint64_t new_capacity = 0;
};

}  // namespace walfs::core

#endif  // WALFS_CORE_TYPES_H_
