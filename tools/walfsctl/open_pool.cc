// OpenAndList (walfsctl.h): how inspect and export read an unmounted pool. Only reads:
// the region is opened read-only and the check runs without repair.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/fsck.h"
#include "tools/walfsctl/walfsctl.h"

namespace walfs::tools::ctl {

absl::StatusOr<core::CheckedPool> OpenAndList(const std::string& path, bool salvage) {
  // Reading a pool in use is allowed (it is how one looks at a live pool), but what is
  // read may be mid-change.
  absl::StatusOr<std::unique_ptr<core::PoolClaim>> claim =
      core::PoolClaim::Acquire(path, /*exclusive=*/false);
  if (!claim.ok() && absl::IsUnavailable(claim.status())) {
    std::fprintf(stderr, "walfsctl: warning: %s; what it shows may be mid-change\n",
                 std::string(claim.status().message()).c_str());
  }
  core::FsckOptions options;
  options.list_files = true;
  options.salvage = salvage;
  options.scan_data = false;  // metadata only: fsck.walfs reads the free space
  return core::OpenAndCheckPool(path, claim.ok() ? *std::move(claim) : nullptr, options);
}

}  // namespace walfs::tools::ctl
