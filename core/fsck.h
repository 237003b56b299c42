// Fsck: an independent checker (and careful repairer) of a walfs pool's on-media format.
//
// It reads the raw bytes described by core/format.h and nothing else. With pool open it
// shares only the definition of a valid record (core/validate.h) and the journal's slot
// parser (core/journal.h), so both say the same about the same damage; the checks across
// records (shared blocks, the tree, link counts, free space) are its own, so a bug in
// the namespace, journal replay or allocator shows up here as a broken invariant instead
// of being read back the same wrong way.
//
// Every offset, length and index read from the pool is bounds-checked before use, and
// every walk over links (directory tree, parent chains) carries a visited set: a
// corrupt pool produces problems in the report, never a crash or a loop.
//
// Severity:
//  - kError: the pool breaks an invariant of format.h (corruption, or a bug that wrote
//    a wrong record).
//  - kWarning: a state a power failure legitimately leaves and that WalDirectory::Open
//    recovers by itself (a journal not yet replayed, orphans not yet reclaimed,
//    unacknowledged bytes past a file's end).
//  - kInfo: worth knowing, nothing wrong (a torn, uncommitted journal transaction).
//
// Repair (FsckOptions::repair) fixes only what has one safe answer, and marks each such
// problem `repaired`: a bad superblock copy from the good one, replaying (or discarding
// an invalid) journal transaction, a damaged state record (rebuilt from what the tables
// hold), a state record whose uninitialised range holds a file's blocks (emptied, so
// its free blocks are scanned and zeroed), dirents naming free inodes or the root, dirent types,
// link counts, live inodes no entry names (given a name "#<ino>" in the root, as
// lost+found), orphans (data zeroed, then the inode freed), non-zero free space (unless
// a file's extents are damaged: those blocks may be its data) and non-zero bytes past a
// file's end. Everything else (both superblocks bad, a truncated pool, extents outside
// the data area or shared by two files, directory cycles, corrupt records) is reported
// and left as it is: fixing it would mean guessing which data is right. Record changes go through the pool's journal exactly
// as the file system writes them (images, header, persist, then home copies, persist),
// so a crash during a repair leaves a pool that recovery completes. After repairing,
// the pool is checked again until a pass repairs nothing; the report keeps every problem
// found, with what is left unrepaired.
//
// The pool must not be in use (mounted) while it is checked: tools hold a PoolClaim.
#ifndef WALFS_CORE_FSCK_H_
#define WALFS_CORE_FSCK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/format.h"
#include "core/persistent_region.h"

namespace walfs::core {

struct FsckOptions {
  bool repair = false;
  // Fill FsckReport::files_list with every inode reachable from the root (inspect).
  bool list_files = false;
  // With list_files, also list what entries lead to through inodes whose record is
  // corrupt (bad crc, state or type), marked `damaged`: best-effort salvage for
  // walfsctl export --salvage. Never affects checking or repair.
  bool salvage = false;
  // Read every data block not owned by a file, and every byte past a file's end, to
  // check that they are zero. Off for walfsctl inspect/export, which want the metadata
  // of a large pool fast; on for fsck.
  bool scan_data = true;
  // Called with (blocks scanned, blocks to scan) while free space is read (scan_data),
  // every 64 MiB and once at the end: fsck.walfs -C.
  std::function<void(uint64_t, uint64_t)> progress = nullptr;
};

struct FsckProblem {
  enum Severity { kInfo, kWarning, kError };
  Severity severity = kError;
  std::string what;   // a sentence: what is wrong, with the numbers that show it
  std::string where;  // "superblock B", "journal", "inode 17", "dirent 4", "data blocks 8-15"
  bool repairable = false;  // fsck --repair knows a safe fix
  bool repaired = false;
};
std::string_view SeverityName(FsckProblem::Severity severity);

// One reachable inode, for listings.
struct FsckFile {
  std::string path;  // "/" for the root, "/a/b" below it
  uint64_t ino = 0;
  format::InodeRecord record{};
  bool damaged = false;  // the record is corrupt: its fields are a best guess
  std::string target;    // a symlink's target (SymlinkTarget), else empty
};

struct FsckReport {
  std::vector<FsckProblem> problems;

