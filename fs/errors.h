// The one conversion from core's absl::Status to the errno a FUSE reply carries.
#ifndef WALFS_FS_ERRORS_H_
#define WALFS_FS_ERRORS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace walfs::fs {

// core::ErrnoFromStatus, except that DataLoss (media corruption) is always EIO and is
// logged with the operation name and inode, and that no non-OK status yields 0.
// Must not be called with an OK status.
int StatusToErrno(const absl::Status& status, const char* operation, uint64_t ino);

}  // namespace walfs::fs

#endif  // WALFS_FS_ERRORS_H_
