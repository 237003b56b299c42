// The lease ioctl's request check and reply (fs/lease_protocol.h, protocol v4).
#ifndef WALFS_FS_LEASE_REPLY_H_
#define WALFS_FS_LEASE_REPLY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/format.h"
#include "core/wal_directory.h"
#include "fs/lease_protocol.h"

namespace walfs::fs {

// The handle's revocation word: where it is in the stamps memfd and what it holds now.
struct LeaseStamp {
  uint64_t offset = 0;
  uint64_t value = 0;
  uint64_t stamps_id = 0;  // LeaseStamps::id() of the memfd the word is in
};

// What the client put into the reply buffer (untrusted): 0 when it asks for a v4 lease
// (magic, version, access kAccessWrite or kAccessRead), else EINVAL. Other fields are ignored:
// the daemon overwrites every byte of the reply.
int CheckLeaseRequest(const lease::Reply& request);

// Fills `reply` (every byte: unused bytes are zero) for a lease of kind `access`. It carries no path (L1): the client
// stores only into the pool descriptor of its session and checks the uuid against the
// superblock it read from it. InvalidArgument when the lease cannot be expressed (no
// runs, more runs than the protocol carries, no stamp or stamps id): the caller then refuses the
// lease rather than send a partial one.
absl::Status FillLeaseReply(const core::Lease& lease, const core::format::Superblock& sb,
                            LeaseStamp stamp, uint32_t access, lease::Reply* reply);

}  // namespace walfs::fs

#endif  // WALFS_FS_LEASE_REPLY_H_
