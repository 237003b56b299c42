// PoolClaim and OpenAndCheckPool (core/fsck.h): how the offline tools take a pool and
// read it. Writes to a pool only through CheckPool's repairs.
#include "core/fsck.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/persistent_region.h"
#include "core/pool_clients.h"
#include "core/status.h"

namespace walfs::core {

absl::StatusOr<std::unique_ptr<PoolClaim>> PoolClaim::Acquire(const std::string& path,
                                                              bool exclusive) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PosixError(absl::StrCat("cannot open pool ", path), errno);
  if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    const int e = errno;
    close(fd);
    if (e == EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(
          "pool ", path, " is in use (a running walfs daemon or another tool holds it)"));
    }
    return PosixError(absl::StrCat("cannot lock pool ", path), e);
  }
  if (exclusive) {
    // Rewriting a pool under a direct-access client could free blocks it still stores
    // into (core/pool_clients.h).
    if (absl::Status s = CheckNoDirectClients(path); !s.ok()) {
      close(fd);
      return absl::UnavailableError(s.message());
    }
  }
  return std::unique_ptr<PoolClaim>(new PoolClaim(fd));
}

PoolClaim::~PoolClaim() { close(fd_); }

absl::StatusOr<CheckedPool> OpenAndCheckPool(const std::string& path,
                                             std::unique_ptr<PoolClaim> claim,
                                             const FsckOptions& options) {
  PmemOpenOptions open_options;
  open_options.read_only = !options.repair;
  absl::StatusOr<std::unique_ptr<PersistentRegion>> region = OpenPmemRegion(path, open_options);
  if (!region.ok()) return region.status();
  absl::StatusOr<FsckReport> report = CheckPool(**region, options);
  if (!report.ok()) return report.status();
  return CheckedPool{std::move(claim), *std::move(region), *std::move(report)};
}

}  // namespace walfs::core
