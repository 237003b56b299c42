// walfs: mounts a walfs pool (see fs/options.h for the command line).
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "fs/daemon.h"
#include "fs/options.h"

int main(int argc, char** argv) {
  absl::StatusOr<walfs::fs::Options> options = walfs::fs::ParseCommandLine(argc, argv);
  if (!options.ok()) {
    fprintf(stderr, "walfs: %s\n", std::string(options.status().message()).c_str());
    return 1;
  }
  if (options->show_help) {
    fputs(walfs::fs::Usage("walfs").c_str(), stdout);
    return 0;
  }
  if (options->show_version) {
    printf("walfs %s\n", WALFS_VERSION);
    return 0;
  }
  return walfs::fs::RunDaemon(*options);
}
