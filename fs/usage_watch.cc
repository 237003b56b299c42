// Pool usage warnings (see usage_watch.h).
#include "fs/usage_watch.h"

#include "absl/strings/str_format.h"
#include "fs/logging.h"

namespace walfs::fs {
namespace {

constexpr int kLevels[] = {95, 90, 80};  // highest first

}  // namespace

std::string FreeSpaceText(const core::FsStats& stats) {
  return absl::StrFormat("%.1f MiB free of %.1f MiB",
                         static_cast<double>(stats.free_blocks * stats.block_size) / (1 << 20),
                         static_cast<double>(stats.total_blocks * stats.block_size) / (1 << 20));
}

int UsageWatch::LevelFor(double used_percent, int current) {
  for (int level : kLevels) {
    // At or above a level: that level. Below a level already reached, it holds until
    // usage drops kHysteresis points under it.
    if (used_percent >= level) return level;
    if (current >= level && used_percent > level - kHysteresis) return level;
  }
  return 0;
}

void UsageWatch::Check(const core::FsStats& stats) {
  if (stats.total_blocks == 0 || stats.free_blocks > stats.total_blocks) return;
  const double used = 100.0 * static_cast<double>(stats.total_blocks - stats.free_blocks) /
                      static_cast<double>(stats.total_blocks);
  const int old_level = level();
  const int new_level = LevelFor(used, old_level);
  if (new_level == old_level) return;
  level_.store(new_level, std::memory_order_relaxed);
  const std::string space = FreeSpaceText(stats);
  if (new_level > old_level) {
    Log(LOG_WARNING,
        "the pool is %.0f%% full (%s, past the %d%% mark): PostgreSQL stops with a PANIC when "
        "it cannot create its next WAL segment; check archiving, replication slots and "
        "max_wal_size, or grow the pool",
        used, space.c_str(), new_level);
  } else {
    Log(LOG_NOTICE, "the pool is %.0f%% full (%s), below the %d%% mark", used, space.c_str(),
        old_level);
  }
}

}  // namespace walfs::fs
