// Sessions: the pool and the stamps, received as descriptors from the daemon itself (L1,
// L8), once per process and walfs mount (fs/lease_protocol.h, step 1).
//
// The exchange (ExchangeSession): the client binds a listening unix socket at
// <mount root>/<lease::kSessionPrefix><token> (token unique per attempt: pid, a counter
// and random bytes), calls ioctl(kIoctlSession) naming it on the descriptor being
// leased, waits (bounded) for the daemon's connection, accepts it, refuses a peer that
// is neither this user nor root before receiving anything, and receives one SessionHello
// with its descriptors; it then closes both sockets and unlinks the name, whatever
// happened. SessionFromHello checks what came: the hello's fields, descriptor [0] a
// regular file or character device whose own superblocks (read here, pool_area.h) carry
// the hello's uuid, descriptor [1] a sealed memfd of exactly stamp_slots words; and it
// takes the OFD read lock on the pool description (L6). Any failure means no session:
// every descriptor received is closed and the lease's calls go to the kernel.
//
// Sessions caches one session per mount (keyed by the mount's st_dev). A session is
// active while lease mappings hold references to it, and holds the OFD read lock then
// (L6). At the last Release it becomes idle: the lock is dropped (F_UNLCK), so a process
// that holds no lease never keeps a pool from its daemon, mkfs --force or fsck --repair,
// but the descriptors are kept, so the next lease on that mount (the next segment a
// reader opens) takes the lock again instead of a new exchange. Whether an idle session
// is still the current daemon's is not known until a lease reply names its stamps
// (stamps_id): a reply that names others marks it stale (Discard), and the caller makes
// a new one. A session whose pool description a forked child shares is never unlocked
// (F_UNLCK would unlock it for the child's mappings too): its last Release closes it,
// and the lock goes with the last descriptor of the description. A child closes the
// idle sessions it inherits at once, so the parent's stay its own.
// The session's descriptors are library-owned (owned_fds.h): the application cannot close
// or dup2 over them. They are close-on-exec.
//
// The seam: the three things that touch the daemon (the mount root lookup, the session
// ioctl and the peer-credential check) come as SessionSources, so tests drive the whole
// exchange with a real listening socket in a temporary directory and a "daemon" thread.
#ifndef WALFS_FS_DIRECT_SESSION_H_
#define WALFS_FS_DIRECT_SESSION_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "fs/direct/owned_fds.h"
#include "fs/direct/pool_area.h"
#include "fs/direct/signal_safe_lock.h"
#include "fs/lease_protocol.h"

namespace walfs::direct {

// Descriptors a hello carries: the pool and the stamps, and in a test build (with
// kHelloFlagImage) the power-cut image.
#ifdef WALFS_TEST_FACILITIES
inline constexpr int kMaxHelloFds = 3;
#else
inline constexpr int kMaxHelloFds = 2;
#endif

// nullptr when `hello`, received with `descriptor_count` descriptors, is well formed,
// else why not (a static string): magic, version, a known durability, flags (only
// kHelloFlagImage, and only in a build with WALFS_TEST_FACILITIES), reserved words zero,
// stamp_slots in [1, 2^24], exactly 2 descriptors (3 with kHelloFlagImage).
const char* ValidateHello(const lease::SessionHello& hello, int descriptor_count);

// nullptr when fd is a regular file (a memfd) sealed against writes
// (F_SEAL_FUTURE_WRITE or F_SEAL_WRITE), shrinking and growing, of exactly
// stamp_slots * 8 bytes; else why not.
const char* CheckStamps(int fd, uint64_t stamp_slots);

// What one exchange received. fds[0..count) are open (close-on-exec) until handed on.
struct ReceivedHello {
  lease::SessionHello hello = {};
  int fds[kMaxHelloFds + 1] = {-1, -1, -1};
  int count = 0;
  void CloseAll();
};

// Receives one hello and its descriptors from the connected socket `conn`, waiting at
// most timeout_ms for it to arrive. 0, or -errno with *reason set and every received
// descriptor closed: a short or long message, truncated control data (MSG_CTRUNC), more
// descriptors than any hello carries. The descriptors arrive close-on-exec
// (MSG_CMSG_CLOEXEC). The hello's contents are not checked here.
int ReceiveHello(int conn, int timeout_ms, ReceivedHello* out, const char** reason);

struct SessionSources {
  // Where the walfs root of the mount with st_dev `dev` is visible to this process.
  std::optional<std::string> (*mount_root)(dev_t dev);
  // ioctl(fd, lease::kIoctlSession, request): 0 or -errno.
  int (*ioctl_session)(int fd, const lease::SessionRequest* request);
  // Whether the connected peer may serve this process: its SO_PEERCRED uid is ours
  // (geteuid) or root's.
  bool (*peer_allowed)(int conn);
  // The whole wait for the daemon's connection and hello.
  int timeout_ms;
};

// WalfsMountRoot, ioctl(2), PeerIsOwnerOrRoot, 2 seconds.
const SessionSources& ProductionSessionSources();

// SO_PEERCRED's uid of conn is geteuid() or 0.
bool PeerIsOwnerOrRoot(int conn);

// A session token's name: lease::kSessionPrefix then "<pid>.<counter>.<16 hex digits of
// getrandom>", unique per call. Fits lease::kSessionNameBytes with its NUL.
std::string NewSessionName();

// The exchange described above, with the socket bound in `root` (a directory path;
// through an O_PATH descriptor of it and /proc/self/fd/N/<name> when the path would not
// fit sun_path) and the ioctl issued on leased_fd. 0 with *out filled (not yet
// checked), or -errno with *reason set and nothing held. Not async-signal-safe.
int ExchangeSession(int leased_fd, const std::string& root, const SessionSources& sources,
                    ReceivedHello* out, const char** reason);

// What a session says about its pool: immutable while the session is referenced.
struct SessionFacts {
  PoolArea area;           // the data area and uuid, from the pool's own superblocks
  uint32_t durability = 0;  // lease::kDurability*
  uint64_t stamp_slots = 0;
  uint64_t stamps_id = 0;   // the hello's: what every lease reply of its daemon carries
};

class Sessions {
 public:
  static constexpr int kMaxSessions = 8;
  static constexpr int64_t kRetryDelayMs = 5000;

