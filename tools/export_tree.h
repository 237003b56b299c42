// The tree writer of walfsctl export: recreates a pool's listed files (core::FsckFile,
// as CheckPool lists them) under a directory. It owns every write an export makes and
// writes nowhere but inside that directory; it reads the pool only through the region
// and the listing it is given, and never writes to them.
//
// A security boundary: every name, type, size and extent comes from a pool that may be
// crafted or damaged. The tree is built only through directory descriptors it opened
// itself, one component at a time with O_NOFOLLOW, so no path is ever handed to the
// kernel whole. A component that is empty, "." or ".." or holds a NUL is refused; a
// symlink (one the export made, or one already in the directory) or anything else that
// is not a directory is never entered; names already present are never overwritten or
// opened (O_EXCL, mkdirat, symlinkat, mknodat, linkat all fail on them); FIFOs and
// devices are recreated with mknodat, with their mode, never opened (but a FIFO whose
// set-ID bits must be restored, read-only and non-blocking); no mode is ever set by name;
// and a file's bytes are copied only from extents that lie in the data area and the
// region.
#ifndef WALFS_TOOLS_EXPORT_TREE_H_
#define WALFS_TOOLS_EXPORT_TREE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/format.h"
#include "core/fsck.h"
#include "core/persistent_region.h"

namespace walfs::tools {

// An open file descriptor, closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept;
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

class Exporter {
 public:
  // Told each problem as it happens, for the operator: `path` is the pool path of the
  // entry it is about (a note, such as a salvaged record, or why it was not copied);
  // null for a directory whose attributes could not be set at the end (`message`
  // names it).
  using Reporter = std::function<void(const std::string* path, const std::string& message)>;

  // `sb` is the superblock CheckPool validated for `region` (its data-area geometry,
  // current size included, bounds every extent read); `dir` is the directory to write
  // into, created (0700) if missing. All three must outlive the exporter.
  Exporter(const core::PersistentRegion& region, const core::format::Superblock& sb,
           std::string dir, Reporter report)
      : region_(region), sb_(sb), dir_(std::move(dir)), report_(std::move(report)) {}

  // Copies every listed file, the root ("/") first as CheckPool lists it; false when
  // any could not be copied (each one reported). Directory modes and times are set
  // last.
  bool Run(const std::vector<core::FsckFile>& files);

  uint64_t files() const { return files_; }
  uint64_t dirs() const { return dirs_.size(); }
  uint64_t symlinks() const { return symlinks_; }
  uint64_t links() const { return links_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t salvaged() const { return salvaged_; }
  uint64_t specials() const { return specials_; }

 private:
  // A pool path's directory, open, and its last component.
  struct Parent {
    Fd dir;
    std::string name;
  };

  std::string Shown(const std::string& path) const;
  absl::Status Errno(std::string_view what, const std::string& path) const;
  absl::StatusOr<Parent> OpenParent(const std::string& path) const;
  absl::Status Copy(const core::FsckFile& file);
  absl::StatusOr<std::string> ReadData(const core::format::InodeRecord& r) const;
  absl::Status SetDirectoryAttributes(const std::string& path,
                                      const core::format::InodeRecord& r);
  absl::Status SetAttributes(const std::string& path, const core::format::InodeRecord& r,
                             int fd, int at, const char* name);
  absl::Status RestoreSetIdBits(const std::string& path, const core::format::InodeRecord& r,
                                int at, const char* name);

  const core::PersistentRegion& region_;
  const core::format::Superblock& sb_;
  const std::string dir_;
  const Reporter report_;
  Fd root_;  // DIR, opened once the root entry (always listed first) made it
  absl::flat_hash_map<uint64_t, std::string> first_path_;  // ino -> exported pool path
  std::vector<std::pair<std::string, core::format::InodeRecord>> dirs_;  // pool paths
  uint64_t files_ = 0, symlinks_ = 0, links_ = 0, bytes_ = 0, salvaged_ = 0, specials_ = 0;
};

}  // namespace walfs::tools

#endif  // WALFS_TOOLS_EXPORT_TREE_H_
