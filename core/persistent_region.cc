// PersistentRegion: the persist-failure latch shared by every implementation.
#include "core/persistent_region.h"

#include <utility>

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

}  // namespace walfs::core
