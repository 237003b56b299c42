// Lock scope (core/pool.h): a metadata commit stuck in its journal persist (a slow
// msync on a disk) holds no lock that another file's data path, a lookup or a statfs
// needs. The region below parks every flush of the journal area until released, so
// the test sees a commit that never finishes instead of one that takes milliseconds.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "core/persistent_region.h"
#include "core/wal_directory.h"
#include "gtest/gtest.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

using testing::Bytes;
using testing::FormattedImage;

constexpr Caller kUser{1000, 1000};
constexpr char kSegment[] = "000000010000000000000001";
constexpr auto kPatience = std::chrono::seconds(20);

class GatedRegion final : public PersistentRegion {
 public:
  GatedRegion(std::string image, bool pmem)
      : PersistentRegion(nullptr, 0), bytes_(std::move(image)), pmem_(pmem) {
    Reset(bytes_.data(), bytes_.size());
  }
  bool is_pmem() const override { return pmem_; }
  std::string_view kind() const override { return "gated"; }
  void Store(uint64_t off, const void* src, size_t len) override {
    std::memcpy(bytes_.data() + off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    std::memset(bytes_.data() + off, byte, len);
  }
  void Flush(uint64_t off, size_t len) override {
    std::unique_lock<std::mutex> l(mu_);
    if (closed_ && off < hi_ && off + len > lo_) {
      ++parked_;
      cv_.notify_all();
      cv_.wait(l, [&] { return !closed_; });
    }
  }
  void Drain() override {}

  // Flushes touching [lo, hi) wait from now on until Open().
  void Close(uint64_t lo, uint64_t hi) {
    std::lock_guard<std::mutex> l(mu_);
    lo_ = lo;
    hi_ = hi;
    closed_ = true;
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = false;
    cv_.notify_all();
  }
  // Waits until a flush is parked; false after kPatience.
  bool AwaitParked() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, kPatience, [&] { return parked_ > 0; });
  }

 private:
  std::string bytes_;
  const bool pmem_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  uint64_t lo_ = 0, hi_ = 0;
  int parked_ = 0;
};

// Opens the gate when it goes out of scope: declared after a future that may be parked,
// so that a failed assertion returns instead of waiting in the future's destructor.
struct OpenOnExit {
  GatedRegion* region;
  ~OpenOnExit() { region->Open(); }
};

class LockScopeTest : public ::testing::TestWithParam<bool> {};

