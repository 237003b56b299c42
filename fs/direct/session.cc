// The session exchange and the per-mount session cache.
#include "fs/direct/session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fs/direct/mounts.h"
#include "fs/direct/real_calls.h"
#include "fs/direct/switches.h"

namespace walfs::direct {
namespace {

constexpr uint64_t kMaxStampSlots = uint64_t{1} << 24;

int IoctlSession(int fd, const lease::SessionRequest* request) {
  return ioctl(fd, lease::kIoctlSession, request) == 0 ? 0 : -errno;
}

int64_t NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int RemainingMs(int64_t deadline) {
  const int64_t left = deadline - NowMs();
  return left <= 0 ? 0 : static_cast<int>(left);
}

// Waits for `events` on fd until the deadline: 0, or -errno (ETIMEDOUT when it passed).
int WaitFor(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    const int n = poll(&p, 1, RemainingMs(deadline));
    if (n > 0) return 0;
    if (n == 0) return -ETIMEDOUT;
    if (errno != EINTR) return -errno;
  }
}

// F_OFD_SETLK of the client lock range (lease::kClientLockOffset) on the pool
// description: `type` F_RDLCK or F_UNLCK. 0 or -1 with errno set.
int LockPool(int pool_fd, short type) {
  struct flock lock = {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = lease::kClientLockOffset;
  lock.l_len = lease::kClientLockLength;
  return real::Fcntl(pool_fd, F_OFD_SETLK, &lock) != 0 ? -1 : 0;
}

// Unlinks `name` in directory `root`, whatever the length of the path.
void UnlinkIn(const std::string& root, const char* name) {
  const int dir = real::Open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  unlinkat(dir, name, 0);
  real::Close(dir);
}

// Binds sock at root/name: 0 or -errno.
int BindIn(int sock, const std::string& root, const char* name) {
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  const std::string path = root + (root.back() == '/' ? "" : "/") + name;
  if (path.size() < sizeof(addr.sun_path)) {
    memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    return bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : -errno;
  }
  const int dir = real::Open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -errno;
  const int n = snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", dir, name);
  int err = -ENAMETOOLONG;
  if (n > 0 && static_cast<size_t>(n) < sizeof(addr.sun_path)) {
    err = bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : -errno;
  }
  real::Close(dir);
  return err;
}

}  // namespace

const char* ValidateHello(const lease::SessionHello& h, int descriptor_count) {
  if (h.magic != lease::kMagic) return "bad hello magic";
  if (h.version != lease::kVersion) return "unknown hello version";
  if (h.durability != lease::kDurabilityMapSync && h.durability != lease::kDurabilityDevice &&
      h.durability != lease::kDurabilityForced && h.durability != lease::kDurabilityReadsOnly) {
    return "unknown durability";
  }
#ifdef WALFS_TEST_FACILITIES
  constexpr uint32_t kKnownFlags = lease::kHelloFlagImage;
#else
  constexpr uint32_t kKnownFlags = 0;
#endif
  if ((h.flags & ~kKnownFlags) != 0) return "unknown hello flags";
  for (uint64_t r : h.reserved) {
    if (r != 0) return "hello reserved words not zero";
  }
  if (h.stamp_slots == 0 || h.stamp_slots > kMaxStampSlots) return "stamp_slots out of range";
  if (h.stamps_id == 0) return "no stamps id";
  const int want = (h.flags & lease::kHelloFlagImage) != 0 ? 3 : 2;
  if (descriptor_count != want) return "wrong number of descriptors";
  return nullptr;
}

const char* CheckStamps(int fd, uint64_t stamp_slots) {
  struct stat st;
  if (fstat(fd, &st) != 0) return "cannot stat the stamps";
  if (!S_ISREG(st.st_mode)) return "stamps are not a memfd";
  const int seals = real::Fcntl(fd, F_GET_SEALS, nullptr);
  if (seals < 0) return "stamps are not sealable";
  if ((seals & (F_SEAL_FUTURE_WRITE | F_SEAL_WRITE)) == 0 || (seals & F_SEAL_SHRINK) == 0 ||
      (seals & F_SEAL_GROW) == 0) {
    return "stamps are not sealed against writes, shrinking and growing";
  }
  if (stamp_slots > kMaxStampSlots ||
      static_cast<uint64_t>(st.st_size) != stamp_slots * sizeof(uint64_t)) {
    return "stamps are not stamp_slots words long";
  }
  return nullptr;
}

void ReceivedHello::CloseAll() {
  for (int i = 0; i < count; ++i) {
    if (fds[i] >= 0) real::Close(fds[i]);
    fds[i] = -1;
  }
  count = 0;
}

int ReceiveHello(int conn, int timeout_ms, ReceivedHello* out, const char** reason) {
  out->count = 0;
  const int64_t deadline = NowMs() + timeout_ms;
  if (const int err = WaitFor(conn, POLLIN, deadline); err != 0) {
    *reason = "no hello from the daemon";
    return err;
  }
  // One byte more than a hello, and room for one descriptor more than any hello
  // carries: either surplus means a malformed message.
  char data[sizeof(lease::SessionHello) + 1];
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * (kMaxHelloFds + 1))];
  struct iovec iov = {data, sizeof(data)};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    *reason = "recvmsg of the hello failed";
    return -errno;
  }
  bool extra = false;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t bytes = c->cmsg_len - CMSG_LEN(0);
    for (size_t i = 0; i < bytes / sizeof(int); ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (out->count <= kMaxHelloFds) {
        out->fds[out->count++] = fd;
      } else {
        real::Close(fd);
        extra = true;
      }
    }
  }
  int err = 0;
  if ((msg.msg_flags & MSG_CTRUNC) != 0 || extra || out->count > kMaxHelloFds) {
    *reason = "the hello carried more descriptors than any hello has";
    err = -EPROTO;
  } else if (n != static_cast<ssize_t>(sizeof(lease::SessionHello))) {
    *reason = "the hello has the wrong length";
    err = -EPROTO;
  }
  if (err != 0) {
    out->CloseAll();
    return err;
  }
  memcpy(&out->hello, data, sizeof(out->hello));
  return 0;
}

