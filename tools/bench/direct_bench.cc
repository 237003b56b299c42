// walfs_direct_bench: where the time of one durable 8 KiB WAL write goes on the direct
// path, next to what the same write costs on tmpfs, in one process and one run.
//
// pg_test_fsync's "write + fdatasync" loop rewrites one 8 KiB page at offset 0. On tmpfs
// that is a cached copy into the page cache plus two system calls; with the direct-access
// library it is the client's hot path: the fd table lookup, one load of the lease's
// revocation stamp, a non-temporal copy and a drain, and an fdatasync that is a lookup
// and the same load. The
// cases take those apart so the floor of the direct path on this machine is measured,
// not assumed:
//   TmpfsWriteFdatasync  pwrite(8 KiB, offset 0) + fdatasync on a file in --dir
//   TmpfsWrite           the pwrite alone
//   CachedCopy           memcpy of 8 KiB into a shared mapping (the kernel's part of a
//                        tmpfs write, without the system call)
//   DurableCopy          pmem_memcpy_nodrain + pmem_drain of 8 KiB: the least a durable
//                        store can cost (needs pmem_is_pmem, i.e. PMEM_IS_PMEM_FORCE=1
//                        on tmpfs or real PMEM; the case reports an error otherwise)
//   Fstat                one fstat(2): what the client's identity check cost before the
//                        daemon's revocation stamps replaced it
//   DirectWriteFdatasync the client's TryDirectWritePmem through a real FdTable entry
//                        over the DurableCopy mapping, then its fdatasync (a lookup)
//   DirectWrite          the TryDirectWritePmem alone (stamp check, non-temporal copy,
//                        drain): the direct path's write next to TmpfsWrite
//   PageFill/durable     the durable copy of XLogWrite's partial-page commits: every
//                        write is the whole 8 KiB page, whose first k KiB hold the
//                        records of this and the earlier commits and whose tail is
//                        zeros; k = 1..8, then the next page of the segment
//   PageFill/compare     a lever measured and not taken: compare the page with what the
//                        pool holds and store (durably) only the lines from the first
//                        to the last that differ; RewriteCompare is the same on
//                        pg_test_fsync's pattern (the same bytes rewritten at offset 0)
// Each case also runs with /seq: offsets advance through a 16 MiB segment as XLogWrite's
// do under a bulk load.
//
// Usage: PMEM_IS_PMEM_FORCE=1 walfs_direct_bench [--dir DIR] [benchmark flags]
#include <fcntl.h>
#include <libpmem.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "fs/direct/direct_write.h"
#include "fs/direct/fd_table.h"
#include "fs/direct/pmem_calls.h"

