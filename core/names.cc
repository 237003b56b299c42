// Name classification for pg_wal files.
#include "core/names.h"

#include <cerrno>

#include "absl/strings/match.h"
#include "core/format.h"
#include "core/status.h"
#include "core/validate.h"

namespace walfs::core {
namespace {

bool IsSegmentId(std::string_view s) {
  if (s.size() != 24) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'))) return false;
  }
  return true;
}

}  // namespace

bool IsWalSegmentName(std::string_view name) {
  if (IsSegmentId(name)) return true;
  if (absl::StartsWith(absl::string_view(name.data(), name.size()), "xlogtemp.")) return true;
  constexpr absl::string_view kPartial = ".partial";
  return absl::EndsWith(absl::string_view(name.data(), name.size()), kPartial) &&
         IsSegmentId(name.substr(0, name.size() - kPartial.size()));
}

absl::Status ValidateName(std::string_view name) {
  if (name.size() > format::kMaxNameLength) return PosixError(name.substr(0, 32), ENAMETOOLONG);
  if (!NameError(name).empty()) return PosixError("invalid name", EINVAL);
  return absl::OkStatus();
}

}  // namespace walfs::core
