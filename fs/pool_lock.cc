// Exclusive flock on the pool file.
#include "fs/pool_lock.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace walfs::fs {
namespace {

// The pid of another process holding an fd open on (dev, ino), or 0. Only used to word
// the "in use" error, so a best-effort scan of /proc is enough.
pid_t FindHolder(dev_t dev, ino_t ino) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  pid_t self = getpid(), found = 0;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    std::string fd_dir = absl::StrCat("/proc/", pid, "/fd");
    DIR* fds = opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    while (dirent* fd = readdir(fds)) {
      struct stat st;
      if (fd->d_name[0] == '.') continue;
      if (stat(absl::StrCat(fd_dir, "/", fd->d_name).c_str(), &st) == 0 &&
          st.st_dev == dev && st.st_ino == ino) {
        found = static_cast<pid_t>(pid);
        break;
      }
    }
    closedir(fds);
    if (found != 0) break;
  }
  closedir(proc);
  return found;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PoolLock>> PoolLock::Acquire(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return core::PosixError(absl::StrCat("cannot open pool ", path), errno);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    if (error != EWOULDBLOCK) {
      close(fd);
      return core::PosixError(absl::StrCat("cannot lock pool ", path), error);
    }
    struct stat st;
    pid_t holder = fstat(fd, &st) == 0 ? FindHolder(st.st_dev, st.st_ino) : 0;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("pool ", path, " is in use by another walfs (",
                     holder != 0 ? absl::StrCat("pid ", holder) : "pid unknown", ")"));
  }
  return std::unique_ptr<PoolLock>(new PoolLock(fd));
}

PoolLock::~PoolLock() { close(fd_); }

}  // namespace walfs::fs
