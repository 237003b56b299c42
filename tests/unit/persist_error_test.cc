// A failed persist (msync EIO) is latched by the region and fails every later durability
// request with EIO, instead of killing the daemon or succeeding silently.
#include <cerrno>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/status.h"
#include "core/wal_directory.h"
#include "gtest/gtest.h"
#include "tests/unit/failing_region.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

using testing::Bytes;
using testing::FailingRegion;
using testing::FormattedImage;

constexpr Caller kUser{1000, 1000};
// A WAL segment name: the file gets its whole extent at create, so writes inside it
// commit nothing for allocation.
constexpr char kSegment[] = "000000010000000000000001";

template <typename T>
int Errno(const absl::StatusOr<T>& r) {
  return ErrnoFromStatus(r.status());
}
int Errno(const absl::Status& s) { return ErrnoFromStatus(s); }

TEST(PersistErrorTest, RegionLatchesTheFirstFailure) {
  FailingRegion region(std::string(8192, '\0'), /*pmem=*/false);
  EXPECT_TRUE(region.health().ok());
  region.Persist(0, 10);
  EXPECT_TRUE(region.health().ok());

  region.FailFlushes();
  region.Persist(100, 10);
  region.Persist(200, 10);
  region.Heal();
  region.Persist(300, 10);
  EXPECT_EQ(region.flushes(), 4u);
  // The first failure, whatever succeeded after it.
  EXPECT_EQ(region.health().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(region.health().message(), "flush #2 of [100, +10) failed: Input/output error");
  EXPECT_EQ(ErrnoFromStatus(region.health()), EIO);
}

class PersistErrorPoolTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto region = std::make_unique<FailingRegion>(FormattedImage(), /*pmem=*/GetParam());
    region_ = region.get();
    auto dir = WalDirectory::Open(std::move(region));
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
  }

  bool pmem() const { return GetParam(); }

  FailingRegion* region_ = nullptr;
  std::unique_ptr<WalDirectory> dir_;
};

TEST_P(PersistErrorPoolTest, EveryLaterDurabilityRequestFailsWithEio) {
  auto f = dir_->Create(kRootInode, kSegment, 0600, kUser, true);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(dir_->Write(f->ino, 0, Bytes("before"), /*sync=*/false).ok());
  ASSERT_TRUE(dir_->Fsync(f->ino, true).ok());

  region_->FailFlushes();
  // pmem persists every write before it returns, so the write itself reports the
  // failure; msync mode persists at fsync.
  auto w = dir_->Write(f->ino, 8192, Bytes("lost?"), /*sync=*/false);
  if (pmem()) {
    EXPECT_EQ(Errno(w), EIO);
  } else {
    ASSERT_TRUE(w.ok()) << w.status();
  }
  EXPECT_EQ(Errno(dir_->Fsync(f->ino, true)), EIO);

  // Sticky: the flushes work again, the promises made since they failed do not.
  region_->Heal();
  EXPECT_EQ(Errno(dir_->Fsync(f->ino, true)), EIO);
  EXPECT_EQ(Errno(dir_->Fsync(f->ino, false)), EIO);
  EXPECT_EQ(Errno(dir_->FsyncDir(kRootInode)), EIO);
  EXPECT_EQ(Errno(dir_->Write(f->ino, 0, Bytes("sync"), /*sync=*/true)), EIO);
  EXPECT_EQ(Errno(dir_->Create(kRootInode, "xlogtemp.1", 0600, kUser, true)), EIO);
  EXPECT_EQ(Errno(dir_->Rename(kRootInode, kSegment, kRootInode, "000000010000000000000002", 0)),
            EIO);
  EXPECT_EQ(dir_->Fsync(f->ino, true).message(),
            dir_->FsyncDir(kRootInode).message());  // one error, the first

  // Reading is not a durability request: what was written reads back.
  char buf[6];
  auto r = dir_->Read(f->ino, 0, absl::Span<char>(buf, sizeof(buf)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(std::string(buf, *r), "syncre");
  EXPECT_TRUE(dir_->GetAttr(f->ino).ok());

  // A clean unmount cannot claim the pool is consistent on media either.
  EXPECT_EQ(Errno(dir_->Close()), EIO);
}

TEST_P(PersistErrorPoolTest, OnlyDurabilityRequestsFail) {
  auto f = dir_->Create(kRootInode, kSegment, 0600, kUser, true);
  ASSERT_TRUE(f.ok()) << f.status();
  region_->FailFlushes();
  // Nothing was dirty, so nothing was flushed and nothing failed yet.
  EXPECT_TRUE(dir_->Fsync(f->ino, true).ok());
  // In msync mode a plain write promises nothing, so it succeeds; in pmem mode it is
  // persisted before it returns, so it fails.
  auto w = dir_->Write(f->ino, 0, Bytes("x"), /*sync=*/false);
  EXPECT_EQ(w.ok(), !pmem()) << w.status();
  EXPECT_EQ(Errno(dir_->Fsync(f->ino, true)), EIO);
  EXPECT_TRUE(dir_->Lookup(kRootInode, kSegment).ok());
  EXPECT_GT(dir_->Statfs().total_blocks, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, PersistErrorPoolTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Pmem" : "Msync";
                         });

TEST(PersistErrorTest, OpenRefusesAPoolWhoseRecoveryCannotPersist) {
  // Open replays the journal's last transaction (it is never cleared), which persists.
  std::string image;
  {
    auto dir = testing::OpenImage(FormattedImage(), /*pmem=*/false);
    ASSERT_NE(dir, nullptr);
    ASSERT_TRUE(dir->Create(kRootInode, "f", 0600, kUser, true).ok());
    ASSERT_TRUE(dir->Close().ok());
    image.assign(dir->region().data(), dir->region().size());
  }
  auto region = std::make_unique<FailingRegion>(image, /*pmem=*/false);
  region->FailFlushes();
  auto reopened = WalDirectory::Open(std::move(region));
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), absl::StatusCode::kDataLoss) << reopened.status();
  EXPECT_NE(reopened.status().message().find("failed: Input/output error"), std::string::npos)
      << reopened.status();
  // The same image opens fine where persists work.
  EXPECT_NE(testing::OpenImage(image, /*pmem=*/false), nullptr);
}

}  // namespace
}  // namespace walfs::core
