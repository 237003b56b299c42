// PowerCutRegion: only flushed-and-drained (pmem) or flushed (msync) bytes reach the
// media, and killing the process leaves the pool file with exactly those.
#include "tests/support/power_cut_region.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/persistent_region.h"
#include "core/wal_directory.h"
#include "gtest/gtest.h"
#include "tests/support/memory_region.h"
#include "tests/unit/failing_region.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

constexpr uint64_t kPage = 4096;

// A power-cut region over an in-memory media whose bytes the test can read (a
// MemoryRegion persists whatever is stored into it, so its bytes are the media).
struct Wrapped {
  std::unique_ptr<PersistentRegion> region;
  MemoryRegion* media;
};

Wrapped Wrap(std::string image, bool pmem) {
  auto media = std::make_unique<MemoryRegion>(std::move(image), pmem);
  MemoryRegion* raw = media.get();
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r = NewPowerCutRegion(std::move(media));
  EXPECT_TRUE(r.ok()) << r.status();
  return Wrapped{r.ok() ? std::move(*r) : nullptr, raw};
}

void Put(PersistentRegion& r, uint64_t off, const std::string& s) {
  r.Store(off, s.data(), s.size());
}

std::string At(const std::string& bytes, uint64_t off, size_t len) {
  return bytes.substr(off, len);
}

// The daemon of a test build hands the written image to direct-access clients as a
// memfd: what the region stores is in that file, and what a client stores there is what
// the region reads; the media still gets only persisted bytes.
TEST(PowerCutRegionTest, WrittenImageCanBeASharedMemfd) {
  std::string image(4 * kPage, '\0');
  image.replace(10, 5, "hello");
  auto media = std::make_unique<MemoryRegion>(image, /*pmem=*/true);
  MemoryRegion* raw = media.get();
  const int fd = memfd_create("image", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r = NewPowerCutRegion(std::move(media), fd);
  ASSERT_TRUE(r.ok()) << r.status();
  PersistentRegion& region = **r;
  char buf[5] = {};
  ASSERT_EQ(pread(fd, buf, 5, 10), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");  // starts as the media
  Put(region, 2 * kPage, "store");
  ASSERT_EQ(pread(fd, buf, 5, 2 * kPage), 5);
  EXPECT_EQ(std::string(buf, 5), "store");
  EXPECT_EQ(At(raw->bytes(), 2 * kPage, 5), std::string(5, '\0'));  // not persisted
  ASSERT_EQ(pwrite(fd, "peer!", 5, 3 * kPage), 5);  // a client's store
  EXPECT_EQ(std::string(region.data() + 3 * kPage, 5), "peer!");
  region.Persist(2 * kPage, 5);
  EXPECT_EQ(At(raw->bytes(), 2 * kPage, 5), "store");
  close(fd);
}

TEST(PowerCutRegionTest, StartsAsACopyOfTheMedia) {
  std::string image(4 * kPage, '\0');
  image.replace(10, 5, "hello");
  image.replace(3 * kPage + 1, 5, "world");
  for (bool pmem : {true, false}) {
    Wrapped w = Wrap(image, pmem);
    ASSERT_NE(w.region, nullptr);
    EXPECT_EQ(w.region->size(), image.size());
    EXPECT_EQ(w.region->is_pmem(), pmem);
    EXPECT_EQ(w.region->kind(), "memory+powercut");
    EXPECT_EQ(std::string(w.region->data(), w.region->size()), image);
    EXPECT_NE(w.region->data(), w.media->bytes().data());
    EXPECT_TRUE(w.region->health().ok());
  }
}

TEST(PowerCutRegionTest, PmemOnlyFlushedAndDrainedBytesReachTheMedia) {
  Wrapped w = Wrap(std::string(4 * kPage, '.'), /*pmem=*/true);
  PersistentRegion& r = *w.region;
  const std::string& media = w.media->bytes();

  Put(r, 100, "stored");
  EXPECT_EQ(std::string(r.data() + 100, 6), "stored");  // reads see the written image
  r.Drain();
  EXPECT_EQ(At(media, 100, 6), "......") << "a store nobody flushed is not durable";

  r.Flush(100, 6);
  EXPECT_EQ(At(media, 100, 6), "......") << "flushed but not fenced";
  r.Drain();
  EXPECT_EQ(At(media, 100, 6), "stored");

  // Exactly the flushed bytes: no widening to the cache line or page.
  Put(r, 200, "abcdefgh");
  r.Persist(202, 3);
  EXPECT_EQ(At(media, 200, 8), "..cde...");

  // Fill, and a store made between Flush and Drain (a cache line may hold it by then).
  r.Fill(kPage, 'z', 10);
  r.Flush(kPage, 10);
  Put(r, kPage + 2, "NEW");
  r.Drain();
  EXPECT_EQ(At(media, kPage, 10), "zzNEWzzzzz");

  // A drain persists nothing twice and nothing new.
  Put(r, kPage, "after");
  r.Drain();
  EXPECT_EQ(At(media, kPage, 10), "zzNEWzzzzz");
}

TEST(PowerCutRegionTest, PmemDrainPersistsOnlyTheCallingThreadsFlushes) {
  Wrapped w = Wrap(std::string(2 * kPage, '.'), /*pmem=*/true);
  PersistentRegion& r = *w.region;
  const std::string& media = w.media->bytes();

  // `other` flushes and stays alive until the end (an exited thread's id may be reused
  // by the next thread, which would then drain what it left).
  std::promise<void> flushed, done;
  std::thread other([&] {
    Put(r, kPage, "theirs");
    r.Flush(kPage, 6);
    flushed.set_value();
    done.get_future().wait();
  });
  flushed.get_future().wait();
  Put(r, 0, "mine");
  r.Persist(0, 4);
  EXPECT_EQ(At(media, 0, 4), "mine");
  EXPECT_EQ(At(media, kPage, 6), "......") << "SFENCE orders only the issuing thread";

  std::thread drainer([&] {
    Put(r, kPage + 10, "own");
    r.Persist(kPage + 10, 3);
  });
  drainer.join();
  EXPECT_EQ(At(media, kPage + 10, 3), "own");
  EXPECT_EQ(At(media, kPage, 6), "......");
  done.set_value();
  other.join();
}

TEST(PowerCutRegionTest, PmemConcurrentWritersOnDisjointRanges) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  Wrapped w = Wrap(std::string(kThreads * kPage, '\0'), /*pmem=*/true);
  PersistentRegion& r = *w.region;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::string v = std::to_string(t * 100000 + i);
        const uint64_t off = t * kPage + (i % 8) * 64;
        Put(r, off, v);
        r.Flush(off, v.size());
        if (i % 3 == 0) r.Drain();
      }
      r.Drain();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(w.media->bytes(), std::string(r.data(), r.size()));
}

