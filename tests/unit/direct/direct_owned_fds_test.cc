// The registry of library-owned descriptors: registration, the lock-free check, moving a
// descriptor aside for the application's dup2, ranges around them, and a lease entry's
// private descriptor living exactly as long as the entry.
#include "fs/direct/owned_fds.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <utility>
#include <vector>

#include "fs/direct/fd_table.h"
#include "gtest/gtest.h"

namespace walfs::direct {
namespace {

bool IsOpen(int fd) { return fd >= 0 && fcntl(fd, F_GETFD) != -1; }

int NewDescriptor() {
  const int fd = memfd_create("walfs-owned-test", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  return fd;
}

class DirectOwnedFdsTest : public ::testing::Test {
 protected:
  std::unique_ptr<OwnedFds> owned_ = std::make_unique<OwnedFds>();
};

TEST_F(DirectOwnedFdsTest, AdoptCloseAndTheCheck) {
  std::atomic<int> cell{-1};
  const int fd = NewDescriptor();
  EXPECT_FALSE(owned_->IsOwned(fd));
  ASSERT_TRUE(owned_->Adopt(fd, &cell));
  EXPECT_EQ(cell.load(), fd);
  EXPECT_TRUE(owned_->IsOwned(fd));
  EXPECT_FALSE(owned_->IsOwned(fd + 1));
  EXPECT_FALSE(owned_->IsOwned(-1));
  EXPECT_FALSE(owned_->IsOwned(OwnedFds::kFdBound));
  EXPECT_EQ(owned_->count(), 1);
  std::atomic<int> again{-1};
  EXPECT_FALSE(owned_->Adopt(fd, &again));  // one owner per number
  EXPECT_FALSE(owned_->Adopt(OwnedFds::kFdBound, &again));
  EXPECT_FALSE(owned_->Adopt(-1, &again));
  owned_->Close(&cell);
  EXPECT_EQ(cell.load(), -1);
  EXPECT_FALSE(IsOpen(fd));
  EXPECT_FALSE(owned_->IsOwned(fd));
  EXPECT_EQ(owned_->count(), 0);
  owned_->Close(&cell);  // twice is harmless
}

TEST_F(DirectOwnedFdsTest, RebindHandsTheNumberToAnotherCell) {
  std::atomic<int> from{-1};
  std::atomic<int> to{-1};
  const int fd = NewDescriptor();
  ASSERT_TRUE(owned_->Adopt(fd, &from));
  owned_->Rebind(&from, &to);
  EXPECT_EQ(from.load(), -1);
  EXPECT_EQ(to.load(), fd);
  owned_->Close(&from);  // no longer its: nothing closed
  EXPECT_TRUE(IsOpen(fd));
  // MoveAside updates the cell that owns it now.
  ASSERT_TRUE(owned_->MoveAside(fd));
  EXPECT_NE(to.load(), fd);
  EXPECT_TRUE(IsOpen(to.load()));
  owned_->Close(&to);
  EXPECT_EQ(owned_->count(), 0);
}

TEST_F(DirectOwnedFdsTest, MoveAsideKeepsTheDescriptionUnderANewNumber) {
  std::atomic<int> cell{-1};
  const int fd = NewDescriptor();
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  ASSERT_EQ(lseek(fd, 123, SEEK_SET), 123);
  ASSERT_TRUE(owned_->Adopt(fd, &cell));
  ASSERT_TRUE(owned_->MoveAside(fd));
  const int moved = cell.load();
  EXPECT_NE(moved, fd);
  EXPECT_FALSE(IsOpen(fd));  // free for the application
  EXPECT_FALSE(owned_->IsOwned(fd));
  EXPECT_TRUE(owned_->IsOwned(moved));
  EXPECT_EQ(fcntl(moved, F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(lseek(moved, 0, SEEK_CUR), 123);  // the same open file description
  EXPECT_EQ(owned_->count(), 1);
  const int other = NewDescriptor();
  EXPECT_TRUE(owned_->MoveAside(other));  // not registered: nothing to do
  EXPECT_TRUE(IsOpen(other));
  close(other);
  owned_->Close(&cell);
}

TEST_F(DirectOwnedFdsTest, RangesGoAroundOwnedDescriptors) {
  std::atomic<int> cells[3] = {-1, -1, -1};
  // Three registered descriptors at 200, 201 and 260.
  for (int i = 0; i < 3; ++i) {
    const int want = i < 2 ? 200 + i : 260;
    const int original = NewDescriptor();
    const int fd = fcntl(original, F_DUPFD_CLOEXEC, want);
    close(original);
    ASSERT_EQ(fd, want);
    ASSERT_TRUE(owned_->Adopt(fd, &cells[i]));
  }
  EXPECT_EQ(owned_->NextOwned(0, ~0u), 200);
  EXPECT_EQ(owned_->NextOwned(201, ~0u), 201);
  EXPECT_EQ(owned_->NextOwned(202, ~0u), 260);
  EXPECT_EQ(owned_->NextOwned(202, 259), -1);
  EXPECT_EQ(owned_->NextOwned(261, ~0u), -1);
  EXPECT_EQ(owned_->NextOwned(~0u, ~0u), -1);

  using Ranges = std::vector<std::pair<unsigned, unsigned>>;
  Ranges ranges;
  const auto record = [&](unsigned a, unsigned b) {
    ranges.emplace_back(a, b);
    return 0;
  };
  EXPECT_EQ(CloseRangeAroundOwned(*owned_, 3, ~0u, 0, record), 0);
  EXPECT_EQ(ranges, (Ranges{{3, 199}, {202, 259}, {261, ~0u}}));
  ranges.clear();
  CloseRangeAroundOwned(*owned_, 200, 201, 0, record);
  EXPECT_TRUE(ranges.empty());
  CloseRangeAroundOwned(*owned_, 201, 260, 0, record);
  EXPECT_EQ(ranges, (Ranges{{202, 259}}));
  ranges.clear();
  CloseRangeAroundOwned(*owned_, 250, 260, 0, record);
  EXPECT_EQ(ranges, (Ranges{{250, 259}}));
  ranges.clear();
  CloseRangeAroundOwned(*owned_, 3, ~0u, CLOSE_RANGE_CLOEXEC, record);
  EXPECT_EQ(ranges, (Ranges{{3, ~0u}}));
  ranges.clear();
  CloseRangeAroundOwned(*owned_, 0, 2, 0, record);
  EXPECT_EQ(ranges, (Ranges{{0, 2}}));
  // The first failure is what the caller sees.
  int calls = 0;
  EXPECT_EQ(CloseRangeAroundOwned(*owned_, 3, ~0u, 0,
                                  [&](unsigned, unsigned) { return ++calls == 2 ? -1 : 0; }),
            -1);
  EXPECT_EQ(calls, 3);
  for (std::atomic<int>& c : cells) owned_->Close(&c);
  ranges.clear();
  CloseRangeAroundOwned(*owned_, 3, ~0u, 0, record);
  EXPECT_EQ(ranges, (Ranges{{3, ~0u}}));
}

// ---- a lease entry's private descriptor ----------------------------------------------

LeaseMapping AnonymousMapping() {
  LeaseMapping m;
  m.leased_size = 4096;
  m.run_count = 1;
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(page, MAP_FAILED);
  m.runs[0] = {.file_offset = 0, .length = 4096, .pool_offset = 0,
               .pool_addr = static_cast<char*>(page)};
  return m;
}

TEST_F(DirectOwnedFdsTest, TheEntryClosesItsPrivateDescriptorAfterTheLastReference) {
  auto table = std::make_unique<FdTable>(owned_.get());
  ASSERT_TRUE(table->TrackPending(7, 1, 2));
  const FdTable::Entry* pending = table->Acquire(7).entry();
  std::atomic<int> cell{-1};
  const int priv = NewDescriptor();
  ASSERT_TRUE(owned_->Adopt(priv, &cell));
  ASSERT_TRUE(table->ReplaceIf(7, pending, AnonymousMapping(), &cell));
  EXPECT_EQ(cell.load(), -1);  // the entry has it now
  FdTable::Ref ref = table->Acquire(7);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref.private_fd(), priv);
  table->Untrack(7);
  EXPECT_TRUE(IsOpen(priv));  // a store may still be running
  EXPECT_TRUE(owned_->IsOwned(priv));
  ref.Reset();
  EXPECT_FALSE(IsOpen(priv));
  EXPECT_EQ(owned_->count(), 0);
  EXPECT_EQ(table->live_entries(), 0);
}

TEST_F(DirectOwnedFdsTest, ALostReplaceLeavesTheDescriptorWithTheCaller) {
  auto table = std::make_unique<FdTable>(owned_.get());
  ASSERT_TRUE(table->TrackPending(7, 1, 2));
  const FdTable::Entry* pending = table->Acquire(7).entry();
  table->Untrack(7);  // closed while leasing
  std::atomic<int> cell{-1};
  const int priv = NewDescriptor();
  ASSERT_TRUE(owned_->Adopt(priv, &cell));
  LeaseMapping m = AnonymousMapping();
  EXPECT_FALSE(table->ReplaceIf(7, pending, m, &cell));
  EXPECT_EQ(cell.load(), priv);
  EXPECT_TRUE(IsOpen(priv));
  owned_->Close(&cell);
  EXPECT_EQ(munmap(m.runs[0].pool_addr, 4096), 0);
  EXPECT_EQ(owned_->count(), 0);
}

}  // namespace
}  // namespace walfs::direct
