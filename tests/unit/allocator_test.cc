#include "core/allocator.h"

#include <gtest/gtest.h>

namespace walfs::core {
namespace {

TEST(BlockAllocator, LowAndHighPlacement) {
  BlockAllocator a(100);
  auto low = a.AllocateLow(10);
  ASSERT_TRUE(low.has_value());
  EXPECT_EQ(low->block, 0u);
  auto high = a.AllocateHigh(5);
  ASSERT_TRUE(high.has_value());
  EXPECT_EQ(high->block, 95u);
  EXPECT_EQ(a.free_blocks(), 85u);
  EXPECT_EQ(a.LargestRun(), 85u);
}

TEST(BlockAllocator, ReleaseCoalesces) {
  BlockAllocator a(30);
  auto x = *a.AllocateLow(10);
  auto y = *a.AllocateLow(10);
  auto z = *a.AllocateLow(10);
  EXPECT_EQ(a.free_blocks(), 0u);
  EXPECT_FALSE(a.AllocateLow(1).has_value());
  a.Release(x);
  a.Release(z);
  EXPECT_EQ(a.LargestRun(), 10u);
  a.Release(y);
  EXPECT_EQ(a.LargestRun(), 30u);
  EXPECT_EQ(a.free_blocks(), 30u);
}

TEST(BlockAllocator, ReserveDetectsOverlapAndBounds) {
  BlockAllocator a(50);
  EXPECT_TRUE(a.Reserve({10, 10}).ok());
  EXPECT_EQ(a.Reserve({15, 10}).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(a.Reserve({5, 6}).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(a.Reserve({45, 10}).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(a.Reserve({0, 0}).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(a.Reserve({UINT64_MAX, 2}).code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(a.Reserve({20, 30}).ok());
  EXPECT_EQ(a.free_blocks(), 10u);
}

TEST(BlockAllocator, ExtendInPlace) {
  BlockAllocator a(40);
  auto e = *a.AllocateLow(4);
  EXPECT_EQ(a.ExtendInPlace(e, 6), 6u);
  EXPECT_EQ(e.count, 10u);
  auto blocker = *a.AllocateLow(1);
  EXPECT_EQ(blocker.block, 10u);
  EXPECT_EQ(a.ExtendInPlace(e, 3), 0u);
  EXPECT_EQ(a.free_blocks(), 29u);
}

// Runs of at least the alignment start on an aligned block (phase 3: blocks 5, 13, 21...
// are aligned for 8-block alignment), below-alignment runs stay first-fit, and when no
// aligned start fits the lowest unaligned one is still taken.
TEST(BlockAllocator, LowRunsStartAlignedWhereTheyFit) {
  BlockAllocator a(40, 8, 3);
  auto small = a.AllocateLow(2);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->block, 0u);
  auto seg = a.AllocateLow(8);
  ASSERT_TRUE(seg.has_value());
  EXPECT_EQ(seg->block, 5u);
  auto next = a.AllocateLow(16);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->block, 13u);
  // The gap below the first aligned run is still free for small files.
  auto gap = a.AllocateLow(3);
  ASSERT_TRUE(gap.has_value());
  EXPECT_EQ(gap->block, 2u);
  // Free now: [29, 40), which starts aligned.
  auto tail = a.AllocateLow(11);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(tail->block, 29u);
  EXPECT_EQ(a.free_blocks(), 0u);
}

TEST(BlockAllocator, AlignmentNeverTurnsSuccessIntoFailure) {
  BlockAllocator a(20, 8, 3);  // aligned blocks: 5, 13
  ASSERT_TRUE(a.Reserve({0, 6}).ok());  // free: [6, 20); aligned start 13 leaves 7
  auto e = a.AllocateLow(10);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->block, 6u);  // no aligned start fits: first fit, as without alignment
  EXPECT_EQ(a.free_blocks(), 4u);
}

}  // namespace
}  // namespace walfs::core
