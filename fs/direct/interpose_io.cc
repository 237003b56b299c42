// The data family of libwalfs-direct.so: the exported positioned reads and writes (the
// pread and pwrite entry points), read/write at the file offset, copy_file_range, lseek
// and the syncs.
// Each tries the direct path on a tracked descriptor and otherwise makes the real call.
// Owns no state: the direct paths are direct_read.h's and direct_write.h's, and the
// lease a descriptor takes at its first read or write is lease.h's.
#include <fcntl.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <climits>

#include "fs/direct/direct_copy.h"
#include "fs/direct/direct_read.h"
#include "fs/direct/direct_write.h"
#include "fs/direct/interpose.h"
#include "fs/direct/lease.h"
#include "fs/direct/real_calls.h"

namespace walfs::direct {
namespace {

// The two directions of the data family: the buffer type of their single-buffer calls,
// whether read(2)/write(2) on fd should become positioned (AtFileOffset), and the direct
// attempt at a positioned call (kStored with *done the byte count, kPending when fd's
// lease is still to be taken, else the caller makes the real call).
struct Writes {
  using Buf = const void*;
  static bool Positioned(int fd) { return WantsPositionedWrite(g_table, fd); }
  static DirectResult Try(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags,
                          size_t* done) {
    return TryDirectWritePmem(g_table, fd, iov, iovcnt, offset, flags, done);
  }
};

struct Reads {
  using Buf = void*;
  static bool Positioned(int fd) { return WantsPositionedRead(g_table, fd); }
  static DirectResult Try(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags,
                          size_t* done) {
    return TryDirectReadMemcpy(g_table, fd, iov, iovcnt, offset, flags, done);
  }
};

// The positioned core of both directions: direct when leased and inside the lease, else
// real(). The untracked case is the inline load and nothing else.
template <typename Dir, typename Real>
ssize_t DirectAt(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags, Real real) {
  if (!g_table.IsTracked(fd)) return real();
  size_t done = 0;
  DirectResult result = Dir::Try(fd, iov, iovcnt, offset, flags, &done);
  if (result == DirectResult::kPending) {
    // The descriptor's first write or read: take its lease now. Afterwards fd holds the
    // lease or nothing (or a newer pending entry, whose own first call will ask).
    LeasePending(fd, ProductionLeaseSources(), g_table, g_sessions);
    result = Dir::Try(fd, iov, iovcnt, offset, flags, &done);
  }
  if (result == DirectResult::kStored) return static_cast<ssize_t>(done);
  return real();
}

// read(2)/readv(2)/write(2)/writev(2) on fd: on a descriptor that holds or may take a
// lease (Dir::Positioned), the range at the file offset is reserved atomically and done
// by at_offset(offset), a positioned call (AtFileOffset); everything else is real().
template <typename Dir, typename AtOffset, typename Real>
ssize_t AtFileOffsetIfLeased(int fd, const struct iovec* iov, int iovcnt, AtOffset at_offset,
                             Real real) {
  if (!g_table.IsTracked(fd)) return real();
  auto* const real_lseek = WALFS_REAL(lseek);
  if (real_lseek == nullptr || iovcnt <= 0 || iovcnt > IOV_MAX || !Dir::Positioned(fd)) {
    return real();
  }
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len > static_cast<size_t>(SSIZE_MAX) - total) return real();
    total += iov[i].iov_len;
  }
  return AtFileOffset(fd, total, real_lseek, at_offset, real);
}

}  // namespace
}  // namespace walfs::direct

using walfs::direct::Reads;
using walfs::direct::Writes;

// ---- positioned reads and writes ------------------------------------------------------

