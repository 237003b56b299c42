// fsck.walfs: checks (and optionally repairs) an unmounted walfs pool.
//
// Exit status follows fsck(8), as a sum: 0 clean, 1 problems were repaired, 4 errors
// are left, 8 operational error (cannot open or map the pool), 16 usage error
// (tools/cli.h).
#include <fcntl.h>
#include <getopt.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/fsck.h"
#include "tools/cli.h"

namespace walfs::tools {
namespace {

constexpr char kProgram[] = "fsck.walfs";
constexpr int kExitRepaired = 1;
constexpr int kExitErrorsLeft = 4;
constexpr int kExitOperational = 8;
constexpr int kExitUsage = 16;

constexpr char kUsage[] =
    "Usage: fsck.walfs [OPTIONS] POOL\n"
    "Checks an unmounted walfs pool (a file or a device-DAX device).\n"
    "\n"
    "  -r, --repair     repair what can be repaired safely (also -y, -p, -a)\n"
    "  -n, --no-repair  only check; open the pool read-only (the default)\n"
    "      --json       print the report as one JSON object\n"
    "  -v, --verbose    also print information-only findings\n"
    "  -f, --force      accepted for fsck(8); every check is always full\n"
    "  -C [FD]          progress while free space is read: 0 (or no FD) draws a bar on\n"
    "                   the terminal; another FD gets \"1 DONE TOTAL POOL\" lines, as\n"
    "                   e2fsck writes for fsck(8)\n"
    "  -h, --help       show this help and exit\n"
    "  -V, --version    show the version and exit (as e2fsck -V)\n"
    "\n"
    "Exit status (a sum, as fsck(8)): 0 clean, 1 problems repaired, 4 errors left,\n"
    "8 operational error, 16 usage error.\n";

int UsageError(const std::string& message) {
  return tools::UsageError(kProgram, message, kExitUsage);
}

void PrintHuman(const std::string& pool, const core::FsckReport& report, bool verbose) {
  for (const core::FsckProblem& p : report.problems) {
    if (p.severity == core::FsckProblem::kInfo && !verbose) continue;
    std::printf("%s: %s: %s%s\n", std::string(core::SeverityName(p.severity)).c_str(),
                p.where.c_str(), p.what.c_str(),
                p.repaired ? " [repaired]"
                : p.repairable ? " [repairable]"
                               : "");
  }
  if (report.superblock_valid) {
    std::printf(
        "%s: %llu/%llu inodes (%llu files, %llu directories, %llu symlinks, %llu orphans), "
        "%llu/%llu blocks used\n",
        pool.c_str(), static_cast<unsigned long long>(report.inodes_live),
        static_cast<unsigned long long>(report.inodes_total),
        static_cast<unsigned long long>(report.files),
        static_cast<unsigned long long>(report.dirs),
        static_cast<unsigned long long>(report.symlinks),
        static_cast<unsigned long long>(report.inodes_orphan),
        static_cast<unsigned long long>(report.blocks_used),
        static_cast<unsigned long long>(report.blocks_total));
  }
  const size_t errors = report.Count(core::FsckProblem::kError, true);
  const size_t warnings = report.Count(core::FsckProblem::kWarning, true);
  const size_t repaired = report.repaired_count();
  std::string verdict;
  if (errors > 0) {
    verdict = absl::StrCat(errors, " error(s) left");
  } else {
    verdict = "clean";
  }
  if (repaired > 0) absl::StrAppend(&verdict, ", ", repaired, " problem(s) repaired");
  if (warnings > 0) {
    absl::StrAppend(&verdict, ", ", warnings,
                    " warning(s): recovered at the next read-write open or by --repair");
  }
  std::printf("%s: %s\n", pool.c_str(), verdict.c_str());
}

// e2fsck's -C: fd 0 draws a bar (on stderr under --json, to keep stdout one JSON
// object), any other fd gets "pass done total device" lines for fsck(8) to aggregate.
class Progress {
 public:
  Progress(int fd, std::string pool, bool json) : fd_(fd), pool_(std::move(pool)), json_(json) {}
  void Update(uint64_t done, uint64_t total) {
    if (fd_ != 0) {
      dprintf(fd_, "1 %llu %llu %s\n", static_cast<unsigned long long>(done),
              static_cast<unsigned long long>(total), pool_.c_str());
      return;
    }
    FILE* out = json_ ? stderr : stdout;
    const int permille = total == 0 ? 1000 : static_cast<int>(done * 1000 / total);
    if (permille == last_) return;
    last_ = permille;
    constexpr int kWidth = 40;
    const int filled = permille * kWidth / 1000;
    std::fprintf(out, "\r%s: |%s%s| %5.1f%%", pool_.c_str(), std::string(filled, '=').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), permille / 10.0);
    if (done >= total) std::fputc('\n', out);
    std::fflush(out);
  }

