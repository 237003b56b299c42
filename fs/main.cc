// walfs: mounts a walfs pool (see fs/options.h for the command line).
//
// --help and --version print to stdout and exit 0; a usage error prints what is wrong
// and "Try 'walfs --help' for more information." and exits 1; anything that stops the
// mount, or fails while serving or closing the pool, exits 32 (mount(8)'s statuses; the
// tools' conventions are in tools/cli.h).
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "fs/daemon.h"
#include "fs/options.h"

int main(int argc, char** argv) {
  absl::StatusOr<walfs::fs::Options> options = walfs::fs::ParseCommandLine(argc, argv);
  if (!options.ok()) {
    fprintf(stderr, "walfs: %s\nTry 'walfs --help' for more information.\n",
            std::string(options.status().message()).c_str());
    return walfs::fs::kExitUsage;
  }
  if (options->show_help) {
    fputs(walfs::fs::Usage("walfs").c_str(), stdout);
    return 0;
  }
  if (options->show_version) {
    printf("walfs %s\n", WALFS_VERSION);
    return 0;
  }
  return walfs::fs::RunDaemon(*options) == 0 ? 0 : walfs::fs::kExitMountFailure;
}
