// Detaching from the terminal without losing errors.
//
// fuse_daemonize() is not used: it forks after the pool is open, which would lose any
// thread core started (fork copies only the calling thread), and its parent exits 0 as
// soon as the child exists, so a later failure would never reach mount(8). Instead the
// daemon forks first; the child opens the pool and mounts while the parent waits, and
// the parent's exit status is the child's verdict.
#ifndef WALFS_FS_DAEMONIZE_H_
#define WALFS_FS_DAEMONIZE_H_

#include "absl/status/status.h"

namespace walfs::fs {

// Forks. The parent never returns: it exits 0 when the child calls DetachDone(), or with
// the child's exit status if the child exits first (errors stay on the shared stderr).
// The child returns OK in a new session. Fails only if fork/pipe fail (in the caller).
absl::Status DetachStart();

// In the child, once mounted: releases the parent, then points stdin/stdout/stderr at
// /dev/null and changes to "/".
void DetachDone();

}  // namespace walfs::fs

#endif  // WALFS_FS_DAEMONIZE_H_
