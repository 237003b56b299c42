// The zero-extension decision (fs/direct/zero_extend.h), with fstat, the mount check and
// the ioctl answered by the test.
#include "fs/direct/zero_extend.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace walfs::direct {
namespace {

constexpr int kFd = 7;
const dev_t kWalfsDev = makedev(0, 55);
const dev_t kOtherDev = makedev(8, 1);

// What the fake world answers, and what it was asked.
struct World {
  int fstat_result = 0;
  mode_t mode = S_IFREG | 0600;
  dev_t dev = kWalfsDev;
  off_t size = 0;
  int ioctl_result = 0;
  int fstats = 0;
  int ioctls = 0;
  uint64_t asked_offset = 0;
  uint64_t asked_length = 0;
};
World* g_world = nullptr;

const ZeroExtendSources kFakeSources = {
    .fstat =
        [](int, struct stat* st) {
          ++g_world->fstats;
          if (g_world->fstat_result != 0) return errno = EBADF, -1;
          memset(st, 0, sizeof(*st));
          st->st_mode = g_world->mode;
          st->st_dev = g_world->dev;
          st->st_size = g_world->size;
          return 0;
        },
    .is_walfs = [](dev_t dev) { return dev == kWalfsDev; },
    .ioctl_zero_extend =
        [](int, uint64_t offset, uint64_t length) {
          ++g_world->ioctls;
          g_world->asked_offset = offset;
          g_world->asked_length = length;
          return g_world->ioctl_result;
        },
};

class ZeroExtendTest : public testing::Test {
 protected:
  void SetUp() override {
    g_world = &world_;
    hints_.Set(kFd);
    zeros_.assign(8192, 0);
    // PostgreSQL 15's zero-fill: 32 iovecs, all the same zeroed 8 KiB block.
    for (int i = 0; i < 32; ++i) fill_.push_back({zeros_.data(), zeros_.size()});
  }
  void TearDown() override { g_world = nullptr; }

  ZeroExtendResult Try(off_t offset, int flags = 0) {
    return TryZeroExtend(kFd, fill_.data(), static_cast<int>(fill_.size()), offset, flags,
                         hints_, refusals_, kFakeSources, &written_);
  }

