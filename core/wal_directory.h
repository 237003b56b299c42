// WalDirectory: a mounted-or-not walfs pool as a file system, in plain types.
//
// This is the whole API fs/ uses: one call per FUSE operation, each returning a value or
// an absl::Status whose errno (ErrnoFromStatus) is what the kernel should get. Nothing
// here knows about FUSE. Each call is carried out by the piece of the engine that owns
// it (Namespace, DataPath, LeaseTable, Space: docs/design/engine.md); the contracts
// below are theirs, stated once, here.
//
// Lookup references (FUSE's nlookup): every call that returns an Attr for a name —
// Lookup, Create, Mkdir, Symlink, Link — adds one lookup reference to that inode, and
// Forget(ino, n) drops n of them. An inode whose link count reaches zero stays readable
// and writable until its lookup references are gone too (POSIX open-unlinked
// semantics: the kernel holds a reference for every open file); then its extents are
// zeroed and it is freed. Orphans left by a crash are reclaimed by Open.
//
// Durability (docs/design/durability.md):
//  - Every namespace change (create, mkdir, symlink, link, unlink, rmdir, rename,
//    setattr, truncate, fallocate) is atomic across power failure and is durable when
//    the call returns, in both modes.
//  - kPmem: a Write is durable (data and size) when it returns, so Fsync has nothing to
//    do. kMsync: a Write is durable after Fsync of that inode (from any handle) or when
//    made with `sync` set (O_DSYNC/O_SYNC).
//
// Thread safety: every method may be called concurrently from any thread.
#ifndef WALFS_CORE_WAL_DIRECTORY_H_
#define WALFS_CORE_WAL_DIRECTORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/format.h"
#include "core/persistent_region.h"

namespace walfs::core {

class Pool;

using InodeId = uint64_t;
inline constexpr InodeId kRootInode = format::kRootInode;

enum class DurabilityMode {
  kPmem,   // region->is_pmem(): writes persisted before returning
  kMsync,  // page cache + msync: persisted by Fsync or sync writes
};
std::string_view DurabilityModeName(DurabilityMode mode);

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

// The reserve: the last free blocks of a pool, which only WAL segments (files created
// with a segment name or as xlogtemp.*, which get a segment extent) may take, as ext4
// keeps reserved blocks for root. Other files (archive_status, history, temporary
// files) get ENOSPC when only the reserve is left, so a checkpoint or crash recovery
// after a space shortage can still create the segments it needs. Derived, not stored:
// two segments, at most a quarter of the data area (so a tiny test pool stays usable).
inline constexpr uint64_t kReserveSegments = 2;
uint64_t ReservedBlocks(const format::Superblock& sb);

// Sizing (docs/operations.md, "Sizing a pool"). A PostgreSQL cluster keeps up to max_wal_size of WAL
// between checkpoints (a soft limit, passed under bursts until the checkpoint ends) plus
// wal_keep_size for standbys; on top of that come the segment being written, the next
// one being installed and one being recycled (kHeadroomSegments) and the reserve. So the
// data area a cluster needs is
//   max_wal_size + wal_keep_size + (kHeadroomSegments + kReserveSegments) * segment size.
// (Replication slots and a failing archive_command can hold more: size for them too.)
inline constexpr uint64_t kHeadroomSegments = 3;
uint64_t WalDataBytes(uint64_t max_wal_size, uint64_t wal_keep_size, uint64_t segment_size);
// The largest max_wal_size, in whole segments, that a data area of `data_bytes` holds by
// that rule with this wal_keep_size; 0 when not even the headroom fits.
uint64_t MaxWalSizeFor(uint64_t data_bytes, uint64_t wal_keep_size, uint64_t segment_size);

struct FsStats {
  uint64_t block_size = 0;
  uint64_t total_blocks = 0;
  uint64_t free_blocks = 0;  // exact: blocks not owned by any inode
  // Of free_blocks, those only WAL segments may take (ReservedBlocks): statfs's f_bavail
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
// leased). See AcquireLease for what the pool guarantees while it is held.
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
// write (see Write): a write commits its record when the last commit is this old.
inline constexpr int64_t kTimesStalenessNs = 1'000'000'000;

enum RenameFlags : uint32_t {
  kRenameNoReplace = 1u << 0,  // RENAME_NOREPLACE
  kRenameExchange = 1u << 1,   // RENAME_EXCHANGE
};

enum FallocateFlags : uint32_t {
  kFallocateKeepSize = 1u << 0,  // FALLOC_FL_KEEP_SIZE
};

// What GrowPool did, in data blocks (kBlockSize each).
struct GrowResult {
  uint64_t old_blocks = 0;
  uint64_t new_blocks = 0;
  uint64_t old_capacity = 0;  // bytes covered by the layout, before and after
  uint64_t new_capacity = 0;
};

class WalDirectory {
 public:
  // Validates the superblocks, replays the journal, re-zeroes what a crash left dirty
  // and reclaims orphans (unless read_only), then builds the in-memory indexes.
  // A damaged pool fails with DataLoss naming what and where.
  static absl::StatusOr<std::unique_ptr<WalDirectory>> Open(
      std::unique_ptr<PersistentRegion> region, const OpenOptions& options = {});
  ~WalDirectory();
  WalDirectory(const WalDirectory&) = delete;
  WalDirectory& operator=(const WalDirectory&) = delete;

