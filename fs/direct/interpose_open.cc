// The open family of libwalfs-direct.so: every exported entry point that opens a file by
// name, each reporting the descriptor it returned to FdEvents::Opened with the flags the
// call carried. Owns no state; what an open means for the fd table is fd_events.h's.
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs/direct/interpose.h"

namespace walfs::direct {
namespace {

inline mode_t ModeArg(int flags, va_list ap) {
  const bool needs_mode = (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
  return needs_mode ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}

// real_fn(args...), reported as opened with `flags`; ENOSYS when libc lacks it.
template <typename Fn, typename... Args>
inline int OpenWith(Fn* real_fn, int flags, Args... args) {
  if (real_fn == nullptr) return errno = ENOSYS, -1;
  return g_events.Opened(real_fn(args...), flags);
}

}  // namespace
}  // namespace walfs::direct

// X(name, shape, leading parameters, their arguments). Shapes:
//  Variadic  int name(leading..., int flags, ...): the mode is read when flags need one;
//  Checked   int name(leading..., int flags): _FORTIFY_SOURCE's checked opens, used
//            where O_CREAT is absent (no mode);
//  Creat     int name(leading..., mode_t mode): flags O_CREAT | O_WRONLY | O_TRUNC.
// A new entry point of one of these shapes is one line here.
#define WALFS_OPEN_FAMILY(X)                                             \
  X(open, Variadic, (const char* path), (path))                          \
  X(open64, Variadic, (const char* path), (path))                        \
  X(openat, Variadic, (int dirfd, const char* path), (dirfd, path))      \
  X(openat64, Variadic, (int dirfd, const char* path), (dirfd, path))    \
  X(__open_2, Checked, (const char* path), (path))                       \
  X(__open64_2, Checked, (const char* path), (path))                     \
  X(__openat_2, Checked, (int dirfd, const char* path), (dirfd, path))   \
  X(__openat64_2, Checked, (int dirfd, const char* path), (dirfd, path)) \
  X(creat, Creat, (const char* path), (path))                            \
  X(creat64, Creat, (const char* path), (path))

#define WALFS_OPEN_Variadic(name, params, args)                                               \
  WALFS_EXPORT int name(WALFS_UNPAREN params, int flags, ...) {                               \
    va_list ap;                                                                               \
    va_start(ap, flags);                                                                      \
    const mode_t mode = walfs::direct::ModeArg(flags, ap);                                    \
    va_end(ap);                                                                               \
    return walfs::direct::OpenWith(WALFS_REAL(name), flags, WALFS_UNPAREN args, flags, mode); \
  }

// Declared first: libc's headers declare the checked opens only under _FORTIFY_SOURCE,
// which this library is built without (its definitions must not be fortified inlines).
#define WALFS_OPEN_Checked(name, params, args)                                          \
  extern "C" int name(WALFS_UNPAREN params, int flags);                                 \
  WALFS_EXPORT int name(WALFS_UNPAREN params, int flags) {                              \
    return walfs::direct::OpenWith(WALFS_REAL(name), flags, WALFS_UNPAREN args, flags); \
  }

#define WALFS_OPEN_Creat(name, params, args)                                       \
  WALFS_EXPORT int name(WALFS_UNPAREN params, mode_t mode) {                       \
    return walfs::direct::OpenWith(WALFS_REAL(name), O_CREAT | O_WRONLY | O_TRUNC, \
                                   WALFS_UNPAREN args, mode);                      \
  }

#define WALFS_DEFINE_OPEN(name, shape, params, args) WALFS_OPEN_##shape(name, params, args)
WALFS_OPEN_FAMILY(WALFS_DEFINE_OPEN)

// glibc 2.36 has no openat2 wrapper (programs use syscall(SYS_openat2), interpose_fds.cc);
// a libc that has one is interposed here, one that has none gets the system call. Its
// flags are in the struct, read only after the call succeeded.
extern "C" int openat2(int dirfd, const char* path, struct open_how* how, size_t size);
WALFS_EXPORT int openat2(int dirfd, const char* path, struct open_how* how, size_t size) {
  using Fn = int(int, const char*, struct open_how*, size_t);
  static Fn* const next = reinterpret_cast<Fn*>(dlsym(RTLD_NEXT, "openat2"));
  const int fd = next != nullptr
                     ? next(dirfd, path, how, size)
                     : static_cast<int>(WALFS_REAL(syscall)(SYS_openat2, dirfd, path, how, size));
  return walfs::direct::g_events.Opened(fd, fd >= 0 ? static_cast<int>(how->flags) : 0);
}
