// The zero-extension decision (zero_extend.h).
#include "fs/direct/zero_extend.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/ioctl.h>

#include "core/all_zero.h"
#include "fs/direct/lease.h"
#include "fs/direct/switches.h"
#include "fs/lease_protocol.h"

namespace walfs::direct {
namespace {

int FstatCall(int fd, struct stat* st) { return fstat(fd, st); }

int IoctlZeroExtend(int fd, uint64_t offset, uint64_t length) {
  lease::ZeroExtend arg{.offset = offset, .length = length};
  return ioctl(fd, lease::kIoctlZeroExtend, &arg) == 0 ? 0 : -errno;
}

// Every byte the iovecs name is zero. A buffer that repeats the previous one is not read
// again.
bool IovecsAllZero(const struct iovec* iov, int iovcnt) {
  const void* checked_base = nullptr;
  size_t checked_len = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    if (iov[i].iov_base == checked_base && iov[i].iov_len <= checked_len) continue;
    if (iov[i].iov_base == nullptr ||
        !core::AllZero(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len)) {
      return false;
    }
    checked_base = iov[i].iov_base;
    checked_len = iov[i].iov_len;
  }
  return true;
}

}  // namespace

const ZeroExtendSources& ProductionZeroExtendSources() {
  static constexpr ZeroExtendSources kSources = {
      .fstat = FstatCall,
      .is_walfs = IsWalfsMount,
      .ioctl_zero_extend = IoctlZeroExtend,
  };
  return kSources;
}

bool ZeroExtendRefusals::Refused(dev_t dev) const {
  const uint64_t key = static_cast<uint64_t>(dev) + 1;
  for (const std::atomic<uint64_t>& d : devs_) {
    if (d.load(std::memory_order_relaxed) == key) return true;
  }
  return false;
}

void ZeroExtendRefusals::Note(dev_t dev) {
  const uint64_t key = static_cast<uint64_t>(dev) + 1;
  for (std::atomic<uint64_t>& d : devs_) {
    uint64_t expected = 0;
    if (d.compare_exchange_strong(expected, key, std::memory_order_relaxed) || expected == key) {
      return;
    }
  }
}

ZeroExtendResult TryZeroExtend(int fd, const struct iovec* iov, int iovcnt, off_t offset,
                               int flags, ZeroExtendHints& hints, ZeroExtendRefusals& refusals,
                               const ZeroExtendSources& sources, size_t* written) {
  // RWF_DSYNC/RWF_SYNC: the daemon's commit is durable anyway; RWF_NOWAIT and
  // RWF_APPEND (and anything unknown) are the kernel's to honour.
  if ((flags & ~(RWF_HIPRI | RWF_DSYNC | RWF_SYNC)) != 0 || offset < 0 || iovcnt <= 0 ||
      iovcnt > IOV_MAX || !hints.Test(fd)) {
    return ZeroExtendResult::kNotAsked;
  }
  uint64_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len > static_cast<uint64_t>(SSIZE_MAX) - total) {
      return ZeroExtendResult::kNotAsked;
    }
    total += iov[i].iov_len;
  }
  if (total < kZeroExtendMinBytes ||
      static_cast<uint64_t>(offset) > static_cast<uint64_t>(INT64_MAX) - total ||
      !IovecsAllZero(iov, iovcnt)) {
    return ZeroExtendResult::kNotAsked;
  }
  const int saved_errno = errno;
  ZeroExtendResult result;
  struct stat st;
  if (sources.fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !sources.is_walfs(st.st_dev)) {
    // Closed and reused where we could not see it: not ours to ask about again.
    hints.Clear(fd);
    result = ZeroExtendResult::kNotWalfs;
  } else if (offset < st.st_size) {
    result = ZeroExtendResult::kBelowEof;
  } else if (refusals.Refused(st.st_dev)) {
    result = ZeroExtendResult::kRefused;
  } else if (const int err = sources.ioctl_zero_extend(fd, static_cast<uint64_t>(offset), total);
             err != 0) {
    if (err == -ENOTTY || err == -EOPNOTSUPP) refusals.Note(st.st_dev);
    DebugLog("fd %d: zero-fill of %llu bytes at %lld through FUSE: zero-extension refused: %s",
             fd, static_cast<unsigned long long>(total), static_cast<long long>(offset),
             strerror(-err));
    result = ZeroExtendResult::kRefused;
  } else {
    *written = static_cast<size_t>(total);
    result = ZeroExtendResult::kExtended;
  }
  errno = saved_errno;
  return result;
}

}  // namespace walfs::direct
