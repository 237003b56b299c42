// walfs_segbench: PostgreSQL 15's WAL segment lifecycle on one directory, timed.
//
// Replays the system calls of XLogFileInitInternal (create), InstallXLogFileSegment
// (durable_rename into place) and RemoveOldXlogFiles (recycle: durable_rename of an old
// segment to a future name), so any directory (walfs, tmpfs, ext4, a FUSE passthrough)
// can be compared without a server:
//   create:  open(xlogtemp.PID, O_RDWR|O_CREAT|O_EXCL, 0600); wal_init_zero=on: pwritev
//            of 32 x 8 KiB zero pages until the segment is full (=off: one 1-byte pwrite
//            at segsize-1); fsync; close; durable_rename(xlogtemp.PID, segment).
//   recycle: durable_rename(old segment, future segment name).
//   durable_rename(a, b) = fsync(a); rename(a, b); fsync(b); fsync(dir).
//
// Usage: walfs_segbench DIR [--segments N] [--segment-size SIZE]   (SIZE as
// util/byte_size.h reads it: 16M, 16MiB, 16777216)
// Prints "key value" lines (times in microseconds per segment) for tools/bench/run.sh.
// Every file it makes is removed before it exits, also when a step fails.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "util/byte_size.h"

namespace walfs::bench {
namespace {

// Standalone on purpose (no walfs_core): it measures any directory, walfs or not.
absl::Status PosixError(const std::string& context, int error_number) {
  return absl::UnknownError(context + ": " + std::strerror(error_number));
}

constexpr size_t kPageSize = 8192;  // XLOG_BLCKSZ
constexpr int kIovecs = 32;         // PG_IOV_MAX

// An fd closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  absl::Status Close(const std::string& what) {
    int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) return PosixError("close " + what, errno);
    return absl::OkStatus();
  }

 private:
  int fd_;
};

double Micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

class SegmentBench {
 public:
  SegmentBench(std::string dir, uint64_t segment_size)
      : dir_(std::move(dir)), segment_size_(segment_size) {}
  ~SegmentBench() {
    for (const std::string& name : made_) unlink(Path(name).c_str());
  }
  SegmentBench(const SegmentBench&) = delete;
  SegmentBench& operator=(const SegmentBench&) = delete;

  // XLogFileInitInternal + InstallXLogFileSegment for segment number `segno`.
  absl::Status Create(uint64_t segno, bool zero_fill) {
    const std::string tmp = absl::StrFormat("xlogtemp.%d", getpid());
    if (unlink(Path(tmp).c_str()) != 0 && errno != ENOENT) {
      return PosixError("unlink " + tmp, errno);
    }
    Fd fd(open(Path(tmp).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) return PosixError("create " + tmp, errno);
    made_.push_back(tmp);
    if (zero_fill) {
      static const std::vector<char> zeros(kPageSize, 0);
      iovec iov[kIovecs];
      for (iovec& v : iov) v = {const_cast<char*>(zeros.data()), kPageSize};
      for (uint64_t off = 0; off < segment_size_;) {
        const int n = static_cast<int>(
            std::min<uint64_t>(kIovecs, (segment_size_ - off) / kPageSize));
        const ssize_t done = pwritev(fd.get(), iov, n, static_cast<off_t>(off));
        if (done <= 0) return PosixError("pwritev " + tmp, done < 0 ? errno : EIO);
        off += static_cast<uint64_t>(done);  // PostgreSQL retries short writes
      }
    } else if (pwrite(fd.get(), "", 1, static_cast<off_t>(segment_size_ - 1)) != 1) {
      return PosixError("pwrite last byte of " + tmp, errno);
    }
    if (fsync(fd.get()) != 0) return PosixError("fsync " + tmp, errno);
    if (absl::Status s = fd.Close(tmp); !s.ok()) return s;
    return DurableRename(tmp, SegmentName(segno));
  }

  // RemoveXlogFile's recycling branch: the old segment becomes a future one.
  absl::Status Recycle(uint64_t old_segno, uint64_t new_segno) {
    const std::string future = SegmentName(new_segno);
    struct stat st;
    if (stat(Path(future).c_str(), &st) == 0) return PosixError(future, EEXIST);
    return DurableRename(SegmentName(old_segno), future);
  }

  absl::Status Remove(uint64_t segno) {
    const std::string name = SegmentName(segno);
    if (unlink(Path(name).c_str()) != 0) return PosixError("unlink " + name, errno);
    made_.erase(std::remove(made_.begin(), made_.end(), name), made_.end());
    return FsyncPath(dir_, O_RDONLY | O_DIRECTORY);
  }

 private:
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Timeline 1, 16 MiB-segment numbering: TLI, log id, segment in log.
  std::string SegmentName(uint64_t segno) const {
    const uint64_t per_log = 0x100000000ULL / segment_size_;
    return absl::StrFormat("%08X%08X%08X", 1, segno / per_log, segno % per_log);
  }

  absl::Status FsyncPath(const std::string& path, int flags) {
    Fd fd(open(path.c_str(), flags | O_CLOEXEC));
    if (fd.get() < 0) return PosixError("open " + path, errno);
    if (fsync(fd.get()) != 0) return PosixError("fsync " + path, errno);
    return fd.Close(path);
  }

  // fd.c's durable_rename.
  absl::Status DurableRename(const std::string& from, const std::string& to) {
    if (absl::Status s = FsyncPath(Path(from), O_RDWR); !s.ok()) return s;
    if (rename(Path(from).c_str(), Path(to).c_str()) != 0) {
      return PosixError("rename " + from + " " + to, errno);
    }
    std::replace(made_.begin(), made_.end(), from, to);
    if (std::find(made_.begin(), made_.end(), to) == made_.end()) made_.push_back(to);
    if (absl::Status s = FsyncPath(Path(to), O_RDWR); !s.ok()) return s;
    return FsyncPath(dir_, O_RDONLY | O_DIRECTORY);
  }

  const std::string dir_;
  const uint64_t segment_size_;
  std::vector<std::string> made_;  // names to remove on exit
};

struct Summary {
  double median, p90, min, max;
};

Summary Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {median, v[std::min(n - 1, (n * 9) / 10)], v.front(), v.back()};
}

