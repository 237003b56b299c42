// walfs_fake_fuse: a FUSE file system that says it is walfs (type fuse.walfs) but is not,
// for fs_direct_fake_test (never installed). It keeps one directory of regular files in
// memory, takes the socket nodes a direct-access client binds for its session, and
// answers kIoctlSession / kIoctlLease (fs/lease_protocol.h) with forged content chosen by
// MODE. Every WRITE it gets is stored, so what a client wrote through the kernel reads
// back through the mount; a byte a client stored anywhere else went around the kernel.
//
//   walfs_fake_fuse MODE MOUNTPOINT --pool POOL [--victim FILE] [--stamps FILE]
//                   [--user NAME] [--log FILE]
//
// Started by root: it mounts (allow_other, so the client's user gets in) and then runs as
// --user. POOL is a pool file made by mkfs.walfs (its superblock gives the uuid and the
// data area). Modes:
//   control          everything as a walfs daemon would answer (pmem, forced durability,
//                    a sealed stamps memfd, runs in the data area): a client that gets
//                    past SO_PEERCRED stores into POOL. The test's proof that it can fail;
//                    with --user of another user than the client's, the wrong peer.
//   victim           the hello's pool descriptor is FILE opened by this server (if it
//                    cannot open it, it says so and passes POOL instead).
//   outside          runs point at the superblock and metadata (pool offset 0).
//   lease-uuid       the lease reply's uuid is not the pool's.
//   hello-uuid       the hello's uuid is not the pool superblock's.
//   unsealed-file    the stamps descriptor is a plain file (--stamps).
//   unsealed-memfd   the stamps descriptor is a memfd without seals.
//   no-mapsync       durability kDurabilityMapSync for a pool on tmpfs.
// Log lines (stdout or --log): "mounted", "session <name> from pid ...", "connected to
// <name>", "hello sent",
// "lease <ino>", "cannot open victim ...".
#define FUSE_USE_VERSION 35

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <grp.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/format.h"
#include "fs/lease_protocol.h"

namespace {

namespace lease = walfs::lease;

// The stamps id of every hello and reply this server forges (a real daemon draws one).
constexpr uint64_t kFakeStampsId = 0x0123456789abcdefull;

struct Node {
  fuse_ino_t ino = 0;
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<char> data;
};

struct Fake {
  std::string mode;
  std::string mountpoint;
  std::string pool;
  std::string victim;
  std::string stamps_path;
  FILE* log = stdout;
  walfs::core::format::Superblock sb{};
  std::mutex mu;  // guards the maps below (the session thread reads names)
  std::map<std::string, std::shared_ptr<Node>> names;
  std::map<fuse_ino_t, std::shared_ptr<Node>> nodes;
  fuse_ino_t next_ino = 2;
  uint64_t next_stamp = 1;
  uint64_t* stamp_words = nullptr;
  int stamps_fd = -1;
};

Fake g;

void Log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(g.log, fmt, ap);
  va_end(ap);
  std::fputc('\n', g.log);
  std::fflush(g.log);
}

void FillAttr(const Node& n, struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = n.ino;
  st->st_mode = n.mode;
  st->st_nlink = S_ISDIR(n.mode) ? 2 : 1;
  st->st_uid = n.uid;
  st->st_gid = n.gid;
  st->st_size = static_cast<off_t>(n.data.size());
  st->st_blksize = 4096;
  st->st_blocks = static_cast<blkcnt_t>((n.data.size() + 511) / 512);
}

void ReplyEntry(fuse_req_t req, const Node& n) {
  fuse_entry_param e{};
  e.ino = n.ino;
  e.generation = 1;
  FillAttr(n, &e.attr);
  e.attr_timeout = 0;
  e.entry_timeout = 0;
  fuse_reply_entry(req, &e);
}

std::shared_ptr<Node> Find(fuse_ino_t ino) {
  auto it = g.nodes.find(ino);
  return it == g.nodes.end() ? nullptr : it->second;
}

std::shared_ptr<Node> MakeNode(const std::string& name, mode_t mode, fuse_req_t req) {
  auto n = std::make_shared<Node>();
  n->ino = g.next_ino++;
  n->mode = mode;
  const fuse_ctx* ctx = fuse_req_ctx(req);
  n->uid = ctx->uid;
  n->gid = ctx->gid;
  g.names[name] = n;
  g.nodes[n->ino] = n;
  return n;
}

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  std::lock_guard<std::mutex> l(g.mu);
  auto it = g.names.find(name);
  if (parent != FUSE_ROOT_ID || it == g.names.end()) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  ReplyEntry(req, *it->second);
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  std::lock_guard<std::mutex> l(g.mu);
  auto n = Find(ino);
  if (!n) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  struct stat st;
  FillAttr(*n, &st);
  fuse_reply_attr(req, &st, 0);
}

