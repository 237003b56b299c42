// Server state shared by the FUSE callbacks.
#include "fs/server.h"

#include <unistd.h>

#include <utility>

#include "fs/errors.h"
#include "fs/status_json.h"

namespace walfs::fs {

const char* OpClassName(OpClass op) {
  switch (op) {
    case OpClass::kWrite: return "write";
    case OpClass::kRead: return "read";
    case OpClass::kFsync: return "fsync";
    case OpClass::kCreate: return "create";
    case OpClass::kRename: return "rename";
    case OpClass::kUnlink: return "unlink";
    case OpClass::kOpen: return "open";
    case OpClass::kOther: return "other";
  }
  return "unknown";
}

Server::Server(core::WalDirectory& dir, ServerConfig config)
    : dir_(dir),
      config_(std::move(config)),
      fsync_shortcut_(dir.mode() == core::DurabilityMode::kPmem && !config_.strict),
      read_leases_(config_.lease_stamps) {}

std::string Server::StatusJson() const {
  DaemonStatus s;
  s.pool = config_.pool;
  s.mountpoint = config_.mountpoint;
  s.pid = getpid();
  s.mode = dir_.mode();
  s.region = std::string(dir_.region().kind());
  s.strict = config_.strict;
  s.fsync_shortcut = fsync_shortcut_;
  s.fsyncdir_shortcut = fsyncdir_shortcut();
  s.flush_shortcut = flush_shortcut();
  s.opendir_shortcut = opendir_shortcut.load(std::memory_order_relaxed);
  s.read_only = config_.read_only;
  s.threads = config_.threads;
  s.segment_size = dir_.superblock().segment_size;
  s.stats = dir_.Statfs();
  s.counters = dir_.counters();
  s.fuse_fsync = fuse_fsync.load(std::memory_order_relaxed);
  s.fuse_fsyncdir = fuse_fsyncdir.load(std::memory_order_relaxed);
  s.fuse_flush = fuse_flush.load(std::memory_order_relaxed);
  s.leases_refused = leases_refused.load(std::memory_order_relaxed);
  s.read_leases_granted = read_leases_.granted();
  s.read_leases_released = read_leases_.released();
  s.read_leases_revoked = read_leases_.revoked();
  s.direct_access = config_.direct_access.available();
  s.direct_reads = config_.direct_access.reads_available();
  s.direct_access_reason = config_.direct_access.off_reason;
  s.direct_durability = DurabilityName(config_.direct_access.durability);
  s.sessions_granted = sessions_granted.load(std::memory_order_relaxed);
  s.sessions_refused = sessions_refused.load(std::memory_order_relaxed);
  s.uptime_seconds = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                       started_)
          .count());
  if (absl::Status health = dir_.region().health(); !health.ok()) {
    s.persist_error = health.ToString();
  }
  const ReplyErrorCounts errors = GetReplyErrorCounts();
  s.enospc_errors = errors.enospc;
  s.usage_warning_level = static_cast<uint64_t>(usage_watch_.level());
  s.eio_errors = errors.eio;
  for (int i = 0; i < kOpClasses; ++i) {
    s.latency.push_back({OpClassName(static_cast<OpClass>(i)), latency_[i].snapshot()});
  }
  return fs::StatusJson(s);
}

}  // namespace walfs::fs
