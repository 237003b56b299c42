// PmemRegion: a PersistentRegion over a file, DAX file or device-DAX mapped with libpmem.
#include <fcntl.h>
#include <libpmem.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/persistent_region.h"
#include "core/status.h"

namespace walfs::core {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "walfs: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

// Closes a file descriptor on scope exit.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  // Gives up ownership.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// Owns the mapping and checks ranges; the subclasses pick the store/flush/drain
// functions once, at open time.
class MappedRegion : public PersistentRegion {
 public:
  // SEEK_DATA/SEEK_HOLE return their result and only move the descriptor's offset,
  // which nothing reads: concurrent calls are safe. A SEEK_HOLE costs as much as the
  // data run it crosses, and on tmpfs that is a walk of every page to the hole (of a
  // fully written pool: to its end), whatever `end` is. So the last data run found is
  // remembered and a call inside it makes no system call. A
  // remembered run never becomes wrong in the direction that matters: a hole filled
  // since is still outside it (asked again), and a run only loses data if the file's
  // pages are punched out, which walfs never does (reading a hole reads zeros anyway).
  DataRange MaybeData(uint64_t off, uint64_t end) const override {
    if (holes_fd_ < 0 || off >= end) return {off, end};
    {
      std::lock_guard<std::mutex> l(run_mu_);
      if (off >= run_begin_ && off < run_end_) return {off, std::min(end, run_end_)};
    }
    const off_t data = ::lseek(holes_fd_, static_cast<off_t>(off), SEEK_DATA);
    if (data < 0) return errno == ENXIO ? DataRange{end, end} : DataRange{off, end};
    const uint64_t begin = static_cast<uint64_t>(data);
    if (begin >= end) return {end, end};
    const off_t hole = ::lseek(holes_fd_, data, SEEK_HOLE);
    if (hole < 0 || static_cast<uint64_t>(hole) <= begin) return {begin, end};
    {
      std::lock_guard<std::mutex> l(run_mu_);
      run_begin_ = begin;
      run_end_ = static_cast<uint64_t>(hole);
    }
    return {begin, std::min(end, static_cast<uint64_t>(hole))};
  }

  // `holes_fd` (owned from now on) answers MaybeData; regions over a device have none.
  void SetHolesFd(int holes_fd) { holes_fd_ = holes_fd; }

  ~MappedRegion() override {
    if (holes_fd_ >= 0) ::close(holes_fd_);
    // pmem_unmap also drops libpmem's record of the range (used by pmem_is_pmem); a
    // mapping we made ourselves was never recorded.
    if (mapped_by_pmem_) {
      pmem_unmap(mutable_base(), mapped_len_);
    } else {
      ::munmap(mutable_base(), mapped_len_);
    }
  }

 protected:
  MappedRegion(std::string path, char* base, size_t mapped_len, bool mapped_by_pmem)
      : PersistentRegion(base, mapped_len, absl::StrCat("pool ", path)),
        path_(std::move(path)),
        mapped_len_(mapped_len),
        mapped_by_pmem_(mapped_by_pmem) {}

  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  int holes_fd_ = -1;
  // The last data run MaybeData found: [run_begin_, run_end_) of the file.
  mutable std::mutex run_mu_;
  mutable uint64_t run_begin_ = 0, run_end_ = 0;
  const size_t mapped_len_;
  const bool mapped_by_pmem_;
};

// Real (or forced) PMEM: stores bypass or flush the CPU caches as they copy, so only
// the fence remains for Drain.
class PmemRegion final : public MappedRegion {
 public:
  PmemRegion(std::string path, char* base, size_t mapped_len)
      : MappedRegion(std::move(path), base, mapped_len, /*mapped_by_pmem=*/true) {}

  bool is_pmem() const override { return true; }
  std::string_view kind() const override { return "pmem"; }

