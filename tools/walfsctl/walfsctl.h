// What several walfsctl subcommands share: the program's name and exit statuses, how a
// usage error or a failure is reported, the read-only, checked opening of an unmounted
// pool, and each subcommand's entry point for the dispatcher (main.cc). Prints nothing
// itself but through UsageError and Fail; never writes to a pool.
#ifndef WALFS_TOOLS_WALFSCTL_WALFSCTL_H_
#define WALFS_TOOLS_WALFSCTL_WALFSCTL_H_

#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "core/fsck.h"
#include "tools/cli.h"

namespace walfs::tools::ctl {

inline constexpr char kProgram[] = "walfsctl";
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 1;

// "walfsctl: MESSAGE" and the pointer to --help on stderr; the usage exit status.
inline int UsageError(const std::string& message) {
  return tools::UsageError(kProgram, message, kExitUsage);
}

// "walfsctl: MESSAGE" on stderr; the failure exit status.
inline int Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
  return kExitFailure;
}

// Opens `path` read-only under a shared claim (none, and a warning on stderr, when a
// daemon holds it) and lists its files with the checker's raw reader, metadata only;
// `salvage` also lists what lies behind damaged inode records (core/fsck.h,
// FsckOptions::salvage).
absl::StatusOr<core::CheckedPool> OpenAndList(const std::string& path, bool salvage = false);

// The subcommands; each returns the process's exit status.
int Inspect(const std::string& pool, bool json);                  // inspect.cc
int Export(const std::string& pool, std::string dir, bool salvage);  // export.cc
// `format`: "human", "json", "prometheus" or "latency".
int Status(const std::string& path, const std::string& format);  // status.cc
int Grow(const std::string& pool, const std::string& size_text);  // grow.cc

}  // namespace walfs::tools::ctl

#endif  // WALFS_TOOLS_WALFSCTL_WALFSCTL_H_
