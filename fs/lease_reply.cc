// The lease ioctl's request check and reply.
#include "fs/lease_reply.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace walfs::fs {

int CheckLeaseRequest(const lease::Reply& request) {
  if (request.magic != lease::kMagic || request.version != lease::kVersion ||
      (request.access != lease::kAccessWrite && request.access != lease::kAccessRead)) {
    return EINVAL;
  }
  return 0;
}

absl::Status FillLeaseReply(const core::Lease& lease, const core::format::Superblock& sb,
                            LeaseStamp stamp, uint32_t access, lease::Reply* reply) {
  std::memset(reply, 0, sizeof(*reply));
  if (lease.runs.empty() || lease.runs.size() > lease::kMaxRuns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease of ", lease.runs.size(), " runs (the protocol carries 1..", lease::kMaxRuns,
        ")"));
  }
  if (stamp.value == 0 || stamp.stamps_id == 0 || stamp.offset % sizeof(uint64_t) != 0) {
    return absl::InvalidArgumentError("no revocation stamp for the lease");
  }
  reply->magic = lease::kMagic;
  reply->version = lease::kVersion;
  reply->access = access;
  reply->flags = 0;
  reply->ino = lease.ino;
  reply->leased_size = lease.size;
  reply->block_size = sb.block_size;
  static_assert(sizeof(reply->uuid) == sizeof(sb.uuid));
  std::memcpy(reply->uuid, sb.uuid, sizeof(reply->uuid));
  reply->stamp = stamp.value;
  reply->stamp_offset = stamp.offset;
  reply->stamps_id = stamp.stamps_id;
  reply->run_count = static_cast<uint32_t>(lease.runs.size());
  for (size_t i = 0; i < lease.runs.size(); ++i) {
    reply->runs[i] = lease::Run{.file_offset = lease.runs[i].file_offset,
                                .pool_offset = lease.runs[i].pool_offset,
                                .length = lease.runs[i].length};
  }
  return absl::OkStatus();
}

}  // namespace walfs::fs
