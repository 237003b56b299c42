// FailingRegion: an in-memory PersistentRegion whose flushes can be made to fail, as an
// msync that hits a writeback error does (PmemRegion latches it the same way).
#ifndef WALFS_TESTS_UNIT_FAILING_REGION_H_
#define WALFS_TESTS_UNIT_FAILING_REGION_H_

#include <atomic>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/persistent_region.h"

namespace walfs::core::testing {

class FailingRegion final : public PersistentRegion {
 public:
  FailingRegion(std::string image, bool pmem)
      : PersistentRegion(nullptr, 0), bytes_(std::move(image)), pmem_(pmem) {
    Reset(bytes_.data(), bytes_.size());
  }

  bool is_pmem() const override { return pmem_; }
  std::string_view kind() const override { return "failing"; }
  void Store(uint64_t off, const void* src, size_t len) override {
    std::memcpy(bytes_.data() + off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    std::memset(bytes_.data() + off, byte, len);
  }
  // Each Flush while failing latches an error naming its range and its ordinal.
  void Flush(uint64_t off, size_t len) override {
    const uint64_t n = ++flushes_;
    if (armed_.load() && off < arm_hi_ && off + len > arm_lo_) {
      armed_.store(false);
      failing_.store(true);
    }
    if (failing_.load()) {
      SetPersistFailed(absl::DataLossError(
          absl::StrCat("flush #", n, " of [", off, ", +", len, ") failed: Input/output error")));
    }
  }
  void Drain() override {}

  // From now on every Flush fails (until Heal).
  void FailFlushes() { failing_.store(true); }
  // Every Flush fails from the first one that touches [lo, hi) on (a device that dies
  // while a given structure is being written), until Heal.
  void FailFlushesFrom(uint64_t lo, uint64_t hi) {
    arm_lo_ = lo;
    arm_hi_ = hi;
    armed_.store(true);
  }
  // The media: every byte stored, whether or not its flush succeeded.
  const std::string& bytes() const { return bytes_; }
  // Flushes succeed again, as a retried msync may after the kernel reported its error.
  void Heal() {
    armed_.store(false);
    failing_.store(false);
  }
  uint64_t flushes() const { return flushes_.load(); }

 private:
  std::string bytes_;
  const bool pmem_;
  std::atomic<bool> failing_{false};
  std::atomic<bool> armed_{false};
  uint64_t arm_lo_ = 0, arm_hi_ = 0;  // set before armed_
  std::atomic<uint64_t> flushes_{0};
};

}  // namespace walfs::core::testing

#endif  // WALFS_TESTS_UNIT_FAILING_REGION_H_
