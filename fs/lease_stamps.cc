// Lease revocation stamps (lease_stamps.h).
#include "fs/lease_stamps.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace walfs::fs {
namespace {

static_assert(LeaseStamps::kSeals ==
              (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL));

absl::Status Errno(const std::string& what) {
  return absl::FailedPreconditionError(
      absl::StrCat("lease stamps: cannot ", what, ": ", strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LeaseStamps>> LeaseStamps::Create(uint32_t slots) {
  if (slots == 0) return absl::InvalidArgumentError("lease stamps: zero slots");
  const int fd = memfd_create("walfs-lease-stamps", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Errno("create a memfd");
  const size_t bytes = size_t{slots} * sizeof(uint64_t);
  absl::Status failed;
  void* words = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    failed = Errno("size the memfd");
  } else {
    // Mapped before F_SEAL_FUTURE_WRITE: the seal refuses new writable mappings and
    // write(2), not this one, which is how only the daemon can change a stamp.
    words = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (words == MAP_FAILED) {
      failed = Errno("map the memfd");
    } else if (fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
      failed = Errno("seal the memfd");
    }
  }
  uint64_t id = 0;
  while (failed.ok() && id == 0) {
    if (getrandom(&id, sizeof(id), 0) != static_cast<ssize_t>(sizeof(id))) {
      failed = Errno("draw the stamps id");
    }
  }
  if (!failed.ok()) {
    if (words != MAP_FAILED) munmap(words, bytes);
    close(fd);
    return failed;
  }
  return std::unique_ptr<LeaseStamps>(
      new LeaseStamps(fd, static_cast<uint64_t*>(words), slots, id));
}

LeaseStamps::~LeaseStamps() {
  munmap(words_, size_t{slots_} * sizeof(uint64_t));
  close(fd_);
}

std::optional<uint32_t> LeaseStamps::Allocate() {
  std::lock_guard<std::mutex> l(mu_);
  if (!free_.empty()) {
    const uint32_t slot = free_.back();
    free_.pop_back();
    return slot;
  }
  if (never_used_ < slots_) return never_used_++;
  return std::nullopt;
}

uint64_t LeaseStamps::Renew(uint32_t slot) {
  const uint64_t stamp = next_stamp_.fetch_add(1, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(words_[slot]).store(stamp, std::memory_order_release);
  return stamp;
}

void LeaseStamps::Free(uint32_t slot) {
  Revoke(slot);
  std::lock_guard<std::mutex> l(mu_);
  free_.push_back(slot);
}

uint64_t LeaseStamps::Read(uint32_t slot) const {
  return std::atomic_ref<uint64_t>(words_[slot]).load(std::memory_order_acquire);
}

}  // namespace walfs::fs
