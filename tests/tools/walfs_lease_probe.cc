// walfs_lease_probe: asks a walfs daemon for a direct-access lease the way the client
// library does, so integration tests can check the daemon side on its own (never
// installed).
//
//   walfs_lease_probe lease FILE [--rdonly]   print the reply as key=value lines
//   walfs_lease_probe hold FILE               lease, read-lock the pool as a client
//                                             does, print "held", wait for stdin EOF
//   walfs_lease_probe store FILE OFF LEN C    lease, then store LEN bytes 'C' at file
//                                             offset OFF through the pool mapping
// Exit: 0 done, 3 the lease was refused (the errno name is printed), 1 other failure.
#include <fcntl.h>
#include <libpmem.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "fs/lease_protocol.h"

namespace {

using walfs::lease::Reply;

int Die(const std::string& what) {
  std::fprintf(stderr, "walfs_lease_probe: %s: %s\n", what.c_str(), std::strerror(errno));
  return 1;
}

// Opens the pool the reply names, checks it is that file, and read-locks it.
int OpenPool(const Reply& r) {
  int fd = open(r.pool_path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_dev != r.pool_dev || st.st_ino != r.pool_ino) {
    errno = ESTALE;
    close(fd);
    return -1;
  }
  struct flock lk {};
  lk.l_type = F_RDLCK;
  lk.l_whence = SEEK_SET;
  lk.l_start = walfs::lease::kClientLockOffset;
  lk.l_len = walfs::lease::kClientLockLength;
  if (fcntl(fd, F_OFD_SETLK, &lk) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: walfs_lease_probe lease|hold|store FILE [...]\n");
    return 2;
  }
  const std::string cmd = argv[1];
  const bool rdonly = argc > 3 && std::string(argv[3]) == "--rdonly";
  int fd = open(argv[2], rdonly ? O_RDONLY : O_RDWR);
  if (fd < 0) return Die(std::string("open ") + argv[2]);
  auto reply = std::make_unique<Reply>();
  if (ioctl(fd, walfs::lease::kIoctlLease, reply.get()) != 0) {
    std::printf("refused errno=%s\n", strerrorname_np(errno));
    return 3;
  }
  const Reply& r = *reply;
  if (cmd == "lease") {
    std::printf("magic=%#x\nversion=%u\nmode=%u\nflags=%u\nleased_size=%llu\n", r.magic,
                r.version, r.mode, r.flags, static_cast<unsigned long long>(r.leased_size));
    std::printf("pool_path=%s\nimage_path=%s\npool_dev=%llu\npool_ino=%llu\nruns=%u\n",
                r.pool_path, r.image_path, static_cast<unsigned long long>(r.pool_dev),
                static_cast<unsigned long long>(r.pool_ino), r.run_count);
    return 0;
  }
  int pool = OpenPool(r);
  if (pool < 0) return Die(std::string("open pool ") + r.pool_path);
  if (cmd == "hold") {
    std::printf("held\n");
    std::fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof(buf)) > 0) {
    }
    close(pool);
    close(fd);
    return 0;
  }
  if (cmd != "store" || argc != 6) return 2;
  const uint64_t off = std::strtoull(argv[3], nullptr, 0);
  const uint64_t len = std::strtoull(argv[4], nullptr, 0);
  if (off + len > r.leased_size) {
    errno = ERANGE;
    return Die("store outside the lease");
  }
  std::string data(len, argv[5][0]);
  for (uint32_t i = 0; i < r.run_count && i < walfs::lease::kMaxRuns; ++i) {
    const auto& run = r.runs[i];
    if (off < run.file_offset || off + len > run.file_offset + run.length) continue;
    void* m = mmap(nullptr, run.length, PROT_READ | PROT_WRITE, MAP_SHARED, pool,
                   static_cast<off_t>(run.pool_offset));
    if (m == MAP_FAILED) return Die("mmap");
    pmem_memcpy_persist(static_cast<char*>(m) + (off - run.file_offset), data.data(), len);
    munmap(m, run.length);
    std::printf("stored %llu bytes\n", static_cast<unsigned long long>(len));
    return 0;
  }
  errno = EINVAL;
  return Die("store spans runs");
}
