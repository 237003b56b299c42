#include "fs/direct/fd_table.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace walfs::direct {
namespace {

// A mapping whose one run is a private anonymous page: UnmapLease unmaps it, so a store
// through a reference after a premature release would fault.
LeaseMapping FakeMapping(uint64_t tag) {
  LeaseMapping m;
  m.walfs_ino = tag;
  m.leased_size = 4096;
  m.run_count = 1;
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(page, MAP_FAILED);
  m.runs[0] = {.file_offset = 0, .length = 4096, .pool_offset = 0,
               .pool_addr = static_cast<char*>(page), .image_addr = nullptr};
  return m;
}

class DirectFdTableTest : public ::testing::Test {
 protected:
  // 512 KiB of slots: on the heap.
  std::unique_ptr<FdTable> table_ = std::make_unique<FdTable>();
};

TEST_F(DirectFdTableTest, TrackLookupUntrack) {
  EXPECT_FALSE(table_->IsTracked(5));
  ASSERT_TRUE(table_->Track(5, FakeMapping(5)));
  EXPECT_TRUE(table_->IsTracked(5));
  EXPECT_FALSE(table_->IsTracked(6));
  {
    FdTable::Ref ref = table_->Acquire(5);
    ASSERT_TRUE(ref);
    EXPECT_EQ(ref->walfs_ino, 5u);
  }
  EXPECT_FALSE(table_->Acquire(6));
  table_->Untrack(5);
  EXPECT_FALSE(table_->IsTracked(5));
  EXPECT_FALSE(table_->Acquire(5));
  EXPECT_EQ(table_->live_entries(), 0);
  table_->Untrack(5);  // twice is harmless
}

TEST_F(DirectFdTableTest, PendingEntriesAreReplacedOnlyWhileTheSlotStillHoldsThem) {
  ASSERT_TRUE(table_->TrackPending(4, /*dev=*/7, /*ino=*/99));
  EXPECT_TRUE(table_->IsTracked(4));
  const FdTable::Entry* pending = nullptr;
  {
    FdTable::Ref ref = table_->Acquire(4);
    ASSERT_TRUE(ref);
    EXPECT_TRUE(ref.pending());
    EXPECT_EQ(ref.entry()->dev, 7u);
    EXPECT_EQ(ref.entry()->ino, 99u);
    pending = ref.entry();
  }
  // The first write's lease lands while the pending entry is still there.
  ASSERT_TRUE(table_->ReplaceIf(4, pending, FakeMapping(1)));
  {
    FdTable::Ref ref = table_->Acquire(4);
    ASSERT_TRUE(ref);
    EXPECT_FALSE(ref.pending());
    EXPECT_EQ(ref->walfs_ino, 1u);
    // The lease keeps the file the pending entry noted (a copy is checked against it).
    EXPECT_EQ(ref.entry()->dev, 7u);
    EXPECT_EQ(ref.entry()->ino, 99u);
  }
  EXPECT_EQ(table_->live_entries(), 1);
  // A second lease for the same (already replaced) pending entry is refused, and the
  // caller keeps its mapping.
  const LeaseMapping late = FakeMapping(2);
  EXPECT_FALSE(table_->ReplaceIf(4, pending, late));
  EXPECT_EQ(table_->Acquire(4)->walfs_ino, 1u);
  EXPECT_EQ(table_->live_entries(), 1);
  EXPECT_EQ(munmap(late.runs[0].pool_addr, 4096), 0);
  // Closed before the lease came back: nothing is installed.
  table_->Untrack(4);
  ASSERT_TRUE(table_->TrackPending(4, 7, 99));
  pending = table_->Acquire(4).entry();
  table_->Untrack(4);
  const LeaseMapping orphan = FakeMapping(3);
  EXPECT_FALSE(table_->ReplaceIf(4, pending, orphan));
  EXPECT_FALSE(table_->IsTracked(4));
  EXPECT_EQ(table_->live_entries(), 0);
  EXPECT_EQ(munmap(orphan.runs[0].pool_addr, 4096), 0);
  // Pending entries own no mapping: dropping one unmaps nothing.
  ASSERT_TRUE(table_->TrackPending(4, 7, 99));
  table_->UntrackRange(0, 10);
  EXPECT_EQ(table_->live_entries(), 0);
}

TEST_F(DirectFdTableTest, TrackReplacesAndReleasesOldEntry) {
  ASSERT_TRUE(table_->Track(3, FakeMapping(1)));
  ASSERT_TRUE(table_->Track(3, FakeMapping(2)));
  EXPECT_EQ(table_->live_entries(), 1);
  EXPECT_EQ(table_->Acquire(3)->walfs_ino, 2u);
  table_->Untrack(3);
  EXPECT_EQ(table_->live_entries(), 0);
}

TEST_F(DirectFdTableTest, Bound) {
  EXPECT_FALSE(table_->Track(FdTable::kFdBound, FakeMapping(0)));
  EXPECT_FALSE(table_->Track(-1, FakeMapping(0)));
  EXPECT_FALSE(table_->IsTracked(FdTable::kFdBound));
  EXPECT_FALSE(table_->IsTracked(-1));
  EXPECT_FALSE(table_->Acquire(FdTable::kFdBound + 7));
  ASSERT_TRUE(table_->Track(FdTable::kFdBound - 1, FakeMapping(1)));
  EXPECT_TRUE(table_->IsTracked(FdTable::kFdBound - 1));
  table_->UntrackRange(0, ~0u);
  EXPECT_EQ(table_->tracked_count(), 0);
}

TEST_F(DirectFdTableTest, UntrackRangeIsInclusive) {
  for (int fd : {3, 4, 10, 11, 12, 100}) ASSERT_TRUE(table_->Track(fd, FakeMapping(fd)));
  table_->UntrackRange(10, 11);
  EXPECT_TRUE(table_->IsTracked(3));
  EXPECT_TRUE(table_->IsTracked(4));
  EXPECT_FALSE(table_->IsTracked(10));
  EXPECT_FALSE(table_->IsTracked(11));
  EXPECT_TRUE(table_->IsTracked(12));
  table_->UntrackRange(12, ~0u);  // closefrom(12)
  EXPECT_FALSE(table_->IsTracked(12));
  EXPECT_FALSE(table_->IsTracked(100));
  EXPECT_EQ(table_->tracked_count(), 2);
  table_->UntrackRange(200, 300);  // past everything
  EXPECT_EQ(table_->tracked_count(), 2);
  table_->UntrackRange(0, 3);
  EXPECT_EQ(table_->tracked_count(), 1);
}

TEST_F(DirectFdTableTest, CollisionDropsStaleEntry) {
  ASSERT_TRUE(table_->Track(8, FakeMapping(8)));
  table_->DropIfTracked(9);
  EXPECT_TRUE(table_->IsTracked(8));
  table_->DropIfTracked(8);
  EXPECT_FALSE(table_->IsTracked(8));
  EXPECT_EQ(table_->live_entries(), 0);
}

TEST_F(DirectFdTableTest, UntrackIfSparesANewerEntry) {
  ASSERT_TRUE(table_->Track(4, FakeMapping(1)));
  // Holding the old entry keeps it from being recycled as the new one.
  FdTable::Ref old_ref = table_->Acquire(4);
  ASSERT_TRUE(table_->Track(4, FakeMapping(2)));
  table_->UntrackIf(4, old_ref.entry());
  EXPECT_TRUE(table_->IsTracked(4));
  EXPECT_EQ(table_->Acquire(4)->walfs_ino, 2u);
  old_ref.Reset();
  table_->UntrackIf(4, table_->Acquire(4).entry());
  EXPECT_FALSE(table_->IsTracked(4));
  EXPECT_EQ(table_->live_entries(), 0);
}

TEST_F(DirectFdTableTest, ReferenceKeepsMappingAliveAcrossUntrack) {
  ASSERT_TRUE(table_->Track(7, FakeMapping(7)));
  FdTable::Ref ref = table_->Acquire(7);
  ASSERT_TRUE(ref);
  table_->Untrack(7);
  EXPECT_FALSE(table_->IsTracked(7));
  EXPECT_EQ(table_->live_entries(), 1);
  // Still mapped: the store must not fault.
  memset(ref->runs[0].pool_addr, 0x5a, 4096);
  ref.Reset();
  EXPECT_EQ(table_->live_entries(), 0);
}

// A pending entry has nothing mapped, so Untrack returns it to the free list in the same
// locked section that clears its slot; a reader's reference still defers that to Reset.
TEST_F(DirectFdTableTest, PendingEntryRetiresAtUntrackOrAtItsLastReference) {
  ASSERT_TRUE(table_->TrackPending(3, /*dev=*/1, /*ino=*/2));
  EXPECT_EQ(table_->live_entries(), 1);
  table_->Untrack(3);
  EXPECT_EQ(table_->live_entries(), 0);

  ASSERT_TRUE(table_->TrackPending(3, 1, 2));
  FdTable::Ref ref = table_->Acquire(3);
  ASSERT_TRUE(ref);
  ASSERT_TRUE(ref.pending());
  table_->UntrackIf(3, ref.entry());
  EXPECT_FALSE(table_->IsTracked(3));
  EXPECT_EQ(table_->live_entries(), 1);
  EXPECT_EQ(ref.entry()->ino, 2u);
  ref.Reset();
  EXPECT_EQ(table_->live_entries(), 0);

  // Replacing a pending entry by a lease (Install's exchange) retires the pending one.
  ASSERT_TRUE(table_->TrackPending(3, 1, 2));
  ASSERT_TRUE(table_->Track(3, FakeMapping(3)));
  EXPECT_EQ(table_->live_entries(), 1);
  table_->Untrack(3);
  EXPECT_EQ(table_->live_entries(), 0);
}

// Readers store through the mapping of whatever entry they get while a writer thread
// keeps replacing and untracking entries: a reader must only ever see an entry of its
// own fd, and never a mapping already unmapped (that would fault).
TEST_F(DirectFdTableTest, ConcurrentLookupsWhileUntracking) {
  constexpr int kFds = 4;
  std::atomic<bool> stop{false};
  std::atomic<long> hits{0};
  std::atomic<long> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      long local = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int fd = 10; fd < 10 + kFds; ++fd) {
          FdTable::Ref ref = table_->Acquire(fd);
          if (!ref) continue;
          if (ref.pending()) {
            if (ref.entry()->ino != static_cast<ino_t>(fd)) wrong.fetch_add(1);
            continue;
          }
          if (ref->walfs_ino != static_cast<uint64_t>(fd)) wrong.fetch_add(1);
          memset(ref->runs[0].pool_addr, t, 512);
          ++local;
        }
      }
      hits.fetch_add(local);
    });
  }
  for (int round = 0; round < 20000; ++round) {
    const int fd = 10 + round % kFds;
    // Every fifth install is pending (no mapping), so pending and leased entries share
    // the free list, as descriptors opened only to fsync and leased ones do.
    if (round % 5 == 0) {
      ASSERT_TRUE(table_->TrackPending(fd, 1, static_cast<ino_t>(fd)));
    }
    ASSERT_TRUE(table_->Track(fd, FakeMapping(fd)));
    if (round % 3 == 0) table_->Untrack(fd);
    if (round % 7 == 0) table_->UntrackRange(10, 10 + kFds);
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  table_->UntrackRange(0, ~0u);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(hits.load(), 0);
  EXPECT_EQ(table_->live_entries(), 0);
}

}  // namespace
}  // namespace walfs::direct