// X(name, direction, shape, offset type). Shapes:
//  Buf   ssize_t name(int fd, Dir::Buf buf, size_t count, OFF offset);
//  Vec   ssize_t name(int fd, const struct iovec* iov, int iovcnt, OFF offset);
//  Vec2  ssize_t name(int fd, const struct iovec* iov, int iovcnt, OFF offset, int flags);
//  Chk   ssize_t name(int fd, void* buf, size_t count, OFF offset, size_t buflen):
//        _FORTIFY_SOURCE's checked variant; a count larger than the buffer goes to libc,
//        which aborts as it would have without us.
// A new entry point of one of these shapes is one line here.
#define WALFS_POSITIONED_FAMILY(X)      \
  X(pwrite, Writes, Buf, off_t)         \
  X(pwrite64, Writes, Buf, off64_t)     \
  X(pwritev, Writes, Vec, off_t)        \
  X(pwritev64, Writes, Vec, off64_t)    \
  X(pwritev2, Writes, Vec2, off_t)      \
  X(pwritev64v2, Writes, Vec2, off64_t) \
  X(pread, Reads, Buf, off_t)           \
  X(pread64, Reads, Buf, off64_t)       \
  X(preadv, Reads, Vec, off_t)          \
  X(preadv64, Reads, Vec, off64_t)      \
  X(preadv2, Reads, Vec2, off_t)        \
  X(preadv64v2, Reads, Vec2, off64_t)   \
  X(__pread_chk, Reads, Chk, off_t)     \
  X(__pread64_chk, Reads, Chk, off64_t)

#define WALFS_POSITIONED_Buf(name, Dir, Off)                                       \
  WALFS_EXPORT ssize_t name(int fd, Dir::Buf buf, size_t count, Off offset) {      \
    const struct iovec iov = {const_cast<void*>(buf), count};                      \
    return walfs::direct::DirectAt<Dir>(fd, &iov, 1, offset, 0, [&]() -> ssize_t { \
      WALFS_CALL_REAL(name, fd, buf, count, offset);                               \
    });                                                                            \
  }

#define WALFS_POSITIONED_Vec(name, Dir, Off)                                           \
  WALFS_EXPORT ssize_t name(int fd, const struct iovec* iov, int iovcnt, Off offset) { \
    return walfs::direct::DirectAt<Dir>(fd, iov, iovcnt, offset, 0, [&]() -> ssize_t { \
      WALFS_CALL_REAL(name, fd, iov, iovcnt, offset);                                  \
    });                                                                                \
  }

#define WALFS_POSITIONED_Vec2(name, Dir, Off)                                                     \
  WALFS_EXPORT ssize_t name(int fd, const struct iovec* iov, int iovcnt, Off offset, int flags) { \
    return walfs::direct::DirectAt<Dir>(fd, iov, iovcnt, offset, flags, [&]() -> ssize_t {        \
      WALFS_CALL_REAL(name, fd, iov, iovcnt, offset, flags);                                      \
    });                                                                                           \
  }

// Declared first: libc's headers declare the checked variants only under
// _FORTIFY_SOURCE, which this library is built without.
#define WALFS_POSITIONED_Chk(name, Dir, Off)                                                 \
  extern "C" ssize_t name(int fd, void* buf, size_t count, Off offset, size_t buflen);       \
  WALFS_EXPORT ssize_t name(int fd, void* buf, size_t count, Off offset, size_t buflen) {    \
    auto real = [&]() -> ssize_t { WALFS_CALL_REAL(name, fd, buf, count, offset, buflen); }; \
    if (count > buflen) return real();                                                       \
    const struct iovec iov = {buf, count};                                                   \
    return walfs::direct::DirectAt<Dir>(fd, &iov, 1, offset, 0, real);                       \
  }

#define WALFS_DEFINE_POSITIONED(name, Dir, shape, Off) WALFS_POSITIONED_##shape(name, Dir, Off)
WALFS_POSITIONED_FAMILY(WALFS_DEFINE_POSITIONED)

// ---- reads and writes at the file offset ----------------------------------------------

