#include "fs/usage_watch.h"

#include "gtest/gtest.h"

namespace walfs::fs {
namespace {

TEST(UsageWatchTest, LevelsWithHysteresis) {
  EXPECT_EQ(UsageWatch::LevelFor(10, 0), 0);
  EXPECT_EQ(UsageWatch::LevelFor(79.9, 0), 0);
  EXPECT_EQ(UsageWatch::LevelFor(80, 0), 80);
  EXPECT_EQ(UsageWatch::LevelFor(91, 0), 90);
  EXPECT_EQ(UsageWatch::LevelFor(99, 80), 95);
  // Down: held until 5 points below the level reached.
  EXPECT_EQ(UsageWatch::LevelFor(91, 95), 95);
  EXPECT_EQ(UsageWatch::LevelFor(90.5, 95), 95);
  EXPECT_EQ(UsageWatch::LevelFor(90, 95), 90);  // 95 released, 90 still crossed
  EXPECT_EQ(UsageWatch::LevelFor(86, 90), 90);
  EXPECT_EQ(UsageWatch::LevelFor(85, 90), 80);
  EXPECT_EQ(UsageWatch::LevelFor(76, 80), 80);
  EXPECT_EQ(UsageWatch::LevelFor(75, 80), 0);
}

core::FsStats Stats(uint64_t total, uint64_t free) {
  core::FsStats s;
  s.block_size = 4096;
  s.total_blocks = total;
  s.free_blocks = free;
  return s;
}

TEST(UsageWatchTest, CheckFollowsUsage) {
  UsageWatch w;
  w.Check(Stats(100, 50));
  EXPECT_EQ(w.level(), 0);
  w.Check(Stats(100, 15));
  EXPECT_EQ(w.level(), 80);
  w.Check(Stats(100, 3));
  EXPECT_EQ(w.level(), 95);
  w.Check(Stats(100, 30));
  EXPECT_EQ(w.level(), 0);
  w.Check(Stats(0, 0));      // no data area: ignored
  w.Check(Stats(100, 200));  // impossible reading: ignored
  EXPECT_EQ(w.level(), 0);
}

}  // namespace
}  // namespace walfs::fs
