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

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "fs/lease_protocol.h"

namespace walfs::fs {
namespace {

// The pids of other processes holding an fd open on (dev, ino), at most `limit`. Only
// used to word errors, so a best-effort scan of /proc is enough.
std::vector<pid_t> FindHolders(dev_t dev, ino_t ino, size_t limit) {
  std::vector<pid_t> holders;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return holders;
  const pid_t self = getpid();
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
        holders.push_back(static_cast<pid_t>(pid));
        break;
      }
    }
    closedir(fds);
    if (holders.size() >= limit) break;
  }
  closedir(proc);
  return holders;
}

std::string Comm(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
  std::string comm;
  std::getline(in, comm);
  return comm.empty() ? "?" : comm;
}

// The pid of another process holding an fd open on (dev, ino), or 0.
pid_t FindHolder(dev_t dev, ino_t ino) {
  std::vector<pid_t> holders = FindHolders(dev, ino, 1);
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

absl::Status CheckNoDirectClients(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return core::PosixError(absl::StrCat("cannot open pool ", path), errno);
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = lease::kClientLockOffset;
  probe.l_len = lease::kClientLockLength;
  const int rc = fcntl(fd, F_OFD_GETLK, &probe);
  const int error = errno;
  struct stat st {};
  const bool have_stat = fstat(fd, &st) == 0;
  close(fd);
  if (rc != 0) return core::PosixError(absl::StrCat("cannot test the client lock of pool ", path), error);
  if (probe.l_type == F_UNLCK) return absl::OkStatus();
  // OFD locks report no owner (l_pid is -1): name whoever has the pool open instead.
  std::string who;
  if (have_stat) {
    for (pid_t pid : FindHolders(st.st_dev, st.st_ino, 5)) {
      absl::StrAppend(&who, who.empty() ? "" : ", ", "pid ", pid, " (", Comm(pid), ")");
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "pool ", path, " is still mapped by direct-access clients (",
      who.empty() ? "holders unknown" : who,
      "), probably a PostgreSQL that ran with libwalfs-direct.so: stop it before mounting "
      "the pool again"));
}

}  // namespace walfs::fs