  World world_;
  ZeroExtendHints hints_;
  ZeroExtendRefusals refusals_;
  std::vector<char> zeros_;
  std::vector<struct iovec> fill_;
  size_t written_ = 0;
};

TEST_F(ZeroExtendTest, AZeroFillAtEofBecomesOneIoctl) {
  errno = 1234;
  EXPECT_EQ(Try(0), ZeroExtendResult::kExtended);
  EXPECT_EQ(written_, 32u * 8192);
  EXPECT_EQ(world_.ioctls, 1);
  EXPECT_EQ(world_.asked_offset, 0u);
  EXPECT_EQ(world_.asked_length, 32u * 8192);
  EXPECT_EQ(errno, 1234) << "errno untouched";
  // The next call past EOF (the daemon moved it; fstat says so) and a gap beyond it.
  world_.size = 32 * 8192;
  EXPECT_EQ(Try(32 * 8192), ZeroExtendResult::kExtended);
  EXPECT_EQ(Try(100 * 8192), ZeroExtendResult::kExtended);
  EXPECT_EQ(world_.asked_offset, 100u * 8192);
  // RWF_DSYNC is what the daemon's commit gives anyway.
  EXPECT_EQ(Try(200 * 8192, RWF_DSYNC), ZeroExtendResult::kExtended);
}

TEST_F(ZeroExtendTest, InsideTheFileTheWriteMustStoreZeros) {
  world_.size = 8192;
  EXPECT_EQ(Try(0), ZeroExtendResult::kBelowEof);
  EXPECT_EQ(Try(4096), ZeroExtendResult::kBelowEof);
  EXPECT_EQ(world_.ioctls, 0);
  EXPECT_TRUE(hints_.Test(kFd));
}

TEST_F(ZeroExtendTest, AnythingButZerosIsNotAsked) {
  std::vector<char> data(8192, 0);
  data[8191] = 1;
  fill_[31] = {data.data(), data.size()};
  EXPECT_EQ(Try(0), ZeroExtendResult::kNotAsked);
  data[8191] = 0;
  data[0] = 'x';
  EXPECT_EQ(Try(0), ZeroExtendResult::kNotAsked);
  EXPECT_EQ(world_.fstats, 0) << "the buffers are looked at before any system call";
}

TEST_F(ZeroExtendTest, SmallWritesFlagsAndOffsetsAreNotAsked) {
  const struct iovec one_byte = {zeros_.data(), 1};
  EXPECT_EQ(TryZeroExtend(kFd, &one_byte, 1, 16 * 1024 * 1024 - 1, 0, hints_, refusals_,
                          kFakeSources, &written_),
            ZeroExtendResult::kNotAsked)
      << "wal_init_zero=off's last byte";
  EXPECT_FALSE(ZeroExtendSized(&one_byte, 1));
  EXPECT_TRUE(ZeroExtendSized(fill_.data(), 32));
  EXPECT_FALSE(ZeroExtendSized(fill_.data(), 0));
  EXPECT_EQ(Try(-1), ZeroExtendResult::kNotAsked);
  EXPECT_EQ(Try(0, RWF_NOWAIT), ZeroExtendResult::kNotAsked);
  EXPECT_EQ(Try(0, RWF_APPEND), ZeroExtendResult::kNotAsked);
  EXPECT_EQ(Try(INT64_MAX - 4096), ZeroExtendResult::kNotAsked) << "end overflows";
  EXPECT_EQ(TryZeroExtend(kFd, fill_.data(), 0, 0, 0, hints_, refusals_, kFakeSources,
                          &written_),
            ZeroExtendResult::kNotAsked);
  EXPECT_EQ(world_.fstats, 0);
}

TEST_F(ZeroExtendTest, OnlyDescriptorsSeenOpenedOnWalfsAreAsked) {
  hints_.Clear(kFd);
  EXPECT_EQ(Try(0), ZeroExtendResult::kNotAsked);
  EXPECT_EQ(world_.fstats, 0);
  // A hinted number reused for another file (closed where the library did not see it):
  // checked, found not walfs, and not asked about again.
  hints_.Set(kFd);
  world_.dev = kOtherDev;
  EXPECT_EQ(Try(0), ZeroExtendResult::kNotWalfs);
  EXPECT_FALSE(hints_.Test(kFd));
  EXPECT_EQ(Try(0), ZeroExtendResult::kNotAsked);
  EXPECT_EQ(world_.fstats, 1);
  // ... reused for a pipe, or already closed.
  hints_.Set(kFd);
  world_.dev = kWalfsDev;
  world_.mode = S_IFIFO | 0600;
  EXPECT_EQ(Try(0), ZeroExtendResult::kNotWalfs);
  hints_.Set(kFd);
  world_.mode = S_IFREG | 0600;
  world_.fstat_result = -1;
  EXPECT_EQ(Try(0), ZeroExtendResult::kNotWalfs);
  EXPECT_EQ(world_.ioctls, 0);
}

TEST_F(ZeroExtendTest, ADaemonThatRefusesTheCommandIsNotAskedAgain) {
  world_.ioctl_result = -ENOTTY;  // a daemon without zero-extension
  EXPECT_EQ(Try(0), ZeroExtendResult::kRefused);
  EXPECT_EQ(Try(0), ZeroExtendResult::kRefused);
  EXPECT_EQ(world_.ioctls, 1);
  EXPECT_TRUE(refusals_.Refused(kWalfsDev));
  EXPECT_FALSE(refusals_.Refused(kOtherDev));
}

TEST_F(ZeroExtendTest, OtherRefusalsAreAskedAgainNextTime) {
  // EEXIST (another writer got there first), ENOSPC: the caller writes the zeros, and
  // the write reports what it must.
  for (int err : {EEXIST, ENOSPC, EPERM}) {
    world_.ioctl_result = -err;
    errno = 77;
    EXPECT_EQ(Try(0), ZeroExtendResult::kRefused);
    EXPECT_EQ(errno, 77);
  }
  EXPECT_EQ(world_.ioctls, 3);
  EXPECT_FALSE(refusals_.Refused(kWalfsDev));
}

TEST(ZeroExtendRefusalsTest, FullTableKeepsAsking) {
  ZeroExtendRefusals r;
  for (int i = 0; i < ZeroExtendRefusals::kSlots; ++i) r.Note(makedev(0, 100 + i));
  r.Note(makedev(0, 100));  // already there: no second slot
  r.Note(makedev(0, 200));  // no room: forgotten, so asked again
  for (int i = 0; i < ZeroExtendRefusals::kSlots; ++i) EXPECT_TRUE(r.Refused(makedev(0, 100 + i)));
  EXPECT_FALSE(r.Refused(makedev(0, 200)));
}

TEST(ZeroExtendHintsTest, BitsPerDescriptor) {
  ZeroExtendHints h;
  h.Set(0);
  h.Set(63);
  h.Set(64);
  h.Set(FdTable::kFdBound - 1);
  h.Set(FdTable::kFdBound);  // out of range: ignored
  h.Set(-1);
  EXPECT_TRUE(h.Test(0));
  EXPECT_TRUE(h.Test(63));
  EXPECT_TRUE(h.Test(64));
  EXPECT_FALSE(h.Test(65));
  EXPECT_TRUE(h.Test(FdTable::kFdBound - 1));
  EXPECT_FALSE(h.Test(FdTable::kFdBound));
  EXPECT_FALSE(h.Test(-1));
  h.Clear(63);
  EXPECT_FALSE(h.Test(63));
  EXPECT_TRUE(h.Test(64));
}

}  // namespace
}  // namespace walfs::direct
