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

}  // namespace
}  // namespace walfs::core
