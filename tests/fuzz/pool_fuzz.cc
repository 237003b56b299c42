// libFuzzer target: a damaged pool through everything that reads one.
//
// For each input (a patch over a small base pool, pool_fuzz_input.h):
//   1. fsck without repair: must not write to the pool (it runs on a view that aborts on
//      any store);
//   2. WalDirectory::Open (read-write: journal replay, recovery, orphan reclaim); when it
//      accepts the pool, the whole tree is walked and every file read, the pool is
//      closed, and fsck must then find no error (but non-zero free blocks the damaged
//      pool already had, which Open no longer reads): a pool the file system accepts
//      and recovers is a consistent pool;
//   3. fsck --repair on the damaged image, then a plain fsck: when the repair reports
//      every error fixed, the second check must find none and Open must accept the
//      pool; otherwise the repair has refused, which is allowed.
// A violated expectation aborts with the reports; crashes, hangs and sanitizer reports
// are found by libFuzzer itself.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/fsck.h"
#include "core/persistent_region.h"
#include "core/wal_directory.h"
#include "tests/fuzz/pool_fuzz_input.h"

namespace walfs::fuzz {
namespace {

void PrintReport(const char* title, const core::FsckReport& report) {
  std::fprintf(stderr, "%s:\n", title);
  for (const auto& p : report.problems) {
    std::fprintf(stderr, "  %s %s: %s%s\n", std::string(core::SeverityName(p.severity)).c_str(),
                 p.where.c_str(), p.what.c_str(), p.repaired ? " [repaired]" : "");
  }
}

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "pool_fuzz: %s\n", what);
  std::abort();
}

// Regions over bytes owned by the caller, so the three images of an execution live in
// buffers reused across executions: a fresh 2.25 MiB allocation per image cost more in
// page faults than the checks themselves. The read-only one is what a check without
// repair runs on: any store it attempts is a finding.
class View final : public core::PersistentRegion {
 public:
  View(std::string& bytes, bool writable)
      : PersistentRegion(bytes.data(), bytes.size()), bytes_(bytes), writable_(writable) {}
  bool is_pmem() const override { return true; }
  std::string_view kind() const override { return "view"; }
  void Store(uint64_t off, const void* src, size_t len) override {
    if (!writable_) Violation("a check without repair wrote to the pool");
    std::memcpy(bytes_.data() + off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    if (!writable_) Violation("a check without repair wrote to the pool");
    std::memset(bytes_.data() + off, byte, len);
  }
  void Flush(uint64_t, size_t) override {}
  void Drain() override {}

 private:
  std::string& bytes_;
  const bool writable_;
};

core::FsckReport Report(absl::StatusOr<core::FsckReport> report) {
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().ToString().c_str());
    Violation("CheckPool failed to run");
  }
  return *std::move(report);
}

core::FsckReport Check(std::string& image) {
  View view(image, /*writable=*/false);
  return Report(core::CheckPool(view, core::FsckOptions{}));
}

core::FsckReport Repair(std::string& image) {
  View view(image, /*writable=*/true);
  return Report(core::CheckPool(view, core::FsckOptions{.repair = true}));
}

// Open does not read free space (format v2, core/pool_state.h): a non-zero free block it
// accepts is refused when first allocated instead. So after Open, fsck may still find
// non-zero free blocks, as long as the damaged pool already had them.
bool IsFreeSpaceProblem(const core::FsckProblem& p) {
  return p.what.find("owned by no inode are not zero") != std::string::npos;
}
bool HasErrorsOpenLeaves(const core::FsckReport& report, const core::FsckReport& before) {
  const bool had_free_space_damage =
      std::any_of(before.problems.begin(), before.problems.end(), IsFreeSpaceProblem);
  return std::any_of(report.problems.begin(), report.problems.end(), [&](const auto& p) {
    if (p.severity != core::FsckProblem::kError || p.repaired) return false;
    return !(had_free_space_damage && IsFreeSpaceProblem(p));
  });
}

// Lists every directory and reads every file and symlink reachable from the root.
void Walk(core::WalDirectory& dir) {
  std::vector<core::InodeId> stack{core::kRootInode};
  std::vector<char> buf(64 * 1024);
  size_t visited = 0;
  while (!stack.empty() && ++visited < 4 * kInodes) {
    const core::InodeId ino = stack.back();
    stack.pop_back();
    std::vector<std::string> names;
    (void)dir.names().Readdir(ino, 0, [&](const core::DirEntry& e) {
      if (e.name != "." && e.name != "..") names.emplace_back(e.name);
      return true;
    });
    for (const std::string& name : names) {
      auto attr = dir.names().Lookup(ino, name);
      if (!attr.ok()) continue;
      if (S_ISDIR(attr->mode)) {
        stack.push_back(attr->ino);
      } else if (S_ISLNK(attr->mode)) {
        (void)dir.names().Readlink(attr->ino);
      } else {
        for (uint64_t off = 0; off < attr->size; off += buf.size()) {
          auto n = dir.data().Read(attr->ino, off, {buf.data(), buf.size()});
          if (!n.ok() || *n == 0) break;
        }
      }
      dir.names().Forget(attr->ino, 1);
    }
  }
}

// Opens `image` read-write (recovery runs on it in place); when the pool is accepted,
// walks it and closes it, and `image` holds what the file system left.
absl::Status OpenAndWalk(std::string& image) {
  auto dir = core::WalDirectory::Open(std::make_unique<View>(image, /*writable=*/true));
  if (!dir.ok()) return dir.status();
  Walk(**dir);
  if (!(*dir)->Close().ok()) Violation("Close failed on an opened pool");
  return absl::OkStatus();
}

}  // namespace
}  // namespace walfs::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  walfs::fuzz::BaseImages();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace walfs::fuzz;
  static std::string& image = *new std::string;
  static std::string& recovered = *new std::string;
  static std::string& repaired = *new std::string;
  if (!DecodeInput(data, size, image)) return -1;

  const auto first = Check(image);

  recovered.assign(image);
  if (OpenAndWalk(recovered).ok()) {
    const auto after_open = Check(recovered);
    if (HasErrorsOpenLeaves(after_open, first)) {
      PrintReport("fsck of the damaged pool", first);
      PrintReport("fsck after Open + recovery + Close", after_open);
      Violation("Open accepted a pool and left errors fsck finds");
    }
  }

  repaired.assign(image);
  const auto repair = Repair(repaired);
  if (repair.clean()) {
    const auto second = Check(repaired);
    if (!second.clean()) {
      PrintReport("fsck --repair", repair);
      PrintReport("fsck after the repair", second);
      Violation("fsck --repair reported the pool clean but a second check finds errors");
    }
    if (absl::Status s = OpenAndWalk(repaired); repair.superblock_valid && !s.ok()) {
      PrintReport("fsck --repair", repair);
      std::fprintf(stderr, "Open: %s\n", s.ToString().c_str());
      Violation("fsck --repair left a pool it calls clean that Open refuses");
    }
  }
  return 0;
}
