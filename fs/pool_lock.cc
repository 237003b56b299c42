// Exclusive flock on the pool file.
#include "fs/pool_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/pool_clients.h"
#include "core/status.h"

namespace walfs::fs {
namespace {

// The pid of another process holding an fd open on (dev, ino), or 0.
pid_t FindHolder(dev_t dev, ino_t ino) {
  std::vector<pid_t> holders = core::ProcessesWithFileOpen(dev, ino, 1);
  return holders.empty() ? 0 : holders[0];
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