 private:
  int fd_;
  std::string pool_;
  bool json_;
  int last_ = -1;
};

int Run(int argc, char** argv) {
  static const option kOptions[] = {
      {"repair", no_argument, nullptr, 'r'},  {"no-repair", no_argument, nullptr, 'n'},
      {"json", no_argument, nullptr, 'J'},    {"verbose", no_argument, nullptr, 'v'},
      {"force", no_argument, nullptr, 'f'},   {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, 'V'}, {nullptr, 0, nullptr, 0},
  };
  bool repair = false, no_repair = false, json = false, verbose = false;
  int progress_fd = -1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":rnypafvVC:h", kOptions, nullptr)) != -1) {
    switch (c) {
      case 'r':
      case 'y':
      case 'p':
      case 'a': repair = true; break;
      case 'n': no_repair = true; break;
      case 'J': json = true; break;
      case 'v': verbose = true; break;
      case 'V': return PrintVersion(kProgram);
      case 'f': break;
      case 'C': {
        // The FD is optional: "-C POOL" and a final "-C" mean -C 0, as for e2fsck.
        int fd;
        if (absl::SimpleAtoi(optarg, &fd) && fd >= 0) {
          progress_fd = fd;
        } else if (optarg == argv[optind - 1]) {
          progress_fd = 0;
          --optind;
        } else {
          return UsageError(absl::StrCat("-C: bad file descriptor \"", optarg, "\""));
        }
        break;
      }
      case 'h': std::fputs(kUsage, stdout); return 0;
      case ':':
        if (optopt == 'C') {
          progress_fd = 0;
          break;
        }
        return UsageError(absl::StrCat("option ", argv[optind - 1], " needs a value"));
      default: return UsageError(absl::StrCat("unknown option ", argv[optind - 1]));
    }
  }
  if (repair && no_repair) return UsageError("-n cannot be combined with a repair option");
  if (optind + 1 != argc) {
    return UsageError(optind == argc ? "no POOL given" : "more than one POOL given");
  }
  const std::string pool = argv[optind];

  // A pool in use changes under the check: refuse rather than report phantom damage.
  absl::StatusOr<std::unique_ptr<core::PoolClaim>> claim =
      core::PoolClaim::Acquire(pool, /*exclusive=*/repair);
  core::FsckOptions fsck_options{.repair = repair};
  Progress progress(progress_fd, pool, json);
  if (progress_fd >= 0) {
    if (progress_fd > 0 && fcntl(progress_fd, F_GETFD) < 0) {
      return UsageError(absl::StrCat("-C: file descriptor ", progress_fd, " is not open"));
    }
    fsck_options.progress = [&progress](uint64_t done, uint64_t total) {
      progress.Update(done, total);
    };
  }
  absl::StatusOr<core::CheckedPool> checked =
      claim.ok() ? core::OpenAndCheckPool(pool, *std::move(claim), fsck_options)
                 : absl::StatusOr<core::CheckedPool>(claim.status());
  if (!checked.ok()) {
    const std::string message(checked.status().message());
    std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
    if (json) {
      std::printf("{\"pool\":%s,\"repair\":%s,\"exit_code\":%d,\"error\":%s}\n",
                  core::JsonQuote(pool).c_str(), repair ? "true" : "false", kExitOperational,
                  core::JsonQuote(message).c_str());
    }
    return kExitOperational;
  }
  const core::FsckReport& report = checked->report;
  int exit_code = 0;
  if (report.repaired_count() > 0) exit_code |= kExitRepaired;
  if (!report.clean()) exit_code |= kExitErrorsLeft;
  if (json) {
    std::printf("{\"pool\":%s,\"repair\":%s,\"exit_code\":%d,\"report\":%s}\n",
                core::JsonQuote(pool).c_str(), repair ? "true" : "false", exit_code,
                core::FsckReportJson(report).c_str());
  } else {
    PrintHuman(pool, report, verbose);
    if (!report.clean() && !repair) {
      bool repairable = false;
      for (const core::FsckProblem& p : report.problems) {
        repairable |= p.severity == core::FsckProblem::kError && p.repairable;
      }
      if (repairable) std::printf("%s: run fsck.walfs --repair to fix what can be fixed\n", pool.c_str());
    }
    if (!report.clean() && repair) {
      std::printf(
          "%s: not repaired: %zu error(s) have no safe automatic repair (fixing them would "
          "guess which data is right); copy the files out with walfsctl export --salvage\n",
          pool.c_str(), report.Count(core::FsckProblem::kError, true));
    }
  }
  return exit_code;
}

}  // namespace
}  // namespace walfs::tools

int main(int argc, char** argv) { return walfs::tools::Run(argc, argv); }
