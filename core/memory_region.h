// MemoryRegion: a PersistentRegion in ordinary memory, for tests and tools that work on
// a copy of a pool image. Flush and Drain do nothing: everything stored is "durable".
#ifndef WALFS_CORE_MEMORY_REGION_H_
#define WALFS_CORE_MEMORY_REGION_H_

#include <cstring>
#include <string>
#include <string_view>

#include "core/persistent_region.h"

namespace walfs::core {

class MemoryRegion final : public PersistentRegion {
 public:
  // A zero-filled region of `size` bytes.
  explicit MemoryRegion(uint64_t size, bool pmem = true)
      : PersistentRegion(nullptr, 0), bytes_(size, '\0'), pmem_(pmem) {
    Reset(bytes_.data(), bytes_.size());
  }
  // A region holding a copy of `image`.
  explicit MemoryRegion(std::string image, bool pmem = true)
      : PersistentRegion(nullptr, 0), bytes_(std::move(image)), pmem_(pmem) {
    Reset(bytes_.data(), bytes_.size());
  }

  bool is_pmem() const override { return pmem_; }
  std::string_view kind() const override { return "memory"; }
  void Store(uint64_t off, const void* src, size_t len) override {
    std::memcpy(bytes_.data() + off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    std::memset(bytes_.data() + off, byte, len);
  }
  void Flush(uint64_t, size_t) override {}
  void Drain() override {}

  // The current bytes (tests corrupt or inspect images through this).
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
  bool pmem_;
};

}  // namespace walfs::core

#endif  // WALFS_CORE_MEMORY_REGION_H_
