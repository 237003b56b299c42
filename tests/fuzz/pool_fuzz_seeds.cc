// Writes the pool fuzzer's seed corpus: each base image unpatched, then crash states.
//
//   pool_fuzz_seeds DIR [MAX_CRASH_SEEDS]
//
// Crash states come from PostgreSQL-shaped operations run over the populated base on a
// RecordingRegion (both durability models): at every durability point a few of the
// images a power failure could leave are encoded as patches over the base
// (pool_fuzz_input.h), plain and sealed, so the fuzzer starts from journals with
// committed and torn transactions, orphans and half-written records.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/wal_directory.h"
#include "tests/fuzz/pool_fuzz_input.h"
#include "tests/support/recording_region.h"

namespace walfs::fuzz {
namespace {

using core::kRootInode;

class SeedWriter {
 public:
  SeedWriter(std::string dir, size_t max_crash) : dir_(std::move(dir)), max_crash_(max_crash) {}

  bool Write(const std::string& input) {
    if (!seen_.insert(input).second) return true;
    std::ofstream out(absl::StrCat(dir_, "/seed-", seen_.size()), std::ios::binary);
    out.write(input.data(), static_cast<std::streamsize>(input.size()));
    return static_cast<bool>(out);
  }

  // Runs `ops` on the populated base, saving crash states as seeds.
  void Crashes(bool pmem, const std::function<void(core::WalDirectory&)>& ops) {
    auto region = std::make_unique<core::RecordingRegion>(BaseImages()[1], pmem);
    core::RecordingRegion* rec = region.get();
    auto dir = Must(core::WalDirectory::Open(std::move(region)), "open recording");
    rec->SetDurabilityHook([&] {
      if (crash_seeds_ >= max_crash_) return;
      core::RecordingRegion::CrashEnumOptions opts;
      opts.max_subset = 1;
      opts.complements = false;
      opts.max_images = 3;
      rec->ForEachCrashImage(opts, [&](const std::string& image) {
        // Sealed, a torn record becomes one whose CRC holds over half-written fields.
        if (crash_seeds_ < max_crash_ && Write(EncodeInput(1, image)) &&
            Write(EncodeInput(1, image, /*seal=*/true))) {
          ++crash_seeds_;
        }
      });
    });
    ops(*dir);
    rec->SetDurabilityHook({});
  }

  size_t written() const { return seen_.size(); }

 private:
  std::string dir_;
  size_t max_crash_;
  size_t crash_seeds_ = 0;
  std::set<std::string> seen_;
};

// PostgreSQL's segment lifecycle and namespace operations over the populated tree.
void Operations(core::WalDirectory& dir) {
  const char kNext[] = "000000010000000000000002";
  std::string page(8192, 'w');
  auto seg = Must(dir.names().Create(kRootInode, "xlogtemp.42", 0600, kUser, true), "create temp");
  Must(dir.data().Write(seg.ino, 0, {page.data(), page.size()}, false), "write temp");
  Must(dir.data().Fsync(seg.ino, false), "fsync temp");
  Must(dir.names().Rename(kRootInode, "xlogtemp.42", kRootInode, kNext, core::kRenameNoReplace),
       "rename temp");
  auto status = Must(dir.names().Lookup(kRootInode, "archive_status"), "lookup archive_status");
  Must(dir.names().Rename(status.ino, "000000010000000000000001.ready", status.ino,
                          "000000010000000000000001.done", 0),
       "rename .ready");
  Must(dir.names().Unlink(kRootInode, "small.link"), "unlink link");
  core::SetattrRequest shrink;
  shrink.size = 100;
  auto small = Must(dir.names().Lookup(kRootInode, "small"), "lookup small");
  Must(dir.names().Setattr(small.ino, shrink), "truncate small");
  auto a = Must(dir.names().Lookup(kRootInode, "a"), "lookup a");
  Must(dir.names().Rmdir(a.ino, "b"), "rmdir b");
  Must(dir.names().Unlink(kRootInode, kSegmentName), "unlink old segment");
}

}  // namespace
}  // namespace walfs::fuzz

int main(int argc, char** argv) {
  using namespace walfs::fuzz;
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: pool_fuzz_seeds DIR [MAX_CRASH_SEEDS]\n");
    return 2;
  }
  SeedWriter writer(argv[1], argc == 3 ? std::strtoul(argv[2], nullptr, 10) : 200);
  for (int base = 0; base < kBaseCount; ++base) {
    if (!writer.Write(std::string{static_cast<char>(base), 0})) {
      std::fprintf(stderr, "pool_fuzz_seeds: cannot write to %s\n", argv[1]);
      return 1;
    }
  }
  writer.Crashes(/*pmem=*/true, Operations);
  writer.Crashes(/*pmem=*/false, Operations);
  std::printf("%zu seeds in %s\n", writer.written(), argv[1]);
  return 0;
}
