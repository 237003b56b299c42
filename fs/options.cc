// Command-line parsing for the walfs daemon (mount.fuse3 argv shape).
#include "fs/options.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
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

// A week: the kernel keeps timeouts in jiffies; anything longer is no different for a
// mount whose namespace only walfs changes.
constexpr double kMaxCacheTimeout = 7 * 86400.0;

// "N", "NK"/"NKiB", "NM"/"NMiB" (1024-based), as mkfs.walfs takes sizes.
bool ParseByteCount(const std::string& text, uint64_t* out) {
  std::string digits = text;
  uint64_t unit = 1;
  for (auto [suffix, factor] : {std::pair<const char*, uint64_t>{"KiB", 1024},
                                {"MiB", 1024 * 1024},
                                {"K", 1024},
                                {"M", 1024 * 1024}}) {
    std::string_view sv(digits);
    if (sv.ends_with(suffix)) {
      digits.resize(digits.size() - std::strlen(suffix));
      unit = factor;
      break;
    }
  }
  uint64_t n = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &n) || n > UINT64_MAX / unit) return false;
  *out = n * unit;
  return true;
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
  if (key == "max_idle_threads") {
    unsigned n = 0;
    if (!has_value || !absl::SimpleAtoi(value, &n) || n < 1 || n > kMaxThreads) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mount option max_idle_threads=N needs a number from 1 to ", kMaxThreads,
          ", got '", option, "'"));
    }
    options.max_idle_threads = n;
    return absl::OkStatus();
  }
  if (key == "clone_fd" || key == "noclone_fd") {
    options.clone_fd = key == "clone_fd";
    return no_value();
  }
  if (key == "max_write") {
    uint64_t n = 0;
    if (!has_value || !ParseByteCount(value, &n) || n < kMinWrite || n > kMaxWriteLimit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mount option max_write=N needs a size from ", kMinWrite, " to ", kMaxWriteLimit,
          " bytes (K and M suffixes allowed), got '", option, "'"));
    }
    options.max_write = static_cast<unsigned>(n);
    return absl::OkStatus();
  }
  if (key == "entry_timeout" || key == "attr_timeout") {
    double t = 0;
    if (!has_value || !absl::SimpleAtod(value, &t) || !(t >= 0) || t > kMaxCacheTimeout) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mount option ", key, "=SECS needs a number of seconds from 0 to ",
          kMaxCacheTimeout, ", got '", option, "'"));
    }
    (key == "entry_timeout" ? options.entry_timeout : options.attr_timeout) = t;
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
  if (options.max_idle_threads > options.threads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mount option max_idle_threads=", options.max_idle_threads,
        " exceeds threads=", options.threads));
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
      "  max_idle_threads=N  idle workers kept (default: threads, none exit)\n"
      "  clone_fd            each worker reads its own clone of /dev/fuse (default)\n"
      "  noclone_fd          all workers read one /dev/fuse fd\n"
      "  max_write=N         largest write request, 4K..1M (default 1M)\n"
      "  entry_timeout=SECS  kernel caching of names and negative lookups\n"
      "  attr_timeout=SECS   kernel caching of attributes (both default 86400)\n"
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

absl::StatusOr<Experiments> ParseExperiments(const std::string& list) {
  Experiments e;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string name = list.substr(start, comma - start);
    if (name == "page_cache") {
      e.page_cache = true;
    } else if (name == "ignore_dsync") {
      e.ignore_dsync = true;
    } else if (name == "no_zero_elision") {
      e.no_zero_elision = true;
    } else if (!name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WALFS_EXPERIMENT: unknown switch '", name,
          "' (known: page_cache, ignore_dsync, no_zero_elision)"));
    }
    start = comma + 1;
  }
  return e;
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
