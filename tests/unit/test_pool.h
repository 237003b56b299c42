// Helpers for tests that need a formatted pool in memory.
#ifndef WALFS_TESTS_UNIT_TEST_POOL_H_
#define WALFS_TESTS_UNIT_TEST_POOL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/fsck.h"
#include "core/wal_directory.h"
#include "tests/support/memory_region.h"

namespace walfs::core::testing {

inline constexpr uint64_t kTestSegment = 1 << 20;

// A formatted pool image of `size` bytes with 1 MiB segments.
inline std::string FormattedImage(uint64_t size = 32 << 20, uint64_t inodes = 256) {
  MemoryRegion region(size);
  FormatOptions opts;
  opts.segment_size = kTestSegment;
  opts.inode_count = inodes;
  opts.region_is_zero = true;
  absl::Status s = FormatPool(region, opts);
  EXPECT_TRUE(s.ok()) << s;
  return region.bytes();
}

// Opens `image` (pmem semantics unless told otherwise). The region stays owned by the
// directory; `*bytes` (if given) points at its live image for inspection.
inline std::unique_ptr<WalDirectory> OpenImage(std::string image, bool pmem = true,
                                               std::string** bytes = nullptr,
                                               const OpenOptions& options = {}) {
  auto region = std::make_unique<MemoryRegion>(std::move(image), pmem);
  if (bytes != nullptr) *bytes = &region->bytes();
  auto dir = WalDirectory::Open(std::move(region), options);
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? std::move(*dir) : nullptr;
}

// fsck finds nothing but informational notes in `image` (a closed pool's bytes).
inline void ExpectFsckClean(const std::string& image) {
  MemoryRegion region(image);
  auto report = CheckPool(region, FsckOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  for (const auto& p : report->problems) {
    EXPECT_EQ(p.severity, FsckProblem::kInfo) << p.where << ": " << p.what;
  }
}

inline absl::Span<const char> Bytes(const std::string& s) { return {s.data(), s.size()}; }

}  // namespace walfs::core::testing

#endif  // WALFS_TESTS_UNIT_TEST_POOL_H_
