#include "fs/pool_pages.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fs/mountinfo.h"

namespace walfs::fs {
namespace {

// The bracketed choice of /sys/kernel/mm/transparent_hugepage/shmem_enabled, whose
// "force" and "deny" override every mount's huge= option; empty if unreadable.
std::string ShmemEnabledOverride() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string word;
  while (in >> word) {
    if (word.size() > 2 && word.front() == '[' && word.back() == ']') {
      return word.substr(1, word.size() - 2);
    }
  }
  return "";
}

}  // namespace

std::optional<std::string> TmpfsHugePolicy(std::istream& mountinfo, dev_t dev) {
  const std::string want = absl::StrCat(major(dev), ":", minor(dev));
  std::string line;
  while (std::getline(mountinfo, line)) {
    const std::optional<MountInfoLine> mount = ParseMountInfoLine(line);
    if (!mount || mount->devno != want || mount->fstype != "tmpfs") continue;
    for (absl::string_view option : absl::StrSplit(mount->super_options, ',')) {
      if (absl::ConsumePrefix(&option, "huge=")) return std::string(option);
    }
    return "never";
  }
  return std::nullopt;
}

std::string PoolPageSizeWarning(const std::string& pool_path) {
  struct stat st;
  if (stat(pool_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return "";
  std::optional<std::string> policy = TmpfsHugePolicy(in, st.st_dev);
  if (!policy) return "";
  const std::string override_policy = ShmemEnabledOverride();
  if (override_policy == "force") return "";
  if (override_policy == "deny") *policy = "never (shmem_enabled=deny)";
  if (*policy == "always" || *policy == "within_size") return "";
  return absl::StrCat("pool ", pool_path, " is on a tmpfs mounted huge=", *policy,
                      ": direct-access writers take a page fault per 4 KiB page of every "
                      "segment they write; a tmpfs mounted huge=always gives the pool 2 MiB "
                      "pages (see \"Page size of the pool\" in docs/direct-access.md)");
}

}  // namespace walfs::fs
