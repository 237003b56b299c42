// Detection and lazy unmount of a dead walfs mount.
#include "fs/stale_mount.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/wait.h>

#include <climits>
#include <cstdlib>
#include <cerrno>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "fs/mountinfo.h"

extern char** environ;

namespace walfs::fs {
namespace {

// True when /proc/self/mountinfo lists `mountpoint` as a mount of `fstype` from `source`.
bool IsOurMount(const std::string& mountpoint, const std::string& source,
                const std::string& fstype) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    const std::optional<MountInfoLine> mount = ParseMountInfoLine(line);
    if (mount && mount->mount_point == mountpoint && mount->fstype == fstype &&
        mount->source == source) {
      return true;
    }
  }
  return false;
}

// `path` with its parent directory resolved, as mountinfo spells it; the last
// component itself cannot be resolved while its mount is dead.
std::string Canonical(const std::string& path) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  size_t slash = trimmed.rfind('/');
  if (slash == std::string::npos) return trimmed;
  std::string parent = slash == 0 ? "/" : trimmed.substr(0, slash);
  char resolved[PATH_MAX];
  if (realpath(parent.c_str(), resolved) == nullptr) return trimmed;
  std::string out(resolved);
  if (out != "/") out += '/';
  return out + trimmed.substr(slash + 1);
}

absl::Status RunFusermount(const std::string& mountpoint) {
  const char* argv[] = {"fusermount3", "-u", "-z", mountpoint.c_str(), nullptr};
  pid_t pid;
  int error = posix_spawnp(&pid, "fusermount3", nullptr, nullptr,
                           const_cast<char* const*>(argv), environ);
  if (error != 0) return core::PosixError("spawning fusermount3", error);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat("fusermount3 -u -z ", mountpoint, " failed"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> DetachStaleMount(const std::string& mountpoint, const std::string& fsname,
                                      const std::string& fstype) {
  const std::string canonical = Canonical(mountpoint);
  bool detached = false;
  // Stacked leftovers (several crashes in a row) come off one per round.
  for (int round = 0; round < 16 && IsOurMount(canonical, fsname, fstype); ++round) {
    // The lock says no live walfs serves this pool file; a mount that still answers
    // (a pool file replaced under the same path while its daemon runs) is not touched.
    // The probe must be a request the kernel always sends to the daemon: an open is
    // not (walfs answers OPENDIR with ENOSYS, which the kernel remembers), nor a stat
    // while the root's attributes are cached; STATFS is.
    struct statfs st;
    if (statfs(canonical.c_str(), &st) == 0) return detached;
    if (errno != ENOTCONN) return detached;
    if (umount2(canonical.c_str(), MNT_DETACH) != 0) {
      if (errno != EPERM) return core::PosixError(absl::StrCat("umount ", canonical), errno);
      // Not root: the setuid helper may unmount what this user mounted.
      if (absl::Status s = RunFusermount(canonical); !s.ok()) return s;
    }
    detached = true;
  }
  return detached;
}

}  // namespace walfs::fs
