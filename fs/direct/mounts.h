// Which devices are walfs mounts, from /proc/self/mountinfo.
//
// A FUSE mount has an anonymous st_dev (0:N) that appears as "major:minor" in field 3 of
// its mountinfo line; the file system type after the " - " separator is "fuse.walfs"
// (walfs's default subtype; a mount made with another subtype=... is not recognized and
// simply gets no direct access).
#ifndef WALFS_FS_DIRECT_MOUNTS_H_
#define WALFS_FS_DIRECT_MOUNTS_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walfs::direct {

inline constexpr std::string_view kWalfsFsType = "fuse.walfs";

// The verdict for `dev` in mountinfo `text`: true when a line with that major:minor has
// type kWalfsFsType, false when its type is anything else, nullopt when no line names
// it. Malformed lines are skipped. Pure: for tests.
std::optional<bool> MountinfoSaysWalfs(std::string_view text, dev_t dev);

// Undoes mountinfo's escaping of a path field: a backslash and three octal digits
// (\040 space, \011 tab, \012 newline, \134 backslash) stand for that byte. False when an
// escape is malformed or decodes to NUL.
bool UnescapeMountinfoPath(std::string_view field, std::string* out);

// The mount point, as this process sees it (relative to its root, unescaped), of the
// mount of `dev` in mountinfo `text` whose type is kWalfsFsType and whose root (field 4)
// is "/", i.e. where the walfs root directory is visible; the last such line when there
// are several (over-mounts are listed in mount order). nullopt when there is none (a bind
// mount of a subdirectory alone does not do: a session socket must be bound in the walfs
// root). Pure: for tests.
std::optional<std::string> MountinfoWalfsRoot(std::string_view text, dev_t dev);

// MountinfoWalfsRoot over this process's /proc/self/mountinfo, read afresh. Not
// async-signal-safe (it allocates).
std::optional<std::string> WalfsMountRoot(dev_t dev);

// Caches the verdict per st_dev for the process lifetime: write opens happen for every
// relation file PostgreSQL touches, and only the first open on a device may read
// mountinfo. A device seen before walfs was mounted on it keeps its "no" (that file just
// goes through FUSE); a "yes" that went stale (unmounted, device number reused) is
// harmless because the lease ioctl's reply is validated.
// Thread-safe; IsWalfs on a cached device is lock-free (a scan of kSlots atomics).
class MountCache {
 public:
  static constexpr int kSlots = 32;
  constexpr MountCache() = default;
  MountCache(const MountCache&) = delete;
  MountCache& operator=(const MountCache&) = delete;

  bool IsWalfs(dev_t dev);

 private:
  struct Slot {
    std::atomic<bool> claimed{false};
    std::atomic<uint64_t> dev{0};
    std::atomic<uint8_t> state{0};  // 0 being filled, 1 not walfs, 2 walfs; release
  };
  Slot slots_[kSlots];
};

// Reads /proc/self/mountinfo whole into *out; false if it cannot be read.
bool ReadMountinfo(std::string* out);

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_MOUNTS_H_
