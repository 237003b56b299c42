// walfs_latbench: latency of WAL writes under metadata load, and of durable metadata
// operations, on any directory (walfs, ext4, tmpfs).
//
//   walfs_latbench interference DIR [--seconds N]
//     One thread writes 8 KiB pages with O_DSYNC into a 16 MiB file (WAL flushes into a
//     preallocated segment: overwrites that need no metadata commit) for N seconds
//     alone, then N seconds more while a second thread creates, fsyncs, renames and
//     unlinks other files in the same directory (PostgreSQL's segment and status-file
//     traffic). Prints the write latency's median, p99 and maximum in each phase.
//   walfs_latbench meta DIR [--ops N]
//     Durable metadata operations as PostgreSQL makes them, N times each:
//       create = open(O_CREAT|O_EXCL) + fsync(file) + close + fsync(DIR)
//       rename = rename + fsync(DIR)
//       unlink = unlink + fsync(DIR)
//     Prints the median and p99 of each.
//   walfs_latbench free DIR [--mib N]
//     Writes an N MiB file (default 512), fsyncs and closes it, unlinks it, and reports
//     how long after unlink(2) returned statvfs(DIR) showed the space free again.
//   walfs_latbench unmap DIR [--ops N] [--mib N]
//     What dropping a file mapping costs the rest of a process, as the direct-access
//     library drops a segment's lease mapping at its close: maps N MiB of shared memory
//     (default 128, PostgreSQL's shared_buffers) and times one store per 4 KiB page of it,
//     --ops times (default 43, a bulk load's segments) after each of: nothing; mapping,
//     touching and munmap of 16 MiB of DIR/latbench.map; the same with
//     madvise(MADV_DONTNEED) in place of munmap; and the mapping kept. Prints the median
//     pass of each. Where an unmap costs only a ranged TLB flush the four should be
//     alike; a guest whose hypervisor shadows page tables may rebuild them all after it.
//
// Output: "key value" lines, latencies in microseconds. Every file it makes is removed
// before it exits, also when a step fails (exit status 1, with a message).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kPage = 8192;
constexpr size_t kFileBytes = 16 << 20;
constexpr char kWalName[] = "000000010000000000000001";

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "walfs_latbench: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// The q-quantile (0..1) of `v` (sorted in place), by nearest rank.
double Quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size()));
  return v[std::min(i, v.size() - 1)];
}

void Print(const std::string& key, double value) { std::printf("%s %.1f\n", key.c_str(), value); }

void FsyncDir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) Die("open " + dir);
  if (fsync(fd) != 0) Die("fsync " + dir);
  close(fd);
}

// Names this run made, removed at exit whatever happened (two threads add to it).
std::mutex g_cleanup_mu;
std::vector<std::string> g_cleanup;
void Remember(const std::string& path) {
  std::lock_guard<std::mutex> l(g_cleanup_mu);
  g_cleanup.push_back(path);
}
void Cleanup() {
  std::lock_guard<std::mutex> l(g_cleanup_mu);
  for (const auto& p : g_cleanup) unlink(p.c_str());
}