TEST(PowerCutRegionTest, MsyncFlushWritesWholePagesBack) {
  Wrapped w = Wrap(std::string(4 * kPage, '.'), /*pmem=*/false);
  PersistentRegion& r = *w.region;
  const std::string& media = w.media->bytes();

  Put(r, 10, "first");
  Put(r, kPage - 2, "span");  // pages 0 and 1
  Put(r, 2 * kPage + 5, "third");
  r.Drain();
  EXPECT_EQ(media, std::string(4 * kPage, '.')) << "nothing was msynced";

  r.Flush(12, 1);  // one byte of page 0: msync writes the whole page
  EXPECT_EQ(At(media, 10, 5), "first");
  EXPECT_EQ(At(media, kPage - 2, 4), "sp..") << "page 1 was not msynced";
  EXPECT_EQ(At(media, 2 * kPage + 5, 5), ".....");

  r.Flush(kPage - 1, kPage + 2);  // pages 0..2
  EXPECT_EQ(At(media, kPage - 2, 4), "span");
  EXPECT_EQ(At(media, 2 * kPage + 5, 5), "third");

  r.Fill(3 * kPage + 1, 'f', 3);
  r.Flush(4 * kPage - 1, 1);  // the last page
  EXPECT_EQ(At(media, 3 * kPage, 5), ".fff.");
  EXPECT_EQ(media, std::string(r.data(), r.size()));
}

TEST(PowerCutRegionTest, HealthIsTheMedias) {
  auto media = std::make_unique<testing::FailingRegion>(std::string(kPage, '\0'), false);
  testing::FailingRegion* raw = media.get();
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r = NewPowerCutRegion(std::move(media));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->kind(), "failing+powercut");
  (*r)->Store(0, "x", 1);
  raw->FailFlushes();
  EXPECT_TRUE((*r)->health().ok());
  (*r)->Persist(0, 1);
  EXPECT_EQ((*r)->health().code(), absl::StatusCode::kDataLoss);
}

TEST(PowerCutRegionDeathTest, OutOfRangeAborts) {
  Wrapped w = Wrap(std::string(kPage, '\0'), /*pmem=*/true);
  EXPECT_DEATH(w.region->Store(kPage - 2, "abc", 3), "outside power-cut region");
  EXPECT_DEATH(w.region->Flush(kPage + 1, 0), "outside power-cut region");
}

