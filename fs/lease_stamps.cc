// Lease revocation stamps (lease_stamps.h).
#include "fs/lease_stamps.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace walfs::fs {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LeaseStamps>> LeaseStamps::Create(const std::string& path,
                                                                 uid_t uid, gid_t gid,
                                                                 uint32_t slots) {
  if (slots == 0) return absl::InvalidArgumentError("lease stamps: zero slots");
  // A daemon killed with SIGKILL leaves its file behind; another user's file of that name
  // is not ours to remove (O_EXCL below then fails and says so).
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      (st.st_uid == geteuid() || geteuid() == 0)) {
    (void)unlink(path.c_str());
  }
  const int fd =
      open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, S_IRUSR);
  if (fd < 0) return Errno("cannot create", path);
  const size_t bytes = size_t{slots} * sizeof(uint64_t);
  absl::Status failed;
  if (uid != geteuid() && fchown(fd, uid, gid) != 0) {
    failed = Errno("cannot give the pool's owner", path);
  } else if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    failed = Errno("cannot size", path);
  }
  void* words = MAP_FAILED;
  if (failed.ok()) {
    words = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (words == MAP_FAILED) failed = Errno("cannot map", path);
  }
  close(fd);
  if (!failed.ok()) {
    (void)unlink(path.c_str());
    return failed;
  }
  return std::unique_ptr<LeaseStamps>(
      new LeaseStamps(path, static_cast<uint64_t*>(words), slots));
}

LeaseStamps::~LeaseStamps() {
  munmap(words_, size_t{slots_} * sizeof(uint64_t));
  (void)unlink(path_.c_str());
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
