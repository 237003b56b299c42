// Mount point checks (fs/mount_point.h).
#include "fs/mount_point.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"

namespace walfs::fs {
namespace {

struct DirCloser {
  void operator()(DIR* d) const { closedir(d); }
};

// How many names a refusal quotes; one more is read to know whether there are others.
constexpr size_t kNamesShown = 3;

std::string FileType(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a directory";
}

}  // namespace

absl::Status CheckMountPoint(const std::string& path, bool allow_nonempty) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT) {
      return absl::NotFoundError(absl::StrCat("mount point ", path,
                                              " does not exist (create it: mkdir ", path, ")"));
    }
    return core::PosixError(absl::StrCat("mount point ", path), e);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mount point ", path, " is ", FileType(st.st_mode),
        ", not a directory: walfs mounts a directory (an empty one, made with mkdir)"));
  }
  if (allow_nonempty) return absl::OkStatus();

  std::unique_ptr<DIR, DirCloser> dir(opendir(path.c_str()));
  if (dir == nullptr) {
    const int e = errno;
    return core::PosixError(
        absl::StrCat("cannot list mount point ", path,
                     " to check that it is empty (-o nonempty skips the check)"),
        e);
  }
  std::vector<std::string> names;
  errno = 0;
  while (dirent* entry = readdir(dir.get())) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    names.push_back(absl::StrCat("'", absl::CHexEscape(entry->d_name), "'"));
    if (names.size() > kNamesShown) break;
    errno = 0;
  }
  if (names.empty() && errno != 0) {
    return core::PosixError(absl::StrCat("cannot list mount point ", path), errno);
  }
  if (names.empty()) return absl::OkStatus();
  const bool more = names.size() > kNamesShown;
  if (more) names.resize(kNamesShown);
  return absl::FailedPreconditionError(absl::StrCat(
      "mount point ", path, " is not empty (it holds ", absl::StrJoin(names, ", "),
      more ? " and more" : "",
      "): the mount would hide those files. Move them away, or mount over them anyway "
      "with -o nonempty"));
}

}  // namespace walfs::fs
