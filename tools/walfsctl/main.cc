// walfsctl: looks at walfs pools and mounts. This file owns the command line: the usage
// text, option parsing and which subcommand runs; each subcommand is a file of its own
// in this directory, and what several share is in walfsctl.h.
//   inspect  geometry, usage and every file of an unmounted pool (read-only)
//   export   copies every file of an unmounted pool into a directory (read-only)
//   status   the live status document of a mounted walfs (getxattr user.walfs.status
//            of the mount root that holds a given path)
//   grow     makes an unmounted pool bigger (extends its file, then commits the new
//            data-area size through the journal: core/wal_directory.h, GrowPool)
//
// inspect and export read the pool with the checker's raw reader (core/fsck.h), not
// with WalDirectory: they work on a pool that WalDirectory would refuse to open, which
// is when an export matters most.
//
// Exit status, as the e2fsprogs tools: 0 success, 1 failure (export: some file could not
// be copied, or the pool has errors so files may be missing) or usage error
// (tools/cli.h).
#include <getopt.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/cli.h"
#include "tools/walfsctl/walfsctl.h"

namespace walfs::tools::ctl {
namespace {

constexpr char kUsage[] =
    "Usage: walfsctl [OPTIONS] COMMAND ARGUMENTS (options may come anywhere)\n"
    "  walfsctl inspect [--json] POOL\n"
    "      Geometry, usage and the file list (path, type, size, mode, uid, gid, nlink,\n"
    "      extents) of an unmounted pool. Read-only.\n"
    "  walfsctl export [--salvage] POOL DIR\n"
    "      Copies every file of an unmounted pool into DIR (created if missing; existing\n"
    "      names are not overwritten), keeping the tree, symlinks, hard links, modes,\n"
    "      mtimes and, as root, owners. Read-only: for disaster recovery. --salvage also\n"
    "      copies files whose inode record is damaged, as best it can.\n"
    "  walfsctl status PATH [--json | --prometheus | --latency]\n"
    "      The running daemon's status, read from the user.walfs.status attribute of\n"
    "      the root of the walfs mount that holds PATH (the mount point or anything\n"
    "      inside it, e.g. PGDATA/pg_wal): health, space, traffic, direct access,\n"
    "      errors and p99 latency for people; the raw JSON document; Prometheus text\n"
    "      exposition (walfs_* series labelled with mountpoint and pool); or the\n"
    "      latency table of every request class (count, mean, p50, p90, p99, p99.9, max).\n"
    "\n"
    "  -h, --help      show this help and exit (also: walfsctl help)\n"
    "  -V, --version   show the version and exit\n"
    "\n"
    "Exit status: 0 success, 1 failure or usage error.\n";

// Options may come before or after the command and its arguments (getopt_long permutes
// argv); each is then checked against the command it was given with.
int Run(int argc, char** argv) {
  enum : int { kJson = 256, kPrometheus, kLatency, kSalvage };
  static const option kOptions[] = {
      {"json", no_argument, nullptr, kJson},
      {"prometheus", no_argument, nullptr, kPrometheus},
      {"latency", no_argument, nullptr, kLatency},
      {"salvage", no_argument, nullptr, kSalvage},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, 'V'},
      {nullptr, 0, nullptr, 0},
  };
  bool json = false, prometheus = false, latency = false, salvage = false;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "hV", kOptions, nullptr)) != -1) {
    switch (c) {
      case kJson: json = true; break;
      case kPrometheus: prometheus = true; break;
      case kLatency: latency = true; break;
      case kSalvage: salvage = true; break;
      case 'h': std::fputs(kUsage, stdout); return 0;
      case 'V': return PrintVersion(kProgram);
      default: return UsageError(absl::StrCat("unknown option ", argv[optind - 1]));
    }
  }
  std::vector<std::string> args(argv + optind, argv + argc);
  if (args.empty()) return UsageError("no command given");
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // Options that the command does not take, by name, for the error message.
  auto misplaced = [&](bool allow_json, bool allow_prometheus, bool allow_salvage) {
    std::string bad;
    if (json && !allow_json) bad = "--json";
    if (prometheus && !allow_prometheus) bad = "--prometheus";
    if (latency && !allow_prometheus) bad = "--latency";
    if (salvage && !allow_salvage) bad = "--salvage";
    return bad;
  };
  if (command == "inspect") {
    if (std::string bad = misplaced(true, false, false); !bad.empty()) {
      return UsageError(absl::StrCat("inspect does not take ", bad));
    }
    if (args.size() != 1) return UsageError("inspect takes one POOL");
    return Inspect(args[0], json);
  }
  if (command == "export") {
    if (std::string bad = misplaced(false, false, true); !bad.empty()) {
      return UsageError(absl::StrCat("export does not take ", bad));
    }
    if (args.size() != 2) return UsageError("export takes POOL and DIR");
    return Export(args[0], args[1], salvage);
  }
  if (command == "status") {
    if (std::string bad = misplaced(true, true, false); !bad.empty()) {
      return UsageError(absl::StrCat("status does not take ", bad));
    }
    if (json + prometheus + latency > 1) {
      return UsageError("--json, --prometheus and --latency exclude each other");
    }
    if (args.size() != 1) return UsageError("status takes one PATH (a walfs mount or a path in it)");
    return Status(args[0], json         ? "json"
                           : prometheus ? "prometheus"
                           : latency    ? "latency"
                                        : "human");
  }
  if (command == "grow") {
    if (std::string bad = misplaced(false, false, false); !bad.empty()) {
      return UsageError(absl::StrCat("grow does not take ", bad));
    }
    if (args.size() != 2) return UsageError("grow takes POOL and SIZE");
    return Grow(args[0], args[1]);
  }
  return UsageError(absl::StrCat("unknown command '", command, "'"));
}

}  // namespace
}  // namespace walfs::tools::ctl

int main(int argc, char** argv) { return walfs::tools::ctl::Run(argc, argv); }
