// What a name in pg_wal tells about the file behind it.
#ifndef WALFS_CORE_NAMES_H_
#define WALFS_CORE_NAMES_H_

#include <string_view>

#include "absl/status/status.h"

namespace walfs::core {

// True for names whose file becomes a whole WAL segment, and so gets one contiguous
// segment-size extent at create: 24 upper-case hex digits, "<segment>.partial" and
// "xlogtemp.<anything>" (PostgreSQL's temporary segment, see XLogFileInitInternal).
bool IsWalSegmentName(std::string_view name);

// OK for a name a directory entry may have (NameError, core/validate.h: 1..255 bytes,
// no '/', no NUL, not "." or ".."). ENAMETOOLONG / EINVAL otherwise.
absl::Status ValidateName(std::string_view name);

}  // namespace walfs::core

#endif  // WALFS_CORE_NAMES_H_