void Print(const char* key, const std::vector<double>& samples) {
  const Summary s = Summarize(samples);
  std::printf("%s_us_median %.1f\n%s_us_p90 %.1f\n%s_us_min %.1f\n%s_us_max %.1f\n", key,
              s.median, key, s.p90, key, s.min, key, s.max);
}

// Times `op(i)` for i in [0, n).
template <typename Op>
absl::Status TimeEach(int n, std::vector<double>& out, Op op) {
  for (int i = 0; i < n; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status s = op(i); !s.ok()) return s;
    out.push_back(Micros(std::chrono::steady_clock::now() - start));
  }
  return absl::OkStatus();
}

absl::Status Run(const std::string& dir, int segments, uint64_t segment_size) {
  SegmentBench bench(dir, segment_size);
  const uint64_t base = 0x10;  // segments 000000010000000000000010 onwards
  std::vector<double> create_zero, create_sparse, recycle, remove;
  absl::Status s = TimeEach(segments, create_zero, [&](int i) {
    return bench.Create(base + i, /*zero_fill=*/true);
  });
  if (s.ok()) {
    s = TimeEach(segments, recycle, [&](int i) {
      return bench.Recycle(base + i, base + segments + i);
    });
  }
  if (s.ok()) {
    s = TimeEach(segments, remove, [&](int i) { return bench.Remove(base + segments + i); });
  }
  if (s.ok()) {
    s = TimeEach(segments, create_sparse, [&](int i) {
      return bench.Create(base + i, /*zero_fill=*/false);
    });
  }
  for (int i = 0; s.ok() && i < segments; ++i) s = bench.Remove(base + i);
  if (!s.ok()) return s;
  std::printf("segments %d\nsegment_size %llu\n", segments,
              static_cast<unsigned long long>(segment_size));
  Print("create_zero", create_zero);
  Print("create_sparse", create_sparse);
  Print("recycle", recycle);
  Print("remove", remove);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  const char* usage =
      "Usage: walfs_segbench DIR [--segments N] [--segment-size SIZE]\n"
      "Times PostgreSQL's WAL segment create, recycle and remove in DIR (default: 8\n"
      "segments of 16M; SIZE a power of two >= 8K, e.g. 16M, 16MB, 16MiB).\n";
  std::string dir;
  int segments = 8;
  uint64_t segment_size = 16 << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (arg == "--segments" && i + 1 < argc) {
      if (!absl::SimpleAtoi(argv[++i], &segments) || segments < 1) {
        std::fputs(usage, stderr);
        return 2;
      }
    } else if (arg == "--segment-size" && i + 1 < argc) {
      absl::StatusOr<uint64_t> size = util::ParseByteSize(argv[++i]);
      if (size.ok()) segment_size = *size;
      if (!size.ok() || segment_size < kPageSize || segment_size % kPageSize != 0 ||
          (segment_size & (segment_size - 1)) != 0) {
        std::fputs("walfs_segbench: --segment-size must be a power of two >= 8192\n",
                   stderr);
        return 2;
      }
    } else if (dir.empty() && arg[0] != '-') {
      dir = arg;
    } else {
      std::fputs(usage, stderr);
      return 2;
    }
  }
  if (dir.empty()) {
    std::fputs(usage, stderr);
    return 2;
  }
  if (absl::Status s = Run(dir, segments, segment_size); !s.ok()) {
    std::fprintf(stderr, "walfs_segbench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace walfs::bench

int main(int argc, char** argv) { return walfs::bench::Main(argc, argv); }
