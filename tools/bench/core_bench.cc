// walfs_core_bench: core's data path without FUSE, as Google Benchmark cases.
//
// Each case writes 8 KiB pages (XLOG_BLCKSZ) into one preallocated WAL segment of a
// freshly formatted pool, cycling through the segment like XLogWrite does, on:
//   memory  MemoryRegion (pmem semantics, Flush/Drain free): the cost of core itself;
//   file    OpenPmemRegion over a file in --pool_dir (default /dev/shm). libpmem
//           decides at load time: with PMEM_IS_PMEM_FORCE=1 it is the true-PMEM path
//           (non-temporal stores + drain), without it the msync path. The case name
//           carries the region's kind, so run the binary once per environment.
// Cases: Write (no sync), WriteFsync (Write + Fsync(datasync): a commit on an fdatasync
// server), WriteSync (Write with sync set: an O_DSYNC handle), Rewrite (the same page
// again, as PostgreSQL rewrites its current partial page).
//
// Usage: walfs_core_bench [--pool_dir DIR] [--pool_size BYTES] [benchmark flags]
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "core/persistent_region.h"
#include "core/wal_directory.h"
#include "tests/support/memory_region.h"

namespace walfs::bench {
namespace {

using core::WalDirectory;

constexpr size_t kPageSize = 8192;
constexpr char kSegmentName[] = "000000010000000000000001";

struct Options {
  std::string pool_dir = "/dev/shm";
  uint64_t pool_size = 64ull << 20;
};

// A formatted pool with one open, preallocated segment. Removes its pool file.
class Fixture {
 public:
  static absl::StatusOr<std::unique_ptr<Fixture>> Make(bool on_file,
                                                       const Options& options) {
    auto fixture = std::unique_ptr<Fixture>(new Fixture);
    std::unique_ptr<core::PersistentRegion> region;
    if (on_file) {
      fixture->path_ = absl::StrCat(options.pool_dir, "/walfs-core-bench.", getpid());
      unlink(fixture->path_.c_str());
      core::PmemOpenOptions open_options;
      open_options.create_size = options.pool_size;
      absl::StatusOr<std::unique_ptr<core::PersistentRegion>> r =
          core::OpenPmemRegion(fixture->path_, open_options);
      if (!r.ok()) return r.status();
      region = std::move(*r);
    } else {
      region = std::make_unique<core::MemoryRegion>(options.pool_size);
    }
    core::FormatOptions format;
    format.region_is_zero = true;  // both are new, zero-filled
    if (absl::Status s = core::FormatPool(*region, format); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<WalDirectory>> dir = WalDirectory::Open(std::move(region));
    if (!dir.ok()) return dir.status();
    fixture->dir_ = std::move(*dir);
    absl::StatusOr<core::Attr> attr = fixture->dir_->names().Create(
        core::kRootInode, kSegmentName, 0600, core::Caller{}, /*exclusive=*/true);
    if (!attr.ok()) return attr.status();
    fixture->ino_ = attr->ino;
    fixture->segment_size_ = fixture->dir_->superblock().segment_size;
    // One zero-filling pass first, as PostgreSQL does to a new segment, so the cases
    // measure steady state rather than the first touch of each page of the mapping.
    const std::vector<char> zeros(1 << 20, 0);
    for (uint64_t off = 0; off < fixture->segment_size_; off += zeros.size()) {
      absl::StatusOr<size_t> n =
          fixture->dir_->data().Write(fixture->ino_, off, absl::MakeConstSpan(zeros), false);
      if (!n.ok()) return n.status();
    }
    if (absl::Status s = fixture->dir_->data().Fsync(fixture->ino_, true); !s.ok()) return s;
    return fixture;
  }

  ~Fixture() {
    if (dir_ != nullptr) (void)dir_->Close();
    dir_.reset();
    if (!path_.empty()) unlink(path_.c_str());
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  WalDirectory& dir() { return *dir_; }
  core::InodeId ino() const { return ino_; }
  uint64_t segment_size() const { return segment_size_; }
  std::string Label() const {
    // (Debian's Abseil has its own string_view: StrCat takes std::string.)
    return absl::StrCat(std::string(dir_->region().kind()),
                        " mode=", std::string(DurabilityModeName(dir_->mode())));
  }

 private:
  Fixture() = default;
  std::string path_;
  std::unique_ptr<WalDirectory> dir_;
  core::InodeId ino_ = 0;
  uint64_t segment_size_ = 0;
};

enum class Case { kWrite, kWriteFsync, kWriteSync, kRewrite };

void RunCase(benchmark::State& state, bool on_file, Case c, const Options& options) {
  absl::StatusOr<std::unique_ptr<Fixture>> fixture = Fixture::Make(on_file, options);
  if (!fixture.ok()) {
    state.SkipWithError(fixture.status().ToString().c_str());
    return;
  }
  Fixture& f = **fixture;
  std::vector<char> page(kPageSize, 'w');
  uint64_t offset = 0;
  for (auto _ : state) {
    page[offset / kPageSize % kPageSize] ^= 1;  // different bytes each time
    absl::StatusOr<size_t> n =
        f.dir().data().Write(f.ino(), offset, absl::MakeConstSpan(page), c == Case::kWriteSync);
    if (!n.ok()) {
      state.SkipWithError(n.status().ToString().c_str());
      return;
    }
    if (c == Case::kWriteFsync) {
      if (absl::Status s = f.dir().data().Fsync(f.ino(), /*datasync=*/true); !s.ok()) {
        state.SkipWithError(s.ToString().c_str());
        return;
      }
    }
    if (c != Case::kRewrite) offset = (offset + kPageSize) % f.segment_size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kPageSize));
  state.SetLabel(f.Label());
}

// The region kind of the file-backed case as libpmem sees this process, for its name.
std::string FileKind(const Options& options) {
  const std::string probe = absl::StrCat(options.pool_dir, "/walfs-core-bench-probe.", getpid());
  core::PmemOpenOptions open_options;
  open_options.create_size = 4 << 20;
  absl::StatusOr<std::unique_ptr<core::PersistentRegion>> r =
      core::OpenPmemRegion(probe, open_options);
  std::string kind = r.ok() ? std::string((*r)->kind()) : "unavailable";
  r = absl::StatusOr<std::unique_ptr<core::PersistentRegion>>();  // unmap first
  unlink(probe.c_str());
  return kind;
}

int Main(int argc, char** argv) {
  static Options options;  // outlives the registered cases
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--pool_dir" && i + 1 < argc) {
      options.pool_dir = argv[++i];
    } else if (arg == "--pool_size" && i + 1 < argc) {
      if (!absl::SimpleAtoi(argv[++i], &options.pool_size)) {
        std::fprintf(stderr, "walfs_core_bench: bad --pool_size\n");
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;

  const std::string file_kind = FileKind(options);
  const struct {
    const char* name;
    Case c;
  } cases[] = {{"Write8K", Case::kWrite},
               {"Write8KFsync", Case::kWriteFsync},
               {"Write8KSync", Case::kWriteSync},
               {"Rewrite8K", Case::kRewrite}};
  for (const auto& k : cases) {
    const Case c = k.c;
    benchmark::RegisterBenchmark(absl::StrCat(k.name, "/memory").c_str(),
                                 [c](benchmark::State& s) { RunCase(s, false, c, options); });
    benchmark::RegisterBenchmark(absl::StrCat(k.name, "/file-", file_kind).c_str(),
                                 [c](benchmark::State& s) { RunCase(s, true, c, options); });
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace walfs::bench

int main(int argc, char** argv) { return walfs::bench::Main(argc, argv); }