  struct Session {
    uint64_t dev = 0;  // the mount's st_dev
    SessionFacts facts;
    // Library-owned descriptors (OwnedFds cells: read them at each use, MoveAside may
    // renumber them).
    std::atomic<int> pool_fd{-1};    // O_RDWR, holds the OFD read lock
    std::atomic<int> stamps_fd{-1};  // the sealed stamps memfd
#ifdef WALFS_TEST_FACILITIES
    std::atomic<int> image_fd{-1};   // the power-cut image, or -1
#endif
    int refs = 0;         // lock_; > 0: active (locked); 0 with pool_fd >= 0: idle
    bool shared = false;  // lock_; a forked child shares the pool description
    bool stale = false;   // lock_; a reply named other stamps: closed at the last Release
  };

  constexpr explicit Sessions(OwnedFds* owned) : owned_(owned) {}
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  // A reference to the session of the walfs mount with st_dev `dev`: the active one, else
  // the idle one locked again, else one made through leased_fd (an open walfs file of
  // that mount): a handle >= 0, or -errno with *reason set (a static string). Each
  // success pairs with one Release.
  // After a failed attempt on `dev`, further attempts within kRetryDelayMs fail at once
  // with the same error, so a daemon that accepts the ioctl but never connects costs
  // one bounded wait, not one per descriptor. Not async-signal-safe (it may wait up to
  // sources.timeout_ms).
  int Acquire(int leased_fd, dev_t dev, const SessionSources& sources, const char** reason);

  // Checks `received` as described in the header and installs it as the session of
  // `dev` with one reference: a handle, or -errno with *reason set. Takes the received
  // descriptors in every case (closed on failure, or when another thread installed a
  // session for `dev` meanwhile, whose handle is returned instead).
  int Install(dev_t dev, ReceivedHello& received, const char** reason);

  // Drops a reference; the last one makes the session idle (or closes it: shared with a
  // forked child, or stale).
  void Release(int handle);

  // The session of `handle` (the caller holds a reference) is not the current daemon's:
  // Acquire no longer returns it, and its last Release closes it.
  void Discard(int handle);

  // The session behind a handle the caller holds a reference on.
  const Session& Get(int handle) const { return sessions_[handle]; }

  // Closes every idle session (what a forked child does with those it inherits).
  void CloseIdle();

  // Number of active sessions (holding the pool lock), and of idle ones; for tests.
  int open_count();
  int idle_count();

  void ForkPrepare() { lock_.ForkPrepare(); }
  void ForkParent();
  void ForkChild();

 private:
  struct Failure {
    uint64_t dev = 0;
    int64_t until_ms = 0;  // CLOCK_MONOTONIC; 0: unused
    int error = 0;
  };

  // No reference, descriptors kept (unlocked). lock_ held.
  static bool IsIdle(const Session& s) {
    return s.refs == 0 && s.pool_fd.load(std::memory_order_relaxed) >= 0;
  }

  // Closes s's descriptors (dropping the lock with the description's last one) and
  // empties the slot. lock_ held.
  void CloseSlot(Session& s);

  OwnedFds* const owned_;
  SignalSafeLock lock_;
  Session sessions_[kMaxSessions];
  Failure failures_[kMaxSessions];  // lock_; recent failed attempts, by device
};

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_SESSION_H_