TEST_P(LockScopeTest, DataPathAndLookupsDoNotWaitForAnotherFilesCommit) {
  const bool pmem = GetParam();
  auto owned = std::make_unique<GatedRegion>(FormattedImage(), pmem);
  GatedRegion* region = owned.get();
  auto opened = WalDirectory::Open(std::move(owned));
  ASSERT_TRUE(opened.ok()) << opened.status();
  WalDirectory& dir = **opened;

  auto seg = dir.names().Create(kRootInode, kSegment, 0600, kUser, true);
  ASSERT_TRUE(seg.ok()) << seg.status();
  const std::string page(8192, 'p');
  // Sets the size and commits the times now, so the writes below (inside the size,
  // well within the 1 s bound on stale times) commit nothing.
  ASSERT_TRUE(dir.data().Write(seg->ino, 0, Bytes(page), /*sync=*/true).ok());
  ASSERT_TRUE(dir.data().Write(seg->ino, 8192, Bytes(page), /*sync=*/true).ok());

  const format::Superblock& sb = dir.superblock();
  region->Close(sb.journal_offset, sb.journal_offset + sb.journal_size);
  // A create (a metadata commit) that cannot finish its journal persist.
  auto create = std::async(std::launch::async, [&] {
    return dir.names().Create(kRootInode, "xlogtemp.1", 0600, kUser, true).status();
  });
  OpenOnExit open_for_create{region};
  ASSERT_TRUE(region->AwaitParked()) << "the create never reached its journal persist";

  // Meanwhile the other file's data path, lookups, attributes, readdir and statfs all
  // complete. Run them on a thread so that a regression fails instead of hanging.
  auto others = std::async(std::launch::async, [&]() -> std::string {
    for (int i = 0; i < 20; ++i) {
      auto w = dir.data().Write(seg->ino, (i % 2) * 8192, Bytes(page), /*sync=*/true);
      if (!w.ok()) return std::string(w.status().message());
      if (absl::Status s = dir.data().Fsync(seg->ino, /*datasync=*/true); !s.ok()) {
        return std::string(s.message());
      }
    }
    char buf[16];
    auto r = dir.data().Read(seg->ino, 0, absl::Span<char>(buf, sizeof(buf)));
    if (!r.ok()) return std::string(r.status().message());
    auto l = dir.names().Lookup(kRootInode, kSegment);
    if (!l.ok()) return std::string(l.status().message());
    dir.names().Forget(seg->ino, 1);
    if (auto a = dir.names().GetAttr(seg->ino); !a.ok()) return std::string(a.status().message());
    int entries = 0;
    absl::Status s = dir.names().Readdir(kRootInode, 0, [&](const DirEntry&) {
      ++entries;
      return true;
    });
    if (!s.ok()) return std::string(s.message());
    if (dir.Statfs().total_blocks == 0) return "statfs";
    return "";
  });
  OpenOnExit open_for_others{region};
  ASSERT_EQ(others.wait_for(kPatience), std::future_status::ready)
      << "a data-path or lookup call waited for another file's metadata commit";
  EXPECT_EQ(others.get(), "");
  // The new name is not visible before its commit is (apply after commit).
  EXPECT_FALSE(dir.names().Lookup(kRootInode, "xlogtemp.1").ok());

  region->Open();
  ASSERT_EQ(create.wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(create.get().ok());
  EXPECT_TRUE(dir.names().Lookup(kRootInode, "xlogtemp.1").ok());
  EXPECT_TRUE(dir.Close().ok());
}

// Blocks freed by an unlink count as free for statfs as soon as their reclaim starts,
// before they are zeroed; an allocation that needs them waits until they are zero.
TEST_P(LockScopeTest, BlocksBeingZeroedAreFreeForStatfsButNotHandedOutYet) {
  const bool pmem = GetParam();
  auto owned = std::make_unique<GatedRegion>(FormattedImage(16 << 20), pmem);
  GatedRegion* region = owned.get();
  auto opened = WalDirectory::Open(std::move(owned));
  ASSERT_TRUE(opened.ok()) << opened.status();
  WalDirectory& dir = **opened;
  const FsStats empty = dir.Statfs();

  // A segment-named file, so it may take the reserve (core/layout.h) too: the segment
  // below then finds no space but what the unlink is zeroing.
  constexpr char kBig[] = "000000010000000000000042";
  auto big = dir.names().Create(kRootInode, kBig, 0600, kUser, true);
  ASSERT_TRUE(big.ok()) << big.status();
  const uint64_t bytes = empty.free_blocks * 4096 - (64 << 10);
  ASSERT_TRUE(dir.data().Fallocate(big->ino, 0, bytes, 0).ok());
  ASSERT_TRUE(dir.data().Release(big->ino).ok());
  ASSERT_TRUE(dir.names().Unlink(kRootInode, kBig).ok());
  // Still referenced (the kernel's lookup): an open file keeps its blocks.
  EXPECT_LT(dir.Statfs().free_blocks, 64u);

  const format::Superblock& sb = dir.superblock();
  region->Close(sb.data_offset, region->size());
  // The last reference goes: the reclaim starts zeroing, and parks in its flush.
  auto forget = std::async(std::launch::async, [&] { dir.names().Forget(big->ino, 1); });
  OpenOnExit open_for_forget{region};
  ASSERT_TRUE(region->AwaitParked());
  EXPECT_EQ(dir.Statfs().free_blocks, empty.free_blocks);
  EXPECT_EQ(dir.Statfs().free_inodes + 1, empty.free_inodes);  // the orphan's, until freed
  // A segment needs those blocks: it waits for the zeroing instead of taking them.
  auto seg = std::async(std::launch::async, [&] {
    return dir.names().Create(kRootInode, kSegment, 0600, kUser, true).status();
  });
  OpenOnExit open_for_seg{region};
  EXPECT_EQ(seg.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  region->Open();
  ASSERT_EQ(forget.wait_for(kPatience), std::future_status::ready);
  ASSERT_EQ(seg.wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(seg.get().ok());
  EXPECT_EQ(dir.Statfs().free_blocks, empty.free_blocks - testing::kTestSegment / 4096);
  EXPECT_TRUE(dir.Close().ok());
}

INSTANTIATE_TEST_SUITE_P(Modes, LockScopeTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Pmem" : "Msync";
                         });

}  // namespace
}  // namespace walfs::core
