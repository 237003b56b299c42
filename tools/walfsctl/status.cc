// walfsctl status: the running daemon's status document, read from the user.walfs.status
// attribute of the root of the walfs mount that holds a path, shown raw or through the
// views of tools/status_view.h. Only reads: getxattr, stat and realpath.
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tools/status_view.h"
#include "tools/walfsctl/walfsctl.h"

namespace walfs::tools::ctl {
namespace {

constexpr char kStatusXattr[] = "user.walfs.status";

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

}  // namespace

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

}  // namespace walfs::tools::ctl