  void Store(uint64_t off, const void* src, size_t len) override {
    CheckRange("Store", off, len);
    pmem_memcpy_nodrain(mutable_base() + off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    CheckRange("Fill", off, len);
    pmem_memset_nodrain(mutable_base() + off, byte, len);
  }
  // Nothing to do: the *_nodrain copies already wrote every cache line they touched
  // either with non-temporal stores or with plain stores followed by CLWB/CLFLUSHOPT;
  // what they omit is only the SFENCE, which Drain issues. Since all mutation goes
  // through Store/Fill, no dirty line can be left for Flush to write back.
  void Flush(uint64_t off, size_t len) override { CheckRange("Flush", off, len); }
  void Drain() override { pmem_drain(); }
};

// Page cache over a file: stores land in the shared mapping and msync writes them back.
class MsyncRegion final : public MappedRegion {
 public:
  MsyncRegion(std::string path, char* base, size_t mapped_len)
      : MappedRegion(std::move(path), base, mapped_len, /*mapped_by_pmem=*/true),
        page_size_(static_cast<uint64_t>(::sysconf(_SC_PAGESIZE))) {}

  bool is_pmem() const override { return false; }
  std::string_view kind() const override { return "msync"; }

  void Store(uint64_t off, const void* src, size_t len) override { CachedStore(off, src, len); }
  void Fill(uint64_t off, uint8_t byte, size_t len) override { CachedFill(off, byte, len); }
  // msync wants a page-aligned start; the end may be anywhere (the kernel rounds it up
  // to the page). pmem_msync rounds the start down too; doing it here keeps the range
  // we ask for explicit.
  //
  // A failed msync (EIO from the backing device) means stores the caller believes are
  // about to be durable may be lost. It is latched (health()), so the request that
  // flushed and every later durability request fail with EIO instead of the daemon
  // dying: PostgreSQL then PANICs on its own terms, and reads keep working.
  void Flush(uint64_t off, size_t len) override {
    CheckRange("Flush", off, len);
    if (len == 0) return;
    const uint64_t start = off & ~(page_size_ - 1);
    const uint64_t end = off + len;
    if (pmem_msync(mutable_base() + start, end - start) != 0) {
      const int e = errno;
      SetPersistFailed(absl::DataLossError(absl::StrFormat(
          "msync of pool %s [%d, %d) failed: %s (%s); writes since the last successful "
          "msync may be lost, so every durability request now fails",
          path(), start, end, std::strerror(e), pmem_errormsg())));
    }
  }
  void Drain() override {}  // msync is synchronous: Flush already waited for the media.

 private:
  const uint64_t page_size_;
};

// A PROT_READ mapping (fsck without --repair, inspect, export): nothing to persist.
class ReadOnlyRegion final : public MappedRegion {
 public:
  ReadOnlyRegion(std::string path, char* base, size_t mapped_len, bool pmem)
      : MappedRegion(std::move(path), base, mapped_len, /*mapped_by_pmem=*/false),
        pmem_(pmem) {}

  bool is_pmem() const override { return pmem_; }
  std::string_view kind() const override { return pmem_ ? "pmem" : "msync"; }

  void Store(uint64_t, const void*, size_t) override {
    Die(absl::StrCat("Store to read-only pool ", path()));
  }
  void Fill(uint64_t, uint8_t, size_t) override {
    Die(absl::StrCat("Fill of read-only pool ", path()));
  }
  void Flush(uint64_t off, size_t len) override { CheckRange("Flush", off, len); }
  void Drain() override {}

