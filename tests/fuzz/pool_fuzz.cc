// libFuzzer target: a damaged pool through everything that reads one.
//
// For each input (a patch over a small base pool, pool_fuzz_input.h):
//   1. fsck without repair: must not write to the pool;
//   2. WalDirectory::Open (read-write: journal replay, recovery, orphan reclaim); when it
//      accepts the pool, the whole tree is walked and every file read, the pool is
//      closed, and fsck must then find no error: a pool the file system accepts and
//      recovers is a consistent pool;
//   3. fsck --repair on the damaged image, then a plain fsck: when the repair reports
//      every error fixed, the second check must find none and Open must accept the
//      pool; otherwise the repair has refused, which is allowed.
// A violated expectation aborts with the reports; crashes, hangs and sanitizer reports
// are found by libFuzzer itself.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/fsck.h"
#include "core/memory_region.h"
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

core::FsckReport Check(std::string image, bool repair, std::string* after = nullptr) {
  core::MemoryRegion region(std::move(image));
  auto report = core::CheckPool(region, core::FsckOptions{.repair = repair});
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().ToString().c_str());
    Violation("CheckPool failed to run");
  }
  if (after != nullptr) *after = std::move(region.bytes());
  return *std::move(report);
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
    (void)dir.Readdir(ino, 0, [&](const core::DirEntry& e) {
      if (e.name != "." && e.name != "..") names.emplace_back(e.name);
      return true;
    });
    for (const std::string& name : names) {
      auto attr = dir.Lookup(ino, name);
      if (!attr.ok()) continue;
      if (S_ISDIR(attr->mode)) {
        stack.push_back(attr->ino);
      } else if (S_ISLNK(attr->mode)) {
        (void)dir.Readlink(attr->ino);
      } else {
        for (uint64_t off = 0; off < attr->size; off += buf.size()) {
          auto n = dir.Read(attr->ino, off, {buf.data(), buf.size()});
          if (!n.ok() || *n == 0) break;
        }
      }
      dir.Forget(attr->ino, 1);
    }
  }
}

bool OpenAndWalk(std::string image, std::string* after) {
  auto region = std::make_unique<core::MemoryRegion>(std::move(image));
  core::MemoryRegion* raw = region.get();
  auto dir = core::WalDirectory::Open(std::move(region));
  if (!dir.ok()) return false;
  Walk(**dir);
  if (!(*dir)->Close().ok()) Violation("Close failed on an opened pool");
  *after = raw->bytes();
  return true;
}

}  // namespace
}  // namespace walfs::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  walfs::fuzz::BaseImages();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace walfs::fuzz;
  const std::string image = DecodeInput(data, size);
  if (image.empty()) return -1;

  std::string untouched;
  const auto first = Check(image, /*repair=*/false, &untouched);
  if (untouched != image) Violation("fsck without --repair wrote to the pool");

  std::string recovered;
  if (OpenAndWalk(image, &recovered)) {
    const auto after_open = Check(recovered, /*repair=*/false);
    if (!after_open.clean()) {
      PrintReport("fsck of the damaged pool", first);
      PrintReport("fsck after Open + recovery + Close", after_open);
      Violation("Open accepted a pool and left errors fsck finds");
    }
  }

  std::string repaired;
  const auto repair = Check(image, /*repair=*/true, &repaired);
  if (repair.clean()) {
    const auto second = Check(repaired, /*repair=*/false);
    if (!second.clean()) {
      PrintReport("fsck --repair", repair);
      PrintReport("fsck after the repair", second);
      Violation("fsck --repair reported the pool clean but a second check finds errors");
    }
    std::string reopened;
    if (repair.superblock_valid && !OpenAndWalk(repaired, &reopened)) {
      auto region = std::make_unique<walfs::core::MemoryRegion>(repaired);
      auto dir = walfs::core::WalDirectory::Open(std::move(region));
      PrintReport("fsck --repair", repair);
      std::fprintf(stderr, "Open: %s\n", dir.status().ToString().c_str());
      Violation("fsck --repair left a pool it calls clean that Open refuses");
    }
  }
  return 0;
}
