// Direct-access sessions, the daemon's side of step 1 of fs/lease_protocol.h: who may
// have one, whether this pool offers them at all, and the hello sent to a client.
//
// The decisions are small pure functions (unit-tested without a mount); SessionSender is
// the one piece with a thread and descriptors. operations_direct.cc only decodes
// requests, asks these, and replies.
#ifndef WALFS_FS_SESSION_H_
#define WALFS_FS_SESSION_H_

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "fs/lease_protocol.h"

namespace walfs::fs {

// L5: only the pool's owner or root gets a session or a lease; `caller` is the uid FUSE
// reports for the request (or SO_PEERCRED's on the socket).
inline bool MayUseDirectAccess(uid_t caller, uid_t pool_owner) {
  return caller == 0 || caller == pool_owner;
}

// Why a non-temporal copy + drain into the pool is durable (L7), from how the daemon
// mapped it: a device-DAX character device (kDurabilityDevice); else, with libpmem told
// so by PMEM_IS_PMEM_FORCE=1 (`force_env`, the variable's value or null),
// kDurabilityForced; else a mapping libpmem found to be pmem (a file on fsdax, which it
// maps with MAP_SYNC) is kDurabilityMapSync. 0 when stores need msync (not durable).
uint32_t SessionDurability(bool device, bool region_is_pmem, const char* force_env);
// "device", "map_sync", "forced", "reads_only", or "none" for 0: for the status document.
const char* DurabilityName(uint32_t durability);

// Whether the daemon offers direct access, and if not, why (status "direct_access").
// Where stores cannot be made durable by a client (msync mode) it may still offer reads:
// sessions with kDurabilityReadsOnly and read leases only (status "direct_reads").
struct DirectAccess {
  uint32_t durability = 0;  // kDurability*, 0 when off
  std::string off_reason;   // empty when available
  bool reads_only = false;  // off for writes, read leases granted (msync mode)
  bool available() const { return off_reason.empty(); }
  bool reads_available() const { return available() || reads_only; }
};
struct DirectAccessInputs {
  bool read_only = false;
  bool pmem_mode = false;    // WalDirectory::mode() == kPmem
  uint32_t durability = 0;   // SessionDurability
  bool page_cache = false;   // the page_cache benchmark experiment
  std::string stamps_error;  // empty when the stamps memfd was made
};
DirectAccess DecideDirectAccess(const DirectAccessInputs& in);

// Checks a SessionRequest (untrusted): 0 and the node's name in *name, or EINVAL for a
// bad magic, version or name (not NUL-terminated, not a session node name).
int CheckSessionRequest(const lease::SessionRequest& request, std::string* name);

// The hello for `durability`, `flags` (kHelloFlag*), the superblock's `uuid` and the
// stamps memfd's word count and id (LeaseStamps::id); reserved fields zero.
lease::SessionHello MakeHello(uint32_t durability, uint32_t flags, const uint8_t uuid[16],
                              uint64_t stamp_slots, uint64_t stamps_id);

// Connects to a client's session socket and sends it the hello with its descriptors, on
// a thread of its own: resolving <mountpoint>/<name> goes through the mount, so the
// daemon's FUSE workers must be free to answer the LOOKUP it may cause (a worker doing
// it itself would deadlock with threads=1).
//
// Descriptors sent, in this order (SCM_RIGHTS, one message with the hello):
//   [0] the pool, opened anew O_RDWR|O_CLOEXEC through /proc/self/fd/<pool_fd> for each
//       client, so that its OFD read lock (L6) is on its own open file description;
//   [1] the stamps memfd (sealed, fs/lease_stamps.h);
//   [2] with kHelloFlagImage in hello.flags only: image_fd (power-cut simulation, test
//       builds).
// The sender never keeps a descriptor on the mount (an O_PATH of the mount point exists
// only for a connect whose path would not fit sun_path): a held one would make umount
// fail with EBUSY. A connect or send waits at most kTimeout.
//
// Thread-safe. Must be destroyed after the FUSE session is unmounted: a connect still
// resolving the path waits for the daemon's own answer until the connection goes.
class SessionSender {
 public:
  static constexpr int kTimeoutMs = 2000;
  static constexpr size_t kMaxPending = 64;

  struct Config {
    std::string mountpoint;
    int pool_fd = -1;   // the daemon's descriptor of the pool (not owned)
    int stamps_fd = -1;  // not owned
    int image_fd = -1;   // not owned; -1 unless kHelloFlagImage
    lease::SessionHello hello{};
    std::atomic<uint64_t>* granted = nullptr;  // counted per hello sent
    std::atomic<uint64_t>* refused = nullptr;  // counted per failure after the reply
  };

  explicit SessionSender(Config config);
  ~SessionSender();
  SessionSender(const SessionSender&) = delete;
  SessionSender& operator=(const SessionSender&) = delete;

  // Queues a hello for the socket `name` (validated) whose listener must have uid `uid`.
  // False when kMaxPending are already waiting (the caller refuses the ioctl).
  bool Enqueue(std::string name, uid_t uid);

  // One delivery, synchronously: 0 or an errno, with the reason in *why. For the thread
  // and for tests (which call it on a socket directory that is not a mount).
  static int Deliver(const Config& config, const std::string& name, uid_t uid,
                     std::string* why);

 private:
  void Run();

  const Config config_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::string, uid_t>> pending_;  // guarded by mu_
  bool stop_ = false;                                   // guarded by mu_
  std::thread thread_;
};

}  // namespace walfs::fs

#endif  // WALFS_FS_SESSION_H_