bool PeerIsOwnerOrRoot(int conn) {
  struct ucred cred = {};
  socklen_t len = sizeof(cred);
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) {
    return false;
  }
  return cred.uid == geteuid() || cred.uid == 0;
}

const SessionSources& ProductionSessionSources() {
  static constexpr SessionSources kSources = {
      .mount_root = WalfsMountRoot,
      .ioctl_session = IoctlSession,
      .peer_allowed = PeerIsOwnerOrRoot,
      .timeout_ms = 2000,
  };
  return kSources;
}

std::string NewSessionName() {
  static std::atomic<uint32_t> counter{0};
  uint64_t random = 0;
  // Uniqueness comes from pid and counter; the random bytes keep the name from being
  // predictable. A short read (no entropy yet) leaves zeros, never blocks.
  if (getrandom(&random, sizeof(random), GRND_NONBLOCK) != sizeof(random)) random = 0;
  char name[lease::kSessionNameBytes];
  snprintf(name, sizeof(name), "%s%d.%u.%016llx", lease::kSessionPrefix,
           static_cast<int>(getpid()), counter.fetch_add(1, std::memory_order_relaxed),
           static_cast<unsigned long long>(random));
  return name;
}

int ExchangeSession(int leased_fd, const std::string& root, const SessionSources& sources,
                    ReceivedHello* out, const char** reason) {
  out->count = 0;
  if (root.empty() || root[0] != '/') {
    *reason = "no mount root";
    return -ENOENT;
  }
  const int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock < 0) {
    *reason = "socket failed";
    return -errno;
  }
  const std::string name = NewSessionName();
  int err = BindIn(sock, root, name.c_str());
  if (err != 0) {
    real::Close(sock);
    *reason = "cannot bind the session socket in the mount root";
    return err;
  }
  int conn = -1;
  const int64_t deadline = NowMs() + sources.timeout_ms;
  if (listen(sock, 1) != 0) {
    err = -errno;
    *reason = "listen failed";
  } else {
    lease::SessionRequest request = {};
    request.magic = lease::kMagic;
    request.version = lease::kVersion;
    memcpy(request.name, name.c_str(), name.size() + 1);
    err = sources.ioctl_session(leased_fd, &request);
    if (err != 0) *reason = "the session ioctl was refused";
  }
  while (err == 0 && conn < 0) {
    err = WaitFor(sock, POLLIN, deadline);
    if (err != 0) {
      *reason = "the daemon did not connect in time";
      break;
    }
    conn = accept4(sock, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED) {
      err = -errno;
      *reason = "accept failed";
    }
  }
  if (err == 0 && !sources.peer_allowed(conn)) {
    // Refused before anything is received: no descriptor of another user's server
    // ever enters this process.
    err = -EPERM;
    *reason = "the session's peer is neither this user nor root";
  }
  if (err == 0) err = ReceiveHello(conn, RemainingMs(deadline), out, reason);
  if (conn >= 0) real::Close(conn);
  real::Close(sock);
  UnlinkIn(root, name.c_str());
  return err;
}

