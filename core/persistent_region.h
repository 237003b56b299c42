// PersistentRegion: the byte range a pool lives in, and how stores to it become durable.
//
// Implementations are chosen once, when the region is opened (like libpmem2's
// persist/flush/drain functions picked at map time), so hot paths never ask
// "is this pmem?":
//  - PmemRegion (pmem_region.cc): pmem_map_file over a file, a DAX file or a device-DAX
//    device. When pmem_is_pmem() is true, stores are non-temporal copies
//    (pmem_memcpy_nodrain), Flush is implied by the store and Drain is pmem_drain. When
//    false (an ordinary file: the embedded default), stores are plain memcpy into the
//    shared mapping and Flush is pmem_msync of the touched pages.
//  - MemoryRegion / RecordingRegion (tests/support/memory_region.h, recording_region.h):
//    in-memory stand-ins for tests; the recording one can produce the image a power
//    failure would leave (the crash-test engine).
//  - PowerCutRegion (tests/support/power_cut_region.h): a test facility over a PmemRegion
//    in which only persisted bytes reach the pool file, so killing the process is a
//    power cut.
// The last three are test support (walfs_test_support), not part of core.
//
// Contract for every implementation:
//  - All mutation goes through Store/Fill: code never writes through data().
//  - Bytes stored in [off, off+len) are durable once Flush(off, len) has been called
//    after the store and a Drain() has returned after that Flush. Persist = Flush+Drain.
//  - An aligned 8-byte store is failure-atomic (old or new, never a mix), as on x86 PMEM.
//    Nothing larger is.
//  - Flush ranges are clamped to page/cache-line granularity by the implementation; the
//    caller passes exact byte ranges.
//  - Store/Fill/Flush on disjoint ranges may run concurrently from several threads;
//    Drain makes durable the flushes issued by the calling thread (SFENCE semantics), so
//    a thread drains its own stores.
//  - A persist that fails (msync EIO) is not reported by Flush/Drain: the region latches
//    it and health() returns it from then on. Whoever promises durability checks
//    health() after its persists (see health()).
#ifndef WALFS_CORE_PERSISTENT_REGION_H_
#define WALFS_CORE_PERSISTENT_REGION_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/mutex.h"

namespace walfs::core {

class PersistentRegion {
 public:
  virtual ~PersistentRegion() = default;
  PersistentRegion(const PersistentRegion&) = delete;
  PersistentRegion& operator=(const PersistentRegion&) = delete;

  // Read-only view of the whole region; valid for the region's lifetime.
  const char* data() const { return base_; }
  uint64_t size() const { return size_; }

  // True when stores become durable with cache flushes + a fence (real or forced PMEM);
  // false when they need msync (page cache over a file).
  virtual bool is_pmem() const = 0;
  // "pmem", "msync" or "memory": for logs and walfsctl.
  virtual std::string_view kind() const = 0;

  virtual void Store(uint64_t off, const void* src, size_t len) = 0;
  virtual void Fill(uint64_t off, uint8_t byte, size_t len) = 0;
  virtual void Flush(uint64_t off, size_t len) = 0;
  virtual void Drain() = 0;

  void Persist(uint64_t off, size_t len) {
    Flush(off, len);
    Drain();
  }

  // The first part of [off, end) that may hold a non-zero byte: {begin, stop} with
  // off <= begin < stop <= end, or {end, end} when all of [off, end) reads as zeros
  // without being read. Everything in [off, begin) is known to be zero; [begin, stop)
  // must be read to know. A file-backed region asks the file system for its holes
  // (SEEK_DATA/SEEK_HOLE), which read as zeros by definition, so a check that free
  // space is zero costs a system call for never-written space instead of a read (which
  // on tmpfs would also allocate and clear every page it touches). The default knows
  // nothing: all of it may hold data. Thread-safe; a hint for checks, never for what
  // to store.
  struct DataRange {
    uint64_t begin;
    uint64_t end;
  };
  virtual DataRange MaybeData(uint64_t off, uint64_t end) const { return {off, end}; }

  // OK while every persist so far has succeeded. After the first failed one it returns
  // that failure (DataLoss, hence EIO) for good: the stores it covered may be lost, and
  // Linux reports a writeback error only once, so a later msync of the same pages may
  // succeed without having written them. Nothing persisted since can be trusted either.
  // Thread-safe; costs one atomic load while healthy.
  virtual absl::Status health() const;

