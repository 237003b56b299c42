// walfsctl grow: makes an unmounted pool file bigger. Extends the file (posix_fallocate),
// then commits the new data-area size through the journal (core/wal_directory.h,
// GrowPool); a refused or failed grow gives the extension back. Holds the pool's
// exclusive claim throughout, so no daemon opens it meanwhile.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "util/byte_size.h"
#include "core/format.h"
#include "core/fsck.h"
#include "core/persistent_region.h"
#include "core/wal_directory.h"
#include "tools/human_bytes.h"
#include "tools/walfsctl/walfsctl.h"

namespace walfs::tools::ctl {
namespace {

namespace f = core::format;

// The pool's current capacity and data-area size, read (not changed) by a read-only
// open: this checks it is a pool walfs would open, journal and state record included.
absl::StatusOr<f::Superblock> CurrentGeometry(const std::string& pool) {
  core::PmemOpenOptions ro;
  ro.read_only = true;
  absl::StatusOr<std::unique_ptr<core::PersistentRegion>> region =
      core::OpenPmemRegion(pool, ro);
  if (!region.ok()) return region.status();
  core::OpenOptions options;
  options.read_only = true;
  absl::StatusOr<std::unique_ptr<core::WalDirectory>> dir =
      core::WalDirectory::Open(*std::move(region), options);
  if (!dir.ok()) return dir.status();
  return (*dir)->superblock();
}

std::string FreeOn(const std::string& path) {
  struct statvfs v;
  if (statvfs(path.c_str(), &v) != 0) return "";
  return absl::StrCat(" (the file system holding it has ",
                      HumanBytes(uint64_t{v.f_bavail} * v.f_frsize), " free)");
}

}  // namespace

int Grow(const std::string& pool, const std::string& size_text) {
  absl::StatusOr<uint64_t> size = util::ParseByteSize(size_text);
  if (!size.ok()) return UsageError(absl::StrCat("grow: SIZE: ", size.status().message()));
  struct stat st;
  if (stat(pool.c_str(), &st) != 0) {
    return Fail(absl::StrCat("cannot grow ", pool, ": ", std::strerror(errno)));
  }
  if (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode)) {
    return Fail(absl::StrCat("cannot grow ", pool,
                             ": it is a device, whose size walfsctl cannot change; make a "
                             "bigger pool and move the files (walfsctl export, README)"));
  }
  if (!S_ISREG(st.st_mode)) {
    return Fail(absl::StrCat("cannot grow ", pool, ": not a regular file"));
  }
  // Held until the end: no daemon can open the pool while it grows.
  absl::StatusOr<std::unique_ptr<core::PoolClaim>> claim =
      core::PoolClaim::Acquire(pool, /*exclusive=*/true);
  if (!claim.ok()) {
    if (absl::IsUnavailable(claim.status())) {
      return Fail(absl::StrCat("cannot grow: ", claim.status().message(),
                               "; grow is offline: stop the cluster and the walfs mount "
                               "(walfs@ unit or fusermount3 -u) first"));
    }
    return Fail(absl::StrCat("cannot grow: ", claim.status().message()));
  }
  absl::StatusOr<f::Superblock> before = CurrentGeometry(pool);
  if (!before.ok()) {
    return Fail(absl::StrCat("cannot grow ", pool, ": ", before.status().message()));
  }
  const uint64_t new_blocks =
      *size > before->data_offset ? (*size - before->data_offset) / f::kBlockSize : 0;
  if (new_blocks <= before->data_blocks) {
    return Fail(absl::StrCat(
        "cannot grow ", pool, " to ", size_text, " (", *size, " bytes): the pool is already ",
        HumanBytes(before->capacity), " (", before->capacity, " bytes)",
        *size > before->capacity ? ", and the new size must add at least one 4 KiB block"
                                 : "; a pool cannot shrink"));
  }
  const uint64_t new_capacity = before->data_offset + new_blocks * f::kBlockSize;
  const int fd = open(pool.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Fail(absl::StrCat("cannot open ", pool, ": ", std::strerror(errno)));
  const uint64_t old_file_size = static_cast<uint64_t>(st.st_size);
  if (old_file_size < new_capacity) {
    // posix_fallocate, not ftruncate: the space must exist now (a sparse pool on a full
    // tmpfs would fault on its first store), and the new bytes read as zeros.
    const int e = posix_fallocate(fd, 0, static_cast<off_t>(new_capacity));
    if (e != 0) {
      // Back to the old size, so a refused grow changes nothing.
      const int rc = ftruncate(fd, static_cast<off_t>(old_file_size));
      close(fd);
      return Fail(absl::StrCat("cannot grow ", pool, " to ", HumanBytes(new_capacity), ": ",
                               std::strerror(e), FreeOn(pool),
                               rc == 0 ? "; the pool is unchanged" : ""));
    }
    core::PrefaultTmpfsRange(fd, old_file_size, new_capacity - old_file_size);
  }
  close(fd);
  absl::StatusOr<std::unique_ptr<core::PersistentRegion>> region = core::OpenPmemRegion(pool);
  absl::StatusOr<core::GrowResult> grown =
      region.ok() ? core::GrowPool(*std::move(region), new_capacity)
                  : absl::StatusOr<core::GrowResult>(region.status());
  if (!grown.ok()) {
    // If the new size was not committed, the extension is given back (the pool opens
    // either way: a region bigger than the pool is fine).
    absl::StatusOr<f::Superblock> after = CurrentGeometry(pool);
    std::string state = "; the pool's state is unknown: run fsck.walfs";
    if (after.ok() && after->data_blocks == before->data_blocks &&
        truncate(pool.c_str(), static_cast<off_t>(old_file_size)) == 0) {
      state = "; the pool is unchanged";
    } else if (after.ok()) {
      state = absl::StrCat("; the pool is now ", HumanBytes(after->capacity));
    }
    return Fail(absl::StrCat("cannot grow ", pool, ": ", grown.status().message(), state));
  }
  std::printf("walfsctl: %s grown from %s (%llu data blocks) to %s (%llu data blocks)\n",
              pool.c_str(), HumanBytes(grown->old_capacity).c_str(),
              static_cast<unsigned long long>(grown->old_blocks),
              HumanBytes(grown->new_capacity).c_str(),
              static_cast<unsigned long long>(grown->new_blocks));
  return 0;
}

}  // namespace walfs::tools::ctl