  DurabilityMode mode() const;
  const format::Superblock& superblock() const;
  const PersistentRegion& region() const;

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

  // Reads up to out.size() bytes at `offset`; short only at EOF. atime follows relatime
  // (moved when not newer than mtime/ctime or a day old), regular files only; it becomes
  // durable with the record's next commit (a write's, Release, Close), not by the read.
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
  // Close commit them at once.
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
  // blocks it holds past its size (growth allocates ahead, Grow). In msync mode a file
  // with bytes not yet synced is left alone: close makes nothing durable.
  absl::Status Release(InodeId ino);

  // Direct access (the daemon side of fs/lease_protocol.h). Grants a lease on the
  // regular file `ino`: its bytes [0, size) with size = the file's size now, which is
  // allocated and durable. Only in pmem mode, where a store the holder persists with
  // cache flushes and a fence is durable; fails with EOPNOTSUPP in msync mode, EROFS on
  // a read-only pool, EINVAL for other file types, ENODATA for an empty file.
  // `renew`: the caller already holds a lease on `ino` (the same open handle asking
  // again): the lease count is unchanged and the returned size may have grown.
  // While any lease on `ino` is held, the blocks of every lease granted are never freed,
  // moved, zeroed or reused: a truncate below the largest leased size fails with
  // ETXTBSY, and an unlinked or renamed-over file stays an orphan until its last lease
  // is released (as it does until its last lookup reference is forgotten). Close() does
  // not reclaim an orphan that is still leased; the next Open does.
  absl::StatusOr<Lease> AcquireLease(InodeId ino, bool renew = false);
  // The runs of `ino` as AcquireLease would grant them, under the same conditions, for a
  // holder that only copies out of them: nothing is counted or pinned, so truncate,
  // unlink and reclaim go on as without it. The caller must make every such holder stop
  // trusting the runs before the file shrinks (the daemon revokes its stamps first).
  absl::StatusOr<Lease> AcquireReadLease(InodeId ino);
  // Ends one lease on `ino`: its mtime and ctime become now (the holder's stores did not
  // come through Write) and are committed. An orphan with no lookup references and no
  // leases left is then reclaimed.
  absl::Status ReleaseLease(InodeId ino);

  // Calls `fn` for entries of directory `ino` after `cookie` (0 = from the start, then
  // "." and ".." are included) in a stable order; stops when fn returns false. Entries
  // not renamed or unlinked during a scan are returned exactly once across calls.
  absl::Status Readdir(InodeId ino, uint64_t cookie,
                       const std::function<bool(const DirEntry&)>& fn);

  FsStats Statfs();
  Counters counters() const;