// X(name, direction, shape, the positioned call it becomes). Shapes:
//  Buf  ssize_t name(int fd, Dir::Buf buf, size_t count);
//  Vec  ssize_t name(int fd, const struct iovec* iov, int iovcnt).
// So `cat` and `cp` of a segment copy out of the pool, and pg_receivewal's streaming
// writes take the direct path (AtFileOffsetIfLeased).
#define WALFS_STREAM_FAMILY(X)  \
  X(read, Reads, Buf, pread)    \
  X(readv, Reads, Vec, preadv)  \
  X(write, Writes, Buf, pwrite) \
  X(writev, Writes, Vec, pwritev)

#define WALFS_STREAM_Buf(name, Dir, positioned)                                          \
  WALFS_EXPORT ssize_t name(int fd, Dir::Buf buf, size_t count) {                        \
    const struct iovec iov = {const_cast<void*>(buf), count};                            \
    return walfs::direct::AtFileOffsetIfLeased<Dir>(                                     \
        fd, &iov, 1,                                                                     \
        [&](off_t offset) -> ssize_t {                                                   \
          return walfs::direct::DirectAt<Dir>(fd, &iov, 1, offset, 0, [&]() -> ssize_t { \
            WALFS_CALL_REAL(positioned, fd, buf, count, offset);                         \
          });                                                                            \
        },                                                                               \
        [&]() -> ssize_t { WALFS_CALL_REAL(name, fd, buf, count); });                    \
  }

#define WALFS_STREAM_Vec(name, Dir, positioned)                                              \
  WALFS_EXPORT ssize_t name(int fd, const struct iovec* iov, int iovcnt) {                   \
    return walfs::direct::AtFileOffsetIfLeased<Dir>(                                         \
        fd, iov, iovcnt,                                                                     \
        [&](off_t offset) -> ssize_t {                                                       \
          return walfs::direct::DirectAt<Dir>(fd, iov, iovcnt, offset, 0, [&]() -> ssize_t { \
            WALFS_CALL_REAL(positioned, fd, iov, iovcnt, offset);                            \
          });                                                                                \
        },                                                                                   \
        [&]() -> ssize_t { WALFS_CALL_REAL(name, fd, iov, iovcnt); });                       \
  }

#define WALFS_DEFINE_STREAM(name, Dir, shape, positioned) \
  WALFS_STREAM_##shape(name, Dir, positioned)
WALFS_STREAM_FAMILY(WALFS_DEFINE_STREAM)

// _FORTIFY_SOURCE's checked read: a count larger than the buffer goes to libc.
extern "C" ssize_t __read_chk(int fd, void* buf, size_t count, size_t buflen);
WALFS_EXPORT ssize_t __read_chk(int fd, void* buf, size_t count, size_t buflen) {
  if (count > buflen) WALFS_CALL_REAL(__read_chk, fd, buf, count, buflen);
  return read(fd, buf, count);
}

// ---- copy_file_range ------------------------------------------------------------------

// copy_file_range(2) between a walfs file and a file elsewhere (direct_copy.h): out of a
// leased file, written straight from the pool where the kernel would refuse (EXDEV) and
// leave cp to copy twice; into a walfs file opened empty (a restore_command's cp), under a
// write lease the copy makes possible. Everything else is the real call.
namespace walfs::direct {
namespace {
struct RealKernel {
  ssize_t Pread(int fd, void* buf, size_t n, off_t off) {
    return WALFS_REAL(pread64)(fd, buf, n, off);
  }
  ssize_t Pwrite(int fd, const void* buf, size_t n, off_t off) {
    return WALFS_REAL(pwrite64)(fd, buf, n, off);
  }
  off_t Lseek(int fd, off_t off, int whence) { return WALFS_REAL(lseek64)(fd, off, whence); }
  // The kernel's cached attributes: no GETATTR round trip for the walfs side; what is
  // used of them (type, device, the size of a file just opened) cannot be stale.
  int Fstat(int fd, struct stat* st) { return CachedStat(fd, st); }
  int Ftruncate(int fd, off_t size) { return ::ftruncate(fd, size); }
  int Fallocate(int fd, int mode, off_t off, off_t len) { return ::fallocate(fd, mode, off, len); }
  int GetFl(int fd) { return real::Fcntl(fd, F_GETFL, nullptr); }
};
}  // namespace
}  // namespace walfs::direct

