// mkfs.walfs: creates a walfs pool in a file or on a device-DAX device.
//
// Exit status, as mkfs(8) and mke2fs: 0 on success, 1 on any error, usage errors
// included (tools/cli.h).
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/format.h"
#include "core/fsck.h"
#include "core/persistent_region.h"
#include "core/wal_directory.h"
#include "tools/cli.h"
#include "tools/human_bytes.h"
#include "util/byte_size.h"

namespace walfs::tools {
namespace {

namespace f = core::format;

constexpr char kUsage[] =
    "Usage: mkfs.walfs [OPTIONS] POOL\n"
    "Creates a walfs pool in POOL: a file (created with mode 0600 when missing) or a\n"
    "device-DAX character device.\n"
    "\n"
    "  -s, --size SIZE          pool size; required when POOL does not exist, unless\n"
    "                           --max-wal-size is given (then the pool is sized for it).\n"
    "                           On an existing regular file, resizes it to SIZE. Not\n"
    "                           allowed on a device (its whole size is used).\n"
    "      --max-wal-size SIZE  the cluster's max_wal_size (default 1G, PostgreSQL's)\n"
    "      --wal-keep-size SIZE the cluster's wal_keep_size (default 0, PostgreSQL's)\n"
    "                           A pool whose data area is smaller than max_wal_size +\n"
    "                           wal_keep_size + 5 segments (3 in flight, 2 reserved) is\n"
    "                           made with a warning giving the size it needs and the\n"
    "                           max_wal_size it fits; one that cannot hold two segments\n"
    "                           is refused.\n"
    "  -S, --segment-size SIZE  extent given to each WAL segment file: a power of two\n"
    "                           from 1M to 1G (default 16M); match initdb --wal-segsize\n"
    "  -i, --inodes N           inode table size (default: one per 64 KiB, at least 64)\n"
    "  -o, --owner USER[:GROUP] owner of the pool file and of the mount root, so the\n"
    "                           daemon and PostgreSQL can run as that user (e.g.\n"
    "                           postgres:postgres); names or numbers. Default: the\n"
    "                           user running mkfs.walfs\n"
    "  -f, --force              overwrite an existing pool or a non-empty file\n"
    "  -z, --zero               write zeros over the whole pool (by default only the\n"
    "                           metadata mkfs needs is written, and the rest is zeroed\n"
    "                           as it is first used, which takes seconds at any size)\n"
    "  -q, --quiet              print nothing on success\n"
    "  -h, --help               show this help and exit\n"
    "  -V, --version            show the version and exit\n"
    "\n"
    "SIZE is a number of bytes, optionally followed by K, M, G or T, also written KB or\n"
    "KiB, MB or MiB, ... in any case; all are powers of 1024 (64M = 64MB = 64MiB =\n"
    "67108864 bytes, 512k = 524288 bytes).\n"
    "Exit status: 0 on success, 1 on error (usage errors included).\n";

constexpr char kProgram[] = "mkfs.walfs";
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 1;

int UsageError(const std::string& message) {
  return tools::UsageError(kProgram, message, kExitUsage);
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
  return kExitFailure;
}

std::string ParentDirectory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// True when the first two blocks of the file or device hold anything (a pool, a file
// system, data): overwriting them needs --force.
absl::StatusOr<bool> HoldsData(const std::string& path, bool* is_walfs) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  char head[2 * f::kBlockSize] = {};
  const ssize_t n = pread(fd, head, sizeof(head), 0);
  const int saved = errno;
  close(fd);
  if (n < 0) return absl::InternalError(absl::StrCat("cannot read ", path, ": ", strerror(saved)));
  uint64_t magic = 0;
  if (n >= 8) std::memcpy(&magic, head, 8);
  *is_walfs = magic == f::kSuperblockMagic;
  for (ssize_t i = 0; i < n; ++i) {
    if (head[i] != 0) return true;
  }
  return false;
}

// Sets a regular file's size. Growth is allocated (as OpenPmemRegion allocates a pool it
// creates), so a store into the mapping never faults on a full file system.
absl::Status Resize(const std::string& path, uint64_t size) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  int e = 0;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    e = errno;
  } else {
    e = posix_fallocate(fd, 0, static_cast<off_t>(size));
  }
  if (e == 0) core::PrefaultTmpfsRange(fd, 0, size);
  close(fd);
  if (e != 0) {
    return absl::InternalError(absl::StrCat("cannot resize ", path, " to ", size, " bytes: ",
                                            strerror(e)));
  }
  return absl::OkStatus();
}

