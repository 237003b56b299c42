// Rendering of the daemon's status document for people and for Prometheus.
#include "tools/status_view.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "tools/human_bytes.h"
#include "util/latency_histogram.h"

namespace walfs::tools {
namespace {

using util::LatencyHistogram;

std::optional<uint64_t> Num(const StatusDoc& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}

std::string Str(const StatusDoc& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<bool> Bool(const StatusDoc& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

// A request class's histogram, if the document's entry is well formed.
std::optional<LatencyHistogram::Snapshot> Histogram(const StatusDoc& op) {
  if (!op.is_object()) return std::nullopt;
  auto count = Num(op, "count");
  auto sum = Num(op, "sum_ns");
  auto buckets = op.find("buckets");
  if (!count || !sum || buckets == op.end() || !buckets->is_array() ||
      buckets->size() != LatencyHistogram::kBuckets) {
    return std::nullopt;
  }
  LatencyHistogram::Snapshot s;
  s.count = *count;
  s.sum_nanos = *sum;
  for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
    const StatusDoc& b = (*buckets)[static_cast<size_t>(i)];
    if (!b.is_number_unsigned()) return std::nullopt;
    s.buckets[static_cast<size_t>(i)] = b.get<uint64_t>();
  }
  return s;
}

// ---- Prometheus ----------------------------------------------------------------------

std::string Escape(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class Exposition {
 public:
  explicit Exposition(std::string labels) : labels_(std::move(labels)) {}

  // One family with one sample (skipped when the value is absent).
  void Sample(const char* name, const char* type, const char* help,
              std::optional<double> value, absl::string_view extra_labels = "") {
    if (!value) return;
    Family(name, type, help);
    Line(name, extra_labels, *value);
  }
  void Family(const char* name, const char* type, const char* help) {
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void Line(absl::string_view name, absl::string_view extra_labels, double value) {
    absl::StrAppend(&out_, name, "{", labels_, extra_labels.empty() ? "" : ",", extra_labels,
                    "} ", absl::StrFormat("%.17g", value), "\n");
  }
  std::string Done() { return std::move(out_); }

 private:
  const std::string labels_;
  std::string out_;
};

std::optional<double> D(std::optional<uint64_t> v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

std::optional<double> Times(std::optional<uint64_t> a, std::optional<uint64_t> b) {
  return a && b ? std::optional<double>(static_cast<double>(*a) * static_cast<double>(*b))
                : std::nullopt;
}

}  // namespace

std::string RenderPrometheus(const StatusDoc& doc) {
  Exposition e(absl::StrCat("mountpoint=\"", Escape(Str(doc, "mountpoint")), "\",pool=\"",
                            Escape(Str(doc, "pool")), "\""));
  e.Sample("walfs_build_info", "gauge",
           "Always 1; the labels say which walfs serves the mount and how.", 1.0,
           absl::StrCat("version=\"", Escape(Str(doc, "software_version")), "\",mode=\"",
                        Escape(Str(doc, "mode")), "\",region=\"", Escape(Str(doc, "region")),
                        "\",durability=\"", Escape(Str(doc, "durability")), "\""));
  e.Sample("walfs_uptime_seconds", "gauge", "Seconds since the daemon started serving.",
           D(Num(doc, "uptime_seconds")));
  const auto block = Num(doc, "block_size");
  const auto total = Num(doc, "total_blocks");
  const auto free = Num(doc, "free_blocks");
  e.Sample("walfs_pool_size_bytes", "gauge", "Data area of the pool.", Times(total, block));
  e.Sample("walfs_pool_free_bytes", "gauge", "Free space in the pool, as statfs reports it.",
           Times(free, block));
  e.Sample("walfs_pool_reserved_bytes", "gauge",
           "Part of the free space only WAL segments may take (statfs f_bfree - f_bavail).",
           Times(Num(doc, "reserved_blocks"), block));
  if (total && free && *total > 0 && *free <= *total) {
    e.Sample("walfs_pool_used_ratio", "gauge", "Used fraction of the pool's data area (0..1).",
             static_cast<double>(*total - *free) / static_cast<double>(*total));
  }
  e.Sample("walfs_pool_usage_warning_level", "gauge",
           "Highest usage mark crossed (0, 80, 90 or 95 percent), as the daemon logged it.",
           D(Num(doc, "usage_warning_level")));
  e.Sample("walfs_pool_inodes", "gauge", "Inode slots in the pool.", D(Num(doc, "total_inodes")));
  e.Sample("walfs_pool_free_inodes", "gauge", "Free inode slots.", D(Num(doc, "free_inodes")));
  e.Sample("walfs_segment_size_bytes", "gauge", "Extent size given to WAL segments.",
           D(Num(doc, "segment_size")));
  if (auto ro = Bool(doc, "read_only")) {
    e.Sample("walfs_read_only", "gauge", "1 for a read-only mount.", *ro ? 1.0 : 0.0);
  }
  const std::string persist_error = Str(doc, "persist_error");
  if (doc.contains("persist_error")) {
    e.Sample("walfs_persist_error", "gauge",
             "1 once a persist failed: every request that promises durability is answered "
             "EIO until the daemon restarts.",
             persist_error.empty() ? 0.0 : 1.0);
  }
  struct CounterField {
    const char* key;
    const char* name;
    const char* help;
    bool in_blocks;
  };
  static constexpr CounterField kCounters[] = {
      {"writes", "walfs_writes_total", "WRITE requests served.", false},
      {"write_bytes", "walfs_written_bytes_total", "Bytes written through FUSE.", false},
      {"reads", "walfs_reads_total", "READ requests served.", false},
      {"read_bytes", "walfs_read_bytes_total", "Bytes read through FUSE.", false},
      {"fsyncs", "walfs_fsyncs_total", "File syncs performed.", false},
      {"fsyncdirs", "walfs_fsyncdirs_total", "Directory syncs performed.", false},
      {"sync_writes", "walfs_sync_writes_total", "O_DSYNC/O_SYNC writes.", false},
      {"journal_commits", "walfs_journal_commits_total", "Metadata journal commits.", false},
      {"journal_replays", "walfs_journal_replays_total",
       "Journal transactions replayed when the pool was opened.", false},
      {"orphans_reclaimed", "walfs_orphans_reclaimed_total",
       "Unlinked-but-open files whose space was reclaimed.", false},
      {"zeroed_blocks", "walfs_zeroed_bytes_total", "Bytes zeroed when space was freed.", true},
      {"fuse_fsync", "walfs_fuse_fsync_requests_total",
       "FSYNC requests received (ENOSYS answers included).", false},
      {"fuse_fsyncdir", "walfs_fuse_fsyncdir_requests_total", "FSYNCDIR requests received.",
       false},
      {"fuse_flush", "walfs_fuse_flush_requests_total", "FLUSH requests received.", false},
      {"leases_granted", "walfs_leases_granted_total", "Direct-access write leases handed out.",
       false},
      {"leases_released", "walfs_leases_released_total", "Direct-access write leases ended.",
       false},
      {"read_leases_granted", "walfs_read_leases_granted_total",
       "Direct-access read leases handed out.", false},
      {"read_leases_released", "walfs_read_leases_released_total",
       "Direct-access read leases ended.", false},
      {"read_leases_revoked", "walfs_read_leases_revoked_total",
       "Read leases revoked by a truncate (their holders then read through FUSE).", false},
      {"leases_refused", "walfs_leases_refused_total",
       "Lease requests refused (the client then writes through FUSE).", false},
      {"sessions_granted", "walfs_sessions_granted_total",
       "Direct-access sessions set up (hello delivered).", false},
      {"sessions_refused", "walfs_sessions_refused_total",
       "Direct-access session requests refused or not delivered.", false},
      {"enospc_errors", "walfs_enospc_errors_total", "Requests answered ENOSPC.", false},
      {"eio_errors", "walfs_eio_errors_total", "Requests answered EIO.", false},
  };
  for (const CounterField& c : kCounters) {
    std::optional<uint64_t> v = Num(doc, c.key);
    e.Sample(c.name, "counter", c.help, c.in_blocks ? Times(v, block) : D(v));
  }
  e.Sample("walfs_leases_active", "gauge", "Direct-access write leases held now.",
           D(Num(doc, "leases_active")));
  e.Sample("walfs_read_leases_active", "gauge", "Direct-access read leases held now.",
           D(Num(doc, "read_leases_active")));
  if (auto direct = Bool(doc, "direct_access")) {
    // The reason stays out of the labels (free text); walfsctl status shows it.
    e.Sample("walfs_direct_access", "gauge",
             "1 when the daemon grants direct-access sessions and leases; the label says "
             "why a client's copy + drain is durable.",
             *direct ? 1.0 : 0.0,
             absl::StrCat("durability=\"", Escape(Str(doc, "direct_access_durability")), "\""));
  }
  if (auto reads = Bool(doc, "direct_reads")) {
    e.Sample("walfs_direct_reads", "gauge",
             "1 when the daemon grants direct-access sessions and read leases (with "
             "walfs_direct_access, or alone in msync mode).",
             *reads ? 1.0 : 0.0);
  }

  auto latency = doc.find("latency");
  if (latency != doc.end() && latency->is_object()) {
    bool family = false;
    for (const auto& [op, h] : latency->items()) {
      std::optional<LatencyHistogram::Snapshot> s = Histogram(h);
      if (!s) continue;
      if (!family) {
        e.Family("walfs_request_duration_seconds", "histogram",
                 "Service time of FUSE requests by class, from callback entry to reply.");
        family = true;
      }
      const std::string op_label = absl::StrCat("op=\"", Escape(op), "\"");
      uint64_t cumulative = 0;
      for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
        cumulative += s->buckets[static_cast<size_t>(i)];
        const uint64_t bound = LatencyHistogram::UpperBoundMicros(i);
        const std::string le =
            bound == 0 ? "+Inf" : absl::StrFormat("%g", static_cast<double>(bound) / 1e6);
        e.Line("walfs_request_duration_seconds_bucket",
               absl::StrCat(op_label, ",le=\"", le, "\""), static_cast<double>(cumulative));
      }
      e.Line("walfs_request_duration_seconds_sum", op_label,
             static_cast<double>(s->sum_nanos) / 1e9);
      // From the buckets, so that _count equals the +Inf bucket as Prometheus requires.
      e.Line("walfs_request_duration_seconds_count", op_label, static_cast<double>(cumulative));
    }
  }
  return e.Done();
}

// ---- people ----------------------------------------------------------------------------

namespace {

std::string Micros(uint64_t us) {
  if (us == UINT64_MAX) return "> 1 s";
  if (us < 1000) return absl::StrCat(us, " us");
  if (us < 1000000) return absl::StrFormat("%.1f ms", static_cast<double>(us) / 1e3);
  return absl::StrFormat("%.2f s", static_cast<double>(us) / 1e6);
}

std::string Duration(uint64_t seconds) {
  if (seconds < 60) return absl::StrCat(seconds, "s");
  if (seconds < 3600) return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  if (seconds < 86400) return absl::StrFormat("%dh%02dm", seconds / 3600, (seconds / 60) % 60);
  return absl::StrFormat("%dd%02dh", seconds / 86400, (seconds / 3600) % 24);
}

std::string OrUnknown(std::optional<uint64_t> v) { return v ? absl::StrCat(*v) : "?"; }

std::string Line(absl::string_view label, absl::string_view value) {
  return absl::StrFormat("  %-16s %s\n", absl::StrCat(label, ":"), value);
}

// The keys RenderHuman already shows; anything else is printed raw at the end.
const std::set<std::string, std::less<>>& ShownKeys() {
  static const std::set<std::string, std::less<>> kKeys = {
      "version", "pool", "mountpoint", "pid", "mode", "region", "durability",
      "fsync_shortcut", "fsyncdir_shortcut", "flush_shortcut", "read_only", "threads", "segment_size", "block_size",
      "total_blocks", "free_blocks", "reserved_blocks", "total_inodes", "free_inodes", "writes", "write_bytes",
      "reads", "read_bytes", "fsyncs", "fsyncdirs", "sync_writes", "journal_commits",
      "journal_replays", "orphans_reclaimed", "zeroed_blocks", "fuse_fsync", "fuse_fsyncdir",
      "fuse_flush", "leases_granted", "leases_released", "leases_active", "leases_refused",
      "read_leases_granted", "read_leases_released", "read_leases_active", "read_leases_revoked",
      "direct_access", "direct_reads", "direct_access_off_reason", "direct_access_durability",
      "sessions_granted", "sessions_refused",
      "software_version", "uptime_seconds", "persist_error", "enospc_errors", "eio_errors",
      "usage_warning_level", "latency"};
  return kKeys;
}

}  // namespace

std::string RenderHuman(const StatusDoc& doc, const std::string& mountpoint) {
  std::string out = absl::StrCat("walfs ", Str(doc, "software_version"), " at ", mountpoint,
                                 "\n");
  absl::StrAppend(&out, Line("pool", Str(doc, "pool")));
  const auto uptime = Num(doc, "uptime_seconds");
  absl::StrAppend(&out, Line("daemon", absl::StrCat("pid ", OrUnknown(Num(doc, "pid")), ", up ",
                                                     uptime ? Duration(*uptime) : "?", ", ",
                                                     OrUnknown(Num(doc, "threads")),
                                                     " threads")));
  const auto ro = Bool(doc, "read_only");
  const auto shortcut = Bool(doc, "fsync_shortcut");
  const auto dir_shortcut = Bool(doc, "fsyncdir_shortcut");
  absl::StrAppend(&out, Line("mode", absl::StrCat(Str(doc, "mode"), " (region ",
                                                   Str(doc, "region"), ", durability ",
                                                   Str(doc, "durability"),
                                                   shortcut && *shortcut ? ", fsync free"
                                                   : dir_shortcut && *dir_shortcut
                                                       ? ", directory fsync free"
                                                       : "",
                                                   ro && *ro ? ", read-only" : "", ")")));
  const std::string persist_error = Str(doc, "persist_error");
  absl::StrAppend(&out,
                  Line("health", persist_error.empty()
                                     ? std::string("ok")
                                     : absl::StrCat("PERSIST ERROR, durable requests fail "
                                                    "with EIO until restart: ",
                                                    persist_error)));
  const auto block = Num(doc, "block_size");
  const auto total = Num(doc, "total_blocks");
  const auto free = Num(doc, "free_blocks");
  if (block && total && free && *free <= *total && *total > 0) {
    const uint64_t size = *total * *block, avail = *free * *block;
    const auto mark = Num(doc, "usage_warning_level");
    const auto reserved = Num(doc, "reserved_blocks");
    absl::StrAppend(&out,
                    Line("space", absl::StrFormat("%s used of %s (%.1f%%), %s free%s%s",
                                                  HumanBytes(size - avail), HumanBytes(size),
                                                  100.0 * static_cast<double>(size - avail) /
                                                      static_cast<double>(size),
                                                  HumanBytes(avail),
                                                  reserved && *reserved > 0
                                                      ? absl::StrCat(
                                                            " (", HumanBytes(*reserved * *block),
                                                            " of it reserved for WAL segments)")
                                                      : "",
                                                  mark && *mark > 0
                                                      ? absl::StrCat(", PAST THE ", *mark,
                                                                     "% MARK")
                                                      : "")));
  }
  const auto inodes = Num(doc, "total_inodes");
  const auto free_inodes = Num(doc, "free_inodes");
  if (inodes && free_inodes && *free_inodes <= *inodes) {
    absl::StrAppend(&out, Line("files", absl::StrCat(*inodes - *free_inodes, " of ", *inodes,
                                                      " inodes used")));
  }
  const auto wb = Num(doc, "write_bytes");
  const auto rb = Num(doc, "read_bytes");
  absl::StrAppend(
      &out, Line("through FUSE",
                 absl::StrCat(OrUnknown(Num(doc, "writes")), " writes (",
                              wb ? HumanBytes(*wb) : "?", "), ", OrUnknown(Num(doc, "reads")),
                              " reads (", rb ? HumanBytes(*rb) : "?", "), ",
                              OrUnknown(Num(doc, "fsyncs")), " fsyncs, ",
                              OrUnknown(Num(doc, "sync_writes")), " O_DSYNC writes")));
  absl::StrAppend(&out, Line("journal", absl::StrCat(OrUnknown(Num(doc, "journal_commits")),
                                                      " commits, ",
                                                      OrUnknown(Num(doc, "journal_replays")),
                                                      " replayed at open")));
  const auto direct = Bool(doc, "direct_access");
  std::string access = "?";
  const auto reads = Bool(doc, "direct_reads");
  if (direct && *direct) {
    access = absl::StrCat("available (durability ", Str(doc, "direct_access_durability"), ")");
  } else if (direct && reads && *reads) {
    access = absl::StrCat("reads only (", Str(doc, "direct_access_off_reason"), ")");
  } else if (direct) {
    access = absl::StrCat("off (", Str(doc, "direct_access_off_reason"), ")");
  }
  absl::StrAppend(&out,
                  Line("direct access",
                       absl::StrCat(access, "; sessions ", OrUnknown(Num(doc, "sessions_granted")),
                                    " granted, ", OrUnknown(Num(doc, "sessions_refused")),
                                    " refused; ", OrUnknown(Num(doc, "leases_active")),
                                    " write leases held (", OrUnknown(Num(doc, "leases_granted")),
                                    " granted), ", OrUnknown(Num(doc, "read_leases_active")),
                                    " read leases held (",
                                    OrUnknown(Num(doc, "read_leases_granted")), " granted), ",
                                    OrUnknown(Num(doc, "leases_refused")), " refused")));
  absl::StrAppend(&out, Line("errors", absl::StrCat(OrUnknown(Num(doc, "enospc_errors")),
                                                     " ENOSPC, ",
                                                     OrUnknown(Num(doc, "eio_errors")),
                                                     " EIO")));
  auto latency = doc.find("latency");
  if (latency != doc.end() && latency->is_object()) {
    std::string summary;
    for (const char* op : {"write", "fsync", "create", "rename", "unlink", "read"}) {
      auto it = latency->find(op);
      if (it == latency->end()) continue;
      std::optional<LatencyHistogram::Snapshot> s = Histogram(*it);
      if (!s || s->BucketTotal() == 0) continue;
      absl::StrAppend(&summary, summary.empty() ? "" : ", ", op, " ",
                      Micros(s->QuantileUpperMicros(0.99)));
    }
    absl::StrAppend(&out, Line("p99 latency", summary.empty()
                                                  ? std::string("no requests yet")
                                                  : absl::StrCat(summary, " (--latency)")));
  }
  for (const auto& [key, value] : doc.items()) {
    if (ShownKeys().count(key) == 0) absl::StrAppend(&out, Line(key, value.dump()));
  }
  return out;
}

std::string RenderLatency(const StatusDoc& doc) {
  std::string out = absl::StrFormat("%-8s %12s %10s %10s %10s %10s %10s %10s\n", "request",
                                    "count", "mean", "p50", "p90", "p99", "p99.9", "max");
  auto latency = doc.find("latency");
  if (latency == doc.end() || !latency->is_object()) {
    return out + "(this daemon reports no latency)\n";
  }
  for (const auto& [op, h] : latency->items()) {
    std::optional<LatencyHistogram::Snapshot> s = Histogram(h);
    if (!s) {
      absl::StrAppend(&out, absl::StrFormat("%-8s (malformed)\n", op));
      continue;
    }
    const uint64_t n = s->BucketTotal();
    if (n == 0) {
      absl::StrAppend(&out, absl::StrFormat("%-8s %12d\n", op, 0));
      continue;
    }
    const double mean_us =
        s->count > 0 ? static_cast<double>(s->sum_nanos) / static_cast<double>(s->count) / 1e3
                     : 0;
    const std::string mean = mean_us < 1000 ? absl::StrFormat("%.1f us", mean_us)
                                            : Micros(static_cast<uint64_t>(mean_us));
    absl::StrAppend(&out, absl::StrFormat(
                              "%-8s %12d %10s %10s %10s %10s %10s %10s\n", op, n,
                              mean, Micros(s->QuantileUpperMicros(0.5)),
                              Micros(s->QuantileUpperMicros(0.9)),
                              Micros(s->QuantileUpperMicros(0.99)),
                              Micros(s->QuantileUpperMicros(0.999)),
                              Micros(s->QuantileUpperMicros(1.0))));
  }
  absl::StrAppend(&out,
                  "Quantiles are the upper bounds of power-of-two buckets (1 us .. 1 s): p99 "
                  "\"64 us\" means 99% took at most 64 us.\n");
  return out;
}

}  // namespace walfs::tools