 private:
  const bool pmem_;
};

// The size of a device-DAX character device, which stat reports as 0.
absl::StatusOr<uint64_t> DeviceDaxSize(const std::string& path, const struct stat& st) {
  const std::string sys = absl::StrFormat("/sys/dev/char/%u:%u/size", major(st.st_rdev),
                                          minor(st.st_rdev));
  std::ifstream in(sys);
  uint64_t size = 0;
  if (!(in >> size)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pool ", path, " is a character device but not device-DAX (no ", sys, ")"));
  }
  return size;
}

// Opens `path` (creating it when allowed) and returns the descriptor.
absl::StatusOr<int> OpenPool(const std::string& path, const PmemOpenOptions& options) {
  const int flags = (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  int fd = ::open(path.c_str(), flags);
  if (fd >= 0 || errno != ENOENT || options.create_size == 0 || options.read_only) {
    if (fd < 0) return PosixError(absl::StrCat("open pool ", path), errno);
    return fd;
  }
  fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    // Someone created it since our first open: map theirs like any existing pool.
    if (errno == EEXIST) fd = ::open(path.c_str(), flags);
    if (fd < 0) return PosixError(absl::StrCat("create pool ", path), errno);
    return fd;
  }
  // Allocate every block now (as PMEM_FILE_CREATE does without PMEM_FILE_SPARSE), so a
  // store can never fault on a full file system.
  if (const int e = ::posix_fallocate(fd, 0, static_cast<off_t>(options.create_size));
      e != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    return PosixError(
        absl::StrFormat("allocate %d bytes for pool %s", options.create_size, path), e);
  }
  PrefaultTmpfsRange(fd, 0, options.create_size);
  return fd;
}

}  // namespace

uint64_t PrefaultTmpfsRange(int fd, uint64_t offset, uint64_t length) {
#ifdef MADV_POPULATE_WRITE
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC || length == 0) return 0;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t begin = offset / page * page;
  const uint64_t end = offset + length;
  // In pieces, so a large pool never needs one huge stretch of address space.
  constexpr uint64_t kPiece = 1ULL << 30;
  uint64_t done = 0;
  while (begin < end) {
    const uint64_t n = std::min(kPiece, end - begin);
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                     static_cast<off_t>(begin));
    if (p == MAP_FAILED) break;
    const bool ok = ::madvise(p, n, MADV_POPULATE_WRITE) == 0;
    ::munmap(p, n);
    if (!ok) break;
    done += n;
    begin += n;
  }
  return done;
#else
  (void)fd;
  (void)offset;
  (void)length;
  return 0;
#endif
}

absl::StatusOr<std::unique_ptr<PersistentRegion>> OpenPmemRegion(
    const std::string& path, const PmemOpenOptions& options) {
  absl::StatusOr<int> opened = OpenPool(path, options);
  if (!opened.ok()) return opened.status();
  ScopedFd fd(*opened);

  // Everything below checks the inode we opened, not whatever the path names later.
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return PosixError(absl::StrCat("stat pool ", path), errno);
  const bool device = S_ISCHR(st.st_mode);
  if (!S_ISREG(st.st_mode) && !device) {
    return absl::FailedPreconditionError(
        absl::StrCat("pool ", path, " is not a regular file or character device"));
  }
  // Anyone who can write the pool can forge metadata the daemon trusts.
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("pool %s is writable by others (mode 0%o): chmod 600", path,
                        st.st_mode & 07777));
  }
  if (options.owner_only && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("pool %s is readable by others (mode 0%o), and it holds every "
                        "committed row: chmod 600",
                        path, st.st_mode & 07777));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (device) {
    absl::StatusOr<uint64_t> dax_size = DeviceDaxSize(path, st);
    if (!dax_size.ok()) return dax_size.status();
    size = *dax_size;
  }
  if (size == 0) {
    return absl::FailedPreconditionError(absl::StrCat("pool ", path, " is empty (size 0)"));
  }

  if (options.read_only) {
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (addr == MAP_FAILED) return PosixError(absl::StrCat("map pool ", path), errno);
    const bool pmem = pmem_is_pmem(addr, size) != 0;
    auto region = std::make_unique<ReadOnlyRegion>(path, static_cast<char*>(addr), size, pmem);
    if (!device) region->SetHolesFd(fd.release());
    return std::unique_ptr<PersistentRegion>(std::move(region));
  }

  // pmem_map_file takes a path; naming our descriptor through /proc maps exactly the
  // inode checked above. With len 0 and no flags it maps the whole file or device.
  const std::string fd_path = absl::StrCat("/proc/self/fd/", fd.get());
  size_t mapped_len = 0;
  int is_pmem = 0;
  void* addr = pmem_map_file(fd_path.c_str(), 0, 0, 0, &mapped_len, &is_pmem);
  if (addr == nullptr) {
    const int e = errno;
    return PosixError(absl::StrCat("map pool ", path, " (", pmem_errormsg(), ")"), e);
  }
  char* base = static_cast<char*>(addr);
  std::unique_ptr<MappedRegion> region;
  if (is_pmem) {
    region = std::make_unique<PmemRegion>(path, base, mapped_len);
  } else {
    region = std::make_unique<MsyncRegion>(path, base, mapped_len);
  }
  if (!device) region->SetHolesFd(fd.release());
  return std::unique_ptr<PersistentRegion>(std::move(region));
}

}  // namespace walfs::core
