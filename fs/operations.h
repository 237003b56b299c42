// The libfuse low-level operation table of walfs.
//
// Each callback decodes its request, makes one WalDirectory call (through the Server
// passed as the session's userdata), converts the result (StatusToErrno) and replies.
// Nothing here decides file-system semantics; core does.
#ifndef WALFS_FS_OPERATIONS_H_
#define WALFS_FS_OPERATIONS_H_

#include <fuse_lowlevel.h>

namespace walfs::fs {

// The operations; fuse_session_new's userdata must be a fs::Server*.
const fuse_lowlevel_ops& Operations();

}  // namespace walfs::fs

#endif  // WALFS_FS_OPERATIONS_H_
