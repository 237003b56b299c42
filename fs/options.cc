// Command-line parsing for the walfs daemon (mount.fuse3 argv shape).
//
// The argument vector is split by libfuse's own fuse_opt_parse, so -o lists are read
// exactly as every FUSE file system reads them (options separated by ',', '\,' and '\\'
// escaping a comma and a backslash, '\NNN' an octal byte, -oLIST or -o LIST, '--'
// ending the options); each option is then checked here.
#include "fs/options.h"

#include <fuse_opt.h>
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
#include "util/byte_size.h"

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
  if (key == "allow_root") {
    options.allow_root = true;
    return no_value();
  }
  if (key == "auto_unmount") {
    options.auto_unmount = true;
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
  if (key == "nonempty") {
    options.nonempty = true;
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
    const std::string range = absl::StrCat("mount option max_write=SIZE needs a size from ",
                                           kMinWrite, " to ", kMaxWriteLimit,
                                           " bytes (4K to 1M), got '", option, "'");
    if (!has_value) return absl::InvalidArgumentError(range);
    absl::StatusOr<uint64_t> n = util::ParseByteSize(value);
    if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(range, ": ", n.status().message()));
    if (*n < kMinWrite || *n > kMaxWriteLimit) return absl::InvalidArgumentError(range);
    options.max_write = static_cast<unsigned>(*n);
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
    if (!kTestFacilitiesBuilt) {
      return absl::InvalidArgumentError(
          "mount option powercut_sim: this walfs was built without test facilities "
          "(configure with -DWALFS_TEST_FACILITIES=ON for a test build)");
    }
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

// fuse_opt_parse's state: what was parsed, the first error, the positional arguments.
struct ParseContext {
  Options options;
  absl::Status error;
  std::vector<std::string> positional;
};

enum Key : int { kKeyHelp, kKeyVersion, kKeyForeground, kKeyDebug, kKeySingleThread };

const fuse_opt kFuseOptSpecs[] = {
    FUSE_OPT_KEY("-h", kKeyHelp),        FUSE_OPT_KEY("--help", kKeyHelp),
    FUSE_OPT_KEY("-V", kKeyVersion),     FUSE_OPT_KEY("--version", kKeyVersion),
    FUSE_OPT_KEY("-f", kKeyForeground),  FUSE_OPT_KEY("-d", kKeyDebug),
    FUSE_OPT_KEY("--debug", kKeyDebug),  FUSE_OPT_KEY("-s", kKeySingleThread),
    FUSE_OPT_END,
};

// Called by fuse_opt_parse for each argument: a flag above, one option of a -o list
// (unescaped), an unknown argument starting with '-', or a positional argument.
// Returns 0 (consumed) or -1 (stop: ctx->error says why).
int ProcessArgument(void* data, const char* arg, int key, fuse_args* /*outargs*/) {
  ParseContext& ctx = *static_cast<ParseContext*>(data);
  Options& options = ctx.options;
  switch (key) {
    case kKeyHelp: options.show_help = true; return 0;
    case kKeyVersion: options.show_version = true; return 0;
    case kKeyForeground: options.foreground = true; return 0;
    case kKeyDebug:
      options.debug = true;
      options.foreground = true;
      return 0;
    case kKeySingleThread: options.threads = 1; return 0;
    case FUSE_OPT_KEY_NONOPT: ctx.positional.emplace_back(arg); return 0;
    case FUSE_OPT_KEY_OPT:
      // An argument starting with '-' that no spec matched arrives here whole; a -o
      // list's options arrive one by one, without the -o.
      if (arg[0] == '-') {
        ctx.error = absl::InvalidArgumentError(
            absl::StrCat("unknown argument '", arg, "' (see walfs --help)"));
        return -1;
      }
      ctx.error = ApplyOption(arg, options);
      return ctx.error.ok() ? 0 : -1;
    default: break;
  }
  ctx.error = absl::InternalError(absl::StrCat("unexpected fuse_opt key ", key));
  return -1;
}

}  // namespace

