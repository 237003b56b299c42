// Server state shared by the FUSE callbacks.
#include "fs/server.h"

#include <unistd.h>

#include <utility>

#include "fs/status_json.h"

namespace walfs::fs {

Server::Server(core::WalDirectory& dir, ServerConfig config)
    : dir_(dir),
      config_(std::move(config)),
      fsync_shortcut_(dir.mode() == core::DurabilityMode::kPmem && !config_.strict) {}

std::string Server::StatusJson() const {
  DaemonStatus s;
  s.pool = config_.pool;
  s.mountpoint = config_.mountpoint;
  s.pid = getpid();
  s.mode = dir_.mode();
  s.region = std::string(dir_.region().kind());
  s.strict = config_.strict;
  s.fsync_shortcut = fsync_shortcut_;
  s.read_only = config_.read_only;
  s.threads = config_.threads;
  s.segment_size = dir_.superblock().segment_size;
  s.stats = dir_.Statfs();
  s.counters = dir_.counters();
  s.fuse_fsync = fuse_fsync.load(std::memory_order_relaxed);
  s.fuse_fsyncdir = fuse_fsyncdir.load(std::memory_order_relaxed);
  s.fuse_flush = fuse_flush.load(std::memory_order_relaxed);
  s.leases_refused = leases_refused.load(std::memory_order_relaxed);
  return fs::StatusJson(s);
}

}  // namespace walfs::fs
