// walfs_lease_probe: speaks direct-access protocol v4 (fs/lease_protocol.h) to a walfs
// daemon the way a client does, without the client library, so that integration tests
// can check the daemon side on its own (never installed).
//
//   walfs_lease_probe session PATH [OPTIONS]  set up a session on the mount holding PATH
//                                             and print what came with the hello
//   walfs_lease_probe lease FILE [--rdonly|--read] [OPTIONS]
//                                             session, then a write lease on FILE
//                                             (opened O_RDWR, or O_RDONLY), or with
//                                             --read a read lease (O_RDONLY): print the
//                                             reply
//   walfs_lease_probe hold FILE [OPTIONS]     session and lease, read-lock the pool (the
//                                             client lock range, L6) through the session's
//                                             pool descriptor, print "held", wait for
//                                             stdin EOF
//   walfs_lease_probe store FILE OFF LEN C [OPTIONS]
//                                             session and lease, then store LEN bytes 'C'
//                                             at file offset OFF through a mapping of the
//                                             session's pool descriptor (and into the
//                                             power-cut image when the hello has one)
// OPTIONS:
//   --mount DIR     the mount root (default: the topmost directory above PATH on the
//                   same file system)
//   --token T       the session socket is <root>/.walfs-direct.T (default: probe<pid>)
//   --no-session    lease without a session first (lease, hold and store need the
//                   session's descriptors, so only `lease` takes it)
//   --bind-in-child the socket is bound by a child process, the ioctl made by this one
//                   (the daemon must then refuse with ENOENT)
//   --no-accept     make the session ioctl, print its result, never accept (the
//                   daemon's delivery then times out)
//
// Output: key=value lines. `session` (and every command that sets one up) prints
//   session=ok, hello_magic, hello_version, durability (1 map_sync, 2 device, 3 forced),
//   hello_flags, uuid (hex), stamp_slots, stamps_id (hex), fds (descriptors received), peer_uid,
//   peer_pid (SO_PEERCRED of the daemon's connection), pool_type (regular|char),
//   pool_access (rdwr|rdonly|wronly), pool_fdinfo_pos, pool_fdinfo_flags (octal, from
//   /proc/self/fdinfo), pool_size, superblock_uuid_match (0|1), data_offset,
//   stamps_seals (hex, F_GET_SEALS), stamps_size, stamps_map_write (ok|errno name),
//   stamps_write (ok|errno name), stamps_map_read (ok|errno name), image_fd (0|1).
// `lease` adds magic, version, access, flags, ino, leased_size, block_size, stamp,
//   stamp_offset, stamp_word (the word at stamp_offset in the stamps memfd),
//   reply_uuid_match (0|1), reply_stamps_id_match (0|1), runs,
//   run<i>=file_offset,pool_offset,length, and
//   runs_in_data_area (0|1: every run inside [data_offset, pool size), L1).
// Exit: 0 done, 3 the lease was refused ("refused errno=NAME"), 4 the session ioctl was
// refused ("session refused errno=NAME"), 5 no valid hello arrived ("session failed:
// why"), 2 usage, 1 other failure.
#include <fcntl.h>
#include <libpmem.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/format.h"
#include "fs/lease_protocol.h"