WALFS_EXPORT ssize_t copy_file_range(int in_fd, loff_t* in_off, int out_fd, loff_t* out_off,
                                     size_t len, unsigned int flags) {
  using walfs::direct::g_table;
  auto real = [&]() -> ssize_t {
    WALFS_CALL_REAL(copy_file_range, in_fd, in_off, out_fd, out_off, len, flags);
  };
  const bool from_walfs = g_table.IsTracked(in_fd);
  if ((!from_walfs && !g_table.IsTracked(out_fd)) || WALFS_REAL(pread64) == nullptr ||
      WALFS_REAL(pwrite64) == nullptr || WALFS_REAL(lseek64) == nullptr) {
    return real();
  }
  walfs::direct::RealKernel kernel;
  ssize_t n;
  if (from_walfs) {
    n = walfs::direct::DirectCopyFileRange(
        g_table, in_fd, in_off, out_fd, out_off, len, flags, kernel, [](int fd) {
          walfs::direct::LeasePending(fd, walfs::direct::ProductionLeaseSources(), g_table,
                                      walfs::direct::g_sessions);
        });
  } else {
    n = walfs::direct::DirectCopyIntoEmpty(
        g_table, in_fd, in_off, out_fd, out_off, len, flags, kernel,
        [](int fd) {
          walfs::direct::NoteSeek(fd, walfs::direct::ProductionLeaseSources(), g_table);
        },
        [](int fd, const void* buf, size_t count, off_t offset) -> ssize_t {
          const struct iovec iov = {const_cast<void*>(buf), count};
          return walfs::direct::DirectAt<walfs::direct::Writes>(
              fd, &iov, 1, offset, 0,
              [&]() -> ssize_t { WALFS_CALL_REAL(pwrite64, fd, buf, count, offset); });
        });
  }
  return n == walfs::direct::kCopyNotTaken ? real() : n;
}

// ---- seeks and syncs ------------------------------------------------------------------

// X(name, offset type): the real call; on a descriptor pending with a file that was
// empty at open, a seek tells the library to look again whether it has data now
// (NoteSeek).
#define WALFS_SEEK_FAMILY(X) \
  X(lseek, off_t)            \
  X(lseek64, off64_t)

#define WALFS_DEFINE_SEEK(name, Off)                                       \
  WALFS_EXPORT Off name(int fd, Off offset, int whence) {                  \
    auto* real_fn = WALFS_REAL(name);                                      \
    if (real_fn == nullptr) return errno = ENOSYS, -1;                     \
    const Off r = real_fn(fd, offset, whence);                             \
    if (r >= 0 && walfs::direct::g_table.IsTracked(fd)) {                  \
      walfs::direct::NoteSeek(fd, walfs::direct::ProductionLeaseSources(), \
                              walfs::direct::g_table);                     \
    }                                                                      \
    return r;                                                              \
  }
WALFS_SEEK_FAMILY(WALFS_DEFINE_SEEK)

// X(name): a leased descriptor's direct stores were durable on return, and FUSE writes
// in pmem mode are durable at their reply: there is nothing to sync.
#define WALFS_SYNC_FAMILY(X) \
  X(fsync)                   \
  X(fdatasync)

#define WALFS_DEFINE_SYNC(name)                                          \
  WALFS_EXPORT int name(int fd) {                                        \
    if (walfs::direct::SyncIsDone(walfs::direct::g_table, fd)) return 0; \
    WALFS_CALL_REAL(name, fd);                                           \
  }
WALFS_SYNC_FAMILY(WALFS_DEFINE_SYNC)