// A progress bar on stderr while the data area is zeroed (only when stderr is a tty).
class ProgressBar {
 public:
  void Update(uint64_t done, uint64_t total) {
    if (total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    constexpr int kWidth = 40;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\rzeroing [%s%s] %3d%% %s / %s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), percent, HumanBytes(done).c_str(),
                 HumanBytes(total).c_str());
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  int last_percent_ = -1;
};

// "postgres", "postgres:postgres", "105:111": the user's primary group when none is given.
std::optional<std::pair<uid_t, gid_t>> ParseOwner(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string user = text.substr(0, colon);
  const std::string group_name = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (user.empty()) return std::nullopt;
  uid_t uid;
  gid_t gid;
  std::optional<gid_t> primary;
  if (const passwd* pw = getpwnam(user.c_str())) {
    uid = pw->pw_uid;
    primary = pw->pw_gid;
  } else if (uint32_t n; absl::SimpleAtoi(user, &n)) {
    uid = n;
  } else {
    return std::nullopt;
  }
  if (group_name.empty()) {
    if (!primary) {
      const passwd* pw = getpwuid(uid);
      if (pw == nullptr) return std::nullopt;
      primary = pw->pw_gid;
    }
    gid = *primary;
  } else if (const struct group* gr = getgrnam(group_name.c_str())) {
    gid = gr->gr_gid;
  } else if (uint32_t n; absl::SimpleAtoi(group_name, &n)) {
    gid = n;
  } else {
    return std::nullopt;
  }
  return std::make_pair(uid, gid);
}

struct Args {
  std::string pool;
  std::optional<uint64_t> size;
  uint64_t segment_size = f::kDefaultSegmentSize;
  uint64_t inodes = 0;
  std::optional<std::pair<uid_t, gid_t>> owner;
  bool force = false;
  bool zero = false;
  bool quiet = false;
  // PostgreSQL 15's defaults; given explicitly, --max-wal-size also sizes a new pool.
  uint64_t max_wal_size = uint64_t{1} << 30;
  uint64_t wal_keep_size = 0;
  bool max_wal_size_given = false;
};

// Refuses a data area PostgreSQL cannot run in (its WAL needs at least two segments:
// min_wal_size and max_wal_size are at least that), and warns, with the numbers, when it
// is smaller than the sizing rule (core/layout.h, docs/operations.md "Sizing a pool") asks for
// these settings. Returns false when refused (the message is printed).
bool CheckSize(const Args& args, const f::Superblock& layout, const core::FormatOptions& opts) {
  const uint64_t data = layout.data_blocks * f::kBlockSize;
  const uint64_t seg = layout.segment_size;
  if (data < 2 * seg) {
    std::fprintf(stderr,
                 "%s: a pool of %s is too small for PostgreSQL: its data area (%s) cannot hold "
                 "two WAL segments of %s, the least a cluster's WAL needs; make it at least "
                 "%s (that fits max_wal_size = %lluMB with wal_keep_size 0)\n",
                 kProgram, HumanBytes(layout.capacity).c_str(), HumanBytes(data).c_str(),
                 HumanBytes(seg).c_str(),
                 HumanBytes(core::PoolSizeFor(core::WalDataBytes(2 * seg, 0, seg), opts)
                                .value_or(0))
                     .c_str(),
                 static_cast<unsigned long long>((2 * seg) >> 20));
    return false;
  }
  const uint64_t need = core::WalDataBytes(args.max_wal_size, args.wal_keep_size, seg);
  if (data < need) {
    const uint64_t fits = core::MaxWalSizeFor(data, args.wal_keep_size, seg);
    std::fprintf(
        stderr,
        "%s: warning: a pool of %s (data area %s) is smaller than a cluster with max_wal_size "
        "%lluMB and wal_keep_size %lluMB needs: %s (max_wal_size + wal_keep_size + %llu "
        "segments of %s: %llu in flight, %llu reserved). A full pool stops the cluster. Make "
        "the pool %s (--size %lluM, or walfsctl grow later)%s\n",
        kProgram, HumanBytes(layout.capacity).c_str(), HumanBytes(data).c_str(),
        static_cast<unsigned long long>(args.max_wal_size >> 20),
        static_cast<unsigned long long>(args.wal_keep_size >> 20), HumanBytes(need).c_str(),
        static_cast<unsigned long long>(core::kHeadroomSegments + core::kReserveSegments),
        HumanBytes(seg).c_str(), static_cast<unsigned long long>(core::kHeadroomSegments),
        static_cast<unsigned long long>(core::kReserveSegments),
        HumanBytes(core::PoolSizeFor(need, opts).value_or(0)).c_str(),
        static_cast<unsigned long long>(core::PoolSizeFor(need, opts).value_or(0) >> 20),
        fits >= 2 * seg
            ? absl::StrCat(", or set max_wal_size = ", fits >> 20,
                           "MB (at most) in postgresql.conf")
                  .c_str()
            : absl::StrCat("; at this size it does not fit even PostgreSQL's smallest "
                           "max_wal_size (",
                           (2 * seg) >> 20, "MB) with wal_keep_size ",
                           args.wal_keep_size >> 20, "MB")
                  .c_str());
  }
  return true;
}