void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  std::lock_guard<std::mutex> l(g.mu);
  auto n = Find(ino);
  if (!n) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  if (to_set & FUSE_SET_ATTR_SIZE) n->data.resize(static_cast<size_t>(attr->st_size));
  if (to_set & FUSE_SET_ATTR_MODE) n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
  if (to_set & FUSE_SET_ATTR_UID) n->uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) n->gid = attr->st_gid;
  struct stat st;
  FillAttr(*n, &st);
  fuse_reply_attr(req, &st, 0);
}

void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t) {
  std::lock_guard<std::mutex> l(g.mu);
  if (parent != FUSE_ROOT_ID) {
    fuse_reply_err(req, EPERM);
    return;
  }
  if (g.names.count(name)) {
    fuse_reply_err(req, EEXIST);
    return;
  }
  if (!S_ISSOCK(mode) && !S_ISREG(mode)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  auto n = MakeNode(name, mode, req);
  if (S_ISSOCK(mode)) Log("socket node %s", name);
  ReplyEntry(req, *n);
}

void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(g.mu);
  if (parent != FUSE_ROOT_ID) {
    fuse_reply_err(req, EPERM);
    return;
  }
  auto it = g.names.find(name);
  std::shared_ptr<Node> n;
  if (it != g.names.end()) {
    if (fi->flags & O_EXCL) {
      fuse_reply_err(req, EEXIST);
      return;
    }
    n = it->second;
  } else {
    n = MakeNode(name, S_IFREG | (mode & 07777), req);
  }
  if (fi->flags & O_TRUNC) n->data.clear();
  fi->direct_io = 1;  // every read and write reaches this server
  fuse_entry_param e{};
  e.ino = n->ino;
  e.generation = 1;
  FillAttr(*n, &e.attr);
  fuse_reply_create(req, &e, fi);
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(g.mu);
  auto n = Find(ino);
  if (!n) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  if (fi->flags & O_TRUNC) n->data.clear();
  fi->direct_io = 1;
  fuse_reply_open(req, fi);
}

void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  std::lock_guard<std::mutex> l(g.mu);
  auto n = Find(ino);
  if (!n) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  const size_t o = static_cast<size_t>(off);
  if (o >= n->data.size()) {
    fuse_reply_buf(req, nullptr, 0);
    return;
  }
  fuse_reply_buf(req, n->data.data() + o, std::min(size, n->data.size() - o));
}

void OpWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
             fuse_file_info*) {
  std::lock_guard<std::mutex> l(g.mu);
  auto n = Find(ino);
  if (!n) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  const size_t o = static_cast<size_t>(off);
  if (n->data.size() < o + size) n->data.resize(o + size);
  std::memcpy(n->data.data() + o, buf, size);
  fuse_reply_write(req, size);
}

void OpFlush(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  std::lock_guard<std::mutex> l(g.mu);
  // As a walfs daemon does (L4): a new stamp in every word at each FLUSH.
  if (g.stamp_words != nullptr) {
    for (int i = 0; i < 64; ++i) g.stamp_words[i] = g.next_stamp++;
  }
  fuse_reply_err(req, 0);
}

void OpRelease(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void OpFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(req, 0); }

void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  std::lock_guard<std::mutex> l(g.mu);
  auto it = g.names.find(name);
  if (parent != FUSE_ROOT_ID || it == g.names.end()) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  g.names.erase(it);
  fuse_reply_err(req, 0);
}

