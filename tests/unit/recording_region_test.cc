#include "tests/support/recording_region.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace walfs::core {
namespace {

using Options = RecordingRegion::CrashEnumOptions;

std::string Word(char c) { return std::string(8, c); }

void StoreString(RecordingRegion& r, uint64_t off, const std::string& s) {
  r.Store(off, s.data(), s.size());
}

std::vector<std::string> Images(const RecordingRegion& r, const Options& options) {
  std::vector<std::string> images;
  const size_t n = r.ForEachCrashImage(options, [&](const std::string& image) {
    images.push_back(image);
  });
  EXPECT_EQ(n, images.size());
  return images;
}

Options Only(int max_subset, bool complements, bool prefixes, bool tear) {
  Options o;
  o.max_subset = max_subset;
  o.complements = complements;
  o.prefixes = prefixes;
  o.tear = tear;
  return o;
}

// A thread of its own that runs the closures it is given one at a time, Run returning
// when the closure has: a second writer with a stable thread id, stepped by the test.
class Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Run(std::function<void()> fn) {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = std::move(fn);
    cv_.notify_all();
    cv_.wait(lock, [this] { return !job_; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || job_; });
      if (!job_) return;
      job_();
      job_ = nullptr;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool stop_ = false;
  std::thread thread_;
};

TEST(RecordingRegionTest, StartsDurableFromImage) {
  RecordingRegion r(std::string("0123456789abcdef"), /*pmem_semantics=*/true);
  EXPECT_EQ(r.size(), 16u);
  EXPECT_EQ(r.kind(), "recording");
  EXPECT_TRUE(r.is_pmem());
  EXPECT_EQ(std::string(r.data(), r.size()), "0123456789abcdef");
  EXPECT_EQ(r.DurableImage(), "0123456789abcdef");
  EXPECT_EQ(r.in_flight(), 0u);
  EXPECT_EQ(Images(r, Options()).size(), 1u);
}

TEST(RecordingRegionTest, UnflushedStoreIsNotDurable) {
  RecordingRegion r(256, true);
  StoreString(r, 0, Word('a'));
  r.Drain();
  r.Drain();
  EXPECT_EQ(r.data()[0], 'a');
  EXPECT_EQ(r.DurableImage(), std::string(256, '\0'));
  EXPECT_EQ(r.in_flight(), 1u);
  EXPECT_EQ(r.durability_points(), 2u);
  // Still in flight across fences: a later Flush covering it makes it durable.
  r.Persist(0, 8);
  EXPECT_EQ(r.DurableImage().substr(0, 8), Word('a'));
  EXPECT_EQ(r.in_flight(), 0u);
}

TEST(RecordingRegionTest, FlushedAndDrainedIsDurable) {
  RecordingRegion r(256, true);
  StoreString(r, 64, Word('b'));
  r.Flush(64, 8);
  r.Drain();
  std::string expected(256, '\0');
  expected.replace(64, 8, Word('b'));
  EXPECT_EQ(r.DurableImage(), expected);
  EXPECT_EQ(r.in_flight(), 0u);
  EXPECT_EQ(Images(r, Options()).size(), 1u);
}

TEST(RecordingRegionTest, FlushedButNotDrainedIsInFlight) {
  RecordingRegion r(256, true);
  StoreString(r, 0, Word('c'));
  r.Flush(0, 8);
  EXPECT_EQ(r.DurableImage(), std::string(256, '\0'));
  EXPECT_EQ(r.in_flight(), 1u);
  std::vector<std::string> images = Images(r, Options());
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0], std::string(256, '\0'));
  EXPECT_EQ(images[1].substr(0, 8), Word('c'));
}

TEST(RecordingRegionTest, FlushBeforeStoreDoesNotCoverIt) {
  RecordingRegion r(256, true);
  r.Flush(0, 8);
  StoreString(r, 0, Word('d'));
  r.Drain();
  EXPECT_EQ(r.DurableImage(), std::string(256, '\0'));
  EXPECT_EQ(r.in_flight(), 1u);
}

TEST(RecordingRegionTest, FlushCoversWholeCacheLines) {
  RecordingRegion r(256, true);
  StoreString(r, 8, Word('e'));    // same line as byte 0
  StoreString(r, 64, Word('f'));   // next line
  r.Flush(0, 1);
  r.Drain();
  const std::string durable = r.DurableImage();
  EXPECT_EQ(durable.substr(8, 8), Word('e'));
  EXPECT_EQ(durable.substr(64, 8), std::string(8, '\0'));
  EXPECT_EQ(r.in_flight(), 1u);
}

