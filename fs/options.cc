// Command-line parsing for the walfs daemon (mount.fuse3 argv shape).
#include "fs/options.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace walfs::fs {
namespace {

// Options mount(8), mount.fuse3 or fstab habits add; none changes what walfs does.
// (nosuid and nodev are libfuse's defaults anyway; a pg_wal mount never needs suid,
// device nodes or atime.)
constexpr std::array<std::string_view, 26> kIgnoredOptions = {
    "rw",       "dev",     "nodev",      "suid",        "nosuid",   "exec",
    "atime",    "noatime", "relatime",   "norelatime",  "strictatime",
    "diratime", "nodiratime", "lazytime", "nolazytime", "async",    "nofail",
    "_netdev",  "auto",    "noauto",     "user",        "users",    "nouser",
    "owner",    "group",   "defaults"};

bool IsIgnored(std::string_view option) {
  for (std::string_view o : kIgnoredOptions) {
    if (option == o) return true;
  }
  return option.starts_with("x-") || option.starts_with("comment=");
}

std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  std::string base(cwd);
  if (base != "/") base += '/';
  std::string rel = path;
  while (rel.starts_with("./")) rel.erase(0, 2);
  if (rel == ".") return std::string(cwd);
  return base + rel;
}

// libfuse splits -o values on ',' and honours '\' escapes.
std::string EscapeFuseOption(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// Abseil's string_view here is its own type, so strings handed to absl are std::string.
absl::Status ApplyOption(const std::string& option, Options& options) {
  if (option.empty()) return absl::OkStatus();
  std::string key = option, value;
  bool has_value = false;
  if (size_t eq = option.find('='); eq != std::string::npos) {
    key = option.substr(0, eq);
    value = option.substr(eq + 1);
    has_value = true;
  }
  auto no_value = [&]() -> absl::Status {
    if (has_value) {
      return absl::InvalidArgumentError(
          absl::StrCat("mount option '", key, "' takes no value"));
    }
    return absl::OkStatus();
  };
  if (key == "allow_other") {
    options.allow_other = true;
    return no_value();
  }
  if (key == "default_permissions") {
    options.default_permissions_given = true;
    return no_value();
  }
  if (key == "ro") {
    options.read_only = true;
    return no_value();
  }
  if (key == "rw") options.read_only = false;  // and reported as ignored below
  if (key == "noexec") {
    options.noexec = true;
    return no_value();
  }
  if (key == "debug") {
    options.debug = true;
    options.foreground = true;
    return no_value();
  }
  if (key == "threads") {
    unsigned n = 0;
    if (!has_value || !absl::SimpleAtoi(value, &n) || n < 1 || n > kMaxThreads) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mount option threads=N needs a number from 1 to ", kMaxThreads, ", got '",
          option, "'"));
    }
    options.threads = n;
    return absl::OkStatus();
  }
  if (key == "durability") {
    if (value == "auto") {
      options.durability = Durability::kAuto;
    } else if (value == "strict") {
      options.durability = Durability::kStrict;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "mount option durability= takes auto or strict, got '", option, "'"));
    }
    return absl::OkStatus();
  }
  if (key == "powercut_sim") {
    options.powercut_sim = true;
    return no_value();
  }
  if (key == "fsname" || key == "subtype") {
    if (!has_value || value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("mount option ", key, "= needs a value"));
    }
    (key == "fsname" ? options.fsname : options.subtype) = value;
    return absl::OkStatus();
  }
  if (IsIgnored(option)) {
    options.ignored.emplace_back(option);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mount option '", option, "' (see walfs --help)"));
}

absl::Status ApplyOptionList(const std::string& list, Options& options) {
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string option = list.substr(start, comma == std::string::npos ? comma : comma - start);
    if (absl::Status s = ApplyOption(option, options); !s.ok()) return s;
    if (comma == std::string::npos) return absl::OkStatus();
    start = comma + 1;
  }
}

}  // namespace

