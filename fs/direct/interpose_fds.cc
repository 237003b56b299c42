// The descriptor family of libwalfs-direct.so: the exported calls that close, duplicate,
// hand over or create descriptors, and syscall(2). Each reports what it does to the
// descriptor events (fd_events.h) around the real call. Owns no state and decides
// nothing itself: the rules are FdEvents'.
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>

#include "fs/direct/interpose.h"

using walfs::direct::g_events;
using walfs::direct::g_owned;
using walfs::direct::g_table;

// ---- closes ---------------------------------------------------------------------------

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
  walfs::direct::CloseRangeAroundOwned(g_owned, static_cast<unsigned>(lowfd), UINT_MAX, 0,
                                       [&](unsigned a, unsigned b) { return range_fn(a, b, 0); });
}

// ---- duplicates -----------------------------------------------------------------------

// X(name, shape, parameters, their arguments). Shapes:
//  New   int name(int oldfd): a copy at the lowest free number;
//  Onto  int name(int oldfd, int newfd, ...): a copy onto newfd (FdEvents::Dup2).
#define WALFS_DUP_FAMILY(X)                             \
  X(dup, New, (int oldfd), (oldfd))                     \
  X(dup2, Onto, (int oldfd, int newfd), (oldfd, newfd)) \
  X(dup3, Onto, (int oldfd, int newfd, int flags), (oldfd, newfd, flags))

#define WALFS_DUP_New(name, params, args)                                                      \
  WALFS_EXPORT int name(WALFS_UNPAREN params) noexcept {                                       \
    return g_events.Duplicated(oldfd,                                                          \
                               [&]() -> int { WALFS_CALL_REAL(name, WALFS_UNPAREN args); }()); \
  }

#define WALFS_DUP_Onto(name, params, args)                                             \
  WALFS_EXPORT int name(WALFS_UNPAREN params) noexcept {                               \
    return g_events.Dup2(oldfd, newfd,                                                 \
                         [&]() -> int { WALFS_CALL_REAL(name, WALFS_UNPAREN args); }); \
  }

#define WALFS_DEFINE_DUP(name, shape, params, args) WALFS_DUP_##shape(name, params, args)
WALFS_DUP_FAMILY(WALFS_DEFINE_DUP)

// X(name): int name(int fd, int cmd, ...), FdEvents::Fcntl. The argument is an int or a
// pointer depending on cmd; a long carries either in the same register of the x86-64
// and aarch64 calling conventions.
#define WALFS_FCNTL_FAMILY(X) \
  X(fcntl)                    \
  X(fcntl64)

// Declared first: libc's headers declare fcntl64 only for some feature macros.
#define WALFS_DEFINE_FCNTL(name)                                                                \
  extern "C" int name(int fd, int cmd, ...);                                                    \
  WALFS_EXPORT int name(int fd, int cmd, ...) {                                                 \
    va_list ap;                                                                                 \
    va_start(ap, cmd);                                                                          \
    const long arg = va_arg(ap, long);                                                          \
    va_end(ap);                                                                                 \
    return g_events.Fcntl(fd, cmd, arg, [&]() -> int { WALFS_CALL_REAL(name, fd, cmd, arg); }); \
  }
WALFS_FCNTL_FAMILY(WALFS_DEFINE_FCNTL)

// ---- hand-overs and syscall(2) --------------------------------------------------------

// The stream will close fd inside libc (fclose), where we cannot see it.
WALFS_EXPORT FILE* fdopen(int fd, const char* mode) noexcept {
  if (g_table.IsTracked(fd)) g_table.Untrack(fd);
  auto* real_fn = WALFS_REAL(fdopen);
  if (real_fn == nullptr) return errno = ENOSYS, nullptr;
  return real_fn(fd, mode);
}

// The calls a program may make through syscall(2) rather than their wrappers (openat2
// has no glibc wrapper at all): each gets what its wrapper gets (fd_events.h).
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

// X(name, shape, exception specification (libc's declaration's), parameters, their
// arguments). Shapes:
//  One   int name(...) returns the descriptor it created;
//  Pair  int name(..., int fds[2]) returns 0 and created fds[0] and fds[1].
#define WALFS_CREATE_FAMILY(X)                                                             \
  X(pipe, Pair, noexcept, (int fds[2]), (fds))                                             \
  X(pipe2, Pair, noexcept, (int fds[2], int flags), (fds, flags))                          \
  X(socketpair, Pair, noexcept, (int domain, int type, int protocol, int fds[2]),          \
    (domain, type, protocol, fds))                                                         \
  X(socket, One, noexcept, (int domain, int type, int protocol), (domain, type, protocol)) \
  X(accept, One, , (int fd, struct sockaddr* addr, socklen_t* len), (fd, addr, len))       \
  X(accept4, One, , (int fd, struct sockaddr* addr, socklen_t* len, int flags),            \
    (fd, addr, len, flags))                                                                \
  X(memfd_create, One, noexcept, (const char* label, unsigned int flags), (label, flags))  \
  X(eventfd, One, noexcept, (unsigned int count, int flags), (count, flags))

#define WALFS_CREATE_One(name, except, params, args)                                        \
  WALFS_EXPORT int name(WALFS_UNPAREN params) except {                                      \
    return g_events.Created([&]() -> int { WALFS_CALL_REAL(name, WALFS_UNPAREN args); }()); \
  }

#define WALFS_CREATE_Pair(name, except, params, args)  \
  WALFS_EXPORT int name(WALFS_UNPAREN params) except { \
    auto* real_fn = WALFS_REAL(name);                  \
    if (real_fn == nullptr) return errno = ENOSYS, -1; \
    const int r = real_fn(WALFS_UNPAREN args);         \
    if (r == 0) {                                      \
      g_events.Created(fds[0]);                        \
      g_events.Created(fds[1]);                        \
    }                                                  \
    return r;                                          \
  }

#define WALFS_DEFINE_CREATE(name, shape, except, params, args) \
  WALFS_CREATE_##shape(name, except, params, args)
WALFS_CREATE_FAMILY(WALFS_DEFINE_CREATE)
