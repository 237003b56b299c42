// The exported symbols of libwalfs-direct.so: thin wrappers that resolve the next
// definition (libc) once and consult the fd table around it.
//
// Rules every wrapper keeps: a call on a descriptor we do not track costs at most one
// atomic load on top of libc; anything unexpected falls back to the real call; errno is
// what the real call left (or untouched, for a direct write, which succeeds).
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <climits>

#include "fs/direct/direct_read.h"
#include "fs/direct/direct_write.h"
#include "fs/direct/fd_events.h"
#include "fs/direct/fd_table.h"
#include "fs/direct/lease.h"
#include "fs/direct/owned_fds.h"
#include "fs/direct/pmem_calls.h"
#include "fs/direct/session.h"
#include "fs/direct/switches.h"

#define WALFS_EXPORT extern "C" __attribute__((visibility("default")))

namespace walfs::direct {
namespace {

constinit OwnedFds g_owned;
constinit FdTable g_table(&g_owned);
constinit Sessions g_sessions(&g_owned);

// The next definition of `name` (libc's), resolved on first use. A symbol libc lacks
// makes the call fail with ENOSYS.
#define WALFS_REAL(name)                                                              \
  ([]() {                                                                              \
    static decltype(&::name) const fn =                                                \
        reinterpret_cast<decltype(&::name)>(dlsym(RTLD_NEXT, #name));                 \
    return fn;                                                                         \
  }())

#define WALFS_CALL_REAL(name, ...)         \
  do {                                     \
    auto* const real_fn = WALFS_REAL(name); \
    if (real_fn == nullptr) {              \
      errno = ENOSYS;                      \
      return -1;                           \
    }                                      \
    return real_fn(__VA_ARGS__);           \
  } while (0)

constinit FdEvents g_events(&g_table, &g_owned, ProductionLeaseSources);

inline int Created(int fd) { return g_events.Created(fd); }
inline int Opened(int fd, int flags) { return g_events.Opened(fd, flags); }

inline bool NeedsMode(int flags) {
  return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
}

inline mode_t ModeArg(int flags, va_list ap) {
  return NeedsMode(flags) ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}

// pwrite-family core: direct when leased and inside the lease, else the real call. The
// untracked case is the inline load and nothing else.
template <typename Real>
inline ssize_t Pwritev(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags,
                       Real real) {
  if (!g_table.IsTracked(fd)) return real();
  size_t written = 0;
  DirectResult result = TryDirectWritePmem(g_table, fd, iov, iovcnt, offset, flags, &written);
  if (result == DirectResult::kPending) {
    // The descriptor's first write: take its lease now. Afterwards fd holds the lease or
    // nothing (or a newer pending entry, whose own first write will ask).
    LeasePending(fd, ProductionLeaseSources(), g_table, g_sessions);
    result = TryDirectWritePmem(g_table, fd, iov, iovcnt, offset, flags, &written);
  }
  if (result == DirectResult::kStored) return static_cast<ssize_t>(written);
  return real();
}

// pread-family core: copied out of the pool when leased and inside the lease, else the
// real call. The untracked case is the inline load and nothing else.
template <typename Real>
inline ssize_t Preadv(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags,
                      Real real) {
  if (!g_table.IsTracked(fd)) return real();
  size_t copied = 0;
  DirectResult result = TryDirectReadMemcpy(g_table, fd, iov, iovcnt, offset, flags, &copied);
  if (result == DirectResult::kPending) {
    LeasePending(fd, ProductionLeaseSources(), g_table, g_sessions);
    result = TryDirectReadMemcpy(g_table, fd, iov, iovcnt, offset, flags, &copied);
  }
  if (result == DirectResult::kStored) return static_cast<ssize_t>(copied);
  return real();
}

// In the lock order (owned_fds.h), released in reverse.
void ForkPrepare() {
  g_table.ForkPrepare();
  g_sessions.ForkPrepare();
  g_owned.ForkPrepare();
}
void ForkParent() {
  g_owned.ForkParent();
  g_sessions.ForkParent();
  g_table.ForkParent();
}
void ForkChild() {
  g_owned.ForkChild();
  g_sessions.ForkChild();
  g_table.ForkChild();
}


__attribute__((constructor)) void Init() {
  pthread_atfork(ForkPrepare, ForkParent, ForkChild);
  if (!DirectEnabled()) {
    DebugLog("WALFS_DIRECT=0: inert");
    return;
  }
  // The server's backends are its forks: load libpmem once, here, so that none of them
  // pays for it at its first WAL write (pmem_calls.h).
  if (IsPostgresServer()) {
    const char* reason = "";
    if (LoadPmem(&reason) == nullptr) DebugLog("%s: writes will go to the kernel", reason);
  }
}

}  // namespace
}  // namespace walfs::direct

using walfs::direct::CloseRangeAroundOwned;
using walfs::direct::Created;
using walfs::direct::g_events;
using walfs::direct::g_owned;
using walfs::direct::g_table;
using walfs::direct::ModeArg;
using walfs::direct::Opened;

// ---- open family ----------------------------------------------------------------------

WALFS_EXPORT int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  auto* real_fn = WALFS_REAL(open);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(path, flags, mode), flags);
}

