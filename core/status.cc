// Error helpers: errno <-> absl::Status.
#include "core/status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace walfs::core {
namespace {

constexpr absl::string_view kErrnoPayload = "walfs/errno";

absl::StatusCode CodeForErrno(int e) {
  switch (e) {
    case 0: return absl::StatusCode::kOk;
    case ENOENT: return absl::StatusCode::kNotFound;
    case EEXIST: return absl::StatusCode::kAlreadyExists;
    case EACCES:
    case EPERM: return absl::StatusCode::kPermissionDenied;
    case ENOSPC:
    case EDQUOT: return absl::StatusCode::kResourceExhausted;
    case EINVAL:
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
    case ENOTEMPTY: return absl::StatusCode::kFailedPrecondition;
    case ENOSYS:
    case EOPNOTSUPP: return absl::StatusCode::kUnimplemented;
    case EIO: return absl::StatusCode::kDataLoss;
    case EBUSY:
    case EAGAIN: return absl::StatusCode::kUnavailable;
    case EFBIG:
    case ERANGE: return absl::StatusCode::kOutOfRange;
    default: return absl::StatusCode::kUnknown;
  }
}

}  // namespace

absl::Status PosixError(std::string_view context, int error_number) {
  absl::Status s(CodeForErrno(error_number),
                 absl::StrCat(absl::string_view(context.data(), context.size()), ": ",
                              std::strerror(error_number)));
  s.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(error_number)));
  return s;
}

int ErrnoFromStatus(const absl::Status& status) {
  if (status.ok()) return 0;
  if (auto p = status.GetPayload(kErrnoPayload)) {
    int e = 0;
    if (absl::SimpleAtoi(std::string(*p), &e) && e > 0) return e;
  }
  switch (status.code()) {
    case absl::StatusCode::kNotFound: return ENOENT;
    case absl::StatusCode::kAlreadyExists: return EEXIST;
    case absl::StatusCode::kPermissionDenied: return EACCES;
    case absl::StatusCode::kResourceExhausted: return ENOSPC;
    case absl::StatusCode::kInvalidArgument: return EINVAL;
    case absl::StatusCode::kFailedPrecondition: return EINVAL;
    case absl::StatusCode::kOutOfRange: return EFBIG;
    case absl::StatusCode::kUnimplemented: return ENOSYS;
    case absl::StatusCode::kUnavailable: return EBUSY;
    default: return EIO;
  }
}

}  // namespace walfs::core