int Sessions::Acquire(int leased_fd, dev_t dev, const SessionSources& sources,
                      const char** reason) {
  const uint64_t key = static_cast<uint64_t>(dev);
  {
    SignalSafeLock::Guard guard(lock_);
    for (int i = 0; i < kMaxSessions; ++i) {
      Session& s = sessions_[i];
      if (s.refs > 0 && s.dev == key && !s.stale) {
        ++s.refs;
        return i;
      }
    }
    for (int i = 0; i < kMaxSessions; ++i) {
      Session& s = sessions_[i];
      if (!IsIdle(s) || s.dev != key) continue;
      // Idle: locked again before any mapping is made from it (L6). A pool someone is
      // rewriting (mkfs --force, fsck --repair hold a write lock) refuses it; the session
      // is then closed and an exchange says whether there is a daemon to serve the pool.
      if (LockPool(s.pool_fd.load(std::memory_order_relaxed), F_RDLCK) != 0) {
        CloseSlot(s);
        break;
      }
      s.refs = 1;
      return i;
    }
    const int64_t now = NowMs();
    for (const Failure& f : failures_) {
      if (f.until_ms > now && f.dev == key) {
        *reason = "a session attempt on this mount failed moments ago";
        return -f.error;
      }
    }
  }
  int result;
  const std::optional<std::string> root = sources.mount_root(dev);
  ReceivedHello received;
  if (!root) {
    *reason = "no walfs mount root for the device in mountinfo";
    result = -ENOENT;
  } else if (const int err = ExchangeSession(leased_fd, *root, sources, &received, reason);
             err != 0) {
    result = err;
  } else {
    result = Install(dev, received, reason);
  }
  if (result < 0) {
    SignalSafeLock::Guard guard(lock_);
    // The slot of this device, else an expired one, else the one expiring first.
    Failure* slot = &failures_[0];
    for (Failure& f : failures_) {
      if (f.dev == key) {
        slot = &f;
        break;
      }
      if (f.until_ms < slot->until_ms) slot = &f;
    }
    *slot = Failure{.dev = key, .until_ms = NowMs() + kRetryDelayMs, .error = -result};
  }
  return result;
}