int Interference(const std::string& dir, int seconds) {
  const std::string wal = dir + "/" + kWalName;
  Remember(wal);
  {
    int fd = open(wal.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) Die("create " + wal);
    std::vector<char> fill(1 << 20, 'w');
    for (size_t off = 0; off < kFileBytes; off += fill.size()) {
      if (pwrite(fd, fill.data(), fill.size(), static_cast<off_t>(off)) !=
          static_cast<ssize_t>(fill.size())) {
        Die("fill " + wal);
      }
    }
    if (fsync(fd) != 0) Die("fsync " + wal);
    close(fd);
    FsyncDir(dir);
  }
  int wfd = open(wal.c_str(), O_WRONLY | O_DSYNC);
  if (wfd < 0) Die("open " + wal);
  std::vector<char> page(kPage, 'x');

  auto write_for = [&](Clock::duration span, std::vector<double>& lat) {
    const auto end = Clock::now() + span;
    uint64_t i = 0;
    while (Clock::now() < end) {
      const off_t off = static_cast<off_t>((i++ * kPage) % kFileBytes);
      page[0] = static_cast<char>(i);
      const auto t0 = Clock::now();
      if (pwrite(wfd, page.data(), kPage, off) != static_cast<ssize_t>(kPage)) Die("pwrite");
      lat.push_back(Micros(Clock::now() - t0));
    }
  };

  std::vector<double> alone, contended, meta;
  write_for(std::chrono::seconds(seconds), alone);

  std::atomic<bool> stop{false};
  std::thread other([&] {
    std::vector<char> data(kPage, 'm');
    for (uint64_t n = 0; !stop.load(); ++n) {
      const auto t0 = Clock::now();
      const std::string tmp = dir + "/xlogtemp." + std::to_string(n);
      const std::string done = dir + "/meta." + std::to_string(n);
      Remember(tmp);
      Remember(done);
      int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
      if (fd < 0) Die("create " + tmp);
      if (pwrite(fd, data.data(), data.size(), 0) != static_cast<ssize_t>(data.size())) {
        Die("write " + tmp);
      }
      if (fsync(fd) != 0) Die("fsync " + tmp);
      close(fd);
      if (rename(tmp.c_str(), done.c_str()) != 0) Die("rename " + tmp);
      FsyncDir(dir);
      if (n > 0) {
        const std::string prev = dir + "/meta." + std::to_string(n - 1);
        if (unlink(prev.c_str()) != 0) Die("unlink " + prev);
        FsyncDir(dir);
      }
      meta.push_back(Micros(Clock::now() - t0));
    }
  });
  write_for(std::chrono::seconds(seconds), contended);
  stop.store(true);
  other.join();
  close(wfd);

  std::printf("alone_writes %zu\n", alone.size());
  Print("alone_p50_us", Quantile(alone, 0.5));
  Print("alone_p99_us", Quantile(alone, 0.99));
  Print("alone_max_us", Quantile(alone, 1.0));
  std::printf("contended_writes %zu\n", contended.size());
  Print("contended_p50_us", Quantile(contended, 0.5));
  Print("contended_p99_us", Quantile(contended, 0.99));
  Print("contended_max_us", Quantile(contended, 1.0));
  std::printf("meta_rounds %zu\n", meta.size());
  Print("meta_round_p50_us", Quantile(meta, 0.5));
  return 0;
}

int Meta(const std::string& dir, int ops) {
  std::vector<double> create, ren, del;
  for (int i = 0; i < ops; ++i) {
    const std::string a = dir + "/latbench.a." + std::to_string(i);
    const std::string b = dir + "/latbench.b." + std::to_string(i);
    Remember(a);
    Remember(b);
    auto t0 = Clock::now();
    int fd = open(a.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) Die("create " + a);
    if (fsync(fd) != 0) Die("fsync " + a);
    close(fd);
    FsyncDir(dir);
    create.push_back(Micros(Clock::now() - t0));
    t0 = Clock::now();
    if (rename(a.c_str(), b.c_str()) != 0) Die("rename " + a);
    FsyncDir(dir);
    ren.push_back(Micros(Clock::now() - t0));
    t0 = Clock::now();
    if (unlink(b.c_str()) != 0) Die("unlink " + b);
    FsyncDir(dir);
    del.push_back(Micros(Clock::now() - t0));
  }
  Print("create_p50_us", Quantile(create, 0.5));
  Print("create_p99_us", Quantile(create, 0.99));
  Print("rename_p50_us", Quantile(ren, 0.5));
  Print("rename_p99_us", Quantile(ren, 0.99));
  Print("unlink_p50_us", Quantile(del, 0.5));
  Print("unlink_p99_us", Quantile(del, 0.99));
  return 0;
}

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs st;
  if (statvfs(dir.c_str(), &st) != 0) Die("statvfs " + dir);
  return static_cast<uint64_t>(st.f_bfree) * st.f_frsize;
}

