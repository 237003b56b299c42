// Byte counts for people: "512 B", "16.00 MiB" (binary units). Shared by the tools.
#ifndef WALFS_TOOLS_HUMAN_BYTES_H_
#define WALFS_TOOLS_HUMAN_BYTES_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace walfs::tools {

inline std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.2f %s", v, kUnits[unit]);
}

}  // namespace walfs::tools

#endif  // WALFS_TOOLS_HUMAN_BYTES_H_