  // The superblock the check used (from a valid copy); meaningless unless
  // superblock_valid. Without one, nothing past the superblocks was checked. Its
  // data_blocks and capacity are the pool's current ones (CurrentGeometry: a grown
  // pool's state record, format.h) once the state record was read.
  bool superblock_valid = false;
  format::Superblock superblock{};
  uint64_t region_size = 0;
  // The state record as checked (rebuilt when damaged); with superblock_valid.
  format::PoolState state{};

  // Counts from the last pass (after repairs). inodes_total excludes reserved slot 0.
  uint64_t inodes_total = 0, inodes_live = 0, inodes_orphan = 0, inodes_free = 0;
  uint64_t dirents_total = 0, dirents_used = 0;
  uint64_t files = 0, dirs = 0, symlinks = 0;
  uint64_t specials = 0;  // FIFOs, sockets, devices
  uint64_t blocks_total = 0, blocks_used = 0, blocks_free = 0;
  uint64_t journal_sequence = 0;  // of the last committed transaction, 0 if none
  // That transaction's header flags (format::kJournalFlag*), 0 if none.
  uint32_t journal_flags = 0;
  // Whether the next read-write open trusts free space without reading it: the newest
  // transaction says it is zero, or none was committed since mkfs (core/pool_state.h).
  // fsck is then the only reader of free space, so a block it finds not zero there was
  // written by something other than walfs.
  bool free_space_trusted = false;
  uint32_t passes = 0;            // check passes run (more than one after repairs)

  std::vector<FsckFile> files_list;  // with FsckOptions::list_files, sorted by path

  // No kError problem is left unrepaired. Warnings do not make a pool unclean: recovery
  // handles them at the next read-write open.
  bool clean() const;
  size_t Count(FsckProblem::Severity severity, bool unrepaired_only) const;
  size_t repaired_count() const;
};

// Checks (and with options.repair, repairs) the pool on `region`. The status is an error
// only when the check itself cannot run, or when a repair's persist failed (the region's
// health()); everything wrong with the pool is in the report.
// Without repair the region is only read.
absl::StatusOr<FsckReport> CheckPool(PersistentRegion& region, const FsckOptions& options);

// The report as one JSON object: "clean", "superblock" (geometry, when valid), "usage"
// (counts), "problems", and "files" when the report lists files. For the tools' --json.
std::string FsckReportJson(const FsckReport& report);

// `s` as a JSON string literal, quotes included (bytes >= 0x80 pass through as they are).
std::string JsonQuote(std::string_view s);

// An offline tool's claim on a pool: a flock(2) on the pool file or device, the lock a
// running walfs daemon holds exclusively for its lifetime (fs/pool_lock.h). Exclusive
// for tools that write (mkfs, fsck --repair), shared for readers (fsck, inspect,
// export), so neither runs under a live daemon unnoticed and no daemon starts under a
// tool. Released when destroyed (or when the process dies).
class PoolClaim {
 public:
  // Unavailable ("... is in use ...") when another process holds a conflicting lock;
  // the open error (NotFound, PermissionDenied, ...) otherwise.
  static absl::StatusOr<std::unique_ptr<PoolClaim>> Acquire(const std::string& path,
                                                           bool exclusive);
  ~PoolClaim();
  PoolClaim(const PoolClaim&) = delete;
  PoolClaim& operator=(const PoolClaim&) = delete;

 private:
  explicit PoolClaim(int fd) : fd_(fd) {}
  int fd_;
};

// A pool an offline tool opened and checked: the claim it holds (null for a reader that
// went ahead without one), the mapped region and the report. The claim lives as long
// as the region.
struct CheckedPool {
  std::unique_ptr<PoolClaim> claim;
  std::unique_ptr<PersistentRegion> region;
  FsckReport report;
};

// How the offline tools read a pool: maps `path` (read-only unless options.repair) and
// checks it with `options`. `claim` is the caller's (PoolClaim::Acquire, exclusive for a
// repair), kept in the result; a reader that accepts a pool in use passes null.
absl::StatusOr<CheckedPool> OpenAndCheckPool(const std::string& path,
                                             std::unique_ptr<PoolClaim> claim,
                                             const FsckOptions& options);

// The target of a symlink record: inline in its extents' bytes, or out of line in the
// block extents[0] names (format.h), cut to what that storage holds whatever its size
// field says; empty when the block lies outside the region.
std::string SymlinkTarget(const PersistentRegion& region, const format::Superblock& sb,
                          const format::InodeRecord& record);

// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string FormatUuid(const uint8_t (&uuid)[16]);

}  // namespace walfs::core

#endif  // WALFS_CORE_FSCK_H_
