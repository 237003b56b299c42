// Runs under LD_PRELOAD=libwalfs-direct.so (ctest sets it): every interposed call on
// ordinary tmpfs files, pipes and sockets must behave exactly as libc's, results and
// errno included. With "bench" as argument it times 8 KiB pwrites instead.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace {

int failures = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d %s)\n", __FILE__,   \
              __LINE__, #cond, errno, strerror(errno));                      \
      ++failures;                                                            \
    }                                                                        \
  } while (0)

std::string ReadAll(int fd, size_t n, off_t off) {
  std::string s(n, '\0');
  const ssize_t got = pread(fd, s.data(), n, off);
  s.resize(got < 0 ? 0 : static_cast<size_t>(got));
  return s;
}

int Bench(const std::string& dir) {
  const std::string path = dir + "/bench";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0);
  char page[8192];
  memset(page, 'b', sizeof(page));
  constexpr int kIters = 200000;
  constexpr off_t kSpan = 16 << 20;
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < kIters; ++i) {
    CHECK(pwrite(fd, page, sizeof(page), (static_cast<off_t>(i) * 8192) % kSpan) == 8192);
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  const double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
  printf("tmpfs pwrite 8 KiB: %.0f ns/op\n", ns / kIters);
  close(fd);
  unlink(path.c_str());
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  char dir_template[] = "/dev/shm/walfs-preload-XXXXXX";
  const char* dir_c = mkdtemp(dir_template);
  if (dir_c == nullptr) return 2;
  const std::string dir = dir_c;
  if (argc > 1 && strcmp(argv[1], "bench") == 0) {
    const int rc = Bench(dir);
    rmdir(dir.c_str());
    return rc;
  }

  // The library really is in front of libc.
  Dl_info info;
  void* sym = dlsym(RTLD_DEFAULT, "pwrite");
  CHECK(sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fname != nullptr &&
        strstr(info.dli_fname, "libwalfs-direct") != nullptr);

  const std::string path = dir + "/f";
  errno = 0;
  CHECK(open((dir + "/missing").c_str(), O_RDWR) == -1 && errno == ENOENT);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0640);
  CHECK(fd >= 0);
  struct stat st;
  CHECK(fstat(fd, &st) == 0 && (st.st_mode & 0777) == 0640);

  CHECK(pwrite(fd, "hello", 5, 0) == 5);
  CHECK(pwrite64(fd, "HELLO", 5, 5) == 5);
  const struct iovec iov[2] = {{const_cast<char*>("ab"), 2}, {const_cast<char*>("cd"), 2}};
  CHECK(pwritev(fd, iov, 2, 10) == 4);
  CHECK(pwritev2(fd, iov, 2, 14, RWF_DSYNC) == 4);
  CHECK(ReadAll(fd, 18, 0) == "helloHELLOabcdabcd");
  // write keeps the shared file offset.
  CHECK(write(fd, "xy", 2) == 2);
  CHECK(lseek(fd, 0, SEEK_CUR) == 2);
  CHECK(ReadAll(fd, 4, 0) == "xyll");
  errno = 0;
  CHECK(pwrite(-1, "x", 1, 0) == -1 && errno == EBADF);
  CHECK(pwrite(fd, "x", 1, -1) == -1 && errno == EINVAL);
  CHECK(fsync(fd) == 0);
  CHECK(fdatasync(fd) == 0);
  errno = 0;
  CHECK(fsync(-1) == -1 && errno == EBADF);

  // fcntl forwards int and pointer arguments.
  CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDWR);
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, 200);
  CHECK(high >= 200);
  CHECK(fcntl(high, F_GETFD) == FD_CLOEXEC);
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_len = 1;
  CHECK(fcntl(fd, F_SETLK, &lock) == 0);
  CHECK(dup2(fd, 150) == 150);
  CHECK(dup3(fd, 151, O_CLOEXEC) == 151);
  const int d = dup(fd);
  CHECK(d >= 0);
  CHECK(close(d) == 0);
  errno = 0;
  CHECK(close(d) == -1 && errno == EBADF);
  CHECK(close_range(150, 151, 0) == 0);
  CHECK(fcntl(150, F_GETFD) == -1 && fcntl(151, F_GETFD) == -1);
  closefrom(200);
  CHECK(fcntl(high, F_GETFD) == -1);

  // openat/creat with modes, the fortified variants' plain counterparts.
  const int fd2 = openat(AT_FDCWD, (dir + "/g").c_str(), O_WRONLY | O_CREAT, 0600);
  CHECK(fd2 >= 0);
  CHECK(fstat(fd2, &st) == 0 && (st.st_mode & 0777) == 0600);
  const int fd3 = creat((dir + "/h").c_str(), 0604);
  CHECK(fd3 >= 0);
  CHECK(fstat(fd3, &st) == 0 && (st.st_mode & 0777) == 0604);

  // syscall() forwards six arguments.
  CHECK(syscall(SYS_getpid) == getpid());
  CHECK(syscall(SYS_pwrite64, fd2, "sys", 3, 0) == 3);
  CHECK(syscall(SYS_close, fd3) == 0);
  CHECK(fcntl(fd3, F_GETFD) == -1);

  // The descriptor-creating calls syscall() also sees: results, flags and errno as the
  // kernel's.
  const int so = static_cast<int>(syscall(SYS_openat, AT_FDCWD, (dir + "/g").c_str(),
                                          O_RDONLY | O_CLOEXEC, 0));
  CHECK(so >= 0 && fcntl(so, F_GETFD) == FD_CLOEXEC);
  CHECK(ReadAll(so, 3, 0) == "sys");
  errno = 0;
  CHECK(syscall(SYS_openat, AT_FDCWD, (dir + "/missing").c_str(), O_RDONLY, 0) == -1 &&
        errno == ENOENT);
