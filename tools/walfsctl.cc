// walfsctl: looks at walfs pools and mounts.
//   inspect  geometry, usage and every file of an unmounted pool (read-only)
//   export   copies every file of an unmounted pool into a directory (read-only)
//   status   the live status document of a mounted walfs (getxattr user.walfs.status
//            of the mount root that holds a given path)
//   grow     makes an unmounted pool bigger (extends its file, then commits the new
//            data-area size through the journal: core/wal_directory.h, GrowPool)
//
// inspect and export read the pool with the checker's raw reader (core/fsck.h), not
// with WalDirectory: they work on a pool that WalDirectory would refuse to open, which
// is when an export matters most.
//
// Exit status, as the e2fsprogs tools: 0 success, 1 failure (export: some file could not
// be copied, or the pool has errors so files may be missing) or usage error
// (tools/cli.h).
#include <fcntl.h>
#include <getopt.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/format.h"
#include "core/fsck.h"
#include "core/persistent_region.h"
#include "core/wal_directory.h"
#include "nlohmann/json.hpp"
#include "tools/status_view.h"
#include "tools/cli.h"
#include "tools/human_bytes.h"
#include "util/byte_size.h"

namespace walfs::tools {
namespace {

namespace f = core::format;

constexpr char kProgram[] = "walfsctl";
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 1;
constexpr char kStatusXattr[] = "user.walfs.status";

constexpr char kUsage[] =
    "Usage: walfsctl [OPTIONS] COMMAND ARGUMENTS (options may come anywhere)\n"
    "  walfsctl inspect [--json] POOL\n"
    "      Geometry, usage and the file list (path, type, size, mode, uid, gid, nlink,\n"
    "      extents) of an unmounted pool. Read-only.\n"
    "  walfsctl export [--salvage] POOL DIR\n"
    "      Copies every file of an unmounted pool into DIR (created if missing; existing\n"
    "      names are not overwritten), keeping the tree, symlinks, hard links, modes,\n"
    "      mtimes and, as root, owners. Read-only: for disaster recovery. --salvage also\n"
    "      copies files whose inode record is damaged, as best it can.\n"
    "  walfsctl status PATH [--json | --prometheus | --latency]\n"
    "      The running daemon's status, read from the user.walfs.status attribute of\n"
    "      the root of the walfs mount that holds PATH (the mount point or anything\n"
    "      inside it, e.g. PGDATA/pg_wal): health, space, traffic, direct access,\n"
    "      errors and p99 latency for people; the raw JSON document; Prometheus text\n"
    "      exposition (walfs_* series labelled with mountpoint and pool); or the\n"
    "      latency table of every request class (count, mean, p50, p90, p99, p99.9, max).\n"
    "\n"
    "  -h, --help      show this help and exit (also: walfsctl help)\n"
    "  -V, --version   show the version and exit\n"
    "\n"
    "Exit status: 0 success, 1 failure or usage error.\n";

int UsageError(const std::string& message) {
  return tools::UsageError(kProgram, message, kExitUsage);
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
  return kExitFailure;
}

const char* ShortType(f::InodeType type) {
  switch (type) {
    case f::InodeType::kRegular: return "file";
    case f::InodeType::kDirectory: return "dir";
    case f::InodeType::kSymlink: return "symlink";
    case f::InodeType::kFifo: return "fifo";
    case f::InodeType::kSocket: return "socket";
    case f::InodeType::kCharDevice: return "chardev";
    case f::InodeType::kBlockDevice: return "blkdev";
    case f::InodeType::kNone: break;
  }
  return "?";
}

std::string FormatTime(int64_t ns) {
  const time_t seconds = static_cast<time_t>(ns / 1000000000);
  struct tm tm;
  if (gmtime_r(&seconds, &tm) == nullptr) return absl::StrCat(ns, " ns");
  char text[64];
  strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

// The pool read-only, checked, with its file list.
struct OpenedPool {
  std::unique_ptr<core::PoolClaim> claim;  // null when a daemon holds the pool
  std::unique_ptr<core::PersistentRegion> region;
  core::FsckReport report;
};

absl::StatusOr<OpenedPool> OpenAndList(const std::string& path, bool salvage = false) {
  // Reading a pool in use is allowed (it is how one looks at a live pool), but what is
  // read may be mid-change.
  absl::StatusOr<std::unique_ptr<core::PoolClaim>> claim =
      core::PoolClaim::Acquire(path, /*exclusive=*/false);
  if (!claim.ok() && absl::IsUnavailable(claim.status())) {
    std::fprintf(stderr, "walfsctl: warning: %s; what it shows may be mid-change\n",
                 std::string(claim.status().message()).c_str());
  }
  core::PmemOpenOptions open_options;
  open_options.read_only = true;
  absl::StatusOr<std::unique_ptr<core::PersistentRegion>> region =
      core::OpenPmemRegion(path, open_options);
  if (!region.ok()) return region.status();
  core::FsckOptions options;
  options.list_files = true;
  options.salvage = salvage;
  options.scan_data = false;  // metadata only: fsck.walfs reads the free space
  absl::StatusOr<core::FsckReport> report = core::CheckPool(**region, options);
  if (!report.ok()) return report.status();
  return OpenedPool{claim.ok() ? *std::move(claim) : nullptr, *std::move(region),
                    *std::move(report)};
}

// ---- inspect ---------------------------------------------------------------------

int Inspect(const std::string& pool, bool json) {
  absl::StatusOr<OpenedPool> opened = OpenAndList(pool);
  if (!opened.ok()) return Fail(std::string(opened.status().message()));
  const core::FsckReport& r = opened->report;
  const std::string kind(opened->region->kind());
  if (json) {
    std::printf("{\"pool\":%s,\"kind\":%s,\"report\":%s}\n", core::JsonQuote(pool).c_str(),
                core::JsonQuote(kind).c_str(), core::FsckReportJson(r).c_str());
    return r.superblock_valid ? 0 : kExitFailure;
  }
  std::printf("pool        %s (%s, %s)\n", pool.c_str(), kind.c_str(),
              HumanBytes(r.region_size).c_str());
  if (!r.superblock_valid) {
    std::printf("superblock  none valid: the pool cannot be read (see fsck.walfs %s)\n",
                pool.c_str());
    return kExitFailure;
  }
  const f::Superblock& sb = r.superblock;
  std::printf("uuid        %s\n", core::FormatUuid(sb.uuid).c_str());
  std::printf("created     %s\n", FormatTime(sb.created_ns).c_str());
  std::printf("capacity    %s (%llu bytes), format version %u\n", HumanBytes(sb.capacity).c_str(),
              static_cast<unsigned long long>(sb.capacity), sb.version);
  std::printf("segment     %s\n", HumanBytes(sb.segment_size).c_str());
  std::printf("layout      journal @%llu (%s), inodes @%llu (%llu x %llu), dirents @%llu "
              "(%llu x %llu), data @%llu (%llu x %llu)\n",
              static_cast<unsigned long long>(sb.journal_offset), HumanBytes(sb.journal_size).c_str(),
              static_cast<unsigned long long>(sb.inode_table_offset),
              static_cast<unsigned long long>(sb.inode_count),
              static_cast<unsigned long long>(sb.inode_size),
              static_cast<unsigned long long>(sb.dirent_table_offset),
              static_cast<unsigned long long>(sb.dirent_count),
              static_cast<unsigned long long>(sb.dirent_size),
              static_cast<unsigned long long>(sb.data_offset),
              static_cast<unsigned long long>(sb.data_blocks),
              static_cast<unsigned long long>(sb.block_size));
  std::printf("inodes      %llu of %llu used: %llu files, %llu directories, %llu symlinks, "
              "%llu orphans\n",
              static_cast<unsigned long long>(r.inodes_total - r.inodes_free),
              static_cast<unsigned long long>(r.inodes_total),
              static_cast<unsigned long long>(r.files), static_cast<unsigned long long>(r.dirs),
              static_cast<unsigned long long>(r.symlinks),
              static_cast<unsigned long long>(r.inodes_orphan));
  std::printf("dirents     %llu of %llu used\n", static_cast<unsigned long long>(r.dirents_used),
              static_cast<unsigned long long>(r.dirents_total));
  std::printf("blocks      %llu of %llu used (%s), %s free\n",
              static_cast<unsigned long long>(r.blocks_used),
              static_cast<unsigned long long>(r.blocks_total),
              HumanBytes(r.blocks_used * sb.block_size).c_str(),
              HumanBytes(r.blocks_free * sb.block_size).c_str());
  std::printf("journal     %s\n", r.journal_sequence
                                      ? absl::StrCat("last transaction ", r.journal_sequence).c_str()
                                      : "empty");
  std::printf("free space  %s\n", r.free_space_trusted
                                      ? "kept zero by walfs: the next mount reads none of it"
                                      : "not known zero: the next mount checks it before use");
  const size_t errors = r.Count(core::FsckProblem::kError, false);
  const size_t warnings = r.Count(core::FsckProblem::kWarning, false);
  std::printf("check       %s\n",
              errors + warnings == 0
                  ? "metadata clean (fsck.walfs also checks the data area)"
                  : absl::StrCat(errors, " error(s), ", warnings,
                                 " warning(s) in metadata; run fsck.walfs for details")
                        .c_str());
  std::printf("\n%-40s %-7s %12s %5s %6s %6s %5s  %s\n", "PATH", "TYPE", "SIZE", "MODE", "UID",
              "GID", "NLINK", "EXTENTS (block+count) / TARGET");
  for (const core::FsckFile& file : r.files_list) {
    const f::InodeRecord& rec = file.record;
    std::string extents;
    if (rec.type == f::InodeType::kSymlink) {
      extents = "-> " + file.target;
    } else {
      const uint32_t n = std::min<uint32_t>(rec.extent_count, f::kMaxExtents);
      for (uint32_t i = 0; i < n; ++i) {
        absl::StrAppend(&extents, i ? "," : "", rec.extents[i].block, "+", rec.extents[i].count);
      }
      if (rec.extent_count > f::kMaxExtents) extents += ",...";
    }
    std::printf("%-40s %-7s %12llu %04o %6u %6u %5u  %s\n", file.path.c_str(),
                ShortType(rec.type), static_cast<unsigned long long>(rec.size), rec.mode & 07777,
                rec.uid, rec.gid, rec.nlink, extents.empty() ? "-" : extents.c_str());
  }
  return 0;
}

// ---- export ----------------------------------------------------------------------

// An open file descriptor, closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// The export builds its tree only through directory descriptors it opened itself, one
// component at a time with O_NOFOLLOW: every name comes from the pool, which may be
// crafted or damaged, so no path is ever handed to the kernel whole. A component that is
// empty, "." or ".." is refused, and a symlink the export created (or anything else that
// is not a directory) is never entered, so nothing is written outside DIR.
class Exporter {
 public:
  Exporter(const core::PersistentRegion& region, const f::Superblock& sb, std::string dir)
      : region_(region), sb_(sb), dir_(std::move(dir)) {}

  // Copies every listed file; false when any could not be copied (each one reported).
  bool Run(const std::vector<core::FsckFile>& files) {
    bool ok = true;
    for (const core::FsckFile& file : files) {
      if (absl::Status s = Copy(file); !s.ok()) {
        std::fprintf(stderr, "walfsctl: %s: %s\n", file.path.c_str(),
                     std::string(s.message()).c_str());
        ok = false;
      }
    }
    // Directory modes and times last: creating their entries changed both.
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
      if (absl::Status s = SetDirectoryAttributes(it->first, it->second); !s.ok()) {
        std::fprintf(stderr, "walfsctl: %s\n", std::string(s.message()).c_str());
        ok = false;
      }
    }
    return ok;
  }

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

  std::string Shown(const std::string& path) const {
    return path == "/" ? dir_ : dir_ + path;
  }
  absl::Status Errno(std::string_view what, const std::string& path) const {
    return absl::InternalError(
        absl::StrCat(std::string(what), " ", Shown(path), ": ", strerror(errno)));
  }

  // Opens the directory holding `path` ("/a/b/c": DIR/a/b) through DIR's descriptor.
  absl::StatusOr<Parent> OpenParent(const std::string& path) const {
    if (root_.get() < 0) return absl::FailedPreconditionError("the export directory is not open");
    if (path.size() < 2 || path[0] != '/') {
      return absl::DataLossError(absl::StrCat("invalid path \"", absl::CEscape(path), "\""));
    }
    std::vector<std::string> parts = absl::StrSplit(path.substr(1), '/');
    for (const std::string& part : parts) {
      if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string::npos) {
        return absl::DataLossError(
            absl::StrCat("invalid name in path \"", absl::CEscape(path), "\""));
      }
    }
    Parent p;
    p.name = parts.back();
    parts.pop_back();
    int at = root_.get();
    std::string walked;
    for (const std::string& part : parts) {
      absl::StrAppend(&walked, "/", part);
      Fd next(openat(at, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (next.get() < 0) return Errno("cannot enter directory", walked);
      p.dir = std::move(next);
      at = p.dir.get();
    }
    if (p.dir.get() < 0) p.dir = Fd(dup(root_.get()));
    if (p.dir.get() < 0) return Errno("cannot enter", "/");
    return p;
  }

  absl::Status Copy(const core::FsckFile& file) {
    const f::InodeRecord& r = file.record;
    if (file.damaged) {
      std::fprintf(stderr, "walfsctl: %s: salvaged from a damaged inode record: check it\n",
                   file.path.c_str());
      ++salvaged_;
    }
    if (file.path == "/") {
      if (r.type != f::InodeType::kDirectory) {
        return absl::DataLossError("the root is not a directory");
      }
      if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
        return Errno("cannot create directory", "/");
      }
      root_ = Fd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (root_.get() < 0) return Errno("cannot open directory", "/");
      dirs_.emplace_back(file.path, r);
      return absl::OkStatus();
    }
    absl::StatusOr<Parent> parent = OpenParent(file.path);
    if (!parent.ok()) return parent.status();
    const int at = parent->dir.get();
    const char* name = parent->name.c_str();
    switch (r.type) {
      case f::InodeType::kDirectory: {
        if (mkdirat(at, name, 0700) != 0) return Errno("cannot create directory", file.path);
        dirs_.emplace_back(file.path, r);
        return absl::OkStatus();
      }
      case f::InodeType::kSymlink: {
        const std::string& link = file.target;
        if (link.empty() || link.find('\0') != std::string::npos) {
          return absl::DataLossError("symlink target is empty or holds a NUL byte");
        }
        if (symlinkat(link.c_str(), at, name) != 0) {
          return Errno("cannot create symlink", file.path);
        }
        ++symlinks_;
        return SetAttributes(file.path, r, -1, at, name);
      }
      case f::InodeType::kRegular:
      case f::InodeType::kFifo:
      case f::InodeType::kSocket:
      case f::InodeType::kCharDevice:
      case f::InodeType::kBlockDevice: break;
      case f::InodeType::kNone: return absl::DataLossError("inode has no type");
    }
    if (auto it = first_path_.find(file.ino); it != first_path_.end()) {
      absl::StatusOr<Parent> first = OpenParent(it->second);
      if (!first.ok()) return first.status();
      // Flags 0: a symlink at the first path is linked itself, never followed.
      if (linkat(first->dir.get(), first->name.c_str(), at, name, 0) != 0) {
        return Errno("cannot hard-link", file.path);
      }
      ++links_;
      return absl::OkStatus();
    }
    if (r.type != f::InodeType::kRegular) {
      // Recreated as what they are, never opened (a FIFO would block, a device is not
      // ours to open). Devices need CAP_MKNOD: without it they are reported, not copied.
      mode_t type = S_IFIFO;
      if (r.type == f::InodeType::kSocket) type = S_IFSOCK;
      if (r.type == f::InodeType::kCharDevice) type = S_IFCHR;
      if (r.type == f::InodeType::kBlockDevice) type = S_IFBLK;
      const dev_t rdev = type == S_IFCHR || type == S_IFBLK ? static_cast<dev_t>(r.rdev) : 0;
      if (mknodat(at, name, type | 0600, rdev) != 0) return Errno("cannot create", file.path);
      absl::Status s = SetAttributes(file.path, r, -1, at, name);
      if (!s.ok()) return s;
      first_path_.emplace(file.ino, file.path);
      ++specials_;
      return absl::OkStatus();
    }
    absl::StatusOr<std::string> data = ReadData(r);
    if (!data.ok()) return data.status();
    Fd fd(openat(at, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.get() < 0) return Errno("cannot create", file.path);
    size_t done = 0;
    while (done < data->size()) {
      const ssize_t n = write(fd.get(), data->data() + done, data->size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("cannot write", file.path);
      }
      done += static_cast<size_t>(n);
    }
    absl::Status s = SetAttributes(file.path, r, fd.get(), -1, "");
    if (close(fd.release()) != 0 && s.ok()) s = Errno("cannot close", file.path);
    if (!s.ok()) return s;
    first_path_.emplace(file.ino, file.path);
    ++files_;
    bytes_ += data->size();
    return absl::OkStatus();
  }

  // The file's first `size` bytes, extent by extent, every extent bounds-checked.
  absl::StatusOr<std::string> ReadData(const f::InodeRecord& r) const {
    std::string out;
    const uint32_t n = std::min<uint32_t>(r.extent_count, f::kMaxExtents);
    for (uint32_t i = 0; i < n && out.size() < r.size; ++i) {
      const f::Extent& x = r.extents[i];
      if (x.block >= sb_.data_blocks || x.count > sb_.data_blocks - x.block) {
        return absl::DataLossError(absl::StrCat("extent ", i, " lies outside the data area"));
      }
      const uint64_t want = std::min<uint64_t>(r.size - out.size(), x.count * sb_.block_size);
      const uint64_t offset = sb_.data_offset + x.block * sb_.block_size;
      if (offset + want > region_.size()) return absl::DataLossError("extent past the region");
      out.append(region_.data() + offset, want);
    }
    if (out.size() < r.size) {
      return absl::DataLossError(absl::StrCat("size ", r.size, " exceeds its extents"));
    }
    return out;
  }

  // A directory's mode, owner and times, through a descriptor of it opened without
  // following a symlink.
  absl::Status SetDirectoryAttributes(const std::string& path, const f::InodeRecord& r) {
    Fd fd;
    if (path == "/") {
      fd = Fd(dup(root_.get()));
    } else {
      absl::StatusOr<Parent> parent = OpenParent(path);
      if (!parent.ok()) return parent.status();
      fd = Fd(openat(parent->dir.get(), parent->name.c_str(),
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (fd.get() < 0) return Errno("cannot open directory", path);
    return SetAttributes(path, r, fd.get(), -1, "");
  }

  // Mode, owner (as root) and times: through `fd` when >= 0 (`name` is then unused, ""),
  // else of the entry `name` in directory `at` (a symlink or a special file this export
  // just made), never following a symlink.
  absl::Status SetAttributes(const std::string& path, const f::InodeRecord& r, int fd, int at,
                             const char* name) {
    const bool is_link = r.type == f::InodeType::kSymlink;
    if (geteuid() == 0) {
      const int rc = fd >= 0 ? fchown(fd, r.uid, r.gid)
                             : fchownat(at, name, r.uid, r.gid, AT_SYMLINK_NOFOLLOW);
      if (rc != 0) return Errno("cannot set the owner of", path);
    }
    if (!is_link) {
      // fchmodat follows a symlink, but `name` is no symlink: this export made it.
      const int rc = fd >= 0 ? fchmod(fd, r.mode & 07777) : fchmodat(at, name, r.mode & 07777, 0);
      if (rc != 0) return Errno("cannot set the mode of", path);
    }
    const timespec times[2] = {
        {static_cast<time_t>(r.atime_ns / 1000000000), static_cast<long>(r.atime_ns % 1000000000)},
        {static_cast<time_t>(r.mtime_ns / 1000000000), static_cast<long>(r.mtime_ns % 1000000000)},
    };
    const int rc = fd >= 0 ? futimens(fd, times) : utimensat(at, name, times, AT_SYMLINK_NOFOLLOW);
    if (rc != 0) return Errno("cannot set the times of", path);
    return absl::OkStatus();
  }

  const core::PersistentRegion& region_;
  const f::Superblock& sb_;
  const std::string dir_;
  Fd root_;  // DIR, opened once the root entry (always listed first) made it
  absl::flat_hash_map<uint64_t, std::string> first_path_;  // ino -> exported pool path
  std::vector<std::pair<std::string, f::InodeRecord>> dirs_;  // pool paths
  uint64_t files_ = 0, symlinks_ = 0, links_ = 0, bytes_ = 0, salvaged_ = 0, specials_ = 0;
};

int Export(const std::string& pool, std::string dir, bool salvage) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  absl::StatusOr<OpenedPool> opened = OpenAndList(pool, salvage);
  if (!opened.ok()) return Fail(std::string(opened.status().message()));
  const core::FsckReport& r = opened->report;
  if (!r.superblock_valid) {
    return Fail(absl::StrCat(pool, ": no valid superblock; nothing can be exported"));
  }
  const size_t errors = r.Count(core::FsckProblem::kError, false);
  if (errors > 0) {
    std::fprintf(stderr,
                 "walfsctl: warning: %s has %zu error(s) (see fsck.walfs); exporting what is "
                 "reachable%s\n",
                 pool.c_str(), errors,
                 salvage ? ", damaged records included" : " (--salvage also tries damaged records)");
  }
  Exporter exporter(*opened->region, r.superblock, dir);
  const bool ok = exporter.Run(r.files_list);
  std::printf("exported %llu files (%s), %llu hard links, %llu symlinks, %llu directories "
              "from %s to %s\n",
              static_cast<unsigned long long>(exporter.files()),
              HumanBytes(exporter.bytes()).c_str(),
              static_cast<unsigned long long>(exporter.links()),
              static_cast<unsigned long long>(exporter.symlinks()),
              static_cast<unsigned long long>(exporter.dirs()), pool.c_str(), dir.c_str());
  if (exporter.specials() > 0) {
    std::printf("%llu FIFO(s), socket(s) or device node(s) recreated\n",
                static_cast<unsigned long long>(exporter.specials()));
  }
  if (exporter.salvaged() > 0) {
    std::printf("%llu name(s) copied from damaged inode records\n",
                static_cast<unsigned long long>(exporter.salvaged()));
  }
  return ok && errors == 0 ? 0 : kExitFailure;
}

// ---- status ----------------------------------------------------------------------

// The status document, members in the order the daemon wrote them.
using Json = StatusDoc;

// The status attribute of `path` itself: NotFound when it has none.
absl::StatusOr<std::string> ReadStatusXattr(const std::string& path) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    const ssize_t size = getxattr(path.c_str(), kStatusXattr, nullptr, 0);
    if (size < 0) break;
    std::string buffer(static_cast<size_t>(size) + 1, '\0');
    const ssize_t n = getxattr(path.c_str(), kStatusXattr, buffer.data(), buffer.size());
    if (n >= 0) {
      buffer.resize(static_cast<size_t>(n));
      return buffer;
    }
    if (errno != ERANGE) break;  // grew between the calls: ask again
  }
  const int e = errno;
  if (e == ENODATA || e == ENOTSUP) {
    return absl::NotFoundError(absl::StrCat(path, " has no ", kStatusXattr, " attribute"));
  }
  return absl::InternalError(absl::StrCat("cannot read ", kStatusXattr, " of ", path, ": ",
                                          strerror(e)));
}

struct MountStatus {
  std::string root;      // the directory that answered: the walfs mount's root
  std::string document;  // the status document
};

// The status of the walfs mount holding `path`, which may be the mount point or any
// path inside the mount (PGDATA/pg_wal, a symlink into it, a segment): the daemon
// answers the attribute on its root only, so the search climbs from the resolved path
// one directory at a time while the parent lies on the same file system (same st_dev;
// every FUSE mount has a device of its own) and stops at the first that answers.
absl::StatusOr<MountStatus> FindMountStatus(const std::string& path) {
  char* resolved = realpath(path.c_str(), nullptr);
  if (resolved == nullptr) {
    const int e = errno;
    return absl::NotFoundError(absl::StrCat("cannot resolve ", path, ": ", strerror(e)));
  }
  const std::string start(resolved);
  free(resolved);
  std::string current = start;
  struct stat st;
  if (stat(current.c_str(), &st) != 0) {
    const int e = errno;
    return absl::InternalError(absl::StrCat("cannot stat ", current, ": ", strerror(e)));
  }
  while (true) {
    absl::StatusOr<std::string> doc = ReadStatusXattr(current);
    if (doc.ok()) return MountStatus{.root = current, .document = *std::move(doc)};
    if (!absl::IsNotFound(doc.status())) return doc.status();
    if (current == "/") break;
    const size_t slash = current.rfind('/');
    const std::string parent = slash == 0 ? "/" : current.substr(0, slash);
    struct stat parent_st;
    if (stat(parent.c_str(), &parent_st) != 0 || parent_st.st_dev != st.st_dev) break;
    current = parent;
  }
  if (current == start) {
    return absl::NotFoundError(
        absl::StrCat(path, " is not a walfs mount (no ", kStatusXattr, " attribute)"));
  }
  return absl::NotFoundError(absl::StrCat(
      path, " is not a walfs mount nor inside one (no ", kStatusXattr,
      " attribute on it or on a directory above it on the same file system, up to ", current,
      ")"));
}

int Status(const std::string& path, const std::string& format) {
  absl::StatusOr<MountStatus> found = FindMountStatus(path);
  if (!found.ok()) return Fail(std::string(found.status().message()));
  const std::string& mountpoint = found->root;
  const std::string& doc = found->document;
  if (format == "json") {
    std::printf("%s\n", doc.c_str());
    return 0;
  }
  const Json root = Json::parse(doc, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return Fail(absl::StrCat("the status of ", mountpoint, " is not a JSON object: ", doc));
  }
  std::string out;
  if (format == "prometheus") {
    out = RenderPrometheus(root);
  } else if (format == "latency") {
    out = RenderLatency(root);
  } else {
    out = RenderHuman(root, mountpoint);
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

// ---- grow ------------------------------------------------------------------------

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

// Options may come before or after the command and its arguments (getopt_long permutes
// argv); each is then checked against the command it was given with.
int Run(int argc, char** argv) {
  enum : int { kJson = 256, kPrometheus, kLatency, kSalvage };
  static const option kOptions[] = {
      {"json", no_argument, nullptr, kJson},
      {"prometheus", no_argument, nullptr, kPrometheus},
      {"latency", no_argument, nullptr, kLatency},
      {"salvage", no_argument, nullptr, kSalvage},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, 'V'},
      {nullptr, 0, nullptr, 0},
  };
  bool json = false, prometheus = false, latency = false, salvage = false;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "hV", kOptions, nullptr)) != -1) {
    switch (c) {
      case kJson: json = true; break;
      case kPrometheus: prometheus = true; break;
      case kLatency: latency = true; break;
      case kSalvage: salvage = true; break;
      case 'h': std::fputs(kUsage, stdout); return 0;
      case 'V': return PrintVersion(kProgram);
      default: return UsageError(absl::StrCat("unknown option ", argv[optind - 1]));
    }
  }
  std::vector<std::string> args(argv + optind, argv + argc);
  if (args.empty()) return UsageError("no command given");
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // Options that the command does not take, by name, for the error message.
  auto misplaced = [&](bool allow_json, bool allow_prometheus, bool allow_salvage) {
    std::string bad;
    if (json && !allow_json) bad = "--json";
    if (prometheus && !allow_prometheus) bad = "--prometheus";
    if (latency && !allow_prometheus) bad = "--latency";
    if (salvage && !allow_salvage) bad = "--salvage";
    return bad;
  };
  if (command == "inspect") {
    if (std::string bad = misplaced(true, false, false); !bad.empty()) {
      return UsageError(absl::StrCat("inspect does not take ", bad));
    }
    if (args.size() != 1) return UsageError("inspect takes one POOL");
    return Inspect(args[0], json);
  }
  if (command == "export") {
    if (std::string bad = misplaced(false, false, true); !bad.empty()) {
      return UsageError(absl::StrCat("export does not take ", bad));
    }
    if (args.size() != 2) return UsageError("export takes POOL and DIR");
    return Export(args[0], args[1], salvage);
  }
  if (command == "status") {
    if (std::string bad = misplaced(true, true, false); !bad.empty()) {
      return UsageError(absl::StrCat("status does not take ", bad));
    }
    if (json + prometheus + latency > 1) {
      return UsageError("--json, --prometheus and --latency exclude each other");
    }
    if (args.size() != 1) return UsageError("status takes one PATH (a walfs mount or a path in it)");
    return Status(args[0], json         ? "json"
                           : prometheus ? "prometheus"
                           : latency    ? "latency"
                                        : "human");
  }
  if (command == "grow") {
    if (std::string bad = misplaced(false, false, false); !bad.empty()) {
      return UsageError(absl::StrCat("grow does not take ", bad));
    }
    if (args.size() != 2) return UsageError("grow takes POOL and SIZE");
    return Grow(args[0], args[1]);
  }
  return UsageError(absl::StrCat("unknown command '", command, "'"));
}

}  // namespace
}  // namespace walfs::tools

int main(int argc, char** argv) { return walfs::tools::Run(argc, argv); }
