// Whether the memory under a tmpfs pool has 2 MiB pages.
//
// A direct-access client takes one page fault per page of its mapping that it first
// touches, in every process; with 4 KiB pages that is 4096 per 16 MiB segment, each
// expensive under a hypervisor that shadows page tables (docs/direct-access.md, "Page
// size of the pool"). tmpfs gives a file 2 MiB pages only when it is mounted huge=always
// or huge=within_size, and /dev/shm usually is not, so the daemon says so at mount. DAX
// file systems and device-DAX are out of this check's scope: their alignment is the
// namespace's.
#ifndef WALFS_FS_POOL_PAGES_H_
#define WALFS_FS_POOL_PAGES_H_

#include <sys/types.h>

#include <istream>
#include <optional>
#include <string>

namespace walfs::fs {

// The huge= policy of the tmpfs mount whose device is `dev`, read from `mountinfo`
// (the format of /proc/self/mountinfo): "never" when the mount has no huge= option,
// nullopt when no tmpfs mount has that device.
std::optional<std::string> TmpfsHugePolicy(std::istream& mountinfo, dev_t dev);

// For the pool file at `pool_path`: a warning to log when it lies on a tmpfs whose
// policy gives it 4 KiB pages, empty otherwise (or when that cannot be told).
std::string PoolPageSizeWarning(const std::string& pool_path);

}  // namespace walfs::fs

#endif  // WALFS_FS_POOL_PAGES_H_
