// The libc functions the library itself needs, resolved past our own interposers.
//
// Inside libwalfs-direct.so a plain call to open/close/fcntl binds to the exported
// interposer (LD_PRELOAD puts it first), which would re-enter the fd table while its
// lock is held. Everything the library does to its own descriptors (pool files,
// /proc/self/mountinfo) goes through these instead. Each resolves with
// dlsym(RTLD_NEXT) on first use; in a test executable that is libc itself.
// Thread-safe; async-signal-safe once resolved.
#ifndef WALFS_FS_DIRECT_REAL_CALLS_H_
#define WALFS_FS_DIRECT_REAL_CALLS_H_

#include <sys/types.h>

namespace walfs::direct::real {

// Same contracts as the libc calls; -1 with errno ENOSYS if the symbol is missing.
int Open(const char* path, int flags, mode_t mode = 0);
int Close(int fd);
int Fcntl(int fd, int cmd, void* arg);

}  // namespace walfs::direct::real

#endif  // WALFS_FS_DIRECT_REAL_CALLS_H_
