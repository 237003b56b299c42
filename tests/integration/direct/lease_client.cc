// The client side of direct_lease_test.sh: writes to MOUNT/seg served by
// walfs_direct_lease_server and checks where the bytes went.
//
//   walfs_direct_lease_client direct|fuse|bench MOUNTPOINT POOL
//
// direct: run with libwalfs-direct.so preloaded; pwrites inside the lease must reach the
//         pool without a FUSE WRITE, be visible through FUSE reads at once, hold the
//         pool's client lock while open, and fsync must succeed; a pwrite past the lease
//         must go through FUSE.
// fuse:   without the library (or WALFS_DIRECT=0): every pwrite is a FUSE WRITE.
// bench:  times 8 KiB pwrites inside the lease (direct when preloaded, else FUSE).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "fs/lease_protocol.h"

namespace {

int failures = 0;

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: CHECK failed: %s (errno %s)\n", __FILE__, __LINE__, #cond, \
              strerror(errno));                                                      \
      ++failures;                                                                    \
    }                                                                                \
  } while (0)

std::string ReadAt(int fd, size_t n, off_t off) {
  std::string s(n, '\0');
  const ssize_t got = pread(fd, s.data(), n, off);
  s.resize(got < 0 ? 0 : static_cast<size_t>(got));
  return s;
}

long FuseWrites(const std::string& mnt) {
  const int fd = open((mnt + "/writes").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const std::string text = ReadAt(fd, 63, 0);
  close(fd);
  return strtol(text.c_str(), nullptr, 10);
}

short PoolLock(const std::string& pool) {
  const int fd = open(pool.c_str(), O_RDONLY | O_CLOEXEC);
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = walfs::lease::kClientLockOffset;
  lock.l_len = walfs::lease::kClientLockLength;
  const int rc = fcntl(fd, F_OFD_GETLK, &lock);
  close(fd);
  return rc == 0 ? lock.l_type : -1;
}

std::string Pattern(char seed, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i % 61);
  return s;
}

int Bench(const std::string& mnt) {
  const int fd = open((mnt + "/seg").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return 1;
  const std::string page = Pattern('b', 8192);
  constexpr int kIters = 20000;
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < kIters; ++i) {
    if (pwrite(fd, page.data(), page.size(), (i % 4) * 8192) != 8192) return 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  const double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
  printf("8 KiB pwrite on the mount: %.0f ns/op\n", ns / kIters);
  close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const bool direct = strcmp(argv[1], "direct") == 0;
  const std::string mnt = argv[2];
  if (strcmp(argv[1], "bench") == 0) return Bench(mnt);
  const std::string pool = argv[3];
  const int pool_fd = open(pool.c_str(), O_RDONLY | O_CLOEXEC);
  CHECK(pool_fd >= 0);

  const int fd = open((mnt + "/seg").c_str(), O_RDWR | O_CLOEXEC);
  CHECK(fd >= 0);
  CHECK(PoolLock(pool) == (direct ? F_RDLCK : F_UNLCK));
  const long before = FuseWrites(mnt);
  CHECK(before >= 0);

  // 8 KiB across the two runs: file [12K, 20K) = pool [52K, 56K) + [8K, 12K).
  const std::string page = Pattern(direct ? 'A' : 'a', 8192);
  CHECK(pwrite(fd, page.data(), page.size(), 12 * 1024) == 8192);
  CHECK(FuseWrites(mnt) == before + (direct ? 0 : 1));
  CHECK(ReadAt(fd, 8192, 12 * 1024) == page);  // through FUSE
  CHECK(ReadAt(pool_fd, 4096, 52 * 1024) == page.substr(0, 4096));
  CHECK(ReadAt(pool_fd, 4096, 8 * 1024) == page.substr(4096));
  CHECK(fdatasync(fd) == 0 || errno == ENOSYS);
  CHECK(fsync(fd) == 0 || errno == ENOSYS);

  // The last leased bytes and the first beyond: only the latter is a FUSE WRITE.
  const long mid = FuseWrites(mnt);
  const std::string tail = Pattern(direct ? 'T' : 't', 100);
  CHECK(pwrite(fd, tail.data(), tail.size(), 44 * 1024 - 100) == 100);
  CHECK(FuseWrites(mnt) == mid + (direct ? 0 : 1));
  CHECK(pwrite(fd, tail.data(), tail.size(), 46 * 1024) == 100);
  CHECK(FuseWrites(mnt) == mid + (direct ? 1 : 2));
  CHECK(ReadAt(fd, 100, 46 * 1024) == tail);

  // write() keeps its file offset semantics and goes through FUSE.
  CHECK(lseek(fd, 100, SEEK_SET) == 100);
  const long pre_write = FuseWrites(mnt);
  CHECK(write(fd, "offset", 6) == 6);
  CHECK(lseek(fd, 0, SEEK_CUR) == 106);
  CHECK(FuseWrites(mnt) == pre_write + 1);

  // A read-only handle gets no lease and fails a write as usual.
  const int ro = open((mnt + "/seg").c_str(), O_RDONLY | O_CLOEXEC);
  CHECK(ro >= 0);
  errno = 0;
  CHECK(pwrite(ro, "x", 1, 0) == -1 && errno == EBADF);
  close(ro);

  CHECK(close(fd) == 0);
  CHECK(PoolLock(pool) == F_UNLCK);
  close(pool_fd);
  if (failures == 0) printf("lease client (%s): all checks passed\n", argv[1]);
  return failures == 0 ? 0 : 1;
}