int Sessions::Install(dev_t dev, ReceivedHello& received, const char** reason) {
  SessionFacts facts;
  int err = -EPROTO;
  if (const char* why = ValidateHello(received.hello, received.count); why != nullptr) {
    *reason = why;
  } else if (const char* why_pool = ReadPoolArea(received.fds[0], &facts.area);
             why_pool != nullptr) {
    *reason = why_pool;
  } else if (memcmp(facts.area.uuid, received.hello.uuid, sizeof(facts.area.uuid)) != 0) {
    *reason = "the hello's uuid is not the pool superblock's";
  } else if (const char* why_stamps = CheckStamps(received.fds[1], received.hello.stamp_slots);
             why_stamps != nullptr) {
    *reason = why_stamps;
  } else {
    err = 0;
  }
#ifdef WALFS_TEST_FACILITIES
  if (err == 0 && received.count == 3) {
    struct stat st;
    if (fstat(received.fds[2], &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) < facts.area.data_end) {
      *reason = "the power-cut image is not a regular file as large as the pool";
      err = -EPROTO;
    }
  }
#endif
  if (err == 0 && LockPool(received.fds[0], F_RDLCK) != 0) {
    err = -errno;
    *reason = "cannot read-lock the pool";
  }
  if (err != 0) {
    received.CloseAll();
    return err;
  }
  facts.durability = received.hello.durability;
  facts.stamp_slots = received.hello.stamp_slots;
  facts.stamps_id = received.hello.stamps_id;

  SignalSafeLock::Guard guard(lock_);
  const uint64_t key = static_cast<uint64_t>(dev);
  for (int i = 0; i < kMaxSessions; ++i) {
    Session& s = sessions_[i];
    if (s.refs > 0 && s.dev == key && !s.stale) {
      // Another thread's exchange finished first: share its session.
      ++s.refs;
      received.CloseAll();
      return i;
    }
  }
  // The new session supersedes this mount's idle one; an empty slot takes it, else the
  // slot of another mount's idle session, which is closed.
  int slot = -1;
  for (int i = 0; i < kMaxSessions; ++i) {
    Session& s = sessions_[i];
    if (IsIdle(s) && s.dev == key) CloseSlot(s);
    if (slot < 0 && s.refs == 0 && s.pool_fd.load(std::memory_order_relaxed) < 0) slot = i;
  }
  for (int i = 0; i < kMaxSessions && slot < 0; ++i) {
    if (IsIdle(sessions_[i])) {
      CloseSlot(sessions_[i]);
      slot = i;
    }
  }
  if (slot < 0) {
    received.CloseAll();
    *reason = "too many sessions";
    return -EMFILE;
  }
  Session& s = sessions_[slot];
  bool adopted = owned_->Adopt(received.fds[0], &s.pool_fd);
  if (adopted) {
    received.fds[0] = -1;
    adopted = owned_->Adopt(received.fds[1], &s.stamps_fd);
    if (adopted) received.fds[1] = -1;
  }
#ifdef WALFS_TEST_FACILITIES
  if (adopted && received.count == 3) {
    adopted = owned_->Adopt(received.fds[2], &s.image_fd);
    if (adopted) received.fds[2] = -1;
  }
#endif
  if (!adopted) {
    owned_->Close(&s.pool_fd);
    owned_->Close(&s.stamps_fd);
    received.CloseAll();
    *reason = "session descriptors lie past the descriptor table's bound";
    return -EMFILE;
  }
  received.count = 0;
  s.dev = static_cast<uint64_t>(dev);
  s.facts = facts;
  s.refs = 1;
  s.shared = false;
  s.stale = false;
  DebugLog("session for device %u:%u: pool data area [%llu, %llu), %llu stamp slots, "
           "durability %u%s",
           major(dev), minor(dev), static_cast<unsigned long long>(facts.area.data_begin),
           static_cast<unsigned long long>(facts.area.data_end),
           static_cast<unsigned long long>(facts.stamp_slots), facts.durability,
           facts.area.is_device ? " (device)" : "");
  return slot;
}

void Sessions::Release(int handle) {
  if (handle < 0 || handle >= kMaxSessions) return;
  SignalSafeLock::Guard guard(lock_);
  Session& s = sessions_[handle];
  if (s.refs == 0 || --s.refs > 0) return;
  if (s.shared || s.stale || LockPool(s.pool_fd.load(std::memory_order_relaxed), F_UNLCK) != 0) {
    CloseSlot(s);
  }
}

void Sessions::Discard(int handle) {
  if (handle < 0 || handle >= kMaxSessions) return;
  SignalSafeLock::Guard guard(lock_);
  sessions_[handle].stale = true;
}

void Sessions::CloseSlot(Session& s) {
  // Closing the last descriptor of the pool description drops its OFD lock.
  owned_->Close(&s.pool_fd);
  owned_->Close(&s.stamps_fd);
#ifdef WALFS_TEST_FACILITIES
  owned_->Close(&s.image_fd);
#endif
  s.dev = 0;
  s.facts = SessionFacts{};
  s.refs = 0;
  s.shared = false;
  s.stale = false;
}

void Sessions::ForkParent() {
  // The child closed its copies of the idle sessions; the active ones it shares.
  for (Session& s : sessions_) {
    if (s.refs > 0) s.shared = true;
  }
  lock_.ForkParent();
}

void Sessions::ForkChild() {
  for (Session& s : sessions_) {
    if (s.refs > 0) s.shared = true;
  }
  lock_.ForkChild();
  CloseIdle();
}

void Sessions::CloseIdle() {
  SignalSafeLock::Guard guard(lock_);
  for (Session& s : sessions_) {
    if (IsIdle(s)) CloseSlot(s);
  }
}

int Sessions::open_count() {
  SignalSafeLock::Guard guard(lock_);
  int n = 0;
  for (const Session& s : sessions_) n += s.refs > 0;
  return n;
}

int Sessions::idle_count() {
  SignalSafeLock::Guard guard(lock_);
  int n = 0;
  for (const Session& s : sessions_) n += IsIdle(s);
  return n;
}

}  // namespace walfs::direct