absl::StatusOr<Options> ParseCommandLine(int argc, const char* const* argv) {
  Options options;
  std::vector<std::string> positional;
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positional || arg.empty() || arg[0] != '-' || arg == "-") {
      positional.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
    } else if (arg == "-f") {
      options.foreground = true;
    } else if (arg == "-d" || arg == "--debug") {
      options.debug = true;
      options.foreground = true;
    } else if (arg == "-s") {
      options.threads = 1;
    } else if (arg == "-h" || arg == "--help") {
      options.show_help = true;
    } else if (arg == "-V" || arg == "--version") {
      options.show_version = true;
    } else if (arg == "-o") {
      if (i + 1 >= argc) return absl::InvalidArgumentError("-o needs an option list");
      if (absl::Status s = ApplyOptionList(argv[++i], options); !s.ok()) return s;
    } else if (arg.starts_with("-o")) {
      if (absl::Status s = ApplyOptionList(arg.substr(2), options); !s.ok()) return s;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown argument '", arg, "' (see walfs --help)"));
    }
  }
  if (options.show_help || options.show_version) return options;
  if (options.powercut_sim && options.read_only) {
    return absl::InvalidArgumentError(
        "mount option powercut_sim cannot be used with ro (a read-only mount persists "
        "nothing, so there is nothing to cut)");
  }
  if (positional.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected POOL and MOUNTPOINT, got ", positional.size(), " argument(s)",
        positional.empty() ? "" : ": ", absl::StrJoin(positional, " ")));
  }
  options.pool = Absolute(positional[0]);
  options.mountpoint = Absolute(positional[1]);
  return options;
}

std::string Usage(const std::string& program) {
  return absl::StrCat(
      "usage: ", program, " POOL MOUNTPOINT [-f] [-d] [-s] [-o OPTION[,OPTION...]]\n",
      "\n"
      "Mounts the walfs pool POOL (made by mkfs.walfs) at MOUNTPOINT.\n"
      "\n"
      "  -f                  stay in the foreground (log to stderr)\n"
      "  -d                  debug: trace every FUSE request (implies -f)\n"
      "  -s                  one worker thread (threads=1)\n"
      "  -h, --help          this text\n"
      "  -V, --version       print the version\n"
      "\n"
      "Mount options (-o):\n"
      "  allow_other         let other users in; access follows the mode bits\n"
      "  default_permissions always in force: the kernel checks mode bits\n"
      "  ro                  read-only mount\n"
      "  noexec              forbid executing files\n"
      "  threads=N           FUSE worker threads, 1..",
      kMaxThreads, " (default ", kDefaultThreads,
      ")\n"
      "  durability=auto     on PMEM, writes are durable before their reply and fsync\n"
      "                      costs nothing (default)\n"
      "  durability=strict   every fsync is sent to walfs and persists for real\n"
      "  fsname=NAME         source shown by mount and df (default: POOL)\n"
      "  subtype=NAME        file system type fuse.NAME (default: walfs)\n"
      "  powercut_sim        TEST FACILITY, never for real data: only persisted bytes\n"
      "                      reach POOL, so kill -9 of the daemon acts as a power cut\n"
      "Options mount(8) adds (rw, nodev, nosuid, noatime, nofail, _netdev, defaults,\n"
      "x-systemd.*, ...) are ignored.\n");
}

std::vector<std::string> FuseSessionArgs(const Options& options) {
  std::vector<std::string> mount_options = {
      absl::StrCat("fsname=",
                   EscapeFuseOption(options.fsname.empty() ? options.pool : options.fsname)),
      absl::StrCat("subtype=", EscapeFuseOption(options.subtype)),
      "default_permissions"};
  if (options.allow_other) mount_options.push_back("allow_other");
  if (options.read_only) mount_options.push_back("ro");
  if (options.noexec) mount_options.push_back("noexec");
  std::vector<std::string> args = {"walfs", "-o", absl::StrJoin(mount_options, ",")};
  if (options.debug) args.push_back("-d");
  return args;
}

}  // namespace walfs::fs