absl::StatusOr<Options> ParseCommandLine(int argc, const char* const* argv) {
  // fuse_opt_parse would only log this one on stderr; say it the way every error is said.
  if (argc > 1 && std::string_view(argv[argc - 1]) == "-o") {
    return absl::InvalidArgumentError("-o needs an option list");
  }
  ParseContext ctx;
  // fuse_opt_parse neither writes into nor frees the strings of an args it did not
  // allocate (it copies a -o list before splitting it).
  fuse_args args = FUSE_ARGS_INIT(argc, const_cast<char**>(argv));
  const int rc = fuse_opt_parse(&args, &ctx, kFuseOptSpecs, ProcessArgument);
  fuse_opt_free_args(&args);
  if (!ctx.error.ok()) return ctx.error;
  if (rc != 0) return absl::InvalidArgumentError("cannot parse the command line");
  Options& options = ctx.options;
  std::vector<std::string>& positional = ctx.positional;
  if (options.show_help || options.show_version) return options;
  if (options.allow_other && options.allow_root) {
    return absl::InvalidArgumentError(
        "mount options allow_other and allow_root exclude each other");
  }
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
      "  -h, --help          show this help and exit\n"
      "  -V, --version       show the version and exit\n"
      "\n"
      "Mount options (-o):\n"
      "  allow_other         let other users in; access follows the mode bits\n"
      "  allow_root          let root in besides the daemon's user (not with allow_other)\n"
      "  auto_unmount        unmount when the daemon exits, even if it is killed\n"
      "  default_permissions always in force: the kernel checks mode bits\n"
      "  ro                  read-only mount\n"
      "  noexec              forbid executing files\n"
      "  nonempty            mount over a directory that holds files (refused otherwise:\n"
      "                      the mount would hide them)\n"
      "  threads=N           FUSE worker threads, 1..",
      kMaxThreads, " (default ", kDefaultThreads,
      ")\n"
      "  max_idle_threads=N  idle workers kept (default: threads, none exit)\n"
      "  clone_fd            each worker reads its own clone of /dev/fuse (default)\n"
      "  noclone_fd          all workers read one /dev/fuse fd\n"
      "  max_write=SIZE      largest write request, 4K..1M (default 1M)\n"
      "  entry_timeout=SECS  kernel caching of names and negative lookups\n"
      "  attr_timeout=SECS   kernel caching of attributes (both default 86400)\n"
      "  durability=auto     on PMEM, writes are durable before their reply and fsync\n"
      "                      costs nothing (default)\n"
      "  durability=strict   every fsync is sent to walfs and persists for real\n"
      "  fsname=NAME         source shown by mount and df (default: POOL)\n"
      "  subtype=NAME        file system type fuse.NAME (default: walfs)\n"
      ,
      kTestFacilitiesBuilt
          ? "  powercut_sim        TEST FACILITY, never for real data: only persisted bytes\n"
            "                      reach POOL, so kill -9 of the daemon acts as a power cut\n"
          : "",
      "Options mount(8) adds (rw, nodev, nosuid, noatime, nofail, _netdev, defaults,\n"
      "x-systemd.*, ...) are ignored. Options are separated by ','; '\\,' is a comma\n"
      "inside a value. SIZE is bytes or a number with K, M, G or T (also KB/KiB, ...;\n"
      "powers of 1024): 64M = 64MB = 64MiB, 512k.\n"
      "\n"
      "Exit status, as mount(8): 0 success, 1 usage error, 32 mount failure or an\n"
      "error while serving or closing the pool.\n");
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
  // libfuse mounts with allow_other and refuses requests from users other than the
  // daemon's and root (fuse_lowlevel.c, deny_others).
  if (options.allow_root) mount_options.push_back("allow_root");
  // libfuse mounts through fusermount3 --auto-unmount, which unmounts once the daemon's
  // end of /dev/fuse closes, however the daemon ended.
  if (options.auto_unmount) mount_options.push_back("auto_unmount");
  if (options.read_only) mount_options.push_back("ro");
  if (options.noexec) mount_options.push_back("noexec");
  std::vector<std::string> args = {"walfs", "-o", absl::StrJoin(mount_options, ",")};
  if (options.debug) args.push_back("-d");
  return args;
}

}  // namespace walfs::fs