WALFS_EXPORT int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  auto* real_fn = WALFS_REAL(open64);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(path, flags, mode), flags);
}

WALFS_EXPORT int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  auto* real_fn = WALFS_REAL(openat);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(dirfd, path, flags, mode), flags);
}

WALFS_EXPORT int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  auto* real_fn = WALFS_REAL(openat64);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(dirfd, path, flags, mode), flags);
}

// _FORTIFY_SOURCE's checked variants (no mode: they are used when O_CREAT is absent).
extern "C" {
int __open_2(const char* path, int flags);
int __open64_2(const char* path, int flags);
int __openat_2(int dirfd, const char* path, int flags);
int __openat64_2(int dirfd, const char* path, int flags);
}

WALFS_EXPORT int __open_2(const char* path, int flags) {
  auto* real_fn = WALFS_REAL(__open_2);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(path, flags), flags);
}

WALFS_EXPORT int __open64_2(const char* path, int flags) {
  auto* real_fn = WALFS_REAL(__open64_2);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(path, flags), flags);
}

WALFS_EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  auto* real_fn = WALFS_REAL(__openat_2);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(dirfd, path, flags), flags);
}

WALFS_EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  auto* real_fn = WALFS_REAL(__openat64_2);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(dirfd, path, flags), flags);
}

// glibc 2.36 has no openat2 wrapper (programs use syscall(SYS_openat2), handled below);
// a libc that has one is interposed here, one that has none gets the system call.
extern "C" int openat2(int dirfd, const char* path, struct open_how* how, size_t size);
WALFS_EXPORT int openat2(int dirfd, const char* path, struct open_how* how, size_t size) {
  using Fn = int(int, const char*, struct open_how*, size_t);
  static Fn* const next = reinterpret_cast<Fn*>(dlsym(RTLD_NEXT, "openat2"));
  const int fd = next != nullptr
                     ? next(dirfd, path, how, size)
                     : static_cast<int>(WALFS_REAL(syscall)(SYS_openat2, dirfd, path, how, size));
  return Opened(fd, fd >= 0 ? static_cast<int>(how->flags) : 0);
}

WALFS_EXPORT int creat(const char* path, mode_t mode) {
  auto* real_fn = WALFS_REAL(creat);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(path, mode), O_CREAT | O_WRONLY | O_TRUNC);
}

WALFS_EXPORT int creat64(const char* path, mode_t mode) {
  auto* real_fn = WALFS_REAL(creat64);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Opened(real_fn(path, mode), O_CREAT | O_WRONLY | O_TRUNC);
}

// ---- writes ---------------------------------------------------------------------------

WALFS_EXPORT ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  const struct iovec iov = {const_cast<void*>(buf), count};
  return walfs::direct::Pwritev(fd, &iov, 1, offset, 0, [&]() -> ssize_t {
    WALFS_CALL_REAL(pwrite, fd, buf, count, offset);
  });
}