void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
              const char* newname, unsigned int) {
  std::lock_guard<std::mutex> l(g.mu);
  auto it = g.names.find(name);
  if (parent != FUSE_ROOT_ID || newparent != FUSE_ROOT_ID || it == g.names.end()) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  auto n = it->second;
  g.names.erase(it);
  g.names[newname] = n;
  fuse_reply_err(req, 0);
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  std::lock_guard<std::mutex> l(g.mu);
  if (ino != FUSE_ROOT_ID) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  std::vector<std::pair<std::string, fuse_ino_t>> entries = {{".", FUSE_ROOT_ID},
                                                             {"..", FUSE_ROOT_ID}};
  for (const auto& [name, n] : g.names) entries.emplace_back(name, n->ino);
  std::vector<char> buf(size);
  size_t used = 0;
  for (size_t i = static_cast<size_t>(off); i < entries.size(); ++i) {
    struct stat st {};
    st.st_ino = entries[i].second;
    const size_t need = fuse_add_direntry(req, buf.data() + used, size - used,
                                          entries[i].first.c_str(), &st,
                                          static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

std::string SocketPath(const std::string& name) { return g.mountpoint + "/" + name; }

// Connects to the client's socket and sends the forged hello, as the daemon does after
// its reply to kIoctlSession.
void SendHello(std::string name) {
  lease::SessionHello hello{};
  hello.magic = lease::kMagic;
  hello.version = lease::kVersion;
  hello.durability =
      g.mode == "no-mapsync" ? lease::kDurabilityMapSync : lease::kDurabilityForced;
  std::memcpy(hello.uuid, g.sb.uuid, sizeof(hello.uuid));
  if (g.mode == "hello-uuid") hello.uuid[0] ^= 0xff;
  hello.stamp_slots = 64;
  hello.stamps_id = kFakeStampsId;

  int pool_fd = -1;
  if (g.mode == "victim") {
    pool_fd = open(g.victim.c_str(), O_RDWR | O_CLOEXEC);
    if (pool_fd < 0) {
      Log("cannot open victim %s: %s; passing the pool instead", g.victim.c_str(),
          strerrorname_np(errno));
    } else {
      Log("passing victim %s", g.victim.c_str());
    }
  }
  if (pool_fd < 0) pool_fd = open(g.pool.c_str(), O_RDWR | O_CLOEXEC);
  if (pool_fd < 0) {
    Log("cannot open pool %s: %s", g.pool.c_str(), strerrorname_np(errno));
    return;
  }
  const int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = SocketPath(name);
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  int rc = -1;
  for (int i = 0; i < 100 && rc != 0; ++i) {
    rc = connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (rc != 0) usleep(10000);
  }
  if (rc != 0) {
    Log("cannot connect to %s: %s", path.c_str(), strerrorname_np(errno));
    close(sock);
    close(pool_fd);
    return;
  }
  Log("connected to %s", name.c_str());
  int fds[2] = {pool_fd, g.stamps_fd};
  char control[CMSG_SPACE(sizeof(fds))] = {};
  iovec iov{&hello, sizeof(hello)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  if (sendmsg(sock, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(hello))) {
    Log("sendmsg: %s", strerrorname_np(errno));
  } else {
    Log("hello sent");
  }
  close(sock);
  close(pool_fd);
}

void OpIoctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void*, fuse_file_info*,
             unsigned flags, const void* in_buf, size_t in_bufsz, size_t out_bufsz) {
  if (flags & FUSE_IOCTL_COMPAT) {
    fuse_reply_err(req, ENOSYS);
    return;
  }
  if (cmd == static_cast<unsigned int>(lease::kIoctlSession)) {
    if (in_bufsz != sizeof(lease::SessionRequest)) {
      fuse_reply_err(req, EINVAL);
      return;
    }
    lease::SessionRequest r;
    std::memcpy(&r, in_buf, sizeof(r));
    r.name[sizeof(r.name) - 1] = '\0';
    Log("session %s from pid %d", r.name, static_cast<int>(fuse_req_ctx(req)->pid));
    fuse_reply_ioctl(req, 0, nullptr, 0);
    std::thread(SendHello, std::string(r.name)).detach();
    return;
  }
  if (cmd == static_cast<unsigned int>(lease::kIoctlLease)) {
    if (out_bufsz != sizeof(lease::Reply)) {
      fuse_reply_err(req, EINVAL);
      return;
    }
    std::lock_guard<std::mutex> l(g.mu);
    auto n = Find(ino);
    if (!n || !S_ISREG(n->mode) || n->data.empty()) {
      fuse_reply_err(req, ENODATA);
      return;
    }
    const uint64_t block = g.sb.block_size;
    lease::Reply r{};
    r.magic = lease::kMagic;
    r.version = lease::kVersion;
    r.access = lease::kAccessWrite;
    r.ino = n->ino;
    r.leased_size = n->data.size() / block * block;
    if (r.leased_size == 0) {
      fuse_reply_err(req, ENODATA);
      return;
    }
    r.block_size = block;
    std::memcpy(r.uuid, g.sb.uuid, sizeof(r.uuid));
    if (g.mode == "lease-uuid") r.uuid[0] ^= 0xff;
    const uint64_t slot = n->ino % 64;
    r.stamp = g.next_stamp++;
    r.stamp_offset = slot * 8;
    r.stamps_id = kFakeStampsId;
    if (g.stamp_words != nullptr) g.stamp_words[slot] = r.stamp;
    r.run_count = 1;
    r.runs[0].file_offset = 0;
    r.runs[0].length = r.leased_size;
    // Each file its own place in the data area (or, forged, over the superblock).
    r.runs[0].pool_offset =
        g.mode == "outside" ? 0 : g.sb.data_offset + (n->ino - 2) * (uint64_t{2} << 20);
    Log("lease %llu: %llu bytes at pool offset %llu", static_cast<unsigned long long>(n->ino),
        static_cast<unsigned long long>(r.leased_size),
        static_cast<unsigned long long>(r.runs[0].pool_offset));
    fuse_reply_ioctl(req, 0, &r, sizeof(r));
    return;
  }
  fuse_reply_err(req, ENOTTY);
}

void OpGetxattr(fuse_req_t req, fuse_ino_t, const char*, size_t) {
  fuse_reply_err(req, ENODATA);
}

int MakeStamps() {
  const size_t bytes = 64 * sizeof(uint64_t);
  int fd;
  if (g.mode == "unsealed-file") {
    fd = open(g.stamps_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  } else {
    fd = memfd_create("walfs-fake-stamps", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  }
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return -1;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return -1;
  g.stamp_words = static_cast<uint64_t*>(m);
  if (g.mode != "unsealed-file" && g.mode != "unsealed-memfd" &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return -1;
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: walfs_fake_fuse MODE MOUNTPOINT --pool POOL [...]\n");
    return 2;
  }
  g.mode = argv[1];
  g.mountpoint = argv[2];
  std::string user;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--pool") g.pool = v;
    else if (k == "--victim") g.victim = v;
    else if (k == "--stamps") g.stamps_path = v;
    else if (k == "--user") user = v;
    else if (k == "--log") g.log = std::fopen(v.c_str(), "a");
    else return 2;
  }
  static const char* kModes[] = {"control",       "victim",         "outside",
                                 "lease-uuid",    "hello-uuid",     "unsealed-file",
                                 "unsealed-memfd", "no-mapsync"};
  if (std::none_of(std::begin(kModes), std::end(kModes),
                   [](const char* m) { return g.mode == m; }) ||
      g.pool.empty() || g.log == nullptr) {
    std::fprintf(stderr, "walfs_fake_fuse: bad arguments\n");
    return 2;
  }
  {
    const int fd = open(g.pool.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || pread(fd, &g.sb, sizeof(g.sb), 0) != sizeof(g.sb) ||
        g.sb.magic != walfs::core::format::kSuperblockMagic || g.sb.block_size == 0) {
      std::fprintf(stderr, "walfs_fake_fuse: %s is not a walfs pool\n", g.pool.c_str());
      return 1;
    }
    close(fd);
  }

  auto root = std::make_shared<Node>();
  root->ino = FUSE_ROOT_ID;
  root->mode = S_IFDIR | 0777;
  g.nodes[FUSE_ROOT_ID] = root;

  fuse_lowlevel_ops ops{};
  ops.lookup = OpLookup;
  ops.getattr = OpGetattr;
  ops.setattr = OpSetattr;
  ops.mknod = OpMknod;
  ops.create = OpCreate;
  ops.open = OpOpen;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.flush = OpFlush;
  ops.release = OpRelease;
  ops.fsync = OpFsync;
  ops.unlink = OpUnlink;
  ops.rename = OpRename;
  ops.readdir = OpReaddir;
  ops.ioctl = OpIoctl;
  ops.getxattr = OpGetxattr;

  // fsname and subtype make /proc/self/mountinfo say "fuse.walfs <pool>", as for walfs.
  const std::string fsname = "fsname=" + g.pool;
  const char* args[] = {"walfs", "-o", fsname.c_str(), "-o", "subtype=walfs",
                        "-o", "allow_other"};
  fuse_args fargs = FUSE_ARGS_INIT(7, const_cast<char**>(args));
  fuse_session* se = fuse_session_new(&fargs, &ops, sizeof(ops), nullptr);
  if (se == nullptr) return 1;
  if (fuse_set_signal_handlers(se) != 0) return 1;
  if (fuse_session_mount(se, g.mountpoint.c_str()) != 0) return 1;

  if (!user.empty()) {
    const passwd* pw = getpwnam(user.c_str());
    if (pw == nullptr || setgroups(0, nullptr) != 0 || setresgid(pw->pw_gid, pw->pw_gid,
                                                                 pw->pw_gid) != 0 ||
        setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0) {
      std::fprintf(stderr, "walfs_fake_fuse: cannot become %s\n", user.c_str());
      fuse_session_unmount(se);
      return 1;
    }
  }
  g.stamps_fd = MakeStamps();
  if (g.stamps_fd < 0) {
    std::fprintf(stderr, "walfs_fake_fuse: stamps: %s\n", std::strerror(errno));
    fuse_session_unmount(se);
    return 1;
  }
  Log("mounted %s (mode %s, uid %d)", g.mountpoint.c_str(), g.mode.c_str(),
      static_cast<int>(getuid()));
  const int rc = fuse_session_loop(se);
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return rc < 0 ? 1 : 0;
}
