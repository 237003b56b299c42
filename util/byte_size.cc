// ParseByteSize: the one size syntax of walfs's command lines (util/byte_size.h).
#include "util/byte_size.h"

#include <cctype>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace walfs::util {

absl::StatusOr<uint64_t> ParseByteSize(const std::string& text) {
  auto bad = [&text](const char* why) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad size '", text, "'", why, ": want ", kByteSizeSyntax));
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return bad("");
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = 0;
  if (!unit.empty() && unit != "b") {
    switch (unit[0]) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: return bad("");
    }
    const std::string rest = unit.substr(1);
    if (!rest.empty() && rest != "b" && rest != "ib") return bad("");
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text.substr(0, digits), &value) ||
      (shift > 0 && value > (UINT64_MAX >> shift))) {
    return bad(" (too large)");
  }
  return value << shift;
}

}  // namespace walfs::util
