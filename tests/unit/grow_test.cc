// Growing a pool (GrowPool, WalDirectory::Grow: walfsctl grow). Crash states of a grow
// are enumerated in tests/crash/grow_crash_test.cc.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "core/format.h"
#include "core/fsck.h"
#include "core/pool_state.h"
#include "core/status.h"
#include "core/wal_directory.h"
#include "tests/support/memory_region.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

using testing::Bytes;
using testing::ExpectFsckClean;

constexpr InodeId kRoot = format::kRootInode;
const Caller kUser{1000, 1000};
// A segment name: only segments may take the reserve (core/layout.h), and the fill
// must take every free block.
constexpr char kFillName[] = "0000000100000000000000FF";
constexpr uint64_t kOld = 8 << 20;
constexpr uint64_t kNew = 20 << 20;

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i % 31);
  return s;
}

// An 8 MiB pool holding a segment, a history file and a directory.
std::string PopulatedPool() {
  auto region = std::make_unique<MemoryRegion>(testing::FormattedImage(kOld, 64));
  MemoryRegion* raw = region.get();
  auto dir = WalDirectory::Open(std::move(region));
  EXPECT_TRUE(dir.ok()) << dir.status();
  WalDirectory& d = **dir;
  auto seg = d.names().Create(kRoot, "000000010000000000000001", 0600, kUser, true);
  EXPECT_TRUE(seg.ok());
  const std::string seg_bytes = Pattern(1 << 20, 's');
  EXPECT_TRUE(d.data().Write(seg->ino, 0, Bytes(seg_bytes), true).ok());
  EXPECT_TRUE(d.names().Mkdir(kRoot, "archive_status", 0700, kUser).ok());
  auto hist = d.names().Create(kRoot, "00000002.history", 0600, kUser, true);
  EXPECT_TRUE(hist.ok());
  EXPECT_TRUE(d.data().Write(hist->ino, 0, Bytes(Pattern(777, 'h')), true).ok());
  EXPECT_TRUE(d.Close().ok());
  return raw->bytes();
}

// GrowPool's steps on `image`, keeping the region to return what they left.
absl::StatusOr<std::string> Grown(const std::string& image, uint64_t size,
                                  GrowResult* result = nullptr) {
  auto region = std::make_unique<MemoryRegion>(image);
  MemoryRegion* raw = region.get();
  auto dir = WalDirectory::Open(std::move(region));
  if (!dir.ok()) return dir.status();
  auto r = (*dir)->Grow(size);
  if (!r.ok()) return r.status();
  if (absl::Status s = (*dir)->Close(); !s.ok()) return s;
  if (result != nullptr) *result = *r;
  return raw->bytes();
}

std::string ReadFile(WalDirectory& d, const std::string& name) {
  auto a = d.names().Lookup(kRoot, name);
  EXPECT_TRUE(a.ok()) << name << ": " << a.status();
  if (!a.ok()) return "";
  std::string out(a->size, '\0');
  auto n = d.data().Read(a->ino, 0, absl::MakeSpan(out));
  EXPECT_TRUE(n.ok());
  return out;
}

