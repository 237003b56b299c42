// The production copy path (TryDirectWrite / StoreDirect) under the crash model.
//
// A leased file of two runs is backed by a RecordingRegion (pmem semantics) through a
// persistor that forwards Store/Flush/Drain to it. At every fence, and again after each
// write returns, every image a power failure could leave is checked: every write that
// returned is fully present, and every 8-byte word the in-progress write touches is old
// or new. A persistor that omits the drain must be caught losing an acknowledged write.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fs/direct/direct_write.h"
#include "gtest/gtest.h"
#include "tests/support/recording_region.h"

namespace walfs::direct {
namespace {

using core::RecordingRegion;

constexpr uint64_t kPoolSize = 64 * 1024;
constexpr uint64_t kPage = 8192;

struct RecordingPersistor {
  RecordingRegion& region;
  void Store(const MappedRun& run, uint64_t off, const void* src, size_t n) {
    region.Store(run.pool_offset + off, src, n);
  }
  void Flush(const MappedRun& run, uint64_t off, size_t n) {
    region.Flush(run.pool_offset + off, n);
  }
  void Drain() { region.Drain(); }
};

// Deliberately broken: stores and flushes, never fences.
struct NoDrainPersistor {
  RecordingRegion& region;
  void Store(const MappedRun& run, uint64_t off, const void* src, size_t n) {
    region.Store(run.pool_offset + off, src, n);
  }
  void Flush(const MappedRun& run, uint64_t off, size_t n) {
    region.Flush(run.pool_offset + off, n);
  }
  void Drain() {}
};

struct Write {
  uint64_t offset;
  std::vector<std::string> pieces;  // one iovec each
};

// A page whose 8-byte words all differ from each other and from other generations.
std::string Page(int generation, size_t len = kPage) {
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i) s[i] = static_cast<char>(1 + (generation * 31 + i / 8 * 7 + i) % 251);
  return s;
}

class Harness {
 public:
  Harness() : region_(kPoolSize, /*pmem_semantics=*/true) {
    char path[] = "/dev/shm/walfs-direct-crash-XXXXXX";
    fd_ = mkstemp(path);
    EXPECT_GE(fd_, 0);
    unlink(path);
    // File [0, 16K) at pool 40K, file [16K, 40K) at pool 8K; the lease ends 1000 bytes
    // into the last block.
    LeaseMapping m;
    m.stamp = &stamp_;
    m.stamp_value = stamp_.load();
    m.leased_size = 36 * 1024 + 1000;
    m.run_count = 2;
    m.runs[0] = {.file_offset = 0, .length = 16 * 1024, .pool_offset = 40 * 1024,
                 .pool_addr = nullptr, .image_addr = nullptr};
    m.runs[1] = {.file_offset = 16 * 1024, .length = 24 * 1024, .pool_offset = 8 * 1024,
                 .pool_addr = nullptr, .image_addr = nullptr};
    mapping_ = m;
    EXPECT_TRUE(table_->Track(fd_, m));
    acked_.assign(m.leased_size, '\0');
  }
  ~Harness() {
    table_->Untrack(fd_);
    close(fd_);
  }

  // Runs the writes through TryDirectWrite with `persistor`, checking every crash image
  // at every fence and after every return; returns the violations found.
  template <typename Persistor>
  std::vector<std::string> Run(const std::vector<Write>& writes) {
    Persistor persistor{region_};
    for (const Write& w : writes) {
      std::string next = acked_;
      uint64_t at = w.offset;
      std::vector<struct iovec> iov;
      for (const std::string& piece : w.pieces) {
        next.replace(at, piece.size(), piece);
        at += piece.size();
        iov.push_back({const_cast<char*>(piece.data()), piece.size()});
      }
      const std::string label = "write at " + std::to_string(w.offset);
      region_.SetDurabilityHook([&] { CheckAll(acked_, next, label + " (at a fence)"); });
      size_t written = 0;
      const DirectResult r = TryDirectWrite(*table_, fd_, iov.data(), static_cast<int>(iov.size()),
                                            static_cast<off_t>(w.offset), 0, persistor, &written);
      region_.SetDurabilityHook({});
      EXPECT_EQ(r, DirectResult::kStored) << label;
      EXPECT_EQ(written, at - w.offset);
      acked_ = next;
      // The write returned: from now on every crash state must hold it.
      CheckAll(acked_, acked_, label + " (returned)");
    }
    return violations_;
  }

  uint64_t states() const { return states_; }

 private:
  // The file's bytes as a pool image holds them.
  std::string FileBytes(const std::string& image) const {
    std::string file(mapping_.leased_size, '\0');
    for (uint32_t i = 0; i < mapping_.run_count; ++i) {
      const MappedRun& run = mapping_.runs[i];
      const uint64_t n = std::min(run.length, mapping_.leased_size - run.file_offset);
      file.replace(run.file_offset, n, image, run.pool_offset, n);
    }
    return file;
  }

  void CheckAll(const std::string& before, const std::string& after, const std::string& label) {
    states_ += region_.ForEachCrashImage([&](const std::string& image) {
      const std::string file = FileBytes(image);
      for (uint64_t w = 0; w < file.size(); w += 8) {
        const size_t n = std::min<uint64_t>(8, file.size() - w);
        const std::string got = file.substr(w, n);
        if (got == before.substr(w, n) || got == after.substr(w, n)) continue;
        violations_.push_back(label + ": file word at " + std::to_string(w) +
                              (before.substr(w, n) == after.substr(w, n)
                                   ? " lost an acknowledged write"
                                   : " is neither old nor new"));
        return;
      }
    });
  }

  RecordingRegion region_;
  int fd_ = -1;
  std::atomic<uint64_t> stamp_{1};  // the daemon's word: never revoked here
  std::unique_ptr<FdTable> table_ = std::make_unique<FdTable>();
  LeaseMapping mapping_;
  std::string acked_;
  std::vector<std::string> violations_;
  uint64_t states_ = 0;
};

std::vector<Write> Workload() {
  return {
      {0, {Page(1)}},                                   // page 0
      {kPage, {Page(2)}},                               // page 1, up to the run boundary
      {12 * 1024, {Page(3)}},                           // across the two runs
      {0, {Page(4)}},                                   // in-place rewrite of page 0
      {24 * 1024, {Page(5, 4096), Page(6, 4096)}},      // pwritev, two pieces
      {28 * 1024, {Page(7, 8 * 1024 + 1000)}},          // up to the last leased byte
      {12 * 1024, {Page(8)}},                           // rewrite across the runs
  };
}

TEST(DirectWriteCrashTest, EveryReturnedWriteSurvivesEveryCrash) {
  Harness h;
  const std::vector<std::string> violations = h.Run<RecordingPersistor>(Workload());
  for (const std::string& v : violations) ADD_FAILURE() << v;
  EXPECT_GT(h.states(), 100u);
  std::printf("[ crash ] direct write path: %llu crash states checked\n",
              static_cast<unsigned long long>(h.states()));
}

TEST(DirectWriteCrashTest, AMissingDrainIsCaughtLosingAnAcknowledgedWrite) {
  Harness h;
  const std::vector<std::string> violations = h.Run<NoDrainPersistor>(Workload());
  ASSERT_FALSE(violations.empty());
  EXPECT_NE(violations.front().find("lost an acknowledged write"), std::string::npos)
      << violations.front();
  EXPECT_NE(violations.front().find("(returned)"), std::string::npos) << violations.front();
}

}  // namespace
}  // namespace walfs::direct
