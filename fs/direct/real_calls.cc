// The library's own open/close/fcntl, resolved past the interposers.
#include "fs/direct/real_calls.h"

#include <dlfcn.h>
#include <errno.h>

namespace walfs::direct::real {
namespace {

// dlsym once per symbol: the function-local static is initialized under the C++ guard.
template <typename Fn>
Fn* Next(const char* name) {
  return reinterpret_cast<Fn*>(dlsym(RTLD_NEXT, name));
}

}  // namespace

int Open(const char* path, int flags, mode_t mode) {
  using Fn = int(const char*, int, ...);
  static Fn* const fn = Next<Fn>("open");
  if (fn == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return fn(path, flags, mode);
}

int Close(int fd) {
  using Fn = int(int);
  static Fn* const fn = Next<Fn>("close");
  if (fn == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return fn(fd);
}

int Fcntl(int fd, int cmd, void* arg) {
  using Fn = int(int, int, ...);
  static Fn* const fn = Next<Fn>("fcntl");
  if (fn == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return fn(fd, cmd, arg);
}

}  // namespace walfs::direct::real
