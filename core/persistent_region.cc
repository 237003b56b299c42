// PersistentRegion: the persist-failure latch shared by every implementation, and
// ZeroUnlessZero.
#include "core/persistent_region.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/all_zero.h"

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

void PersistentRegion::OutOfRange(const char* op, uint64_t off, size_t len) const {
  std::fprintf(stderr, "walfs: %s\n",
               absl::StrFormat("%s [%d, +%d) outside %s of %d bytes", op, off, len, what_, size_)
                   .c_str());
  std::fflush(stderr);
  std::abort();
}

uint64_t ZeroUnlessZero(PersistentRegion& region, uint64_t off, uint64_t len) {
  constexpr uint64_t kPage = 4096;
  const uint64_t end = off + len;
  uint64_t stored = 0;
  for (uint64_t from = off; from < end;) {
    const PersistentRegion::DataRange data = region.MaybeData(from, end);
    // Runs of pages that are not zero are filled with one store each.
    uint64_t run = data.begin;  // start of the current run of non-zero pages
    for (uint64_t p = data.begin; p < data.end;) {
      const uint64_t next = std::min(data.end, (p / kPage + 1) * kPage);
      if (AllZero(region.data() + p, next - p)) {
        if (run < p) region.Fill(run, 0, p - run);
        stored += p - run;
        run = next;
      }
      p = next;
    }
    if (run < data.end) region.Fill(run, 0, data.end - run);
    stored += data.end - run;
    from = data.end;
  }
  region.Flush(off, len);
  return stored;
}

}  // namespace walfs::core
