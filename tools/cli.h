// What every walfs program does with --help, --version and a wrong command line, so
// that they all behave alike (docs/hacking.md, "Command-line conventions"):
//   --help      the usage text on stdout, exit 0
//   --version   "PROGRAM VERSION" on stdout, exit 0 (-V too where the family has it:
//               e2fsck and mke2fs print their version with -V)
//   usage error "PROGRAM: what is wrong" and "Try 'PROGRAM --help' for more
//               information." on stderr; exit status per family: fsck.walfs 16 as
//               fsck(8), mkfs.walfs and walfsctl 1 as mke2fs and the other e2fsprogs,
//               the walfs daemon 1 as mount(8) (fs/main.cc says the same there).
#ifndef WALFS_TOOLS_CLI_H_
#define WALFS_TOOLS_CLI_H_

#include <cstdio>
#include <string>

#ifndef WALFS_VERSION
#error "WALFS_VERSION must be defined (tools/CMakeLists.txt sets it from project())"
#endif

namespace walfs::tools {

inline int UsageError(const char* program, const std::string& message, int exit_code) {
  std::fprintf(stderr, "%s: %s\nTry '%s --help' for more information.\n", program,
               message.c_str(), program);
  return exit_code;
}

inline int PrintVersion(const char* program) {
  std::printf("%s %s\n", program, WALFS_VERSION);
  return 0;
}

}  // namespace walfs::tools

#endif  // WALFS_TOOLS_CLI_H_
