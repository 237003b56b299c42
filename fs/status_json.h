// The live status document, read with getxattr(MOUNTPOINT, "user.walfs.status").
//
// walfs shows nothing extra in readdir (initdb -X refuses a directory with any entry),
// so status is an extended attribute of the mount root that listxattr does not list.
// The value is one JSON object (flat but for "latency"), compact (no whitespace), keys always present and
// in this order; numbers are unsigned decimal integers, strings are JSON-escaped:
//
//   "version":        1, bumped if a key changes meaning or goes away
//   "pool":           absolute path of the pool file or device
//   "mountpoint":     absolute path of the mount point
//   "pid":            the daemon's pid
//   "mode":           "pmem" | "msync": WalDirectory::mode()
//   "region":         PersistentRegion::kind(): "pmem" | "msync" | "memory"
//   "durability":     "auto" | "strict" (the mount option)
//   "fsync_shortcut": true when FSYNC is answered ENOSYS (mode pmem and durability
//                     auto)
//   "fsyncdir_shortcut": true when FSYNCDIR is answered ENOSYS (durability auto,
//                     either mode)
//   "flush_shortcut": true when FLUSH is answered ENOSYS (durability auto and no
//                     leases: a daemon that grants leases revokes them at FLUSH)
//   "opendir_shortcut": true when OPENDIR is answered ENOSYS (the kernel then opens
//                     directories without asking)
//   "read_only":      true for a ro mount
//   "threads":        FUSE worker threads
//   "segment_size":   extent size given to WAL segments (superblock)
//   "block_size", "total_blocks", "free_blocks", "reserved_blocks", "total_inodes",
//   "free_inodes":    WalDirectory::Statfs() (reserved_blocks: the part of free_blocks
//                     only WAL segments may take, core/layout.h)
//   "writes", "write_bytes", "reads", "read_bytes", "fsyncs", "fsyncdirs",
//   "sync_writes", "journal_commits", "journal_replays", "orphans_reclaimed",
//   "zeroed_blocks":  core::Counters, since the pool was opened
//   "fuse_fsync":     FSYNC requests the daemon received (ENOSYS answers included)
//   "fuse_fsyncdir":  FSYNCDIR requests the daemon received
//   "fuse_flush":     FLUSH requests the daemon received
//   "leases_granted", "leases_released", "leases_active":
//                     direct-access write leases (core::Counters): handed out, ended,
//                     held now
//   "read_leases_granted", "read_leases_released", "read_leases_active",
//   "read_leases_revoked":
//                     direct-access read leases (fs/read_leases.h): handed out, ended,
//                     held now, revoked by a size change
//   "leases_refused": lease requests of either kind answered with an error (msync
//                     mode, empty file, ...); the client then goes through FUSE
//   "direct_access":  true when the daemon grants sessions and leases
//   "direct_access_off_reason": "" when it does; else why not (read-only mount, msync
//                     mode, the page_cache experiment, no revocation stamps)
//   "direct_access_durability": "device" | "map_sync" | "forced" | "reads_only" |
//                     "none": why a copy + drain into the pool is durable
//                     (lease_protocol.h kDurability*)
//   "direct_reads":   true when the daemon grants sessions and read leases: with
//                     direct_access, or alone where writes cannot be direct (msync mode)
//   "sessions_granted": session hellos delivered to clients
//   "sessions_refused": session requests refused, or accepted but not delivered
//   "software_version": the daemon's version (WALFS_VERSION)
//   "uptime_seconds": since the daemon started serving
//   "persist_error":  "" while healthy; else the latched persist failure (from then on
//                     every request that promises durability is answered EIO)
//   "enospc_errors", "eio_errors": requests answered ENOSPC / EIO since the start
//   "usage_warning_level": 0, 80, 90 or 95: the highest usage mark crossed (and not
//                     left by 5 points since), as logged (fs/usage_watch.h)
//   "latency":        an object with one member per request class (fs/server.h OpClass:
//                     write, read, fsync, create, rename, unlink, open, other), each
//                     {"count": N, "sum_ns": N, "buckets": [22 counts]}: service time
//                     from callback entry to reply, bucket i counting (2^(i-1), 2^i] us
//                     (bucket 0: up to 1 us, the last: above 2^20 us), as
//                     util/latency_histogram.h. The only nested member.
#ifndef WALFS_FS_STATUS_JSON_H_
#define WALFS_FS_STATUS_JSON_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/wal_directory.h"
#include "util/latency_histogram.h"

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
  bool fsyncdir_shortcut = false;
  bool flush_shortcut = false;
  bool opendir_shortcut = false;
  bool read_only = false;
  unsigned threads = 0;
  uint64_t segment_size = 0;
  core::FsStats stats;
  core::Counters counters;
  uint64_t fuse_fsync = 0;
  uint64_t fuse_fsyncdir = 0;
  uint64_t fuse_flush = 0;
  uint64_t leases_refused = 0;
  uint64_t read_leases_granted = 0;
  uint64_t read_leases_released = 0;
  uint64_t read_leases_revoked = 0;
  bool direct_access = false;
  bool direct_reads = false;
  std::string direct_access_reason;
  std::string direct_durability = "none";
  uint64_t sessions_granted = 0;
  uint64_t sessions_refused = 0;
  uint64_t uptime_seconds = 0;
  std::string persist_error;
  uint64_t enospc_errors = 0;
  uint64_t eio_errors = 0;
  uint64_t usage_warning_level = 0;
  std::vector<std::pair<std::string, util::LatencyHistogram::Snapshot>> latency;
};

std::string StatusJson(const DaemonStatus& status);

}  // namespace walfs::fs

#endif  // WALFS_FS_STATUS_JSON_H_
