#include "fs/mountinfo.h"

#include <sstream>

namespace walfs::fs {

std::string UnescapeMountInfo(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int value = 0;
      bool octal = true;
      for (size_t k = 1; k <= 3; ++k) {
        const char c = field[i + k];
        if (c < '0' || c > '7') octal = false;
        value = value * 8 + (c - '0');
      }
      if (octal) {
        out += static_cast<char>(value);
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

std::optional<MountInfoLine> ParseMountInfoLine(const std::string& line) {
  std::istringstream fields(line);
  std::string id, parent, devno, root, point, options, field;
  if (!(fields >> id >> parent >> devno >> root >> point >> options)) return std::nullopt;
  bool separator = false;
  while (fields >> field) {
    if (field == "-") {
      separator = true;
      break;
    }
  }
  std::string type, source, super;
  if (!separator || !(fields >> type >> source >> super)) return std::nullopt;
  return MountInfoLine{std::move(devno), UnescapeMountInfo(point), std::move(type),
                       UnescapeMountInfo(source), std::move(super)};
}

}  // namespace walfs::fs