  // Reads up to `max_blocks` of the free space not yet known to be zero (space free since
  // the pool was opened), so that the allocations which take it later read nothing: the
  // first 16 MiB segment allocated from space not known to be zero otherwise reads 16
  // MiB while PostgreSQL waits. Meant for a background thread, called until it returns
  // 0; the namespace lock is held to pick and to mark the blocks, not while they are
  // read. Free space that is not zero is left for the allocation to refuse, as without
  // it.
  uint64_t VerifyFreeSpaceAhead(uint64_t max_blocks);
  // Whether all free space is known zero (core/pool_state.h): trusted at open because
  // the newest transaction says so, or verified since. Nothing is left to verify ahead.
  bool FreeSpaceKnownZero() const;

  // Persists everything pending and reclaims unreferenced orphans (clean unmount).
  absl::Status Close();

  // GrowPool's work on this open pool (see there). After it succeeds the pool refuses
  // every change (EROFS, "close and reopen"): its allocator still has the old size, and
  // the next Open uses the new one. Reads and Close work as before.
  absl::StatusOr<GrowResult> Grow(uint64_t new_capacity);

 private:
  explicit WalDirectory(std::unique_ptr<Pool> pool);
  std::unique_ptr<Pool> pool_;
};

// Creates a fresh pool on `region` (all of it: capacity = region.size()).
struct FormatOptions {
  uint64_t segment_size = format::kDefaultSegmentSize;
  uint64_t inode_count = 0;  // 0: one per 64 KiB of capacity, at least 64
  // Called with (bytes zeroed, total) while the pool is zeroed (zero_data).
  std::function<void(uint64_t, uint64_t)> progress;
  // The caller knows the region reads as zeros (a new file): the data area starts out
  // initialised, so its free space is verified, not zeroed, when first allocated.
  bool region_is_zero = false;
  // Write zeros over the whole pool (mkfs.walfs --zero) instead of initialising the
  // tables and the data area lazily (format.h, PoolState). Ignored with region_is_zero.
  bool zero_data = false;
  // Owner and permission bits of the root directory (the mount point's attributes), so a
  // pool made for PostgreSQL can be owned by postgres from the start.
  uint32_t root_uid = 0;
  uint32_t root_gid = 0;
  uint32_t root_mode = 0755;
};
absl::Status FormatPool(PersistentRegion& region, const FormatOptions& options);

// The layout FormatPool would write for a region of `capacity` bytes (InvalidArgument
// with the reason when the sizes cannot work).
absl::StatusOr<format::Superblock> ComputeLayout(uint64_t capacity,
                                                 const FormatOptions& options);


// Grows the pool on `region` (walfsctl grow) to `new_capacity` bytes, rounded down to a
// whole block: the data area is extended to end there, every file is kept. Opens the
// pool, WalDirectory::Grow, closes it. Offline: the
// region must not be served by anyone else (the caller holds the pool's lock), and the
// caller has already made the region that big (the bytes past the old capacity may hold
// anything: they are zeroed, or recorded as uninitialised, before the new size is
// committed).
//
// Crash-consistent: the pool is opened (so a pending journal is replayed and a crashed
// operation recovered first), then the new size is committed in one journal
// transaction of the state record (format.h, PoolState::data_blocks). A power cut before
// that commit point leaves the old pool in a bigger region, which opens as before; after
// it, the grown one. Nothing else is written but zeros past the old capacity.
//
// InvalidArgument, with nothing changed, when new_capacity does not add a whole block or
// does not fit in the region; the pool's own errors (not a pool, damaged) as Open gives
// them.
absl::StatusOr<GrowResult> GrowPool(std::unique_ptr<PersistentRegion> region,
                                    uint64_t new_capacity);

// The smallest pool size, in whole MiB, whose layout (ComputeLayout with `options`) has
// a data area of at least `data_bytes`.
absl::StatusOr<uint64_t> PoolSizeFor(uint64_t data_bytes, const FormatOptions& options);

}  // namespace walfs::core

#endif  // WALFS_CORE_WAL_DIRECTORY_H_
