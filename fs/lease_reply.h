// LeaseReply: turns a core::Lease into the ioctl reply of fs/lease_protocol.h.
#ifndef WALFS_FS_LEASE_REPLY_H_
#define WALFS_FS_LEASE_REPLY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/format.h"
#include "core/wal_directory.h"
#include "fs/lease_protocol.h"

namespace walfs::fs {

// What the reply says about the pool itself; fixed for the daemon's lifetime.
struct LeasePool {
  std::string path;        // absolute path the client opens
  uint64_t dev = 0;        // st_dev / st_ino of that file as the daemon opened it
  uint64_t ino = 0;
  std::string image_path;  // power-cut simulation's written image; empty otherwise
  std::string stamp_path;  // the revocation stamps (fs/lease_stamps.h)
};

// The handle's revocation word: where it is and what it holds now.
struct LeaseStamp {
  uint64_t offset = 0;
  uint64_t value = 0;
};

// Fills `reply` (every byte: unused bytes are zero). InvalidArgument when the lease
// cannot be expressed (more runs than the protocol carries, a path too long): the
// caller then refuses the lease rather than send a partial one.
absl::Status FillLeaseReply(const core::Lease& lease, const LeasePool& pool,
                            const core::format::Superblock& sb, LeaseStamp stamp,
                            lease::Reply* reply);

}  // namespace walfs::fs

#endif  // WALFS_FS_LEASE_REPLY_H_
