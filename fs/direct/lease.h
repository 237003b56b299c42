// Acquiring a lease when a file on a walfs mount is opened for writing.
//
// The seam: LeaseForOpen takes the three things that touch the outside world (fstat, the
// mount check and the ioctl) as LeaseSources, so tests drive every decision without a
// mount; production passes ProductionLeaseSources(). Every failure means "not tracked":
// the descriptor keeps working through FUSE.
#ifndef WALFS_FS_DIRECT_LEASE_H_
#define WALFS_FS_DIRECT_LEASE_H_

#include <sys/stat.h>
#include <sys/types.h>

#include "fs/direct/fd_table.h"
#include "fs/direct/pool_files.h"
#include "fs/lease_protocol.h"

namespace walfs::direct {

// nullptr when `reply` is a well-formed lease, else why not (a static string). The reply
// comes from whatever answered the ioctl, so every field is checked: magic, version,
// mode, flags, run_count in [1, kMaxRuns], block_size a power of two that is a multiple
// of the page size, runs in file order and contiguous from 0, each block-aligned and
// overflow-free, together covering [0, leased_size) with no run wholly past it,
// leased_size > 0, absolute NUL-terminated pool_path, image_path likewise with
// kFlagImage and empty without, a non-zero stamp at an 8-aligned stamp_offset of an
// absolute NUL-terminated stamp_path.
const char* ValidateReply(const lease::Reply& reply);

// Whether open flags ask for write access a lease can serve: O_WRONLY or O_RDWR, not
// O_APPEND (its writes land at EOF whatever the offset), not O_PATH.
bool WantsLease(int flags);

struct LeaseSources {
  int (*fstat)(int fd, struct stat* st);
  bool (*is_walfs)(dev_t dev);
  // 0 with *reply filled, or -errno.
  int (*ioctl_lease)(int fd, lease::Reply* reply);
};

// fstat(2), the process-wide MountCache, and ioctl(fd, lease::kIoctlLease).
const LeaseSources& ProductionLeaseSources();

// Outcome of LeaseForOpen, for the debug log and tests.
enum class LeaseOutcome {
  kGranted,
  kNotWanted,    // flags (read-only, O_APPEND, O_PATH) or fd out of the table's range
  kNotWalfs,     // fstat failed, not a regular file, or not on a walfs mount
  kEmpty,        // a walfs file of size 0: nothing to lease, the daemon is not asked
  kIoctlFailed,  // the daemon refused (EOPNOTSUPP in msync mode, ENODATA when empty...)
  kInvalid,      // the reply failed ValidateReply
  kMapFailed,    // pool identity, lock or mmap failed
  kTableFull,    // no entry memory
};

// Decides whether the freshly opened fd (opened with `flags`) gets a lease and, if so,
// maps it and tracks it in `table`. Never changes errno. Logs the decision when
// WALFS_DIRECT_DEBUG=1. Not async-signal-safe (reads mountinfo with malloc).
LeaseOutcome LeaseForOpen(int fd, int flags, const LeaseSources& sources, FdTable& table,
                          PoolFiles& pools);

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_LEASE_H_