 protected:
  // `what` names the region in CheckRange's message ("pool PATH", "power-cut region").
  PersistentRegion(char* base, uint64_t size, std::string what = "region")
      : base_(base), size_(size), what_(std::move(what)) {}
  // Latches a persist failure for health(); the first one is kept. Thread-safe.
  void SetPersistFailed(absl::Status error);
  // Aborts, naming `op` and the region, unless [off, off+len) lies inside the region: an
  // out-of-range store or flush is a broken invariant of our own code (media damage is
  // caught before any offset is computed from it), never an error to return.
  void CheckRange(const char* op, uint64_t off, size_t len) const {
    if (off > size_ || len > size_ - off) OutOfRange(op, off, len);
  }
  // Store and Fill for an implementation whose stores land in a cache (the page cache, a
  // written image) and reach the media only through Flush: the range checked, then a
  // plain copy into the region's bytes.
  void CachedStore(uint64_t off, const void* src, size_t len) {
    CheckRange("Store", off, len);
    std::memcpy(base_ + off, src, len);
  }
  void CachedFill(uint64_t off, uint8_t byte, size_t len) {
    CheckRange("Fill", off, len);
    std::memset(base_ + off, byte, len);
  }
  // The writable base, for implementations' own stores.
  char* mutable_base() const { return base_; }
  void Reset(char* base, uint64_t size) {
    base_ = base;
    size_ = size;
  }

 private:
  [[noreturn]] void OutOfRange(const char* op, uint64_t off, size_t len) const;

  char* base_;
  uint64_t size_;
  const std::string what_;
  std::atomic<bool> failed_{false};
  mutable Mutex error_mu_;
  absl::Status error_ ABSL_GUARDED_BY(error_mu_);
};

struct PmemOpenOptions {
  // Create the file with this size (mode 0600) when it does not exist; 0 = must exist.
  uint64_t create_size = 0;
  // Map for reading only (fsck without --repair, inspect, export).
  bool read_only = false;
  // Also refuse a pool its group or others may read. A pool writable by them is always
  // refused (they could forge the metadata the reader trusts); one they can read gives
  // away every WAL record, i.e. every committed row, so the daemon, which serves it for
  // as long as it runs, refuses that too. The tools (fsck, inspect, export) do not:
  // reading such a pool exposes nothing more, and export is for disaster recovery.
  bool owner_only = false;
};

// MaybeData counted in blocks of `block_size` from `base` (a data area): the first run
// [begin, end) of blocks in [first, end) that may hold a non-zero byte, partly
// holed blocks included, or {end, end} when all of them read as zeros.
inline PersistentRegion::DataRange MaybeDataBlocks(const PersistentRegion& region,
                                                   uint64_t base, uint64_t block_size,
                                                   uint64_t first, uint64_t end) {
  const PersistentRegion::DataRange bytes =
      region.MaybeData(base + first * block_size, base + end * block_size);
  if (bytes.begin >= base + end * block_size) return {end, end};
  return {(bytes.begin - base) / block_size,
          std::min(end, (bytes.end - base + block_size - 1) / block_size)};
}

// Makes [off, off+len) read as zeros and flushes it; the caller drains (Persist's
// contract). Pages that already read as zero (holes of the pool file unread, the rest
// compared) are not stored to: in msync mode a stored page is a page written back, and
// the extent being freed is mostly never-written space (a segment extent given back
// with 8 KiB used, a removed segment's unused tail), so freeing it costs its written
// pages rather than a write of the whole extent. The whole range is still flushed: a
// page that reads as zero may be dirty over older non-zero bytes on the media (zeros
// written but not yet persisted), and Flush writes back only what is dirty. Returns the
// bytes stored. Pages are counted from offset 0 of the region.
uint64_t ZeroUnlessZero(PersistentRegion& region, uint64_t off, uint64_t len);

// For a pool file on tmpfs: makes the pages of [offset, offset+length) of `fd` resident
// and cleared now, without changing a byte (MADV_POPULATE_WRITE over a shared mapping).
// posix_fallocate reserves a tmpfs file's pages but the kernel clears each one only when
// it is first touched, so without this the first WAL store into every page of a new pool
// pays the clearing, inside PostgreSQL's XLogWrite (and, on a virtual machine, the
// host's fault-in of that memory). Creation and growth call it once for the space they
// add. Returns the bytes made resident: 0 on any other file system (PMEM and disks have
// no such clearing), or when the kernel cannot populate (before Linux 5.14), which only
// leaves the cost where it was.
uint64_t PrefaultTmpfsRange(int fd, uint64_t offset, uint64_t length);

// Maps `path` with libpmem. Errors name the path and the failing step (missing file,
// permission, not mappable, too small).
absl::StatusOr<std::unique_ptr<PersistentRegion>> OpenPmemRegion(
    const std::string& path, const PmemOpenOptions& options = {});

}  // namespace walfs::core

#endif  // WALFS_CORE_PERSISTENT_REGION_H_
