// Rendering of the status document (format documented in status_json.h).
#include "fs/status_json.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>


namespace walfs::fs {
namespace {

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

class JsonObject {
 public:
  void Raw(std::string_view key, std::string_view value) {
    if (!body_.empty()) body_ += ',';
    body_ += Quote(key);
    body_ += ':';
    body_ += value;
  }
  void Str(std::string_view key, std::string_view value) { Raw(key, Quote(value)); }
  void Num(std::string_view key, uint64_t value) { Raw(key, std::to_string(value)); }
  void Bool(std::string_view key, bool value) { Raw(key, value ? "true" : "false"); }
  std::string Done() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

}  // namespace

std::string StatusJson(const DaemonStatus& s) {
  JsonObject j;
  j.Num("version", 1);
  j.Str("pool", s.pool);
  j.Str("mountpoint", s.mountpoint);
  j.Num("pid", static_cast<uint64_t>(s.pid));
  j.Str("mode", core::DurabilityModeName(s.mode));
  j.Str("region", s.region);
  j.Str("durability", s.strict ? "strict" : "auto");
  j.Bool("fsync_shortcut", s.fsync_shortcut);
  j.Bool("fsyncdir_shortcut", s.fsyncdir_shortcut);
  j.Bool("flush_shortcut", s.flush_shortcut);
  j.Bool("opendir_shortcut", s.opendir_shortcut);
  j.Bool("read_only", s.read_only);
  j.Num("threads", s.threads);
  j.Num("segment_size", s.segment_size);
  j.Num("block_size", s.stats.block_size);
  j.Num("total_blocks", s.stats.total_blocks);
  j.Num("free_blocks", s.stats.free_blocks);
  j.Num("reserved_blocks", s.stats.reserved_blocks);
  j.Num("total_inodes", s.stats.total_inodes);
  j.Num("free_inodes", s.stats.free_inodes);
  const core::Counters& c = s.counters;
  j.Num("writes", c.writes);
  j.Num("write_bytes", c.write_bytes);
  j.Num("reads", c.reads);
  j.Num("read_bytes", c.read_bytes);
  j.Num("fsyncs", c.fsyncs);
  j.Num("fsyncdirs", c.fsyncdirs);
  j.Num("sync_writes", c.sync_writes);
  j.Num("journal_commits", c.journal_commits);
  j.Num("journal_replays", c.journal_replays);
  j.Num("orphans_reclaimed", c.orphans_reclaimed);
  j.Num("zeroed_blocks", c.zeroed_blocks);
  j.Num("fuse_fsync", s.fuse_fsync);
  j.Num("fuse_fsyncdir", s.fuse_fsyncdir);
  j.Num("fuse_flush", s.fuse_flush);
  j.Num("leases_granted", c.leases_granted);
  j.Num("leases_released", c.leases_released);
  j.Num("leases_active", c.leases_active);
  j.Num("read_leases_granted", s.read_leases_granted);
  j.Num("read_leases_released", s.read_leases_released);
  j.Num("read_leases_active",
        s.read_leases_granted - std::min(s.read_leases_released, s.read_leases_granted));
  j.Num("read_leases_revoked", s.read_leases_revoked);
  j.Num("leases_refused", s.leases_refused);
  j.Bool("direct_access", s.direct_access);
  j.Bool("direct_reads", s.direct_reads);
  j.Str("direct_access_off_reason", s.direct_access_reason);
  j.Str("direct_access_durability", s.direct_durability);
  j.Num("sessions_granted", s.sessions_granted);
  j.Num("sessions_refused", s.sessions_refused);
  j.Str("software_version", WALFS_VERSION);
  j.Num("uptime_seconds", s.uptime_seconds);
  j.Str("persist_error", s.persist_error);
  j.Num("enospc_errors", s.enospc_errors);
  j.Num("eio_errors", s.eio_errors);
  j.Num("usage_warning_level", s.usage_warning_level);
  JsonObject latency;
  for (const auto& [name, h] : s.latency) {
    JsonObject op;
    op.Num("count", h.count);
    op.Num("sum_ns", h.sum_nanos);
    std::string buckets = "[";
    for (size_t i = 0; i < h.buckets.size(); ++i) {
      if (i > 0) buckets += ',';
      buckets += std::to_string(h.buckets[i]);
    }
    op.Raw("buckets", buckets + "]");
    latency.Raw(name, op.Done());
  }
  j.Raw("latency", latency.Done());
  return j.Done();
}

}  // namespace walfs::fs
