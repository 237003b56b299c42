// PersistentRegion: the persist-failure latch shared by every implementation.
#include "core/persistent_region.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_format.h"

namespace walfs::core {

absl::Status PersistentRegion::health() const {
  if (!failed_.load(std::memory_order_acquire)) return absl::OkStatus();
  MutexLock lock(&error_mu_);
  return error_;
}

void PersistentRegion::SetPersistFailed(absl::Status error) {
  MutexLock lock(&error_mu_);
  if (failed_.load(std::memory_order_relaxed)) return;
  error_ = std::move(error);
  failed_.store(true, std::memory_order_release);
}

void PersistentRegion::OutOfRange(const char* op, uint64_t off, size_t len,
                                  std::string_view what) const {
  std::fprintf(stderr, "walfs: %s\n",
               absl::StrFormat("%s [%d, +%d) outside %s of %d bytes", op, off, len, what, size_)
                   .c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace walfs::core