int Free(const std::string& dir, int mib) {
  const std::string path = dir + "/latbench.big";
  Remember(path);
  const uint64_t bytes = static_cast<uint64_t>(mib) << 20;
  const uint64_t before = FreeBytes(dir);
  {
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) Die("create " + path);
    std::vector<char> chunk(1 << 20, 'f');
    for (uint64_t off = 0; off < bytes; off += chunk.size()) {
      if (pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(off)) !=
          static_cast<ssize_t>(chunk.size())) {
        Die("write " + path);
      }
    }
    if (fsync(fd) != 0) Die("fsync " + path);
    close(fd);
  }
  // Free again means within 1% of the file of where it was (other files may change).
  const uint64_t target = before - bytes / 100;
  if (unlink(path.c_str()) != 0) Die("unlink " + path);
  const auto t0 = Clock::now();
  const uint64_t first = FreeBytes(dir);
  while (FreeBytes(dir) < target) {
    if (Clock::now() - t0 > std::chrono::seconds(60)) {
      std::fprintf(stderr, "walfs_latbench: space not free 60 s after unlink\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  Print("free_after_unlink_us", Micros(Clock::now() - t0));
  std::printf("free_at_first_statfs %d\n", first >= target ? 1 : 0);
  return 0;
}

// One store per 4 KiB page of `mem`: the page-table and TLB reach of a pass over it.
constexpr size_t kTouchStep = 4096;
double TouchPass(char* mem, size_t bytes) {
  const auto t0 = Clock::now();
  for (size_t i = 0; i < bytes; i += kTouchStep) mem[i] = static_cast<char>(mem[i] + 1);
  return Micros(Clock::now() - t0);
}

// What happens to the 16 MiB file mapping before each pass (its index names it in kModes).
enum class AfterMap { kNothing, kMunmap, kDontNeed, kKept };

int Unmap(const std::string& dir, int rounds, int mib) {
  const std::string path = dir + "/latbench.map";
  Remember(path);
  constexpr size_t kSeg = 16 << 20;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) Die("create " + path);
  if (ftruncate(fd, kSeg) != 0) Die("ftruncate " + path);
  const size_t bytes = static_cast<size_t>(mib) << 20;
  void* raw = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) Die("mmap working set");
  char* mem = static_cast<char*>(raw);
  std::memset(mem, 1, bytes);
  std::vector<void*> kept;
  static constexpr const char* kModes[] = {"none", "munmap", "dontneed", "kept"};
  for (int m = 0; m < 4; ++m) {
    const auto after = static_cast<AfterMap>(m);
    std::vector<double> passes;
    for (int r = 0; r < rounds; ++r) {
      if (after != AfterMap::kNothing) {
        void* seg = mmap(nullptr, kSeg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (seg == MAP_FAILED) Die("mmap " + path);
        TouchPass(static_cast<char*>(seg), kSeg);
        if (after == AfterMap::kMunmap) {
          if (munmap(seg, kSeg) != 0) Die("munmap");
        } else {
          // kDontNeed zaps the pages but keeps the mapping: both are unmapped at the end.
          if (after == AfterMap::kDontNeed && madvise(seg, kSeg, MADV_DONTNEED) != 0) {
            Die("madvise");
          }
          kept.push_back(seg);
        }
      }
      passes.push_back(TouchPass(mem, bytes));
    }
    Print(std::string("pass_after_") + kModes[m] + "_us", Quantile(passes, 0.5));
  }
  for (void* seg : kept) munmap(seg, kSeg);
  munmap(mem, bytes);
  close(fd);
  return 0;
}

int Usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: walfs_latbench interference DIR [--seconds N]\n"
               "       walfs_latbench meta DIR [--ops N]\n"
               "       walfs_latbench free DIR [--mib N]\n"
               "       walfs_latbench unmap DIR [--ops N] [--mib N]\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    return Usage(0);
  }
  if (argc < 3) return Usage(2);
  const std::string mode = argv[1];
  const std::string dir = argv[2];
  const bool unmap = mode == "unmap";
  int seconds = 5, ops = unmap ? 43 : 200, mib = unmap ? 128 : 512;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage(2);
    const int v = std::atoi(argv[++i]);
    if (v <= 0) return Usage(2);
    if (a == "--seconds") {
      seconds = v;
    } else if (a == "--ops") {
      ops = v;
    } else if (a == "--mib") {
      mib = v;
    } else {
      return Usage(2);
    }
  }
  std::atexit(Cleanup);
  if (mode == "interference") return Interference(dir, seconds);
  if (mode == "meta") return Meta(dir, ops);
  if (mode == "free") return Free(dir, mib);
  if (unmap) return Unmap(dir, ops, mib);
  return Usage(2);
}
