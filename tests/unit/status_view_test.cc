// walfsctl's views of the status document, fed by the daemon's own renderer.
#include "tools/status_view.h"

#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "fs/status_json.h"
#include "gtest/gtest.h"
#include "util/latency_histogram.h"

namespace walfs::tools {
namespace {

StatusDoc SampleDoc(bool persist_error = false, bool direct = true) {
  fs::DaemonStatus s;
  s.pool = "/var/lib/walfs/main.pool";
  s.mountpoint = "/var/lib/postgresql/15/main/pg_wal";
  s.pid = 42;
  s.mode = core::DurabilityMode::kPmem;
  s.region = "pmem";
  s.stats.block_size = 4096;
  s.stats.total_blocks = 1000;
  s.stats.free_blocks = 250;
  s.stats.total_inodes = 64;
  s.stats.free_inodes = 60;
  s.counters.writes = 7;
  s.counters.write_bytes = 7 * 8192;
  s.counters.zeroed_blocks = 3;
  s.enospc_errors = 2;
  s.uptime_seconds = 3725;
  if (persist_error) s.persist_error = "msync: Input/output error";
  s.direct_access = direct;
  s.direct_reads = direct;
  s.direct_durability = direct ? "forced" : "none";
  if (!direct) s.direct_access_reason = "msync mode: a copy + drain is not durable on this pool";
  s.sessions_granted = 5;
  s.sessions_refused = 1;
  s.leases_refused = 3;
  s.read_leases_granted = 9;
  s.read_leases_released = 7;
  s.read_leases_revoked = 1;
  util::LatencyHistogram write, fsync;
  for (int i = 0; i < 98; ++i) write.Record(3000);  // (2, 4] us
  write.Record(40'000);                              // (32, 64] us
  write.Record(2'000'000'000);                       // 2 s: unbounded
  s.latency.push_back({"write", write.snapshot()});
  s.latency.push_back({"fsync", fsync.snapshot()});
  return StatusDoc::parse(fs::StatusJson(s));
}

// Parses exposition lines into family -> type, checking the text format on the way.
TEST(StatusViewTest, PrometheusFollowsTheExpositionConventions) {
  const std::string text = RenderPrometheus(SampleDoc());
  std::istringstream in(text);
  std::string line;
  std::map<std::string, std::string> types;
  std::set<std::string> helped;
  // NAME{LABELS} VALUE, NAME in [a-zA-Z_:][a-zA-Z0-9_:]*. (No std::regex: GCC 12's
  // -Wmaybe-uninitialized misfires inside it in optimized sanitizer builds.)
  auto parse = [](const std::string& l, std::string* name, std::string* labels) {
    const size_t open = l.find('{');
    const size_t close = l.rfind("} ");
    if (open == std::string::npos || close == std::string::npos || close < open) return false;
    *name = l.substr(0, open);
    *labels = l.substr(open + 1, close - open - 1);
    if (name->empty() || std::isdigit(static_cast<unsigned char>((*name)[0]))) return false;
    for (char c : *name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return false;
    }
    const std::string value = l.substr(close + 2);
    return !value.empty() && value.find(' ') == std::string::npos;
  };
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      helped.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      EXPECT_TRUE(type == "gauge" || type == "counter" || type == "histogram") << line;
      EXPECT_EQ(types.count(name), 0u) << "family typed twice: " << name;
      types[name] = type;
      continue;
    }
    std::string family, labels;
    ASSERT_TRUE(parse(line, &family, &labels)) << line;
    ++samples;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sfx = suffix;
      if (types.count(family) == 0 && family.size() > sfx.size() &&
          family.compare(family.size() - sfx.size(), sfx.size(), sfx) == 0) {
        family = family.substr(0, family.size() - sfx.size());
      }
    }
    ASSERT_EQ(types.count(family), 1u) << "no # TYPE before " << line;
    EXPECT_EQ(helped.count(family), 1u) << "no # HELP for " << family;
    if (types[family] == "counter") {
      EXPECT_TRUE(family.ends_with("_total")) << family;
    }
    EXPECT_NE(labels.find("mountpoint=\"/var/lib/postgresql/15/main/pg_wal\""),
              std::string::npos) << line;
    EXPECT_NE(labels.find("pool=\"/var/lib/walfs/main.pool\""), std::string::npos) << line;
  }
  EXPECT_GT(samples, 40);
  EXPECT_EQ(types["walfs_request_duration_seconds"], "histogram");
  EXPECT_NE(text.find("walfs_pool_size_bytes{mountpoint=\"/var/lib/postgresql/15/main/pg_wal\","
                      "pool=\"/var/lib/walfs/main.pool\"} 4096000\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("} 0.75\n"), std::string::npos);  // walfs_pool_used_ratio
  EXPECT_NE(text.find("walfs_zeroed_bytes_total{"), std::string::npos);
  EXPECT_NE(text.find("walfs_enospc_errors_total{"), std::string::npos);
  EXPECT_NE(text.find("version=\"" WALFS_TEST_VERSION "\""), std::string::npos) << text;
  // Cumulative buckets; _count is the +Inf bucket.
  EXPECT_NE(text.find("op=\"write\",le=\"4e-06\"} 98\n"), std::string::npos) << text;
  EXPECT_NE(text.find("op=\"write\",le=\"6.4e-05\"} 99\n"), std::string::npos) << text;
  EXPECT_NE(text.find("op=\"write\",le=\"+Inf\"} 100\n"), std::string::npos) << text;
  EXPECT_NE(text.find("walfs_request_duration_seconds_count{mountpoint=\"/var/lib/postgresql/15/"
                      "main/pg_wal\",pool=\"/var/lib/walfs/main.pool\",op=\"write\"} 100\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("walfs_persist_error{"), std::string::npos);
  EXPECT_NE(text.find("walfs_sessions_granted_total{mountpoint=\"/var/lib/postgresql/15/main/"
                      "pg_wal\",pool=\"/var/lib/walfs/main.pool\"} 5\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("walfs_sessions_refused_total{"), std::string::npos) << text;
  EXPECT_NE(text.find("walfs_read_leases_active{mountpoint=\"/var/lib/postgresql/15/main/"
                      "pg_wal\",pool=\"/var/lib/walfs/main.pool\"} 2\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("walfs_read_leases_revoked_total{"), std::string::npos) << text;
  EXPECT_NE(text.find(",durability=\"forced\"} 1\n"), std::string::npos) << text;
  const std::string off = RenderPrometheus(SampleDoc(false, /*direct=*/false));
  EXPECT_NE(off.find(",durability=\"none\"} 0\n"), std::string::npos) << off;
}

TEST(StatusViewTest, HumanViewLeadsWithHealthAndSpace) {
  std::string text = RenderHuman(SampleDoc(), "/mnt");
  EXPECT_NE(text.find("health:          ok\n"), std::string::npos) << text;
  EXPECT_NE(text.find("2.93 MiB used of 3.91 MiB (75.0%), 1000.00 KiB free"), std::string::npos)
      << text;
  EXPECT_NE(text.find("up 1h02m"), std::string::npos) << text;
  EXPECT_NE(text.find("2 ENOSPC, 0 EIO"), std::string::npos) << text;
  EXPECT_NE(text.find("p99 latency:     write 64 us (--latency)"), std::string::npos) << text;
  EXPECT_NE(text.find("direct access:   available (durability forced); sessions 5 granted, "
                      "1 refused; 0 write leases held (0 granted), 2 read leases held (9 "
                      "granted), 3 refused\n"),
            std::string::npos) << text;
  // Every key is shown in its place: nothing is left for the raw tail.
  EXPECT_EQ(text.find("direct_access"), std::string::npos) << text;
  EXPECT_EQ(text.find("sessions_granted"), std::string::npos) << text;
  text = RenderHuman(SampleDoc(/*persist_error=*/true), "/mnt");
  EXPECT_NE(text.find("PERSIST ERROR"), std::string::npos) << text;
  text = RenderHuman(SampleDoc(false, /*direct=*/false), "/mnt");
  EXPECT_NE(text.find("direct access:   off (msync mode: a copy + drain is not durable on "
                      "this pool); sessions 5 granted"),
            std::string::npos) << text;
  StatusDoc reads = SampleDoc(false, /*direct=*/false);
  reads["direct_reads"] = true;
  text = RenderHuman(reads, "/mnt");
  EXPECT_NE(text.find("direct access:   reads only (msync mode: a copy + drain is not durable "
                      "on this pool); sessions 5 granted"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("direct_reads"), std::string::npos) << text;
}

TEST(StatusViewTest, LatencyTable) {
  const std::string text = RenderLatency(SampleDoc());
  // 100 writes: p50 and p90 in (2, 4] us, p99 in (32, 64] us, the slowest above 1 s.
  // Columns collapsed to single spaces.
  std::string squeezed;
  for (char c : text) {
    if (c == ' ' && !squeezed.empty() && squeezed.back() == ' ') continue;
    squeezed += c;
  }
  EXPECT_NE(squeezed.find("\nwrite 100 20.0 ms 4 us 4 us 64 us > 1 s > 1 s\n"), std::string::npos)
      << text;
  EXPECT_NE(squeezed.find("\nfsync 0\n"), std::string::npos) << text;
}

TEST(StatusViewTest, MalformedDocumentsDoNotCrash) {
  for (const char* raw : {R"({})", R"({"latency": 5, "total_blocks": "x"})",
                          R"({"latency": {"write": {"count": 1, "sum_ns": 1, "buckets": [1]}}})",
                          R"({"free_blocks": 10, "total_blocks": 5, "block_size": 4096})"}) {
    const StatusDoc doc = StatusDoc::parse(raw);
    EXPECT_FALSE(RenderHuman(doc, "/m").empty());
    const std::string prom = RenderPrometheus(doc);
    EXPECT_EQ(prom.find("walfs_pool_used_ratio"), std::string::npos) << raw;
    EXPECT_FALSE(RenderLatency(doc).empty());
  }
}

}  // namespace
}  // namespace walfs::tools