namespace {

namespace lease = walfs::lease;
namespace format = walfs::core::format;

constexpr int kAcceptTimeoutMs = 5000;

int Die(const std::string& what) {
  std::fprintf(stderr, "walfs_lease_probe: %s: %s\n", what.c_str(), std::strerror(errno));
  return 1;
}

const char* ErrnoName(int e) {
  const char* n = strerrorname_np(e);
  return n != nullptr ? n : "unknown";
}

struct Args {
  std::string cmd;
  std::string path;
  std::vector<std::string> positional;  // after PATH
  std::string mount;
  std::string token;
  bool rdonly = false;
  bool read_lease = false;  // --read: O_RDONLY and kAccessRead
  bool no_session = false;
  bool bind_in_child = false;
  bool no_accept = false;
};

// The topmost directory above `path` (itself included when a directory) on its file
// system: the mount root.
std::string MountRoot(const std::string& path) {
  char real[PATH_MAX];
  if (realpath(path.c_str(), real) == nullptr) return "";
  std::string dir = real;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return "";
  if (!S_ISDIR(st.st_mode)) dir = dir.substr(0, dir.rfind('/'));
  if (dir.empty()) dir = "/";
  if (stat(dir.c_str(), &st) != 0) return "";
  while (dir != "/") {
    std::string up = dir.substr(0, dir.rfind('/'));
    if (up.empty()) up = "/";
    struct stat ust;
    if (stat(up.c_str(), &ust) != 0 || ust.st_dev != st.st_dev) break;
    dir = up;
  }
  return dir;
}

struct Session {
  lease::SessionHello hello{};
  int pool = -1;
  int stamps = -1;
  int image = -1;
  format::Superblock sb{};
  uint64_t pool_size = 0;
};

std::string FdinfoField(int fd, const std::string& key) {
  std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      size_t i = key.size() + 1;
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      return line.substr(i);
    }
  }
  return "?";
}

std::string Hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof(b), "%02x", p[i]);
    s += b;
  }
  return s;
}

// Prints the facts about what the hello brought; returns false when it is not usable.
bool Describe(Session& s) {
  const lease::SessionHello& h = s.hello;
  std::printf("session=ok\nhello_magic=%#x\nhello_version=%u\ndurability=%u\nhello_flags=%u\n",
              h.magic, h.version, h.durability, h.flags);
  std::printf("uuid=%s\nstamp_slots=%llu\nstamps_id=%llx\nimage_fd=%d\n", Hex(h.uuid, 16).c_str(),
              static_cast<unsigned long long>(h.stamp_slots),
              static_cast<unsigned long long>(h.stamps_id), s.image >= 0 ? 1 : 0);
  struct stat st;
  if (fstat(s.pool, &st) != 0) return false;
  const int fl = fcntl(s.pool, F_GETFL);
  const int acc = fl & O_ACCMODE;
  std::printf("pool_type=%s\npool_access=%s\npool_fdinfo_pos=%s\npool_fdinfo_flags=%s\n",
              S_ISREG(st.st_mode) ? "regular" : S_ISCHR(st.st_mode) ? "char" : "other",
              acc == O_RDWR ? "rdwr" : acc == O_RDONLY ? "rdonly" : "wronly",
              FdinfoField(s.pool, "pos").c_str(), FdinfoField(s.pool, "flags").c_str());
  s.pool_size = static_cast<uint64_t>(st.st_size);
  if (S_ISCHR(st.st_mode)) {
    const off_t end = lseek(s.pool, 0, SEEK_END);
    s.pool_size = end > 0 ? static_cast<uint64_t>(end) : 0;
  }
  std::printf("pool_size=%llu\n", static_cast<unsigned long long>(s.pool_size));
  // The superblock as the client reads it itself (L1).
  const bool read_sb = pread(s.pool, &s.sb, sizeof(s.sb), format::kSuperblockOffset[0]) ==
                       static_cast<ssize_t>(sizeof(s.sb));
  const bool uuid_match = read_sb && s.sb.magic == format::kSuperblockMagic &&
                          std::memcmp(s.sb.uuid, h.uuid, 16) == 0;
  std::printf("superblock_uuid_match=%d\ndata_offset=%llu\n", uuid_match ? 1 : 0,
              static_cast<unsigned long long>(read_sb ? s.sb.data_offset : 0));
  const int seals = fcntl(s.stamps, F_GET_SEALS);
  struct stat sst;
  const bool stamps_stat = fstat(s.stamps, &sst) == 0;
  std::printf("stamps_seals=%#x\nstamps_size=%lld\n", seals,
              stamps_stat ? static_cast<long long>(sst.st_size) : -1LL);
  const size_t len = stamps_stat ? static_cast<size_t>(sst.st_size) : 0;
  void* w = len > 0 ? mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, s.stamps, 0)
                    : MAP_FAILED;
  std::printf("stamps_map_write=%s\n", w == MAP_FAILED ? ErrnoName(errno) : "ok");
  if (w != MAP_FAILED) munmap(w, len);
  const uint64_t zero = 0;
  const ssize_t wr = pwrite(s.stamps, &zero, sizeof(zero), 0);
  std::printf("stamps_write=%s\n", wr < 0 ? ErrnoName(errno) : "ok");
  void* r = len > 0 ? mmap(nullptr, len, PROT_READ, MAP_SHARED, s.stamps, 0) : MAP_FAILED;
  std::printf("stamps_map_read=%s\n", r == MAP_FAILED ? ErrnoName(errno) : "ok");
  if (r != MAP_FAILED) munmap(r, len);
  return uuid_match && h.magic == lease::kMagic && h.version == lease::kVersion;
}

