// The one conversion from core's absl::Status to the errno a FUSE reply carries, and the
// error counts it keeps for the status document.
#ifndef WALFS_FS_ERRORS_H_
#define WALFS_FS_ERRORS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace walfs::fs {

// core::ErrnoFromStatus, except that DataLoss (media corruption) is always EIO and is
// logged with the operation name and inode, and that no non-OK status yields 0.
// ENOSPC and EIO answers are counted (ReplyErrorCounts); ENOSPC is logged at most once
// per kEnospcLogInterval with how many were not logged and, if a describer is set, the
// pool's free space. Must not be called with an OK status. Thread-safe.
int StatusToErrno(const absl::Status& status, const char* operation, uint64_t ino);

struct ReplyErrorCounts {
  uint64_t enospc = 0;  // requests answered ENOSPC since the daemon started
  uint64_t eio = 0;     // requests answered EIO
};
ReplyErrorCounts GetReplyErrorCounts();

inline constexpr int kEnospcLogIntervalSeconds = 10;

// What the ENOSPC message says about free space ("12 MiB free of 1.0 GiB"). Set once,
// before requests are served; empty means say nothing.
void SetFreeSpaceDescriber(std::function<std::string()> describe);

}  // namespace walfs::fs

#endif  // WALFS_FS_ERRORS_H_