TEST(GrowTest, AGrownPoolKeepsEveryFileAndOffersTheNewSpace) {
  std::string image = PopulatedPool();
  image.resize(kNew, '\0');  // walfsctl grow extends the file with zeros first
  const FsStats before = testing::OpenImage(PopulatedPool())->Statfs();
  GrowResult result;
  absl::StatusOr<std::string> bytes = Grown(image, kNew, &result);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const GrowResult* grown = &result;
  MemoryRegion grown_region(*bytes);
  MemoryRegion* raw = &grown_region;
  EXPECT_EQ(grown->old_capacity, kOld);
  EXPECT_EQ(grown->new_capacity, kNew);
  EXPECT_EQ(grown->new_blocks - grown->old_blocks, (kNew - kOld) / format::kBlockSize);
  // The superblocks are as mkfs wrote them; the state record has the new size.
  format::Superblock sb;
  std::memcpy(&sb, raw->bytes().data(), sizeof(sb));
  EXPECT_EQ(sb.capacity, kOld);
  format::PoolState st;
  std::memcpy(&st, raw->bytes().data() + format::kStateOffset, sizeof(st));
  EXPECT_EQ(st.data_blocks, grown->new_blocks);
  ExpectFsckClean(raw->bytes());

  auto dir = testing::OpenImage(raw->bytes());
  ASSERT_NE(dir, nullptr);
  EXPECT_EQ(dir->superblock().capacity, kNew);
  const FsStats after = dir->Statfs();
  EXPECT_EQ(after.total_blocks - before.total_blocks, (kNew - kOld) / format::kBlockSize);
  EXPECT_EQ(after.free_blocks - before.free_blocks, (kNew - kOld) / format::kBlockSize);
  EXPECT_EQ(ReadFile(*dir, "000000010000000000000001"), Pattern(1 << 20, 's'));
  EXPECT_EQ(ReadFile(*dir, "00000002.history"), Pattern(777, 'h'));
  EXPECT_TRUE(dir->names().Lookup(kRoot, "archive_status").ok());
  // More than the old pool could hold: the new blocks are used, and read as zeros.
  auto big = dir->names().Create(kRoot, kFillName, 0600, kUser, true);
  ASSERT_TRUE(big.ok());
  const uint64_t size = after.free_blocks * format::kBlockSize;
  ASSERT_GT(size, kOld);
  ASSERT_TRUE(dir->data().Fallocate(big->ino, 0, size, 0).ok());
  std::string got(size, '\1');
  ASSERT_TRUE(dir->data().Read(big->ino, 0, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got.find_first_not_of('\0'), std::string::npos);
}

TEST(GrowTest, NewBytesThatAreNotZeroNeverReachAFile) {
  // Grown over garbage (a region extended by other means): the grow zeroes the new
  // blocks or records them as uninitialised, both for a pool with nothing uninitialised
  // (a new file) and for one formatted lazily with files at the top of its range.
  for (bool lazy : {false, true}) {
    SCOPED_TRACE(lazy ? "lazy" : "zeroed");
    std::string image;
    if (lazy) {
      MemoryRegion r(std::string(kOld, '\xa5'));
      FormatOptions opts;
      opts.segment_size = testing::kTestSegment;
      opts.inode_count = 64;
      ASSERT_TRUE(FormatPool(r, opts).ok());
      image = r.bytes();
    } else {
      image = testing::FormattedImage(kOld, 64);
    }
    {
      auto region = std::make_unique<MemoryRegion>(image);
      MemoryRegion* raw = region.get();
      auto dir = WalDirectory::Open(std::move(region));
      ASSERT_TRUE(dir.ok());
      auto f = (*dir)->names().Create(kRoot, "small", 0600, kUser, true);  // from the top
      ASSERT_TRUE(f.ok());
      ASSERT_TRUE((*dir)->data().Write(f->ino, 0, Bytes(Pattern(100, 'x')), true).ok());
      ASSERT_TRUE((*dir)->Close().ok());
      image = raw->bytes();
    }
    image.resize(kNew, '\x5a');
    absl::StatusOr<std::string> bytes = Grown(image, kNew);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ExpectFsckClean(*bytes);
    auto dir = testing::OpenImage(*bytes);
    ASSERT_NE(dir, nullptr);
    auto big = dir->names().Create(kRoot, kFillName, 0600, kUser, true);
    ASSERT_TRUE(big.ok());
    const uint64_t size = dir->Statfs().free_blocks * format::kBlockSize;
    ASSERT_TRUE(dir->data().Fallocate(big->ino, 0, size, 0).ok());
    std::string got(size, '\1');
    ASSERT_TRUE(dir->data().Read(big->ino, 0, absl::MakeSpan(got)).ok());
    EXPECT_EQ(got.find_first_not_of('\0'), std::string::npos);
    EXPECT_EQ(ReadFile(*dir, "small"), Pattern(100, 'x'));
  }
}

TEST(GrowTest, APoolGrowsAgain) {
  std::string image = PopulatedPool();
  image.resize(12 << 20, '\0');
  absl::StatusOr<std::string> once = Grown(image, 12 << 20);
  ASSERT_TRUE(once.ok()) << once.status();
  image = *once;
  image.resize(kNew, '\0');
  GrowResult second;
  absl::StatusOr<std::string> twice = Grown(image, kNew, &second);
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(second.old_capacity, uint64_t{12} << 20);
  ExpectFsckClean(*twice);
  EXPECT_EQ(testing::OpenImage(*twice)->superblock().capacity, kNew);
  // GrowPool, the whole of walfsctl grow's core part, on a region it owns.
  std::string more = *twice;
  more.resize(kNew + (1 << 20), '\0');
  auto r = GrowPool(std::make_unique<MemoryRegion>(more), kNew + (1 << 20));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->old_capacity, kNew);
  EXPECT_EQ(r->new_capacity, kNew + (1 << 20));
  EXPECT_FALSE(GrowPool(std::make_unique<MemoryRegion>(more), kNew).ok());
}

TEST(GrowTest, BadSizesAreRefusedAndChangeNothing) {
  std::string image = PopulatedPool();
  image.resize(kNew, '\0');
  struct Case {
    uint64_t size;
    const char* message;
  };
  const Case cases[] = {
      {kOld, "must add at least one"},
      {kOld + 100, "must add at least one"},  // not a whole block more
      {kOld / 2, "must add at least one"},
      {kNew + format::kBlockSize, "does not fit in the"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.size);
    auto region = std::make_unique<MemoryRegion>(image);
    MemoryRegion* raw = region.get();
    auto dir = WalDirectory::Open(std::move(region));
    ASSERT_TRUE(dir.ok());
    auto r = (*dir)->Grow(c.size);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status();
    // Still usable, unchanged.
    EXPECT_TRUE((*dir)->names().Mkdir(kRoot, "after", 0700, kUser).ok());
    ASSERT_TRUE((*dir)->Close().ok());
    EXPECT_EQ(testing::OpenImage(raw->bytes())->superblock().capacity, kOld);
  }
}

TEST(GrowTest, AReadOnlyOrAlreadyGrownPoolRefusesAGrowAndAGrownOneRefusesChanges) {
  std::string image = PopulatedPool();
  image.resize(kNew, '\0');
  OpenOptions ro;
  ro.read_only = true;
  auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(image), ro);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(ErrnoFromStatus((*dir)->Grow(kNew).status()), EROFS);

  auto rw = WalDirectory::Open(std::make_unique<MemoryRegion>(image));
  ASSERT_TRUE(rw.ok());
  ASSERT_TRUE((*rw)->Grow(kNew - (4 << 20)).ok());
  // Its allocator still has the old size: changes wait for the next open.
  EXPECT_EQ(ErrnoFromStatus((*rw)->Grow(kNew).status()), EROFS);
  EXPECT_EQ(ErrnoFromStatus((*rw)->names().Create(kRoot, "x", 0600, kUser, true).status()), EROFS);
  EXPECT_EQ(ReadFile(**rw, "00000002.history"), Pattern(777, 'h'));
  EXPECT_TRUE((*rw)->Close().ok());
}

}  // namespace
}  // namespace walfs::core