#ifdef SYS_open
  const int so2 = static_cast<int>(syscall(SYS_open, (dir + "/g").c_str(), O_RDWR, 0));
  CHECK(so2 >= 0 && fcntl(so2, F_GETFD) == 0 && close(so2) == 0);
#endif
  struct open_how how = {};
  how.flags = O_RDWR | O_CLOEXEC;
  const int so3 = static_cast<int>(syscall(SYS_openat2, AT_FDCWD, (dir + "/g").c_str(), &how,
                                           sizeof(how)));
  CHECK((so3 >= 0 && fcntl(so3, F_GETFD) == FD_CLOEXEC && close(so3) == 0) || errno == ENOSYS);
  errno = 0;
  CHECK(syscall(SYS_openat2, AT_FDCWD, (dir + "/g").c_str(), &how, 1) == -1 &&
        (errno == EINVAL || errno == ENOSYS));
  // The library's own openat2 (glibc has none to interpose).
  using Openat2Fn = int (*)(int, const char*, struct open_how*, size_t);
  const auto openat2_fn = reinterpret_cast<Openat2Fn>(dlsym(RTLD_DEFAULT, "openat2"));
  CHECK(openat2_fn != nullptr);
  if (openat2_fn != nullptr) {
    const int so4 = openat2_fn(AT_FDCWD, (dir + "/g").c_str(), &how, sizeof(how));
    CHECK((so4 >= 0 && fcntl(so4, F_GETFD) == FD_CLOEXEC && close(so4) == 0) || errno == ENOSYS);
    errno = 0;
    CHECK(openat2_fn(AT_FDCWD, (dir + "/missing").c_str(), &how, sizeof(how)) == -1 &&
          (errno == ENOENT || errno == ENOSYS));
  }
  const int sd = static_cast<int>(syscall(SYS_dup, so));
  CHECK(sd >= 0 && sd != so && fcntl(sd, F_GETFD) == 0 && close(sd) == 0);
  const int sf = static_cast<int>(syscall(SYS_fcntl, so, F_DUPFD_CLOEXEC, 300));
  CHECK(sf >= 300 && fcntl(sf, F_GETFD) == FD_CLOEXEC && close(sf) == 0);
  const int sf2 = static_cast<int>(syscall(SYS_fcntl, so, F_DUPFD, 0));
  CHECK(sf2 >= 0 && close(sf2) == 0);
  CHECK((syscall(SYS_fcntl, so, F_GETFL) & (O_ACCMODE | O_APPEND)) == O_RDONLY);
  errno = 0;
  CHECK(syscall(SYS_dup, 9999) == -1 && errno == EBADF);
  CHECK(close(so) == 0);

  // Other creators.
  int p[2];
  CHECK(pipe(p) == 0 && write(p[1], "p", 1) == 1 && close(p[0]) == 0 && close(p[1]) == 0);
  CHECK(pipe2(p, O_CLOEXEC) == 0 && close(p[0]) == 0 && close(p[1]) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, p) == 0 && close(p[0]) == 0 && close(p[1]) == 0);
  const int s = socket(AF_UNIX, SOCK_STREAM, 0);
  CHECK(s >= 0 && close(s) == 0);
  const int e = eventfd(0, 0);
  CHECK(e >= 0 && close(e) == 0);
  const int m = memfd_create("probe", 0);
  CHECK(m >= 0 && close(m) == 0);

  // fdopen hands the fd to stdio, which closes it itself.
  const int fd4 = open(path.c_str(), O_RDWR);
  FILE* f = fdopen(fd4, "r+");
  CHECK(f != nullptr && fputs("stream", f) >= 0 && fclose(f) == 0);

  // fork: the child writes through its copy of the descriptor.
  const pid_t pid = fork();
  if (pid == 0) _exit(pwrite(fd, "child", 5, 100) == 5 ? 0 : 1);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(ReadAll(fd, 5, 100) == "child");

  CHECK(close(fd) == 0);
  CHECK(close(fd2) == 0);
  for (const char* name : {"/f", "/g", "/h"}) unlink((dir + name).c_str());
  rmdir(dir.c_str());
  if (failures == 0) printf("preload probe: all interposed calls behaved as libc's\n");
  return failures == 0 ? 0 : 1;
}
