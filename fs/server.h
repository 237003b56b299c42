// Server: what every FUSE callback shares (the session's userdata).
//
// Thread safety: the WalDirectory is safe for concurrent calls; the counters here are
// atomics; everything else is set before the session starts and read-only afterwards.
#ifndef WALFS_FS_SERVER_H_
#define WALFS_FS_SERVER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "core/wal_directory.h"
#include "fs/lease_stamps.h"
#include "fs/read_leases.h"
#include "fs/options.h"
#include "fs/session.h"
#include "fs/session_nodes.h"
#include "fs/usage_watch.h"
#include "util/latency_histogram.h"

struct fuse_session;

namespace walfs::fs {

struct ServerConfig {
  std::string pool;        // for the status document
  std::string mountpoint;  // for the status document
  bool strict = false;     // durability=strict
  bool read_only = false;
  unsigned threads = 1;
  // What the kernel is told (the mount options of the same names).
  unsigned max_write = kMaxWriteLimit;
  double entry_timeout = kDefaultCacheTimeout;  // also for negative entries
  double attr_timeout = kDefaultCacheTimeout;
  // Benchmark experiments (Experiments in fs/options.h); false in every deployment.
  bool page_cache = false;    // open files without direct_io
  bool ignore_dsync = false;  // treat O_DSYNC/O_SYNC writes as plain writes
  // Direct access (fs/lease_protocol.h): whether it is offered and how durable it is.
  DirectAccess direct_access;
  // The pool file's owner: with root, the only caller given a session or a lease (L5).
  uid_t pool_owner = 0;
  // Revocation words of leased handles; null exactly when direct access is off.
  // Outlives the server.
  LeaseStamps* lease_stamps = nullptr;
};

// What the latency histograms group FUSE requests by (status "latency").
enum class OpClass : int {
  kWrite,   // WRITE
  kRead,    // READ
  kFsync,   // FSYNC, FSYNCDIR, FLUSH
  kCreate,  // CREATE, MKNOD, MKDIR, SYMLINK, LINK
  kRename,  // RENAME
  kUnlink,  // UNLINK, RMDIR
  kOpen,    // OPEN, RELEASE, the session and lease ioctls
  kOther,   // LOOKUP, GETATTR, SETATTR, READDIR, STATFS, FALLOCATE, xattrs, ...
};
inline constexpr int kOpClasses = 8;
const char* OpClassName(OpClass op);

class Server {
 public:
  // `dir` must outlive the server.
  Server(core::WalDirectory& dir, ServerConfig config);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  core::WalDirectory& dir() const { return dir_; }

  // True when FSYNC is answered ENOSYS: on PMEM every write is durable before its reply
  // (core/data_path.h), so an fsync has nothing left to do, and ENOSYS makes the kernel
  // stop sending it for the rest of the connection. Never in msync mode, where Fsync is
  // what makes writes durable.
  bool fsync_shortcut() const { return fsync_shortcut_; }
  // True when FSYNCDIR is answered ENOSYS. In both modes every namespace change is
  // committed durably (a drain on PMEM, one msync of the journal otherwise) before its
  // reply, so a directory fsync has nothing to do; PostgreSQL makes one after every
  // segment rename and status-file change. Only durability=strict keeps the round trip.
  bool fsyncdir_shortcut() const { return !config_.strict; }
  // True when FLUSH (sent at every close) is answered ENOSYS: close promises no
  // durability in either mode, so only durability=strict keeps the round trip, and a
  // daemon that grants leases, for which FLUSH is how a close revokes a client's use of
  // the lease (fs/lease_stamps.h). ENOSYS is remembered by the kernel for the whole
  // connection, so leasing needs every FLUSH answered.
  bool flush_shortcut() const { return !config_.strict && config_.lease_stamps == nullptr; }
  LeaseStamps* lease_stamps() const { return config_.lease_stamps; }
  // Read leases by inode, and the order of their grants against size changes.
  ReadLeases& read_leases() { return read_leases_; }

  const ServerConfig& config() const { return config_; }

  // The virtual socket nodes of sessions (fs/session_nodes.h).
  SessionNodes& session_nodes() { return session_nodes_; }
  // Sends session hellos; null when direct access is off. Set once, before the session
  // starts, and outlives it (fs/session.h).
  SessionSender* session_sender() const { return session_sender_; }
  void set_session_sender(SessionSender* sender) { session_sender_ = sender; }

  // The session, for notifications to the kernel; set once, before it starts.
  fuse_session* session() const { return session_; }
  void set_session(fuse_session* session) { session_ = session; }

  // The status document (status_json.h) as of now.
  std::string StatusJson() const;

  std::atomic<uint64_t> fuse_fsync{0};
  std::atomic<uint64_t> fuse_fsyncdir{0};
  std::atomic<uint64_t> fuse_flush{0};
  std::atomic<uint64_t> leases_refused{0};  // lease ioctls answered with an error
  std::atomic<uint64_t> sessions_granted{0};  // hellos delivered
  // Session ioctls answered with an error, and accepted ones whose hello could not be
  // delivered.
  std::atomic<uint64_t> sessions_refused{0};
  // Set at INIT when the kernel can open directories without asking (NO_OPENDIR
  // support, Linux 5.1): OPENDIR is then answered ENOSYS and neither it nor RELEASEDIR
  // is sent again. A directory handle carries no state here (readdir is cookie-based).
  std::atomic<bool> opendir_shortcut{false};

  UsageWatch& usage_watch() { return usage_watch_; }

  // Service time of every request (callback entry to reply), by class.
  util::LatencyHistogram& latency(OpClass op) { return latency_[static_cast<int>(op)]; }
  const util::LatencyHistogram& latency(OpClass op) const {
    return latency_[static_cast<int>(op)];
  }

 private:
  core::WalDirectory& dir_;
  const ServerConfig config_;
  const bool fsync_shortcut_;
  fuse_session* session_ = nullptr;
  SessionSender* session_sender_ = nullptr;
  SessionNodes session_nodes_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::array<util::LatencyHistogram, kOpClasses> latency_;
  UsageWatch usage_watch_;
  ReadLeases read_leases_;
};

// Records the service time of one request into its class's histogram when it goes out
// of scope (after the reply). Holds the server, not the request: a request is freed by
// its reply.
class OpTimer {
 public:
  OpTimer(Server& server, OpClass op)
      : histogram_(server.latency(op)), start_(std::chrono::steady_clock::now()) {}
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;
  ~OpTimer() {
    const auto elapsed = std::chrono::steady_clock::now() - start_;
    histogram_.Record(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
  }

 private:
  util::LatencyHistogram& histogram_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace walfs::fs

#endif  // WALFS_FS_SERVER_H_
