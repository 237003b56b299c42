// PowerCutRegion: a written image in process memory, a persisted image in the media.
#include "tests/support/power_cut_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/all_zero.h"
#include "core/mutex.h"
#include "core/status.h"

namespace walfs::core {
namespace {

// Owns the media and the written image's mapping; the subclasses decide when written
// bytes are copied to the media.
class PowerCutRegion : public PersistentRegion {
 public:
  ~PowerCutRegion() override { ::munmap(mutable_base(), size()); }

  bool is_pmem() const override { return media_->is_pmem(); }
  std::string_view kind() const override { return kind_; }
  absl::Status health() const override { return media_->health(); }

 protected:
  PowerCutRegion(std::unique_ptr<PersistentRegion> media, char* written)
      : PersistentRegion(written, media->size(), "power-cut region"),
        media_(std::move(media)),
        kind_(std::string(media_->kind()) + "+powercut") {}

  // Copies written bytes [off, off+len) to the media and flushes them there.
  void WriteBack(uint64_t off, uint64_t len) {
    media_->Store(off, data() + off, len);
    media_->Flush(off, len);
  }
  PersistentRegion& media() { return *media_; }

 private:
  const std::unique_ptr<PersistentRegion> media_;
  const std::string kind_;
};

class PowerCutPmemRegion final : public PowerCutRegion {
 public:
  PowerCutPmemRegion(std::unique_ptr<PersistentRegion> media, char* written)
      : PowerCutRegion(std::move(media), written) {}

  void Store(uint64_t off, const void* src, size_t len) override { CachedStore(off, src, len); }
  void Fill(uint64_t off, uint8_t byte, size_t len) override { CachedFill(off, byte, len); }
  void Flush(uint64_t off, size_t len) override {
    CheckRange("Flush", off, len);
    if (len == 0) return;
    MutexLock lock(&mu_);
    std::vector<Range>& mine = flushed_[std::this_thread::get_id()];
    // A run of adjacent flushes (a write split over extents, a zeroing loop) is one copy.
    if (!mine.empty() && mine.back().end == off) {
      mine.back().end = off + len;
    } else {
      mine.push_back(Range{off, off + len});
    }
  }
  void Drain() override {
    std::vector<Range> mine;
    {
      MutexLock lock(&mu_);
      auto it = flushed_.find(std::this_thread::get_id());
      if (it != flushed_.end()) mine.swap(it->second);
    }
    for (const Range& r : mine) WriteBack(r.begin, r.end - r.begin);
    media().Drain();
  }

 private:
  struct Range {
    uint64_t begin, end;
  };
  Mutex mu_;
  // Flushed, not yet drained ranges of each thread. An exited thread's entry stays (its
  // flushes were never fenced, so they never become durable unless a new thread that
  // reuses its id drains them, which real caches could do too).
  std::unordered_map<std::thread::id, std::vector<Range>> flushed_ ABSL_GUARDED_BY(mu_);
};

class PowerCutMsyncRegion final : public PowerCutRegion {
 public:
  PowerCutMsyncRegion(std::unique_ptr<PersistentRegion> media, char* written)
      : PowerCutRegion(std::move(media), written),
        page_size_(static_cast<uint64_t>(::sysconf(_SC_PAGESIZE))) {}

  void Store(uint64_t off, const void* src, size_t len) override {
    MutexLock lock(&mu_);
    CachedStore(off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    MutexLock lock(&mu_);
    CachedFill(off, byte, len);
  }
  void Flush(uint64_t off, size_t len) override {
    CheckRange("Flush", off, len);
    if (len == 0) return;
    const uint64_t begin = off / page_size_ * page_size_;
    const uint64_t end = std::min((off + len + page_size_ - 1) / page_size_ * page_size_,
                                  size());
    MutexLock lock(&mu_);
    WriteBack(begin, end - begin);
  }
  void Drain() override { media().Drain(); }

 private:
  const uint64_t page_size_;
  Mutex mu_;  // orders stores into the written image against page copies out of it
};

}  // namespace

absl::StatusOr<std::unique_ptr<PersistentRegion>> NewPowerCutRegion(
    std::unique_ptr<PersistentRegion> media, int image_fd) {
  const uint64_t size = media->size();
  if (size == 0) return absl::InvalidArgumentError("power-cut region over an empty region");
  void* addr;
  if (image_fd < 0) {
    addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  } else {
    if (::ftruncate(image_fd, static_cast<off_t>(size)) != 0) {
      return PosixError("size the written image", errno);
    }
    addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                  image_fd, 0);
  }
  if (addr == MAP_FAILED) {
    return PosixError(
        absl::StrCat("map the ", size, "-byte written image of a power-cut region"), errno);
  }
  char* written = static_cast<char*>(addr);
  // Anonymous pages read as zero: copying only the non-zero pages keeps a mostly empty
  // pool from becoming resident twice.
  constexpr uint64_t kChunk = 4096;
  for (uint64_t off = 0; off < size; off += kChunk) {
    const uint64_t n = std::min(kChunk, size - off);
    if (!AllZero(media->data() + off, n)) std::memcpy(written + off, media->data() + off, n);
  }
  std::unique_ptr<PowerCutRegion> region;
  if (media->is_pmem()) {
    region = std::make_unique<PowerCutPmemRegion>(std::move(media), written);
  } else {
    region = std::make_unique<PowerCutMsyncRegion>(std::move(media), written);
  }
  return std::unique_ptr<PersistentRegion>(std::move(region));
}

}  // namespace walfs::core