WALFS_EXPORT ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset) {
  const struct iovec iov = {const_cast<void*>(buf), count};
  return walfs::direct::Pwritev(fd, &iov, 1, offset, 0, [&]() -> ssize_t {
    WALFS_CALL_REAL(pwrite64, fd, buf, count, offset);
  });
}

WALFS_EXPORT ssize_t pwritev(int fd, const struct iovec* iov, int iovcnt, off_t offset) {
  return walfs::direct::Pwritev(fd, iov, iovcnt, offset, 0, [&]() -> ssize_t {
    WALFS_CALL_REAL(pwritev, fd, iov, iovcnt, offset);
  });
}

WALFS_EXPORT ssize_t pwritev64(int fd, const struct iovec* iov, int iovcnt, off64_t offset) {
  return walfs::direct::Pwritev(fd, iov, iovcnt, offset, 0, [&]() -> ssize_t {
    WALFS_CALL_REAL(pwritev64, fd, iov, iovcnt, offset);
  });
}

WALFS_EXPORT ssize_t pwritev2(int fd, const struct iovec* iov, int iovcnt, off_t offset,
                              int flags) {
  return walfs::direct::Pwritev(fd, iov, iovcnt, offset, flags, [&]() -> ssize_t {
    WALFS_CALL_REAL(pwritev2, fd, iov, iovcnt, offset, flags);
  });
}

WALFS_EXPORT ssize_t pwritev64v2(int fd, const struct iovec* iov, int iovcnt, off64_t offset,
                                 int flags) {
  return walfs::direct::Pwritev(fd, iov, iovcnt, offset, flags, [&]() -> ssize_t {
    WALFS_CALL_REAL(pwritev64v2, fd, iov, iovcnt, offset, flags);
  });
}

// ---- reads ----------------------------------------------------------------------------

WALFS_EXPORT ssize_t pread(int fd, void* buf, size_t count, off_t offset) {
  const struct iovec iov = {buf, count};
  return walfs::direct::Preadv(fd, &iov, 1, offset, 0, [&]() -> ssize_t {
    WALFS_CALL_REAL(pread, fd, buf, count, offset);
  });
}

WALFS_EXPORT ssize_t pread64(int fd, void* buf, size_t count, off64_t offset) {
  const struct iovec iov = {buf, count};
  return walfs::direct::Preadv(fd, &iov, 1, offset, 0, [&]() -> ssize_t {
    WALFS_CALL_REAL(pread64, fd, buf, count, offset);
  });
}

WALFS_EXPORT ssize_t preadv(int fd, const struct iovec* iov, int iovcnt, off_t offset) {
  return walfs::direct::Preadv(fd, iov, iovcnt, offset, 0, [&]() -> ssize_t {
    WALFS_CALL_REAL(preadv, fd, iov, iovcnt, offset);
  });
}

WALFS_EXPORT ssize_t preadv64(int fd, const struct iovec* iov, int iovcnt, off64_t offset) {
  return walfs::direct::Preadv(fd, iov, iovcnt, offset, 0, [&]() -> ssize_t {
    WALFS_CALL_REAL(preadv64, fd, iov, iovcnt, offset);
  });
}

WALFS_EXPORT ssize_t preadv2(int fd, const struct iovec* iov, int iovcnt, off_t offset,
                             int flags) {
  return walfs::direct::Preadv(fd, iov, iovcnt, offset, flags, [&]() -> ssize_t {
    WALFS_CALL_REAL(preadv2, fd, iov, iovcnt, offset, flags);
  });
}

WALFS_EXPORT ssize_t preadv64v2(int fd, const struct iovec* iov, int iovcnt, off64_t offset,
                                int flags) {
  return walfs::direct::Preadv(fd, iov, iovcnt, offset, flags, [&]() -> ssize_t {
    WALFS_CALL_REAL(preadv64v2, fd, iov, iovcnt, offset, flags);
  });
}

// _FORTIFY_SOURCE's checked pread: a count larger than the buffer goes to libc, which
// aborts as it would have without us.
extern "C" {
ssize_t __pread_chk(int fd, void* buf, size_t count, off_t offset, size_t buflen);
ssize_t __pread64_chk(int fd, void* buf, size_t count, off64_t offset, size_t buflen);
}

