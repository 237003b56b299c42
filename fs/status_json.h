// The live status document, read with getxattr(MOUNTPOINT, "user.walfs.status").
//
// walfs shows nothing extra in readdir (initdb -X refuses a directory with any entry),
// so status is an extended attribute of the mount root that listxattr does not list.
// The value is one flat JSON object, compact (no whitespace), keys always present and
// in this order; numbers are unsigned decimal integers, strings are JSON-escaped:
//
//   "version":        1, bumped if a key changes meaning or goes away
//   "pool":           absolute path of the pool file or device
//   "mountpoint":     absolute path of the mount point
//   "pid":            the daemon's pid
//   "mode":           "pmem" | "msync": WalDirectory::mode()
//   "region":         PersistentRegion::kind(): "pmem" | "msync" | "memory"
//   "durability":     "auto" | "strict" (the mount option)
//   "fsync_shortcut": true when FSYNC/FSYNCDIR/FLUSH are answered ENOSYS
//                     (mode pmem and durability auto)
//   "read_only":      true for a ro mount
//   "threads":        FUSE worker threads
//   "segment_size":   extent size given to WAL segments (superblock)
//   "block_size", "total_blocks", "free_blocks", "total_inodes", "free_inodes":
//                     WalDirectory::Statfs()
//   "writes", "write_bytes", "reads", "read_bytes", "fsyncs", "fsyncdirs",
//   "sync_writes", "journal_commits", "journal_replays", "orphans_reclaimed",
//   "zeroed_blocks":  core::Counters, since the pool was opened
//   "fuse_fsync":     FSYNC requests the daemon received (ENOSYS answers included)
//   "fuse_fsyncdir":  FSYNCDIR requests the daemon received
//   "fuse_flush":     FLUSH requests the daemon received
//   "leases_granted", "leases_released", "leases_active":
//                     direct-access leases (core::Counters): handed out, ended, held now
//   "leases_refused": lease requests answered with an error (msync mode, empty file,
//                     read-only handle, ...); the client then writes through FUSE
#ifndef WALFS_FS_STATUS_JSON_H_
#define WALFS_FS_STATUS_JSON_H_

#include <cstdint>
#include <string>

#include "core/wal_directory.h"

namespace walfs::fs {

inline constexpr char kStatusXattr[] = "user.walfs.status";

struct DaemonStatus {
  std::string pool;
  std::string mountpoint;
  int64_t pid = 0;
  core::DurabilityMode mode = core::DurabilityMode::kPmem;
  std::string region;
  bool strict = false;
  bool fsync_shortcut = false;
  bool read_only = false;
  unsigned threads = 0;
  uint64_t segment_size = 0;
  core::FsStats stats;
  core::Counters counters;
  uint64_t fuse_fsync = 0;
  uint64_t fuse_fsyncdir = 0;
  uint64_t fuse_flush = 0;
  uint64_t leases_refused = 0;
};

std::string StatusJson(const DaemonStatus& status);

}  // namespace walfs::fs

#endif  // WALFS_FS_STATUS_JSON_H_
