// Direct-access sessions (session.h).
#include "fs/session.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fs/logging.h"
#include "fs/session_nodes.h"

namespace walfs::fs {
namespace {

// Closes a descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

int Fail(std::string* why, int error, std::string text) {
  *why = absl::StrCat(text, ": ", std::strerror(error));
  return error;
}

}  // namespace

uint32_t SessionDurability(bool device, bool region_is_pmem, const char* force_env) {
  if (!region_is_pmem) return 0;
  if (device) return lease::kDurabilityDevice;
  // libpmem's own reading of the variable: "1" makes every range pmem.
  if (force_env != nullptr && std::string_view(force_env) == "1") {
    return lease::kDurabilityForced;
  }
  return lease::kDurabilityMapSync;
}

const char* DurabilityName(uint32_t durability) {
  switch (durability) {
    case lease::kDurabilityMapSync: return "map_sync";
    case lease::kDurabilityDevice: return "device";
    case lease::kDurabilityForced: return "forced";
    case lease::kDurabilityReadsOnly: return "reads_only";
  }
  return "none";
}

DirectAccess DecideDirectAccess(const DirectAccessInputs& in) {
  DirectAccess d;
  if (in.read_only) {
    d.off_reason = "read-only mount";
  } else if (!in.pmem_mode || in.durability == 0) {
    d.off_reason = "msync mode: a copy + drain is not durable on this pool";
    // A copy out needs no durability: the client's mapping is the pool file's page
    // cache, where the daemon's stores land.
    d.reads_only = !in.page_cache && in.stamps_error.empty();
    if (d.reads_only) d.durability = lease::kDurabilityReadsOnly;
  } else if (in.page_cache) {
    d.off_reason = "page_cache experiment: the kernel caches file pages that direct "
                   "stores would not update";
  } else if (!in.stamps_error.empty()) {
    d.off_reason = absl::StrCat("no revocation stamps: ", in.stamps_error);
  }
  if (d.available()) d.durability = in.durability;
  return d;
}

int CheckSessionRequest(const lease::SessionRequest& request, std::string* name) {
  if (request.magic != lease::kMagic || request.version != lease::kVersion) return EINVAL;
  const size_t len = strnlen(request.name, sizeof(request.name));
  if (len == sizeof(request.name)) return EINVAL;  // not NUL-terminated
  std::string_view n(request.name, len);
  if (!SessionNodes::IsValidName(n)) return EINVAL;
  name->assign(n);
  return 0;
}

lease::SessionHello MakeHello(uint32_t durability, uint32_t flags, const uint8_t uuid[16],
                              uint64_t stamp_slots, uint64_t stamps_id) {
  lease::SessionHello h{};
  h.magic = lease::kMagic;
  h.version = lease::kVersion;
  h.durability = durability;
  h.flags = flags;
  std::memcpy(h.uuid, uuid, sizeof(h.uuid));
  h.stamp_slots = stamp_slots;
  h.stamps_id = stamps_id;
  return h;
}

SessionSender::SessionSender(Config config) : config_(std::move(config)) {
  // The termination signals must reach a thread of libfuse's loop, never this one.
  sigset_t set, saved;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, &saved);
  thread_ = std::thread([this] { Run(); });
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

SessionSender::~SessionSender() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool SessionSender::Enqueue(std::string name, uid_t uid) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (pending_.size() >= kMaxPending) return false;
    pending_.emplace_back(std::move(name), uid);
  }
  cv_.notify_one();
  return true;
}

void SessionSender::Run() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [this] { return stop_ || !pending_.empty(); });
    if (stop_) return;
    auto [name, uid] = std::move(pending_.front());
    pending_.pop_front();
    l.unlock();
    std::string why;
    if (Deliver(config_, name, uid, &why) == 0) {
      if (config_.granted != nullptr) config_.granted->fetch_add(1, std::memory_order_relaxed);
    } else {
      if (config_.refused != nullptr) config_.refused->fetch_add(1, std::memory_order_relaxed);
      Log(LOG_WARNING, "direct-access session %s (uid %u) not set up: %s", name.c_str(),
          static_cast<unsigned>(uid), why.c_str());
    }
    l.lock();
  }
}

int SessionSender::Deliver(const Config& config, const std::string& name, uid_t uid,
                           std::string* why) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = absl::StrCat(config.mountpoint, "/", name);
  Fd dir;
  if (path.size() >= sizeof(addr.sun_path)) {
    // Held only until connect returns: a descriptor on the mount would keep umount busy.
    dir.Reset(::open(config.mountpoint.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() < 0) return Fail(why, errno, absl::StrCat("open ", config.mountpoint));
    path = absl::StrCat("/proc/self/fd/", dir.get(), "/", name);
    if (path.size() >= sizeof(addr.sun_path)) {
      return Fail(why, ENAMETOOLONG, absl::StrCat("socket path ", path));
    }
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  Fd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) return Fail(why, errno, "socket");
  // A unix connect and send wait at most SO_SNDTIMEO (a client that does not accept).
  timeval tv{.tv_sec = kTimeoutMs / 1000, .tv_usec = (kTimeoutMs % 1000) * 1000};
  (void)::setsockopt(sock.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int rc = ::connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr),
                           static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                                  path.size() + 1));
  const int connect_errno = errno;
  dir.Reset();
  if (rc != 0) return Fail(why, connect_errno, absl::StrCat("connect to ", path));
  // L5: the listener must be the ioctl's caller (root's socket is not a pool owner's).
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  if (::getsockopt(sock.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0) {
    return Fail(why, errno, "SO_PEERCRED");
  }
  if (cred.uid != uid) {
    *why = absl::StrCat("the socket's listener has uid ", cred.uid, ", the request came from uid ",
                        uid);
    return EPERM;
  }
  // A new open file description for this client (its OFD lock is its own, L6).
  Fd pool(::open(absl::StrCat("/proc/self/fd/", config.pool_fd).c_str(), O_RDWR | O_CLOEXEC));
  if (pool.get() < 0) return Fail(why, errno, "reopen the pool");
  int fds[3] = {pool.get(), config.stamps_fd, config.image_fd};
  const size_t nfds = (config.hello.flags & lease::kHelloFlagImage) != 0 ? 3 : 2;
  lease::SessionHello hello = config.hello;
  iovec iov{.iov_base = &hello, .iov_len = sizeof(hello)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(fds))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
  std::memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nfds);
  const ssize_t sent = ::sendmsg(sock.get(), &msg, MSG_NOSIGNAL);
  if (sent < 0) return Fail(why, errno, "send the hello");
  if (static_cast<size_t>(sent) != sizeof(hello)) {
    *why = absl::StrCat("sent ", sent, " of ", sizeof(hello), " hello bytes");
    return EIO;
  }
  return 0;
}

}  // namespace walfs::fs