WALFS_EXPORT ssize_t __pread_chk(int fd, void* buf, size_t count, off_t offset,
                                 size_t buflen) {
  auto real = [&]() -> ssize_t { WALFS_CALL_REAL(__pread_chk, fd, buf, count, offset, buflen); };
  if (count > buflen) return real();
  const struct iovec iov = {buf, count};
  return walfs::direct::Preadv(fd, &iov, 1, offset, 0, real);
}

WALFS_EXPORT ssize_t __pread64_chk(int fd, void* buf, size_t count, off64_t offset,
                                   size_t buflen) {
  auto real = [&]() -> ssize_t {
    WALFS_CALL_REAL(__pread64_chk, fd, buf, count, offset, buflen);
  };
  if (count > buflen) return real();
  const struct iovec iov = {buf, count};
  return walfs::direct::Preadv(fd, &iov, 1, offset, 0, real);
}

// read(2) and readv(2): on a descriptor that holds or may take a lease, the range at the
// file offset is reserved atomically and read as a preadv there (AtFileOffset), so `cat`
// and `cp` of a segment copy out of the pool; everything else is the real call.
WALFS_EXPORT ssize_t read(int fd, void* buf, size_t count) {
  auto real = [&]() -> ssize_t { WALFS_CALL_REAL(read, fd, buf, count); };
  if (!g_table.IsTracked(fd)) return real();
  auto* const real_lseek = WALFS_REAL(lseek);
  if (real_lseek == nullptr || !walfs::direct::WantsPositionedRead(g_table, fd)) return real();
  const struct iovec iov = {buf, count};
  return walfs::direct::AtFileOffset(
      fd, count, real_lseek,
      [&](off_t offset) -> ssize_t {
        return walfs::direct::Preadv(fd, &iov, 1, offset, 0, [&]() -> ssize_t {
          WALFS_CALL_REAL(pread, fd, buf, count, offset);
        });
      },
      real);
}

WALFS_EXPORT ssize_t readv(int fd, const struct iovec* iov, int iovcnt) {
  auto real = [&]() -> ssize_t { WALFS_CALL_REAL(readv, fd, iov, iovcnt); };
  if (!g_table.IsTracked(fd)) return real();
  auto* const real_lseek = WALFS_REAL(lseek);
  if (real_lseek == nullptr || iovcnt <= 0 || iovcnt > IOV_MAX ||
      !walfs::direct::WantsPositionedRead(g_table, fd)) {
    return real();
  }
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len > static_cast<size_t>(SSIZE_MAX) - total) return real();
    total += iov[i].iov_len;
  }
  return walfs::direct::AtFileOffset(
      fd, total, real_lseek,
      [&](off_t offset) -> ssize_t {
        return walfs::direct::Preadv(fd, iov, iovcnt, offset, 0, [&]() -> ssize_t {
          WALFS_CALL_REAL(preadv, fd, iov, iovcnt, offset);
        });
      },
      real);
}

// _FORTIFY_SOURCE's checked read: a count larger than the buffer goes to libc.
extern "C" ssize_t __read_chk(int fd, void* buf, size_t count, size_t buflen);
WALFS_EXPORT ssize_t __read_chk(int fd, void* buf, size_t count, size_t buflen) {
  if (count > buflen) WALFS_CALL_REAL(__read_chk, fd, buf, count, buflen);
  return read(fd, buf, count);
}

// write(2) and writev(2): on a descriptor that holds or may take a write lease, the
// range at the file offset is reserved atomically and written as a pwritev there
// (AtFileOffset), so pg_receivewal's streaming writes take the direct path; everything
// else is the real call.
WALFS_EXPORT ssize_t write(int fd, const void* buf, size_t count) {
  auto real = [&]() -> ssize_t { WALFS_CALL_REAL(write, fd, buf, count); };
  if (!g_table.IsTracked(fd)) return real();
  auto* const real_lseek = WALFS_REAL(lseek);
  if (real_lseek == nullptr || !walfs::direct::WantsPositionedWrite(g_table, fd)) return real();
  const struct iovec iov = {const_cast<void*>(buf), count};
  return walfs::direct::AtFileOffset(
      fd, count, real_lseek,
      [&](off_t offset) -> ssize_t {
        return walfs::direct::Pwritev(fd, &iov, 1, offset, 0, [&]() -> ssize_t {
          WALFS_CALL_REAL(pwrite, fd, buf, count, offset);
        });
      },
      real);
}

