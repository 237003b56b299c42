// PowerCutRegion: a written image in process memory, a persisted image in the media.
#include "core/power_cut_region.h"

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
  ~PowerCutRegion() override {
    ::munmap(mutable_base(), size());
    if (!image_path_.empty()) ::unlink(image_path_.c_str());
  }
  void set_image_path(std::string path) { image_path_ = std::move(path); }

  bool is_pmem() const override { return media_->is_pmem(); }
  std::string_view kind() const override { return kind_; }
  absl::Status health() const override { return media_->health(); }

 protected:
  PowerCutRegion(std::unique_ptr<PersistentRegion> media, char* written)
      : PersistentRegion(written, media->size()),
        media_(std::move(media)),
        kind_(std::string(media_->kind()) + "+powercut") {}

  void CheckRange(const char* op, uint64_t off, size_t len) const {
    PersistentRegion::CheckRange(op, off, len, "power-cut region");
  }
  // Copies written bytes [off, off+len) to the media and flushes them there.
  void WriteBack(uint64_t off, uint64_t len) {
    media_->Store(off, data() + off, len);
    media_->Flush(off, len);
  }
  PersistentRegion& media() { return *media_; }

 private:
  const std::unique_ptr<PersistentRegion> media_;
  const std::string kind_;
  std::string image_path_;  // the shared written image's file, removed with the region
};

class PowerCutPmemRegion final : public PowerCutRegion {
 public:
  PowerCutPmemRegion(std::unique_ptr<PersistentRegion> media, char* written)
      : PowerCutRegion(std::move(media), written) {}

  void Store(uint64_t off, const void* src, size_t len) override {
    CheckRange("Store", off, len);
    std::memcpy(mutable_base() + off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    CheckRange("Fill", off, len);
    std::memset(mutable_base() + off, byte, len);
  }
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
    CheckRange("Store", off, len);
    MutexLock lock(&mu_);
    std::memcpy(mutable_base() + off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    CheckRange("Fill", off, len);
    MutexLock lock(&mu_);
    std::memset(mutable_base() + off, byte, len);
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
    std::unique_ptr<PersistentRegion> media, const std::string& image_path) {
  const uint64_t size = media->size();
  if (size == 0) return absl::InvalidArgumentError("power-cut region over an empty region");
  void* addr;
  if (image_path.empty()) {
    addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  } else {
    // A leftover image is what a killed daemon had written but not persisted: never
    // reuse it.
    if (::unlink(image_path.c_str()) != 0 && errno != ENOENT) {
      return PosixError(absl::StrCat("remove the old written image ", image_path), errno);
    }
    const int fd = ::open(image_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      return PosixError(absl::StrCat("create the written image ", image_path), errno);
    }
    addr = MAP_FAILED;
    int error = 0;
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      error = errno;
    } else {
      addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
      if (addr == MAP_FAILED) error = errno;
    }
    ::close(fd);
    if (addr == MAP_FAILED) {
      ::unlink(image_path.c_str());
      return PosixError(absl::StrCat("map the written image ", image_path), error);
    }
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
  region->set_image_path(image_path);
  return std::unique_ptr<PersistentRegion>(std::move(region));
}

}  // namespace walfs::core
