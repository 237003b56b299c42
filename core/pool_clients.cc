// The client lock of a pool file, and the processes that have it open.
#include "core/pool_clients.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/format.h"
#include "core/status.h"

namespace walfs::core {

std::vector<pid_t> ProcessesWithFileOpen(dev_t dev, ino_t ino, size_t limit) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  const pid_t self = getpid();
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    const std::string fd_dir = absl::StrCat("/proc/", pid, "/fd");
    DIR* fds = opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    while (dirent* fd = readdir(fds)) {
      struct stat st;
      if (fd->d_name[0] == '.') continue;
      if (stat(absl::StrCat(fd_dir, "/", fd->d_name).c_str(), &st) == 0 &&
          st.st_dev == dev && st.st_ino == ino) {
        found.push_back(static_cast<pid_t>(pid));
        break;
      }
    }
    closedir(fds);
    if (found.size() >= limit) break;
  }
  closedir(proc);
  return found;
}

std::string DescribeProcesses(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) {
    std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
    std::string comm;
    std::getline(in, comm);
    absl::StrAppend(&out, out.empty() ? "" : ", ", "pid ", pid, " (",
                    comm.empty() ? "?" : comm, ")");
  }
  return out;
}

absl::Status CheckNoDirectClients(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PosixError(absl::StrCat("cannot open pool ", path), errno);
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = format::kClientLockOffset;
  probe.l_len = format::kClientLockLength;
  const int rc = fcntl(fd, F_OFD_GETLK, &probe);
  const int error = errno;
  struct stat st {};
  const bool have_stat = fstat(fd, &st) == 0;
  close(fd);
  if (rc != 0) {
    return PosixError(absl::StrCat("cannot test the client lock of pool ", path), error);
  }
  if (probe.l_type == F_UNLCK) return absl::OkStatus();
  // OFD locks report no owner (l_pid is -1): name whoever has the pool open instead.
  const std::string who =
      have_stat ? DescribeProcesses(ProcessesWithFileOpen(st.st_dev, st.st_ino, 5)) : "";
  return absl::FailedPreconditionError(absl::StrCat(
      "pool ", path, " is still mapped by direct-access clients (",
      who.empty() ? "holders unknown" : who,
      "), probably a PostgreSQL that ran with libwalfs-direct.so: stop it first"));
}

}  // namespace walfs::core
