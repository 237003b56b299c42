// MemoryRegion: a PersistentRegion in ordinary memory, for tests, fuzzers and benchmarks
// that work on a copy of a pool image. Flush and Drain do nothing: everything stored is
// "durable". Test support: core and shipped programs never include it.
#ifndef WALFS_TESTS_SUPPORT_MEMORY_REGION_H_
#define WALFS_TESTS_SUPPORT_MEMORY_REGION_H_

#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "core/persistent_region.h"

namespace walfs::core {

class MemoryRegion final : public PersistentRegion {
 public:
  // A zero-filled region of `size` bytes.
  explicit MemoryRegion(uint64_t size, bool pmem = true)
      : MemoryRegion(std::string(size, '\0'), pmem) {}
  // A region holding a copy of `image`.
  explicit MemoryRegion(std::string image, bool pmem = true)
      : PersistentRegion(nullptr, 0), owned_(std::move(image)), bytes_(&owned_), pmem_(pmem) {
    Reset(bytes_->data(), bytes_->size());
  }

  // A region over the caller's `*buffer`, which must outlive the region and keep its
  // size while the region lives; stores land in it. For callers that check many images
  // in a row (the crash tests): reusing a few buffers costs copies, where a fresh
  // allocation of a pool-sized image per check costs a page fault per 4 KiB page, and
  // page faults are most of the time on a virtual machine or under AddressSanitizer
  // (whose large allocations are fresh mappings).
  static std::unique_ptr<MemoryRegion> Over(std::string* buffer, bool pmem = true) {
    return std::unique_ptr<MemoryRegion>(new MemoryRegion(buffer, pmem));
  }

  bool is_pmem() const override { return pmem_; }
  std::string_view kind() const override { return "memory"; }
  void Store(uint64_t off, const void* src, size_t len) override {
    std::memcpy(bytes_->data() + off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    std::memset(bytes_->data() + off, byte, len);
  }
  void Flush(uint64_t, size_t) override {}
  void Drain() override {}

  // The current bytes (tests corrupt or inspect images through this).
  std::string& bytes() { return *bytes_; }

 private:
  MemoryRegion(std::string* buffer, bool pmem)
      : PersistentRegion(nullptr, 0), bytes_(buffer), pmem_(pmem) {
    Reset(bytes_->data(), bytes_->size());
  }

  std::string owned_;     // empty when borrowing
  std::string* bytes_;    // &owned_, or the caller's buffer
  bool pmem_;
};

}  // namespace walfs::core

#endif  // WALFS_TESTS_SUPPORT_MEMORY_REGION_H_