WALFS_EXPORT ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  auto real = [&]() -> ssize_t { WALFS_CALL_REAL(writev, fd, iov, iovcnt); };
  if (!g_table.IsTracked(fd)) return real();
  auto* const real_lseek = WALFS_REAL(lseek);
  if (real_lseek == nullptr || iovcnt <= 0 || iovcnt > IOV_MAX ||
      !walfs::direct::WantsPositionedWrite(g_table, fd)) {
    return real();
  }
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len > static_cast<size_t>(SSIZE_MAX) - total) return real();
    total += iov[i].iov_len;
  }
  return walfs::direct::AtFileOffset(
      fd, total, real_lseek,
      [&](off_t offset) -> ssize_t {
        return walfs::direct::Pwritev(fd, iov, iovcnt, offset, 0, [&]() -> ssize_t {
          WALFS_CALL_REAL(pwritev, fd, iov, iovcnt, offset);
        });
      },
      real);
}

// lseek: the real call; on a descriptor pending with a file that was empty at open, a
// seek tells the library to look again whether it has data now (NoteSeek).
WALFS_EXPORT off_t lseek(int fd, off_t offset, int whence) {
  auto* real_fn = WALFS_REAL(lseek);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  const off_t r = real_fn(fd, offset, whence);
  if (r >= 0 && g_table.IsTracked(fd)) {
    walfs::direct::NoteSeek(fd, walfs::direct::ProductionLeaseSources(), g_table);
  }
  return r;
}

WALFS_EXPORT off64_t lseek64(int fd, off64_t offset, int whence) {
  auto* real_fn = WALFS_REAL(lseek64);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  const off64_t r = real_fn(fd, offset, whence);
  if (r >= 0 && g_table.IsTracked(fd)) {
    walfs::direct::NoteSeek(fd, walfs::direct::ProductionLeaseSources(), g_table);
  }
  return r;
}

// ---- durability -----------------------------------------------------------------------

// A leased descriptor's direct stores were durable on return, and FUSE writes in pmem
// mode are durable at their reply: there is nothing to sync.
WALFS_EXPORT int fsync(int fd) {
  if (walfs::direct::SyncIsDone(g_table, fd)) return 0;
  WALFS_CALL_REAL(fsync, fd);
}

WALFS_EXPORT int fdatasync(int fd) {
  if (walfs::direct::SyncIsDone(g_table, fd)) return 0;
  WALFS_CALL_REAL(fdatasync, fd);
}

// ---- descriptor lifetime --------------------------------------------------------------

// The library-owned descriptors (owned_fds.h) are not the application's: a close of one
// by number fails as it would have without us (EBADF), and ranges skip them.
WALFS_EXPORT int close(int fd) {
  return g_events.Close(fd, [&]() -> int { WALFS_CALL_REAL(close, fd); });
}

WALFS_EXPORT int close_range(unsigned int first, unsigned int last, int flags) noexcept {
  auto* real_fn = WALFS_REAL(close_range);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return g_events.CloseRange(first, last, flags,
                            [&](unsigned a, unsigned b) { return real_fn(a, b, flags); });
}

WALFS_EXPORT void closefrom(int lowfd) noexcept {
  if (lowfd < 0) lowfd = 0;
  g_table.UntrackRange(static_cast<unsigned>(lowfd), UINT_MAX);
  if (g_owned.NextOwned(static_cast<unsigned>(lowfd), UINT_MAX) < 0) {
    auto* real_fn = WALFS_REAL(closefrom);
    if (real_fn != nullptr) real_fn(lowfd);
    return;
  }
  auto* range_fn = WALFS_REAL(close_range);
  if (range_fn == nullptr) return;
  CloseRangeAroundOwned(g_owned, static_cast<unsigned>(lowfd), UINT_MAX, 0,
                        [&](unsigned a, unsigned b) { return range_fn(a, b, 0); });
}