TEST(PowerCutRegionTest, CleanCloseLeavesEverythingOnMedia) {
  // A pool used through the power-cut region and closed cleanly is the same pool.
  for (bool pmem : {true, false}) {
    Wrapped w = Wrap(testing::FormattedImage(), pmem);
    MemoryRegion* media = w.media;
    auto dir = WalDirectory::Open(std::move(w.region));
    ASSERT_TRUE(dir.ok()) << dir.status();
    auto f = (*dir)->names().Create(kRootInode, "file", 0600, Caller{}, true);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*dir)->data().Write(f->ino, 0, testing::Bytes("contents"), false).ok());
    ASSERT_TRUE((*dir)->Close().ok());
    EXPECT_EQ(std::string((*dir)->region().data(), (*dir)->region().size()), media->bytes());
  }
}

// --- over a real pool file, killed with SIGKILL ----------------------------------------

std::string TempBase() {
  std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : ::testing::TempDir();
  if (!base.empty() && base.back() == '/') base.pop_back();
  return base;
}

std::string ReadFile(const std::string& path, size_t off, size_t len) {
  std::string out(len, '\0');
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = ::pread(fd, out.data(), len, static_cast<off_t>(off));
  ::close(fd);
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

// In a fresh process (libpmem reads PMEM_IS_PMEM_FORCE once, at its first
// pmem_is_pmem(); the "threadsafe" death-test style re-executes this binary): opens the
// pool file at `path` through a power-cut region, stores
//   "durable" at 100 and persists it,
//   "flushed" at 5000 and flushes it without a drain,
//   "written" at 9000 (page 2) with no flush at all,
// then dies by SIGKILL. Anything wrong exits with status 1 instead.
void StoreAndKill(const std::string& path, bool pmem) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* old = std::getenv("PMEM_IS_PMEM_FORCE");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("PMEM_IS_PMEM_FORCE", pmem ? "1" : "0", 1);
  EXPECT_EXIT(
      {
        absl::StatusOr<std::unique_ptr<PersistentRegion>> media = OpenPmemRegion(path);
        if (!media.ok() || (*media)->is_pmem() != pmem) std::exit(1);
        absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
            NewPowerCutRegion(std::move(*media));
        if (!r.ok()) std::exit(1);
        PersistentRegion& region = **r;
        if (region.kind() != (pmem ? "pmem+powercut" : "msync+powercut")) std::exit(1);
        if (std::string(region.data() + 20000, 3) != "old") std::exit(1);
        region.Store(100, "durable", 7);
        region.Persist(100, 7);
        region.Store(5000, "flushed", 7);
        region.Flush(5000, 7);
        region.Store(9000, "written", 7);
        ::raise(SIGKILL);
      },
      ::testing::KilledBySignal(SIGKILL), "");
  if (saved) {
    ::setenv("PMEM_IS_PMEM_FORCE", saved->c_str(), 1);
  } else {
    ::unsetenv("PMEM_IS_PMEM_FORCE");
  }
}

// Removes a directory tree at scope exit.
class ScopedDir {
 public:
  explicit ScopedDir(std::string path) : path_(std::move(path)) {}
  ~ScopedDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedDir(const ScopedDir&) = delete;
  ScopedDir& operator=(const ScopedDir&) = delete;

 private:
  std::string path_;
};

class PowerCutFileTest : public ::testing::TestWithParam<bool> {};

TEST_P(PowerCutFileTest, KillLeavesOnlyThePersistedImage) {
  const bool pmem = GetParam();
  // The death-test child re-runs this body up to EXPECT_EXIT; it finds the parent's pool
  // through the environment instead of making one of its own.
  constexpr char kPoolEnv[] = "WALFS_TEST_POWERCUT_POOL";
  std::string path;
  std::optional<ScopedDir> cleanup;
  if (const char* inherited = std::getenv(kPoolEnv)) {
    path = inherited;
  } else {
    std::string tmpl = TempBase() + "/walfs_powercut_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    cleanup.emplace(tmpl);
    path = tmpl + "/pool";
    absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
        OpenPmemRegion(path, PmemOpenOptions{.create_size = 8 * kPage});
    ASSERT_TRUE(r.ok()) << r.status();
    (*r)->Store(20000, "old", 3);
    (*r)->Persist(20000, 3);
    ::setenv(kPoolEnv, path.c_str(), 1);
  }
  StoreAndKill(path, pmem);
  ::unsetenv(kPoolEnv);
  EXPECT_EQ(ReadFile(path, 100, 7), "durable");
  // pmem: a flush without a fence is not durable; msync: the flush is the msync.
  EXPECT_EQ(ReadFile(path, 5000, 7), pmem ? std::string(7, '\0') : "flushed");
  EXPECT_EQ(ReadFile(path, 9000, 7), std::string(7, '\0'));
  EXPECT_EQ(ReadFile(path, 20000, 3), "old");
}

INSTANTIATE_TEST_SUITE_P(Modes, PowerCutFileTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Pmem" : "Msync";
                         });

}  // namespace
}  // namespace walfs::core
