// Walfs mount detection from /proc/self/mountinfo.
#include "fs/direct/mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <charconv>
#include <string>
#include <utility>

#include "fs/direct/real_calls.h"

namespace walfs::direct {
namespace {

// Splits off the next space-separated field of `line` (mountinfo escapes spaces inside
// paths as \040, so a plain split is exact).
std::string_view NextField(std::string_view& line) {
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  const size_t end = line.find(' ');
  std::string_view field = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  return field;
}

bool ParseDev(std::string_view field, unsigned* major_out, unsigned* minor_out) {
  const size_t colon = field.find(':');
  if (colon == std::string_view::npos) return false;
  const char* begin = field.data();
  const char* mid = begin + colon;
  const char* end = begin + field.size();
  auto [p1, e1] = std::from_chars(begin, mid, *major_out);
  if (e1 != std::errc() || p1 != mid || mid == begin) return false;
  auto [p2, e2] = std::from_chars(mid + 1, end, *minor_out);
  return e2 == std::errc() && p2 == end && mid + 1 != end;
}

}  // namespace

bool UnescapeMountinfoPath(std::string_view field, std::string* out) {
  out->clear();
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      out->push_back(field[i]);
      continue;
    }
    if (field.size() - i < 4) return false;
    unsigned value = 0;
    for (size_t k = 1; k <= 3; ++k) {
      const char d = field[i + k];
      if (d < '0' || d > '7') return false;
      value = value * 8 + static_cast<unsigned>(d - '0');
    }
    if (value == 0 || value > 255) return false;
    out->push_back(static_cast<char>(value));
    i += 3;
  }
  return true;
}

std::optional<std::string> MountinfoWalfsRoot(std::string_view text, dev_t dev) {
  std::optional<std::string> found;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    NextField(line);
    NextField(line);
    unsigned maj = 0;
    unsigned min = 0;
    if (!ParseDev(NextField(line), &maj, &min)) continue;
    if (maj != major(dev) || min != minor(dev)) continue;
    const std::string_view root = NextField(line);
    const std::string_view mount_point = NextField(line);
    NextField(line);  // options
    std::string_view field;
    do {
      field = NextField(line);
    } while (!field.empty() && field != "-");
    if (field != "-") continue;
    if (NextField(line) != kWalfsFsType || root != "/") continue;
    std::string path;
    if (!UnescapeMountinfoPath(mount_point, &path) || path.empty() || path[0] != '/') continue;
    found = std::move(path);
  }
  return found;
}

std::optional<std::string> WalfsMountRoot(dev_t dev) {
  std::string text;
  if (!ReadMountinfo(&text)) return std::nullopt;
  return MountinfoWalfsRoot(text, dev);
}

std::optional<bool> MountinfoSaysWalfs(std::string_view text, dev_t dev) {
  std::optional<bool> verdict;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    // mount id, parent id, major:minor, root, mount point, options, optional fields...
    NextField(line);
    NextField(line);
    unsigned maj = 0;
    unsigned min = 0;
    if (!ParseDev(NextField(line), &maj, &min)) continue;
    if (maj != major(dev) || min != minor(dev)) continue;
    for (int i = 0; i < 3; ++i) NextField(line);
    std::string_view field;
    do {
      field = NextField(line);
    } while (!field.empty() && field != "-");
    if (field != "-") continue;
    const std::string_view fstype = NextField(line);
    if (fstype.empty()) continue;
    // Over-mounts of one device are listed in mount order; the last one is in force.
    verdict = fstype == kWalfsFsType;
  }
  return verdict;
}

bool ReadMountinfo(std::string* out) {
  out->clear();
  const int fd = real::Open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  bool ok = true;
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  real::Close(fd);
  return ok;
}

bool MountCache::IsWalfs(dev_t dev) {
  const uint64_t key = static_cast<uint64_t>(dev);
  for (Slot& slot : slots_) {
    const uint8_t state = slot.state.load(std::memory_order_acquire);
    if (state != 0 && slot.dev.load(std::memory_order_relaxed) == key) return state == 2;
  }
  std::string text;
  if (!ReadMountinfo(&text)) return false;
  const bool walfs = MountinfoSaysWalfs(text, dev).value_or(false);
  // Racing threads may both cache the same device: a duplicate slot is harmless.
  for (Slot& slot : slots_) {
    if (slot.claimed.exchange(true, std::memory_order_relaxed)) continue;
    slot.dev.store(key, std::memory_order_relaxed);
    slot.state.store(walfs ? 2 : 1, std::memory_order_release);
    break;
  }
  return walfs;
}

}  // namespace walfs::direct
