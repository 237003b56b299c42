// walfs_foreign_probe: what a user who is not the pool's owner gets from a walfs daemon
// through a file it may write, for fs_direct_other_user_test (never installed).
//
//   walfs_foreign_probe FILE POOL_DEV:POOL_INO [--ioctls]
//
// With --ioctls it asks for a session as the client library does (binds a socket at
// <mount root>/<kSessionPrefix><token>, kIoctlSession naming it, waits 2 s for the
// daemon's connection) and for a lease (kIoctlLease). Then it writes 8 KiB of 'n' at 0 of
// FILE with pwrite + fdatasync (through libwalfs-direct.so when preloaded). Last it
// looks through its own /proc/self/fd and /proc/self/maps for anything of the pool
// (st_dev and st_ino as given: the caller may not be able to stat the pool) or any memfd.
// Output lines: "session=<errno name or 0>", "hello=none|<n> descriptors",
// "lease=<errno name or 0>", "write=ok|<errno name>", then "pool fd N" / "pool map ..." /
// "memfd fd N" for each finding, or "clean". Exit 0 when it ran, 1 when it could not.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "fs/lease_protocol.h"

namespace {

namespace lease = walfs::lease;

const char* ErrName(int rc) { return rc == 0 ? "0" : strerrorname_np(errno); }

// The mount root: the deepest mount point above FILE, from /proc/self/mountinfo.
std::string MountRoot(const std::string& file) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line, best;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint ...
    size_t p = 0;
    for (int i = 0; i < 4; ++i) p = line.find(' ', p) + 1;
    const std::string mp = line.substr(p, line.find(' ', p) - p);
    if (file.compare(0, mp.size(), mp) == 0 && (file.size() == mp.size() || file[mp.size()] == '/' || mp == "/") &&
        mp.size() > best.size()) {
      best = mp;
    }
  }
  return best;
}

void TrySession(int fd, const std::string& root) {
  const std::string name = std::string(lease::kSessionPrefix) + "probe" + std::to_string(getpid());
  const std::string path = root + "/" + name;
  const int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::printf("bind=%s\n", strerrorname_np(errno));
  } else {
    std::printf("bind=0\n");
    listen(ls, 1);
  }
  lease::SessionRequest req{};
  req.magic = lease::kMagic;
  req.version = lease::kVersion;
  std::snprintf(req.name, sizeof(req.name), "%s", name.c_str());
  const int rc = ioctl(fd, lease::kIoctlSession, &req);
  std::printf("session=%s\n", ErrName(rc));
  pollfd p = {ls, POLLIN, 0};
  int received = -1;
  if (poll(&p, 1, 2000) == 1) {
    const int c = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) {
      lease::SessionHello hello{};
      char control[CMSG_SPACE(sizeof(int) * 4)] = {};
      iovec iov{&hello, sizeof(hello)};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      received = 0;
      if (recvmsg(c, &msg, MSG_CMSG_CLOEXEC) > 0) {
        for (cmsghdr* h = CMSG_FIRSTHDR(&msg); h != nullptr; h = CMSG_NXTHDR(&msg, h)) {
          if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
            received += static_cast<int>((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
          }
        }
      }
      close(c);  // descriptors received stay open: the scan below must find them
    }
  }
  if (received < 0) {
    std::printf("hello=none\n");
  } else {
    std::printf("hello=%d descriptors\n", received);
  }
  close(ls);
  unlink(path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: walfs_foreign_probe FILE POOL_DEV:POOL_INO [--ioctls]\n");
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string file = argv[1];
  struct stat pool {};
  unsigned long long pool_dev = 0, pool_ino = 0;
  if (std::sscanf(argv[2], "%llu:%llu", &pool_dev, &pool_ino) != 2) return 2;
  pool.st_dev = static_cast<dev_t>(pool_dev);
  pool.st_ino = static_cast<ino_t>(pool_ino);
  const bool ioctls = argc > 3 && std::string(argv[3]) == "--ioctls";
  const int fd = open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    std::perror("open");
    return 1;
  }
  if (ioctls) {
    TrySession(fd, MountRoot(file));
    auto reply = std::make_unique<lease::Reply>();
    reply->magic = lease::kMagic;
    reply->version = lease::kVersion;
    reply->access = lease::kAccessWrite;
    std::printf("lease=%s\n", ErrName(ioctl(fd, lease::kIoctlLease, reply.get())));
  }
  char buf[8192];
  std::memset(buf, 'n', sizeof(buf));
  if (pwrite(fd, buf, sizeof(buf), 0) != static_cast<ssize_t>(sizeof(buf)) || fdatasync(fd) != 0) {
    std::printf("write=%s\n", strerrorname_np(errno));
  } else {
    std::printf("write=ok\n");
  }

  bool found = false;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const int n = std::atoi(e->d_name);
      struct stat st;
      char target[512] = {};
      (void)!readlink((std::string("/proc/self/fd/") + e->d_name).c_str(), target,
                      sizeof(target) - 1);
      if (fstat(n, &st) == 0 && st.st_dev == pool.st_dev && st.st_ino == pool.st_ino) {
        std::printf("pool fd %d -> %s\n", n, target);
        found = true;
      } else if (std::strncmp(target, "/memfd:", 7) == 0) {
        std::printf("memfd fd %d -> %s\n", n, target);
        found = true;
      }
    }
    closedir(d);
  }
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (std::sscanf(line.c_str(), "%*s %*s %*s %x:%x %llu", &maj, &min, &ino) == 3 &&
        ino == pool.st_ino && makedev(maj, min) == pool.st_dev) {
      std::printf("pool map %s\n", line.c_str());
      found = true;
    } else if (line.find("/memfd:") != std::string::npos) {
      std::printf("memfd map %s\n", line.c_str());
      found = true;
    }
  }
  if (!found) std::printf("clean\n");
  close(fd);
  return 0;
}