int Run(int argc, char** argv) {
  static const option kOptions[] = {
      {"size", required_argument, nullptr, 's'},
      {"segment-size", required_argument, nullptr, 'S'},
      {"inodes", required_argument, nullptr, 'i'},
      {"owner", required_argument, nullptr, 'o'},
      {"force", no_argument, nullptr, 'f'},
      {"zero", no_argument, nullptr, 'z'},
      {"quiet", no_argument, nullptr, 'q'},
      {"max-wal-size", required_argument, nullptr, 'M'},
      {"wal-keep-size", required_argument, nullptr, 'K'},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, 'V'},
      {nullptr, 0, nullptr, 0},
  };
  Args args;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":s:S:i:o:fzqhV", kOptions, nullptr)) != -1) {
    switch (c) {
      case 's': {
        absl::StatusOr<uint64_t> v = util::ParseByteSize(optarg);
        if (!v.ok()) return UsageError(absl::StrCat("--size: ", v.status().message()));
        if (*v == 0) return UsageError("--size: the pool size cannot be 0");
        args.size = *v;
        break;
      }
      case 'S': {
        absl::StatusOr<uint64_t> v = util::ParseByteSize(optarg);
        if (!v.ok()) return UsageError(absl::StrCat("--segment-size: ", v.status().message()));
        if (*v < f::kMinSegmentSize || *v > f::kMaxSegmentSize || !std::has_single_bit(*v)) {
          return UsageError(absl::StrCat("--segment-size: bad segment size '", optarg,
                                         "': must be a power of two from 1M to 1G"));
        }
        args.segment_size = *v;
        break;
      }
      case 'i':
        if (!absl::SimpleAtoi(optarg, &args.inodes) || args.inodes < 2) {
          return UsageError(absl::StrCat("bad inode count \"", optarg, "\""));
        }
        break;
      case 'o': {
        args.owner = ParseOwner(optarg);
        if (!args.owner) {
          return UsageError(absl::StrCat("bad owner \"", optarg,
                                         "\": want USER[:GROUP], names or numbers"));
        }
        break;
      }
      case 'M':
      case 'K': {
        const char* name = c == 'M' ? "--max-wal-size" : "--wal-keep-size";
        absl::StatusOr<uint64_t> v = util::ParseByteSize(optarg);
        if (!v.ok()) return UsageError(absl::StrCat(name, ": ", v.status().message()));
        if (c == 'M') {
          args.max_wal_size = *v;
          args.max_wal_size_given = true;
        } else {
          args.wal_keep_size = *v;
        }
        break;
      }
      case 'f': args.force = true; break;
      case 'z': args.zero = true; break;
      case 'q': args.quiet = true; break;
      case 'h': std::fputs(kUsage, stdout); return 0;
      case 'V': return PrintVersion(kProgram);
      case ':': return UsageError(absl::StrCat("option ", argv[optind - 1], " needs a value"));
      default: return UsageError(absl::StrCat("unknown option ", argv[optind - 1]));
    }
  }
  if (optind + 1 != argc) {
    return UsageError(optind == argc ? "no POOL given" : "more than one POOL given");
  }
  args.pool = argv[optind];

  core::FormatOptions format_options;
  format_options.segment_size = args.segment_size;
  format_options.inode_count = args.inodes;
  // Like mke2fs's root_owner: the mount root belongs to whoever made the pool, so a pool
  // made by postgres is usable by a daemon run as postgres without a chown through it.
  format_options.root_uid = args.owner ? args.owner->first : getuid();
  format_options.root_gid = args.owner ? args.owner->second : getgid();

  // Sized for the cluster's settings (docs/operations.md "Sizing a pool") when no size is given.
  const auto size_for_wal = [&]() -> absl::StatusOr<uint64_t> {
    return core::PoolSizeFor(
        core::WalDataBytes(args.max_wal_size, args.wal_keep_size, args.segment_size),
        format_options);
  };
  struct stat st;
  bool create = false;
  if (stat(args.pool.c_str(), &st) != 0) {
    if (errno != ENOENT) return Fail(absl::StrCat("cannot stat ", args.pool, ": ", strerror(errno)));
    if (!args.size && args.max_wal_size_given) {
      absl::StatusOr<uint64_t> sized = size_for_wal();
      if (!sized.ok()) return Fail(std::string(sized.status().message()));
      args.size = *sized;
    }
    if (!args.size) {
      return UsageError(absl::StrCat(args.pool,
                                     " does not exist: --size is required (or --max-wal-size, to size "
                                     "it for the cluster)"));
    }
    create = true;
  } else if (S_ISCHR(st.st_mode)) {
    if (args.size) return UsageError("--size cannot be used on a device: its whole size is used");
  } else if (S_ISREG(st.st_mode)) {
    if (!args.size && st.st_size == 0) {
      return UsageError(absl::StrCat(args.pool, " is empty: --size is required"));
    }
  } else {
    return Fail(absl::StrCat(args.pool, " is neither a regular file nor a character device"));
  }

  std::unique_ptr<core::PoolClaim> claim;
  if (!create) {
    absl::StatusOr<std::unique_ptr<core::PoolClaim>> claimed =
        core::PoolClaim::Acquire(args.pool, /*exclusive=*/true);
    if (!claimed.ok()) return Fail(std::string(claimed.status().message()));
    claim = *std::move(claimed);
    bool is_walfs = false;
    absl::StatusOr<bool> holds_data = HoldsData(args.pool, &is_walfs);
    if (!holds_data.ok()) return Fail(std::string(holds_data.status().message()));
    const bool non_empty = *holds_data || (S_ISREG(st.st_mode) && st.st_size > 0);
    if (non_empty && !args.force) {
      return Fail(absl::StrCat(args.pool,
                               is_walfs ? " already holds a walfs pool"
                                        : " is not empty",
                               "; use --force to overwrite it"));
    }
    if (access(args.pool.c_str(), W_OK) != 0) {
      return Fail(absl::StrCat(args.pool, " is not writable: ", strerror(errno)));
    }
  }

  // Reject impossible sizes before touching anything.
  if (args.size) {
    absl::StatusOr<f::Superblock> layout = core::ComputeLayout(*args.size, format_options);
    if (!layout.ok()) {
      return Fail(absl::StrCat("cannot lay out a pool of ", *args.size,
                               " bytes: ", layout.status().message()));
    }
    if (!CheckSize(args, *layout, format_options)) return kExitFailure;
    if (create || static_cast<uint64_t>(st.st_size) < *args.size) {
      const std::string dir = ParentDirectory(args.pool);
      struct statvfs vfs;
      if (statvfs(dir.c_str(), &vfs) != 0) {
        return Fail(absl::StrCat("cannot reach directory ", dir, ": ", strerror(errno)));
      }
      const uint64_t have = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
      const uint64_t need = *args.size - (create ? 0 : static_cast<uint64_t>(st.st_size));
      if (need > have) {
        return Fail(absl::StrCat("not enough space in ", dir, ": the pool needs ",
                                 HumanBytes(need), " more, ", HumanBytes(have), " are free"));
      }
    }
    if (!create && static_cast<uint64_t>(st.st_size) != *args.size) {
      if (absl::Status s = Resize(args.pool, *args.size); !s.ok()) return Fail(std::string(s.message()));
    }
  }

  core::PmemOpenOptions open_options;
  if (create) open_options.create_size = *args.size;
  absl::StatusOr<std::unique_ptr<core::PersistentRegion>> region =
      core::OpenPmemRegion(args.pool, open_options);
  if (!region.ok()) {
    if (create) unlink(args.pool.c_str());
    return Fail(std::string(region.status().message()));
  }
  if (claim == nullptr) {
    absl::StatusOr<std::unique_ptr<core::PoolClaim>> claimed =
        core::PoolClaim::Acquire(args.pool, /*exclusive=*/true);
    if (!claimed.ok()) return Fail(std::string(claimed.status().message()));
    claim = *std::move(claimed);
  }
  if (absl::StatusOr<f::Superblock> layout =
          core::ComputeLayout((*region)->size(), format_options);
      !layout.ok()) {
    region->reset();
    if (create) unlink(args.pool.c_str());
    return Fail(absl::StrCat("cannot lay out a pool in ", args.pool, ": ",
                             layout.status().message()));
  } else if (!args.size && !CheckSize(args, *layout, format_options)) {
    // A device or an existing file used at its size (a --size was checked above).
    return kExitFailure;
  }

  // A file this run created (or grew from empty) reads as zeros already: its data area
  // starts out initialised (verified when first used, never written here). Anything
  // else (--force over a pool, a device) is initialised lazily unless --zero asks for
  // every byte to be written now (format.h, PoolState).
  format_options.region_is_zero = create || (S_ISREG(st.st_mode) && st.st_size == 0);
  format_options.zero_data = args.zero;
  ProgressBar bar;
  if (isatty(STDERR_FILENO) && !args.quiet) {
    format_options.progress = [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); };
  }
  if (absl::Status s = core::FormatPool(**region, format_options); !s.ok()) {
    region->reset();
    if (create) unlink(args.pool.c_str());
    return Fail(absl::StrCat("cannot format ", args.pool, ": ", s.message()));
  }

  // The pool file follows the mount root's owner, so a daemon run as that user opens it.
  if (args.owner && !S_ISCHR(st.st_mode) &&
      chown(args.pool.c_str(), args.owner->first, args.owner->second) != 0) {
    return Fail(absl::StrCat("formatted ", args.pool, " but cannot chown it: ", strerror(errno)));
  }

  f::Superblock sb;
  std::memcpy(&sb, (*region)->data() + f::kSuperblockOffset[0], sizeof(sb));
  if (!args.quiet) {
    std::printf("walfs pool %s\n", args.pool.c_str());
    std::printf("  capacity      %s (%llu bytes)\n", HumanBytes(sb.capacity).c_str(),
                static_cast<unsigned long long>(sb.capacity));
    std::printf("  persistence   %s\n", std::string((*region)->kind()).c_str());
    std::printf("  segment size  %s\n", HumanBytes(sb.segment_size).c_str());
    std::printf("  inodes        %llu\n", static_cast<unsigned long long>(sb.inode_count - 1));
    std::printf("  dirents       %llu\n", static_cast<unsigned long long>(sb.dirent_count));
    std::printf("  data blocks   %llu x %llu bytes (%s)\n",
                static_cast<unsigned long long>(sb.data_blocks),
                static_cast<unsigned long long>(sb.block_size),
                HumanBytes(sb.data_blocks * sb.block_size).c_str());
    std::printf("  reserve       %s (only WAL segments may use it)\n",
                HumanBytes(core::ReservedBlocks(sb) * f::kBlockSize).c_str());
    // Machine-read by tools/quickstart.sh: keep "max_wal_size = <N>MB".
    std::printf("  fits          max_wal_size = %lluMB with wal_keep_size = %lluMB\n",
                static_cast<unsigned long long>(
                    core::MaxWalSizeFor(sb.data_blocks * f::kBlockSize, args.wal_keep_size,
                                        sb.segment_size) >>
                    20),
                static_cast<unsigned long long>(args.wal_keep_size >> 20));
    std::printf("  uuid          %s\n", core::FormatUuid(sb.uuid).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace walfs::tools

int main(int argc, char** argv) { return walfs::tools::Run(argc, argv); }
