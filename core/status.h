// Error helpers for core: errors are absl::Status values, never exceptions.
#ifndef WALFS_CORE_STATUS_H_
#define WALFS_CORE_STATUS_H_

#include <string_view>

#include "absl/status/status.h"

namespace walfs::core {

// A Status for a failed system call: the code follows errno, the message is
// "<context>: <strerror>". ErrnoFromStatus(PosixError(c, e)) == e.
absl::Status PosixError(std::string_view context, int error_number);

// The errno a Status stands for: the one recorded by PosixError if any, else a
// mapping of its canonical code (DataLoss -> EIO, NotFound -> ENOENT, ...). OK -> 0.
int ErrnoFromStatus(const absl::Status& status);

}  // namespace walfs::core

#endif  // WALFS_CORE_STATUS_H_
