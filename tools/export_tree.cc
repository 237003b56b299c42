// Exporter (tools/export_tree.h): writes a pool's listed files under one directory and
// nowhere else. Every name and record is untrusted; each write goes through a
// descriptor of a directory this export opened itself, one component at a time.
#include "tools/export_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/format.h"
#include "core/fsck.h"

namespace walfs::tools {

namespace f = core::format;

Fd::Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) close(fd_);
}

bool Exporter::Run(const std::vector<core::FsckFile>& files) {
  bool ok = true;
  for (const core::FsckFile& file : files) {
    if (absl::Status s = Copy(file); !s.ok()) {
      report_(&file.path, std::string(s.message()));
      ok = false;
    }
  }
  // Directory modes and times last: creating their entries changed both.
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    if (absl::Status s = SetDirectoryAttributes(it->first, it->second); !s.ok()) {
      report_(nullptr, std::string(s.message()));
      ok = false;
    }
  }
  return ok;
}

std::string Exporter::Shown(const std::string& path) const {
  return path == "/" ? dir_ : dir_ + path;
}

absl::Status Exporter::Errno(std::string_view what, const std::string& path) const {
  return absl::InternalError(
      absl::StrCat(std::string(what), " ", Shown(path), ": ", strerror(errno)));
}

// Opens the directory holding `path` ("/a/b/c": DIR/a/b) through DIR's descriptor.
absl::StatusOr<Exporter::Parent> Exporter::OpenParent(const std::string& path) const {
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

absl::Status Exporter::Copy(const core::FsckFile& file) {
  const f::InodeRecord& r = file.record;
  if (file.damaged) {
    report_(&file.path, "salvaged from a damaged inode record: check it");
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
    // Made with its exact mode, so that no chmod by name follows: by then the name may
    // be a symlink someone who can write the directory swapped in, and chmod follows
    // symlinks (fchmodat's AT_SYMLINK_NOFOLLOW needs /proc). The umask is cleared for
    // the call alone; the export is single-threaded, so nothing else creates meanwhile.
    const mode_t umask_before = umask(0);
    const int made = mknodat(at, name, type | (r.mode & 07777), rdev);
    umask(umask_before);
    if (made != 0) return Errno("cannot create", file.path);
    absl::Status s = SetAttributes(file.path, r, -1, at, name);
    if (s.ok()) s = RestoreSetIdBits(file.path, r, at, name);
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
absl::StatusOr<std::string> Exporter::ReadData(const f::InodeRecord& r) const {
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
absl::Status Exporter::SetDirectoryAttributes(const std::string& path,
                                              const f::InodeRecord& r) {
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

// Owner (as root) and times, and the mode through `fd` when >= 0 (`name` is then
// unused, ""); else owner and times of the entry `name` in directory `at` (a symlink, or
// a special file this export made with its mode), never following a symlink.
absl::Status Exporter::SetAttributes(const std::string& path, const f::InodeRecord& r,
                                     int fd, int at, const char* name) {
  if (geteuid() == 0) {
    const int rc = fd >= 0 ? fchown(fd, r.uid, r.gid)
                           : fchownat(at, name, r.uid, r.gid, AT_SYMLINK_NOFOLLOW);
    if (rc != 0) return Errno("cannot set the owner of", path);
  }
  if (fd >= 0 && fchmod(fd, r.mode & 07777) != 0) return Errno("cannot set the mode of", path);
  const timespec times[2] = {
      {static_cast<time_t>(r.atime_ns / 1000000000), static_cast<long>(r.atime_ns % 1000000000)},
      {static_cast<time_t>(r.mtime_ns / 1000000000), static_cast<long>(r.mtime_ns % 1000000000)},
  };
  const int rc = fd >= 0 ? futimens(fd, times) : utimensat(at, name, times, AT_SYMLINK_NOFOLLOW);
  if (rc != 0) return Errno("cannot set the times of", path);
  return absl::OkStatus();
}

// Setting the owner (as root) cleared the set-user-ID and set-group-ID bits of a special
// file made with them. A FIFO gets them back through a descriptor (a read-only,
// non-blocking open neither waits for a writer nor follows a symlink); a socket or a
// device is never opened, so there they are reported as not restored.
absl::Status Exporter::RestoreSetIdBits(const std::string& path, const f::InodeRecord& r,
                                        int at, const char* name) {
  if (geteuid() != 0 || (r.mode & (S_ISUID | S_ISGID)) == 0) return absl::OkStatus();
  if (r.type != f::InodeType::kFifo) {
    report_(&path, "set-user-ID and set-group-ID bits not restored: setting the owner "
                   "cleared them, and a socket or device is never opened to set them again");
    return absl::OkStatus();
  }
  Fd fd(openat(at, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return Errno("cannot open", path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Errno("cannot stat", path);
  if (!S_ISFIFO(st.st_mode)) {
    return absl::InternalError(absl::StrCat("not the FIFO this export made: ", Shown(path)));
  }
  if (fchmod(fd.get(), r.mode & 07777) != 0) return Errno("cannot set the mode of", path);
  return absl::OkStatus();
}

}  // namespace walfs::tools