namespace walfs::bench {
namespace {

constexpr size_t kPage = 8192;
constexpr size_t kSegment = 16u << 20;

std::string g_dir = "/dev/shm";

// A 16 MiB file in g_dir, open read-write, mapped shared through libpmem (so the
// mapping is "pmem" exactly when libpmem says so for a pool at the same place).
class Segment {
 public:
  Segment() {
    path_ = g_dir + "/walfs-direct-bench." + std::to_string(getpid());
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd_ < 0 || ftruncate(fd_, kSegment) != 0) {
      error_ = "cannot create " + path_ + ": " + strerror(errno);
      return;
    }
    // Touch every page once, as PostgreSQL's zero-fill of a new segment does.
    std::vector<char> zero(kPage, 0);
    for (size_t off = 0; off < kSegment; off += kPage) {
      if (pwrite(fd_, zero.data(), kPage, static_cast<off_t>(off)) != kPage) {
        error_ = "cannot fill " + path_;
        return;
      }
    }
    size_t mapped = 0;
    int is_pmem = 0;
    map_ = static_cast<char*>(pmem_map_file(path_.c_str(), 0, 0, 0, &mapped, &is_pmem));
    if (map_ == nullptr) {
      error_ = std::string("pmem_map_file: ") + pmem_errormsg();
      return;
    }
    is_pmem_ = is_pmem != 0;
  }
  ~Segment() {
    if (map_ != nullptr) pmem_unmap(map_, kSegment);
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  const std::string& error() const { return error_; }
  int fd() const { return fd_; }
  char* map() const { return map_; }
  bool is_pmem() const { return is_pmem_; }

 private:
  std::string path_;
  std::string error_;
  int fd_ = -1;
  char* map_ = nullptr;
  bool is_pmem_ = false;
};

// Offset of iteration i: 0 for the pg_test_fsync pattern, else through the segment.
size_t OffsetOf(const benchmark::State& state, size_t i) {
  return state.range(0) == 0 ? 0 : (i * kPage) % kSegment;
}

#define WALFS_SEGMENT_OR_SKIP(seg)                  \
  Segment seg;                                      \
  if (!seg.error().empty()) {                       \
    state.SkipWithError(seg.error().c_str());       \
    return;                                         \
  }

// The same, for cases that need the mapping to be pmem (durable with a fence).
#define WALFS_PMEM_SEGMENT_OR_SKIP(seg)                                                  \
  WALFS_SEGMENT_OR_SKIP(seg);                                                            \
  if (!seg.is_pmem()) {                                                                  \
    state.SkipWithError("not pmem: run with PMEM_IS_PMEM_FORCE=1 (or on real PMEM)");   \
    return;                                                                              \
  }

// pwrite of one page per iteration, followed by fdatasync when `sync`.
void TmpfsWriteLoop(benchmark::State& state, bool sync) {
  WALFS_SEGMENT_OR_SKIP(seg);
  std::vector<char> buf(kPage, 'w');
  size_t i = 0;
  for (auto _ : state) {
    if (pwrite(seg.fd(), buf.data(), kPage, static_cast<off_t>(OffsetOf(state, i++))) !=
            kPage ||
        (sync && fdatasync(seg.fd()) != 0)) {
      state.SkipWithError(sync ? "pwrite/fdatasync failed" : "pwrite failed");
      return;
    }
  }
}

void TmpfsWriteFdatasync(benchmark::State& state) { TmpfsWriteLoop(state, true); }
void TmpfsWrite(benchmark::State& state) { TmpfsWriteLoop(state, false); }

void CachedCopy(benchmark::State& state) {
  WALFS_SEGMENT_OR_SKIP(seg);
  std::vector<char> buf(kPage, 'w');
  size_t i = 0;
  for (auto _ : state) {
    char* dst = seg.map() + OffsetOf(state, i++);
    memcpy(dst, buf.data(), kPage);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
}

void DurableCopy(benchmark::State& state) {
  WALFS_PMEM_SEGMENT_OR_SKIP(seg);
  std::vector<char> buf(kPage, 'w');
  size_t i = 0;
  for (auto _ : state) {
    pmem_memcpy_nodrain(seg.map() + OffsetOf(state, i++), buf.data(), kPage);
    pmem_drain();
  }
}

void Fstat(benchmark::State& state) {
  WALFS_SEGMENT_OR_SKIP(seg);
  struct stat st;
  for (auto _ : state) {
    if (fstat(seg.fd(), &st) != 0) {
      state.SkipWithError("fstat failed");
      return;
    }
    benchmark::DoNotOptimize(st.st_ino);
  }
}

// TryDirectWritePmem of one page per iteration, followed by the library's fdatasync when
// `sync`.
void DirectWriteLoop(benchmark::State& state, bool sync) {
  WALFS_PMEM_SEGMENT_OR_SKIP(seg);
  // One lease over the whole segment, on a mapping of its own: the table's entry owns it
  // and UnmapLease unmaps it when the entry goes (no pool reference: pools is null).
  void* map = mmap(nullptr, kSegment, PROT_READ | PROT_WRITE, MAP_SHARED, seg.fd(), 0);
  if (map == MAP_FAILED) {
    state.SkipWithError("mmap failed");
    return;
  }
  auto table = std::make_unique<direct::FdTable>();
  direct::LeaseMapping m;
  static std::atomic<uint64_t> stamp{7};  // the daemon's word, never revoked here
  m.stamp = &stamp;
  m.stamp_value = 7;
  m.leased_size = kSegment;
  m.run_count = 1;
  m.runs[0] = {.file_offset = 0, .length = kSegment, .pool_offset = 0,
               .pool_addr = static_cast<char*>(map), .image_addr = nullptr};
  if (!table->Track(seg.fd(), m)) {
    munmap(map, kSegment);
    state.SkipWithError("FdTable::Track failed");
    return;
  }
  std::vector<char> buf(kPage, 'w');
  struct iovec iov = {buf.data(), kPage};
  size_t i = 0;
  for (auto _ : state) {
    size_t written = 0;
    if (direct::TryDirectWritePmem(*table, seg.fd(), &iov, 1,
                                   static_cast<off_t>(OffsetOf(state, i++)), 0,
                                   &written) != direct::DirectResult::kStored ||
        (sync && !direct::SyncIsDone(*table, seg.fd()))) {  // the library's fdatasync
      state.SkipWithError("the direct path refused the write");
      break;
    }
  }
  table->Untrack(seg.fd());
}

void DirectWriteFdatasync(benchmark::State& state) { DirectWriteLoop(state, true); }
void DirectWrite(benchmark::State& state) { DirectWriteLoop(state, false); }

// Stores the 64-byte lines of [dst, dst + n) from the first to the last that differ
// from src (n a multiple of 64, dst 64-byte aligned), then drains.
void CompareThenStore(char* dst, const char* src, size_t n) {
  auto differs = [&](size_t at) { return memcmp(dst + at, src + at, 64) != 0; };
  size_t first = 0;
  while (first < n && !differs(first)) first += 64;
  if (first < n) {
    size_t last = n;
    while (last > first + 64 && !differs(last - 64)) last -= 64;
    pmem_memcpy_nodrain(dst + first, src + first, last - first);
  }
  pmem_drain();
}

// The page-fill pattern (PageFill): `compare` picks CompareThenStore over the copy.
void PageFill(benchmark::State& state) {
  WALFS_PMEM_SEGMENT_OR_SKIP(seg);
  const bool compare = state.range(0) == 1;
  std::vector<char> page(kPage, 0);
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i % 8;
    const size_t off = (i / 8 * kPage) % kSegment;
    if (k == 0) memset(page.data(), 0, kPage);
    memset(page.data() + k * 1024, static_cast<int>(i % 251) + 1, 1024);
    ++i;
    if (compare) {
      CompareThenStore(seg.map() + off, page.data(), kPage);
    } else {
      pmem_memcpy_nodrain(seg.map() + off, page.data(), kPage);
      pmem_drain();
    }
  }
}

void RewriteCompare(benchmark::State& state) {
  WALFS_PMEM_SEGMENT_OR_SKIP(seg);
  std::vector<char> buf(kPage, 'w');
  for (auto _ : state) CompareThenStore(seg.map(), buf.data(), kPage);
}

BENCHMARK(TmpfsWriteFdatasync)->ArgName("seq")->Arg(0)->Arg(1);
BENCHMARK(TmpfsWrite)->ArgName("seq")->Arg(0)->Arg(1);
BENCHMARK(CachedCopy)->ArgName("seq")->Arg(0)->Arg(1);
BENCHMARK(DurableCopy)->ArgName("seq")->Arg(0)->Arg(1);
BENCHMARK(Fstat)->ArgName("seq")->Arg(0);
BENCHMARK(DirectWriteFdatasync)->ArgName("seq")->Arg(0)->Arg(1);
BENCHMARK(DirectWrite)->ArgName("seq")->Arg(0)->Arg(1);
BENCHMARK(PageFill)->ArgName("compare")->Arg(0)->Arg(1);
BENCHMARK(RewriteCompare);

}  // namespace
}  // namespace walfs::bench

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: PMEM_IS_PMEM_FORCE=1 walfs_direct_bench [--dir DIR] [benchmark flags]\n"
          "Times one 8 KiB write + fdatasync on tmpfs and its parts on the direct-access\n"
          "path (copy, drain, identity check, the write with and without fdatasync).\n"
          "DIR (default /dev/shm) holds a 16 MiB scratch file, removed at exit.\n");
      return 0;
    }
    if (arg == "--dir" && i + 1 < argc) {
      walfs::bench::g_dir = argv[++i];
      continue;
    }
    if (arg.rfind("--dir=", 0) == 0) {
      walfs::bench::g_dir = arg.substr(6);
      continue;
    }
    rest.push_back(argv[i]);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  // The library's write path calls libpmem through what a first write lease loads; this
  // program makes its entries itself, so it loads it here.
  const char* why = "";
  if (walfs::direct::LoadPmem(&why) == nullptr) {
    std::fprintf(stderr, "walfs_direct_bench: %s\n", why);
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