// Steps 1a-1c of the protocol. Returns the exit status: 0 with *out filled.
int OpenSession(const Args& a, int ioctl_fd, Session* out) {
  const std::string root = a.mount.empty() ? MountRoot(a.path) : a.mount;
  if (root.empty()) return Die("cannot find the mount root of " + a.path);
  const std::string token = a.token.empty() ? "probe" + std::to_string(getpid()) : a.token;
  const std::string name = std::string(lease::kSessionPrefix) + token;
  if (name.size() >= lease::kSessionNameBytes) {
    errno = ENAMETOOLONG;
    return Die("session name");
  }
  int root_fd = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) return Die("open " + root);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string sock_path = root + "/" + name;
  if (sock_path.size() >= sizeof(addr.sun_path)) {
    sock_path = "/proc/self/fd/" + std::to_string(root_fd) + "/" + name;
  }
  std::memcpy(addr.sun_path, sock_path.data(), sock_path.size());
  const socklen_t addr_len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + sock_path.size() + 1);
  int listener = -1;
  if (a.bind_in_child) {
    // The node then belongs to another pid; the listening socket comes back to us.
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return Die("socketpair");
    const pid_t child = fork();
    if (child == 0) {
      int s = socket(AF_UNIX, SOCK_STREAM, 0);
      if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0 ||
          listen(s, 1) != 0) {
        _exit(1);
      }
      char c = 0;
      iovec iov{&c, 1};
      alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
      msghdr m{};
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = ctl;
      m.msg_controllen = sizeof(ctl);
      cmsghdr* cm = CMSG_FIRSTHDR(&m);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cm), &s, sizeof(int));
      _exit(sendmsg(pair[1], &m, 0) == 1 ? 0 : 1);
    }
    char c;
    iovec iov{&c, 1};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof(ctl);
    if (recvmsg(pair[0], &m, MSG_CMSG_CLOEXEC) == 1 && CMSG_FIRSTHDR(&m) != nullptr) {
      std::memcpy(&listener, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
    }
    waitpid(child, nullptr, 0);
    close(pair[0]);
    close(pair[1]);
    if (listener < 0) return Die("bind in a child");
  } else {
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) return Die("socket");
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0) {
      return Die("bind " + sock_path);
    }
    if (listen(listener, 1) != 0) return Die("listen");
  }
  auto cleanup = [&] {
    close(listener);
    unlinkat(root_fd, name.c_str(), 0);
    close(root_fd);
  };
  lease::SessionRequest req{};
  req.magic = lease::kMagic;
  req.version = lease::kVersion;
  std::memcpy(req.name, name.data(), name.size());
  if (ioctl(ioctl_fd, lease::kIoctlSession, &req) != 0) {
    const int e = errno;
    cleanup();
    std::printf("session refused errno=%s\n", ErrnoName(e));
    return 4;
  }
  if (a.no_accept) {
    std::printf("session ioctl=ok\n");
    std::fflush(stdout);
    sleep(3);  // the daemon's connect waits in the backlog, its send times out
    cleanup();
    return 0;
  }
  pollfd p{.fd = listener, .events = POLLIN, .revents = 0};
  if (poll(&p, 1, kAcceptTimeoutMs) != 1) {
    cleanup();
    std::printf("session failed: no connection within %d ms\n", kAcceptTimeoutMs);
    return 5;
  }
  int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  cleanup();
  if (conn < 0) return Die("accept");
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0) {
    return Die("SO_PEERCRED");
  }
  iovec iov{&out->hello, sizeof(out->hello)};
  alignas(cmsghdr) char ctl[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof(ctl);
  const ssize_t n = recvmsg(conn, &m, MSG_CMSG_CLOEXEC);
  close(conn);
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  std::printf("peer_uid=%u\npeer_pid=%d\nfds=%zu\n", cred.uid, cred.pid, fds.size());
  if (n != static_cast<ssize_t>(sizeof(out->hello)) || (m.msg_flags & MSG_CTRUNC) != 0 ||
      fds.size() < 2) {
    std::printf("session failed: hello of %zd bytes, %zu descriptors\n", n, fds.size());
    return 5;
  }
  out->pool = fds[0];
  out->stamps = fds[1];
  if (fds.size() > 2) out->image = fds[2];
  if (!Describe(*out)) {
    std::printf("session failed: the hello does not match the pool descriptor\n");
    return 5;
  }
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: walfs_lease_probe session PATH | lease FILE [--rdonly|--read] | hold FILE |\n"
               "       store FILE OFF LEN C   [--mount DIR] [--token T] [--no-session]\n"
               "       [--bind-in-child] [--no-accept]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  Args a;
  a.cmd = argv[1];
  a.path = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--rdonly") {
      a.rdonly = true;
    } else if (s == "--read") {
      a.rdonly = true;
      a.read_lease = true;
    } else if (s == "--no-session") {
      a.no_session = true;
    } else if (s == "--bind-in-child") {
      a.bind_in_child = true;
    } else if (s == "--no-accept") {
      a.no_accept = true;
    } else if ((s == "--mount" || s == "--token") && i + 1 < argc) {
      (s == "--mount" ? a.mount : a.token) = argv[++i];
    } else if (s.rfind("--", 0) == 0) {
      return Usage();
    } else {
      a.positional.push_back(s);
    }
  }
  if (a.cmd != "session" && a.cmd != "lease" && a.cmd != "hold" && a.cmd != "store") {
    return Usage();
  }
  if (a.no_session && a.cmd != "lease") return Usage();
  if (a.cmd == "store" && a.positional.size() != 3) return Usage();

  struct stat pst;
  if (stat(a.path.c_str(), &pst) != 0) return Die("stat " + a.path);
  const bool dir = S_ISDIR(pst.st_mode);
  const int fd = open(a.path.c_str(),
                      (a.rdonly || dir ? O_RDONLY : O_RDWR) | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
  if (fd < 0) return Die("open " + a.path);

  Session session;
  if (!a.no_session) {
    const int rc = OpenSession(a, fd, &session);
    if (rc != 0 || a.cmd == "session" || a.no_accept) return rc;
  }

  auto reply = std::make_unique<lease::Reply>();
  reply->magic = lease::kMagic;
  reply->version = lease::kVersion;
  reply->access = a.read_lease ? lease::kAccessRead : lease::kAccessWrite;
  if (ioctl(fd, lease::kIoctlLease, reply.get()) != 0) {
    std::printf("refused errno=%s\n", ErrnoName(errno));
    return 3;
  }
  const lease::Reply& r = *reply;
  if (a.cmd == "lease") {
    std::printf("magic=%#x\nversion=%u\naccess=%u\nflags=%u\nino=%llu\nleased_size=%llu\n",
                r.magic, r.version, r.access, r.flags, static_cast<unsigned long long>(r.ino),
                static_cast<unsigned long long>(r.leased_size));
    std::printf("block_size=%llu\nstamp=%llu\nstamp_offset=%llu\nruns=%u\n",
                static_cast<unsigned long long>(r.block_size),
                static_cast<unsigned long long>(r.stamp),
                static_cast<unsigned long long>(r.stamp_offset), r.run_count);
    bool inside = r.run_count >= 1 && r.run_count <= lease::kMaxRuns;
    for (uint32_t i = 0; i < r.run_count && i < lease::kMaxRuns; ++i) {
      const lease::Run& run = r.runs[i];
      std::printf("run%u=%llu,%llu,%llu\n", i, static_cast<unsigned long long>(run.file_offset),
                  static_cast<unsigned long long>(run.pool_offset),
                  static_cast<unsigned long long>(run.length));
      if (!a.no_session &&
          (run.pool_offset < session.sb.data_offset || run.length > session.pool_size ||
           run.pool_offset > session.pool_size - run.length)) {
        inside = false;
      }
    }
    if (!a.no_session) {
      std::printf("reply_uuid_match=%d\nreply_stamps_id_match=%d\nruns_in_data_area=%d\n",
                  std::memcmp(r.uuid, session.hello.uuid, 16) == 0 ? 1 : 0,
                  r.stamps_id == session.hello.stamps_id ? 1 : 0, inside ? 1 : 0);
      uint64_t word = 0;
      const bool ok = r.stamp_offset % 8 == 0 &&
                      pread(session.stamps, &word, sizeof(word),
                            static_cast<off_t>(r.stamp_offset)) == sizeof(word);
      std::printf("stamp_word=%llu\n", ok ? static_cast<unsigned long long>(word) : 0ULL);
    }
    return 0;
  }
  // L6: the client lock on the session's own pool description.
  struct flock lk {};
  lk.l_type = F_RDLCK;
  lk.l_whence = SEEK_SET;
  lk.l_start = lease::kClientLockOffset;
  lk.l_len = lease::kClientLockLength;
  if (fcntl(session.pool, F_OFD_SETLK, &lk) != 0) return Die("lock the pool");
  if (a.cmd == "hold") {
    std::printf("held\n");
    std::fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof(buf)) > 0) {
    }
    close(session.pool);
    close(fd);
    return 0;
  }
  const uint64_t off = std::strtoull(a.positional[0].c_str(), nullptr, 0);
  const uint64_t len = std::strtoull(a.positional[1].c_str(), nullptr, 0);
  if (off + len > r.leased_size) {
    errno = ERANGE;
    return Die("store outside the lease");
  }
  std::string data(len, a.positional[2][0]);
  for (uint32_t i = 0; i < r.run_count && i < lease::kMaxRuns; ++i) {
    const lease::Run& run = r.runs[i];
    if (off < run.file_offset || off + len > run.file_offset + run.length) continue;
    if (run.pool_offset < session.sb.data_offset || run.length > session.pool_size ||
        run.pool_offset > session.pool_size - run.length) {
      errno = ERANGE;
      return Die("run outside the data area");
    }
    for (int target : {session.image, session.pool}) {
      if (target < 0) continue;
      void* m = mmap(nullptr, run.length, PROT_READ | PROT_WRITE, MAP_SHARED, target,
                     static_cast<off_t>(run.pool_offset));
      if (m == MAP_FAILED) return Die("mmap");
      pmem_memcpy_persist(static_cast<char*>(m) + (off - run.file_offset), data.data(), len);
      munmap(m, run.length);
    }
    std::printf("stored %llu bytes\n", static_cast<unsigned long long>(len));
    return 0;
  }
  errno = EINVAL;
  return Die("store spans runs");
}
