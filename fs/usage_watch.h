// UsageWatch: tells the operator, before PostgreSQL finds out, that the pool is filling.
//
// A full pool is a PANIC for PostgreSQL (it cannot create the next segment), so crossing
// 80, 90 and 95 percent used is logged as a warning, once per crossing; falling back below
// a level by 5 points re-arms it (and says so), so a pool hovering around a line does not
// repeat itself. The daemon checks every kCheckSeconds from a thread of its own; the
// level is in the status document ("usage_warning_level").
#ifndef WALFS_FS_USAGE_WATCH_H_
#define WALFS_FS_USAGE_WATCH_H_

#include <atomic>
#include <string>

#include "core/wal_directory.h"

namespace walfs::fs {

// "12.0 MiB free of 1024.0 MiB": how the daemon's log lines state the pool's space.
std::string FreeSpaceText(const core::FsStats& stats);

class UsageWatch {
 public:
  static constexpr int kCheckSeconds = 2;
  static constexpr int kHysteresis = 5;

  // The warning level (0, 80, 90 or 95) for `used_percent` when the level was `current`.
  static int LevelFor(double used_percent, int current);

  // Takes one reading; logs when the level changes. Thread-safe (one checker at a time).
  void Check(const core::FsStats& stats);

  int level() const { return level_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int> level_{0};
};

}  // namespace walfs::fs

#endif  // WALFS_FS_USAGE_WATCH_H_