WALFS_EXPORT int dup2(int oldfd, int newfd) noexcept {
  return g_events.Dup2(oldfd, newfd, [&]() -> int { WALFS_CALL_REAL(dup2, oldfd, newfd); });
}

WALFS_EXPORT int dup3(int oldfd, int newfd, int flags) noexcept {
  return g_events.Dup2(oldfd, newfd,
                       [&]() -> int { WALFS_CALL_REAL(dup3, oldfd, newfd, flags); });
}

WALFS_EXPORT int dup(int oldfd) noexcept {
  auto* real_fn = WALFS_REAL(dup);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return g_events.Duplicated(oldfd, real_fn(oldfd));
}

// The argument is an int or a pointer depending on cmd; a long carries either in the
// same register of the x86-64 and aarch64 calling conventions.
WALFS_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);
  va_end(ap);
  return g_events.Fcntl(fd, cmd, arg, [&]() -> int { WALFS_CALL_REAL(fcntl, fd, cmd, arg); });
}

extern "C" int fcntl64(int fd, int cmd, ...);
WALFS_EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);
  va_end(ap);
  return g_events.Fcntl(fd, cmd, arg, [&]() -> int { WALFS_CALL_REAL(fcntl64, fd, cmd, arg); });
}

// The stream will close fd inside libc (fclose), where we cannot see it.
WALFS_EXPORT FILE* fdopen(int fd, const char* mode) noexcept {
  if (g_table.IsTracked(fd)) g_table.Untrack(fd);
  auto* real_fn = WALFS_REAL(fdopen);
  if (real_fn == nullptr) return errno = ENOSYS, nullptr;
  return real_fn(fd, mode);
}

// The calls a program may make through syscall(2) rather than their wrappers (openat2
// has no glibc wrapper at all): each gets what its wrapper gets (fd_calls.h).
WALFS_EXPORT long syscall(long number, ...) noexcept {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& x : a) x = va_arg(ap, long);
  va_end(ap);
  auto* real_fn = WALFS_REAL(syscall);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return g_events.Syscall(number, a, real_fn);
}

// ---- other descriptor-creating calls: collision checks --------------------------------

WALFS_EXPORT int pipe(int fds[2]) noexcept {
  auto* real_fn = WALFS_REAL(pipe);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  const int r = real_fn(fds);
  if (r == 0) {
    Created(fds[0]);
    Created(fds[1]);
  }
  return r;
}

WALFS_EXPORT int pipe2(int fds[2], int flags) noexcept {
  auto* real_fn = WALFS_REAL(pipe2);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  const int r = real_fn(fds, flags);
  if (r == 0) {
    Created(fds[0]);
    Created(fds[1]);
  }
  return r;
}

WALFS_EXPORT int socket(int domain, int type, int protocol) noexcept {
  auto* real_fn = WALFS_REAL(socket);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Created(real_fn(domain, type, protocol));
}

WALFS_EXPORT int socketpair(int domain, int type, int protocol, int fds[2]) noexcept {
  auto* real_fn = WALFS_REAL(socketpair);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  const int r = real_fn(domain, type, protocol, fds);
  if (r == 0) {
    Created(fds[0]);
    Created(fds[1]);
  }
  return r;
}

WALFS_EXPORT int accept(int fd, struct sockaddr* addr, socklen_t* len) {
  auto* real_fn = WALFS_REAL(accept);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Created(real_fn(fd, addr, len));
}

WALFS_EXPORT int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  auto* real_fn = WALFS_REAL(accept4);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Created(real_fn(fd, addr, len, flags));
}

WALFS_EXPORT int memfd_create(const char* name, unsigned int flags) noexcept {
  auto* real_fn = WALFS_REAL(memfd_create);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Created(real_fn(name, flags));
}

WALFS_EXPORT int eventfd(unsigned int count, int flags) noexcept {
  auto* real_fn = WALFS_REAL(eventfd);
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return Created(real_fn(count, flags));
}