TEST(RecordingRegionTest, PartialFlushSplitsUnit) {
  RecordingRegion r(256, true);
  StoreString(r, 0, std::string(128, 'g'));
  r.Flush(0, 64);
  r.Drain();
  const std::string durable = r.DurableImage();
  EXPECT_EQ(durable.substr(0, 64), std::string(64, 'g'));
  EXPECT_EQ(durable.substr(64, 64), std::string(64, '\0'));
  ASSERT_EQ(r.in_flight(), 1u);
  // The remaining unit is [64, 128): one image without it, one with it.
  std::vector<std::string> images = Images(r, Only(1, false, false, false));
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[1], std::string(128, 'g') + std::string(128, '\0'));
}

TEST(RecordingRegionTest, FlushAfterTwoStoresMakesTheNewerDurable) {
  RecordingRegion r(64, true);
  StoreString(r, 0, Word('1'));
  StoreString(r, 0, Word('2'));
  r.Persist(0, 8);
  EXPECT_EQ(r.DurableImage().substr(0, 8), Word('2'));
  EXPECT_EQ(r.in_flight(), 0u);
}

TEST(RecordingRegionTest, StoreAfterFlushStaysInFlight) {
  RecordingRegion r(64, true);
  StoreString(r, 0, Word('1'));
  r.Flush(0, 8);
  StoreString(r, 0, Word('2'));
  r.Drain();
  EXPECT_EQ(r.DurableImage().substr(0, 8), Word('1'));
  EXPECT_EQ(r.in_flight(), 1u);
  std::vector<std::string> images = Images(r, Options());
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].substr(0, 8), Word('1'));
  EXPECT_EQ(images[1].substr(0, 8), Word('2'));
}

// SFENCE orders only its own thread's flushes: a Drain in this thread leaves another
// thread's flushed store in flight until that thread drains.
TEST(RecordingRegionTest, DrainMakesDurableOnlyTheCallingThreadsFlushes) {
  RecordingRegion r(256, true);
  Worker other;
  other.Run([&] {
    StoreString(r, 64, Word('o'));
    r.Flush(64, 8);
  });
  StoreString(r, 0, Word('m'));
  r.Flush(0, 8);
  r.Drain();
  std::string durable = r.DurableImage();
  EXPECT_EQ(durable.substr(0, 8), Word('m'));
  EXPECT_EQ(durable.substr(64, 8), std::string(8, '\0'));
  EXPECT_EQ(r.in_flight(), 1u);
  other.Run([&] { r.Drain(); });
  EXPECT_EQ(r.DurableImage().substr(64, 8), Word('o'));
  EXPECT_EQ(r.in_flight(), 0u);
}

// A flush covers the line whoever stored into it: this thread's Flush and Drain make
// another thread's store durable.
TEST(RecordingRegionTest, OwnFlushCoversAnotherThreadsStore) {
  RecordingRegion r(256, true);
  Worker other;
  other.Run([&] { StoreString(r, 8, Word('o')); });
  r.Persist(0, 16);
  EXPECT_EQ(r.DurableImage().substr(8, 8), Word('o'));
  EXPECT_EQ(r.in_flight(), 0u);
}

// The bug the per-thread model exists to catch: a writer thread stores and flushes a
// record, a committer thread drains and then treats the record as durable. At the
// committer's next durability point a crash can still lose the record, and the check a
// crash test makes (every acknowledged byte is in every crash image) reports it. With
// the writer draining its own flush, the same check finds nothing.
int ImagesLosingAcknowledgedRecord(bool writer_drains) {
  RecordingRegion r(256, true);
  bool acknowledged = false;
  int losing = 0;
  r.SetDurabilityHook([&] {
    if (!acknowledged) return;
    r.ForEachCrashImage([&](const std::string& image) {
      if (image.substr(64, 8) != Word('R')) ++losing;
    });
  });
  Worker writer;
  writer.Run([&] {
    StoreString(r, 64, Word('R'));
    r.Flush(64, 8);
    if (writer_drains) r.Drain();
  });
  r.Drain();  // the committer's fence
  acknowledged = true;
  StoreString(r, 128, Word('c'));  // the committer goes on: its next durability point
  r.Persist(128, 8);
  return losing;
}

