// One line of /proc/self/mountinfo (proc(5)), for the daemon's own mount checks.
// (libwalfs-direct has its own allocation-free reader, fs/direct/mounts.cc.)
#ifndef WALFS_FS_MOUNTINFO_H_
#define WALFS_FS_MOUNTINFO_H_

#include <optional>
#include <string>
#include <string_view>

namespace walfs::fs {

// The fields of a line the daemon uses, the paths unescaped.
struct MountInfoLine {
  std::string devno;          // "major:minor"
  std::string mount_point;
  std::string fstype;
  std::string source;
  std::string super_options;  // comma-separated, e.g. "rw,size=4194304k,huge=always"
};

// Parses "id parent major:minor root mountpoint options [optional...] - fstype source
// super"; nullopt for a line without all of them.
std::optional<MountInfoLine> ParseMountInfoLine(const std::string& line);

// mountinfo writes space, tab, newline and backslash in a field as \ooo (octal).
std::string UnescapeMountInfo(std::string_view field);

}  // namespace walfs::fs

#endif  // WALFS_FS_MOUNTINFO_H_
