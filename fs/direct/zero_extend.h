// Zero-extension: a write of nothing but zeros at or past EOF of a file on a walfs mount
// (PostgreSQL's zero-fill of a new WAL segment, wal_init_zero=on) sent to the daemon as
// one ioctl (fs/lease_protocol.h, kIoctlZeroExtend) instead of 16 MiB of FUSE WRITEs.
// The daemon decides, under the inode's lock, whether the range is still wholly at or
// past EOF and the mount in pmem mode; on any refusal the caller makes the write itself,
// so the file ends up exactly as the write would have left it either way.
//
// Which descriptors are asked about: ZeroExtendHints holds one bit per descriptor,
// set when the library saw it opened for writing on a file of a walfs mount and cleared
// when it saw that descriptor closed or reused. A bit is only a hint: a descriptor closed
// where the library could not see it and reused keeps it, which costs one fstat (the
// file is checked again before anything is sent) and nothing else.
#ifndef WALFS_FS_DIRECT_ZERO_EXTEND_H_
#define WALFS_FS_DIRECT_ZERO_EXTEND_H_

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "fs/direct/fd_table.h"

namespace walfs::direct {

// Writes smaller than this go to the kernel without a look: PostgreSQL's zero-fill
// writes 256 KiB per call (32 x 8 KiB), and a small write of zeros (wal_init_zero=off
// writes one byte at the segment's end) saves nothing worth an fstat.
inline constexpr size_t kZeroExtendMinBytes = 64 * 1024;

class ZeroExtendHints {
 public:
  constexpr ZeroExtendHints() = default;
  ZeroExtendHints(const ZeroExtendHints&) = delete;
  ZeroExtendHints& operator=(const ZeroExtendHints&) = delete;

  void Set(int fd) {
    if (InRange(fd)) words_[Word(fd)].fetch_or(Bit(fd), std::memory_order_relaxed);
  }
  // One load when the bit is already clear (every close of the process passes here).
  void Clear(int fd) {
    if (InRange(fd) && (words_[Word(fd)].load(std::memory_order_relaxed) & Bit(fd)) != 0) {
      words_[Word(fd)].fetch_and(~Bit(fd), std::memory_order_relaxed);
    }
  }
  bool Test(int fd) const {
    return InRange(fd) && (words_[Word(fd)].load(std::memory_order_relaxed) & Bit(fd)) != 0;
  }

 private:
  static bool InRange(int fd) { return static_cast<unsigned>(fd) < FdTable::kFdBound; }
  static size_t Word(int fd) { return static_cast<unsigned>(fd) / 64; }
  static uint64_t Bit(int fd) { return uint64_t{1} << (static_cast<unsigned>(fd) % 64); }

  std::atomic<uint64_t> words_[FdTable::kFdBound / 64] = {};
};

// The calls that touch the outside world, so tests drive every decision.
struct ZeroExtendSources {
  int (*fstat)(int fd, struct stat* st);
  bool (*is_walfs)(dev_t dev);
  // 0, or -errno.
  int (*ioctl_zero_extend)(int fd, uint64_t offset, uint64_t length);
};

// fstat(2), the process's MountCache, ioctl(fd, lease::kIoctlZeroExtend).
const ZeroExtendSources& ProductionZeroExtendSources();

// Devices whose daemon refused zero-extension as such (ENOTTY: an older daemon;
// EOPNOTSUPP: msync mode), so their zero-fills go straight to the kernel. A few slots:
// a process sees one or two walfs mounts; when full, it just keeps asking.
class ZeroExtendRefusals {
 public:
  static constexpr int kSlots = 4;
  constexpr ZeroExtendRefusals() = default;
  bool Refused(dev_t dev) const;
  void Note(dev_t dev);

 private:
  std::atomic<uint64_t> devs_[kSlots] = {};  // dev + 1; 0 is empty
};

enum class ZeroExtendResult {
  kExtended,     // the daemon did it: the call returns the byte count
  kNotAsked,     // not a candidate (small, not all zeros, no hint, flags, offset)
  kNotWalfs,     // the descriptor is no longer a regular file of a walfs mount
  kBelowEof,     // part of the range is inside the file: the write must store zeros
  kRefused,      // the daemon said no (its errno in the debug log)
};

// Decides for one pwrite/pwritev call. Preconditions: none (every argument is checked).
// On kExtended *written is the sum of the iovec lengths. Never changes errno. Reads each
// distinct buffer of the iovecs once (PostgreSQL points all 32 at one zeroed block).
ZeroExtendResult TryZeroExtend(int fd, const struct iovec* iov, int iovcnt, off_t offset,
                               int flags, ZeroExtendHints& hints, ZeroExtendRefusals& refusals,
                               const ZeroExtendSources& sources, size_t* written);

// The cheap test the wrappers make before anything else (no memory but the iovecs):
// whether the call is large enough to be a zero-fill worth a look.
inline bool ZeroExtendSized(const struct iovec* iov, int iovcnt) {
  if (iovcnt == 1) return iov[0].iov_len >= kZeroExtendMinBytes;
  if (iovcnt <= 1) return false;
  size_t total = 0;
  for (int i = 0; i < iovcnt && total < kZeroExtendMinBytes; ++i) total += iov[i].iov_len;
  return total >= kZeroExtendMinBytes;
}

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_ZERO_EXTEND_H_
