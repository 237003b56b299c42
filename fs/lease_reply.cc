// The lease ioctl's reply.
#include "fs/lease_reply.h"

#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace walfs::fs {

absl::Status FillLeaseReply(const core::Lease& lease, const LeasePool& pool,
                            const core::format::Superblock& sb, LeaseStamp stamp,
                            lease::Reply* reply) {
  std::memset(reply, 0, sizeof(*reply));
  if (lease.runs.size() > lease::kMaxRuns) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease of ", lease.runs.size(), " runs exceeds ", lease::kMaxRuns));
  }
  if (pool.path.size() >= lease::kPathBytes || pool.image_path.size() >= lease::kPathBytes ||
      pool.stamp_path.size() >= lease::kPathBytes) {
    return absl::InvalidArgumentError("pool path too long for a lease reply");
  }
  if (pool.stamp_path.empty() || stamp.value == 0) {
    return absl::InvalidArgumentError("no revocation stamp for the lease");
  }
  reply->magic = lease::kMagic;
  reply->version = lease::kVersion;
  reply->mode = lease::kModePmem;
  reply->flags = pool.image_path.empty() ? 0 : lease::kFlagImage;
  reply->ino = lease.ino;
  reply->leased_size = lease.size;
  reply->block_size = sb.block_size;
  reply->pool_dev = pool.dev;
  reply->pool_ino = pool.ino;
  reply->uuid_offset =
      core::format::kSuperblockOffset[0] + offsetof(core::format::Superblock, uuid);
  std::memcpy(reply->uuid, sb.uuid, sizeof(reply->uuid));
  reply->run_count = static_cast<uint32_t>(lease.runs.size());
  reply->stamp = stamp.value;
  reply->stamp_offset = stamp.offset;
  for (size_t i = 0; i < lease.runs.size(); ++i) {
    reply->runs[i] = lease::Run{.file_offset = lease.runs[i].file_offset,
                                .pool_offset = lease.runs[i].pool_offset,
                                .length = lease.runs[i].length};
  }
  std::memcpy(reply->pool_path, pool.path.data(), pool.path.size());
  std::memcpy(reply->image_path, pool.image_path.data(), pool.image_path.size());
  std::memcpy(reply->stamp_path, pool.stamp_path.data(), pool.stamp_path.size());
  return absl::OkStatus();
}

}  // namespace walfs::fs
