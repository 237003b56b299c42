// The sd_notify(3) protocol, without libsystemd: one datagram to $NOTIFY_SOCKET.
#ifndef WALFS_FS_SD_NOTIFY_H_
#define WALFS_FS_SD_NOTIFY_H_

#include <string_view>

#include "absl/status/status.h"

namespace walfs::fs {

// Sends `state` (e.g. "READY=1\nSTATUS=...") to the unix datagram socket named by
// $NOTIFY_SOCKET: a path, or an abstract-namespace name written with a leading '@'.
// OK without sending when the variable is unset (not started by a service manager).
absl::Status SdNotify(std::string_view state);

}  // namespace walfs::fs

#endif  // WALFS_FS_SD_NOTIFY_H_