TEST(RecordingRegionTest, RelyingOnAnotherThreadsDrainLosesData) {
  EXPECT_GT(ImagesLosingAcknowledgedRecord(/*writer_drains=*/false), 0);
  EXPECT_EQ(ImagesLosingAcknowledgedRecord(/*writer_drains=*/true), 0);
}

// With two writers, a store from another thread while the hook runs waits for the hook
// (the hook sees one frozen state) instead of aborting.
TEST(RecordingRegionTest, OtherThreadsWaitWhileTheHookRuns) {
  RecordingRegion r(256, true);
  std::atomic<bool> stored{false};
  std::thread other;
  std::string durable_in_hook;
  size_t in_flight_in_hook = 0;
  r.SetDurabilityHook([&] {
    if (other.joinable()) return;
    other = std::thread([&] {
      StoreString(r, 64, Word('w'));
      stored = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(stored.load());
    in_flight_in_hook = r.in_flight();
    durable_in_hook = r.DurableImage();
  });
  StoreString(r, 0, Word('h'));
  r.Persist(0, 8);
  other.join();
  EXPECT_TRUE(stored.load());
  EXPECT_EQ(in_flight_in_hook, 1u);  // only 'h': the other store had not happened
  EXPECT_EQ(durable_in_hook, std::string(256, '\0'));
  EXPECT_EQ(r.current().substr(64, 8), Word('w'));
}

TEST(RecordingRegionTest, FillIsAStoreUnit) {
  RecordingRegion r(128, true);
  r.Fill(16, 0x5a, 8);
  EXPECT_EQ(r.in_flight(), 1u);
  EXPECT_EQ(r.data()[16], 0x5a);
  r.Persist(16, 8);
  EXPECT_EQ(r.DurableImage().substr(16, 8), std::string(8, 0x5a));
}

// Three one-word stores in different lines, nothing flushed: 2^3 subsets exist.
class SubsetCountTest : public ::testing::Test {
 protected:
  SubsetCountTest() : r_(256, true) {
    StoreString(r_, 0, Word('A'));
    StoreString(r_, 64, Word('B'));
    StoreString(r_, 128, Word('C'));
  }
  RecordingRegion r_;
};

TEST_F(SubsetCountTest, SingletonsOnly) {
  EXPECT_EQ(Images(r_, Only(1, false, false, false)).size(), 4u);  // {}, A, B, C
}

TEST_F(SubsetCountTest, Pairs) {
  EXPECT_EQ(Images(r_, Only(2, false, false, false)).size(), 7u);  // + AB, AC, BC
}

TEST_F(SubsetCountTest, ComplementsCompleteTheLattice) {
  EXPECT_EQ(Images(r_, Only(1, true, false, false)).size(), 8u);  // + ABC, AB, AC, BC
}

TEST_F(SubsetCountTest, PrefixesInProgramOrder) {
  std::vector<std::string> images = Images(r_, Only(0, false, true, false));
  ASSERT_EQ(images.size(), 4u);  // {}, A, AB, ABC
  EXPECT_EQ(images[3], std::string(r_.data(), r_.size()));
  EXPECT_EQ(images[2].substr(64, 8), Word('B'));
  EXPECT_EQ(images[2].substr(128, 8), std::string(8, '\0'));
}

TEST_F(SubsetCountTest, MaxImagesStopsEarly) {
  Options o = Options();
  o.max_images = 5;
  EXPECT_EQ(Images(r_, o).size(), 5u);
  o.max_images = 0;
  EXPECT_EQ(Images(r_, o).size(), 0u);
}

TEST_F(SubsetCountTest, EveryImageIsASubset) {
  std::set<std::string> images;
  for (const std::string& image : Images(r_, Options())) images.insert(image);
  std::set<std::string> expected;
  for (int mask = 0; mask < 8; ++mask) {
    std::string image(256, '\0');
    if (mask & 1) image.replace(0, 8, Word('A'));
    if (mask & 2) image.replace(64, 8, Word('B'));
    if (mask & 4) image.replace(128, 8, Word('C'));
    expected.insert(image);
  }
  EXPECT_EQ(images, expected);
}

TEST(RecordingRegionTest, DuplicateImagesAreSkipped) {
  RecordingRegion r(64, true);
  StoreString(r, 0, Word('1'));
  StoreString(r, 0, Word('2'));
  // {} -> 0, {1} -> 1, {2} and {1,2} -> 2.
  EXPECT_EQ(Images(r, Only(2, true, true, true)).size(), 3u);
}

TEST(RecordingRegionTest, StoreOfUnchangedBytesAddsNoImage) {
  RecordingRegion r(64, true);
  StoreString(r, 0, std::string(8, '\0'));
  EXPECT_EQ(r.in_flight(), 1u);
  EXPECT_EQ(Images(r, Options()).size(), 1u);
}

// True when every aligned 8-byte word of `image` equals that word in `before` or in
// `after`.
bool WordsAreOldOrNew(const std::string& image, const std::string& before,
                      const std::string& after) {
  for (size_t w = 0; w < image.size(); w += 8) {
    const std::string word = image.substr(w, 8);
    if (word != before.substr(w, 8) && word != after.substr(w, 8)) return false;
  }
  return true;
}

TEST(RecordingRegionTest, TearsAtWordGranularity) {
  RecordingRegion r(64, true);
  const std::string data = "AAAAAAAABBBBBBBBCCCCCCCCDDDDDDDD";
  StoreString(r, 8, data);
  const std::string before(64, '\0');
  const std::string after(r.data(), r.size());
  std::set<std::string> images;
  for (const std::string& image : Images(r, Options())) {
    EXPECT_TRUE(WordsAreOldOrNew(image, before, after));
    images.insert(image);
  }
  // Nothing, everything, and the first or last 1, 2, 3 of the 4 words.
  std::set<std::string> expected = {before, after};
  for (size_t p = 1; p <= 3; ++p) {
    std::string prefix = before;
    prefix.replace(8, 8 * p, data.substr(0, 8 * p));
    expected.insert(prefix);
    std::string suffix = before;
    suffix.replace(8 + 32 - 8 * p, 8 * p, data.substr(32 - 8 * p));
    expected.insert(suffix);
  }
  EXPECT_EQ(images.size(), 8u);
  EXPECT_EQ(images, expected);
}

TEST(RecordingRegionTest, UnalignedStoreTearsAtAlignedWords) {
  RecordingRegion r(32, true);
  StoreString(r, 4, std::string(12, 'x'));  // bytes 4..7 of word 0, all of word 1
  std::set<std::string> images;
  for (const std::string& image : Images(r, Options())) images.insert(image);
  std::string first = std::string(32, '\0');
  first.replace(4, 4, "xxxx");
  std::string second = std::string(32, '\0');
  second.replace(8, 8, std::string(8, 'x'));
  std::set<std::string> expected = {std::string(32, '\0'), std::string(r.data(), r.size()),
                                    first, second};
  EXPECT_EQ(images, expected);
}

TEST(RecordingRegionTest, TearCombinesWithOtherUnits) {
  RecordingRegion r(256, true);
  StoreString(r, 0, std::string(16, 'd'));    // two words
  StoreString(r, 128, Word('c'));             // e.g. a commit flag
  std::string torn_with_commit(256, '\0');
  torn_with_commit.replace(0, 8, Word('d'));
  torn_with_commit.replace(128, 8, Word('c'));
  bool seen = false;
  r.ForEachCrashImage(Options(), [&](const std::string& image) {
    seen = seen || image == torn_with_commit;
  });
  EXPECT_TRUE(seen);
  // Without tearing, the only images are the 4 subsets.
  EXPECT_EQ(Images(r, Only(2, true, true, false)).size(), 4u);
}

TEST(RecordingRegionTest, MsyncDirtyPagesAndFlush) {
  RecordingRegion r(3 * 4096, /*pmem_semantics=*/false);
  EXPECT_FALSE(r.is_pmem());
  StoreString(r, 10, "a");
  StoreString(r, 100, "b");
  StoreString(r, 2 * 4096 + 5, "c");
  r.Drain();  // not a durability point for msync
  EXPECT_EQ(r.durability_points(), 0u);
  EXPECT_EQ(r.in_flight(), 2u);
  EXPECT_EQ(r.DurableImage(), std::string(3 * 4096, '\0'));

  // Flushing one byte writes its whole page, including the other store on it.
  r.Flush(10, 1);
  EXPECT_EQ(r.durability_points(), 1u);
  std::string durable = r.DurableImage();
  EXPECT_EQ(durable[10], 'a');
  EXPECT_EQ(durable[100], 'b');
  EXPECT_EQ(durable[2 * 4096 + 5], '\0');
  EXPECT_EQ(r.in_flight(), 1u);

  // A range straddling a page boundary writes both pages.
  StoreString(r, 4095, "yz");
  EXPECT_EQ(r.in_flight(), 3u);
  r.Flush(4095, 2);
  durable = r.DurableImage();
  EXPECT_EQ(durable.substr(4095, 2), "yz");
  EXPECT_EQ(r.in_flight(), 1u);
  r.Flush(0, r.size());
  EXPECT_EQ(r.DurableImage(), std::string(r.data(), r.size()));
  EXPECT_EQ(r.in_flight(), 0u);
}

TEST(RecordingRegionTest, MsyncSubsetsArePages) {
  RecordingRegion r(3 * 4096, false);
  StoreString(r, 10, "a");
  StoreString(r, 12, "b");  // same page and word as 'a': one unit, one changed word
  StoreString(r, 2 * 4096, "c");
  std::vector<std::string> images = Images(r, Options());
  // {}, {page 0}, {page 2}, {both}.
  ASSERT_EQ(images.size(), 4u);
  for (const std::string& image : images) {
    EXPECT_EQ(image[10] == 'a', image[12] == 'b');  // a page lands whole
  }
}

TEST(RecordingRegionTest, MsyncPageTears) {
  RecordingRegion r(4096, false);
  StoreString(r, 10, "a");
  StoreString(r, 100, "b");  // another word of the same page
  std::set<std::string> images;
  for (const std::string& image : Images(r, Options())) images.insert(image);
  std::string only_a(4096, '\0');
  only_a[10] = 'a';
  std::string only_b(4096, '\0');
  only_b[100] = 'b';
  std::set<std::string> expected = {std::string(4096, '\0'), std::string(r.data(), r.size()),
                                    only_a, only_b};
  EXPECT_EQ(images, expected);
}

TEST(RecordingRegionTest, HookRunsAtEachDrainBeforeItTakesEffect) {
  RecordingRegion r(256, true);
  std::vector<uint64_t> points;
  std::vector<size_t> images_at_point;
  std::vector<std::string> durable_at_point;
  std::vector<std::string> first_point_images;
  r.SetDurabilityHook([&] {
    points.push_back(r.durability_points());
    durable_at_point.push_back(r.DurableImage());
    images_at_point.push_back(r.ForEachCrashImage(Options(), [&](const std::string& image) {
      if (points.size() == 1) first_point_images.push_back(image);
    }));
  });
  StoreString(r, 0, Word('x'));
  r.Flush(0, 8);  // not a durability point for pmem
  EXPECT_TRUE(points.empty());
  r.Drain();
  StoreString(r, 64, Word('y'));
  StoreString(r, 128, Word('z'));
  r.Persist(64, 72);
  r.Drain();
  EXPECT_EQ(points, (std::vector<uint64_t>{1, 2, 3}));
  // At the first Drain 'x' was flushed but not yet durable.
  EXPECT_EQ(durable_at_point[0], std::string(256, '\0'));
  EXPECT_EQ(images_at_point[0], 2u);
  ASSERT_EQ(first_point_images.size(), 2u);
  EXPECT_EQ(first_point_images[0], std::string(256, '\0'));
  EXPECT_EQ(first_point_images[1], Word('x') + std::string(248, '\0'));
  EXPECT_EQ(durable_at_point[1].substr(0, 8), Word('x'));
  EXPECT_EQ(images_at_point[1], 4u);  // subsets of {y, z}
  EXPECT_EQ(images_at_point[2], 1u);
  r.SetDurabilityHook(nullptr);
  r.Drain();
  EXPECT_EQ(points.size(), 3u);
  EXPECT_EQ(r.durability_points(), 4u);
}

TEST(RecordingRegionTest, HookRunsAtEachMsyncFlush) {
  RecordingRegion r(2 * 4096, false);
  int calls = 0;
  r.SetDurabilityHook([&] {
    ++calls;
    EXPECT_EQ(r.DurableImage()[0], '\0');
  });
  StoreString(r, 0, "q");
  r.Drain();
  EXPECT_EQ(calls, 0);
  r.Flush(0, 1);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.DurableImage()[0], 'q');
}

TEST(RecordingRegionTest, ImageCallbackMayQueryTheRegion) {
  RecordingRegion r(64, true);
  StoreString(r, 0, Word('q'));
  size_t calls = 0;
  const size_t n = r.ForEachCrashImage([&](const std::string& image) {
    ++calls;
    EXPECT_EQ(r.in_flight(), 1u);
    EXPECT_EQ(r.DurableImage(), std::string(64, '\0'));
    EXPECT_EQ(image.size(), 64u);
  });
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(calls, 2u);
}

TEST(RecordingRegionDeathTest, MutationFromHookAborts) {
  RecordingRegion r(64, true);
  r.SetDurabilityHook([&] { r.Store(0, "x", 1); });
  EXPECT_DEATH(r.Drain(), "Store called from the durability hook");
}

TEST(RecordingRegionDeathTest, OutOfRangeStoreAborts) {
  RecordingRegion r(64, true);
  EXPECT_DEATH(r.Store(60, "12345678", 8), "outside region");
  EXPECT_DEATH(r.Flush(65, 0), "outside region");
}

// Many small units on a few MiB: the exact count of distinct subsets, fast.
TEST(RecordingRegionTest, ScalesToThousandsOfImages) {
  constexpr uint64_t kSize = 4 << 20;
  constexpr int kUnits = 200;
  RecordingRegion r(kSize, true);
  for (int i = 0; i < kUnits; ++i) {
    uint64_t v = 0x0101010101010101ull * static_cast<uint64_t>(i + 1);
    r.Store(static_cast<uint64_t>(i) * 20480, &v, sizeof(v));
  }
  size_t checked = 0;
  const size_t n = r.ForEachCrashImage(Options(), [&](const std::string& image) {
    if (checked++ % 4096 == 0) {
      EXPECT_EQ(image.size(), kSize);
    }
  });
  // Sizes 0, 1, 2, n-2, n-1, n, plus one prefix of each size 3..n-3.
  const size_t pairs = kUnits * (kUnits - 1) / 2;
  EXPECT_EQ(n, 1 + kUnits + pairs + pairs + kUnits + 1 + (kUnits - 5));
}

// ZeroUnlessZero stores only over pages that do not read as zero, yet leaves the whole
// range durably zero: a page that reads as zero over older non-zero media is flushed.
class ZeroUnlessZeroTest : public testing::TestWithParam<bool> {};

TEST_P(ZeroUnlessZeroTest, StoresOnlyNonZeroPagesAndLeavesTheRangeDurablyZero) {
  constexpr uint64_t kPage = RecordingRegion::kPageSize;
  std::string image(8 * kPage, '\0');
  image.replace(0, 100, std::string(100, 'h'));                  // before the range
  image.replace(2 * kPage, kPage, std::string(kPage, 'x'));      // a written page
  image[5 * kPage + 4000] = 'y';                                 // one byte of a page
  image.replace(6 * kPage, kPage, std::string(kPage, 'z'));      // zeroed below, unflushed
  image.replace(8 * kPage - 100, 100, std::string(100, 't'));    // after the range
  RecordingRegion r(image, /*pmem_semantics=*/GetParam());
  r.Fill(6 * kPage, 0, kPage);  // reads as zero; the media still holds 'z'
  ASSERT_NE(r.DurableImage().substr(6 * kPage, kPage), std::string(kPage, '\0'));

  const uint64_t begin = 100, end = 8 * kPage - 100;
  EXPECT_EQ(ZeroUnlessZero(r, begin, end - begin), 2 * kPage);  // pages 2 and 5 only
  r.Drain();

  std::string expected = image;
  expected.replace(begin, end - begin, std::string(end - begin, '\0'));
  EXPECT_EQ(std::string(r.data(), r.size()), expected);
  EXPECT_EQ(r.DurableImage(), expected);
  EXPECT_EQ(r.in_flight(), 0u);
}

TEST_P(ZeroUnlessZeroTest, ZeroRangeIsNotStoredTo) {
  RecordingRegion r(4 * RecordingRegion::kPageSize, GetParam());
  EXPECT_EQ(ZeroUnlessZero(r, 10, r.size() - 20), 0u);
  EXPECT_EQ(r.in_flight(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Models, ZeroUnlessZeroTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "Pmem" : "Msync";
                         });

}  // namespace
}  // namespace walfs::core
