// What the files of exported wrappers (interpose*.cc) share: the process-wide objects,
// the way a wrapper reaches the next definition (libc's) of its own symbol, and the
// export attribute. Only those files include it: walfs_direct_core and the unit tests
// never see the process-wide objects.
//
// Rules every wrapper keeps: a call on a descriptor we do not track costs at most one
// atomic load on top of libc; anything unexpected falls back to the real call; errno is
// what the real call left (or untouched, for a direct write or read, which succeeds).
#ifndef WALFS_FS_DIRECT_INTERPOSE_H_
#define WALFS_FS_DIRECT_INTERPOSE_H_

#include <dlfcn.h>
#include <errno.h>

#include "fs/direct/fd_events.h"
#include "fs/direct/fd_table.h"
#include "fs/direct/owned_fds.h"
#include "fs/direct/session.h"

#define WALFS_EXPORT extern "C" __attribute__((visibility("default")))

// The next definition of `name` (libc's), resolved on first use; nullptr when libc lacks
// it.
#define WALFS_REAL(name)                                              \
  ([]() {                                                             \
    static decltype(&::name) const fn =                               \
        reinterpret_cast<decltype(&::name)>(dlsym(RTLD_NEXT, #name)); \
    return fn;                                                        \
  }())

// Returns what the real `name` returns for the arguments; -1 with ENOSYS when libc lacks
// it.
#define WALFS_CALL_REAL(name, ...)          \
  do {                                      \
    auto* const real_fn = WALFS_REAL(name); \
    if (real_fn == nullptr) {               \
      errno = ENOSYS;                       \
      return -1;                            \
    }                                       \
    return real_fn(__VA_ARGS__);            \
  } while (0)

// A parenthesized list of a table row, spliced into a parameter or argument list.
#define WALFS_UNPAREN(...) __VA_ARGS__

namespace walfs::direct {

// Defined in interpose.cc, constant-initialized (no constructor runs before a wrapper
// can be called). Hidden: the wrappers reach them without the GOT.
#define WALFS_HIDDEN __attribute__((visibility("hidden")))
extern constinit OwnedFds g_owned WALFS_HIDDEN;
extern constinit FdTable g_table WALFS_HIDDEN;
extern constinit Sessions g_sessions WALFS_HIDDEN;
extern constinit FdEvents g_events WALFS_HIDDEN;
#undef WALFS_HIDDEN

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_INTERPOSE_H_
