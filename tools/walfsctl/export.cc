// walfsctl export: copies every file of an unmounted pool into a directory, for
// disaster recovery. Reads the pool through OpenAndList (walfsctl.h); every write is
// the Exporter's (tools/export_tree.h), which treats the pool as untrusted. Prints the
// summary on stdout and the exporter's problems on stderr.
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/fsck.h"
#include "tools/export_tree.h"
#include "tools/human_bytes.h"
#include "tools/walfsctl/walfsctl.h"

namespace walfs::tools::ctl {

int Export(const std::string& pool, std::string dir, bool salvage) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  absl::StatusOr<core::CheckedPool> opened = OpenAndList(pool, salvage);
  if (!opened.ok()) return Fail(std::string(opened.status().message()));
  const core::FsckReport& r = opened->report;
  if (!r.superblock_valid) {
    return Fail(absl::StrCat(pool, ": no valid superblock; nothing can be exported"));
  }
  const size_t errors = r.Count(core::FsckProblem::kError, false);
  if (errors > 0) {
    std::fprintf(stderr,
                 "walfsctl: warning: %s has %zu error(s) (see fsck.walfs); exporting what is "
                 "reachable%s\n",
                 pool.c_str(), errors,
                 salvage ? ", damaged records included" : " (--salvage also tries damaged records)");
  }
  Exporter exporter(*opened->region, r.superblock, dir,
                    [](const std::string* path, const std::string& message) {
                      if (path == nullptr) {
                        std::fprintf(stderr, "walfsctl: %s\n", message.c_str());
                      } else {
                        std::fprintf(stderr, "walfsctl: %s: %s\n", path->c_str(),
                                     message.c_str());
                      }
                    });
  const bool ok = exporter.Run(r.files_list);
  std::printf("exported %llu files (%s), %llu hard links, %llu symlinks, %llu directories "
              "from %s to %s\n",
              static_cast<unsigned long long>(exporter.files()),
              HumanBytes(exporter.bytes()).c_str(),
              static_cast<unsigned long long>(exporter.links()),
              static_cast<unsigned long long>(exporter.symlinks()),
              static_cast<unsigned long long>(exporter.dirs()), pool.c_str(), dir.c_str());
  if (exporter.specials() > 0) {
    std::printf("%llu FIFO(s), socket(s) or device node(s) recreated\n",
                static_cast<unsigned long long>(exporter.specials()));
  }
  if (exporter.salvaged() > 0) {
    std::printf("%llu name(s) copied from damaged inode records\n",
                static_cast<unsigned long long>(exporter.salvaged()));
  }
  return ok && errors == 0 ? 0 : kExitFailure;
}

}  // namespace walfs::tools::ctl
