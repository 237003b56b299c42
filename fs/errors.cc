// Status -> errno for FUSE replies.
#include "fs/errors.h"

#include <cerrno>

#include "core/status.h"
#include "fs/logging.h"

namespace walfs::fs {

int StatusToErrno(const absl::Status& status, const char* operation, uint64_t ino) {
  unsigned long long inode = ino;
  if (status.code() == absl::StatusCode::kDataLoss) {
    Log(LOG_ERR, "%s (inode %llu): %s", operation, inode, status.ToString().c_str());
    return EIO;
  }
  int error = core::ErrnoFromStatus(status);
  if (error <= 0) {
    Log(LOG_ERR, "%s (inode %llu): unexpected status %s", operation, inode,
        status.ToString().c_str());
    return EIO;
  }
  if (error == EIO) {
    Log(LOG_WARNING, "%s (inode %llu): %s", operation, inode, status.ToString().c_str());
  }
  return error;
}

}  // namespace walfs::fs
