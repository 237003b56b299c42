#include "util/latency_histogram.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace walfs::util {
namespace {

TEST(LatencyHistogramTest, BucketBoundsArePowersOfTwoMicroseconds) {
  EXPECT_EQ(LatencyHistogram::BucketOf(0), 0);
  EXPECT_EQ(LatencyHistogram::BucketOf(1000), 0);      // 1 us: (0, 1]
  EXPECT_EQ(LatencyHistogram::BucketOf(1001), 1);      // just over: (1, 2]
  EXPECT_EQ(LatencyHistogram::BucketOf(2000), 1);
  EXPECT_EQ(LatencyHistogram::BucketOf(2001), 2);      // (2, 4]
  EXPECT_EQ(LatencyHistogram::BucketOf(4000), 2);
  EXPECT_EQ(LatencyHistogram::BucketOf(50'000), 6);    // 50 us: (32, 64]
  EXPECT_EQ(LatencyHistogram::BucketOf(1'048'576'000), 20);  // 2^20 us exactly
  EXPECT_EQ(LatencyHistogram::BucketOf(1'048'577'000), 21);  // above: unbounded
  EXPECT_EQ(LatencyHistogram::BucketOf(UINT64_MAX / 2), 21);
  EXPECT_EQ(LatencyHistogram::UpperBoundMicros(0), 1u);
  EXPECT_EQ(LatencyHistogram::UpperBoundMicros(20), 1u << 20);
  EXPECT_EQ(LatencyHistogram::UpperBoundMicros(21), 0u);
}

TEST(LatencyHistogramTest, QuantilesAreBucketUpperBounds) {
  LatencyHistogram h;
  EXPECT_EQ(h.snapshot().QuantileUpperMicros(0.5), 0u);  // empty
  for (int i = 0; i < 90; ++i) h.Record(1500);         // (1, 2] us
  for (int i = 0; i < 9; ++i) h.Record(100'000);       // 100 us: (64, 128]
  h.Record(5'000'000'000);                             // 5 s: unbounded
  const LatencyHistogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.BucketTotal(), 100u);
  EXPECT_EQ(s.sum_nanos, 90u * 1500 + 9u * 100'000 + 5'000'000'000u);
  EXPECT_EQ(s.QuantileUpperMicros(0.0), 2u);
  EXPECT_EQ(s.QuantileUpperMicros(0.5), 2u);
  EXPECT_EQ(s.QuantileUpperMicros(0.9), 2u);    // the 90th of 100: the last fast one
  EXPECT_EQ(s.QuantileUpperMicros(0.91), 128u);
  EXPECT_EQ(s.QuantileUpperMicros(0.99), 128u);
  EXPECT_EQ(s.QuantileUpperMicros(0.995), UINT64_MAX);
  EXPECT_EQ(s.QuantileUpperMicros(1.0), UINT64_MAX);
}

TEST(LatencyHistogramTest, ConcurrentRecordsAllCount) {
  LatencyHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 10000; ++i) h.Record(static_cast<uint64_t>(t * 7000 + i));
    });
  }
  for (auto& t : threads) t.join();
  const LatencyHistogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 40000u);
  EXPECT_EQ(s.BucketTotal(), 40000u);
}

}  // namespace
}  // namespace walfs::util
