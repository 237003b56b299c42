// Fork-first daemonization with the child's status reported through a pipe.
#include "fs/daemonize.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "core/status.h"
#include "fs/options.h"

namespace walfs::fs {
namespace {

int g_ready_fd = -1;  // the child's end of the pipe; written once by DetachDone

}  // namespace

absl::Status DetachStart() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return core::PosixError("pipe", errno);
  pid_t child = fork();
  if (child < 0) {
    int error = errno;
    close(fds[0]);
    close(fds[1]);
    return core::PosixError("fork", error);
  }
  if (child == 0) {
    close(fds[0]);
    g_ready_fd = fds[1];
    setsid();
    return absl::OkStatus();
  }
  close(fds[1]);
  char byte;
  ssize_t n;
  do {
    n = read(fds[0], &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n == 1) _exit(0);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) _exit(WEXITSTATUS(status));
  _exit(kExitMountFailure);  // the child died before it could say it had mounted
}

void DetachDone() {
  if (g_ready_fd < 0) return;
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    if (null_fd > STDERR_FILENO) close(null_fd);
  }
  if (chdir("/") != 0) {
    // Nothing holds a relative path by now; staying put only pins a directory.
  }
  char byte = 1;
  ssize_t n;
  do {
    n = write(g_ready_fd, &byte, 1);
  } while (n < 0 && errno == EINTR);
  close(g_ready_fd);
  g_ready_fd = -1;
}

}  // namespace walfs::fs
